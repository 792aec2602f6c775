//! Validators of each client format's event rules, as its SDKs enforce
//! them: what may come when, numbering, and exactly one terminal.

use std::collections::HashMap;

use serde_json::Value;

use super::parse_sse;
use crate::protocol::translate::ir::Format;

/// How a valid client stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    Success,
    Error,
}

pub fn check(format: Format, text: &str) -> Ending {
    let events = parse_sse(text);
    match format {
        Format::Messages => messages(&events),
        Format::Responses => responses(&events),
        Format::Chat => chat(&events),
        Format::Gemini => gemini(&events),
    }
}

fn s<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}

/// Messages: `message_start`, `ping`, blocks numbered 0.. with every delta
/// inside its block and of its type, thinking closed with a non-empty
/// signature, one `message_delta` then `message_stop` last, or an `error`
/// last and no `message_stop`.
pub fn messages(events: &[(String, Value)]) -> Ending {
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    let error_first = names.first() == Some(&"error");
    if !error_first {
        assert_eq!(names.get(..2), Some(&["message_start", "ping"][..]), "{names:?}");
    }
    let mut open: HashMap<u64, (String, bool)> = HashMap::new();
    let mut next = 0;
    let mut deltas = 0;
    for (i, (name, data)) in events.iter().enumerate() {
        assert_eq!(s(data, "/type"), name, "the data's type is the event's name");
        let last = i + 1 == events.len();
        match name.as_str() {
            "message_start" => assert_eq!(i, 0),
            "ping" => {}
            "content_block_start" => {
                let index = data["index"].as_u64().unwrap();
                assert_eq!(index, next, "block indexes are sequential");
                next += 1;
                let kind = s(data, "/content_block/type").to_string();
                assert!(["text", "thinking", "redacted_thinking", "tool_use"].contains(&kind.as_str()), "{kind}");
                if kind == "tool_use" {
                    let id = s(data, "/content_block/id");
                    assert!(!id.is_empty() && id.len() <= 64, "tool id {id}");
                    assert!(id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'), "tool id {id}");
                }
                open.insert(index, (kind, false));
            }
            "content_block_delta" => {
                let index = data["index"].as_u64().unwrap();
                let (kind, signed) = open.get_mut(&index).unwrap_or_else(|| panic!("delta outside block {index}"));
                let want = match s(data, "/delta/type") {
                    "text_delta" => {
                        assert!(!s(data, "/delta/text").is_empty());
                        "text"
                    }
                    "thinking_delta" => "thinking",
                    "signature_delta" => {
                        assert!(!s(data, "/delta/signature").is_empty(), "empty signature");
                        *signed = true;
                        "thinking"
                    }
                    "input_json_delta" => "tool_use",
                    other => panic!("delta type {other}"),
                };
                assert_eq!(kind, want, "delta fits its block");
                deltas += 1;
            }
            "content_block_stop" => {
                let index = data["index"].as_u64().unwrap();
                let (kind, signed) = open.remove(&index).expect("stop of an open block");
                assert!(kind != "thinking" || signed, "thinking closed without a signature");
            }
            "message_delta" => {
                assert_eq!(names[i + 1..], ["message_stop"], "one message_delta, then message_stop");
                assert!(open.is_empty(), "blocks closed before the end");
                assert!(!s(data, "/delta/stop_reason").is_empty());
                assert!(data.pointer("/usage/output_tokens").is_some_and(Value::is_u64));
            }
            "message_stop" => {
                assert!(last);
                return Ending::Success;
            }
            "error" => {
                assert!(last, "error is last");
                assert!(!names.contains(&"message_stop") && !names.contains(&"message_delta"));
                assert!(!s(data, "/error/type").is_empty());
                return Ending::Error;
            }
            other => panic!("unexpected event {other}"),
        }
    }
    let _ = deltas;
    panic!("no terminal: {names:?}")
}

/// Responses: increasing `sequence_number` from 0; `response.created` and
/// `response.in_progress` first; one item at a time, each delta inside its
/// item (by id and output index); output indexes sequential; the terminal
/// last, once, with the done items as its output and full usage.
pub fn responses(events: &[(String, Value)]) -> Ending {
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    let failed_only = names.first() == Some(&"response.failed");
    if !failed_only {
        assert_eq!(names.get(..2), Some(&["response.created", "response.in_progress"][..]), "{names:?}");
    }
    let mut current: Option<(String, u64, String)> = None; // id, output index, type
    let mut part_open = false;
    let mut done_items: Vec<Value> = Vec::new();
    for (i, (name, data)) in events.iter().enumerate() {
        assert_eq!(s(data, "/type"), name);
        assert_eq!(data["sequence_number"].as_u64(), Some(i as u64), "sequence numbers count from 0");
        let last = i + 1 == events.len();
        let in_item = |data: &Value, current: &Option<(String, u64, String)>, kind: &str| {
            let (id, index, t) = current.as_ref().unwrap_or_else(|| panic!("{name} without an active item"));
            assert_eq!(s(data, "/item_id"), id, "{name} names the active item");
            assert_eq!(data["output_index"].as_u64(), Some(*index));
            assert_eq!(t, kind, "{name} in a {t} item");
        };
        match name.as_str() {
            "response.created" | "response.in_progress" => {
                assert!(i < 2);
                assert!(s(data, "/response/id").starts_with("resp_"));
            }
            "response.output_item.added" => {
                assert!(current.is_none(), "items do not overlap");
                let index = data["output_index"].as_u64().unwrap();
                assert_eq!(index, done_items.len() as u64, "output indexes are sequential");
                let id = s(data, "/item/id").to_string();
                assert!(!id.is_empty());
                current = Some((id, index, s(data, "/item/type").to_string()));
            }
            "response.content_part.added" => {
                in_item(data, &current, "message");
                part_open = true;
            }
            "response.output_text.delta" | "response.output_text.done" => {
                in_item(data, &current, "message");
                assert!(part_open);
            }
            "response.content_part.done" => {
                in_item(data, &current, "message");
                part_open = false;
            }
            "response.reasoning_summary_part.added"
            | "response.reasoning_summary_text.delta"
            | "response.reasoning_summary_text.done"
            | "response.reasoning_summary_part.done" => {
                in_item(data, &current, "reasoning");
                assert_eq!(data["summary_index"].as_u64(), Some(0), "summary_index present");
            }
            "response.function_call_arguments.delta" | "response.function_call_arguments.done" => {
                in_item(data, &current, "function_call")
            }
            "response.custom_tool_call_input.delta" | "response.custom_tool_call_input.done" => {
                in_item(data, &current, "custom_tool_call")
            }
            "response.output_item.done" => {
                let (id, index, kind) = current.take().expect("done of an active item");
                assert!(!part_open);
                assert_eq!(
                    (s(data, "/item/id"), data["output_index"].as_u64(), s(data, "/item/type")),
                    (id.as_str(), Some(index), kind.as_str())
                );
                done_items.push(data["item"].clone());
            }
            "response.completed" | "response.incomplete" | "response.failed" => {
                assert!(last, "the terminal is last");
                assert!(current.is_none() || name == "response.failed", "items done before success");
                let response = &data["response"];
                assert_eq!(response["output"], Value::Array(done_items.clone()), "output is the done items");
                if name == "response.failed" {
                    assert!(!s(response, "/error/code").is_empty());
                    return Ending::Error;
                }
                for field in [
                    "/input_tokens",
                    "/input_tokens_details/cached_tokens",
                    "/output_tokens",
                    "/output_tokens_details/reasoning_tokens",
                    "/total_tokens",
                ] {
                    assert!(response["usage"].pointer(field).is_some_and(Value::is_u64), "usage{field}");
                }
                if name == "response.incomplete" {
                    assert!(!s(response, "/incomplete_details/reason").is_empty());
                }
                return Ending::Success;
            }
            other => panic!("unexpected event {other}"),
        }
    }
    panic!("no terminal: {names:?}")
}

/// Chat: chunks then `[DONE]`, or an error chunk last; one finish reason;
/// tool calls numbered 0.. with id and name on the first delta only.
pub fn chat(events: &[(String, Value)]) -> Ending {
    let mut finishes = 0;
    let mut calls: HashMap<u64, bool> = HashMap::new();
    for (i, (name, data)) in events.iter().enumerate() {
        assert!(name.is_empty(), "chat events are unnamed");
        let last = i + 1 == events.len();
        if data == "[DONE]" {
            assert!(last && finishes == 1, "[DONE] last, after one finish");
            return Ending::Success;
        }
        if data.get("error").is_some() {
            assert!(last, "the error chunk is last");
            assert!(!s(data, "/error/message").is_empty());
            return Ending::Error;
        }
        assert_eq!(s(data, "/object"), "chat.completion.chunk");
        for choice in data["choices"].as_array().unwrap() {
            if !choice["finish_reason"].is_null() {
                finishes += 1;
            }
            for call in choice.pointer("/delta/tool_calls").and_then(Value::as_array).into_iter().flatten() {
                let index = call["index"].as_u64().unwrap();
                let first = !calls.contains_key(&index);
                if first {
                    assert_eq!(index, calls.len() as u64, "tool indexes are ordinals");
                    assert!(call["id"].is_string());
                }
                assert_eq!(call.get("id").is_some(), first, "id only on the first delta");
                calls.insert(index, true);
            }
        }
    }
    panic!("no terminal")
}

/// Gemini: every chunk a response with one candidate (or an error, last);
/// a finish reason only on the last chunk; calls whole, with object args.
pub fn gemini(events: &[(String, Value)]) -> Ending {
    for (i, (name, data)) in events.iter().enumerate() {
        assert!(name.is_empty());
        let last = i + 1 == events.len();
        if data.get("error").is_some() {
            assert!(last);
            assert!(data.pointer("/error/code").is_some_and(Value::is_u64));
            assert!(!s(data, "/error/status").is_empty());
            return Ending::Error;
        }
        let candidate = &data["candidates"][0];
        for part in candidate.pointer("/content/parts").and_then(Value::as_array).into_iter().flatten() {
            if let Some(call) = part.get("functionCall") {
                assert!(call["args"].is_object(), "args are an object");
                assert!(!s(call, "/name").is_empty());
            }
        }
        if candidate.get("finishReason").is_some() {
            assert!(last, "finishReason on the last chunk only");
            assert!(data.pointer("/usageMetadata/totalTokenCount").is_some_and(Value::is_u64));
            return Ending::Success;
        }
    }
    panic!("no terminal")
}
