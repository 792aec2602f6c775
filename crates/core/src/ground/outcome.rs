//! How attempts and requests end, and why an attempt started: the words
//! the journal, the history, the policy and the admin API share.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Why an attempt started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    First,
    Retry,
    Fallback,
    /// Let through by a half-open breaker to test the provider.
    Probe,
    /// Started alongside an attempt whose first byte was late
    /// ([`crate::policy::hedge`]); the first of the two to answer is kept.
    /// Last, so the variants before it keep their postcard index.
    Hedge,
    /// Continues a stream the attempt before it broke off after content
    /// had reached the client: the text sent so far is its prompt's end.
    Resume,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::First => "first",
            Reason::Retry => "retry",
            Reason::Fallback => "fallback",
            Reason::Probe => "probe",
            Reason::Hedge => "hedge",
            Reason::Resume => "resume",
        }
    }
}

/// How an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum AttemptOutcome {
    Ok,
    /// The provider answered with an error status.
    HttpError,
    ConnectError,
    TransportError,
    Timeout,
    /// An error event before any content.
    StreamError,
    /// The stream ended or broke before any content.
    StreamDropped,
    /// The stream failed after content had been sent.
    MidStreamFailure,
    /// The client went away.
    Canceled,
    /// Passed over without a call: the provider cannot take this request
    /// (a field it cannot be translated for, tools it lacks) or a policy
    /// keeps it from doing so; the attempt's `error` says which and why.
    /// Last, so the variants before it keep their postcard index (spool.rs).
    Skipped,
    /// Called, then let go unanswered: the other attempt of its hedge
    /// answered first ([`crate::policy::hedge`]). Says nothing of the
    /// provider's health; a sample of its speed only as a lower bound.
    Hedged,
}

impl AttemptOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptOutcome::Ok => "ok",
            AttemptOutcome::HttpError => "http_error",
            AttemptOutcome::ConnectError => "connect_error",
            AttemptOutcome::TransportError => "transport_error",
            AttemptOutcome::Timeout => "timeout",
            AttemptOutcome::StreamError => "stream_error",
            AttemptOutcome::StreamDropped => "stream_dropped",
            AttemptOutcome::MidStreamFailure => "mid_stream_failure",
            AttemptOutcome::Canceled => "canceled",
            AttemptOutcome::Skipped => "skipped",
            AttemptOutcome::Hedged => "hedged",
        }
    }

    /// Whether the provider was called at all: a skipped attempt made no
    /// call, so it has no latency, says nothing of the provider's health
    /// and is no hop between providers.
    pub fn called(self) -> bool {
        self != AttemptOutcome::Skipped
    }

    /// Whether the attempt ran its course, as a sample of the provider's
    /// success and speed: one let go for its hedge did not.
    pub fn sampled(self) -> bool {
        !matches!(self, AttemptOutcome::Skipped | AttemptOutcome::Hedged)
    }
}

/// The names history stores and the admin API sends.
macro_rules! display_as_str {
    ($($t:ty),*) => {$(
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    )*};
}

display_as_str!(Reason, AttemptOutcome, RequestOutcome);

/// How a request ended, as the client saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum RequestOutcome {
    /// A 2xx answer delivered in full.
    Ok,
    /// A provider's error (4xx) relayed to the client.
    ProviderError,
    /// The gateway's own error after trying (or refusing) providers.
    Error,
    /// Refused before any provider was considered (bad body, unknown model).
    Rejected,
    /// A stream that failed after content had been sent.
    Failed,
    Canceled,
}

impl RequestOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            RequestOutcome::Ok => "ok",
            RequestOutcome::ProviderError => "provider_error",
            RequestOutcome::Error => "error",
            RequestOutcome::Rejected => "rejected",
            RequestOutcome::Failed => "failed",
            RequestOutcome::Canceled => "canceled",
        }
    }
}

/// What an attempt's outcome means for the provider's health.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Healthy,
    Failed,
    /// Could not connect: a failure for this instance's breaker, which may
    /// be only this instance's (its DNS, its network).
    Unreachable,
    /// Rate-limited: cool down until then; not a breaker failure.
    RateLimited(Duration),
    /// No outcome (canceled, or the client's own error).
    Neutral,
}

/// What the cache did for a request, as the `x-switchyard-cache` header
/// says it, and as its history row records it (none when the cache was not
/// consulted). The variants' order is the spool's encoding: add new ones last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "lowercase")]
pub enum CacheStatus {
    /// Answered from the cache, fresh.
    Hit,
    /// Looked up and not found (or too old): the chain answered, and the
    /// answer was stored if it could be.
    Miss,
    /// The chain failed and an expired entry (within `ttl + stale`) answered.
    Stale,
    /// Not looked up: the client said `off` or `refresh`, or the request is
    /// not one the cache takes (sampled, a tool turn, stateful).
    Bypass,
}

impl CacheStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            CacheStatus::Hit => "hit",
            CacheStatus::Miss => "miss",
            CacheStatus::Stale => "stale",
            CacheStatus::Bypass => "bypass",
        }
    }
}
