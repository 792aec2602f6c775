//! Gemini non-streamed reply (`GenerateContentResponse`) ↔ intermediate form.

use serde_json::{json, Value};

use super::Signed;
use crate::protocol::translate::envelope;
use crate::protocol::translate::error::UpstreamError;
use crate::protocol::translate::ir::{Context, ErrorClass, Family, Opaque, StopReason, Tokens};
use crate::protocol::translate::message::{CallKind, Part, Reply};
use crate::protocol::translate::reply::{self as common, finish, item_id, n};
use crate::protocol::translate::vocab;
use crate::protocol::translate::wire::{args_object, args_text, random_id};

fn unreadable(what: &str) -> UpstreamError {
    UpstreamError::new(ErrorClass::Server, format!("the provider's reply is unreadable: {what}"))
}

pub(crate) fn decode(body: &[u8]) -> Result<Reply, UpstreamError> {
    let v: Value = serde_json::from_slice(body).map_err(|e| unreadable(&e.to_string()))?;
    // Without `alt=sse`, a streamed body is an array of responses.
    let v = match v {
        Value::Array(mut chunks) if chunks.len() == 1 => chunks.remove(0),
        Value::Array(_) => return Err(unreadable("a streamed body where one response was expected")),
        v => v,
    };
    let id = v.get("responseId").and_then(Value::as_str).map_or_else(random_id, str::to_owned);
    let tokens = v.get("usageMetadata").map(usage).unwrap_or_default();
    let model = v.get("modelVersion").and_then(Value::as_str).unwrap_or("").to_owned();
    let Some(candidate) = v.get("candidates").and_then(|c| c.get(0)) else {
        let reason = v.pointer("/promptFeedback/blockReason").and_then(Value::as_str);
        let Some(reason) = reason else {
            return Err(unreadable("no candidates"));
        };
        let text = format!("The provider blocked the prompt ({reason}).");
        return Ok(reply(id, model, vec![Part::text(text)], StopReason::Refusal, tokens));
    };
    let mut parts = Vec::new();
    let list = candidate.pointer("/content/parts").and_then(Value::as_array);
    for (i, p) in list.into_iter().flatten().enumerate() {
        part(p, &id, i, &mut parts);
    }
    let reason = candidate.get("finishReason").and_then(Value::as_str).unwrap_or("STOP");
    // A botched tool call is an error, worth one retry.
    let Ok(stop) = vocab::gemini_reason(reason) else {
        return Err(UpstreamError::new(
            ErrorClass::Server,
            format!("the model produced an unusable tool call ({reason})"),
        ));
    };
    if stop == StopReason::Refusal && !parts.iter().any(|p| matches!(p, Part::Text { .. })) {
        parts.push(Part::text(format!("The provider blocked the response ({reason}).")));
    }
    finish(reply(id, model, parts, stop, tokens))
}

fn reply(id: String, model: String, parts: Vec<Part>, stop: StopReason, tokens: Tokens) -> Reply {
    Reply { id, model, parts, stop, stop_sequence: None, tokens, created: None, origin: Family::Gemini }
}

fn part(p: &Value, reply_id: &str, i: usize, parts: &mut Vec<Part>) {
    let sig = p
        .get("thoughtSignature")
        .and_then(Value::as_str)
        .map(|s| Opaque { origin: Family::Gemini, value: s.to_owned() });
    let thought = p.get("thought").and_then(Value::as_bool) == Some(true);
    if let Some(text) = p.get("text").and_then(Value::as_str) {
        if thought {
            parts.push(Part::Reasoning { text: text.to_owned(), opaque: sig, redacted: false, id: None });
            return;
        }
        push_signature(sig, parts);
        if !text.is_empty() {
            parts.push(Part::text(text));
        }
    } else if let Some(fc) = p.get("functionCall") {
        push_signature(sig, parts);
        let id = match fc.get("id").and_then(Value::as_str) {
            Some(id) if !id.is_empty() => id.to_owned(),
            _ => item_id("call_", reply_id, i),
        };
        parts.push(Part::ToolCall {
            id,
            name: fc.get("name").and_then(Value::as_str).unwrap_or("").to_owned(),
            args: fc.get("args").map(args_text).unwrap_or_else(|| "{}".to_owned()),
            kind: CallKind::Function,
        });
    } else {
        push_signature(sig, parts);
    }
}

fn push_signature(sig: Option<Opaque>, parts: &mut Vec<Part>) {
    if let Some(o) = sig {
        parts.push(Part::Reasoning { text: String::new(), opaque: Some(o), redacted: false, id: None });
    }
}

/// Gemini usage: `candidatesTokenCount` excludes thoughts, which are counted
/// apart; tool-use prompt tokens are input.
pub(crate) fn usage(u: &Value) -> Tokens {
    let get = |k: &str| u.get(k).and_then(Value::as_u64);
    let prompt = get("promptTokenCount").map(|p| p + get("toolUsePromptTokenCount").unwrap_or(0));
    let thoughts = get("thoughtsTokenCount");
    let output = match (get("candidatesTokenCount"), get("totalTokenCount"), prompt) {
        (Some(c), _, _) => Some(c + thoughts.unwrap_or(0)),
        (None, Some(total), Some(p)) => Some(total.saturating_sub(p)),
        _ => thoughts,
    };
    Tokens { input: prompt, output, cache_read: get("cachedContentTokenCount"), cache_write: None, reasoning: thoughts }
}

pub(crate) fn encode(reply: &Reply, ctx: &Context) -> Value {
    let mut signed = Signed::default();
    for part in &reply.parts {
        let v = match part {
            Part::Reasoning { text, opaque, id, redacted } => {
                let slot =
                    envelope::write_slot(Family::Gemini, reply.origin, opaque.as_ref(), text, id.as_deref(), *redacted)
                        .filter(|_| opaque.is_some());
                if text.is_empty() {
                    signed.pending = slot.or(signed.pending.take());
                    continue;
                }
                let mut t = json!({"text": text, "thought": true});
                if let Some(s) = slot {
                    t["thoughtSignature"] = json!(s);
                }
                signed.parts.push(t);
                continue;
            }
            Part::Text { text, .. } | Part::Refusal { text } if !text.is_empty() => json!({"text": text}),
            Part::ToolCall { id, name, args, .. } => {
                let (name, _) = common::tool_name(ctx, name);
                json!({"functionCall": {"id": id, "name": name, "args": args_object(args)}})
            }
            _ => continue,
        };
        signed.push(v);
    }
    let parts = signed.finish();
    let finish_reason = if reply.has_tool_calls() { "STOP" } else { vocab::gemini_finish(reply.stop) };
    json!({
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": finish_reason, "index": 0}],
        "usageMetadata": encode_usage(&reply.tokens),
        "modelVersion": common::model(reply, ctx),
        "responseId": if reply.id.is_empty() { random_id() } else { reply.id.clone() },
    })
}

pub(crate) fn encode_usage(t: &Tokens) -> Value {
    let input = n(t.input);
    let output = n(t.output);
    let thoughts = n(t.reasoning).min(output);
    let mut u = json!({
        "promptTokenCount": input,
        "candidatesTokenCount": output - thoughts,
        "totalTokenCount": input + output,
    });
    if let Some(r) = t.reasoning {
        u["thoughtsTokenCount"] = json!(r.min(output));
    }
    if let Some(c) = t.cache_read {
        u["cachedContentTokenCount"] = json!(c);
    }
    u
}
