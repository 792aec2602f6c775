//! Non-streamed replies: every format to every other (§C), stop reasons
//! (§H 21), usage, envelopes, tool names.

use serde_json::{json, Value};

use super::{data, json, reasoning, texts};
use crate::protocol::translate::ir::Format::{self, Chat, Gemini, Messages, Responses};
use crate::protocol::translate::ir::{Context, ErrorClass, StopReason};
use crate::protocol::translate::message::Part;
use crate::protocol::translate::profile::Profile;
use crate::protocol::translate::{decode_reply, translate_reply, translate_request};

fn fixture(f: Format) -> Vec<u8> {
    data(match f {
        Chat => "replies/chat.json",
        Responses => "replies/responses.json",
        Messages => "replies/messages.json",
        Gemini => "replies/gemini.json",
    })
}

fn ctx() -> Context {
    Context { client_model: "client-alias".into(), ..Context::default() }
}

#[test]
fn every_reply_reaches_every_client() {
    for from in Format::ALL {
        for to in Format::ALL {
            let out = translate_reply(from, to, &fixture(from), &ctx()).unwrap();
            let v = json(&out);
            let back = decode_reply(to, &out).unwrap_or_else(|e| panic!("{from}->{to}: {e}"));
            assert_eq!(texts(&back.parts), ["I'll list."], "{from}->{to}");
            assert_eq!(reasoning(&back.parts), "Need ls.", "{from}->{to}");
            let calls: Vec<(String, Value)> = back
                .parts
                .iter()
                .filter_map(|p| match p {
                    Part::ToolCall { name, args, .. } => Some((name.clone(), serde_json::from_str(args).unwrap())),
                    _ => None,
                })
                .collect();
            assert_eq!(calls, [("Bash".to_owned(), json!({"command": "ls"}))], "{from}->{to}");
            assert_eq!(back.stop, StopReason::ToolUse, "{from}->{to}");
            let t = back.tokens;
            assert_eq!((t.input, t.output, t.cache_read), (Some(1200), Some(80), Some(1000)), "{from}->{to}");
            if from != Messages && to != Messages {
                assert_eq!(t.reasoning, Some(30), "{from}->{to}");
            }
            assert_eq!(back.model, "client-alias", "{from}->{to}: the client's alias is echoed");
            client_shape(from, to, &v);
        }
    }
}

/// What each client's SDK insists on.
fn client_shape(from: Format, to: Format, v: &Value) {
    let what = format!("{from}->{to}");
    match to {
        Chat => {
            assert!(v["id"].as_str().unwrap().starts_with("chatcmpl-"), "{what}");
            assert_eq!(v["object"], "chat.completion");
            assert_eq!(v["choices"][0]["finish_reason"], "tool_calls", "{what}");
            assert_eq!(v["choices"][0]["message"]["reasoning_content"], "Need ls.", "{what}");
            assert_eq!(v["usage"]["prompt_tokens_details"]["cached_tokens"], 1000);
        }
        Responses => {
            assert!(v["id"].as_str().unwrap().starts_with("resp_"), "{what}");
            assert_eq!(v["status"], "completed");
            let output = v["output"].as_array().unwrap();
            assert_eq!(output[0]["type"], "reasoning", "{what}");
            assert_eq!(output.last().unwrap()["type"], "function_call", "{what}");
            assert!(output.last().unwrap()["id"].as_str().unwrap().starts_with("fc_"));
            assert_eq!(v["usage"]["input_tokens_details"]["cached_tokens"], 1000);
            if from == Messages {
                let enc = output[0]["encrypted_content"].as_str().unwrap();
                assert!(enc.starts_with("sy1.anth."), "{what}: {enc}");
            }
        }
        Messages => {
            assert!(v["id"].as_str().unwrap().starts_with("msg_"), "{what}");
            assert_eq!(v["stop_reason"], "tool_use");
            // Messages counts cached input apart.
            assert_eq!(v["usage"]["input_tokens"], 200, "{what}");
            assert_eq!(v["usage"]["cache_read_input_tokens"], 1000);
            let thinking = &v["content"][0];
            assert_eq!(thinking["type"], "thinking", "{what}");
            let sig = thinking["signature"].as_str().unwrap();
            assert!(!sig.is_empty(), "{what}: Claude Code requires a signature");
            if from != Messages {
                assert!(sig.starts_with("sy1."), "{what}: {sig}");
            }
        }
        Gemini => {
            assert_eq!(v["candidates"][0]["finishReason"], "STOP");
            let parts = v["candidates"][0]["content"]["parts"].as_array().unwrap();
            assert_eq!(parts[0]["thought"], true, "{what}");
            assert_eq!(
                v["usageMetadata"]["candidatesTokenCount"].as_u64().unwrap()
                    + v["usageMetadata"]["thoughtsTokenCount"].as_u64().unwrap_or(0),
                80
            );
            if from == Messages {
                assert!(parts[0]["thoughtSignature"].as_str().unwrap().starts_with("sy1.anth."), "{what}");
            }
        }
    }
}

/// Reasoning from Anthropic survives a Codex client: the envelope it keeps
/// opens back into the original block, byte for byte.
#[test]
fn anthropic_reasoning_round_trips_through_a_responses_client() {
    let out = json(&translate_reply(Messages, Responses, &fixture(Messages), &ctx()).unwrap());
    let next = json!({
        "model": "client-alias",
        "input": [
            {"type": "message", "role": "user", "content": "list files"},
            out["output"][0],
            {"type": "function_call", "call_id": out["output"][2]["call_id"], "name": "Bash", "arguments": "{\"command\":\"ls\"}"},
            {"type": "function_call_output", "call_id": out["output"][2]["call_id"], "output": "a.txt"}
        ],
        "reasoning": {"effort": "medium"}
    });
    let (body, _) =
        translate_request(Responses, Messages, next.to_string().as_bytes(), &Profile::default(), "claude").unwrap();
    let body = json(&body);
    assert_eq!(
        body["messages"][1]["content"][0],
        json!({"type": "thinking", "thinking": "Need ls.", "signature": "EqQBCkgIAnthropicSig=="})
    );
    assert_eq!(body["thinking"]["type"], "enabled");
    // The same envelope sent to OpenAI is dropped: it is not OpenAI's.
    let (body, _) =
        translate_request(Responses, Chat, next.to_string().as_bytes(), &Profile::default(), "gpt").unwrap();
    assert!(json(&body).to_string().find("EqQBCkgIAnthropicSig").is_none());
}

/// Gemini's signatures go back to Gemini on the part they came on.
#[test]
fn gemini_signatures_round_trip_through_a_messages_client() {
    let out = json(&translate_reply(Gemini, Messages, &fixture(Gemini), &ctx()).unwrap());
    let content = out["content"].as_array().unwrap().clone();
    let next = json!({
        "model": "client-alias", "max_tokens": 1000,
        "messages": [
            {"role": "user", "content": "list files"},
            {"role": "assistant", "content": content},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "a.txt"}]}
        ]
    });
    let (body, _) = translate_request(Messages, Gemini, next.to_string().as_bytes(), &Profile::default(), "g").unwrap();
    let body = json(&body);
    let parts = body["contents"][1]["parts"].as_array().unwrap();
    // The unsigned thought cannot be replayed; the text and the signed call can.
    assert_eq!(parts[0], json!({"text": "I'll list."}));
    let call = parts.iter().find(|p| p.get("functionCall").is_some()).unwrap();
    assert_eq!(call["thoughtSignature"], "CiQBgemSig");
    assert_eq!(body["contents"][2]["parts"][0]["functionResponse"]["name"], "Bash");
}

fn chat_reply(finish: Value, calls: bool, extra: Value) -> Value {
    let mut message = json!({"role": "assistant", "content": "hi"});
    if calls {
        message["tool_calls"] =
            json!([{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]);
    }
    let mut choice = json!({"index": 0, "message": message, "finish_reason": finish});
    if let (Value::Object(c), Value::Object(e)) = (&mut choice, extra) {
        c.extend(e);
    }
    json!({"id": "chatcmpl-1", "model": "m", "choices": [choice], "usage": {"prompt_tokens": 1, "completion_tokens": 1}})
}

fn messages_reply(stop: &str, calls: bool) -> Value {
    let mut content = vec![json!({"type": "text", "text": "hi"})];
    if calls {
        content.push(json!({"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}));
    }
    json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": content, "stop_reason": stop,
           "stop_sequence": if stop == "stop_sequence" { json!("END") } else { Value::Null },
           "usage": {"input_tokens": 1, "output_tokens": 1}})
}

fn responses_reply(status: &str, reason: Option<&str>, calls: bool) -> Value {
    let mut output =
        vec![json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi"}]})];
    if calls {
        output.push(json!({"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"}));
    }
    json!({"id": "resp_1", "status": status, "model": "m", "output": output,
           "incomplete_details": reason.map(|r| json!({"reason": r})),
           "error": if status == "failed" { json!({"code": "server_error", "message": "boom"}) } else { Value::Null }})
}

fn gemini_reply(finish: &str, calls: bool) -> Value {
    let mut parts = vec![json!({"text": "hi"})];
    if calls {
        parts.push(json!({"functionCall": {"name": "f", "args": {}}}));
    }
    json!({"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": finish}], "responseId": "r1"})
}

/// One row of translation.md §C.2: the reply in its format, and what a
/// Messages, Chat, Responses (status, incomplete reason) and Gemini client
/// sees as its stop.
type Row = (Format, Value, &'static str, &'static str, (&'static str, Option<&'static str>), &'static str);

const DONE: (&str, Option<&str>) = ("completed", None);
const LONG: (&str, Option<&str>) = ("incomplete", Some("max_output_tokens"));
const FILTERED: (&str, Option<&str>) = ("incomplete", Some("content_filter"));

#[test]
fn stop_reasons_map_per_table() {
    let rows = [
        (Messages, messages_reply("end_turn", false), "end_turn", "stop", DONE, "STOP"),
        (Messages, messages_reply("stop_sequence", false), "stop_sequence", "stop", DONE, "STOP"),
        (Messages, messages_reply("max_tokens", false), "max_tokens", "length", LONG, "MAX_TOKENS"),
        (Messages, messages_reply("tool_use", true), "tool_use", "tool_calls", DONE, "STOP"),
        (Messages, messages_reply("pause_turn", false), "pause_turn", "stop", DONE, "STOP"),
        (Messages, messages_reply("refusal", false), "refusal", "content_filter", FILTERED, "SAFETY"),
        (Messages, messages_reply("model_context_window_exceeded", false), "max_tokens", "length", LONG, "MAX_TOKENS"),
        (Chat, chat_reply(json!("stop"), false, json!({})), "end_turn", "stop", DONE, "STOP"),
        (Chat, chat_reply(json!("stop"), false, json!({"stop_reason": "END"})), "stop_sequence", "stop", DONE, "STOP"),
        (Chat, chat_reply(json!("length"), false, json!({})), "max_tokens", "length", LONG, "MAX_TOKENS"),
        (Chat, chat_reply(json!("tool_calls"), true, json!({})), "tool_use", "tool_calls", DONE, "STOP"),
        (Chat, chat_reply(json!("function_call"), true, json!({})), "tool_use", "tool_calls", DONE, "STOP"),
        // Some compat servers say `stop` with calls present.
        (Chat, chat_reply(json!("stop"), true, json!({})), "tool_use", "tool_calls", DONE, "STOP"),
        (Chat, chat_reply(json!("content_filter"), false, json!({})), "refusal", "content_filter", FILTERED, "SAFETY"),
        (Responses, responses_reply("completed", None, true), "tool_use", "tool_calls", DONE, "STOP"),
        (Responses, responses_reply("completed", None, false), "end_turn", "stop", DONE, "STOP"),
        (
            Responses,
            responses_reply("incomplete", Some("max_output_tokens"), false),
            "max_tokens",
            "length",
            LONG,
            "MAX_TOKENS",
        ),
        (
            Responses,
            responses_reply("incomplete", Some("content_filter"), false),
            "refusal",
            "content_filter",
            FILTERED,
            "SAFETY",
        ),
        (Gemini, gemini_reply("STOP", true), "tool_use", "tool_calls", DONE, "STOP"),
        (Gemini, gemini_reply("STOP", false), "end_turn", "stop", DONE, "STOP"),
        (Gemini, gemini_reply("OTHER", false), "end_turn", "stop", DONE, "STOP"),
        (Gemini, gemini_reply("FINISH_REASON_UNSPECIFIED", false), "end_turn", "stop", DONE, "STOP"),
        (Gemini, gemini_reply("MAX_TOKENS", false), "max_tokens", "length", LONG, "MAX_TOKENS"),
    ];
    for blocked in ["SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY", "LANGUAGE"] {
        let r = (Gemini, gemini_reply(blocked, false), "refusal", "content_filter", FILTERED, "SAFETY");
        check(&r);
    }
    for r in rows {
        check(&r);
    }
}

fn check((from, body, msgs, chat, (status, incomplete), gem): &Row) {
    let body = body.to_string();
    let what = format!("{from} {body}");
    let via = |to| {
        json(
            &translate_reply(*from, to, body.as_bytes(), &Context::default()).unwrap_or_else(|e| panic!("{what}: {e}")),
        )
    };
    assert_eq!(via(Messages)["stop_reason"], *msgs, "{what}");
    if *msgs == "stop_sequence" {
        assert_eq!(via(Messages)["stop_sequence"], "END");
    }
    assert_eq!(via(Chat)["choices"][0]["finish_reason"], *chat, "{what}");
    let resp = via(Responses);
    assert_eq!(resp["status"], *status, "{what}");
    assert_eq!(resp["incomplete_details"]["reason"].as_str(), *incomplete, "{what}");
    assert_eq!(via(Gemini)["candidates"][0]["finishReason"], *gem, "{what}");
}

#[test]
fn failures_in_a_success_body_are_errors() {
    let failed = responses_reply("failed", None, false);
    let err = decode_reply(Responses, failed.to_string().as_bytes()).unwrap_err();
    assert_eq!(err.class, ErrorClass::Server);
    let null = chat_reply(Value::Null, false, json!({}));
    assert_eq!(decode_reply(Chat, null.to_string().as_bytes()).unwrap_err().class, ErrorClass::Overloaded);
    let odd = chat_reply(json!("insufficient_system_resource"), false, json!({}));
    assert_eq!(decode_reply(Chat, odd.to_string().as_bytes()).unwrap_err().class, ErrorClass::Overloaded);
    for bad in ["MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS"] {
        let err = decode_reply(Gemini, gemini_reply(bad, false).to_string().as_bytes()).unwrap_err();
        assert_eq!(err.class, ErrorClass::Server, "{bad}");
    }
    let blocked =
        json!({"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}, "usageMetadata": {"promptTokenCount": 9}});
    let out = json(&translate_reply(Gemini, Messages, blocked.to_string().as_bytes(), &Context::default()).unwrap());
    assert_eq!(out["stop_reason"], "refusal");
    assert!(out["content"][0]["text"].as_str().unwrap().contains("PROHIBITED_CONTENT"));
    let safety = json(
        &translate_reply(Gemini, Chat, gemini_reply("SAFETY", false).to_string().as_bytes(), &Context::default())
            .unwrap(),
    );
    assert_eq!(safety["choices"][0]["message"]["content"], "hi");
    let empty = json!({"candidates": [{"content": {"role": "model", "parts": []}, "finishReason": "SAFETY"}]});
    let safety = json(&translate_reply(Gemini, Chat, empty.to_string().as_bytes(), &Context::default()).unwrap());
    assert!(safety["choices"][0]["message"]["content"].as_str().unwrap().contains("SAFETY"));
}

/// Calls without a name are dropped; a turn left without calls fails
/// instead of ending Codex's loop silently.
#[test]
fn nameless_tool_calls() {
    let mut two = chat_reply(json!("tool_calls"), true, json!({}));
    two["choices"][0]["message"]["tool_calls"]
        .as_array_mut()
        .unwrap()
        .push(json!({"id": "call_2", "type": "function", "function": {"name": " ", "arguments": "{}"}}));
    let out = json(&translate_reply(Chat, Responses, two.to_string().as_bytes(), &Context::default()).unwrap());
    assert_eq!(out["output"].as_array().unwrap().iter().filter(|i| i["type"] == "function_call").count(), 1);
    let mut none = chat_reply(json!("tool_calls"), true, json!({}));
    none["choices"][0]["message"]["tool_calls"][0]["function"]["name"] = json!("");
    let err = translate_reply(Chat, Responses, none.to_string().as_bytes(), &Context::default()).unwrap_err();
    assert_eq!(err.class, ErrorClass::Server);
}

/// §H 8 (reply side) and renamed tools: the client gets its own names, and a
/// call to an emulated custom tool comes back as a custom tool call.
#[test]
fn tool_names_and_custom_tools_are_restored() {
    let patch = "*** Begin Patch\n*** Add File: hello.txt\n+hi\n*** End Patch\n";
    let (_, ctx) =
        translate_request(Responses, Chat, &data("requests/codex.json"), &Profile::default(), "deepseek").unwrap();
    let mut reply = chat_reply(json!("tool_calls"), true, json!({}));
    reply["choices"][0]["message"]["tool_calls"][0]["function"] =
        json!({"name": "apply_patch", "arguments": json!({"input": patch}).to_string()});
    let out = json(&translate_reply(Chat, Responses, reply.to_string().as_bytes(), &ctx).unwrap());
    let call = &out["output"][1];
    assert_eq!(call["type"], "custom_tool_call");
    assert_eq!(call["name"], "apply_patch");
    assert_eq!(call["input"], patch);
    assert_eq!(call["call_id"], "call_1");
    // And the next turn's custom output reaches Chat under the same id.
    let next = json!({"model": "gpt-5-codex", "input": [
        {"type": "message", "role": "user", "content": "go"},
        call,
        {"type": "custom_tool_call_output", "call_id": "call_1", "output": "Success."}
    ], "tools": [{"type": "custom", "name": "apply_patch"}]});
    let (body, _) = translate_request(Responses, Chat, next.to_string().as_bytes(), &Profile::default(), "d").unwrap();
    let body = json(&body);
    assert_eq!(body["messages"][1]["tool_calls"][0]["function"]["arguments"], json!({"input": patch}).to_string());
    assert_eq!(body["messages"][2], json!({"role": "tool", "tool_call_id": "call_1", "content": "Success."}));

    let (_, ctx) =
        translate_request(Messages, Chat, &data("requests/claude_code.json"), &Profile::default(), "gpt").unwrap();
    let (sent, original) = ctx.renamed_tools.iter().next().unwrap();
    let mut reply = chat_reply(json!("tool_calls"), true, json!({}));
    reply["choices"][0]["message"]["tool_calls"][0]["function"]["name"] = json!(sent);
    let out = json(&translate_reply(Chat, Messages, reply.to_string().as_bytes(), &ctx).unwrap());
    assert_eq!(out["content"][1]["name"], json!(original));
}

#[test]
fn usage_keeps_cache_apart_where_messages_does() {
    let chat = json!({"id": "c", "model": "m", "choices": [{"message": {"content": "x"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1200, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 1000, "cache_write_tokens": 150}}});
    let out = json(&translate_reply(Chat, Messages, chat.to_string().as_bytes(), &Context::default()).unwrap());
    assert_eq!(
        out["usage"],
        json!({"input_tokens": 50, "output_tokens": 5, "cache_read_input_tokens": 1000, "cache_creation_input_tokens": 150})
    );
    let deepseek = json!({"id": "c", "model": "m", "choices": [{"message": {"content": "x"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 5, "prompt_cache_hit_tokens": 60}});
    let out = json(&translate_reply(Chat, Messages, deepseek.to_string().as_bytes(), &Context::default()).unwrap());
    assert_eq!(out["usage"]["input_tokens"], 40);
    let gem = json!({"candidates": [{"content": {"parts": [{"text": "x"}]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 500, "cachedContentTokenCount": 300, "candidatesTokenCount": 20, "thoughtsTokenCount": 10, "totalTokenCount": 530}});
    let out = json(&translate_reply(Gemini, Messages, gem.to_string().as_bytes(), &Context::default()).unwrap());
    assert_eq!(
        out["usage"],
        json!({"input_tokens": 200, "output_tokens": 30, "cache_read_input_tokens": 300, "cache_creation_input_tokens": 0})
    );
    let out = json(&translate_reply(Gemini, Responses, gem.to_string().as_bytes(), &Context::default()).unwrap());
    assert_eq!(
        out["usage"],
        json!({"input_tokens": 500, "input_tokens_details": {"cached_tokens": 300}, "output_tokens": 30,
        "output_tokens_details": {"reasoning_tokens": 10}, "total_tokens": 530})
    );
}
