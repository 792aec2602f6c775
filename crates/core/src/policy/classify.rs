//! The one place that decides what an upstream outcome means: for the
//! request (deliver, retry the same provider, fall back, or fail) and for the
//! provider's health. Every outcome is matched explicitly, so a new kind must
//! be decided here rather than silently retried.

use std::time::Duration;

use axum::http::StatusCode;

use crate::ground::outcome::AttemptOutcome;
use crate::ground::outcome::Verdict;
use crate::protocol::Protocol;

/// What happened when the gateway called a provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The provider answered with this status (for a stream: and reached content).
    Status(StatusCode),
    /// No connection could be made (refused, DNS, TLS).
    Connect,
    /// The connection broke before the response head.
    Transport,
    /// No answer (or, for a stream, no content) within the attempt's timeout.
    Timeout,
    /// A stream sent an error event before any content.
    StreamError,
    /// A stream ended or broke before any content.
    StreamDropped,
    /// A delivered stream broke after content had been sent.
    BrokenAfterContent,
}

/// What the gateway does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Hand the response to the client.
    Deliver,
    /// Try the same provider again after a backoff, budget permitting.
    Retry,
    /// Move on to the next provider.
    Fallback,
    /// Hand the provider's error to the client: only the client can fix it.
    Fail,
    /// The provider refused the gateway's key: revoke it, use another.
    RevokeKey,
}

/// A refusal the gateway can mend by changing the request, named by the
/// provider's own words: sent again once, to the same provider and key,
/// without what it rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repair {
    /// Anthropic rejected a thinking block's signature (replayed from
    /// another provider, truncated, or forged): every thinking block goes.
    StripThinking,
    /// A Chat server rejected `stream_options` (old Ollama, some gateways):
    /// it goes, and the provider is not sent it again.
    WithoutStreamOptions,
}

/// Whether an error of `status` from a provider of `kind` is worth reading
/// for a [`Repair`]: only client errors a repair answers are.
pub fn may_repair(kind: Protocol, status: StatusCode) -> bool {
    match kind {
        Protocol::Anthropic => status == StatusCode::BAD_REQUEST,
        Protocol::OpenAi => matches!(status.as_u16(), 400 | 422),
        Protocol::Gemini => false,
    }
}

/// The repair an error body asks for, if any. Anthropic says
/// `messages.1.content.0: Invalid `signature` in `thinking` block`; Chat
/// servers name the field (`Unrecognized request argument supplied:
/// stream_options`, `extra_forbidden` at `body.stream_options`).
pub fn repair(kind: Protocol, status: StatusCode, body: &str) -> Option<Repair> {
    if !may_repair(kind, status) {
        return None;
    }
    let text = body.to_ascii_lowercase();
    match kind {
        Protocol::Anthropic => {
            let signature = text.contains("invalid `signature` in `thinking` block")
                || text.contains("invalid signature in thinking block");
            signature.then_some(Repair::StripThinking)
        }
        Protocol::OpenAi => text.contains("stream_options").then_some(Repair::WithoutStreamOptions),
        Protocol::Gemini => None,
    }
}

/// Statuses where trying again can help.
fn retryable(status: StatusCode) -> bool {
    matches!(status.as_u16(), 408 | 409 | 425 | 429 | 500 | 502 | 503 | 504 | 529)
}

pub fn decide(outcome: Outcome, retry_timeouts: bool) -> Decision {
    match outcome {
        Outcome::Status(s) if s.is_success() || s.is_informational() || s.is_redirection() => Decision::Deliver,
        Outcome::Status(s) if retryable(s) => Decision::Retry,
        // Another provider may work where this one never will (501, 505, ...).
        Outcome::Status(s) if s.is_server_error() => Decision::Fallback,
        // The client's credentials never reach a provider: a refusal is about our key.
        Outcome::Status(s) if s == StatusCode::UNAUTHORIZED || s == StatusCode::FORBIDDEN => Decision::RevokeKey,
        // 400, 401, 403, 404, 413, 422 and the other client errors.
        Outcome::Status(_) => Decision::Fail,
        Outcome::Connect | Outcome::StreamError => Decision::Retry,
        // A timed-out generation may already have been billed.
        Outcome::Timeout if retry_timeouts => Decision::Retry,
        Outcome::Timeout => Decision::Fallback,
        // The request may have been processed; do not send it there again.
        Outcome::Transport | Outcome::StreamDropped => Decision::Fallback,
        // The client has part of the answer: nothing can be tried again.
        Outcome::BrokenAfterContent => Decision::Deliver,
    }
}

/// Whether the answer goes to the client as it is: a success, or an error
/// only the client can fix.
pub fn delivers(outcome: Outcome) -> bool {
    // `retry_timeouts` does not matter here: a timeout is never delivered.
    matches!(decide(outcome, false), Decision::Deliver | Decision::Fail)
}

pub fn is_rate_limit(outcome: Outcome) -> bool {
    outcome == Outcome::Status(StatusCode::TOO_MANY_REQUESTS)
}

/// What the outcome says about the provider. A 429 cools the provider down
/// for `wait` instead of counting as a breaker failure.
pub fn verdict(outcome: Outcome, wait: Option<Duration>) -> Verdict {
    match outcome {
        Outcome::Status(s) if s == StatusCode::TOO_MANY_REQUESTS => Verdict::RateLimited(wait.unwrap_or_default()),
        Outcome::Status(s) if s.is_server_error() || s == StatusCode::REQUEST_TIMEOUT => Verdict::Failed,
        // Conflicts, too-early and refused keys are about the request or the
        // key, not the provider's health.
        Outcome::Status(s) if matches!(s.as_u16(), 401 | 403 | 409 | 425) => Verdict::Neutral,
        Outcome::Status(_) => Verdict::Healthy,
        // Could not connect: perhaps only from here (DNS, this network).
        Outcome::Connect => Verdict::Unreachable,
        Outcome::Transport
        | Outcome::Timeout
        | Outcome::StreamError
        | Outcome::StreamDropped
        | Outcome::BrokenAfterContent => Verdict::Failed,
    }
}

/// What the end of a delivered stream says about the provider: a clean end
/// bears the head's verdict out, a break after content is a failure.
pub fn at_end(broke: bool) -> Verdict {
    if broke {
        verdict(Outcome::BrokenAfterContent, None)
    } else {
        Verdict::Healthy
    }
}

/// The verdict an attempt on record earned: what passive health counts, the
/// same the breaker was given. A canceled attempt says nothing, nor does a
/// skipped one: the provider was never called.
pub fn recorded(outcome: AttemptOutcome, status: Option<u16>) -> Verdict {
    let outcome = match outcome {
        AttemptOutcome::Ok | AttemptOutcome::HttpError => match status.and_then(|s| StatusCode::from_u16(s).ok()) {
            Some(s) => Outcome::Status(s),
            None => return Verdict::Neutral,
        },
        AttemptOutcome::ConnectError => Outcome::Connect,
        AttemptOutcome::TransportError => Outcome::Transport,
        AttemptOutcome::Timeout => Outcome::Timeout,
        AttemptOutcome::StreamError => Outcome::StreamError,
        AttemptOutcome::StreamDropped => Outcome::StreamDropped,
        AttemptOutcome::MidStreamFailure => Outcome::BrokenAfterContent,
        AttemptOutcome::Canceled | AttemptOutcome::Skipped | AttemptOutcome::Hedged => return Verdict::Neutral,
    };
    // The wait only shapes a cool-down, which passive health does not keep.
    verdict(outcome, None)
}

/// Classifies a transport error from the HTTP client. (Timeouts are the
/// gateway's own, outside the client.)
pub fn of_transport(could_not_connect: bool) -> Outcome {
    if could_not_connect {
        Outcome::Connect
    } else {
        Outcome::Transport
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16) -> Outcome {
        Outcome::Status(StatusCode::from_u16(code).unwrap())
    }

    #[test]
    fn retry_only_where_it_can_help() {
        for code in [408, 409, 425, 429, 500, 502, 503, 504, 529] {
            assert_eq!(decide(status(code), false), Decision::Retry, "{code}");
        }
        for code in [400, 404, 413, 422] {
            assert_eq!(decide(status(code), false), Decision::Fail, "{code}");
        }
        assert_eq!(decide(status(401), false), Decision::RevokeKey);
        assert_eq!(decide(status(403), false), Decision::RevokeKey);
        assert_eq!(decide(status(501), false), Decision::Fallback);
        assert_eq!(decide(status(200), false), Decision::Deliver);
        assert_eq!(decide(Outcome::Connect, false), Decision::Retry);
        assert_eq!(decide(Outcome::StreamError, false), Decision::Retry);
        assert_eq!(decide(Outcome::StreamDropped, true), Decision::Fallback);
        assert_eq!(decide(Outcome::Transport, true), Decision::Fallback);
    }

    #[test]
    fn only_the_refusals_a_changed_request_answers_are_repaired() {
        let anthropic = r#"{"type":"error","error":{"type":"invalid_request_error","message":"messages.1.content.0: Invalid `signature` in `thinking` block"}}"#;
        let bad = StatusCode::BAD_REQUEST;
        assert_eq!(repair(Protocol::Anthropic, bad, anthropic), Some(Repair::StripThinking));
        assert_eq!(repair(Protocol::Anthropic, StatusCode::INTERNAL_SERVER_ERROR, anthropic), None);
        assert_eq!(repair(Protocol::Anthropic, bad, r#"{"error":{"message":"max_tokens: Field required"}}"#), None);
        assert_eq!(repair(Protocol::OpenAi, bad, anthropic), None, "an OpenAI server has no such blocks");
        let ollama = r#"{"error":{"message":"Unrecognized request argument supplied: stream_options"}}"#;
        assert_eq!(repair(Protocol::OpenAi, bad, ollama), Some(Repair::WithoutStreamOptions));
        let fastapi = r#"{"detail":[{"type":"extra_forbidden","loc":["body","stream_options"]}]}"#;
        assert_eq!(
            repair(Protocol::OpenAi, StatusCode::UNPROCESSABLE_ENTITY, fastapi),
            Some(Repair::WithoutStreamOptions)
        );
        assert_eq!(repair(Protocol::OpenAi, StatusCode::NOT_FOUND, ollama), None);
        assert_eq!(repair(Protocol::Anthropic, bad, ollama), None);
        assert!(
            !may_repair(Protocol::Gemini, bad) && !may_repair(Protocol::Anthropic, StatusCode::UNPROCESSABLE_ENTITY)
        );
    }

    #[test]
    fn timeouts_are_retried_only_when_the_route_allows() {
        assert_eq!(decide(Outcome::Timeout, false), Decision::Fallback);
        assert_eq!(decide(Outcome::Timeout, true), Decision::Retry);
    }

    #[test]
    fn rate_limits_cool_down_instead_of_tripping_the_breaker() {
        let wait = Some(Duration::from_secs(30));
        assert_eq!(verdict(status(429), wait), Verdict::RateLimited(Duration::from_secs(30)));
        assert_eq!(verdict(status(503), wait), Verdict::Failed);
        assert_eq!(verdict(status(529), None), Verdict::Failed);
        assert_eq!(verdict(status(400), None), Verdict::Healthy);
        assert_eq!(verdict(status(409), None), Verdict::Neutral);
        assert_eq!(verdict(Outcome::StreamDropped, None), Verdict::Failed);
    }

    #[test]
    fn a_stream_is_judged_again_at_its_end() {
        assert_eq!(at_end(false), Verdict::Healthy);
        assert_eq!(at_end(true), Verdict::Failed);
        assert_eq!(decide(Outcome::BrokenAfterContent, true), Decision::Deliver, "nothing is sent twice");
    }

    #[test]
    fn the_record_of_an_attempt_earns_the_verdict_the_breaker_got() {
        assert_eq!(recorded(AttemptOutcome::Ok, Some(200)), Verdict::Healthy);
        assert_eq!(recorded(AttemptOutcome::HttpError, Some(503)), Verdict::Failed);
        assert_eq!(recorded(AttemptOutcome::HttpError, Some(408)), Verdict::Failed);
        assert!(matches!(recorded(AttemptOutcome::HttpError, Some(429)), Verdict::RateLimited(_)));
        assert_eq!(recorded(AttemptOutcome::HttpError, Some(401)), Verdict::Neutral);
        assert_eq!(recorded(AttemptOutcome::MidStreamFailure, Some(200)), Verdict::Failed);
        assert_eq!(recorded(AttemptOutcome::Canceled, None), Verdict::Neutral);
        assert_eq!(recorded(AttemptOutcome::Skipped, None), Verdict::Neutral);
        assert_eq!(recorded(AttemptOutcome::Timeout, None), Verdict::Failed);
    }
}
