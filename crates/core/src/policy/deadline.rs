//! One absolute deadline per request. It covers every attempt, backoff sleep
//! and fallback, so the gateway never keeps working for a client that has
//! already given up.

use std::time::Duration;

use axum::http::HeaderMap;
use tokio::time::Instant;

use crate::ground::headers::name;

/// Where a request's deadline came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `x-switchyard-timeout-ms`.
    Header,
    /// The SDK's own timeout (`x-stainless-timeout`), less a margin.
    Sdk,
    /// The route's or the global policy.
    Policy,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadline {
    pub at: Instant,
    pub budget: Duration,
    pub source: Source,
}

/// Longest budget accepted from a header, so a typo cannot pin a request for days.
const MAX_HEADER_BUDGET: Duration = Duration::from_secs(3600);

impl Deadline {
    /// The deadline for a request that arrived at `now`.
    pub fn for_request(headers: &HeaderMap, policy: Duration, now: Instant) -> Deadline {
        let (budget, source) = explicit_ms(headers)
            .map(|b| (b, Source::Header))
            .or_else(|| sdk_timeout(headers).map(|b| (b, Source::Sdk)))
            .unwrap_or((policy, Source::Policy));
        let budget = budget.min(MAX_HEADER_BUDGET);
        Deadline { at: now + budget, budget, source }
    }

    pub fn remaining(&self, now: Instant) -> Duration {
        self.at.saturating_duration_since(now)
    }

    pub fn expired(&self, now: Instant) -> bool {
        self.remaining(now).is_zero()
    }

    /// The timeout for an attempt starting now: the cap, or what is left.
    pub fn attempt_timeout(&self, cap: Duration, now: Instant) -> Duration {
        cap.min(self.remaining(now))
    }

    /// Whether a fallback may start: at least `min` must remain.
    pub fn allows_fallback(&self, min: Duration, now: Instant) -> bool {
        self.remaining(now) >= min
    }

    /// Whether sleeping `wait` still leaves `min` for the attempt after it.
    pub fn allows_wait(&self, wait: Duration, min: Duration, now: Instant) -> bool {
        self.remaining(now) >= wait + min
    }
}

fn explicit_ms(headers: &HeaderMap) -> Option<Duration> {
    let ms: u64 = headers.get(name::X_SWITCHYARD_TIMEOUT_MS)?.to_str().ok()?.trim().parse().ok()?;
    (ms > 0).then(|| Duration::from_millis(ms))
}

/// The OpenAI and Anthropic SDKs send their own timeout in seconds. The
/// gateway answers a little before it, so the client gets the gateway's
/// error instead of its own timeout.
fn sdk_timeout(headers: &HeaderMap) -> Option<Duration> {
    let secs: f64 = headers.get(name::X_STAINLESS_TIMEOUT)?.to_str().ok()?.trim().parse().ok()?;
    if !(secs.is_finite() && secs > 0.0) {
        return None;
    }
    let full = Duration::from_secs_f64(secs.min(MAX_HEADER_BUDGET.as_secs_f64()));
    let margin = (full / 20).clamp(Duration::from_millis(100), Duration::from_secs(2)).min(full / 2);
    Some(full - margin)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        pairs.iter().map(|(k, v)| (axum::http::HeaderName::from_static(k), HeaderValue::from_static(v))).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn header_wins_then_sdk_then_policy() {
        let now = Instant::now();
        let policy = Duration::from_secs(30);
        let d = Deadline::for_request(
            &headers(&[("x-switchyard-timeout-ms", "1500"), ("x-stainless-timeout", "600")]),
            policy,
            now,
        );
        assert_eq!((d.budget, d.source), (Duration::from_millis(1500), Source::Header));
        let d = Deadline::for_request(&headers(&[("x-stainless-timeout", "600")]), policy, now);
        assert_eq!((d.budget, d.source), (Duration::from_secs(598), Source::Sdk));
        let d = Deadline::for_request(&headers(&[("x-stainless-timeout", "1.0")]), policy, now);
        assert_eq!(d.budget, Duration::from_millis(900));
        let d = Deadline::for_request(&headers(&[("x-switchyard-timeout-ms", "soon")]), policy, now);
        assert_eq!((d.budget, d.source), (policy, Source::Policy));
    }

    #[tokio::test(start_paused = true)]
    async fn arithmetic_follows_the_clock() {
        let start = Instant::now();
        let d = Deadline::for_request(&HeaderMap::new(), Duration::from_millis(1500), start);
        assert_eq!(d.attempt_timeout(Duration::from_millis(500), start), Duration::from_millis(500));
        tokio::time::advance(Duration::from_millis(1200)).await;
        let now = Instant::now();
        assert_eq!(d.remaining(now), Duration::from_millis(300));
        assert_eq!(d.attempt_timeout(Duration::from_millis(500), now), Duration::from_millis(300));
        assert!(!d.allows_fallback(Duration::from_millis(500), now));
        assert!(d.allows_fallback(Duration::from_millis(300), now));
        assert!(!d.allows_wait(Duration::from_millis(250), Duration::from_millis(100), now));
        tokio::time::advance(Duration::from_millis(400)).await;
        assert!(d.expired(Instant::now()));
        assert_eq!(d.attempt_timeout(Duration::from_secs(1), Instant::now()), Duration::ZERO);
    }
}
