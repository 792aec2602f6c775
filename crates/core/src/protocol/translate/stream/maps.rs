//! The small vocabularies each format names things with: stop reasons
//! (translation.md §C.2), error classes (§E.2) and token counts (§C.3).

use serde_json::Value;

use crate::protocol::translate::ir::{ErrorClass, StopReason, Tokens};

/// A Messages `stop_reason`. Unknown values end the turn normally.
pub fn messages_reason(name: &str) -> StopReason {
    match name {
        "stop_sequence" => StopReason::StopSequence,
        "max_tokens" | "model_context_window_exceeded" => StopReason::MaxTokens,
        "tool_use" => StopReason::ToolUse,
        "pause_turn" => StopReason::PauseTurn,
        "refusal" => StopReason::Refusal,
        _ => StopReason::EndTurn,
    }
}

pub fn messages_reason_name(reason: StopReason) -> &'static str {
    match reason {
        StopReason::EndTurn => "end_turn",
        StopReason::StopSequence => "stop_sequence",
        StopReason::MaxTokens => "max_tokens",
        StopReason::ToolUse => "tool_use",
        StopReason::Refusal => "refusal",
        StopReason::PauseTurn => "pause_turn",
    }
}

/// A Chat `finish_reason`; `None` for a value that is no normal end
/// (DeepSeek's `insufficient_system_resource`), which is an error.
pub fn chat_reason(name: &str) -> Option<StopReason> {
    match name {
        "stop" => Some(StopReason::EndTurn),
        "length" => Some(StopReason::MaxTokens),
        "tool_calls" | "function_call" => Some(StopReason::ToolUse),
        "content_filter" => Some(StopReason::Refusal),
        _ => None,
    }
}

pub fn chat_finish(reason: StopReason) -> &'static str {
    match reason {
        StopReason::EndTurn | StopReason::StopSequence | StopReason::PauseTurn => "stop",
        StopReason::MaxTokens => "length",
        StopReason::ToolUse => "tool_calls",
        StopReason::Refusal => "content_filter",
    }
}

/// A Responses `incomplete_details.reason`.
pub fn responses_incomplete(reason: &str) -> StopReason {
    match reason {
        "content_filter" => StopReason::Refusal,
        _ => StopReason::MaxTokens,
    }
}

/// The Responses `incomplete_details.reason` of a reason that ends a
/// response as incomplete; `None` when it completes.
pub fn responses_incomplete_reason(reason: StopReason) -> Option<&'static str> {
    match reason {
        StopReason::MaxTokens => Some("max_output_tokens"),
        StopReason::Refusal => Some("content_filter"),
        StopReason::EndTurn | StopReason::StopSequence | StopReason::ToolUse | StopReason::PauseTurn => None,
    }
}

/// A Gemini `finishReason`; `Err` for the ones that mean the model's output
/// was unusable (a malformed function call), which are errors.
pub fn gemini_reason(name: &str) -> Result<StopReason, ()> {
    match name {
        "MAX_TOKENS" => Ok(StopReason::MaxTokens),
        "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII" | "IMAGE_SAFETY" | "LANGUAGE" => {
            Ok(StopReason::Refusal)
        }
        "MALFORMED_FUNCTION_CALL" | "UNEXPECTED_TOOL_CALL" | "TOO_MANY_TOOL_CALLS" => Err(()),
        _ => Ok(StopReason::EndTurn),
    }
}

pub fn gemini_finish(reason: StopReason) -> &'static str {
    match reason {
        StopReason::EndTurn | StopReason::StopSequence | StopReason::ToolUse | StopReason::PauseTurn => "STOP",
        StopReason::MaxTokens => "MAX_TOKENS",
        StopReason::Refusal => "SAFETY",
    }
}

/// The class of an upstream error from whatever the provider called it: an
/// Anthropic error type, an OpenAI type or code, a Gemini status, an HTTP
/// status code. Context-length errors are told by their message as well,
/// since vendors give them no code of their own.
pub fn error_class(names: &[&str], message: &str) -> ErrorClass {
    if is_context_too_long(message) {
        return ErrorClass::ContextTooLong;
    }
    names.iter().find_map(|n| class_of_name(n)).unwrap_or(ErrorClass::Server)
}

fn class_of_name(name: &str) -> Option<ErrorClass> {
    Some(match name {
        "context_length_exceeded" | "string_above_max_length" => ErrorClass::ContextTooLong,
        "invalid_request_error" | "invalid_prompt" | "INVALID_ARGUMENT" | "FAILED_PRECONDITION" | "400" => {
            ErrorClass::InvalidRequest
        }
        "authentication_error" | "invalid_api_key" | "UNAUTHENTICATED" | "401" => ErrorClass::Authentication,
        "permission_error" | "permission_denied" | "PERMISSION_DENIED" | "403" => ErrorClass::PermissionDenied,
        "not_found_error" | "model_not_found" | "NOT_FOUND" | "404" => ErrorClass::NotFound,
        "request_too_large" | "413" => ErrorClass::RequestTooLarge,
        "rate_limit_error"
        | "rate_limit_exceeded"
        | "insufficient_quota"
        | "billing_error"
        | "RESOURCE_EXHAUSTED"
        | "429"
        | "402" => ErrorClass::RateLimited,
        "overloaded_error" | "server_is_overloaded" | "overloaded" | "UNAVAILABLE" | "503" | "529" => {
            ErrorClass::Overloaded
        }
        "timeout_error" | "timeout" | "DEADLINE_EXCEEDED" | "504" => ErrorClass::Timeout,
        "api_error" | "server_error" | "INTERNAL" | "500" => ErrorClass::Server,
        _ => return None,
    })
}

/// The wordings vendors use for a prompt over the context window.
pub fn is_context_too_long(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    [
        "context_length_exceeded",
        "prompt is too long",
        "maximum context length",
        "exceeds the maximum number of tokens",
        "input length and max_tokens exceed context limit",
        "context window",
    ]
    .iter()
    .any(|p| m.contains(p))
}

/// The Anthropic error type of a class.
pub fn messages_error_type(class: ErrorClass) -> &'static str {
    match class {
        ErrorClass::InvalidRequest | ErrorClass::ContextTooLong => "invalid_request_error",
        ErrorClass::Authentication => "authentication_error",
        ErrorClass::PermissionDenied => "permission_error",
        ErrorClass::NotFound => "not_found_error",
        ErrorClass::RequestTooLarge => "request_too_large",
        ErrorClass::RateLimited => "rate_limit_error",
        ErrorClass::Overloaded => "overloaded_error",
        ErrorClass::Timeout => "timeout_error",
        ErrorClass::Server => "api_error",
    }
}

/// The message a Messages client gets: Claude Code compacts only on its
/// own wording of a context-length error.
pub fn messages_error_message(class: ErrorClass, message: &str) -> String {
    if class == ErrorClass::ContextTooLong && !message.to_ascii_lowercase().contains("prompt is too long") {
        format!("prompt is too long: {message}")
    } else {
        message.to_string()
    }
}

/// The OpenAI error `type` and `code` of a class (Chat and Responses; the
/// codes are the ones Codex classifies `response.failed` by).
pub fn openai_error(class: ErrorClass) -> (&'static str, &'static str) {
    match class {
        ErrorClass::InvalidRequest => ("invalid_request_error", "invalid_prompt"),
        ErrorClass::ContextTooLong => ("invalid_request_error", "context_length_exceeded"),
        ErrorClass::Authentication => ("authentication_error", "invalid_api_key"),
        ErrorClass::PermissionDenied => ("permission_error", "permission_denied"),
        ErrorClass::NotFound => ("invalid_request_error", "model_not_found"),
        ErrorClass::RequestTooLarge => ("invalid_request_error", "request_too_large"),
        ErrorClass::RateLimited => ("rate_limit_error", "rate_limit_exceeded"),
        ErrorClass::Overloaded => ("server_error", "server_is_overloaded"),
        ErrorClass::Timeout => ("server_error", "timeout"),
        ErrorClass::Server => ("server_error", "server_error"),
    }
}

/// The Gemini error `code` and `status` of a class.
pub fn gemini_error(class: ErrorClass) -> (u16, &'static str) {
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

/// A token count at `key`: a non-negative integer, or "did not say" for
/// anything else a provider puts there (null, a string, a float).
pub fn count(usage: &Value, key: &str) -> Option<u64> {
    usage.get(key).and_then(Value::as_u64)
}

/// A count nested one object down (`prompt_tokens_details.cached_tokens`).
pub fn count_in(usage: &Value, object: &str, key: &str) -> Option<u64> {
    usage.get(object).and_then(|o| count(o, key))
}

/// Later readings win field by field: Anthropic sends input first and
/// output last, and some providers repeat cumulative usage on every chunk.
pub fn merge(earlier: Tokens, later: Tokens) -> Tokens {
    Tokens {
        input: later.input.or(earlier.input),
        output: later.output.or(earlier.output),
        cache_read: later.cache_read.or(earlier.cache_read),
        cache_write: later.cache_write.or(earlier.cache_write),
        reasoning: later.reasoning.or(earlier.reasoning),
    }
}

/// Input tokens without the cached ones, as Anthropic counts them.
pub fn uncached_input(tokens: &Tokens) -> u64 {
    tokens
        .input
        .unwrap_or(0)
        .saturating_sub(tokens.cache_read.unwrap_or(0))
        .saturating_sub(tokens.cache_write.unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_class_round_trips_through_each_vocabulary_it_can_name() {
        use ErrorClass::*;
        for class in [
            InvalidRequest,
            ContextTooLong,
            Authentication,
            PermissionDenied,
            NotFound,
            RequestTooLarge,
            RateLimited,
            Overloaded,
            Timeout,
            Server,
        ] {
            let m = messages_error_message(class, "boom");
            assert_eq!(error_class(&[messages_error_type(class)], &m), class, "messages {class:?}");
            let (t, c) = openai_error(class);
            let want = if class == NotFound { NotFound } else { class };
            assert_eq!(
                error_class(&[c, t], if class == ContextTooLong { "" } else { "boom" }),
                want,
                "openai {class:?}"
            );
        }
        assert_eq!(
            error_class(
                &["INVALID_ARGUMENT"],
                "input token count (9) exceeds the maximum number of tokens allowed (5)"
            ),
            ContextTooLong
        );
        assert_eq!(error_class(&["weird"], "?"), Server);
    }

    #[test]
    fn anthropic_input_excludes_cache_and_saturates() {
        let t = Tokens { input: Some(100), cache_read: Some(90), cache_write: Some(5), ..Tokens::default() };
        assert_eq!(uncached_input(&t), 5);
        let odd = Tokens { input: Some(1), cache_read: Some(90), ..Tokens::default() };
        assert_eq!(uncached_input(&odd), 0);
    }
}
