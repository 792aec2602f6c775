//! OpenAI Chat Completions, Completions and Embeddings.

use axum::body::Bytes;
use base64::Engine as _;
use serde_json::{json, Value};

use super::{data, Ctx, Events, CREATED};

const SERVER_ERROR: &str = "The server had an error while processing your request.";

fn server_error_chunk() -> Bytes {
    data(&json!({ "error": { "message": SERVER_ERROR, "type": "server_error", "param": null, "code": null } }))
}

fn usage(ctx: &Ctx<'_>) -> Value {
    json!({
        "prompt_tokens": ctx.input_tokens,
        "completion_tokens": ctx.output_tokens(),
        "total_tokens": ctx.input_tokens + ctx.output_tokens(),
        "prompt_tokens_details": { "cached_tokens": 0 },
    })
}

fn finish_reason(ctx: &Ctx<'_>) -> &'static str {
    if ctx.calls().is_empty() {
        "stop"
    } else {
        "tool_calls"
    }
}

pub(super) fn chat(ctx: &Ctx<'_>) -> Value {
    let message = if ctx.calls().is_empty() {
        json!({ "role": "assistant", "content": ctx.text(), "refusal": null })
    } else {
        let calls: Vec<Value> = ctx
            .calls()
            .iter()
            .enumerate()
            .map(|(i, call)| {
                json!({
                    "id": ctx.call_id("call_", i),
                    "type": "function",
                    "function": { "name": call.name, "arguments": call.input.text() },
                })
            })
            .collect();
        json!({ "role": "assistant", "content": null, "refusal": null, "tool_calls": calls })
    };
    json!({
        "id": ctx.id("chatcmpl-"),
        "object": "chat.completion",
        "created": CREATED,
        "model": ctx.model,
        "choices": [{ "index": 0, "message": message, "logprobs": null, "finish_reason": finish_reason(ctx) }],
        "usage": usage(ctx),
        "system_fingerprint": null,
    })
}

pub(super) fn chat_events(ctx: &Ctx<'_>, include_usage: bool) -> Events {
    let chunk = |delta: Value, finish: Value| {
        let mut c = json!({
            "id": ctx.id("chatcmpl-"),
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": ctx.model,
            "system_fingerprint": null,
            "choices": [{ "index": 0, "delta": delta, "logprobs": null, "finish_reason": finish }],
        });
        if include_usage {
            c["usage"] = Value::Null;
        }
        data(&c)
    };
    let mut tail = vec![chunk(json!({}), json!(finish_reason(ctx)))];
    if include_usage {
        tail.push(data(&json!({
            "id": ctx.id("chatcmpl-"),
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": ctx.model,
            "system_fingerprint": null,
            "choices": [],
            "usage": usage(ctx),
        })));
    }
    tail.push(Bytes::from_static(b"data: [DONE]\n\n"));
    let (preamble, content) = if ctx.calls().is_empty() {
        let preamble = vec![chunk(json!({ "role": "assistant", "content": "", "refusal": null }), Value::Null)];
        (preamble, ctx.pieces().iter().map(|p| chunk(json!({ "content": p }), Value::Null)).collect())
    } else {
        tool_call_chunks(ctx, &chunk)
    };
    Events { preamble, content, tail, error: server_error_chunk(), ..Events::default() }
}

/// As OpenAI streams tool calls: the first delta carries the role and the
/// first call's id and name with empty arguments; then the arguments in
/// pieces; each later call opens with its own id and name.
fn tool_call_chunks(ctx: &Ctx<'_>, chunk: &dyn Fn(Value, Value) -> Bytes) -> (Vec<Bytes>, Vec<Bytes>) {
    let mut preamble = Vec::new();
    let mut content = Vec::new();
    for (i, call) in ctx.calls().iter().enumerate() {
        let open = json!([{
            "index": i, "id": ctx.call_id("call_", i), "type": "function",
            "function": { "name": call.name, "arguments": "" },
        }]);
        if i == 0 {
            let delta = json!({ "role": "assistant", "content": null, "refusal": null, "tool_calls": open });
            preamble.push(chunk(delta, Value::Null));
        } else {
            content.push(chunk(json!({ "tool_calls": open }), Value::Null));
        }
        for piece in ctx.argument_pieces(call) {
            let delta = json!({ "tool_calls": [{ "index": i, "function": { "arguments": piece } }] });
            content.push(chunk(delta, Value::Null));
        }
    }
    (preamble, content)
}

pub(super) fn completion(ctx: &Ctx<'_>) -> Value {
    json!({
        "id": ctx.id("cmpl-"),
        "object": "text_completion",
        "created": CREATED,
        "model": ctx.model,
        "choices": [{ "text": ctx.text(), "index": 0, "logprobs": null, "finish_reason": "stop" }],
        "usage": usage(ctx),
    })
}

pub(super) fn completion_events(ctx: &Ctx<'_>) -> Events {
    let chunk = |text: &str, finish: Value| {
        data(&json!({
            "id": ctx.id("cmpl-"),
            "object": "text_completion",
            "created": CREATED,
            "model": ctx.model,
            "choices": [{ "text": text, "index": 0, "logprobs": null, "finish_reason": finish }],
        }))
    };
    Events {
        preamble: Vec::new(),
        content: ctx.pieces().iter().map(|p| chunk(p, Value::Null)).collect(),
        tail: vec![chunk("", json!("stop")), Bytes::from_static(b"data: [DONE]\n\n")],
        error: server_error_chunk(),
        ..Events::default()
    }
}

/// A small deterministic vector per input, in the requested encoding.
pub(super) fn embeddings(ctx: &Ctx<'_>, request: &Value) -> Value {
    let inputs = match request.get("input") {
        Some(Value::Array(items)) => items.len().max(1),
        _ => 1,
    };
    let base64 = request.get("encoding_format").and_then(Value::as_str) == Some("base64");
    let data: Vec<Value> = (0..inputs)
        .map(|i| {
            let vector: Vec<f32> = (0..8).map(|d| ((i * 8 + d) as f32 * 0.125).sin()).collect();
            let embedding = if base64 {
                let bytes: Vec<u8> = vector.iter().flat_map(|f| f.to_le_bytes()).collect();
                json!(base64::engine::general_purpose::STANDARD.encode(bytes))
            } else {
                json!(vector)
            };
            json!({ "object": "embedding", "index": i, "embedding": embedding })
        })
        .collect();
    json!({
        "object": "list",
        "data": data,
        "model": ctx.model,
        "usage": { "prompt_tokens": ctx.input_tokens, "total_tokens": ctx.input_tokens },
    })
}
