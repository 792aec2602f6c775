//! H21, stream side: every stop reason of translation.md §C.2, from each
//! provider format to the intermediate reason and on to every client.

use serde_json::{json, Value};

use super::validate::{check, Ending};
use super::{ctx, decode, opts, parse_sse, translate};
use crate::protocol::translate::ir::{ErrorClass, Format, StopReason, StreamEvent};

/// The outcome a source stream should decode to.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Outcome {
    Stop(StopReason),
    Error(ErrorClass),
}
use Outcome::{Error, Stop};

fn messages(reason: &str, tool: bool) -> String {
    let block = if tool {
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"f","input":{}}}"#
    } else {
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":"x"}}"#
    };
    [
        r#"{"type":"message_start","message":{"id":"msg_1","model":"m","usage":{"input_tokens":1,"output_tokens":1}}}"#,
        block,
        r#"{"type":"content_block_stop","index":0}"#,
        &format!(r#"{{"type":"message_delta","delta":{{"stop_reason":"{reason}"}},"usage":{{"output_tokens":2}}}}"#),
        r#"{"type":"message_stop"}"#,
    ]
    .iter()
    .map(|d| format!("data: {d}\n\n"))
    .collect()
}

fn chat(reason: &str, tool: bool) -> String {
    let delta = if tool {
        r#"{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"f","arguments":"{}"}}]}"#
    } else {
        r#"{"content":"x"}"#
    };
    format!(
        "data: {{\"id\":\"c\",\"choices\":[{{\"index\":0,\"delta\":{delta}}}]}}\n\n\
         data: {{\"id\":\"c\",\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"{reason}\"}}]}}\n\ndata: [DONE]\n\n"
    )
}

fn responses(terminal: &str, tool: bool) -> String {
    let item = if tool {
        r#"{"type":"function_call","id":"fc_1","call_id":"call_1","name":"f","arguments":"{}"}"#
    } else {
        r#"{"type":"message","id":"msg_1","content":[{"type":"output_text","text":"x"}]}"#
    };
    format!(
        "data: {{\"type\":\"response.created\",\"response\":{{\"id\":\"resp_1\"}}}}\n\n\
         data: {{\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{item}}}\n\n\
         data: {{\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":{item}}}\n\n\
         data: {terminal}\n\n"
    )
}

fn gemini(reason: &str, tool: bool) -> String {
    let part = if tool { r#"{"functionCall":{"name":"f","args":{}}}"# } else { r#"{"text":"x"}"# };
    format!("data: {{\"candidates\":[{{\"content\":{{\"parts\":[{part}]}},\"finishReason\":\"{reason}\"}}],\"responseId\":\"g\"}}\n\n")
}

fn rows() -> Vec<(Format, String, Outcome)> {
    let mut rows = vec![];
    for (value, tool, outcome) in [
        ("end_turn", false, Stop(StopReason::EndTurn)),
        ("stop_sequence", false, Stop(StopReason::StopSequence)),
        ("max_tokens", false, Stop(StopReason::MaxTokens)),
        ("tool_use", true, Stop(StopReason::ToolUse)),
        ("pause_turn", false, Stop(StopReason::PauseTurn)),
        ("refusal", false, Stop(StopReason::Refusal)),
        ("model_context_window_exceeded", false, Stop(StopReason::MaxTokens)),
    ] {
        rows.push((Format::Messages, messages(value, tool), outcome));
    }
    for (value, tool, outcome) in [
        ("stop", false, Stop(StopReason::EndTurn)),
        ("length", false, Stop(StopReason::MaxTokens)),
        ("tool_calls", true, Stop(StopReason::ToolUse)),
        ("function_call", true, Stop(StopReason::ToolUse)),
        ("stop", true, Stop(StopReason::ToolUse)),
        ("content_filter", false, Stop(StopReason::Refusal)),
        ("insufficient_system_resource", false, Error(ErrorClass::Overloaded)),
        ("tool_calls", false, Error(ErrorClass::Server)),
    ] {
        rows.push((Format::Chat, chat(value, tool), outcome));
    }
    let completed = r#"{"type":"response.completed","response":{"status":"completed"}}"#;
    let incomplete = |why: &str| {
        format!(
            r#"{{"type":"response.incomplete","response":{{"status":"incomplete","incomplete_details":{{"reason":"{why}"}}}}}}"#
        )
    };
    let failed =
        r#"{"type":"response.failed","response":{"status":"failed","error":{"code":"server_error","message":"x"}}}"#;
    for (terminal, tool, outcome) in [
        (completed.to_string(), true, Stop(StopReason::ToolUse)),
        (completed.to_string(), false, Stop(StopReason::EndTurn)),
        (incomplete("max_output_tokens"), false, Stop(StopReason::MaxTokens)),
        (incomplete("content_filter"), false, Stop(StopReason::Refusal)),
        (failed.to_string(), false, Error(ErrorClass::Server)),
    ] {
        rows.push((Format::Responses, responses(&terminal, tool), outcome));
    }
    let refusals = ["SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY", "LANGUAGE"];
    for value in refusals {
        rows.push((Format::Gemini, gemini(value, false), Stop(StopReason::Refusal)));
    }
    for value in ["MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS"] {
        rows.push((Format::Gemini, gemini(value, false), Error(ErrorClass::Server)));
    }
    for (value, tool, outcome) in [
        ("STOP", true, Stop(StopReason::ToolUse)),
        ("STOP", false, Stop(StopReason::EndTurn)),
        ("OTHER", false, Stop(StopReason::EndTurn)),
        ("FINISH_REASON_UNSPECIFIED", false, Stop(StopReason::EndTurn)),
        ("MAX_TOKENS", false, Stop(StopReason::MaxTokens)),
    ] {
        rows.push((Format::Gemini, gemini(value, tool), outcome));
    }
    let blocked = "data: {\"promptFeedback\":{\"blockReason\":\"SAFETY\"},\"responseId\":\"g\"}\n\n".to_string();
    rows.push((Format::Gemini, blocked, Stop(StopReason::Refusal)));
    rows
}

/// What each client format says for an outcome.
fn client_says(to: Format, outcome: Outcome) -> Value {
    let reason = match outcome {
        Error(_) => return json!("error"),
        Stop(r) => r,
    };
    match to {
        Format::Messages => json!(crate::protocol::translate::vocab::messages_reason_name(reason)),
        Format::Chat => json!(match reason {
            StopReason::EndTurn | StopReason::StopSequence | StopReason::PauseTurn => "stop",
            StopReason::MaxTokens => "length",
            StopReason::ToolUse => "tool_calls",
            StopReason::Refusal => "content_filter",
        }),
        Format::Responses => json!(match reason {
            StopReason::MaxTokens => "incomplete/max_output_tokens",
            StopReason::Refusal => "incomplete/content_filter",
            _ => "completed",
        }),
        Format::Gemini => json!(match reason {
            StopReason::MaxTokens => "MAX_TOKENS",
            StopReason::Refusal => "SAFETY",
            _ => "STOP",
        }),
    }
}

/// What a client stream said about how it ended.
fn said(to: Format, text: &str) -> Value {
    let events = parse_sse(text);
    if check(to, text) == Ending::Error {
        return json!("error");
    }
    let find =
        |pointer: &str| events.iter().rev().find_map(|(_, v)| v.pointer(pointer).filter(|v| !v.is_null()).cloned());
    match to {
        Format::Messages => find("/delta/stop_reason").unwrap(),
        Format::Chat => find("/choices/0/finish_reason").unwrap(),
        Format::Responses => {
            let response = &events.last().unwrap().1["response"];
            match response["incomplete_details"]["reason"].as_str() {
                Some(why) => json!(format!("incomplete/{why}")),
                None => response["status"].clone(),
            }
        }
        Format::Gemini => find("/candidates/0/finishReason").unwrap(),
    }
}

#[test]
fn h21_every_stop_reason_reaches_every_client() {
    for (from, stream, outcome) in rows() {
        let events = decode(from, stream.as_bytes());
        let decoded = match events.last() {
            Some(StreamEvent::Finish { reason, .. }) => Stop(*reason),
            Some(StreamEvent::Error { class, .. }) => Error(*class),
            other => panic!("{other:?}"),
        };
        assert_eq!(decoded, outcome, "{from}: {stream}");
        for to in Format::ALL {
            let out = translate(from, to, ctx(), opts(), stream.as_bytes(), usize::MAX);
            assert_eq!(said(to, &out), client_says(to, outcome), "{from} → {to}: {stream}\n{out}");
        }
    }
}

/// An exhausted quota or credit balance mid-stream reaches every client as
/// such, not as a rate limit to wait out: Codex ends its turn on
/// `insufficient_quota` but retries `rate_limit_exceeded`, and a Messages
/// client is told `billing_error`, as it is when the error comes before the
/// reply.
#[test]
fn an_exhausted_quota_mid_stream_is_not_a_rate_limit() {
    let start =
        r#"{"type":"message_start","message":{"id":"msg_1","model":"m","usage":{"input_tokens":1,"output_tokens":1}}}"#;
    let billing = r#"{"type":"error","error":{"type":"billing_error","message":"credit balance too low"}}"#;
    let anthropic = format!("event: message_start\ndata: {start}\n\nevent: error\ndata: {billing}\n\n");
    let failed = r#"{"type":"response.failed","response":{"id":"resp_1","status":"failed","error":{"code":"insufficient_quota","message":"quota exceeded"}}}"#;
    let openai = format!("event: response.failed\ndata: {failed}\n\n");
    for (from, source) in [(Format::Messages, &anthropic), (Format::Responses, &openai)] {
        let error = |to: Format| {
            let text = translate(from, to, ctx(), opts(), source.as_bytes(), 7);
            let (_, last) = parse_sse(&text).pop().expect("a terminal event");
            last
        };
        let responses = error(Format::Responses);
        assert_eq!(responses["response"]["error"]["code"], "insufficient_quota", "{from:?}");
        let chat = error(Format::Chat);
        assert_eq!(
            (&chat["error"]["code"], &chat["error"]["type"]),
            (&json!("insufficient_quota"), &json!("insufficient_quota"))
        );
        assert_eq!(error(Format::Messages)["error"]["type"], "billing_error", "{from:?}");
        assert_eq!(error(Format::Gemini)["error"]["status"], "RESOURCE_EXHAUSTED", "{from:?}");
    }
    // A plain rate limit stays one.
    let limited = openai.replace("insufficient_quota", "rate_limit_exceeded");
    let text = translate(Format::Responses, Format::Messages, ctx(), opts(), limited.as_bytes(), 7);
    assert_eq!(parse_sse(&text).pop().expect("a terminal event").1["error"]["type"], "rate_limit_error");
}
