//! Google Gemini: `GenerateContentResponse` bodies and streams, errors and
//! the model list.
//!
//! A stream is a sequence of whole `GenerateContentResponse` objects: text
//! arrives piece by piece, a `functionCall` arrives whole in one chunk, every
//! chunk carries the cumulative `usageMetadata` (take the last) and the last
//! one carries `finishReason`. With `alt=sse` each is a `data:` line ended by
//! `\r\n\r\n` as Google's servers end them; without it, the stream is one JSON
//! array. Function calls carry no `id`, as Gemini's mostly do not.

use axum::body::Bytes;
use axum::http::StatusCode;
use serde_json::{json, Value};

use super::{Ctx, Events, Framing};
use crate::agent::{Input, ToolCall};

/// `alt=sse` in the query asks for SSE; anything else gets the JSON array.
pub(super) fn framing(query: Option<&str>) -> Framing {
    let sse = query.is_some_and(|q| q.split('&').any(|pair| pair == "alt=sse"));
    if sse {
        Framing::Sse
    } else {
        Framing::JsonArray
    }
}

fn function_call(call: &ToolCall) -> Value {
    let args = match &call.input {
        Input::Json(v) => v.clone(),
        Input::Text(s) => json!({ "input": s }),
    };
    json!({ "functionCall": { "name": call.name, "args": args } })
}

fn usage(ctx: &Ctx<'_>, output: u64) -> Value {
    json!({
        "promptTokenCount": ctx.input_tokens,
        "candidatesTokenCount": output,
        "totalTokenCount": ctx.input_tokens + output,
        "promptTokensDetails": [{ "modality": "TEXT", "tokenCount": ctx.input_tokens }],
    })
}

/// One `GenerateContentResponse`; `last` adds the finish reason.
fn chunk(ctx: &Ctx<'_>, parts: Vec<Value>, output: u64, last: bool) -> Value {
    let mut candidate = json!({ "content": { "parts": parts, "role": "model" }, "index": 0 });
    if last {
        candidate["finishReason"] = json!("STOP");
    }
    json!({
        "candidates": [candidate],
        "usageMetadata": usage(ctx, output),
        "modelVersion": ctx.model,
        "responseId": ctx.id("sim-"),
    })
}

pub(super) fn response(ctx: &Ctx<'_>) -> Value {
    let parts = if ctx.calls().is_empty() {
        vec![json!({ "text": ctx.text() })]
    } else {
        ctx.calls().iter().map(function_call).collect()
    };
    chunk(ctx, parts, ctx.output_tokens(), true)
}

/// The parts of each stream chunk: one text piece each, or every call in one.
fn chunk_parts(ctx: &Ctx<'_>) -> Vec<Vec<Value>> {
    if !ctx.calls().is_empty() {
        return vec![ctx.calls().iter().map(function_call).collect()];
    }
    let parts: Vec<Vec<Value>> = ctx.pieces().iter().map(|p| vec![json!({ "text": p })]).collect();
    if parts.is_empty() {
        vec![vec![json!({ "text": "" })]]
    } else {
        parts
    }
}

pub(super) fn events(ctx: &Ctx<'_>, framing: Framing) -> Events {
    let parts = chunk_parts(ctx);
    let n = parts.len();
    let total = ctx.output_tokens();
    let content = parts
        .into_iter()
        .enumerate()
        .map(|(i, parts)| {
            let last = i + 1 == n;
            let output = if last { total } else { (i as u64 + 1).min(total) };
            frame(framing, &chunk(ctx, parts, output, last), i == 0)
        })
        .collect();
    let (preamble, tail) = match framing {
        Framing::Sse => (Vec::new(), Vec::new()),
        Framing::JsonArray => (vec![Bytes::from_static(b"[")], vec![Bytes::from_static(b"\r\n]")]),
    };
    let error = error_event(framing, "The model is overloaded. Please try again later.");
    Events { preamble, content, tail, error, framing }
}

fn frame(framing: Framing, value: &Value, first: bool) -> Bytes {
    match framing {
        Framing::Sse => Bytes::from(format!("data: {value}\r\n\r\n")),
        Framing::JsonArray if first => Bytes::from(value.to_string()),
        Framing::JsonArray => Bytes::from(format!(",\r\n{value}")),
    }
}

/// The mid-stream error: `{"error":{"code":503,...,"status":"UNAVAILABLE"}}`,
/// closing the array when the stream is one.
pub(super) fn error_event(framing: Framing, message: &str) -> Bytes {
    let body = error_body(StatusCode::SERVICE_UNAVAILABLE, message);
    match framing {
        Framing::Sse => Bytes::from(format!("data: {body}\r\n\r\n")),
        Framing::JsonArray => Bytes::from(format!("{body}\r\n]")),
    }
}

/// The `google.rpc.Status` name for an HTTP status.
fn status_name(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 | 413 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        409 => "ABORTED",
        429 => "RESOURCE_EXHAUSTED",
        499 => "CANCELLED",
        501 => "NOT_IMPLEMENTED",
        503 | 529 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        500..=599 => "INTERNAL",
        _ => "UNKNOWN",
    }
}

pub(super) fn error_body(status: StatusCode, message: &str) -> Value {
    json!({ "error": { "code": status.as_u16(), "message": message, "status": status_name(status) } })
}

fn model(id: &str) -> Value {
    json!({
        "name": format!("models/{id}"),
        "version": "001",
        "displayName": id,
        "description": "A simulated model.",
        "inputTokenLimit": 1_048_576,
        "outputTokenLimit": 65_536,
        "supportedGenerationMethods": ["generateContent", "countTokens", "streamGenerateContent"],
        "temperature": 1.0,
        "topP": 0.95,
        "topK": 64,
        "maxTemperature": 2.0,
        "thinking": true,
    })
}

/// `GET /v1beta/models`.
pub fn models_list(models: &[String]) -> Value {
    let models: Vec<Value> = models.iter().map(|m| model(m)).collect();
    json!({ "models": models })
}

/// `GET /v1beta/models/{id}`: the model, or `None` when the script lists no such model.
pub fn model_get(models: &[String], id: &str) -> Option<Value> {
    let id = id.strip_prefix("models/").unwrap_or(id);
    models.iter().any(|m| m == id).then(|| model(id))
}
