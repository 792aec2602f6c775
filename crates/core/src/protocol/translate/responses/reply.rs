//! Responses non-streamed reply ↔ intermediate form.

use serde_json::{json, Value};

use crate::protocol::translate::envelope;
use crate::protocol::translate::error::UpstreamError;
use crate::protocol::translate::ir::{Context, ErrorClass, Family, Opaque, StopReason, Tokens};
use crate::protocol::translate::message::{CallKind, Part, Reply};
use crate::protocol::translate::openai;
use crate::protocol::translate::reply::{self as common, finish, item_id, n};
use crate::protocol::translate::vocab::{self, Classified};
use crate::protocol::translate::wire::{args_text, joined, texts};

fn unreadable(what: &str) -> UpstreamError {
    UpstreamError::new(ErrorClass::Server, format!("the provider's reply is unreadable: {what}"))
}

pub(crate) fn decode(body: &[u8]) -> Result<Reply, UpstreamError> {
    let v: Value = serde_json::from_slice(body).map_err(|e| unreadable(&e.to_string()))?;
    let status = v.get("status").and_then(Value::as_str).unwrap_or("completed");
    let stop = match status {
        "completed" => StopReason::EndTurn,
        "incomplete" => {
            vocab::responses_incomplete(v.pointer("/incomplete_details/reason").and_then(Value::as_str).unwrap_or(""))
        }
        _ => return Err(failed(&v, status)),
    };
    let mut parts = Vec::new();
    for item in v.get("output").and_then(Value::as_array).into_iter().flatten() {
        output_item(item, &mut parts);
    }
    finish(Reply {
        id: v.get("id").and_then(Value::as_str).unwrap_or("").to_owned(),
        model: v.get("model").and_then(Value::as_str).unwrap_or("").to_owned(),
        parts,
        stop,
        stop_sequence: None,
        tokens: v.get("usage").map(usage).unwrap_or_default(),
        created: v.get("created_at").and_then(Value::as_u64),
        origin: Family::OpenAi,
    })
}

/// A failed or cancelled response, classified by its error code.
fn failed(v: &Value, status: &str) -> UpstreamError {
    let code = v.pointer("/error/code").and_then(Value::as_str).unwrap_or("");
    let message = v.pointer("/error/message").and_then(Value::as_str).unwrap_or(status).to_owned();
    let Classified { class, quota } = vocab::classify(&[code], None, &message);
    UpstreamError { quota, ..UpstreamError::new(class, message) }
}

fn output_item(item: &Value, parts: &mut Vec<Part>) {
    let s = |k: &str| item.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    match item.get("type").and_then(Value::as_str) {
        Some("reasoning") => {
            let summary: Vec<&str> = texts(item.get("summary")).collect();
            let full: Vec<&str> = texts(item.get("content")).collect();
            let text = joined(if summary.is_empty() { &full } else { &summary }, "\n\n");
            let opaque = item
                .get("encrypted_content")
                .and_then(Value::as_str)
                .map(|e| Opaque { origin: Family::OpenAi, value: e.to_owned() });
            let id = item.get("id").and_then(Value::as_str).map(str::to_owned);
            parts.push(Part::Reasoning { text, opaque, redacted: false, id });
        }
        Some("message") => {
            for c in item.get("content").and_then(Value::as_array).into_iter().flatten() {
                match c.get("type").and_then(Value::as_str) {
                    Some("output_text") => {
                        parts.push(Part::text(c.get("text").and_then(Value::as_str).unwrap_or("")));
                    }
                    Some("refusal") => parts.push(Part::Refusal {
                        text: c.get("refusal").and_then(Value::as_str).unwrap_or("").to_owned(),
                    }),
                    _ => {}
                }
            }
        }
        Some("function_call") => {
            let args = match item.get("arguments") {
                Some(Value::String(a)) => a.clone(),
                Some(v) => args_text(v),
                None => String::new(),
            };
            parts.push(Part::ToolCall { id: s("call_id"), name: s("name"), args, kind: CallKind::Function });
        }
        Some("custom_tool_call") => {
            parts.push(Part::ToolCall { id: s("call_id"), name: s("name"), args: s("input"), kind: CallKind::Custom });
        }
        // Hosted tool calls ran at the provider; their outcome is in the text.
        _ => {}
    }
}

pub(crate) fn usage(u: &Value) -> Tokens {
    Tokens {
        input: u.get("input_tokens").and_then(Value::as_u64),
        output: u.get("output_tokens").and_then(Value::as_u64),
        cache_read: u.pointer("/input_tokens_details/cached_tokens").and_then(Value::as_u64),
        cache_write: u.pointer("/input_tokens_details/cache_write_tokens").and_then(Value::as_u64),
        reasoning: u.pointer("/output_tokens_details/reasoning_tokens").and_then(Value::as_u64),
    }
}

pub(crate) fn encode(reply: &Reply, ctx: &Context) -> Value {
    let id = common::client_id("resp_", &reply.id);
    let mut output = Vec::new();
    let mut text: Vec<Value> = Vec::new();
    let flush = |text: &mut Vec<Value>, output: &mut Vec<Value>| {
        if !text.is_empty() {
            let n = output.len();
            output.push(json!({
                "type": "message",
                "id": item_id("msg_", &id, n),
                "status": "completed",
                "role": "assistant",
                "content": std::mem::take(text),
            }));
        }
    };
    for part in &reply.parts {
        match part {
            Part::Text { text: t, .. } => text.push(json!({"type": "output_text", "text": t, "annotations": []})),
            Part::Refusal { text: t } => text.push(json!({"type": "refusal", "refusal": t})),
            Part::Reasoning { text: t, opaque, id: rid, redacted } => {
                flush(&mut text, &mut output);
                let mut item = json!({
                    "type": "reasoning",
                    "id": rid.clone().unwrap_or_else(|| item_id("rs_", &id, output.len())),
                    "summary": if t.is_empty() { json!([]) } else { json!([{"type": "summary_text", "text": t}]) },
                });
                let slot =
                    envelope::write_slot(Family::OpenAi, reply.origin, opaque.as_ref(), t, rid.as_deref(), *redacted);
                if let Some(enc) = slot.filter(|_| opaque.is_some()) {
                    item["encrypted_content"] = json!(enc);
                }
                output.push(item);
            }
            Part::ToolCall { id: call_id, name, args, kind } => {
                flush(&mut text, &mut output);
                let (name, custom) = common::tool_name(ctx, name);
                let n = output.len();
                output.push(if custom || *kind == CallKind::Custom {
                    let input = if *kind == CallKind::Custom { args.clone() } else { common::custom_input(args) };
                    json!({"type": "custom_tool_call", "id": item_id("ctc_", &id, n), "status": "completed",
                           "call_id": call_id, "name": name, "input": input})
                } else {
                    let args = if args.trim().is_empty() { "{}" } else { args };
                    json!({"type": "function_call", "id": item_id("fc_", &id, n), "status": "completed",
                           "call_id": call_id, "name": name, "arguments": args})
                });
            }
            _ => {}
        }
    }
    flush(&mut text, &mut output);
    let incomplete = Some(reply.stop).filter(|_| !reply.has_tool_calls()).and_then(vocab::responses_incomplete_reason);
    let (status, incomplete) = match incomplete {
        Some(reason) => ("incomplete", json!({ "reason": reason })),
        None => ("completed", Value::Null),
    };
    json!({
        "id": id,
        "object": "response",
        "created_at": common::created(reply),
        "status": status,
        "error": null,
        "incomplete_details": incomplete,
        "model": common::model(reply, ctx),
        "output": output,
        "parallel_tool_calls": true,
        "store": false,
        "usage": encode_usage(&reply.tokens),
    })
}

pub(crate) fn encode_usage(t: &Tokens) -> Value {
    let (input, output, details) = openai::usage_counts(t);
    json!({
        "input_tokens": input,
        "input_tokens_details": details,
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": n(t.reasoning)},
        "total_tokens": input + output,
    })
}
