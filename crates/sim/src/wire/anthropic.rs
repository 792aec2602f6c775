//! Anthropic Messages: the message object, its event stream and errors.

use axum::body::Bytes;
use axum::http::StatusCode;
use serde_json::{json, Value};

use super::{event, Ctx, Events};
use crate::agent::{Input, ToolCall};

fn stop_reason(ctx: &Ctx<'_>) -> &'static str {
    if ctx.calls().is_empty() {
        "end_turn"
    } else {
        "tool_use"
    }
}

/// `tool_use.input` is an object; a raw input (a custom tool, which Messages
/// has not) goes in as `{"input": ...}`.
fn tool_input(call: &ToolCall) -> Value {
    match &call.input {
        Input::Json(v) => v.clone(),
        Input::Text(s) => json!({ "input": s }),
    }
}

fn tool_use(ctx: &Ctx<'_>, call: &ToolCall, i: usize, input: Value) -> Value {
    json!({ "type": "tool_use", "id": ctx.call_id("toolu_", i), "name": call.name, "input": input })
}

pub(super) fn message(ctx: &Ctx<'_>) -> Value {
    let content: Vec<Value> = if ctx.calls().is_empty() {
        vec![json!({ "type": "text", "text": ctx.text() })]
    } else {
        ctx.calls().iter().enumerate().map(|(i, call)| tool_use(ctx, call, i, tool_input(call))).collect()
    };
    json!({
        "id": ctx.id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": ctx.model,
        "content": content,
        "stop_reason": stop_reason(ctx),
        "stop_sequence": null,
        "usage": {
            "input_tokens": ctx.input_tokens,
            "output_tokens": ctx.output_tokens(),
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    })
}

fn block_start(index: usize, block: Value) -> Bytes {
    event("content_block_start", &json!({ "type": "content_block_start", "index": index, "content_block": block }))
}

fn block_delta(index: usize, delta: Value) -> Bytes {
    event("content_block_delta", &json!({ "type": "content_block_delta", "index": index, "delta": delta }))
}

fn block_stop(index: usize) -> Bytes {
    event("content_block_stop", &json!({ "type": "content_block_stop", "index": index }))
}

pub(super) fn message_events(ctx: &Ctx<'_>) -> Events {
    let start = json!({
        "type": "message_start",
        "message": {
            "id": ctx.id("msg_"),
            "type": "message",
            "role": "assistant",
            "model": ctx.model,
            "content": [],
            "stop_reason": null,
            "stop_sequence": null,
            "usage": { "input_tokens": ctx.input_tokens, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0 },
        },
    });
    let mut preamble = vec![event("message_start", &start)];
    let mut content = Vec::new();
    let blocks = if ctx.calls().is_empty() && ctx.thinking > 0 {
        thinking_then_text(ctx, &mut preamble, &mut content);
        2
    } else if ctx.calls().is_empty() {
        preamble.push(block_start(0, json!({ "type": "text", "text": "" })));
        preamble.push(event("ping", &json!({ "type": "ping" })));
        content.extend(ctx.pieces().iter().map(|p| block_delta(0, json!({ "type": "text_delta", "text": p }))));
        1
    } else {
        // One tool_use block per call, the next opening when the last closed;
        // `input` starts empty and arrives as `input_json_delta` pieces.
        for (i, call) in ctx.calls().iter().enumerate() {
            let open = block_start(i, tool_use(ctx, call, i, json!({})));
            if i == 0 {
                preamble.extend([open, event("ping", &json!({ "type": "ping" }))]);
            } else {
                content.extend([block_stop(i - 1), open]);
            }
            let json_text = tool_input(call).to_string();
            let pieces = super::split(&json_text, ctx.chunks.max(2));
            content.extend(
                pieces.into_iter().map(|p| block_delta(i, json!({ "type": "input_json_delta", "partial_json": p }))),
            );
        }
        ctx.calls().len()
    };
    Events {
        preamble,
        content,
        tail: vec![
            block_stop(blocks - 1),
            event(
                "message_delta",
                &json!({
                    "type": "message_delta",
                    "delta": { "stop_reason": stop_reason(ctx), "stop_sequence": null },
                    "usage": { "output_tokens": ctx.output_tokens() },
                }),
            ),
            event("message_stop", &json!({ "type": "message_stop" })),
        ],
        error: event(
            "error",
            &json!({ "type": "error", "error": { "type": "overloaded_error", "message": "Overloaded" } }),
        ),
        ..Events::default()
    }
}

/// A thinking block of `ctx.thinking` deltas, then the text block: the
/// thinking block's signature, its end and the text block's start go with
/// the first text delta, so every content event is one delta.
fn thinking_then_text(ctx: &Ctx<'_>, preamble: &mut Vec<Bytes>, content: &mut Vec<Bytes>) {
    preamble.push(block_start(0, json!({ "type": "thinking", "thinking": "" })));
    preamble.push(event("ping", &json!({ "type": "ping" })));
    let thought = (0..ctx.thinking).map(|i| if i == 0 { "Let me think".to_string() } else { format!(" t{i}") });
    content.extend(thought.map(|t| block_delta(0, json!({ "type": "thinking_delta", "thinking": t }))));
    for (i, piece) in ctx.pieces().iter().enumerate() {
        let delta = block_delta(1, json!({ "type": "text_delta", "text": piece }));
        if i > 0 {
            content.push(delta);
            continue;
        }
        let signature = block_delta(0, json!({ "type": "signature_delta", "signature": "c2lt" }));
        let opened = block_start(1, json!({ "type": "text", "text": "" }));
        content.push([signature, block_stop(0), opened, delta].concat().into());
    }
}

pub(super) fn error_body(status: StatusCode, message: &str) -> Value {
    let kind = match status.as_u16() {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    };
    json!({ "type": "error", "error": { "type": kind, "message": message } })
}
