//! A stored event stream folded into the JSON answer a client that did not
//! stream would have had: the deltas joined per choice or block, tool-call
//! arguments joined and (for messages) parsed, stop reasons and usage
//! taken from where each protocol sends them last.
//!
//! - chat and completions: per choice index, `content`, `reasoning_content`,
//!   `refusal`, `text` and each tool call's `arguments` joined; the finish
//!   reason and the usage chunk kept;
//! - messages: `message_start`'s message, its blocks filled from their
//!   deltas (`input_json_delta` parsed into `input`), `message_delta`'s stop
//!   reason and usage laid over it;
//! - responses: the terminal event's `response`, which is whole;
//! - gemini: the chunks' parts joined (adjacent text parts merged), the last
//!   finish reason and usage.
//!
//! Also here: whether a stream is whole, which is what may be stored.

use serde_json::{json, Map, Value};

use super::key::Wire;
use crate::protocol::sse::{self, Splitter};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FoldError {
    #[error("the stored stream is not a whole {0} stream")]
    Incomplete(&'static str),
    #[error("{0} streams are not folded")]
    Unsupported(&'static str),
}

/// The events of a stream: name (if any) and parsed data; `[DONE]` as a
/// string, comments and unparsable data left out.
fn events(stream: &[u8]) -> Vec<(Option<String>, Value)> {
    let mut splitter = Splitter::default();
    let mut raw = splitter.push(stream);
    raw.push(splitter.take_pending());
    raw.iter()
        .filter_map(|event| {
            let (name, data) = sse::parse(event);
            let data = data.trim();
            if data == "[DONE]" {
                return Some((name, Value::from("[DONE]")));
            }
            serde_json::from_str(data).ok().map(|v| (name, v))
        })
        .collect()
}

fn kind<'a>(name: &'a Option<String>, data: &'a Value) -> &'a str {
    name.as_deref().or_else(|| data.get("type").and_then(Value::as_str)).unwrap_or("")
}

/// Whether `stream` ended as a successful answer of `wire` ends: chat and
/// completions with `[DONE]`, messages with `message_stop`, responses with
/// `response.completed` or `.incomplete`, gemini with a finish reason; and
/// no error event anywhere. Only such a stream may be stored.
pub fn is_whole(wire: Wire, stream: &[u8]) -> bool {
    let events = events(stream);
    let failed = events.iter().any(|(name, data)| {
        let k = kind(name, data);
        k == "error"
            || k == "response.failed"
            || (data.get("error").is_some_and(|e| !e.is_null()) && !k.starts_with("response."))
    });
    if failed {
        return false;
    }
    let last = |f: &dyn Fn(&str, &Value) -> bool| events.iter().any(|(n, d)| f(kind(n, d), d));
    match wire {
        Wire::Chat | Wire::Completions => last(&|_, d| d.as_str() == Some("[DONE]")),
        Wire::Messages => last(&|k, _| k == "message_stop"),
        Wire::Responses => last(&|k, _| k == "response.completed" || k == "response.incomplete"),
        Wire::Gemini => last(&|_, d| d.pointer("/candidates/0/finishReason").is_some_and(|r| !r.is_null())),
        Wire::Embeddings => false,
    }
}

/// `stream` (a whole stream of `wire`) as the JSON answer.
pub fn to_json(wire: Wire, stream: &[u8]) -> Result<Vec<u8>, FoldError> {
    let events = events(stream);
    let value = match wire {
        Wire::Chat => choices(&events, "chat.completion", false),
        Wire::Completions => choices(&events, "text_completion", true),
        Wire::Messages => messages(&events),
        Wire::Responses => responses(&events),
        Wire::Gemini => gemini(&events),
        Wire::Embeddings => return Err(FoldError::Unsupported("embeddings")),
    }
    .ok_or(FoldError::Incomplete(wire.as_str()))?;
    Ok(value.to_string().into_bytes())
}

fn append(into: &mut Map<String, Value>, key: &str, piece: &Value) {
    let Some(piece) = piece.as_str() else { return };
    match into.get_mut(key) {
        Some(Value::String(s)) => s.push_str(piece),
        _ => {
            into.insert(key.into(), Value::from(piece));
        }
    }
}

/// One choice being put together.
#[derive(Default)]
struct Choice {
    message: Map<String, Value>,
    /// Tool calls by their stream index.
    calls: Vec<(u64, Map<String, Value>)>,
    finish_reason: Value,
}

fn choices(events: &[(Option<String>, Value)], object: &str, completions: bool) -> Option<Value> {
    let mut head: Option<Map<String, Value>> = None;
    let mut usage = Value::Null;
    let mut built: Vec<(u64, Choice)> = Vec::new();
    let mut done = false;
    for (_, data) in events {
        if data.as_str() == Some("[DONE]") {
            done = true;
            continue;
        }
        let Some(chunk) = data.as_object() else { continue };
        if head.is_none() {
            let mut h = Map::new();
            for key in ["id", "created", "model", "system_fingerprint", "service_tier"] {
                if let Some(v) = chunk.get(key) {
                    h.insert(key.into(), v.clone());
                }
            }
            head = Some(h);
        }
        if chunk.get("usage").is_some_and(|u| !u.is_null()) {
            usage = chunk["usage"].clone();
        }
        for c in chunk.get("choices").and_then(Value::as_array).into_iter().flatten() {
            let index = c.get("index").and_then(Value::as_u64).unwrap_or(0);
            let at = match built.iter().position(|(i, _)| *i == index) {
                Some(at) => at,
                None => {
                    built.push((index, Choice::default()));
                    built.len() - 1
                }
            };
            let choice = &mut built[at].1;
            if c.get("finish_reason").is_some_and(|f| !f.is_null()) {
                choice.finish_reason = c["finish_reason"].clone();
            }
            let delta = if completions { Some(c) } else { c.get("delta") };
            let Some(delta) = delta.and_then(Value::as_object) else { continue };
            if let Some(role) = delta.get("role") {
                choice.message.insert("role".into(), role.clone());
            }
            for key in ["content", "reasoning_content", "reasoning", "refusal", "text"] {
                append(&mut choice.message, key, delta.get(key).unwrap_or(&Value::Null));
            }
            for call in delta.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
                tool_call_delta(&mut choice.calls, call);
            }
        }
    }
    if !done {
        return None;
    }
    let mut answer = head?;
    answer.insert("object".into(), Value::from(object));
    built.sort_by_key(|(i, _)| *i);
    let choices: Vec<Value> = built
        .into_iter()
        .map(|(index, c)| {
            if completions {
                let text = c.message.get("text").cloned().unwrap_or(json!(""));
                json!({"text": text, "index": index, "logprobs": null, "finish_reason": c.finish_reason})
            } else {
                let mut message = c.message;
                message.entry("role").or_insert(json!("assistant"));
                message.entry("content").or_insert(Value::Null);
                message.entry("refusal").or_insert(Value::Null);
                if !c.calls.is_empty() {
                    let calls = c.calls.into_iter().map(|(_, call)| Value::Object(call)).collect();
                    message.insert("tool_calls".into(), Value::Array(calls));
                }
                json!({"index": index, "message": message, "logprobs": null, "finish_reason": c.finish_reason})
            }
        })
        .collect();
    answer.insert("choices".into(), Value::Array(choices));
    if !usage.is_null() {
        answer.insert("usage".into(), usage);
    }
    Some(Value::Object(answer))
}

fn tool_call_delta(calls: &mut Vec<(u64, Map<String, Value>)>, call: &Value) {
    let index = call.get("index").and_then(Value::as_u64).unwrap_or(calls.len() as u64);
    let at = match calls.iter().position(|(i, _)| *i == index) {
        Some(at) => at,
        None => {
            let fresh = json!({"id": null, "type": "function", "function": {"name": "", "arguments": ""}});
            calls.push((index, fresh.as_object().cloned().unwrap_or_default()));
            calls.len() - 1
        }
    };
    let into = &mut calls[at].1;
    for key in ["id", "type"] {
        if let Some(v) = call.get(key).filter(|v| !v.is_null()) {
            into.insert(key.into(), v.clone());
        }
    }
    if let (Some(f), Some(Value::Object(into_f))) = (call.get("function"), into.get_mut("function")) {
        append(into_f, "name", f.get("name").unwrap_or(&Value::Null));
        append(into_f, "arguments", f.get("arguments").unwrap_or(&Value::Null));
    }
}

fn messages(events: &[(Option<String>, Value)]) -> Option<Value> {
    let mut message: Option<Map<String, Value>> = None;
    let mut blocks: Vec<(u64, Map<String, Value>, String)> = Vec::new();
    let mut stopped = false;
    for (name, data) in events {
        match kind(name, data) {
            "message_start" => message = data.get("message").and_then(Value::as_object).cloned(),
            "content_block_start" => {
                let index = data.get("index").and_then(Value::as_u64).unwrap_or(blocks.len() as u64);
                let block = data.get("content_block").and_then(Value::as_object).cloned().unwrap_or_default();
                blocks.push((index, block, String::new()));
            }
            "content_block_delta" => {
                let index = data.get("index").and_then(Value::as_u64);
                let Some((_, block, json)) = blocks.iter_mut().find(|(i, _, _)| Some(*i) == index) else { continue };
                let delta = data.get("delta").cloned().unwrap_or(Value::Null);
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => append(block, "text", &delta["text"]),
                    Some("thinking_delta") => append(block, "thinking", &delta["thinking"]),
                    Some("signature_delta") => {
                        block.insert("signature".into(), delta["signature"].clone());
                    }
                    Some("input_json_delta") => json.push_str(delta["partial_json"].as_str().unwrap_or("")),
                    Some("citations_delta") => {
                        if let Value::Array(list) = block.entry("citations").or_insert(json!([])) {
                            list.push(delta["citation"].clone());
                        }
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                let m = message.as_mut()?;
                if let Some(delta) = data.get("delta").and_then(Value::as_object) {
                    for (k, v) in delta {
                        m.insert(k.clone(), v.clone());
                    }
                }
                if let Some(usage) = data.get("usage").and_then(Value::as_object) {
                    if let Value::Object(u) = m.entry("usage").or_insert(json!({})) {
                        for (k, v) in usage.iter().filter(|(_, v)| !v.is_null()) {
                            u.insert(k.clone(), v.clone());
                        }
                    }
                }
            }
            "message_stop" => stopped = true,
            _ => {}
        }
    }
    let mut message = message.filter(|_| stopped)?;
    blocks.sort_by_key(|(i, _, _)| *i);
    let content: Vec<Value> = blocks
        .into_iter()
        .map(|(_, mut block, json)| {
            if !json.is_empty() || block.contains_key("input") {
                let input =
                    if json.trim().is_empty() { json!({}) } else { serde_json::from_str(&json).unwrap_or(json!({})) };
                block.insert("input".into(), input);
            }
            Value::Object(block)
        })
        .collect();
    message.insert("content".into(), Value::Array(content));
    Some(Value::Object(message))
}

fn responses(events: &[(Option<String>, Value)]) -> Option<Value> {
    events
        .iter()
        .rev()
        .find(|(name, data)| matches!(kind(name, data), "response.completed" | "response.incomplete"))
        .and_then(|(_, data)| data.get("response").cloned())
}

fn gemini(events: &[(Option<String>, Value)]) -> Option<Value> {
    let mut last: Option<&Map<String, Value>> = None;
    let mut parts: Vec<Value> = Vec::new();
    for (_, data) in events {
        let Some(chunk) = data.as_object() else { continue };
        for part in data.pointer("/candidates/0/content/parts").and_then(Value::as_array).into_iter().flatten() {
            let thought = |p: &Value| p.get("thought").and_then(Value::as_bool).unwrap_or(false);
            let mergeable = |p: &Value| p.get("text").is_some() && p.as_object().is_some_and(|o| o.len() <= 2);
            match parts.last_mut() {
                Some(prev) if mergeable(prev) && mergeable(part) && thought(prev) == thought(part) => {
                    if let Some(p) = prev.as_object_mut() {
                        append(p, "text", &part["text"]);
                    }
                }
                _ => parts.push(part.clone()),
            }
        }
        last = Some(chunk);
    }
    let mut answer = last?.clone();
    let finish = answer.get("candidates").and_then(|c| c.pointer("/0/finishReason")).cloned();
    finish.as_ref().filter(|f| !f.is_null())?;
    if let Some(candidate) = answer.get_mut("candidates").and_then(|c| c.get_mut(0)).and_then(Value::as_object_mut) {
        candidate.insert("content".into(), json!({"role": "model", "parts": parts}));
    }
    Some(Value::Object(answer))
}
