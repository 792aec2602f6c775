//! Response bodies and SSE event sequences, shaped like the real providers'.
//!
//! One module per wire format: [`openai`] (Chat Completions, Completions,
//! Embeddings), [`responses`] (OpenAI Responses), [`anthropic`] (Messages)
//! and [`gemini`] (`generateContent` and friends). Each builds the reply to a
//! [`Turn`], text or tool calls, as one body or as [`Events`]. This file
//! holds what they share: endpoints, the reply shapes, errors and echoes.
//!
//! In every stream the opening of a block (Messages `content_block_start`,
//! Responses `output_item.added`, the Chat chunk with a tool call's id and
//! name) is preamble; the text or argument deltas are content, so
//! [`crate::Fault::DropAfter`] counts those.

pub mod anthropic;
pub mod gemini;
pub mod openai;
pub mod responses;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use serde_json::{json, Value};

use crate::agent::{split, ToolCall, Turn};

/// A simulated endpoint, by path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Chat,
    Completions,
    Embeddings,
    Responses,
    Messages,
    CountTokens,
    /// `POST /v1beta/models/{model}:generateContent`.
    GeminiGenerate,
    /// `POST /v1beta/models/{model}:streamGenerateContent`.
    GeminiStream,
    /// `POST /v1beta/models/{model}:countTokens`.
    GeminiCountTokens,
}

impl Endpoint {
    /// The endpoint for a path (the query, such as Anthropic's `?beta=true`, is not part of it).
    pub fn from_path(path: &str) -> Option<Endpoint> {
        if let Some((_, method)) = gemini_target(path) {
            return Some(match method {
                "generateContent" => Endpoint::GeminiGenerate,
                "streamGenerateContent" => Endpoint::GeminiStream,
                "countTokens" => Endpoint::GeminiCountTokens,
                _ => return None,
            });
        }
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

    fn is_gemini(self) -> bool {
        matches!(self, Endpoint::GeminiGenerate | Endpoint::GeminiStream | Endpoint::GeminiCountTokens)
    }
}

/// A Gemini path's model and method: `/v1beta/models/{model}:{method}`
/// (the stable `/v1/models/...` too).
pub fn gemini_target(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix("/v1beta/models/").or_else(|| path.strip_prefix("/v1/models/"))?;
    rest.rsplit_once(':').filter(|(model, _)| !model.is_empty())
}

/// A successful reply: one JSON body, or a stream of events.
#[derive(Debug)]
pub enum Reply {
    Json(Value),
    Events(Events),
}

/// How a stream is framed on the wire.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// Server-sent events.
    #[default]
    Sse,
    /// One JSON array written piece by piece (Gemini without `alt=sse`).
    JsonArray,
}

/// A stream in three parts, so faults can strike before or after content.
#[derive(Debug, Default)]
pub struct Events {
    /// Events before any content (`message_start`, `response.created`, role deltas, block starts).
    pub preamble: Vec<Bytes>,
    /// One event per content piece (text or tool-call argument deltas).
    pub content: Vec<Bytes>,
    /// Closing events (finish reason, usage, `[DONE]`, `message_stop`).
    pub tail: Vec<Bytes>,
    /// The protocol's error event, sent instead of content under `Fault::ErrorEvent`.
    pub error: Bytes,
    pub framing: Framing,
}

/// What a call asked for, as the reply builders need it.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub endpoint: Endpoint,
    pub path: &'a str,
    pub query: Option<&'a str>,
    pub body: &'a Value,
}

/// Fixed epoch so that replies are reproducible byte for byte.
const CREATED: u64 = 1_767_225_600;

fn data(value: &Value) -> Bytes {
    Bytes::from(format!("data: {value}\n\n"))
}

fn event(name: &str, value: &Value) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {value}\n\n"))
}

/// The text pieces of a reply: `"Hello from <name>."` and then numbered words.
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

/// One call's reply, whatever its format.
struct Ctx<'a> {
    name: &'a str,
    call: usize,
    model: String,
    input_tokens: u64,
    turn: Turn,
    chunks: usize,
    thinking: usize,
}

impl Ctx<'_> {
    /// The text pieces (none when the turn is tool calls).
    fn pieces(&self) -> &[String] {
        match &self.turn {
            Turn::Text(pieces) => pieces,
            Turn::Tools(_) => &[],
        }
    }
    fn text(&self) -> String {
        self.pieces().concat()
    }
    fn calls(&self) -> &[ToolCall] {
        match &self.turn {
            Turn::Tools(calls) => calls,
            Turn::Text(_) => &[],
        }
    }
    /// A tool call's arguments in the pieces a stream sends: always several.
    fn argument_pieces(&self, call: &ToolCall) -> Vec<String> {
        split(&call.input.text(), self.chunks.max(2))
    }
    fn output_tokens(&self) -> u64 {
        match &self.turn {
            Turn::Text(pieces) => pieces.len() as u64,
            Turn::Tools(calls) => calls.iter().map(|c| self.argument_pieces(c).len().max(1) as u64).sum(),
        }
    }
    fn id(&self, prefix: &str) -> String {
        format!("{prefix}{}{}", self.name.replace(|c: char| !c.is_ascii_alphanumeric(), ""), self.call)
    }
    /// The id of the call's `i`th tool call.
    fn call_id(&self, prefix: &str, i: usize) -> String {
        format!("{}_{i}", self.id(prefix))
    }
}

/// The successful reply for a call that takes `turn`.
pub fn plan(name: &str, call: usize, request: Request<'_>, turn: Turn, pacing: crate::script::Pacing) -> Reply {
    let (chunks, thinking) = (pacing.chunks, pacing.thinking);
    let body = request.body;
    let model = match gemini_target(request.path) {
        Some((model, _)) if request.endpoint.is_gemini() => model.to_string(),
        _ => body.get("model").and_then(Value::as_str).unwrap_or("sim-model").to_string(),
    };
    let input_tokens = (body.to_string().len() as u64 / 4).max(1);
    let ctx = Ctx { name, call, model, input_tokens, turn, chunks, thinking };
    let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    match (request.endpoint, stream) {
        (Endpoint::Chat, false) => Reply::Json(openai::chat(&ctx)),
        (Endpoint::Chat, true) => {
            let usage = body.pointer("/stream_options/include_usage").and_then(Value::as_bool).unwrap_or(false);
            Reply::Events(openai::chat_events(&ctx, usage))
        }
        (Endpoint::Completions, false) => Reply::Json(openai::completion(&ctx)),
        (Endpoint::Completions, true) => Reply::Events(openai::completion_events(&ctx)),
        (Endpoint::Embeddings, _) => Reply::Json(openai::embeddings(&ctx, body)),
        (Endpoint::Responses, false) => Reply::Json(responses::response_object(&ctx, "completed")),
        (Endpoint::Responses, true) => Reply::Events(responses::response_events(&ctx)),
        (Endpoint::Messages, false) => Reply::Json(anthropic::message(&ctx)),
        (Endpoint::Messages, true) => Reply::Events(anthropic::message_events(&ctx)),
        (Endpoint::CountTokens, _) => Reply::Json(json!({ "input_tokens": ctx.input_tokens })),
        (Endpoint::GeminiGenerate, _) => Reply::Json(gemini::response(&ctx)),
        (Endpoint::GeminiStream, _) => Reply::Events(gemini::events(&ctx, gemini::framing(request.query))),
        (Endpoint::GeminiCountTokens, _) => Reply::Json(json!({ "totalTokens": ctx.input_tokens })),
    }
}

fn error_message(status: StatusCode) -> String {
    let reason = match status.as_u16() {
        529 => "Overloaded",
        _ => status.canonical_reason().unwrap_or("error"),
    };
    format!("simulated {} {reason}", status.as_u16())
}

/// An error body in the endpoint's own protocol.
pub fn error_body(endpoint: Endpoint, status: StatusCode) -> Value {
    let message = error_message(status);
    if endpoint.is_anthropic() {
        anthropic::error_body(status, &message)
    } else if endpoint.is_gemini() {
        gemini::error_body(status, &message)
    } else {
        let kind = match status.as_u16() {
            429 => "rate_limit_error",
            400..=499 => "invalid_request_error",
            _ => "server_error",
        };
        json!({ "error": { "message": message, "type": kind, "param": null, "code": null } })
    }
}

/// [`error_body`] for a status fault that carries `headers`: Gemini states a
/// `retry-after` again in the body, as `RetryInfo`.
pub fn error_body_with(endpoint: Endpoint, status: StatusCode, headers: &[(String, String)]) -> Value {
    let mut body = error_body(endpoint, status);
    let retry = headers.iter().find(|(n, _)| n.eq_ignore_ascii_case("retry-after")).map(|(_, v)| v.as_str());
    if let (true, Some(seconds)) = (endpoint.is_gemini(), retry) {
        body["error"]["details"] = json!([
            { "@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": format!("{seconds}s") },
        ]);
    }
    body
}

/// A request's headers and query string in one line: `name: value; ...`.
pub fn echo(headers: &HeaderMap, query: Option<&str>) -> String {
    let mut parts: Vec<String> =
        headers.iter().map(|(n, v)| format!("{n}: {}", String::from_utf8_lossy(v.as_bytes()))).collect();
    if let Some(q) = query {
        parts.push(format!("query: {q}"));
    }
    parts.join("; ")
}

/// An error body in the endpoint's own protocol whose message echoes `echo`.
pub fn echo_body(endpoint: Endpoint, status: StatusCode, echo: &str) -> Value {
    error_body_saying(endpoint, status, &format!("simulated {} for a request with {echo}", status.as_u16()))
}

/// An error body in the endpoint's own protocol saying `message`.
pub fn error_body_saying(endpoint: Endpoint, status: StatusCode, message: &str) -> Value {
    let mut body = error_body(endpoint, status);
    if let Some(m) = body.pointer_mut("/error/message") {
        *m = json!(message);
    }
    body
}

/// The endpoint's error event, its message echoing `echo`.
pub fn echo_event(request: Request<'_>, echo: &str) -> Bytes {
    let message = format!("stream failed for a request with {echo}");
    match request.endpoint {
        Endpoint::Messages | Endpoint::CountTokens => {
            event("error", &json!({ "type": "error", "error": { "type": "api_error", "message": message } }))
        }
        Endpoint::Responses => {
            event("error", &json!({ "type": "error", "code": "server_error", "param": null, "message": message }))
        }
        Endpoint::GeminiGenerate | Endpoint::GeminiStream | Endpoint::GeminiCountTokens => {
            gemini::error_event(gemini::framing(request.query), &message)
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
