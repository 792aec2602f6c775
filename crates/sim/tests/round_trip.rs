//! The agent script's tool-call round trip in each wire format, streamed and
//! not, driven with plain HTTP: call 1 offers tools and gets a tool call;
//! call 2 carries the tool's result and gets text quoting it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use serde_json::json;
use support::{apply_patch, bash, read, send, Format};
use switchyard_sim::{Script, SimProvider, ToolPlan};

const RESULT: &str = "hi\n";

async fn round_trip(format: Format, stream: bool) {
    let plan = ToolPlan::call("Bash", json!({ "command": "echo hi" }));
    let sim = SimProvider::start("sim", Script::agent().tool_plan(plan)).await.unwrap();
    // Bash is not the first tool offered: the plan picks it by name.
    let tools = [read(), bash()];
    let (tool_stop, text_stop) = format.stops();

    let first = send(&sim, format, stream, &tools, &[], "").await;
    assert_eq!(first.text, "", "{format:?}: a tool-call turn has no text");
    assert_eq!(first.stop, tool_stop, "{format:?}");
    assert_eq!(first.calls.len(), 1, "{format:?}: {:?}", first.calls);
    let call = &first.calls[0];
    assert_eq!(call.name, "Bash");
    assert_eq!(call.args(), json!({ "command": "echo hi" }), "{format:?}: the arguments reassemble to the plan's");
    if stream && format != Format::Gemini {
        assert!(call.deltas >= 2, "{format:?}: arguments streamed in several pieces, got {}", call.deltas);
    }
    let prefix = match format {
        Format::Chat | Format::Responses => Some("call_"),
        Format::Messages => Some("toolu_"),
        Format::Gemini => None,
    };
    assert_eq!(call.id.as_deref().map(|id| id.starts_with(prefix.unwrap())), prefix.map(|_| true), "{call:?}");

    let second = send(&sim, format, stream, &tools, &first.calls, RESULT).await;
    assert!(second.calls.is_empty(), "{format:?}: {:?}", second.calls);
    assert_eq!(second.text, "the tool said: hi\n", "{format:?}");
    assert_eq!(second.stop, text_stop, "{format:?}");
    if stream {
        assert!(second.text_deltas >= 2, "{format:?}: text split across chunks");
    }
    assert_eq!(sim.calls(), 2);
}

#[tokio::test]
async fn chat_round_trip() {
    round_trip(Format::Chat, false).await;
}

#[tokio::test]
async fn chat_stream_round_trip() {
    round_trip(Format::Chat, true).await;
}

#[tokio::test]
async fn responses_round_trip() {
    round_trip(Format::Responses, false).await;
}

#[tokio::test]
async fn responses_stream_round_trip() {
    round_trip(Format::Responses, true).await;
}

#[tokio::test]
async fn messages_round_trip() {
    round_trip(Format::Messages, false).await;
}

#[tokio::test]
async fn messages_stream_round_trip() {
    round_trip(Format::Messages, true).await;
}

#[tokio::test]
async fn gemini_round_trip() {
    round_trip(Format::Gemini, false).await;
}

#[tokio::test]
async fn gemini_stream_round_trip() {
    round_trip(Format::Gemini, true).await;
}

/// Codex's `apply_patch` is a custom tool: on Responses the call is a
/// `custom_tool_call` carrying the raw patch; emulated as a function (as a
/// gateway must for Chat) the same plan fills the function's one string
/// parameter.
#[tokio::test]
async fn a_custom_tool_is_called_with_its_raw_input() {
    let patch = "*** Begin Patch\n*** Add File: hello.txt\n+hi\n*** End Patch\n";
    let sim = SimProvider::start("sim", Script::agent().tool_plan(ToolPlan::call("apply_patch", json!(patch))))
        .await
        .unwrap();
    for stream in [false, true] {
        let first = send(&sim, Format::Responses, stream, &[bash(), apply_patch()], &[], "").await;
        let call = &first.calls[0];
        assert!(call.custom, "{call:?}");
        assert_eq!((call.name.as_str(), call.input.as_str()), ("apply_patch", patch));
        if stream {
            assert!(call.deltas >= 2, "the patch streams in custom_tool_call_input deltas");
        }
        let second = send(&sim, Format::Responses, stream, &[apply_patch()], &first.calls, "Done!").await;
        assert_eq!(second.text, "the tool said: Done!");
    }

    let emulated = support::Tool {
        name: "apply_patch",
        schema: Some(
            json!({ "type": "object", "properties": { "input": { "type": "string" } }, "required": ["input"] }),
        ),
    };
    let first = send(&sim, Format::Chat, true, &[emulated], &[], "").await;
    assert_eq!(first.calls[0].args(), json!({ "input": patch }));
}

/// `Script::agent()` calls the first tool offered, with arguments made from
/// its schema: every required property, nothing else.
#[tokio::test]
async fn the_default_plan_calls_the_first_tool_with_schema_arguments() {
    let sim = SimProvider::start("sim", Script::agent()).await.unwrap();
    let no_args = support::Tool { name: "TodoRead", schema: Some(json!({ "type": "object", "properties": {} })) };
    for format in Format::ALL {
        let out = send(&sim, format, true, &[read(), bash()], &[], "").await;
        assert_eq!((out.calls[0].name.as_str(), out.calls[0].args()), ("Read", json!({ "file_path": "sim" })));
        let out = send(&sim, format, false, &[no_args.clone(), bash()], &[], "").await;
        assert_eq!(out.calls[0].args(), json!({}), "{format:?}: a no-arg tool gets {{}}");
    }
}

/// Several calls in one turn: Chat tool indexes, Messages block indexes and
/// Responses output indexes count up; Gemini sends every call in one chunk.
#[tokio::test]
async fn parallel_calls_are_sent_in_order() {
    let plan = ToolPlan::call("Bash", json!({ "command": "ls" })).and_tool("Read");
    let sim = SimProvider::start("sim", Script::agent().tool_plan(plan)).await.unwrap();
    for format in Format::ALL {
        for stream in [false, true] {
            let first = send(&sim, format, stream, &[read(), bash()], &[], "").await;
            let names: Vec<&str> = first.calls.iter().map(|c| c.name.as_str()).collect();
            assert_eq!(names, ["Bash", "Read"], "{format:?} stream={stream}");
            assert_eq!(first.calls[1].args(), json!({ "file_path": "sim" }));
            if let (Some(a), Some(b)) = (&first.calls[0].id, &first.calls[1].id) {
                assert_ne!(a, b, "each call has its own id");
            }
            let second = send(&sim, format, stream, &[read(), bash()], &first.calls, "ok").await;
            assert_eq!(second.text, "the tool said: ok; ok", "{format:?} stream={stream}");
        }
    }
}

/// A long result is quoted to its first 200 characters; a Messages result
/// may be a plain string as well as a block list.
#[tokio::test]
async fn the_answer_quotes_the_start_of_a_long_result() {
    let sim = SimProvider::start("sim", Script::agent()).await.unwrap();
    let long = "é".repeat(150) + &"x".repeat(150);
    let body = json!({
        "model": "claude-test", "max_tokens": 10,
        "tools": [{ "name": "Bash", "input_schema": { "type": "object" } }],
        "messages": [
            { "role": "user", "content": "go" },
            { "role": "assistant", "content": [{ "type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {} }] },
            { "role": "user", "content": [{ "type": "tool_result", "tool_use_id": "toolu_1", "content": long }] },
        ],
    });
    let reply: serde_json::Value = reqwest::Client::new()
        .post(format!("{}/messages", sim.base_url()))
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let expected = format!("the tool said: {}{}", "é".repeat(150), "x".repeat(50));
    assert_eq!(reply["content"][0]["text"], expected);
    assert_eq!(reply["stop_reason"], "end_turn");
}

/// Without tools (a title request, say) the agent answers as `Script::ok()`
/// does; endpoints without tools are untouched.
#[tokio::test]
async fn without_tools_the_agent_answers_with_the_ordinary_text() {
    let sim = SimProvider::start("sim", Script::agent()).await.unwrap();
    let out = send(&sim, Format::Messages, true, &[], &[], "").await;
    assert_eq!(out.text, "Hello from sim. w3 w4");
    let out = send(&sim, Format::Gemini, true, &[], &[], "").await;
    assert_eq!(out.text, "Hello from sim. w3 w4");
    assert_eq!(out.text_deltas, 5);
}

/// A result for a call the conversation never made is refused with the 400
/// the real provider sends, in the format's own error shape.
#[tokio::test]
async fn an_unpaired_tool_result_is_refused() {
    let sim = SimProvider::start("sim", Script::agent()).await.unwrap();
    let body = json!({
        "model": "m", "max_tokens": 16,
        "tools": [{ "name": "Bash", "input_schema": { "type": "object" } }],
        "messages": [
            { "role": "user", "content": "go" },
            { "role": "assistant", "content": [{ "type": "tool_use", "id": "toolu_a", "name": "Bash", "input": {} }] },
            { "role": "user", "content": [{ "type": "tool_result", "tool_use_id": "toolu_b", "content": "hi" }] },
        ],
    });
    let r = reqwest::Client::new().post(format!("{}/messages", sim.base_url())).json(&body).send().await.unwrap();
    assert_eq!(r.status(), 400);
    let error: serde_json::Value = r.json().await.unwrap();
    assert_eq!(error["error"]["type"], "invalid_request_error");
    assert!(error["error"]["message"].as_str().unwrap().contains("toolu_b"), "{error}");
    // Only an agent checks: a plain script answers anything.
    let plain = SimProvider::start("plain", Script::ok()).await.unwrap();
    let r = reqwest::Client::new().post(format!("{}/messages", plain.base_url())).json(&body).send().await.unwrap();
    assert_eq!(r.status(), 200);
}
