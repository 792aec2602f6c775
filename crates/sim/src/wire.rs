//! Response bodies and SSE event sequences, shaped like the real providers'.

use axum::body::Bytes;
use axum::http::StatusCode;
use base64::Engine as _;
use serde_json::{json, Value};

/// A simulated endpoint, by path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Chat,
    Completions,
    Embeddings,
    Responses,
    Messages,
    CountTokens,
}

impl Endpoint {
    pub fn from_path(path: &str) -> Option<Endpoint> {
        Some(match path {
            "/v1/chat/completions" => Endpoint::Chat,
            "/v1/completions" => Endpoint::Completions,
            "/v1/embeddings" => Endpoint::Embeddings,
            "/v1/responses" => Endpoint::Responses,
            "/v1/messages" => Endpoint::Messages,
            "/v1/messages/count_tokens" => Endpoint::CountTokens,
            _ => return None,
        })
    }

    fn is_anthropic(self) -> bool {
        matches!(self, Endpoint::Messages | Endpoint::CountTokens)
    }
}

/// A successful reply: one JSON body, or a stream of SSE events.
#[derive(Debug)]
pub enum Reply {
    Json(Value),
    Events(Events),
}

/// A stream in three parts, so faults can strike before or after content.
#[derive(Debug, Default)]
pub struct Events {
    /// Events before any content (`message_start`, `response.created`, role deltas).
    pub preamble: Vec<Bytes>,
    /// One event per content piece.
    pub content: Vec<Bytes>,
    /// Closing events (finish reason, usage, `[DONE]`, `message_stop`).
    pub tail: Vec<Bytes>,
    /// The protocol's error event, sent instead of content under `Fault::ErrorEvent`.
    pub error: Bytes,
}

/// Fixed epoch so that replies are reproducible byte for byte.
const CREATED: u64 = 1_767_225_600;

fn data(value: &Value) -> Bytes {
    Bytes::from(format!("data: {value}\n\n"))
}

fn event(name: &str, value: &Value) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {value}\n\n"))
}

/// The text pieces of a reply: "Hello from <name>." and then numbered words.
pub fn pieces(name: &str, chunks: usize) -> Vec<String> {
    (0..chunks)
        .map(|i| match i {
            0 => "Hello".to_string(),
            1 => " from".to_string(),
            2 => format!(" {name}."),
            _ => format!(" w{i}"),
        })
        .collect()
}

struct Ctx<'a> {
    name: &'a str,
    call: usize,
    model: String,
    input_tokens: u64,
    pieces: Vec<String>,
}

impl Ctx<'_> {
    fn text(&self) -> String {
        self.pieces.concat()
    }
    fn output_tokens(&self) -> u64 {
        self.pieces.len() as u64
    }
    fn id(&self, prefix: &str) -> String {
        format!("{prefix}{}{}", self.name.replace(|c: char| !c.is_ascii_alphanumeric(), ""), self.call)
    }
}

/// The successful reply for a call.
pub fn plan(name: &str, call: usize, endpoint: Endpoint, request: &Value, chunks: usize) -> Reply {
    let ctx = Ctx {
        name,
        call,
        model: request.get("model").and_then(Value::as_str).unwrap_or("sim-model").to_string(),
        input_tokens: (request.to_string().len() as u64 / 4).max(1),
        pieces: pieces(name, chunks),
    };
    let stream = request.get("stream").and_then(Value::as_bool).unwrap_or(false);
    match (endpoint, stream) {
        (Endpoint::Chat, false) => Reply::Json(chat(&ctx)),
        (Endpoint::Chat, true) => {
            let usage = request.pointer("/stream_options/include_usage").and_then(Value::as_bool).unwrap_or(false);
            Reply::Events(chat_events(&ctx, usage))
        }
        (Endpoint::Completions, false) => Reply::Json(completion(&ctx)),
        (Endpoint::Completions, true) => Reply::Events(completion_events(&ctx)),
        (Endpoint::Responses, false) => Reply::Json(response_object(&ctx, "completed")),
        (Endpoint::Responses, true) => Reply::Events(response_events(&ctx)),
        (Endpoint::Messages, false) => Reply::Json(message(&ctx)),
        (Endpoint::Messages, true) => Reply::Events(message_events(&ctx)),
        (Endpoint::Embeddings, _) => Reply::Json(embeddings(&ctx, request)),
        (Endpoint::CountTokens, _) => Reply::Json(json!({ "input_tokens": ctx.input_tokens })),
    }
}

fn openai_usage(ctx: &Ctx<'_>) -> Value {
    json!({
        "prompt_tokens": ctx.input_tokens,
        "completion_tokens": ctx.output_tokens(),
        "total_tokens": ctx.input_tokens + ctx.output_tokens(),
        "prompt_tokens_details": { "cached_tokens": 0 },
    })
}

fn chat(ctx: &Ctx<'_>) -> Value {
    json!({
        "id": ctx.id("chatcmpl-"),
        "object": "chat.completion",
        "created": CREATED,
        "model": ctx.model,
        "choices": [{
            "index": 0,
            "message": { "role": "assistant", "content": ctx.text(), "refusal": null },
            "logprobs": null,
            "finish_reason": "stop",
        }],
        "usage": openai_usage(ctx),
        "system_fingerprint": null,
    })
}

fn chat_events(ctx: &Ctx<'_>, include_usage: bool) -> Events {
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
    let mut tail = vec![chunk(json!({}), json!("stop"))];
    if include_usage {
        tail.push(data(&json!({
            "id": ctx.id("chatcmpl-"),
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": ctx.model,
            "system_fingerprint": null,
            "choices": [],
            "usage": openai_usage(ctx),
        })));
    }
    tail.push(Bytes::from_static(b"data: [DONE]\n\n"));
    Events {
        preamble: vec![chunk(json!({ "role": "assistant", "content": "", "refusal": null }), Value::Null)],
        content: ctx.pieces.iter().map(|p| chunk(json!({ "content": p }), Value::Null)).collect(),
        tail,
        error: data(
            &json!({ "error": { "message": "The server had an error while processing your request.", "type": "server_error", "param": null, "code": null } }),
        ),
    }
}

fn completion(ctx: &Ctx<'_>) -> Value {
    json!({
        "id": ctx.id("cmpl-"),
        "object": "text_completion",
        "created": CREATED,
        "model": ctx.model,
        "choices": [{ "text": ctx.text(), "index": 0, "logprobs": null, "finish_reason": "stop" }],
        "usage": openai_usage(ctx),
    })
}

fn completion_events(ctx: &Ctx<'_>) -> Events {
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
        content: ctx.pieces.iter().map(|p| chunk(p, Value::Null)).collect(),
        tail: vec![chunk("", json!("stop")), Bytes::from_static(b"data: [DONE]\n\n")],
        error: data(
            &json!({ "error": { "message": "The server had an error while processing your request.", "type": "server_error", "param": null, "code": null } }),
        ),
    }
}

fn output_message(ctx: &Ctx<'_>, status: &str, text: &str) -> Value {
    json!({
        "id": ctx.id("msg_"),
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": [{ "type": "output_text", "text": text, "annotations": [], "logprobs": [] }],
    })
}

fn response_object(ctx: &Ctx<'_>, status: &str) -> Value {
    let done = status == "completed";
    json!({
        "id": ctx.id("resp_"),
        "object": "response",
        "created_at": CREATED,
        "status": status,
        "error": null,
        "incomplete_details": null,
        "instructions": null,
        "model": ctx.model,
        "output": if done { json!([output_message(ctx, "completed", &ctx.text())]) } else { json!([]) },
        "parallel_tool_calls": true,
        "temperature": 1.0,
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "usage": if done { json!({
            "input_tokens": ctx.input_tokens,
            "input_tokens_details": { "cached_tokens": 0 },
            "output_tokens": ctx.output_tokens(),
            "output_tokens_details": { "reasoning_tokens": 0 },
            "total_tokens": ctx.input_tokens + ctx.output_tokens(),
        }) } else { Value::Null },
    })
}

fn response_events(ctx: &Ctx<'_>) -> Events {
    let mut seq = 0u64;
    let mut ev = |name: &str, mut body: Value| {
        body["type"] = json!(name);
        body["sequence_number"] = json!(seq);
        seq += 1;
        event(name, &body)
    };
    let item_id = ctx.id("msg_");
    let text = ctx.text();
    let preamble = vec![
        ev("response.created", json!({ "response": response_object(ctx, "in_progress") })),
        ev("response.in_progress", json!({ "response": response_object(ctx, "in_progress") })),
        ev("response.output_item.added", json!({ "output_index": 0, "item": output_message(ctx, "in_progress", "") })),
        ev(
            "response.content_part.added",
            json!({
                "item_id": item_id, "output_index": 0, "content_index": 0,
                "part": { "type": "output_text", "text": "", "annotations": [] },
            }),
        ),
    ];
    // The error event takes the place of the first content event.
    let error = event(
        "error",
        &json!({
            "type": "error", "code": "server_error", "param": null,
            "message": "The server had an error while processing your request.",
            "sequence_number": preamble.len(),
        }),
    );
    let content = ctx
        .pieces
        .iter()
        .map(|p| {
            ev(
                "response.output_text.delta",
                json!({
                    "item_id": item_id, "output_index": 0, "content_index": 0, "delta": p, "logprobs": [],
                }),
            )
        })
        .collect();
    let tail = vec![
        ev(
            "response.output_text.done",
            json!({
                "item_id": item_id, "output_index": 0, "content_index": 0, "text": text, "logprobs": [],
            }),
        ),
        ev(
            "response.content_part.done",
            json!({
                "item_id": item_id, "output_index": 0, "content_index": 0,
                "part": { "type": "output_text", "text": text, "annotations": [] },
            }),
        ),
        ev("response.output_item.done", json!({ "output_index": 0, "item": output_message(ctx, "completed", &text) })),
        ev("response.completed", json!({ "response": response_object(ctx, "completed") })),
    ];
    Events { preamble, content, tail, error }
}

fn message(ctx: &Ctx<'_>) -> Value {
    json!({
        "id": ctx.id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": ctx.model,
        "content": [{ "type": "text", "text": ctx.text() }],
        "stop_reason": "end_turn",
        "stop_sequence": null,
        "usage": {
            "input_tokens": ctx.input_tokens,
            "output_tokens": ctx.output_tokens(),
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    })
}

fn message_events(ctx: &Ctx<'_>) -> Events {
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
    Events {
        preamble: vec![
            event("message_start", &start),
            event(
                "content_block_start",
                &json!({ "type": "content_block_start", "index": 0, "content_block": { "type": "text", "text": "" } }),
            ),
            event("ping", &json!({ "type": "ping" })),
        ],
        content: ctx
            .pieces
            .iter()
            .map(|p| {
                event(
                    "content_block_delta",
                    &json!({ "type": "content_block_delta", "index": 0, "delta": { "type": "text_delta", "text": p } }),
                )
            })
            .collect(),
        tail: vec![
            event("content_block_stop", &json!({ "type": "content_block_stop", "index": 0 })),
            event(
                "message_delta",
                &json!({
                    "type": "message_delta",
                    "delta": { "stop_reason": "end_turn", "stop_sequence": null },
                    "usage": { "output_tokens": ctx.output_tokens() },
                }),
            ),
            event("message_stop", &json!({ "type": "message_stop" })),
        ],
        error: event(
            "error",
            &json!({ "type": "error", "error": { "type": "overloaded_error", "message": "Overloaded" } }),
        ),
    }
}

/// A small deterministic vector per input, in the requested encoding.
fn embeddings(ctx: &Ctx<'_>, request: &Value) -> Value {
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

/// An error body in the endpoint's own protocol.
pub fn error_body(endpoint: Endpoint, status: StatusCode) -> Value {
    let reason = match status.as_u16() {
        529 => "Overloaded",
        _ => status.canonical_reason().unwrap_or("error"),
    };
    let message = format!("simulated {} {reason}", status.as_u16());
    if endpoint.is_anthropic() {
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
    } else {
        let kind = match status.as_u16() {
            429 => "rate_limit_error",
            400..=499 => "invalid_request_error",
            _ => "server_error",
        };
        json!({ "error": { "message": message, "type": kind, "param": null, "code": null } })
    }
}

/// A request's headers and query string in one line: `name: value; ...`.
pub fn echo(headers: &axum::http::HeaderMap, query: Option<&str>) -> String {
    let mut parts: Vec<String> =
        headers.iter().map(|(n, v)| format!("{n}: {}", String::from_utf8_lossy(v.as_bytes()))).collect();
    if let Some(q) = query {
        parts.push(format!("query: {q}"));
    }
    parts.join("; ")
}

/// An error body in the endpoint's own protocol whose message echoes `echo`.
pub fn echo_body(endpoint: Endpoint, status: StatusCode, echo: &str) -> Value {
    let mut body = error_body(endpoint, status);
    let message = format!("simulated {} for a request with {echo}", status.as_u16());
    if let Some(m) = body.pointer_mut("/error/message") {
        *m = json!(message);
    }
    body
}

/// The endpoint's error event, its message echoing `echo`.
pub fn echo_event(endpoint: Endpoint, echo: &str) -> Bytes {
    let message = format!("stream failed for a request with {echo}");
    match endpoint {
        Endpoint::Messages | Endpoint::CountTokens => {
            event("error", &json!({ "type": "error", "error": { "type": "api_error", "message": message } }))
        }
        Endpoint::Responses => {
            event("error", &json!({ "type": "error", "code": "server_error", "param": null, "message": message }))
        }
        Endpoint::Chat | Endpoint::Completions | Endpoint::Embeddings => {
            data(&json!({ "error": { "message": message, "type": "server_error", "param": null, "code": null } }))
        }
    }
}

/// `GET /v1/models` in OpenAI's list shape.
pub fn models_list(owner: &str, models: &[String]) -> Value {
    let data: Vec<Value> =
        models.iter().map(|m| json!({ "id": m, "object": "model", "created": CREATED, "owned_by": owner })).collect();
    json!({ "object": "list", "data": data })
}
