//! Anthropic Messages non-streamed reply ↔ intermediate form.

use serde_json::{json, Value};

use crate::protocol::translate::envelope;
use crate::protocol::translate::error::UpstreamError;
use crate::protocol::translate::ir::{Context, ErrorClass, Family, Opaque, StopReason, Tokens};
use crate::protocol::translate::message::{CallKind, Part, Reply};
use crate::protocol::translate::names;
use crate::protocol::translate::reply::{self as common, finish, item_id, n};
use crate::protocol::translate::vocab;
use crate::protocol::translate::wire::{args_object, args_text};

fn unreadable(what: &str) -> UpstreamError {
    UpstreamError::new(ErrorClass::Server, format!("the provider's reply is unreadable: {what}"))
}

pub(crate) fn decode(body: &[u8]) -> Result<Reply, UpstreamError> {
    let v: Value = serde_json::from_slice(body).map_err(|e| unreadable(&e.to_string()))?;
    if v.get("type").and_then(Value::as_str) == Some("error") {
        return Err(unreadable("an error body with a success status"));
    }
    let mut parts = Vec::new();
    for b in v.get("content").and_then(Value::as_array).into_iter().flatten() {
        let s = |k: &str| b.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        match b.get("type").and_then(Value::as_str) {
            Some("text") => parts.push(Part::text(s("text"))),
            Some("thinking") => parts.push(Part::Reasoning {
                text: s("thinking"),
                opaque: Some(s("signature")).filter(|v| !v.is_empty()).map(anthropic),
                redacted: false,
                id: None,
            }),
            Some("redacted_thinking") => parts.push(Part::Reasoning {
                text: String::new(),
                opaque: Some(anthropic(s("data"))),
                redacted: true,
                id: None,
            }),
            Some("tool_use") => parts.push(Part::ToolCall {
                id: s("id"),
                name: s("name"),
                args: b.get("input").map(args_text).unwrap_or_else(|| "{}".to_owned()),
                kind: CallKind::Function,
            }),
            // Server tools ran at Anthropic; their outcome is in the text.
            _ => {}
        }
    }
    let stop = vocab::messages_reason(v.get("stop_reason").and_then(Value::as_str).unwrap_or(""));
    finish(Reply {
        id: v.get("id").and_then(Value::as_str).unwrap_or("").to_owned(),
        model: v.get("model").and_then(Value::as_str).unwrap_or("").to_owned(),
        parts,
        stop,
        stop_sequence: v.get("stop_sequence").and_then(Value::as_str).map(str::to_owned),
        tokens: v.get("usage").map(usage).unwrap_or_default(),
        created: None,
        origin: Family::Anthropic,
    })
}

fn anthropic(value: String) -> Opaque {
    Opaque { origin: Family::Anthropic, value }
}

/// Messages usage: `input_tokens` excludes cached tokens, so the total input
/// is the sum of the three.
pub(crate) fn usage(u: &Value) -> Tokens {
    let get = |k: &str| u.get(k).and_then(Value::as_u64);
    let (input, read, write) =
        (get("input_tokens"), get("cache_read_input_tokens"), get("cache_creation_input_tokens"));
    Tokens {
        input: input.map(|i| i + read.unwrap_or(0) + write.unwrap_or(0)),
        output: get("output_tokens"),
        cache_read: read,
        cache_write: write,
        reasoning: None,
    }
}

pub(crate) fn encode(reply: &Reply, ctx: &Context) -> Value {
    let id = common::client_id("msg_", &reply.id);
    let mut content = Vec::new();
    for (i, part) in reply.parts.iter().enumerate() {
        match part {
            Part::Text { text, .. } | Part::Refusal { text } if !text.is_empty() => {
                content.push(json!({"type": "text", "text": text}));
            }
            Part::Reasoning { text, opaque, redacted, id: rid } => {
                let own = opaque.as_ref().is_some_and(|o| o.origin == Family::Anthropic);
                let Some(slot) = envelope::write_slot(
                    Family::Anthropic,
                    reply.origin,
                    opaque.as_ref(),
                    text,
                    rid.as_deref(),
                    *redacted,
                ) else {
                    continue;
                };
                content.push(if own && *redacted {
                    json!({"type": "redacted_thinking", "data": slot})
                } else {
                    json!({"type": "thinking", "thinking": text, "signature": slot})
                });
            }
            Part::ToolCall { id: call_id, name, args, .. } => {
                let (name, _) = common::tool_name(ctx, name);
                let call_id = if call_id.is_empty() {
                    item_id("toolu_", &id, i)
                } else {
                    names::call_id(call_id, 64).into_owned()
                };
                content.push(json!({"type": "tool_use", "id": call_id, "name": name, "input": args_object(args)}));
            }
            _ => {}
        }
    }
    let stop_reason = if reply.has_tool_calls() {
        "tool_use"
    } else {
        match reply.stop {
            // A stop sequence Messages cannot name ends the turn plainly.
            StopReason::StopSequence if reply.stop_sequence.is_none() => "end_turn",
            stop => vocab::messages_reason_name(stop),
        }
    };
    json!({
        "id": id,
        "type": "message",
        "role": "assistant",
        "model": common::model(reply, ctx),
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": if stop_reason == "stop_sequence" { json!(reply.stop_sequence) } else { Value::Null },
        "usage": encode_usage(&reply.tokens),
    })
}

/// Messages usage from the normalised counts: cached input is reported
/// apart, so it is taken out of `input_tokens` (saturating, since some
/// providers report cache counts that exceed their prompt count).
pub(crate) fn encode_usage(t: &Tokens) -> Value {
    let read = n(t.cache_read);
    let write = n(t.cache_write);
    json!({
        "input_tokens": n(t.input).saturating_sub(read).saturating_sub(write),
        "output_tokens": n(t.output),
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": write,
    })
}
