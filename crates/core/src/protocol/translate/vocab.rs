//! The small vocabularies each format names things with, one table per
//! format: stop reasons (translation.md §C.2) and error classes (§E.2).
//!
//! Whole replies, streams and error bodies all read these tables, so a
//! format's words for an ending or a failure are written once: a reply and
//! a stream of the same reply end the same way, and an error means the same
//! whether it came as a status with a body or as an event after a 200.

use super::ir::{ErrorClass, StopReason};

/// A Chat `finish_reason`; `None` for a value that is no normal end
/// (DeepSeek's `insufficient_system_resource`), which is an error.
pub(crate) fn chat_reason(name: &str) -> Option<StopReason> {
    match name {
        "stop" => Some(StopReason::EndTurn),
        "length" => Some(StopReason::MaxTokens),
        "tool_calls" | "function_call" => Some(StopReason::ToolUse),
        "content_filter" => Some(StopReason::Refusal),
        _ => None,
    }
}

pub(crate) fn chat_finish(reason: StopReason) -> &'static str {
    match reason {
        StopReason::EndTurn | StopReason::StopSequence | StopReason::PauseTurn => "stop",
        StopReason::MaxTokens => "length",
        StopReason::ToolUse => "tool_calls",
        StopReason::Refusal => "content_filter",
    }
}

/// A Responses `incomplete_details.reason`.
pub(crate) fn responses_incomplete(reason: &str) -> StopReason {
    match reason {
        "content_filter" => StopReason::Refusal,
        _ => StopReason::MaxTokens,
    }
}

/// The Responses `incomplete_details.reason` of a reason that ends a
/// response as incomplete; `None` when it completes.
pub(crate) fn responses_incomplete_reason(reason: StopReason) -> Option<&'static str> {
    match reason {
        StopReason::MaxTokens => Some("max_output_tokens"),
        StopReason::Refusal => Some("content_filter"),
        StopReason::EndTurn | StopReason::StopSequence | StopReason::ToolUse | StopReason::PauseTurn => None,
    }
}

/// A Messages `stop_reason`. Unknown values end the turn normally.
pub(crate) fn messages_reason(name: &str) -> StopReason {
    match name {
        "stop_sequence" => StopReason::StopSequence,
        "max_tokens" | "model_context_window_exceeded" => StopReason::MaxTokens,
        "tool_use" => StopReason::ToolUse,
        "pause_turn" => StopReason::PauseTurn,
        "refusal" => StopReason::Refusal,
        _ => StopReason::EndTurn,
    }
}

pub(crate) fn messages_reason_name(reason: StopReason) -> &'static str {
    match reason {
        StopReason::EndTurn => "end_turn",
        StopReason::StopSequence => "stop_sequence",
        StopReason::MaxTokens => "max_tokens",
        StopReason::ToolUse => "tool_use",
        StopReason::Refusal => "refusal",
        StopReason::PauseTurn => "pause_turn",
    }
}

/// A Gemini `finishReason`; `Err` for the ones that mean the model's output
/// was unusable (a malformed function call), which are errors.
pub(crate) fn gemini_reason(name: &str) -> Result<StopReason, ()> {
    match name {
        "MAX_TOKENS" => Ok(StopReason::MaxTokens),
        "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII" | "IMAGE_SAFETY" | "LANGUAGE" => {
            Ok(StopReason::Refusal)
        }
        "MALFORMED_FUNCTION_CALL" | "UNEXPECTED_TOOL_CALL" | "TOO_MANY_TOOL_CALLS" => Err(()),
        _ => Ok(StopReason::EndTurn),
    }
}

pub(crate) fn gemini_finish(reason: StopReason) -> &'static str {
    match reason {
        StopReason::EndTurn | StopReason::StopSequence | StopReason::ToolUse | StopReason::PauseTurn => "STOP",
        StopReason::MaxTokens => "MAX_TOKENS",
        StopReason::Refusal => "SAFETY",
    }
}

/// An upstream error's class, and whether it is an exhausted quota or
/// credit balance rather than a rate limit (waiting does not help).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Classified {
    pub class: ErrorClass,
    pub quota: bool,
}

/// The class of an upstream error from what the provider called it (an
/// Anthropic error type, an OpenAI code or type, a Gemini status, a code
/// number), its HTTP status when it came with one, and its message.
///
/// Context-length errors are told by their message as well, since vendors
/// give them no code of their own. Where there is a status, only a name
/// that says more than a status can ([`name_class`]) overrides it; in a
/// stream (the status was 200) the first name known at all decides.
pub(crate) fn classify(names: &[&str], status: Option<u16>, message: &str) -> Classified {
    let quota =
        names.iter().any(|n| matches!(*n, "insufficient_quota" | "billing_error" | "402")) || status == Some(402);
    let class = if quota { ErrorClass::RateLimited } else { class_of(names, status, message) };
    Classified { class, quota }
}

fn class_of(names: &[&str], status: Option<u16>, message: &str) -> ErrorClass {
    if names.contains(&"context_length_exceeded") || is_context_too_long(message) {
        return ErrorClass::ContextTooLong;
    }
    let named = names.iter().filter_map(|n| name_class(n)).find(|(_, decisive)| *decisive || status.is_none());
    if let Some((class, _)) = named {
        return class;
    }
    if message.contains("API_KEY_INVALID") || message.contains("API key not valid") {
        return ErrorClass::Authentication;
    }
    status.map_or(ErrorClass::Server, status_class)
}

/// Every name a format gives an error, with its class and whether it is
/// decisive: a decisive name says more than the HTTP status beside it; the
/// rest (`invalid_request_error`, `INTERNAL`, code numbers) say no more
/// than a status and yield to it when there is one.
fn name_class(name: &str) -> Option<(ErrorClass, bool)> {
    use ErrorClass::*;
    Some(match name {
        "overloaded_error" | "server_is_overloaded" | "UNAVAILABLE" => (Overloaded, true),
        "rate_limit_error" | "rate_limit_exceeded" | "RESOURCE_EXHAUSTED" => (RateLimited, true),
        "authentication_error" | "invalid_api_key" | "UNAUTHENTICATED" => (Authentication, true),
        "permission_error" | "PERMISSION_DENIED" => (PermissionDenied, true),
        "not_found_error" | "model_not_found" | "NOT_FOUND" => (NotFound, true),
        "request_too_large" => (RequestTooLarge, true),
        "timeout_error" | "DEADLINE_EXCEEDED" => (Timeout, true),
        "context_length_exceeded" | "string_above_max_length" => (ContextTooLong, false),
        "invalid_request_error" | "invalid_prompt" | "INVALID_ARGUMENT" | "FAILED_PRECONDITION" | "400" => {
            (InvalidRequest, false)
        }
        "401" => (Authentication, false),
        "permission_denied" | "403" => (PermissionDenied, false),
        "404" => (NotFound, false),
        "413" => (RequestTooLarge, false),
        "insufficient_quota" | "billing_error" | "429" | "402" => (RateLimited, false),
        "overloaded" | "503" | "529" => (Overloaded, false),
        "timeout" | "504" => (Timeout, false),
        "api_error" | "server_error" | "INTERNAL" | "500" => (Server, false),
        _ => return None,
    })
}

fn status_class(status: u16) -> ErrorClass {
    match status {
        401 => ErrorClass::Authentication,
        403 => ErrorClass::PermissionDenied,
        404 => ErrorClass::NotFound,
        408 | 504 => ErrorClass::Timeout,
        413 => ErrorClass::RequestTooLarge,
        429 => ErrorClass::RateLimited,
        503 | 529 => ErrorClass::Overloaded,
        400..=499 => ErrorClass::InvalidRequest,
        _ => ErrorClass::Server,
    }
}

/// The phrases vendors use for a prompt longer than the context window.
const CONTEXT_PHRASES: &[&str] = &[
    "context_length_exceeded",
    "prompt is too long",
    "maximum context length",
    "exceeds the maximum number of tokens",
    "input length and max_tokens exceed context limit",
    "context window",
    "too many input tokens",
    "reduce the length of the messages",
    "input is too long for requested model",
];

/// Whether a message says the prompt is over the context window.
pub(crate) fn is_context_too_long(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    CONTEXT_PHRASES.iter().any(|p| lower.contains(p))
}

/// The Anthropic status and error type of a class.
pub(crate) fn messages_error(class: ErrorClass, quota: bool) -> (u16, &'static str) {
    match class {
        ErrorClass::InvalidRequest | ErrorClass::ContextTooLong => (400, "invalid_request_error"),
        ErrorClass::Authentication => (401, "authentication_error"),
        ErrorClass::PermissionDenied => (403, "permission_error"),
        ErrorClass::NotFound => (404, "not_found_error"),
        ErrorClass::RequestTooLarge => (413, "request_too_large"),
        ErrorClass::RateLimited if quota => (402, "billing_error"),
        ErrorClass::RateLimited => (429, "rate_limit_error"),
        ErrorClass::Overloaded => (529, "overloaded_error"),
        ErrorClass::Timeout => (504, "timeout_error"),
        ErrorClass::Server => (500, "api_error"),
    }
}

/// How an OpenAI-family client (Chat, Responses) is told of an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OpenAiError {
    /// The status of an error that comes before the reply.
    pub status: u16,
    /// `type` and `code` of that error body, as OpenAI writes them.
    pub kind: &'static str,
    pub code: Option<&'static str>,
    /// `type` and `code` of an error after the stream started: with the
    /// status already 200, the code is all a client has to go on, so every
    /// class names one (Codex classifies `response.failed` by it:
    /// `invalid_prompt` is not retried, `insufficient_quota` is final).
    pub stream_kind: &'static str,
    pub stream_code: &'static str,
}

/// The OpenAI words for a class.
pub(crate) fn openai_error(class: ErrorClass, quota: bool) -> OpenAiError {
    let row =
        |status, kind, code, stream_kind, stream_code| OpenAiError { status, kind, code, stream_kind, stream_code };
    match class {
        ErrorClass::InvalidRequest => {
            row(400, "invalid_request_error", None, "invalid_request_error", "invalid_prompt")
        }
        ErrorClass::ContextTooLong => row(
            400,
            "invalid_request_error",
            Some("context_length_exceeded"),
            "invalid_request_error",
            "context_length_exceeded",
        ),
        ErrorClass::Authentication => {
            row(401, "invalid_request_error", Some("invalid_api_key"), "authentication_error", "invalid_api_key")
        }
        ErrorClass::PermissionDenied => {
            row(403, "invalid_request_error", None, "permission_error", "permission_denied")
        }
        ErrorClass::NotFound => {
            row(404, "invalid_request_error", Some("model_not_found"), "invalid_request_error", "model_not_found")
        }
        ErrorClass::RequestTooLarge => {
            row(413, "invalid_request_error", None, "invalid_request_error", "request_too_large")
        }
        ErrorClass::RateLimited if quota => {
            row(429, "insufficient_quota", Some("insufficient_quota"), "insufficient_quota", "insufficient_quota")
        }
        ErrorClass::RateLimited => {
            row(429, "requests", Some("rate_limit_exceeded"), "rate_limit_error", "rate_limit_exceeded")
        }
        ErrorClass::Overloaded => {
            row(503, "server_error", Some("server_is_overloaded"), "server_error", "server_is_overloaded")
        }
        ErrorClass::Timeout => row(504, "server_error", Some("timeout"), "server_error", "timeout"),
        ErrorClass::Server => row(500, "server_error", Some("server_error"), "server_error", "server_error"),
    }
}

/// The Gemini error `code` and `status` of a class.
pub(crate) fn gemini_error(class: ErrorClass) -> (u16, &'static str) {
    match class {
        ErrorClass::InvalidRequest | ErrorClass::ContextTooLong | ErrorClass::RequestTooLarge => {
            (400, "INVALID_ARGUMENT")
        }
        ErrorClass::Authentication => (401, "UNAUTHENTICATED"),
        ErrorClass::PermissionDenied => (403, "PERMISSION_DENIED"),
        ErrorClass::NotFound => (404, "NOT_FOUND"),
        ErrorClass::RateLimited => (429, "RESOURCE_EXHAUSTED"),
        ErrorClass::Overloaded => (503, "UNAVAILABLE"),
        ErrorClass::Timeout => (504, "DEADLINE_EXCEEDED"),
        ErrorClass::Server => (500, "INTERNAL"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(names: &[&str], message: &str) -> ErrorClass {
        classify(names, None, message).class
    }

    #[test]
    fn every_class_round_trips_through_each_vocabulary_it_can_name() {
        use ErrorClass::*;
        for c in ErrorClass::ALL {
            let (_, kind) = messages_error(c, false);
            let m = if c == ContextTooLong { "prompt is too long: boom" } else { "boom" };
            assert_eq!(class(&[kind], m), c, "messages {c:?}");
            let o = openai_error(c, false);
            assert_eq!(
                class(&[o.stream_code, o.stream_kind], if c == ContextTooLong { "" } else { "boom" }),
                c,
                "openai {c:?}"
            );
        }
        assert_eq!(
            class(&["INVALID_ARGUMENT"], "input token count (9) exceeds the maximum number of tokens allowed (5)"),
            ContextTooLong
        );
        assert_eq!(class(&["weird"], "?"), Server);
    }

    #[test]
    fn an_exhausted_quota_is_named_as_such_in_every_openai_and_anthropic_word() {
        for names in [&["insufficient_quota"][..], &["billing_error"], &["402"]] {
            assert!(classify(names, None, "no credit").quota, "{names:?}");
        }
        assert!(!classify(&["rate_limit_exceeded"], None, "slow down").quota);
        let o = openai_error(ErrorClass::RateLimited, true);
        assert_eq!((o.code, o.stream_code), (Some("insufficient_quota"), "insufficient_quota"));
        assert_eq!(messages_error(ErrorClass::RateLimited, true), (402, "billing_error"));
    }
}
