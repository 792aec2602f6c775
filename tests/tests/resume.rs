//! Resumed streams end to end: a provider that drops its stream after
//! some text is finished by the chain's next, and the client reads one
//! well-formed stream in its own format, translated or not.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use serde_json::{json, Value};
use switchyard_sim::{Fault, Script, SimProvider};
use switchyard_tests::{header, keys_for, request_id, ConfigText, TestGateway};

/// `a` sends "Hello", " from", " a.", " w3", then resets the connection.
const CUT: usize = 4;
const PARTIAL: &str = "Hello from a. w3";

async fn sim(name: &str, script: Script) -> SimProvider {
    SimProvider::start(name, script).await.unwrap()
}

async fn gateway(a: &SimProvider, b: &SimProvider, policy: &str) -> TestGateway {
    let config = ConfigText::new()
        .raw(&format!("[policy]\nmin_fallback_budget = \"100ms\"\n{policy}"))
        .both_kinds(a, &["m"], &["c"])
        .both_kinds(b, &["m"], &["c"])
        .route("m", &["a", "b"])
        .route("c", &["a-an", "b-an"]);
    TestGateway::start(config.build(), keys_for(&["a", "b", "a-an", "b-an"])).await
}

/// The events of an SSE body: (event name, data as JSON).
fn events(body: &str) -> Vec<(String, Value)> {
    body.split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| {
            let name = e.lines().find_map(|l| l.strip_prefix("event: ")).unwrap_or("").to_string();
            let data: String = e.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
            (name, serde_json::from_str(&data).unwrap_or(Value::String(data)))
        })
        .collect()
}

/// The reply's text as the client's format carries it, and how many times
/// its format's one-per-stream events came (starts, ends, errors).
fn read(path: &str, body: &str) -> (String, Vec<usize>) {
    let evs = events(body);
    let count = |f: &dyn Fn(&(String, Value)) -> bool| evs.iter().filter(|e| f(e)).count();
    let text: String = match path {
        p if p.contains("chat") => {
            evs.iter().filter_map(|(_, d)| d["choices"][0]["delta"]["content"].as_str()).collect()
        }
        p if p.contains("messages") => evs
            .iter()
            .filter(|(n, _)| n == "content_block_delta")
            .filter_map(|(_, d)| d["delta"]["text"].as_str())
            .collect(),
        p if p.contains("responses") => evs
            .iter()
            .filter(|(n, _)| n == "response.output_text.delta")
            .filter_map(|(_, d)| d["delta"].as_str())
            .collect(),
        _ => evs
            .iter()
            .flat_map(|(_, d)| d["candidates"][0]["content"]["parts"].as_array().cloned().unwrap_or_default())
            .filter_map(|p| p["text"].as_str().map(str::to_string))
            .collect(),
    };
    let once = match path {
        p if p.contains("chat") => vec![
            count(&|(_, d)| d == "[DONE]"),
            count(&|(_, d)| d["choices"][0]["finish_reason"].is_string()),
            1 - count(&|(_, d)| d.get("error").is_some()),
        ],
        p if p.contains("messages") => vec![
            count(&|(n, _)| n == "message_start"),
            count(&|(n, _)| n == "content_block_start"),
            count(&|(n, _)| n == "message_stop"),
            1 - count(&|(n, _)| n == "error"),
        ],
        p if p.contains("responses") => vec![
            count(&|(n, _)| n == "response.created"),
            count(&|(n, _)| n == "response.completed"),
            1 - count(&|(n, _)| n == "error" || n == "response.failed"),
        ],
        _ => vec![
            count(&|(_, d)| d["candidates"][0]["finishReason"].is_string()),
            1 - count(&|(_, d)| d.get("error").is_some()),
        ],
    };
    (text, once)
}

/// The stream's naming holds across the seam: one Chat `created`, and
/// Responses events numbered in order with one id for the message item.
fn named_as_one(path: &str, body: &str) {
    let evs = events(body);
    if path.contains("chat") {
        let mut created: Vec<&Value> = evs.iter().filter_map(|(_, d)| d.get("created")).collect();
        created.dedup();
        assert_eq!(created.len(), 1, "one `created`: {body}");
    }
    if path.contains("responses") {
        let numbers: Vec<u64> = evs.iter().filter_map(|(_, d)| d["sequence_number"].as_u64()).collect();
        assert!(numbers.windows(2).all(|w| w[0] < w[1]), "numbered in order: {numbers:?}\n{body}");
        let mut ids: Vec<&str> = evs
            .iter()
            .filter(|(n, _)| n.starts_with("response.output_text") || n.starts_with("response.content_part"))
            .filter_map(|(_, d)| d["item_id"].as_str())
            .collect();
        ids.extend(evs.iter().filter_map(|(_, d)| d["item"]["id"].as_str()));
        ids.dedup();
        assert_eq!(ids.len(), 1, "one message item: {ids:?}\n{body}");
    }
}

#[tokio::test]
async fn a_stream_cut_midway_is_finished_by_the_next_in_every_format() {
    let a = sim("a", Script::always(Fault::DropAfter(CUT))).await;
    let b = sim("b", Script::ok().reply(" w4 w5 and the rest.")).await;
    let gw = gateway(&a, &b, "resume = true").await;
    let hi = |stream: bool| json!({ "model": "m", "stream": stream, "max_tokens": 20, "messages": [{ "role": "user", "content": "hi" }] });
    let cases = [
        ("/v1/chat/completions", hi(true)),
        ("/v1/messages", hi(true)),
        ("/v1/responses", json!({ "model": "m", "stream": true, "input": "hi" })),
        (
            "/v1beta/models/m:streamGenerateContent?alt=sse",
            json!({ "contents": [{ "role": "user", "parts": [{ "text": "hi" }] }] }),
        ),
        (
            "/v1/messages",
            json!({ "model": "c", "stream": true, "max_tokens": 20, "messages": [{ "role": "user", "content": "hi" }] }),
        ),
    ];
    for (i, (path, body)) in cases.iter().enumerate() {
        let (first, then) = if body["model"] == "c" { ("a-an", "b-an") } else { ("a", "b") };
        let r = gw.post(path, body).await;
        assert_eq!((r.status().as_u16(), header(&r, "x-switchyard-provider")), (200, first), "{path}");
        let id = request_id(&r);
        let text = r.text().await.unwrap();
        let (said, once) = read(path, &text);
        assert_eq!(said, format!("{PARTIAL} w4 w5 and the rest."), "{path}: {text}");
        assert!(once.iter().all(|n| *n == 1), "{path}: one start, one end, no error: {once:?}\n{text}");
        named_as_one(path, &text);
        let d = gw.detail(&id).await;
        let attempts: Vec<(&str, &str, &str)> = d["attempts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| (a["provider"].as_str().unwrap(), a["reason"].as_str().unwrap(), a["outcome"].as_str().unwrap()))
            .collect();
        assert_eq!(attempts, [(first, "first", "mid_stream_failure"), (then, "resume", "ok")], "{path}: {d}");
        let error = d["attempts"][0]["error"].as_str().unwrap();
        assert!(error.contains("resumed by the next attempt from 16 characters"), "{path}: {error}");
        assert_eq!(d["outcome"], "ok", "{path}: {d}");
        let (u0, u1) = (&d["attempts"][0]["usage"], &d["attempts"][1]["usage"]);
        let input = u0["input_tokens"].as_u64().unwrap_or(0) + u1["input_tokens"].as_u64().unwrap();
        assert_eq!(d["usage"]["input_tokens"].as_u64(), Some(input), "both attempts' usage: {d}");
        // What b was asked: the conversation, then the text sent so far.
        let asked = b.requests().last().unwrap().json();
        let turns = asked["messages"]
            .as_array()
            .or(asked["input"].as_array())
            .or(asked["contents"].as_array())
            .unwrap()
            .clone();
        let said_so_far = turns.iter().any(|t| t.to_string().contains("Hello from a. w3"));
        assert!(said_so_far, "{path}: {asked}");
        if body["model"] == "c" {
            // Anthropic continues a last assistant turn as its own.
            assert_eq!(turns.last().unwrap()["role"], "assistant", "{asked}");
        }
        assert_eq!(b.calls(), i + 1);
    }
    let m = switchyard_tests::http().get(gw.url("/metrics")).send().await.unwrap().text().await.unwrap();
    assert!(m.contains(r#"switchyard_resumes_total{outcome="resumed"} 5"#), "{m}");
}

#[tokio::test]
async fn an_error_event_a_malformed_one_or_a_silence_midway_is_resumed_too() {
    let cases = [
        (Fault::ErrorAfter(CUT), "resume = true", "the provider's stream sent an error"),
        (Fault::GarbleAfter(CUT), "resume = true", "malformed event"),
        (Fault::StallAfter(CUT), "resume = true\nstream_idle_timeout = \"200ms\"", "sent nothing for 200ms"),
    ];
    for (fault, policy, why) in cases {
        let a = sim("a", Script::always(fault.clone())).await;
        let b = sim("b", Script::ok().reply(" w4 w5 and the rest.")).await;
        let gw = gateway(&a, &b, policy).await;
        let hi = json!({ "model": "m", "stream": true, "max_tokens": 20, "messages": [{ "role": "user", "content": "hi" }] });
        // Untranslated (the error event read alongside) and translated.
        for path in ["/v1/chat/completions", "/v1/messages"] {
            let r = gw.post(path, &hi).await;
            let id = request_id(&r);
            let text = r.text().await.unwrap();
            let (said, once) = read(path, &text);
            assert_eq!(said, format!("{PARTIAL} w4 w5 and the rest."), "{fault:?} {path}: {text}");
            assert!(once.iter().all(|n| *n == 1), "{fault:?} {path}: {once:?}\n{text}");
            let d = gw.detail(&id).await;
            let error = d["attempts"][0]["error"].as_str().unwrap();
            assert!(error.contains(why) && error.contains("resumed by the next attempt"), "{fault:?} {path}: {error}");
        }
        assert_eq!(b.calls(), 2, "{fault:?}");
    }
}

#[tokio::test]
async fn without_resume_a_cut_ends_in_an_error_as_before() {
    let a = sim("a", Script::always(Fault::DropAfter(CUT))).await;
    let b = sim("b", Script::ok()).await;
    let gw = gateway(&a, &b, "").await;
    let body = json!({ "model": "m", "stream": true, "messages": [{ "role": "user", "content": "hi" }] });
    let text = gw.post("/v1/chat/completions", &body).await.text().await.unwrap();
    assert!(text.contains("\"error\""), "{text}");
    assert_eq!(b.calls(), 0);
}

#[tokio::test]
async fn a_tool_call_in_progress_is_not_resumed_and_says_why() {
    let plan = switchyard_sim::ToolPlan::call("Bash", json!({ "command": "ls -la /tmp/some/long/path" }));
    let a =
        sim("a", Script::agent().tool_plan(plan).fail_first(1, Fault::DropAfter(2)).stream(6, Duration::ZERO)).await;
    let b = sim("b", Script::ok()).await;
    let gw = gateway(&a, &b, "resume = true").await;
    let body = json!({
        "model": "c", "stream": true, "max_tokens": 50,
        "tools": [{ "name": "Bash", "description": "run", "input_schema": { "type": "object", "properties": { "command": { "type": "string" } } } }],
        "messages": [{ "role": "user", "content": "list" }],
    });
    let r = gw.post("/v1/messages", &body).await;
    let id = request_id(&r);
    let text = r.text().await.unwrap();
    assert!(text.contains("event: error"), "{text}");
    assert!(text.contains("not resumed: a tool call (`Bash`)"), "{text}");
    assert_eq!(b.calls(), 0);
    let d = gw.detail(&id).await;
    assert!(d["error"].as_str().unwrap().contains("tool call"), "{d}");
}

#[tokio::test]
async fn a_thinking_block_in_progress_is_not_resumed_finished_thinking_is() {
    // `a-an` thinks in four deltas, then writes; `b-an` answers whole.
    let cut_in_thinking = sim("a", Script::always(Fault::DropAfter(2)).thinks(4)).await;
    let b = sim("b", Script::ok().reply(" w4 w5 and the rest.")).await;
    let gw = gateway(&cut_in_thinking, &b, "resume = true").await;
    let body = |stream| json!({ "model": "c", "stream": stream, "max_tokens": 50, "messages": [{ "role": "user", "content": "hi" }] });
    // Untranslated (Messages) and translated (Chat to Messages).
    for path in ["/v1/messages", "/v1/chat/completions"] {
        let r = gw.post(path, &body(true)).await;
        let id = request_id(&r);
        let text = r.text().await.unwrap();
        assert!(text.contains("not resumed: a thinking block was in progress"), "{path}: {text}");
        let d = gw.detail(&id).await;
        assert!(d["error"].as_str().unwrap().contains("thinking block"), "{path}: {d}");
        assert_eq!(d["attempts"].as_array().unwrap().len(), 1, "{path}: {d}");
    }
    assert_eq!(b.calls(), 0);
    let m = switchyard_tests::http().get(gw.url("/metrics")).send().await.unwrap().text().await.unwrap();
    assert!(m.contains(r#"switchyard_resumes_total{outcome="not_resumable"} 2"#), "{m}");

    // Cut after the thinking ended and two pieces of text: resumed, the
    // continuation asked without the thinking.
    let cut_in_text = sim("a", Script::always(Fault::DropAfter(6)).thinks(4)).await;
    let gw = gateway(&cut_in_text, &b, "resume = true").await;
    let text = gw.post("/v1/messages", &body(true)).await.text().await.unwrap();
    let (said, once) = read("/v1/messages", &text);
    assert_eq!(said, "Hello from w4 w5 and the rest.", "{text}");
    // One message, its thinking block and its text block, one stop, no error.
    assert_eq!(once, [1, 2, 1, 1], "{text}");
    assert!(text.contains("thinking_delta"), "the thinking reached the client: {text}");
    let asked = b.requests().last().unwrap().json();
    let last = asked["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["role"], "assistant", "{asked}");
    assert!(!last.to_string().contains("thinking"), "the thinking is not sent on: {last}");
    assert!(last.to_string().contains("Hello from"), "{last}");
}

#[tokio::test]
async fn a_providers_own_resume_holds_whatever_the_request_policy_says() {
    // `a` turns resume on for its streams under a policy without it; `c`
    // turns it off under a route that has it.
    let a = sim("a", Script::always(Fault::DropAfter(CUT))).await;
    let b = sim("b", Script::ok().reply(" w4 w5 and the rest.")).await;
    let c = sim("c", Script::always(Fault::DropAfter(CUT))).await;
    let config = ConfigText::new()
        .raw("[policy]\nmin_fallback_budget = \"100ms\"")
        .provider(&a, "openai", &["m", "n"])
        .raw("policy = { resume = true }")
        .provider(&c, "openai", &["m", "n"])
        .raw("policy = { resume = false }")
        .provider(&b, "openai", &["m", "n"])
        .route("m", &["a", "b"])
        .route("n", &["c", "b"])
        .raw("policy = { resume = true }");
    let gw = TestGateway::start(config.build(), keys_for(&["a", "b", "c"])).await;
    let hi = |model| json!({ "model": model, "stream": true, "messages": [{ "role": "user", "content": "hi" }] });
    let text = gw.post("/v1/chat/completions", &hi("m")).await.text().await.unwrap();
    assert_eq!(read("/v1/chat/completions", &text).0, format!("{PARTIAL} w4 w5 and the rest."), "{text}");
    assert_eq!(b.calls(), 1);
    let text = gw.post("/v1/chat/completions", &hi("n")).await.text().await.unwrap();
    assert!(text.contains("\"error\""), "c's own `resume = false` holds: {text}");
    assert_eq!(b.calls(), 1);
}

#[tokio::test]
async fn a_cut_with_too_little_of_the_deadline_left_is_not_resumed_and_says_why() {
    // `a` takes about 200 ms to its cut; a second later the deadline is up,
    // and a fallback needs 900 ms of it.
    let a = sim("a", Script::always(Fault::DropAfter(CUT)).stream(8, Duration::from_millis(50))).await;
    let b = sim("b", Script::ok()).await;
    let config = ConfigText::new()
        .raw("[policy]\nresume = true\ndeadline = \"1s\"\nmin_fallback_budget = \"900ms\"")
        .provider(&a, "openai", &["m"])
        .provider(&b, "openai", &["m"])
        .route("m", &["a", "b"]);
    let gw = TestGateway::start(config.build(), keys_for(&["a", "b"])).await;
    let body = json!({ "model": "m", "stream": true, "messages": [{ "role": "user", "content": "hi" }] });
    let r = gw.post("/v1/chat/completions", &body).await;
    let id = request_id(&r);
    let text = r.text().await.unwrap();
    assert!(text.contains("too little time left for a fallback"), "{text}");
    assert_eq!(b.calls(), 0);
    let d = gw.detail(&id).await;
    assert!(d["error"].as_str().unwrap().contains("not resumed"), "{d}");
}
