//! A client of one wire format served by a provider of another: the request
//! translated on the way out, the answer (whole, streamed, or an error) on
//! the way back, on real sockets against simulated providers that speak
//! only their own format.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{json, Value};
use switchyard_core::history::CountTable;
use switchyard_sim::{Fault, Script, SimProvider};
use switchyard_tests::{http, keys_for, request_id, ConfigText, TestGateway};

fn messages(model: &str, stream: bool) -> Value {
    json!({
        "model": model, "max_tokens": 64, "stream": stream,
        "system": [{ "type": "text", "text": "Be brief." }],
        "messages": [{ "role": "user", "content": [{ "type": "text", "text": "hi" }] }],
    })
}

fn chat(model: &str, stream: bool) -> Value {
    json!({ "model": model, "stream": stream, "messages": [{ "role": "user", "content": "hi" }] })
}

/// The text of a Messages answer, whole or streamed.
fn anthropic_text(answer: &str) -> String {
    if let Ok(body) = serde_json::from_str::<Value>(answer) {
        return body["content"].as_array().into_iter().flatten().filter_map(|b| b["text"].as_str()).collect();
    }
    events(answer)
        .iter()
        .filter_map(|(_, d)| serde_json::from_str::<Value>(d).ok())
        .filter_map(|e| e["delta"]["text"].as_str().map(str::to_string))
        .collect()
}

/// The `data:` payloads of an event stream, with their event names.
fn events(text: &str) -> Vec<(Option<String>, String)> {
    text.split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| {
            let name = e.lines().find_map(|l| l.strip_prefix("event: ")).map(str::to_string);
            let data = e.lines().filter_map(|l| l.strip_prefix("data: ")).collect::<Vec<_>>().join("\n");
            (name, data)
        })
        .collect()
}

#[tokio::test]
async fn an_anthropic_client_is_answered_by_an_openai_kind_provider() {
    let oa = SimProvider::start("oa", Script::ok()).await.unwrap();
    let config = ConfigText::new().chat_only(&oa, &["claude-sonnet-4-5=gpt-4.1"]);
    let gw = TestGateway::start(config.build(), keys_for(&["oa"])).await;

    let r = http()
        .post(gw.url("/v1/messages"))
        .header("anthropic-version", "2023-06-01")
        .header("anthropic-beta", "interleaved-thinking-2025-05-14")
        .json(&messages("claude-sonnet-4-5", false))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["type"], "message", "{body}");
    assert_eq!(body["role"], "assistant");
    assert_eq!(body["model"], "claude-sonnet-4-5", "the client's model, not the provider's");
    assert!(body["content"][0]["text"].as_str().unwrap().contains("Hello from oa"), "{body}");
    assert_eq!(body["stop_reason"], "end_turn");
    assert!(body["usage"]["output_tokens"].as_u64().unwrap() > 0, "{body}");

    let seen = oa.requests();
    assert_eq!(seen[0].path, "/v1/chat/completions");
    let sent: Value = serde_json::from_slice(&seen[0].body).unwrap();
    assert_eq!(sent["model"], "gpt-4.1");
    assert_eq!(sent["messages"][0]["role"], "system");
    for header in ["anthropic-version", "anthropic-beta", "x-api-key"] {
        assert!(!seen[0].headers.contains_key(header), "{header} reached an openai-kind provider");
    }

    gw.recorded(1).await;
    let listed = gw.admin("/admin/requests").await;
    let request = &listed["requests"][0];
    assert_eq!(request["outcome"], "ok");
    assert!(request["usage"]["output_tokens"].as_u64().unwrap() > 0, "usage from the provider's own numbers");
}

#[tokio::test]
async fn a_translated_stream_is_the_client_s_own_event_sequence() {
    let oa = SimProvider::start("oa", Script::ok()).await.unwrap();
    let an = SimProvider::start("an", Script::ok()).await.unwrap();
    let config = ConfigText::new().chat_only(&oa, &["claude-x"]).provider(&an, "anthropic", &["gpt-x"]);
    let gw = TestGateway::start(config.build(), keys_for(&["oa", "an"])).await;

    let r = gw.post("/v1/messages", &messages("claude-x", true)).await;
    assert_eq!(r.status(), 200);
    assert!(r.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    let text = r.text().await.unwrap();
    let names: Vec<String> = events(&text).into_iter().filter_map(|(n, _)| n).collect();
    assert_eq!(names.first().map(String::as_str), Some("message_start"), "{text}");
    assert_eq!(names.last().map(String::as_str), Some("message_stop"), "{text}");
    assert_eq!(names.iter().filter(|n| *n == "message_delta").count(), 1, "one terminal delta: {text}");
    let said: String = events(&text)
        .iter()
        .filter_map(|(_, d)| serde_json::from_str::<Value>(d).ok())
        .filter_map(|e| e["delta"]["text"].as_str().map(str::to_string))
        .collect();
    assert!(said.contains("Hello from oa"), "{said:?}");

    let r = gw.post("/v1/chat/completions", &chat("gpt-x", true)).await;
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    let data: Vec<String> = events(&text).into_iter().map(|(_, d)| d).collect();
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"), "{text}");
    let chunks: Vec<Value> = data.iter().filter_map(|d| serde_json::from_str(d).ok()).collect();
    assert!(chunks.iter().all(|c| c["object"] == "chat.completion.chunk"), "{text}");
    let said: String = chunks.iter().filter_map(|c| c["choices"][0]["delta"]["content"].as_str()).collect();
    assert!(said.contains("Hello from an"), "{said:?}");
    assert_eq!(chunks.iter().filter(|c| !c["choices"][0]["finish_reason"].is_null()).count(), 1, "{text}");
    assert_eq!(an.requests()[0].path, "/v1/messages");

    gw.recorded(2).await;
    assert_eq!(gw.store.count(CountTable::Attempts).await.unwrap(), 2);
    for request in gw.admin("/admin/requests").await["requests"].as_array().unwrap() {
        let output = request["usage"]["output_tokens"].as_u64().unwrap_or(0);
        assert!(output > 0, "a translated stream's usage is read from the provider's own events: {request}");
    }
}

#[tokio::test]
async fn a_tool_call_round_trip_crosses_formats_streamed_and_not() {
    let oa = SimProvider::start("oa", Script::agent()).await.unwrap();
    let config = ConfigText::new().chat_only(&oa, &["claude-x"]);
    let gw = TestGateway::start(config.build(), keys_for(&["oa"])).await;
    let tools = json!([{ "name": "Bash", "description": "Run a command",
        "input_schema": { "type": "object", "properties": { "command": { "type": "string" } }, "required": ["command"] } }]);
    for stream in [false, true] {
        let mut ask = messages("claude-x", stream);
        ask["tools"] = tools.clone();
        let text = gw.post("/v1/messages", &ask).await.text().await.unwrap();
        let (id, name, input) = if stream {
            let evs: Vec<Value> = events(&text).iter().filter_map(|(_, d)| serde_json::from_str(d).ok()).collect();
            let start = evs.iter().find(|e| e["content_block"]["type"] == "tool_use").expect(&text);
            let args: String = evs.iter().filter_map(|e| e["delta"]["partial_json"].as_str()).collect();
            let stop = evs.iter().find(|e| e["type"] == "message_delta").unwrap();
            assert_eq!(stop["delta"]["stop_reason"], "tool_use", "{text}");
            let input: Value = serde_json::from_str(&args).expect("the argument deltas join into JSON");
            (start["content_block"]["id"].clone(), start["content_block"]["name"].clone(), input)
        } else {
            let body: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(body["stop_reason"], "tool_use", "{body}");
            let call = body["content"].as_array().unwrap().iter().find(|b| b["type"] == "tool_use").unwrap().clone();
            (call["id"].clone(), call["name"].clone(), call["input"].clone())
        };
        assert_eq!(name, "Bash");
        assert!(input["command"].is_string(), "{input}");
        let id = id.as_str().unwrap().to_string();
        assert!(id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'), "a valid Anthropic id: {id}");
        // The client runs the tool and sends its result back.
        let mut next = ask.clone();
        next["messages"] = json!([
            { "role": "user", "content": "list files" },
            { "role": "assistant", "content": [{ "type": "tool_use", "id": id, "name": "Bash", "input": input }] },
            { "role": "user", "content": [{ "type": "tool_result", "tool_use_id": id, "content": "README.md" }] },
        ]);
        let text = gw.post("/v1/messages", &next).await.text().await.unwrap();
        assert!(anthropic_text(&text).contains("README.md"), "the provider answered from the tool's result: {text}");
        let sent: Value = oa.requests().last().unwrap().json();
        let tool = sent["messages"].as_array().unwrap().iter().find(|m| m["role"] == "tool").expect("a tool message");
        assert_eq!(tool["content"], "README.md");
    }
}

#[tokio::test]
async fn a_gemini_client_is_served_by_an_openai_kind_provider() {
    let oa = SimProvider::start("oa", Script::ok()).await.unwrap();
    let config = ConfigText::new().chat_only(&oa, &["gemini-2.5-pro=gpt-4.1"]);
    let gw = TestGateway::start(config.build(), keys_for(&["oa"])).await;
    let ask = json!({ "contents": [{ "role": "user", "parts": [{ "text": "hi" }] }],
        "systemInstruction": { "parts": [{ "text": "Be brief." }] } });
    let r = http()
        .post(gw.url("/v1beta/models/gemini-2.5-pro:generateContent"))
        .header("x-goog-api-key", "client-key")
        .json(&ask)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    let said = body["candidates"][0]["content"]["parts"][0]["text"].as_str().unwrap();
    assert!(said.contains("Hello from oa"), "{body}");
    assert_eq!(body["candidates"][0]["finishReason"], "STOP");
    assert!(body["usageMetadata"]["totalTokenCount"].as_u64().unwrap() > 0, "{body}");
    let sent: Value = oa.requests()[0].json();
    assert_eq!((sent["model"].as_str(), sent["stream"].as_bool()), (Some("gpt-4.1"), None));

    let r = gw.post("/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", &ask).await;
    let text = r.text().await.unwrap();
    let chunks: Vec<Value> = events(&text).iter().filter_map(|(_, d)| serde_json::from_str(d).ok()).collect();
    let said: String = chunks
        .iter()
        .filter_map(|c| c["candidates"][0]["content"]["parts"][0]["text"].as_str().map(str::to_string))
        .collect();
    assert!(said.contains("Hello from oa"), "{text}");
    assert_eq!(chunks.last().unwrap()["candidates"][0]["finishReason"], "STOP", "{text}");
    let sent: Value = oa.requests()[1].json();
    assert_eq!(sent["stream"], true);
}

#[tokio::test]
async fn a_chain_may_mix_formats_and_falls_back_across_them() {
    let an = SimProvider::start("an", Script::always(Fault::status(529))).await.unwrap();
    let oa = SimProvider::start("oa", Script::ok()).await.unwrap();
    let config = ConfigText::new()
        .provider(&an, "anthropic", &["claude-sonnet-4-5"])
        .chat_only(&oa, &["claude-sonnet-4-5=gpt-4.1"])
        .route("claude-sonnet-4-5", &["an", "oa"]);
    let gw = TestGateway::start(config.build(), keys_for(&["an", "oa"])).await;

    for stream in [false, true] {
        let r = gw.post("/v1/messages", &messages("claude-sonnet-4-5", stream)).await;
        assert_eq!(r.status(), 200);
        assert_eq!(r.headers()["x-switchyard-provider"], "oa");
        let text = r.text().await.unwrap();
        assert!(anthropic_text(&text).contains("Hello from oa"), "{text}");
    }
    gw.recorded(2).await;
    let listed = gw.admin("/admin/requests").await;
    let id = listed["requests"][0]["id"].as_str().unwrap();
    let detail = gw.admin(&format!("/admin/requests/{id}")).await;
    let attempts = detail["attempts"].as_array().unwrap();
    let path: Vec<(&str, i64)> =
        attempts.iter().map(|a| (a["provider"].as_str().unwrap(), a["status"].as_i64().unwrap_or(0))).collect();
    assert_eq!(path.first(), Some(&("an", 529)));
    assert_eq!(path.last(), Some(&("oa", 200)), "{path:?}");
    assert_eq!(detail["fallback"], true);
    let last = attempts.last().unwrap()["seq"].clone();
    assert_eq!(
        detail["translations"],
        json!([{ "seq": last, "client": "messages", "provider": "chat" }]),
        "history says which attempt was translated, and how: {detail}"
    );
}

#[tokio::test]
async fn a_provider_error_comes_back_in_the_client_s_error_shape() {
    let oa = SimProvider::start("oa", Script::always(Fault::status(400))).await.unwrap();
    let config = ConfigText::new().chat_only(&oa, &["claude-x"]);
    let gw = TestGateway::start(config.build(), keys_for(&["oa"])).await;
    let r = gw.post("/v1/messages", &messages("claude-x", false)).await;
    assert_eq!(r.status(), 400);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["type"], "error", "an Anthropic error body: {body}");
    assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");
}

#[tokio::test]
async fn codex_s_responses_reach_a_chat_only_provider_and_come_back_as_responses() {
    let oa = SimProvider::start("oa", Script::ok()).await.unwrap();
    let config = ConfigText::new().chat_only(&oa, &["gpt-5=deepseek-chat"]);
    let gw = TestGateway::start(config.build(), keys_for(&["oa"])).await;
    let body = json!({
        "model": "gpt-5", "instructions": "Be brief.", "store": false,
        "input": [{ "type": "message", "role": "user", "content": [{ "type": "input_text", "text": "hi" }] }],
    });
    let r = gw.post("/v1/responses", &body).await;
    assert_eq!(r.status(), 200);
    let answer: Value = r.json().await.unwrap();
    assert_eq!(answer["object"], "response", "{answer}");
    assert_eq!(answer["status"], "completed");
    assert_eq!(answer["model"], "gpt-5");
    let text = answer["output"].as_array().unwrap().iter().find(|o| o["type"] == "message").unwrap();
    assert!(text["content"][0]["text"].as_str().unwrap().contains("Hello from oa"), "{answer}");
    assert_eq!(oa.requests()[0].path, "/v1/chat/completions");

    let mut stream = body.clone();
    stream["stream"] = json!(true);
    let text = gw.post("/v1/responses", &stream).await.text().await.unwrap();
    let names: Vec<String> = events(&text).into_iter().filter_map(|(n, _)| n).collect();
    assert_eq!(names.first().map(String::as_str), Some("response.created"), "{text}");
    assert_eq!(names.last().map(String::as_str), Some("response.completed"), "{text}");
}

#[tokio::test]
async fn a_request_that_cannot_be_translated_skips_that_provider_and_says_why() {
    let oa = SimProvider::start("oa", Script::ok()).await.unwrap();
    let config = ConfigText::new().chat_only(&oa, &["gpt-5"]);
    let gw = TestGateway::start(config.build(), keys_for(&["oa"])).await;
    let body = json!({ "model": "gpt-5", "previous_response_id": "resp_1", "input": "and then?" });
    let r = gw.post("/v1/responses", &body).await;
    let id = request_id(&r);
    // No provider could ever take it: the client's to fix, not a 503 to retry.
    assert_eq!(r.status(), 400);
    let error: Value = r.json().await.unwrap();
    assert_eq!(error["error"]["type"], "invalid_request_error", "{error}");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("`previous_response_id`"), "names the field: {message}");
    assert_eq!(oa.calls(), 0, "nothing half-translated was sent");
    // On record: the provider as an attempt skipped, saying which field and
    // why, with no call and no time; the request refused, as before.
    let detail = detail_of(&gw, &id, 1).await;
    assert_eq!(detail["outcome"], "rejected", "{detail}");
    let attempts = detail["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 1, "{detail}");
    assert_skipped(&attempts[0], "oa", "`previous_response_id`");
}

#[tokio::test]
async fn what_a_translation_left_out_is_on_the_attempt_and_what_is_new_is_named() {
    let oa = SimProvider::start("oa", Script::ok()).await.unwrap();
    let config = ConfigText::new().chat_only(&oa, &["claude-sonnet-4-5=gpt-4.1"]);
    let gw = TestGateway::start(config.build(), keys_for(&["oa"])).await;
    let mut body = messages("claude-sonnet-4-5", false);
    // A block type no format had when this was written, and one with text.
    body["messages"][0]["content"] = json!([
        { "type": "text", "text": "hi" },
        { "type": "hologram", "frames": 3 },
        { "type": "annotation", "text": "a highlighted line" },
    ]);
    body["top_k"] = json!(5);
    let r = gw.post("/v1/messages", &body).await;
    assert_eq!(r.status(), 200, "decided, not refused");
    let id = request_id(&r);
    let sent = oa.requests()[0].json().to_string();
    assert!(sent.contains("a highlighted line") && !sent.contains("hologram"), "{sent}");

    let detail = detail_of(&gw, &id, 1).await;
    let dropped = &detail["dropped"];
    assert_eq!(dropped.as_array().unwrap().len(), 1, "{detail}");
    assert_eq!(dropped[0]["seq"], detail["attempts"][0]["seq"]);
    let fields: Vec<&str> = dropped[0]["fields"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
    assert!(fields.contains(&"top_k: the format has no such parameter"), "{fields:?}");
    assert!(fields.contains(&"messages[0].content[1]: unmapped: a block of type `hologram`, left out"), "{fields:?}");
    assert!(
        fields.contains(&"messages[0].content[2]: unmapped: a block of type `annotation`, carried as its text"),
        "{fields:?}"
    );
}

/// The detail of request `id` from the history, once `on_record` requests are.
async fn detail_of(gw: &TestGateway, id: &str, on_record: i64) -> Value {
    gw.recorded(on_record).await;
    gw.admin(&format!("/admin/requests/{id}")).await
}

/// The attempts of a request detail that called their provider: provider,
/// status and why each started.
fn called(detail: &Value) -> Vec<(&str, i64, &str)> {
    let attempts = detail["attempts"].as_array().unwrap().iter().filter(|a| a["outcome"] != "skipped");
    attempts
        .map(|a| (a["provider"].as_str().unwrap(), a["status"].as_i64().unwrap(), a["reason"].as_str().unwrap()))
        .collect()
}

/// An attempt row of a provider passed over without a call, whose reason
/// starts with `why`.
fn assert_skipped(a: &Value, provider: &str, why: &str) {
    assert_eq!((a["provider"].as_str(), a["outcome"].as_str()), (Some(provider), Some("skipped")), "{a}");
    let error = a["error"].as_str().unwrap_or_default();
    assert!(error.starts_with(why), "says which field and why: {a}");
    assert_eq!(a["duration_ms"], 0.0, "{a}");
    assert!(a["status"].is_null() && a["ttfb_ms"].is_null() && a["key_label"].is_null(), "never called: {a}");
}

#[tokio::test]
async fn reasoning_another_family_signed_never_reaches_anthropic() {
    let an = SimProvider::start("an", Script::ok()).await.unwrap();
    let config = ConfigText::new().provider(&an, "anthropic", &["claude-x"]);
    let gw = TestGateway::start(config.build(), keys_for(&["an"])).await;
    // A history an OpenAI-kind provider once answered: its thinking block
    // carries the gateway's envelope of another family's state.
    let mut ask = messages("claude-x", false);
    ask["messages"] = json!([
        { "role": "user", "content": "hi" },
        { "role": "assistant", "content": [
            { "type": "thinking", "thinking": "hm", "signature": "sy1.oai.e30" },
            { "type": "text", "text": "hello" },
        ] },
        { "role": "user", "content": "and?" },
    ]);
    let r = gw.post("/v1/messages", &ask).await;
    assert_eq!(r.status(), 200);
    let sent = String::from_utf8(an.requests()[0].body.to_vec()).unwrap();
    assert!(!sent.contains("sy1."), "no envelope reaches Anthropic: {sent}");
    assert!(sent.contains("\"hello\""), "the rest of the history is kept: {sent}");
    // A body without envelopes crosses byte for byte.
    let plain = messages("claude-x", false);
    gw.post("/v1/messages", &plain).await.bytes().await.unwrap();
    assert_eq!(an.requests()[1].body, serde_json::to_vec(&plain).unwrap());
}

#[tokio::test]
async fn count_tokens_without_an_anthropic_provider_is_a_labelled_local_estimate() {
    let oa = SimProvider::start("oa", Script::ok()).await.unwrap();
    let config = ConfigText::new().chat_only(&oa, &["claude-x"]);
    let gw = TestGateway::start(config.build(), keys_for(&["oa"])).await;
    let mut ask = messages("claude-x", false);
    ask.as_object_mut().unwrap().remove("max_tokens");
    ask["messages"][0]["content"][0]["text"] = json!("word ".repeat(400));
    let r = http().post(gw.url("/v1/messages/count_tokens?beta=true")).json(&ask).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["x-switchyard-token-count"], "estimate");
    let counted: Value = r.json().await.unwrap();
    let n = counted["input_tokens"].as_u64().unwrap();
    assert!((300..3000).contains(&n), "about 400 words: {n}");
    assert_eq!(oa.calls(), 0, "no provider was asked");
    let gemini = json!({ "contents": [{ "role": "user", "parts": [{ "text": "word ".repeat(400) }] }] });
    let r = gw.post("/v1beta/models/claude-x:countTokens", &gemini).await;
    assert_eq!(r.status(), 200);
    let counted: Value = r.json().await.unwrap();
    assert!(counted["totalTokens"].as_u64().unwrap() > 300, "{counted}");
}

#[tokio::test]
async fn gemini_kind_providers_serve_gemini_clients_as_they_are_and_others_translated() {
    let gm = SimProvider::start("gm", Script::ok()).await.unwrap();
    let config = ConfigText::new().provider_at("gm", &gm.gemini_base_url(), "gemini", &["gemini-x=gemini-2.5-flash"]);
    let gw = TestGateway::start(config.build(), keys_for(&["gm"])).await;
    let ask = json!({ "contents": [{ "role": "user", "parts": [{ "text": "hi" }] }] });
    let r = http()
        .post(gw.url("/v1beta/models/gemini-x:streamGenerateContent?alt=sse&key=client-key"))
        .json(&ask)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    assert!(text.contains("candidates"), "{text}");
    let seen = &gm.requests()[0];
    assert_eq!(seen.path, "/v1beta/models/gemini-2.5-flash:streamGenerateContent", "the provider's own model");
    assert_eq!(seen.query.as_deref(), Some("alt=sse"), "the client's key is not forwarded in the query");
    assert_eq!(seen.headers["x-goog-api-key"], "sk-gm", "the provider's key, in its header");
    assert_eq!(seen.body, serde_json::to_vec(&ask).unwrap(), "passthrough: byte for byte");
    gw.recorded(1).await;
    let listed = gw.admin("/admin/requests").await;
    assert!(listed["requests"][0]["usage"]["output_tokens"].as_u64().unwrap() > 0, "usageMetadata read: {listed}");

    // A Chat client, translated to Gemini.
    let r = gw.post("/v1/chat/completions", &chat("gemini-x", false)).await;
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert!(body["choices"][0]["message"]["content"].as_str().unwrap().contains("Hello from gm"), "{body}");
    assert_eq!(gm.requests()[1].path, "/v1beta/models/gemini-2.5-flash:generateContent");
}

/// A Messages history whose thinking block carries a signature Anthropic
/// will not take (truncated, or from another account).
fn with_stale_thinking() -> Value {
    let mut ask = messages("claude-x", false);
    ask["max_tokens"] = json!(2048);
    ask["thinking"] = json!({ "type": "enabled", "budget_tokens": 1024 });
    ask["messages"] = json!([
        { "role": "user", "content": "hi" },
        { "role": "assistant", "content": [
            { "type": "thinking", "thinking": "hm", "signature": "EqQBCkgIBxABGAIiQL3Q" },
            { "type": "text", "text": "hello" },
        ] },
        { "role": "user", "content": "and?" },
    ]);
    ask
}

const BAD_SIGNATURE: &str = "messages.1.content.0: Invalid `signature` in `thinking` block";

/// The types of the content blocks of every message in a Messages body.
fn block_types(body: &Value) -> Vec<String> {
    let blocks = body["messages"].as_array().unwrap().iter().filter_map(|m| m["content"].as_array()).flatten();
    blocks.filter_map(|b| b["type"].as_str().map(str::to_string)).collect()
}

#[tokio::test]
async fn a_rejected_thinking_signature_is_retried_once_without_any_thinking() {
    let an = SimProvider::start("an", Script::ok().then_once(Fault::saying(400, BAD_SIGNATURE))).await.unwrap();
    let config = ConfigText::new().provider(&an, "anthropic", &["claude-x"]);
    let gw = TestGateway::start(config.build(), keys_for(&["an"])).await;
    let r = gw.post("/v1/messages", &with_stale_thinking()).await;
    assert_eq!(r.status(), 200);
    assert!(anthropic_text(&r.text().await.unwrap()).contains("Hello from an"));

    let seen = an.requests();
    assert_eq!(seen.len(), 2, "exactly one retry");
    assert_eq!(
        seen[0].body,
        serde_json::to_vec(&with_stale_thinking()).unwrap(),
        "the first went as the client sent it"
    );
    let second = seen[1].json();
    assert!(!block_types(&second).iter().any(|t| t.contains("thinking")), "no thinking block: {second}");
    assert_eq!(second["thinking"], json!({ "type": "disabled" }));
    assert_eq!(second["messages"][1]["content"], json!([{ "type": "text", "text": "hello" }]));
    assert_eq!(seen[1].headers["x-api-key"], "sk-an", "the same key");

    gw.recorded(1).await;
    let id = gw.admin("/admin/requests").await["requests"][0]["id"].as_str().unwrap().to_string();
    let detail = gw.admin(&format!("/admin/requests/{id}")).await;
    assert_eq!(called(&detail), [("an", 400, "first"), ("an", 200, "retry")], "both attempts on record");
}

/// A Codex-style Responses history whose reasoning item carries, in its
/// encrypted slot, the envelope of an Anthropic thinking block an earlier
/// translated turn handed out; its signature has gone stale since.
fn responses_with_stale_thinking() -> Value {
    use base64::Engine as _;
    // `sy1.<origin>.<base64url(json)>`, written out as the client holds it.
    let sealed = json!({ "text": "hm", "value": "stale-signature" }).to_string();
    let envelope = format!("sy1.anth.{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sealed));
    json!({
        "model": "claude-x", "max_output_tokens": 4096, "store": false,
        "reasoning": { "effort": "low" },
        "input": [
            { "type": "message", "role": "user", "content": [{ "type": "input_text", "text": "hi" }] },
            { "type": "reasoning", "id": "rs_1", "summary": [{ "type": "summary_text", "text": "hm" }],
              "encrypted_content": envelope },
            { "type": "message", "role": "assistant", "content": [{ "type": "output_text", "text": "hello" }] },
            { "type": "message", "role": "user", "content": [{ "type": "input_text", "text": "and?" }] },
        ],
    })
}

#[tokio::test]
async fn a_rejected_signature_in_a_translated_body_is_retried_once_without_any_thinking() {
    let an = SimProvider::start("an", Script::ok().then_once(Fault::saying(400, BAD_SIGNATURE))).await.unwrap();
    let config = ConfigText::new().provider(&an, "anthropic", &["claude-x"]);
    let gw = TestGateway::start(config.build(), keys_for(&["an"])).await;
    let r = gw.post("/v1/responses", &responses_with_stale_thinking()).await;
    let id = request_id(&r);
    assert_eq!(r.status(), 200);
    let answer: Value = r.json().await.unwrap();
    assert_eq!(answer["object"], "response", "answered in the client's format: {answer}");
    assert!(answer.to_string().contains("Hello from an"), "{answer}");

    let seen = an.requests();
    assert_eq!(seen.len(), 2, "exactly one retry");
    assert!(seen.iter().all(|s| s.path == "/v1/messages"), "both translated to Messages");
    let first = seen[0].json();
    let thinking = &first["messages"][1]["content"][0];
    assert_eq!(
        (thinking["type"].as_str(), thinking["signature"].as_str()),
        (Some("thinking"), Some("stale-signature")),
        "the envelope was opened for its own family: {first}"
    );
    let second = seen[1].json();
    assert!(!block_types(&second).iter().any(|t| t.contains("thinking")), "no thinking block: {second}");
    assert!(!second.to_string().contains("stale-signature"), "{second}");
    assert_eq!(second["thinking"], json!({ "type": "disabled" }), "{second}");
    assert_eq!(second["messages"][1]["content"], json!([{ "type": "text", "text": "hello" }]), "{second}");
    assert_eq!(second["messages"][2]["content"][0]["text"], "and?", "the rest as translated: {second}");
    assert_eq!(seen[1].headers["x-api-key"], "sk-an", "the same key");

    let detail = detail_of(&gw, &id, 1).await;
    assert_eq!(called(&detail), [("an", 400, "first"), ("an", 200, "retry")], "both attempts on record");
    let wires: Vec<String> = detail["translations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| format!("{}>{}", t["client"].as_str().unwrap(), t["provider"].as_str().unwrap()))
        .collect();
    assert_eq!(wires, ["responses>messages", "responses>messages"], "{detail}");
}

#[tokio::test]
async fn a_second_rejected_signature_is_the_client_s_and_other_400s_are_not_retried() {
    let an = SimProvider::start("an", Script::always(Fault::saying(400, BAD_SIGNATURE))).await.unwrap();
    let config = ConfigText::new().provider(&an, "anthropic", &["claude-x"]);
    let gw = TestGateway::start(config.build(), keys_for(&["an"])).await;
    let r = gw.post("/v1/messages", &with_stale_thinking()).await;
    assert_eq!(r.status(), 400);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["message"], BAD_SIGNATURE, "the provider's own error: {body}");
    assert_eq!(an.calls(), 2, "one repair, not a loop");

    // A body without thinking has nothing to strip: the 400 is relayed at once.
    let plain = messages("claude-x", false);
    assert_eq!(gw.post("/v1/messages", &plain).await.status(), 400);
    assert_eq!(an.calls(), 3);
    // Another client error is not mended.
    an.set_script(Script::always(Fault::saying(400, "max_tokens: Field required")));
    assert_eq!(gw.post("/v1/messages", &with_stale_thinking()).await.status(), 400);
    assert_eq!(an.calls(), 4);
}

#[tokio::test]
async fn a_provider_that_rejects_stream_options_is_asked_again_without_and_remembered() {
    let rejects = "Unrecognized request argument supplied: stream_options";
    let oa = SimProvider::start("oa", Script::ok().then_once(Fault::saying(400, rejects))).await.unwrap();
    let config = ConfigText::new().chat_only(&oa, &["gpt-x", "claude-x"]);
    let gw = TestGateway::start(config.build(), keys_for(&["oa"])).await;

    let r = gw.post("/v1/chat/completions", &chat("gpt-x", true)).await;
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    assert!(text.contains("chat.completion.chunk") && text.trim_end().ends_with("data: [DONE]"), "{text}");
    let seen = oa.requests();
    assert_eq!(seen.len(), 2);
    assert!(seen[0].json().get("stream_options").is_some(), "usage is asked for at first");
    assert!(seen[1].json().get("stream_options").is_none(), "the retry goes without");

    // Remembered: the next requests, native and translated, go without at once.
    assert_eq!(gw.post("/v1/chat/completions", &chat("gpt-x", true)).await.status(), 200);
    assert_eq!(gw.post("/v1/messages", &messages("claude-x", true)).await.status(), 200);
    let seen = oa.requests();
    assert_eq!(seen.len(), 4, "no more probing");
    for request in &seen[2..] {
        assert!(request.json().get("stream_options").is_none(), "{:?}", request.json());
    }
    gw.recorded(3).await;
    assert_eq!(gw.store.count(CountTable::Attempts).await.unwrap(), 4, "the first request's two attempts on record");
}

#[tokio::test]
async fn stream_options_follow_the_profile() {
    let no = SimProvider::start("no", Script::ok()).await.unwrap();
    let yes =
        SimProvider::start("yes", Script::always(Fault::saying(422, "stream_options: extra fields not permitted")))
            .await
            .unwrap();
    let config = ConfigText::new()
        .chat_only(&no, &["gpt-no"])
        .raw("profile = { stream_options = \"no\" }")
        .chat_only(&yes, &["gpt-yes"])
        .raw("profile = { stream_options = \"yes\" }");
    let gw = TestGateway::start(config.build(), keys_for(&["no", "yes"])).await;
    assert_eq!(gw.post("/v1/chat/completions", &chat("gpt-no", true)).await.status(), 200);
    assert!(no.requests()[0].json().get("stream_options").is_none(), "never sent");
    // Said to take it: a rejection is not probed around.
    assert_eq!(gw.post("/v1/chat/completions", &chat("gpt-yes", true)).await.status(), 422);
    assert_eq!(yes.calls(), 1);
}

/// A Claude Code request: its system prompt, tools, and a streamed answer.
fn claude_code(model: &str) -> Value {
    let mut ask = messages(model, true);
    ask["tools"] = json!([
        { "name": "Bash", "description": "Run a command",
          "input_schema": { "type": "object", "properties": { "command": { "type": "string" } }, "required": ["command"] } },
        { "name": "Read", "description": "Read a file",
          "input_schema": { "type": "object", "properties": { "file_path": { "type": "string" } } } },
    ]);
    ask["metadata"] = json!({ "user_id": "user_abc_account__session_1234" });
    ask
}

#[tokio::test]
async fn a_provider_without_tools_never_gets_a_request_that_carries_them() {
    let ol = SimProvider::start("ol", Script::ok()).await.unwrap();
    let oa = SimProvider::start("oa", Script::agent()).await.unwrap();
    let config = ConfigText::new()
        .chat_only(&ol, &["claude-x=qwen3", "qwen3"])
        .raw("profile = { tools = false }")
        .chat_only(&oa, &["claude-x=gpt-4.1"])
        .route("claude-x", &["ol", "oa"]);
    let gw = TestGateway::start(config.build(), keys_for(&["ol", "oa"])).await;

    // Passed over for the next provider in the chain, which can act.
    let r = gw.post("/v1/messages", &claude_code("claude-x")).await;
    let id = request_id(&r);
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["x-switchyard-provider"], "oa");
    assert_eq!(r.headers()["x-switchyard-attempts"], "1", "a skip is no upstream attempt");
    r.bytes().await.unwrap();
    assert_eq!(ol.calls(), 0);
    // On record: ol skipped for its tools, then oa as the first real try,
    // not a fallback: nothing failed before it.
    let detail = detail_of(&gw, &id, 1).await;
    let attempts = detail["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2, "{detail}");
    assert_skipped(&attempts[0], "ol", "`tools`: the provider does not support tools");
    assert_eq!((attempts[1]["provider"].as_str(), attempts[1]["outcome"].as_str()), (Some("oa"), Some("ok")));
    assert_eq!(attempts[1]["reason"], "first", "{detail}");
    assert_eq!(detail["fallback"], false, "{detail}");
    // Never called, so nothing in its statistics or health; the metrics
    // count the skip by its outcome.
    let providers = gw.admin("/admin/providers").await;
    let of = |name: &str| providers.as_array().unwrap().iter().find(|p| p["name"] == name).unwrap().clone();
    assert_eq!(of("ol")["stats"]["m5"]["requests"], 0, "{providers}");
    assert_eq!(of("ol")["passive_healthy"], true, "{providers}");
    assert_eq!(of("oa")["stats"]["m5"]["requests"], 1, "{providers}");
    let metrics = http().get(gw.url("/metrics")).bearer_auth(switchyard_tests::ADMIN_TOKEN).send().await.unwrap();
    let metrics = metrics.text().await.unwrap();
    assert!(
        metrics.lines().any(|l| l.starts_with("switchyard_attempts_total{")
            && l.contains("provider=\"ol\"")
            && l.contains("outcome=\"skipped\"")),
        "{metrics}"
    );

    // No provider can take it: the client's own 400, naming the field.
    let r = gw.post("/v1/messages", &claude_code("qwen3")).await;
    assert_eq!(r.status(), 400);
    let body: Value = r.json().await.unwrap();
    assert_eq!((body["type"].as_str(), body["error"]["type"].as_str()), (Some("error"), Some("invalid_request_error")));
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("`tools`") && message.contains("does not support tools"), "{message}");
    // A Chat client speaking the provider's own format is refused the same way.
    let mut ask = chat("qwen3", false);
    ask["tools"] = json!([{ "type": "function", "function": { "name": "Bash", "parameters": { "type": "object" } } }]);
    let r = gw.post("/v1/chat/completions", &ask).await;
    assert_eq!(r.status(), 400);
    let body: Value = r.json().await.unwrap();
    assert!(body["error"]["message"].as_str().unwrap().contains("does not support tools"), "{body}");
    assert_eq!(ol.calls(), 0, "nothing with tools reached it");

    // Without tools it serves.
    assert_eq!(gw.post("/v1/chat/completions", &chat("qwen3", false)).await.status(), 200);
    assert_eq!(ol.calls(), 1);
}

#[tokio::test]
async fn an_anthropic_compatible_provider_gets_only_the_betas_it_allows() {
    let third = SimProvider::start("third", Script::ok()).await.unwrap();
    let config = ConfigText::new()
        .provider(&third, "anthropic", &["claude-x"])
        .raw("profile = { anthropic_beta = [\"interleaved-thinking-\"] }");
    let gw = TestGateway::start(config.build(), keys_for(&["third"])).await;
    let r = http()
        .post(gw.url("/v1/messages?beta=true"))
        .header("anthropic-version", "2023-06-01")
        .header("anthropic-beta", "context-1m-2025-08-07,interleaved-thinking-2025-05-14")
        .json(&messages("claude-x", false))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let seen = &third.requests()[0];
    assert_eq!(seen.headers["anthropic-beta"], "interleaved-thinking-2025-05-14");
    assert_eq!(seen.headers["anthropic-version"], "2023-06-01");
}
