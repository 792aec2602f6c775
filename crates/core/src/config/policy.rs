//! The `[policy]` table and its per-provider and per-route overrides.
//! Durations are strings (`"30s"`, `"250ms"`); every value is checked.

use std::ops::Range;
use std::time::Duration;

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use toml::Spanned;

use crate::policy::hedge::{self, Hedge, HedgeAfter};
use crate::policy::order::Strategy;
use crate::policy::queue::QueuePolicy;
use crate::policy::{ProviderPolicy, RequestPolicy};

/// Every policy knob, each optional so a table sets only what it changes.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPolicy {
    // Request settings: [policy] and routes.
    deadline: Option<Spanned<String>>,
    attempt_timeout: Option<Spanned<String>>,
    max_retries: Option<Spanned<i64>>,
    retry_timeouts: Option<Spanned<bool>>,
    backoff_base: Option<Spanned<String>>,
    backoff_cap: Option<Spanned<String>>,
    max_retry_wait: Option<Spanned<String>>,
    min_fallback_budget: Option<Spanned<String>>,
    stream_idle_timeout: Option<Spanned<String>>,
    stream_keepalive: Option<Spanned<String>>,
    /// How long a session stays on the provider that last served it.
    session_stick: Option<Spanned<String>>,
    /// `cache = { ttl = "10m", stale = "1h" }`, `true` (the defaults) or `false` (off).
    cache: Option<Spanned<RawCache>>,
    /// `"ordered"`, `"latency"`, `"least_busy"`, `"cheapest"` or `"weighted"`.
    pub(super) strategy: Option<Spanned<String>>,
    /// `cheapest`'s latency bound.
    pub(super) max_latency: Option<Spanned<String>>,
    /// `"300ms"` or `"p95"`: hedge a first byte this late.
    hedge_after: Option<Spanned<String>>,
    /// The most of a route's requests in a minute that are hedged.
    hedge_max_share: Option<Spanned<f64>>,
    /// Finish a stream that broke off mid-answer at the next provider.
    resume: Option<Spanned<bool>>,
    // Provider settings: [policy] and providers.
    breaker_failure_rate: Option<Spanned<f64>>,
    breaker_window: Option<Spanned<String>>,
    breaker_min_calls: Option<Spanned<i64>>,
    breaker_consecutive_failures: Option<Spanned<i64>>,
    breaker_cooldown: Option<Spanned<String>>,
    breaker_cooldown_max: Option<Spanned<String>>,
    breaker_half_open_probes: Option<Spanned<i64>>,
    breaker_close_after: Option<Spanned<i64>>,
    max_concurrency: Option<Spanned<i64>>,
    fallback_share: Option<Spanned<f64>>,
    fallback_min: Option<Spanned<i64>>,
    fallback_window: Option<Spanned<String>>,
    requests_per_minute: Option<Spanned<i64>>,
    tokens_per_minute: Option<Spanned<i64>>,
    max_queue: Option<Spanned<i64>>,
    max_queue_wait: Option<Spanned<String>>,
    /// `false`: a session's requests go round-robin over the keys too.
    session_affinity: Option<Spanned<bool>>,
}

/// A `cache` value: a switch, or a table of settings.
#[derive(Debug)]
pub(super) enum RawCache {
    Switch(bool),
    Table(RawCacheTable),
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCacheTable {
    ttl: Option<String>,
    stale: Option<String>,
    tools: Option<bool>,
    sampled: Option<bool>,
}

/// By hand rather than untagged, so that a misspelt setting is named in the
/// error instead of "did not match any variant".
impl<'de> Deserialize<'de> for RawCache {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<RawCache, D::Error> {
        struct Either;
        impl<'de> Visitor<'de> for Either {
            type Value = RawCache;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a table such as { ttl = \"10m\", stale = \"1h\" }, or true or false")
            }
            fn visit_bool<E: de::Error>(self, on: bool) -> std::result::Result<RawCache, E> {
                Ok(RawCache::Switch(on))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> std::result::Result<RawCache, A::Error> {
                RawCacheTable::deserialize(de::value::MapAccessDeserializer::new(map)).map(RawCache::Table)
            }
        }
        d.deserialize_any(Either)
    }
}

/// A policy value that could not be accepted: where, which field, why.
#[derive(Debug)]
pub(super) struct PolicyError {
    pub span: Range<usize>,
    pub field: &'static str,
    pub message: String,
}

type Result<T> = std::result::Result<T, PolicyError>;

fn err<T>(span: Range<usize>, field: &'static str, message: impl Into<String>) -> Result<T> {
    Err(PolicyError { span, field, message: message.into() })
}

fn duration(v: &Option<Spanned<String>>, field: &'static str, into: &mut Duration) -> Result<()> {
    if let Some(v) = v {
        match humantime::parse_duration(v.get_ref()) {
            Ok(d) if !d.is_zero() => *into = d,
            _ => {
                return err(
                    v.span(),
                    field,
                    format!("{:?} is not a duration such as \"30s\" or \"250ms\"", v.get_ref()),
                )
            }
        }
    }
    Ok(())
}

fn count(v: &Option<Spanned<i64>>, field: &'static str, min: i64) -> Result<Option<u32>> {
    match v {
        None => Ok(None),
        Some(n) => match u32::try_from(*n.get_ref()) {
            Ok(c) if i64::from(c) >= min => Ok(Some(c)),
            _ => err(n.span(), field, format!("must be a whole number of at least {min}")),
        },
    }
}

fn fraction(v: &Option<Spanned<f64>>, field: &'static str, into: &mut f64) -> Result<()> {
    if let Some(v) = v {
        let x = *v.get_ref();
        if !(0.0..=1.0).contains(&x) {
            return err(v.span(), field, "must be between 0 and 1");
        }
        *into = x;
    }
    Ok(())
}

/// `strategy` and `max_latency`, in a `[policy]` table or a route.
pub(super) fn routing(
    strategy: &Option<Spanned<String>>,
    max_latency: &Option<Spanned<String>>,
    into: &mut RequestPolicy,
) -> Result<()> {
    if let Some(s) = strategy {
        into.strategy = Strategy::parse(s.get_ref()).ok_or_else(|| PolicyError {
            span: s.span(),
            field: "strategy",
            message: format!(
                "{:?} is not \"ordered\", \"latency\", \"least_busy\", \"cheapest\" or \"weighted\"",
                s.get_ref()
            ),
        })?;
    }
    if max_latency.is_some() {
        let mut bound = Duration::ZERO;
        duration(max_latency, "max_latency", &mut bound)?;
        into.max_latency = Some(bound);
    }
    Ok(())
}

impl RawPolicy {
    /// `base` with this table's request settings applied.
    pub fn request(&self, base: &RequestPolicy) -> Result<RequestPolicy> {
        let mut p = base.clone();
        duration(&self.deadline, "deadline", &mut p.deadline)?;
        duration(&self.attempt_timeout, "attempt_timeout", &mut p.attempt_timeout)?;
        if let Some(n) = count(&self.max_retries, "max_retries", 0)? {
            p.max_retries = n;
        }
        if let Some(b) = &self.retry_timeouts {
            p.retry_timeouts = *b.get_ref();
        }
        if let Some(b) = &self.resume {
            p.resume = *b.get_ref();
        }
        duration(&self.backoff_base, "backoff_base", &mut p.backoff_base)?;
        duration(&self.backoff_cap, "backoff_cap", &mut p.backoff_cap)?;
        duration(&self.max_retry_wait, "max_retry_wait", &mut p.max_retry_wait)?;
        duration(&self.min_fallback_budget, "min_fallback_budget", &mut p.min_fallback_budget)?;
        duration(&self.stream_idle_timeout, "stream_idle_timeout", &mut p.stream_idle_timeout)?;
        duration(&self.stream_keepalive, "stream_keepalive", &mut p.stream_keepalive)?;
        if self
            .session_stick
            .as_ref()
            .is_some_and(|v| humantime::parse_duration(v.get_ref()).is_ok_and(|d| d.is_zero()))
        {
            p.session_stick = Duration::ZERO;
        } else {
            duration(&self.session_stick, "session_stick", &mut p.session_stick)?;
        }
        routing(&self.strategy, &self.max_latency, &mut p)?;
        self.hedge(&mut p)?;
        Ok(p)
    }

    /// `hedge_after` and `hedge_max_share`: a share alone changes the
    /// share of a hedge set above (a route's over `[policy]`'s), and means
    /// nothing without one.
    fn hedge(&self, into: &mut RequestPolicy) -> Result<()> {
        if let Some(after) = &self.hedge_after {
            let parsed = HedgeAfter::parse(after.get_ref()).ok_or_else(|| PolicyError {
                span: after.span(),
                field: "hedge_after",
                message: format!("{:?} is not a duration such as \"300ms\", or \"p95\"", after.get_ref()),
            })?;
            let max_share = into.hedge.map_or(hedge::DEFAULT_MAX_SHARE, |h| h.max_share);
            into.hedge = Some(Hedge { after: parsed, max_share });
        }
        if let Some(share) = &self.hedge_max_share {
            let Some(hedge) = &mut into.hedge else {
                return err(share.span(), "hedge_max_share", "needs `hedge_after`: nothing is hedged without it");
            };
            fraction(&self.hedge_max_share, "hedge_max_share", &mut hedge.max_share)?;
        }
        Ok(())
    }

    /// A provider's own `resume`, which is both a request setting and,
    /// in a provider's table, one of the provider's.
    pub fn provider_resume(&self) -> Option<bool> {
        self.resume.as_ref().map(|b| *b.get_ref())
    }

    /// `base` with this table's provider settings applied.
    pub fn provider(&self, base: &ProviderPolicy) -> Result<ProviderPolicy> {
        let mut p = base.clone();
        let b = &mut p.breaker;
        fraction(&self.breaker_failure_rate, "breaker_failure_rate", &mut b.failure_rate)?;
        duration(&self.breaker_window, "breaker_window", &mut b.window)?;
        if let Some(n) = count(&self.breaker_min_calls, "breaker_min_calls", 1)? {
            b.min_calls = n;
        }
        if let Some(n) = count(&self.breaker_consecutive_failures, "breaker_consecutive_failures", 1)? {
            b.consecutive_failures = n;
        }
        duration(&self.breaker_cooldown, "breaker_cooldown", &mut b.cooldown)?;
        duration(&self.breaker_cooldown_max, "breaker_cooldown_max", &mut b.cooldown_max)?;
        if let Some(n) = count(&self.breaker_half_open_probes, "breaker_half_open_probes", 1)? {
            b.half_open_probes = n;
        }
        if let Some(n) = count(&self.breaker_close_after, "breaker_close_after", 1)? {
            b.close_after = n;
        }
        if let Some(n) = count(&self.max_concurrency, "max_concurrency", 1)? {
            p.max_concurrency = Some(n);
        }
        fraction(&self.fallback_share, "fallback_share", &mut p.fallback_share)?;
        if let Some(n) = count(&self.fallback_min, "fallback_min", 0)? {
            p.fallback_min = n;
        }
        duration(&self.fallback_window, "fallback_window", &mut p.fallback_window)?;
        if let Some(n) = count(&self.requests_per_minute, "requests_per_minute", 1)? {
            p.requests_per_minute = Some(n);
        }
        if let Some(n) = count(&self.tokens_per_minute, "tokens_per_minute", 1)? {
            p.tokens_per_minute = Some(n);
        }
        if let Some(on) = &self.session_affinity {
            p.session_affinity = *on.get_ref();
        }
        Ok(p)
    }

    /// The cache settings: this table's over `base` (a route's over
    /// `[policy]`'s); `None` when off.
    pub fn cache(&self, base: Option<&CachePolicy>) -> Result<Option<CachePolicy>> {
        let Some(raw) = &self.cache else { return Ok(base.copied()) };
        let table = match raw.get_ref() {
            RawCache::Switch(false) => return Ok(None),
            RawCache::Switch(true) => return Ok(Some(base.copied().unwrap_or_default())),
            RawCache::Table(table) => table,
        };
        let mut p = base.copied().unwrap_or_default();
        let read = |text: &str, field: &'static str, zero_ok: bool| match humantime::parse_duration(text) {
            Ok(d) if zero_ok || !d.is_zero() => Ok(d),
            _ => err(raw.span(), field, format!("{text:?} is not a duration such as \"10m\" or \"1h\"")),
        };
        if let Some(ttl) = &table.ttl {
            p.ttl = read(ttl, "cache.ttl", false)?;
        }
        if let Some(stale) = &table.stale {
            p.stale = read(stale, "cache.stale", true)?;
        }
        p.tools = table.tools.unwrap_or(p.tools);
        p.sampled = table.sampled.unwrap_or(p.sampled);
        Ok(Some(p))
    }

    /// `base` with this table's queue settings applied.
    pub fn queue(&self, base: &QueuePolicy) -> Result<QueuePolicy> {
        let mut q = *base;
        if let Some(n) = count(&self.max_queue, "max_queue", 0)? {
            q.max_queue = n;
        }
        duration(&self.max_queue_wait, "max_queue_wait", &mut q.max_wait)?;
        Ok(q)
    }

    /// The first request setting present (a provider table may not set one).
    pub fn first_request_setting(&self) -> Option<(&'static str, Range<usize>)> {
        let durations = [
            ("deadline", &self.deadline),
            ("attempt_timeout", &self.attempt_timeout),
            ("backoff_base", &self.backoff_base),
            ("backoff_cap", &self.backoff_cap),
            ("max_retry_wait", &self.max_retry_wait),
            ("min_fallback_budget", &self.min_fallback_budget),
            ("stream_idle_timeout", &self.stream_idle_timeout),
            ("stream_keepalive", &self.stream_keepalive),
            ("session_stick", &self.session_stick),
            ("max_latency", &self.max_latency),
            ("strategy", &self.strategy),
            ("hedge_after", &self.hedge_after),
        ];
        durations
            .into_iter()
            .find_map(|(n, v)| v.as_ref().map(|v| (n, v.span())))
            .or_else(|| self.max_retries.as_ref().map(|v| ("max_retries", v.span())))
            .or_else(|| self.retry_timeouts.as_ref().map(|v| ("retry_timeouts", v.span())))
            .or_else(|| self.cache.as_ref().map(|v| ("cache", v.span())))
            .or_else(|| self.hedge_max_share.as_ref().map(|v| ("hedge_max_share", v.span())))
    }

    /// The first provider setting present (a route table may not set one).
    pub fn first_provider_setting(&self) -> Option<(&'static str, Range<usize>)> {
        let durations = [
            ("breaker_window", &self.breaker_window),
            ("breaker_cooldown", &self.breaker_cooldown),
            ("breaker_cooldown_max", &self.breaker_cooldown_max),
            ("fallback_window", &self.fallback_window),
            ("max_queue_wait", &self.max_queue_wait),
        ];
        let counts = [
            ("breaker_min_calls", &self.breaker_min_calls),
            ("breaker_consecutive_failures", &self.breaker_consecutive_failures),
            ("breaker_half_open_probes", &self.breaker_half_open_probes),
            ("breaker_close_after", &self.breaker_close_after),
            ("max_concurrency", &self.max_concurrency),
            ("fallback_min", &self.fallback_min),
            ("requests_per_minute", &self.requests_per_minute),
            ("tokens_per_minute", &self.tokens_per_minute),
            ("max_queue", &self.max_queue),
        ];
        let fractions =
            [("breaker_failure_rate", &self.breaker_failure_rate), ("fallback_share", &self.fallback_share)];
        durations
            .into_iter()
            .find_map(|(n, v)| v.as_ref().map(|v| (n, v.span())))
            .or_else(|| counts.into_iter().find_map(|(n, v)| v.as_ref().map(|v| (n, v.span()))))
            .or_else(|| fractions.into_iter().find_map(|(n, v)| v.as_ref().map(|v| (n, v.span()))))
    }
}

/// `cache = { ttl = "10m", stale = "1h", tools = false, sampled = false }`,
/// in `[policy]` or a route's policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CachePolicy {
    /// How long an answer is served fresh.
    pub ttl: std::time::Duration,
    /// How much longer an expired answer may stand in when the chain fails.
    pub stale: std::time::Duration,
    /// Cache conversations that hold tool calls or results too.
    pub tools: bool,
    /// Cache sampled answers too (any temperature): a repeat gets the same answer.
    pub sampled: bool,
}

impl Default for CachePolicy {
    fn default() -> CachePolicy {
        CachePolicy {
            ttl: std::time::Duration::from_secs(600),
            stale: std::time::Duration::ZERO,
            tools: false,
            sampled: false,
        }
    }
}

/// A route's static answer for when its chain has failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FallbackResponse {
    pub status: axum::http::StatusCode,
    pub body: bytes::Bytes,
    pub content_type: axum::http::HeaderValue,
}
