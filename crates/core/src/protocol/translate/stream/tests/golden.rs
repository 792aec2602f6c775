//! The stream cases of translation.md §H, each against a golden client
//! stream (compared event by event as JSON, so key order does not matter)
//! and the specific promises the case is about.
//!
//! `SY_UPDATE_GOLDEN=1 cargo test …` rewrites the golden files; review the
//! diff before committing it.

use std::collections::{HashMap, HashSet};

use serde_json::{json, Value};

use super::validate::{check, Ending};
use super::{ctx, fixture, opts, parse_sse, translate, Options};
use crate::protocol::translate::envelope::{self, Sealed};
use crate::protocol::translate::ir::{Context, ErrorClass, Family, Format};
use crate::protocol::translate::stream::StreamTranslator;

fn golden(name: &str, actual: &str) {
    let path = format!("{}/src/protocol/translate/testdata/streams/golden/{name}.sse", env!("CARGO_MANIFEST_DIR"));
    if std::env::var_os("SY_UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(std::path::Path::new(&path).parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let (want, got) = (parse_sse(&expected), parse_sse(actual));
    for (i, (w, g)) in want.iter().zip(&got).enumerate() {
        assert_eq!(g, w, "{name}: event {i} differs");
    }
    assert_eq!(got.len(), want.len(), "{name}: event count");
}

fn run(name: &str, to: Format, ctx: Context, opts: Options) -> (String, Vec<(String, Value)>) {
    let f = fixture(name);
    // A few bytes at a time, so multibyte characters and CRLFs are split.
    let out = translate(f.format, to, ctx, opts, f.bytes, 5);
    (out.clone(), parse_sse(&out))
}

fn of<'a>(events: &'a [(String, Value)], name: &str) -> Vec<&'a Value> {
    events.iter().filter(|(n, _)| n == name).map(|(_, v)| v).collect()
}

/// H4: Chat stream → Messages.
#[test]
fn h4_chat_stream_to_messages() {
    let (out, events) = run("chat_h4", Format::Messages, ctx(), opts());
    assert_eq!(check(Format::Messages, &out), Ending::Success);
    golden("h4_chat_to_messages", &out);
    let starts = of(&events, "content_block_start");
    let indexes: Vec<u64> = starts.iter().map(|e| e["index"].as_u64().unwrap()).collect();
    assert_eq!(indexes, [0, 1, 2]);
    let valid = crate::protocol::translate::names::call_id("functions.Bash:0", 64).into_owned();
    assert!(valid.starts_with("functions_Bash_0"), "{valid}");
    assert_eq!(starts[1]["content_block"]["id"], valid.as_str(), "Kimi's id made valid as the reply codec makes it");
    let mut json: HashMap<u64, String> = HashMap::new();
    let mut text = String::new();
    for d in of(&events, "content_block_delta") {
        let i = d["index"].as_u64().unwrap();
        match d["delta"]["type"].as_str().unwrap() {
            "input_json_delta" => json.entry(i).or_default().push_str(d["delta"]["partial_json"].as_str().unwrap()),
            _ => text.push_str(d["delta"]["text"].as_str().unwrap()),
        }
    }
    assert_eq!(text, "我来查一下", "the CJK text survives 5-byte pieces");
    let args: Vec<Value> = [1, 2].iter().map(|i| serde_json::from_str(&json[i]).unwrap()).collect();
    assert_eq!(args, [json!({"command": "ls -la"}), json!({"file_path": "读我.md"})]);
    let deltas = of(&events, "message_delta");
    assert_eq!(deltas.len(), 1, "the duplicate finish makes no second message_delta");
    assert_eq!(deltas[0]["delta"]["stop_reason"], "tool_use");
    assert_eq!(deltas[0]["usage"], json!({"input_tokens": 176, "output_tokens": 60, "cache_read_input_tokens": 1024}));
    assert_eq!(of(&events, "message_stop").len(), 1);
}

/// H5: Messages stream → Chat, with and without `include_usage`.
#[test]
fn h5_messages_stream_to_chat() {
    for include_usage in [true, false] {
        let o = Options { include_usage, ..opts() };
        let (out, events) = run("messages_h5", Format::Chat, ctx(), o);
        assert_eq!(check(Format::Chat, &out), Ending::Success);
        golden(if include_usage { "h5_messages_to_chat_usage" } else { "h5_messages_to_chat" }, &out);
        let deltas: Vec<&Value> = events.iter().filter_map(|(_, v)| v.pointer("/choices/0/delta")).collect();
        assert_eq!(deltas[0], &json!({"role": "assistant", "content": ""}));
        assert_eq!(deltas[1], &json!({"reasoning_content": "I should list the files."}));
        assert_eq!(deltas[2], &json!({"content": "Listing them."}));
        let call = &deltas[3]["tool_calls"][0];
        assert_eq!(
            (&call["index"], &call["id"], &call["function"]["name"]),
            (&json!(0), &json!("toolu_01NoArgs"), &json!("list_files"))
        );
        assert_eq!(deltas[4]["tool_calls"][0], json!({"index": 0, "function": {"arguments": "{}"}}));
        let finish: Vec<&Value> =
            events.iter().filter_map(|(_, v)| v.pointer("/choices/0/finish_reason")).filter(|f| !f.is_null()).collect();
        assert_eq!(finish, [&json!("tool_calls")]);
        let usage: Vec<&Value> = events.iter().filter_map(|(_, v)| v.get("usage")).collect();
        assert_eq!(usage.len(), usize::from(include_usage), "a usage chunk only when asked for");
        assert_eq!(events.last().unwrap().1, "[DONE]");
    }
}

/// H7: Chat stream → Responses, in the exact order of §D.3.
#[test]
fn h7_chat_stream_to_responses_order() {
    let (out, events) = run("chat_h7", Format::Responses, ctx(), opts());
    assert_eq!(check(Format::Responses, &out), Ending::Success);
    golden("h7_chat_to_responses", &out);
    let names: Vec<&str> = events.iter().map(|(n, _)| n.strip_prefix("response.").unwrap()).collect();
    let want = [
        "created",
        "in_progress",
        "output_item.added",
        "reasoning_summary_part.added",
        "reasoning_summary_text.delta",
        "reasoning_summary_text.delta",
        "reasoning_summary_text.done",
        "reasoning_summary_part.done",
        "output_item.done",
        "output_item.added",
        "content_part.added",
        "output_text.delta",
        "output_text.done",
        "content_part.done",
        "output_item.done",
        "output_item.added",
        "function_call_arguments.delta",
        "function_call_arguments.delta",
        "function_call_arguments.done",
        "output_item.done",
        "completed",
    ];
    assert_eq!(names, want);
    let usage = &events.last().unwrap().1["response"]["usage"];
    assert_eq!(
        usage,
        &json!({"input_tokens": 900, "input_tokens_details": {"cached_tokens": 512}, "output_tokens": 50, "output_tokens_details": {"reasoning_tokens": 12}, "total_tokens": 950})
    );
}

/// H8: Codex's `apply_patch`, emulated as a function for a Chat provider,
/// comes back as a custom tool call with the raw patch.
#[test]
fn h8_apply_patch_through_a_chat_provider() {
    let ctx = Context { custom_tools: HashSet::from(["apply_patch".to_string()]), ..ctx() };
    let (out, events) = run("chat_h8", Format::Responses, ctx, opts());
    assert_eq!(check(Format::Responses, &out), Ending::Success);
    golden("h8_chat_to_responses_custom", &out);
    let patch = "*** Begin Patch\n*** Add File: hello.txt\n+hi é \"q\"\n*** End Patch\n";
    let streamed: String =
        of(&events, "response.custom_tool_call_input.delta").iter().map(|d| d["delta"].as_str().unwrap()).collect();
    assert_eq!(streamed, patch, "the input streams unwrapped");
    assert_eq!(of(&events, "response.custom_tool_call_input.done")[0]["input"], patch);
    let item = &of(&events, "response.output_item.done")[0]["item"];
    assert_eq!(
        (&item["type"], &item["call_id"], &item["name"], &item["input"]),
        (&json!("custom_tool_call"), &json!("call_patch1"), &json!("apply_patch"), &json!(patch))
    );
    assert!(of(&events, "response.function_call_arguments.delta").is_empty());
}

/// H10: Messages stream → Responses: thinking as reasoning with an
/// envelope, `tool_use` as `function_call`, cache counted in input, and
/// `max_tokens` as `response.incomplete`.
#[test]
fn h10_messages_stream_to_responses() {
    let (out, events) = run("messages_h10", Format::Responses, ctx(), opts());
    assert_eq!(check(Format::Responses, &out), Ending::Success);
    golden("h10_messages_to_responses", &out);
    let done = of(&events, "response.output_item.done");
    let reasoning = &done[0]["item"];
    assert_eq!(reasoning["summary"], json!([{"type": "summary_text", "text": "Run the tests first."}]));
    let opened = envelope::open(reasoning["encrypted_content"].as_str().unwrap()).unwrap();
    let sealed =
        Sealed { text: Some("Run the tests first.".into()), value: Some("EqQBsigH10".into()), ..Sealed::default() };
    assert_eq!(opened, (Family::Anthropic, sealed), "the thinking and its signature, to replay byte for byte");
    assert_eq!(
        (&done[1]["item"]["type"], &done[1]["item"]["call_id"]),
        (&json!("function_call"), &json!("toolu_01Shell"))
    );
    let last = &events.last().unwrap();
    assert_eq!(last.0, "response.incomplete");
    assert_eq!(last.1["response"]["incomplete_details"], json!({"reason": "max_output_tokens"}));
    assert_eq!(last.1["response"]["usage"]["input_tokens"], 3300, "input + cache read + cache creation");
    assert_eq!(last.1["response"]["usage"]["input_tokens_details"]["cached_tokens"], 3000);
}

/// H11: Responses stream → Messages: a summary only in the done item, text,
/// two calls (one without argument deltas, and a replayed event).
#[test]
fn h11_responses_stream_to_messages() {
    let (out, events) = run("responses_h11", Format::Messages, ctx(), opts());
    assert_eq!(check(Format::Messages, &out), Ending::Success);
    golden("h11_responses_to_messages", &out);
    let starts: Vec<&str> =
        of(&events, "content_block_start").iter().map(|e| e["content_block"]["type"].as_str().unwrap()).collect();
    assert_eq!(starts, ["thinking", "text", "tool_use", "tool_use"], "the replayed done makes no third call");
    let deltas = of(&events, "content_block_delta");
    assert_eq!(deltas[0]["delta"], json!({"type": "thinking_delta", "thinking": "Need both files."}));
    let signature = deltas[1]["delta"]["signature"].as_str().unwrap();
    let sealed = Sealed {
        text: Some("Need both files.".into()),
        value: Some("gAAAAH11enc".into()),
        id: Some("rs_H11a".into()),
        redacted: false,
    };
    assert_eq!(
        envelope::open(signature).unwrap(),
        (Family::OpenAi, sealed),
        "the item id and state, to restore the item"
    );
    let tool_ids: Vec<&Value> =
        of(&events, "content_block_start").iter().skip(2).map(|e| &e["content_block"]["id"]).collect();
    assert_eq!(tool_ids, [&json!("call_readA"), &json!("call_readB")]);
    let args: Vec<&str> = deltas
        .iter()
        .filter(|d| d["delta"]["type"] == "input_json_delta")
        .map(|d| d["delta"]["partial_json"].as_str().unwrap())
        .collect();
    assert_eq!(args, [r#"{"path":"a.txt"}"#, r#"{"path":"b.txt"}"#], "the second call's arguments from its done item");
    let delta = &of(&events, "message_delta")[0];
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
    assert_eq!(delta["usage"], json!({"input_tokens": 100, "output_tokens": 70, "cache_read_input_tokens": 400}));
}

/// H16 (stream side): Messages stream → a Gemini client: whole
/// `functionCall` parts with object args, thinking as `thought: true`, the
/// signature on the part after it, STOP and the usage with thoughts.
#[test]
fn h16_messages_stream_to_gemini() {
    let ctx =
        Context { renamed_tools: HashMap::from([("get_weather".to_string(), "weather.get".to_string())]), ..ctx() };
    let (out, events) = run("messages_tools", Format::Gemini, ctx, opts());
    assert_eq!(check(Format::Gemini, &out), Ending::Success);
    golden("h16_messages_tools_to_gemini", &out);
    let parts: Vec<&Value> = events.iter().filter_map(|(_, v)| v.pointer("/candidates/0/content/parts/0")).collect();
    assert_eq!(
        parts[0],
        &json!({"functionCall": {"name": "weather.get", "args": {"city": "Paris"}, "id": "toolu_01Paris"}}),
        "the client's tool name"
    );
    assert_eq!(parts[1]["functionCall"]["args"], json!({"city": "Tokyo"}));
    let last = &events.last().unwrap().1;
    assert_eq!(last["candidates"][0]["finishReason"], "STOP");
    assert_eq!(
        last["usageMetadata"],
        json!({"promptTokenCount": 80, "candidatesTokenCount": 40, "thoughtsTokenCount": 0, "cachedContentTokenCount": 64, "totalTokenCount": 120})
    );

    let (out, events) = run("messages_thinking", Format::Gemini, super::ctx(), opts());
    assert_eq!(check(Format::Gemini, &out), Ending::Success);
    golden("h16_messages_thinking_to_gemini", &out);
    let parts: Vec<&Value> = events.iter().filter_map(|(_, v)| v.pointer("/candidates/0/content/parts/0")).collect();
    assert_eq!(parts[0], &json!({"text": "The user wants ", "thought": true}));
    let opened = |part: &Value| envelope::open(part["thoughtSignature"].as_str().unwrap()).unwrap();
    let signature = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds+/==";
    let sealed =
        Sealed { text: Some("The user wants a greeting.".into()), value: Some(signature.into()), ..Sealed::default() };
    let thinking = (Family::Anthropic, sealed);
    assert_eq!(
        (&parts[2]["text"], opened(parts[2])),
        (&json!(""), thinking),
        "a signature followed by another gets a part of its own"
    );
    let data = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP";
    let redacted = (Family::Anthropic, Sealed { value: Some(data.into()), redacted: true, ..Sealed::default() });
    assert_eq!(
        (&parts[3]["text"], opened(parts[3])),
        (&json!("Hi there!"), redacted),
        "and the last goes on the part after it"
    );
}

/// H20: the upstream resets after three deltas: every client format ends
/// in its own error, never a success terminal.
#[test]
fn h20_a_mid_stream_reset_is_an_error_in_every_client_format() {
    let sources = [("chat_text", 3), ("messages_text", 5), ("responses_text", 6), ("gemini_text", 2)];
    for (name, events_before_reset) in sources {
        let f = fixture(name);
        let cut =
            f.bytes.windows(2).enumerate().filter(|(_, w)| w == b"\n\n").nth(events_before_reset - 1).unwrap().0 + 2;
        for to in Format::ALL {
            let mut t = StreamTranslator::new(f.format, to, ctx(), opts());
            let mut out = t.push(&f.bytes[..cut]).to_vec();
            assert!(t.has_content(), "{name}: content came before the reset");
            out.extend_from_slice(&t.fail(ErrorClass::Server, "upstream connection reset"));
            assert!(t.fail(ErrorClass::Server, "again").is_empty(), "one terminal only");
            let text = String::from_utf8(out).unwrap();
            assert_eq!(check(to, &text), Ending::Error, "{name} → {to}:\n{text}");
            assert!(!text.contains("message_stop") && !text.contains("[DONE]") && !text.contains("response.completed"));
            assert!(!text.contains("finishReason"));
            if name == "chat_text" {
                golden(&format!("h20_reset_to_{to}"), &text);
            }
            assert_eq!(t.error(), Some((ErrorClass::Server, "upstream connection reset")));
        }
    }
}

/// Each format's error mid-stream reaches every client as an error of the
/// same class.
#[test]
fn an_upstream_error_event_keeps_its_class() {
    for name in ["chat_error", "messages_error", "responses_error", "gemini_error"] {
        for to in Format::ALL {
            let (out, events) = run(name, to, ctx(), opts());
            assert_eq!(check(to, &out), Ending::Error, "{name} → {to}");
            let last = &events.last().unwrap().1;
            let named = match to {
                Format::Messages => last["error"]["type"] == "overloaded_error",
                Format::Chat => last["error"]["code"] == "server_is_overloaded",
                Format::Responses => last["response"]["error"]["code"] == "server_is_overloaded",
                Format::Gemini => last["error"]["status"] == "UNAVAILABLE",
            };
            assert!(named, "{name} → {to}: {last}");
        }
    }
}

/// What a stream gives a client to hold, the request side reads back as
/// the provider's state or as none: never a made-up signature that would
/// reach Anthropic as if it were one of its own (a 400).
#[test]
fn signatures_given_while_streaming_read_back_on_the_next_request() {
    let signature_of = |name: &str| {
        let (_, events) = run(name, Format::Messages, ctx(), opts());
        let deltas = of(&events, "content_block_delta");
        deltas.iter().find_map(|d| d["delta"]["signature"].as_str().map(str::to_owned)).unwrap()
    };
    let unsigned = crate::protocol::translate::envelope::read_slot(Family::Anthropic, &signature_of("chat_thinking"));
    assert_eq!((unsigned.opaque, unsigned.text.as_deref()), (None, Some("The user wants a greeting.")));
    let openai =
        crate::protocol::translate::envelope::read_slot(Family::Anthropic, &signature_of("responses_thinking"));
    let state =
        crate::protocol::translate::ir::Opaque { origin: Family::OpenAi, value: "gAAAAABoTHKencrypted==".into() };
    assert_eq!((openai.opaque, openai.id.as_deref()), (Some(state), Some("rs_THK0")));
    let own = crate::protocol::translate::envelope::read_slot(Family::Anthropic, &signature_of("messages_thinking"));
    assert_eq!(
        own.opaque.map(|o| o.value).as_deref(),
        Some("EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds+/==")
    );
}

/// OpenRouter's streamed `reasoning_details` (its text also sent as
/// `reasoning`, the signature in an entry of its own): the thinking reaches
/// the client once, and the entries, joined as a whole reply has them,
/// travel in the envelope the client keeps: toward Messages in the
/// signature, toward Responses in `encrypted_content`, never raw.
#[test]
fn openrouter_streamed_reasoning_details_are_gathered_into_the_envelope() {
    let (out, events) = run("chat_openrouter", Format::Messages, ctx(), opts());
    assert_eq!(check(Format::Messages, &out), Ending::Success);
    let deltas = of(&events, "content_block_delta");
    let thinking: String = deltas.iter().filter_map(|d| d["delta"]["thinking"].as_str()).collect();
    assert_eq!(thinking, "The user wants the weather.", "once, not again from the entries");
    let signature = deltas.iter().find_map(|d| d["delta"]["signature"].as_str()).unwrap();
    let slot = envelope::read_slot(Family::Anthropic, signature);
    let state = slot.opaque.expect("the entries as state");
    assert_eq!(state.origin, Family::OpenRouter);
    let entries: Value = serde_json::from_str(&state.value).unwrap();
    assert_eq!(
        entries,
        json!([{ "type": "reasoning.text", "text": "The user wants the weather.", "signature": "EqMDCkYIBxgCKkBAFZO8mVEd",
                 "format": "anthropic-claude-v1", "index": 0 }])
    );
    let kinds: Vec<&str> =
        of(&events, "content_block_start").iter().filter_map(|s| s["content_block"]["type"].as_str()).collect();
    assert_eq!(kinds, ["thinking", "text", "tool_use"]);

    let (out, events) = run("chat_openrouter", Format::Responses, ctx(), opts());
    assert_eq!(check(Format::Responses, &out), Ending::Success);
    let done = of(&events, "response.output_item.done");
    let reasoning = done.iter().find(|e| e["item"]["type"] == "reasoning").unwrap();
    let encrypted = reasoning["item"]["encrypted_content"].as_str().unwrap();
    assert!(encrypted.starts_with("sy1.ordt."), "not OpenAI's own: {encrypted}");
}
