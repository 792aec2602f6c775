//! Errors across formats: a request that cannot be translated, and a
//! provider's error read in its format and written in the client's.
//!
//! The wording of context-length errors matters more than the rest: Claude
//! Code compacts its conversation only on `prompt is too long`, Codex only on
//! the code `context_length_exceeded`; so both are written in those exact
//! forms whatever the provider said.

use std::time::Duration;

use http::StatusCode;
use serde_json::{json, Value};

use super::ir::{ErrorClass, Format};
use super::vocab::{self, Classified};

/// A request that cannot be sent to a provider without changing its meaning;
/// the provider is skipped for it, with this as the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot translate `{field}`: {reason}")]
pub struct Untranslatable {
    /// JSON path of the offending field in the client's body, e.g.
    /// `messages[3].content[1]`.
    pub field: String,
    pub reason: String,
}

/// Why a request with tools does not go to a provider without them
/// (`tools = false`: Ollama's "does not support tools"). Stripping them
/// would leave an agent talking to a model that cannot act.
pub const NO_TOOLS: &str =
    "the provider does not support tools, and an agent's request without them would change its meaning";

impl Untranslatable {
    pub fn new(field: impl Into<String>, reason: impl Into<String>) -> Untranslatable {
        Untranslatable { field: field.into(), reason: reason.into() }
    }
}

/// An error a provider returned, in no particular format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{class:?}: {message}")]
pub struct UpstreamError {
    pub class: ErrorClass,
    pub message: String,
    pub retry_after: Option<Duration>,
    /// A rate limit that is really an exhausted quota or credit balance
    /// (OpenAI `insufficient_quota`, Anthropic `billing_error`): waiting does
    /// not help.
    pub quota: bool,
}

impl UpstreamError {
    pub fn new(class: ErrorClass, message: impl Into<String>) -> UpstreamError {
        UpstreamError { class, message: message.into(), retry_after: None, quota: false }
    }

    /// Takes a `retry-after` header (seconds, or an HTTP date is ignored) when
    /// the body gave no delay.
    pub fn with_retry_after_header(mut self, value: Option<&str>) -> UpstreamError {
        if self.retry_after.is_none() {
            self.retry_after = value.and_then(|v| v.trim().parse::<f64>().ok()).and_then(secs);
        }
        self
    }

    /// Whether the provider rejected a reasoning signature ("Invalid
    /// `signature` in `thinking` block"): worth one retry with every
    /// reasoning block stripped ([`super::passthrough::Scrub::AllReasoning`]
    /// or [`super::message::Request::strip_reasoning`]).
    pub fn is_invalid_signature(&self) -> bool {
        let m = self.message.to_ascii_lowercase();
        self.class == ErrorClass::InvalidRequest
            && (m.contains("signature") && (m.contains("thinking") || m.contains("invalid"))
                || m.contains("thought_signature"))
    }

    /// The `retry-after` header value to send the client, in whole seconds.
    pub fn retry_after_header(&self) -> Option<String> {
        self.retry_after.map(|d| whole_secs(d).to_string())
    }
}

fn secs(s: f64) -> Option<Duration> {
    (s.is_finite() && s >= 0.0).then(|| Duration::from_secs_f64(s))
}

fn whole_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

/// Reads a provider's error body in `format`.
pub fn decode_error(format: Format, status: StatusCode, body: &[u8]) -> UpstreamError {
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let err = v.get("error").unwrap_or(&v);
    let message = match err.get("message").and_then(Value::as_str) {
        Some(m) => m.to_owned(),
        None => match (&v, std::str::from_utf8(body)) {
            (Value::Null, Ok(text)) if !text.trim().is_empty() => text.trim().chars().take(500).collect(),
            _ => status.canonical_reason().unwrap_or("error").to_owned(),
        },
    };
    let kind = match format {
        Format::Messages => err.get("type"),
        Format::Gemini => err.get("status"),
        Format::Chat | Format::Responses => err.get("code").filter(|c| c.is_string()).or_else(|| err.get("type")),
    }
    .and_then(Value::as_str)
    .unwrap_or("");
    let Classified { class, quota } = vocab::classify(&[kind], Some(status.as_u16()), &message);
    let retry_after = gemini_retry_delay(err).or_else(|| try_again_in(&message));
    UpstreamError { class, message, retry_after, quota }
}

/// Gemini's `details[].retryDelay` ("30s", "1.5s").
fn gemini_retry_delay(err: &Value) -> Option<Duration> {
    err.get("details")?.as_array()?.iter().find_map(|d| {
        let text = d.get("retryDelay")?.as_str()?;
        secs(text.strip_suffix('s')?.parse().ok()?)
    })
}

/// OpenAI's "Please try again in 12s" / "in 1.5s" / "in 250ms" / "in 1m30s".
fn try_again_in(message: &str) -> Option<Duration> {
    let lower = message.to_ascii_lowercase();
    let rest = &lower[lower.find("try again in ")? + "try again in ".len()..];
    let spec: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '.').collect();
    let spec = spec.trim_end_matches('.');
    let mut total = 0.0;
    let mut number = String::new();
    let mut chars = spec.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() || c == '.' {
            number.push(c);
            continue;
        }
        let value: f64 = number.parse().ok()?;
        number.clear();
        total += match c {
            'm' if chars.peek() == Some(&'s') => {
                chars.next();
                value / 1000.0
            }
            'm' => value * 60.0,
            'h' => value * 3600.0,
            's' => value,
            _ => return None,
        };
    }
    if !number.is_empty() {
        return None;
    }
    secs(total)
}

/// Token counts in a context-length message: (prompt, maximum).
fn context_numbers(message: &str) -> Option<(u64, u64)> {
    let numbers: Vec<u64> =
        message.split(|c: char| !c.is_ascii_digit()).filter(|s| !s.is_empty()).filter_map(|s| s.parse().ok()).collect();
    let lower = message.to_ascii_lowercase();
    let (&a, &b) = (numbers.first()?, numbers.get(1)?);
    if lower.contains("maximum context length is") {
        Some((b, a)) // "maximum context length is M tokens. However, your messages resulted in N"
    } else {
        Some((a, b)) // "N tokens > M maximum", "input token count (N) exceeds … (M)"
    }
}

/// Writes an error in the client's `format`, with the status the client's
/// SDK expects. The caller sets `retry-after` from
/// [`UpstreamError::retry_after_header`] (Gemini also carries it in the body,
/// OpenAI also in the message).
pub fn encode_error(format: Format, err: &UpstreamError) -> (StatusCode, Vec<u8>) {
    let (status, body) = match format {
        Format::Messages => messages_error(err),
        Format::Chat | Format::Responses => openai_error(err),
        Format::Gemini => gemini_error(err),
    };
    (status, serde_json::to_vec(&body).unwrap_or_default())
}

fn status(code: u16) -> StatusCode {
    StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

fn messages_error(err: &UpstreamError) -> (StatusCode, Value) {
    let (code, _) = vocab::messages_error(err.class, err.quota);
    (status(code), messages_body(err))
}

/// The Messages error body, before the reply or as a stream's `error` event.
pub(crate) fn messages_body(err: &UpstreamError) -> Value {
    let (_, kind) = vocab::messages_error(err.class, err.quota);
    let message = match err.class {
        ErrorClass::ContextTooLong if err.message.starts_with("prompt is too long") => err.message.clone(),
        ErrorClass::ContextTooLong => match context_numbers(&err.message) {
            Some((n, m)) => format!("prompt is too long: {n} tokens > {m} maximum"),
            None => format!("prompt is too long: {}", err.message),
        },
        _ => err.message.clone(),
    };
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

fn openai_error(err: &UpstreamError) -> (StatusCode, Value) {
    let words = vocab::openai_error(err.class, err.quota);
    let error = json!({"message": openai_message(err), "type": words.kind, "param": null, "code": words.code});
    (status(words.status), json!({ "error": error }))
}

/// The message of an OpenAI error: a context-length error in OpenAI's own
/// wording, and the retry delay as "Please try again in Ns." when the
/// provider's message did not say it.
pub(crate) fn openai_message(err: &UpstreamError) -> String {
    let mut message = match err.class {
        ErrorClass::ContextTooLong => match context_numbers(&err.message) {
            Some((n, m)) if !err.message.contains("maximum context length") => format!(
                "This model's maximum context length is {m} tokens. However, your messages resulted in {n} tokens."
            ),
            _ => err.message.clone(),
        },
        _ => err.message.clone(),
    };
    if let Some(d) = err.retry_after.filter(|_| try_again_in(&err.message).is_none()) {
        message = format!("{} Please try again in {}s.", message.trim_end(), whole_secs(d));
    }
    message
}

fn gemini_error(err: &UpstreamError) -> (StatusCode, Value) {
    let (code, _) = vocab::gemini_error(err.class);
    (status(code), gemini_body(err))
}

/// The Gemini error body, before the reply or as a stream's last chunk.
pub(crate) fn gemini_body(err: &UpstreamError) -> Value {
    let (code, grpc) = vocab::gemini_error(err.class);
    let message = match (err.class, context_numbers(&err.message)) {
        (ErrorClass::ContextTooLong, Some((n, m))) if !err.message.contains("input token count") => {
            format!("The input token count ({n}) exceeds the maximum number of tokens allowed ({m}).")
        }
        _ => err.message.clone(),
    };
    let mut body = json!({"error": {"code": code, "message": message, "status": grpc}});
    if let Some(d) = err.retry_after {
        body["error"]["details"] = json!([{
            "@type": "type.googleapis.com/google.rpc.RetryInfo",
            "retryDelay": format!("{}s", whole_secs(d)),
        }]);
    }
    body
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn body(v: &[u8]) -> Value {
        serde_json::from_slice(v).unwrap()
    }

    #[test]
    fn retry_hints_are_read_in_every_spelling() {
        assert_eq!(try_again_in("Please try again in 12s."), Some(Duration::from_secs(12)));
        assert_eq!(try_again_in("Please try again in 1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(try_again_in("try again in 250ms."), Some(Duration::from_millis(250)));
        assert_eq!(try_again_in("Please try again in 1m30s."), Some(Duration::from_secs(90)));
        assert_eq!(try_again_in("try again later"), None);
        let e = UpstreamError::new(ErrorClass::RateLimited, "slow down").with_retry_after_header(Some("7"));
        assert_eq!(e.retry_after_header().as_deref(), Some("7"));
    }

    #[test]
    fn openai_context_length_reaches_claude_code_as_prompt_is_too_long() {
        let src = br#"{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130532 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
        let err = decode_error(Format::Chat, StatusCode::BAD_REQUEST, src);
        assert_eq!(err.class, ErrorClass::ContextTooLong);
        let (status, out) = encode_error(Format::Messages, &err);
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(
            body(&out),
            json!({"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 130532 tokens > 128000 maximum"}})
        );
        let (_, gem) = encode_error(Format::Gemini, &err);
        assert_eq!(
            body(&gem)["error"]["message"],
            "The input token count (130532) exceeds the maximum number of tokens allowed (128000)."
        );
    }

    #[test]
    fn anthropic_context_length_reaches_codex_as_its_code() {
        let src = br#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#;
        let err = decode_error(Format::Messages, StatusCode::BAD_REQUEST, src);
        assert_eq!(err.class, ErrorClass::ContextTooLong);
        let (status, out) = encode_error(Format::Responses, &err);
        assert_eq!(status, StatusCode::BAD_REQUEST);
        let out = body(&out);
        assert_eq!(out["error"]["code"], "context_length_exceeded");
        assert_eq!(
            out["error"]["message"],
            "This model's maximum context length is 200000 tokens. However, your messages resulted in 210000 tokens."
        );
        // Gemini's wording is recognised too.
        let gem = br#"{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}"#;
        assert_eq!(decode_error(Format::Gemini, StatusCode::BAD_REQUEST, gem).class, ErrorClass::ContextTooLong);
        let vllm = br#"{"object":"error","message":"This model's maximum context length is 32768 tokens. However, you requested 40000 tokens","type":"BadRequestError","code":400}"#;
        assert_eq!(decode_error(Format::Chat, StatusCode::BAD_REQUEST, vllm).class, ErrorClass::ContextTooLong);
    }

    #[test]
    fn anthropic_overloaded_reaches_openai_clients_as_503() {
        let src = br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        let err = decode_error(Format::Messages, status(529), src);
        assert_eq!(err.class, ErrorClass::Overloaded);
        let (status, out) = encode_error(Format::Responses, &err);
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body(&out)["error"]["code"], "server_is_overloaded");
        let (status, _) = encode_error(Format::Chat, &err);
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        let (status, out) = encode_error(Format::Gemini, &err);
        assert_eq!((status.as_u16(), body(&out)["error"]["status"].clone()), (503, json!("UNAVAILABLE")));
    }

    #[test]
    fn gemini_retry_delay_survives_into_every_format() {
        let src = br#"{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"30s"}]}}"#;
        let err = decode_error(Format::Gemini, StatusCode::TOO_MANY_REQUESTS, src);
        assert_eq!((err.class, err.retry_after), (ErrorClass::RateLimited, Some(Duration::from_secs(30))));
        let (status, out) = encode_error(Format::Messages, &err);
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(body(&out)["error"]["type"], "rate_limit_error");
        assert_eq!(err.retry_after_header().as_deref(), Some("30"));
        let (_, out) = encode_error(Format::Responses, &err);
        let message = body(&out)["error"]["message"].as_str().unwrap().to_owned();
        assert!(message.ends_with("Please try again in 30s."), "{message}");
        assert_eq!(try_again_in(&message), Some(Duration::from_secs(30)));
        assert_eq!(body(&out)["error"]["code"], "rate_limit_exceeded");
        let (_, out) = encode_error(Format::Gemini, &err);
        assert_eq!(body(&out)["error"]["details"][0]["retryDelay"], "30s");
    }

    #[test]
    fn a_rejected_signature_is_recognised() {
        let src = br#"{"type":"error","error":{"type":"invalid_request_error","message":"messages.1.content.0: Invalid `signature` in `thinking` block"}}"#;
        assert!(decode_error(Format::Messages, StatusCode::BAD_REQUEST, src).is_invalid_signature());
        let gem = br#"{"error":{"code":400,"message":"Function call is missing a thought_signature in functionCall parts.","status":"INVALID_ARGUMENT"}}"#;
        assert!(decode_error(Format::Gemini, StatusCode::BAD_REQUEST, gem).is_invalid_signature());
        let other = br#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: too large"}}"#;
        assert!(!decode_error(Format::Messages, StatusCode::BAD_REQUEST, other).is_invalid_signature());
    }

    #[test]
    fn quota_is_told_apart_from_a_rate_limit() {
        let src = br#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#;
        let err = decode_error(Format::Chat, StatusCode::TOO_MANY_REQUESTS, src);
        assert!(err.quota);
        let (status, out) = encode_error(Format::Messages, &err);
        assert_eq!((status.as_u16(), body(&out)["error"]["type"].clone()), (402, json!("billing_error")));
        let (status, out) = encode_error(Format::Chat, &err);
        assert_eq!((status.as_u16(), body(&out)["error"]["code"].clone()), (429, json!("insufficient_quota")));
    }

    #[test]
    fn statuses_classify_when_the_body_says_nothing() {
        for (code, class) in [
            (400, ErrorClass::InvalidRequest),
            (401, ErrorClass::Authentication),
            (403, ErrorClass::PermissionDenied),
            (404, ErrorClass::NotFound),
            (413, ErrorClass::RequestTooLarge),
            (429, ErrorClass::RateLimited),
            (500, ErrorClass::Server),
            (502, ErrorClass::Server),
            (503, ErrorClass::Overloaded),
            (504, ErrorClass::Timeout),
            (529, ErrorClass::Overloaded),
        ] {
            let err = decode_error(Format::Chat, status(code), b"upstream exploded");
            assert_eq!(err.class, class, "{code}");
            assert_eq!(err.message, "upstream exploded");
        }
        let key = br#"{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"reason":"API_KEY_INVALID"}]}}"#;
        assert_eq!(decode_error(Format::Gemini, StatusCode::BAD_REQUEST, key).class, ErrorClass::Authentication);
    }
}
