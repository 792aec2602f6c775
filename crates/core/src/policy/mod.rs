//! Resilience policy: one module per rule, each with its own unit tests on a
//! paused clock.
//!
//! - [`deadline`]: one absolute deadline per request, and what it allows.
//! - [`backoff`]: exponential backoff with full jitter, and the waits that
//!   providers ask for in their rate-limit headers.
//! - [`breaker`]: a circuit breaker per provider.
//! - [`limiter`]: per-provider concurrency cap and request/token buckets.
//! - [`queue`]: waiting in line for a provider's capacity, and key leases.
//! - [`reach`]: whether a provider's server answers its probes, and their backoff.
//! - [`share`]: the cap on traffic a provider may take as a fallback.
//! - [`hedge`]: when a slow first byte starts the next candidate alongside, and how often.
//! - [`joined`]: a joined team's gateway's refusal of the member is the answer.
//! - [`step`]: after an attempt, what the request does next.
//! - [`budget`]: spend per budget and period, and the candidates a budget blocks.
//! - [`order`]: the order a route's chain is tried in, as configured.
//!
//! The settings live here too: [`RequestPolicy`] applies to a request (global,
//! overridable per route) and [`ProviderPolicy`] to a provider (global,
//! overridable per provider).

pub(crate) mod classify;
pub(crate) mod clients;

pub(crate) mod backoff;
pub(crate) mod breaker;
pub mod budget;
pub(crate) mod deadline;
pub mod hedge;
pub(crate) mod joined;
pub(crate) mod limiter;
pub mod order;
pub(crate) mod queue;
pub mod reach;
pub(crate) mod share;
pub(crate) mod step;
pub mod stick;

pub use breaker::BreakerState;
pub use budget::{Budget, BudgetAction, BudgetPeriod, BudgetRow, BudgetScope, Budgets};
pub use queue::{earliest, Busy, Capacity, KeyLease, Permit, QueueCounters, QueuePolicy, QueueStats, Ready, Refusal};

use std::time::Duration;

/// Settings that shape one request's attempts.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestPolicy {
    /// The end-to-end budget when the client does not give one.
    pub deadline: Duration,
    /// Cap on one attempt (to the response head, or to the first content of a stream).
    pub attempt_timeout: Duration,
    /// Retries on the same provider before falling back.
    pub max_retries: u32,
    /// Whether a timed-out attempt may be retried on the same provider
    /// (a timed-out generation may already have been billed).
    pub retry_timeouts: bool,
    pub backoff_base: Duration,
    pub backoff_cap: Duration,
    /// A provider asking for a longer wait than this is skipped, not waited for.
    pub max_retry_wait: Duration,
    /// A fallback starts only with at least this much of the deadline left.
    pub min_fallback_budget: Duration,
    /// Longest silence allowed in a stream once content has started.
    pub stream_idle_timeout: Duration,
    /// The longest a client of a committed stream waits for a byte: past
    /// it, an SSE comment keeps its connection and read timers alive.
    pub stream_keepalive: Duration,
    /// The order the chain is tried in, per request.
    pub strategy: order::Strategy,
    /// `cheapest`: providers recently slower than this go after the
    /// others, whatever their price.
    pub max_latency: Option<Duration>,
    /// After a fallback, a session stays on the provider that served it
    /// while it keeps asking within this long of its last request
    /// ([`stick`]); zero turns it off.
    pub session_stick: Duration,
    /// Hedged first bytes ([`hedge`]); off unless `hedge_after` is set.
    pub hedge: Option<hedge::Hedge>,
    /// A stream that breaks after text reached the client is finished by
    /// the chain's next provider ([`crate::proxy`]'s `resume`).
    pub resume: bool,
}

impl Default for RequestPolicy {
    fn default() -> RequestPolicy {
        RequestPolicy {
            deadline: Duration::from_secs(300),
            attempt_timeout: Duration::from_secs(120),
            max_retries: 1,
            retry_timeouts: false,
            backoff_base: Duration::from_millis(250),
            backoff_cap: Duration::from_secs(5),
            max_retry_wait: Duration::from_secs(10),
            min_fallback_budget: Duration::from_secs(2),
            // Reasoning models go quiet for minutes between events; the
            // client is kept alive meanwhile (`stream_keepalive`).
            stream_idle_timeout: Duration::from_secs(300),
            stream_keepalive: Duration::from_secs(15),
            strategy: order::Strategy::Ordered,
            max_latency: None,
            session_stick: Duration::from_secs(120),
            hedge: None,
            resume: false,
        }
    }
}

/// Settings that protect one provider.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderPolicy {
    pub breaker: breaker::BreakerPolicy,
    /// Requests in flight at once; a full provider is skipped, not queued for.
    pub max_concurrency: Option<u32>,
    /// Largest share of recent traffic this provider may take as a fallback.
    pub fallback_share: f64,
    /// Fallbacks always allowed per window, whatever the share.
    pub fallback_min: u32,
    pub fallback_window: Duration,
    pub requests_per_minute: Option<u32>,
    pub tokens_per_minute: Option<u32>,
    /// A session keeps using one of the keys ([`crate::upstream::keys`]).
    pub session_affinity: bool,
    /// `resume` in the provider's own table: whether a stream of this
    /// provider's that breaks off is finished elsewhere, whatever the
    /// request's policy says. `None`: the request's policy decides.
    pub resume: Option<bool>,
}

impl Default for ProviderPolicy {
    fn default() -> ProviderPolicy {
        ProviderPolicy {
            breaker: breaker::BreakerPolicy::default(),
            max_concurrency: None,
            fallback_share: 0.5,
            fallback_min: 10,
            fallback_window: Duration::from_secs(60),
            requests_per_minute: None,
            tokens_per_minute: None,
            session_affinity: true,
            resume: None,
        }
    }
}
