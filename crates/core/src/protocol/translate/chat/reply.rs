//! Chat Completions non-streamed reply ↔ intermediate form.

use serde_json::{json, Map, Value};

use crate::protocol::translate::error::UpstreamError;
use crate::protocol::translate::ir::{Context, ErrorClass, Family, StopReason, Tokens};
use crate::protocol::translate::message::{CallKind, Part, Reply};
use crate::protocol::translate::reply::{self as common, finish, n};
use crate::protocol::translate::wire::{args_text, joined};
use crate::protocol::translate::{openai, vocab};

fn unreadable(what: &str) -> UpstreamError {
    UpstreamError::new(ErrorClass::Server, format!("the provider's reply is unreadable: {what}"))
}

pub(crate) fn decode(body: &[u8]) -> Result<Reply, UpstreamError> {
    let v: Value = serde_json::from_slice(body).map_err(|e| unreadable(&e.to_string()))?;
    let choice = v.get("choices").and_then(|c| c.get(0)).ok_or_else(|| unreadable("no choices"))?;
    let msg = choice.get("message").ok_or_else(|| unreadable("no message"))?;
    let mut parts = Vec::new();
    let mut content = msg.get("content").and_then(Value::as_str).unwrap_or("").to_owned();
    let reasoning = msg.get("reasoning_content").or_else(|| msg.get("reasoning")).and_then(Value::as_str);
    // OpenRouter sends the same text as `reasoning` and in its entries.
    let details = super::details::decode(msg.get("reasoning_details"));
    match (reasoning, common::split_think(&content)) {
        _ if details.is_some() => {
            if let Some((text, opaque)) = details {
                let text = reasoning.filter(|r| !r.is_empty()).map_or(text, str::to_owned);
                parts.push(Part::Reasoning { text, opaque: Some(opaque), redacted: false, id: None });
            }
        }
        (Some(r), _) if !r.is_empty() => parts.push(reasoning_part(r)),
        (_, Some((thought, rest))) => {
            parts.push(reasoning_part(&thought));
            content = rest;
        }
        _ => {}
    }
    if !content.is_empty() {
        parts.push(Part::text(content));
    }
    if let Some(r) = msg.get("refusal").and_then(Value::as_str) {
        parts.push(Part::Refusal { text: r.to_owned() });
    }
    for call in msg.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
        parts.push(tool_call(call));
    }
    let finish_reason = choice.get("finish_reason").and_then(Value::as_str);
    let Some(stop) = finish_reason.and_then(vocab::chat_reason) else {
        return Err(UpstreamError::new(
            ErrorClass::Overloaded,
            format!("the provider ended without a usable finish reason ({})", finish_reason.unwrap_or("none")),
        ));
    };
    // vLLM names the matched stop string.
    let stop_sequence = choice.get("stop_reason").and_then(Value::as_str).map(str::to_owned);
    let stop = if stop_sequence.is_some() && stop == StopReason::EndTurn { StopReason::StopSequence } else { stop };
    finish(Reply {
        id: v.get("id").and_then(Value::as_str).unwrap_or("").to_owned(),
        model: v.get("model").and_then(Value::as_str).unwrap_or("").to_owned(),
        parts,
        stop,
        stop_sequence,
        tokens: v.get("usage").map(usage).unwrap_or_default(),
        created: v.get("created").and_then(Value::as_u64),
        origin: Family::OpenAi,
    })
}

fn reasoning_part(text: &str) -> Part {
    Part::Reasoning { text: text.to_owned(), opaque: None, redacted: false, id: None }
}

fn tool_call(call: &Value) -> Part {
    let id = call.get("id").and_then(Value::as_str).unwrap_or("").to_owned();
    if let Some(c) = call.get("custom") {
        return Part::ToolCall {
            id,
            name: c.get("name").and_then(Value::as_str).unwrap_or("").to_owned(),
            args: c.get("input").and_then(Value::as_str).unwrap_or("").to_owned(),
            kind: CallKind::Custom,
        };
    }
    let f = call.get("function").unwrap_or(&Value::Null);
    let args = match f.get("arguments") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(v) => args_text(v),
    };
    Part::ToolCall {
        id,
        name: f.get("name").and_then(Value::as_str).unwrap_or("").to_owned(),
        args,
        kind: CallKind::Function,
    }
}

/// Chat usage (prompt includes cached tokens), with the compat spellings.
pub(crate) fn usage(u: &Value) -> Tokens {
    let get = |path: &[&str]| {
        let mut v = u;
        for p in path {
            v = v.get(p)?;
        }
        v.as_u64()
    };
    Tokens {
        input: get(&["prompt_tokens"]),
        output: get(&["completion_tokens"]),
        cache_read: get(&["prompt_tokens_details", "cached_tokens"]).or(get(&["prompt_cache_hit_tokens"])),
        cache_write: get(&["prompt_tokens_details", "cache_write_tokens"]),
        reasoning: get(&["completion_tokens_details", "reasoning_tokens"]),
    }
}

pub(crate) fn encode(reply: &Reply, ctx: &Context) -> Value {
    let mut msg = Map::new();
    msg.insert("role".into(), json!("assistant"));
    let text = joined(common::texts(reply), "");
    msg.insert("content".into(), if text.is_empty() { Value::Null } else { json!(text) });
    let refusals = openai::texts_of(&reply.parts, openai::refusal_text);
    msg.insert("refusal".into(), if refusals.is_empty() { Value::Null } else { json!(joined(&refusals, "\n")) });
    let reasoning = openai::texts_of(&reply.parts, openai::reasoning_text);
    if !reasoning.is_empty() {
        msg.insert("reasoning_content".into(), json!(joined(&reasoning, "\n\n")));
    }
    let calls: Vec<Value> = reply.parts.iter().filter_map(|p| call(p, ctx)).collect();
    if !calls.is_empty() {
        msg.insert("tool_calls".into(), Value::Array(calls));
    }
    json!({
        "id": common::client_id("chatcmpl-", &reply.id),
        "object": "chat.completion",
        "created": common::created(reply),
        "model": common::model(reply, ctx),
        "choices": [{"index": 0, "message": msg, "logprobs": null, "finish_reason": finish_reason(reply)}],
        "usage": encode_usage(&reply.tokens),
    })
}

fn call(p: &Part, ctx: &Context) -> Option<Value> {
    let Part::ToolCall { id, name, args, kind } = p else {
        return None;
    };
    let (name, custom) = common::tool_name(ctx, name);
    Some(if custom || *kind == CallKind::Custom {
        let input = if *kind == CallKind::Custom { args.clone() } else { common::custom_input(args) };
        json!({"id": id, "type": "custom", "custom": {"name": name, "input": input}})
    } else {
        let args = if args.trim().is_empty() { "{}" } else { args };
        json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}})
    })
}

pub(crate) fn finish_reason(reply: &Reply) -> &'static str {
    if reply.has_tool_calls() {
        return "tool_calls";
    }
    vocab::chat_finish(reply.stop)
}

pub(crate) fn encode_usage(t: &Tokens) -> Value {
    let (input, output, details) = openai::usage_counts(t);
    json!({
        "prompt_tokens": input,
        "completion_tokens": output,
        "total_tokens": input + output,
        "prompt_tokens_details": details,
        "completion_tokens_details": {"reasoning_tokens": n(t.reasoning)},
    })
}
