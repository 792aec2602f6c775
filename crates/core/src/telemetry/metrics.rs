//! Prometheus metrics at `/metrics`: requests, attempts by outcome and
//! reason, latency and time-to-first-token histograms, tokens, cost,
//! fallbacks and breaker state, with provider and model labels. Model
//! labels are bounded per provider as the statistics are
//! ([`crate::telemetry::stats::ByModel`]): past [`crate::telemetry::stats::MAX_MODELS`] names,
//! `model="other"`.

use std::sync::atomic::AtomicU64;
use std::sync::Mutex;

use foldhash::HashMap;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::telemetry::stats::ByModel;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub endpoint: String,
    pub outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MemberLabels {
    pub member: String,
    pub outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MemberLabel {
    pub member: String,
}

/// Member names given labels of their own; past them, `member="other"`,
/// as models are bounded: a label per name must not grow without end.
pub const MAX_MEMBERS: usize = 64;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AttemptLabels {
    pub provider: String,
    pub model: String,
    pub outcome: String,
    pub reason: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProviderModel {
    pub provider: String,
    pub model: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TokenLabels {
    pub provider: String,
    pub model: String,
    pub kind: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FallbackLabels {
    pub from: String,
    pub to: String,
}

/// A hedge by the provider it started, and how it ended: `won` (it
/// answered first), `lost` (the attempt it hedged did), `failed`, or
/// `withheld` (due, but kept back by the route's share or the provider's
/// gate).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HedgeLabels {
    pub provider: String,
    pub outcome: &'static str,
}

/// What became of a stream broken off after content: `resumed`,
/// `not_resumable` (a tool call or thinking in progress), `failed` (no
/// provider could continue it).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabel {
    pub outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DropLabel {
    pub reason: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProviderLabel {
    pub provider: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BudgetLabels {
    pub budget: String,
    pub scope: String,
    pub period: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CacheLabel {
    pub status: &'static str,
}

/// The `kind` labels of the token counters, in [`Series::tokens`] order.
const TOKEN_KINDS: [&str; 3] = ["input", "output", "cached"];

fn seconds_histogram() -> Histogram {
    // 10 ms to about 5.5 minutes.
    Histogram::new(exponential_buckets(0.01, 2.0, 16))
}

/// One provider and model's series, looked up in their families once and
/// then kept: a lookup builds a label set of owned strings and hashes it,
/// which for the half-dozen series a request touches cost more than
/// updating them. The handles share their values with the families, so
/// `/metrics` reads what they count.
#[derive(Debug)]
pub struct Series {
    provider: String,
    model: String,
    pub attempt_seconds: Histogram,
    pub ttft_seconds: Histogram,
    pub cost: Counter<f64, AtomicU64>,
    /// Input, output and cached tokens.
    pub tokens: [Counter; 3],
    /// By outcome and reason, as they occur.
    attempts: Vec<(&'static str, &'static str, Counter)>,
}

impl Series {
    /// The attempts counter for this outcome and reason.
    pub fn attempts(
        &mut self,
        family: &Family<AttemptLabels, Counter>,
        outcome: &'static str,
        reason: &'static str,
    ) -> &Counter {
        let i = match self.attempts.iter().position(|(o, r, _)| *o == outcome && *r == reason) {
            Some(i) => i,
            None => {
                let labels = AttemptLabels {
                    provider: self.provider.clone(),
                    model: self.model.clone(),
                    outcome: outcome.into(),
                    reason: reason.into(),
                };
                self.attempts.push((outcome, reason, family.get_or_create(&labels).clone()));
                self.attempts.len() - 1
            }
        };
        &self.attempts[i].2
    }
}

#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    pub requests: Family<RequestLabels, Counter>,
    pub attempts: Family<AttemptLabels, Counter>,
    pub attempt_seconds: Family<ProviderModel, Histogram, fn() -> Histogram>,
    pub ttft_seconds: Family<ProviderModel, Histogram, fn() -> Histogram>,
    pub tokens: Family<TokenLabels, Counter>,
    pub cost: Family<ProviderModel, Counter<f64, AtomicU64>>,
    pub fallbacks: Family<FallbackLabels, Counter>,
    pub hedges: Family<HedgeLabels, Counter>,
    /// Streams broken off after content, by what became of them.
    pub resumes: Family<OutcomeLabel, Counter>,
    /// 0 closed, 1 half-open, 2 open; set at scrape time.
    pub breaker: Family<ProviderLabel, Gauge>,
    /// 1 enabled, 0 disabled; set at scrape time.
    pub enabled: Family<ProviderLabel, Gauge>,
    pub history_lost: Gauge,
    /// 1 while the history writer is behind (its database out of reach).
    pub history_behind: Gauge,
    /// Completed requests in the spool not yet in the database, and its bytes.
    pub history_spooled: Gauge,
    pub history_spool_bytes: Gauge,
    /// Requests by what the response cache did (`hit`, `miss`, `stale`,
    /// `bypass`); caught up with the cache's own counters at scrape time.
    pub cache_requests: Family<CacheLabel, Counter>,
    pub cache_saved: Counter<f64, AtomicU64>,
    pub cache_entries: Gauge,
    pub cache_bytes: Gauge,
    /// Each provider's queue, set at scrape time: waiting now, key leases
    /// held, and the seconds those served from it waited in all.
    pub queue_depth: Family<ProviderLabel, Gauge>,
    pub key_leases: Family<ProviderLabel, Gauge>,
    pub queue_wait: Family<ProviderLabel, Gauge<f64, AtomicU64>>,
    /// Each budget's spend over its limit in its current period (1 is the
    /// limit; the team's spend in a team), set at scrape time.
    pub budget_spent_ratio: Family<BudgetLabels, Gauge<f64, AtomicU64>>,
    /// 1 while this gateway is in a team whose Redis is out of reach (each
    /// instance deciding alone, at its share of every limit).
    pub team_degraded: Gauge,
    /// Spans handed to the OpenTelemetry collector, and those lost on the
    /// way (`reason`: the bounded queue was full, or the export failed).
    pub trace_spans_exported: Counter,
    pub trace_spans_dropped: Family<DropLabel, Counter>,
    /// One scrape at a time catches the cache counters up (two at once
    /// would both add the same difference).
    cache_sync: Mutex<()>,
    /// By provider, then model (bounded).
    series: Mutex<HashMap<String, ByModel<Series>>>,
    /// Requests and spend by team member (bounded by [`MAX_MEMBERS`]).
    pub member_requests: Family<MemberLabels, Counter>,
    pub member_cost: Family<MemberLabel, Counter<f64, AtomicU64>>,
    members_named: Mutex<foldhash::HashSet<String>>,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

impl Metrics {
    /// One stream broken off more, ended as `outcome`.
    pub fn resume(&self, outcome: &'static str) {
        self.resumes.get_or_create(&OutcomeLabel { outcome }).inc();
    }

    /// One hedge of `provider` more, ended as `outcome`.
    pub fn hedge(&self, provider: &str, outcome: &'static str) {
        self.hedges.get_or_create(&HedgeLabels { provider: provider.to_string(), outcome }).inc();
    }

    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("switchyard");
        let m = Metrics {
            requests: Family::default(),
            attempts: Family::default(),
            attempt_seconds: Family::new_with_constructor(seconds_histogram),
            ttft_seconds: Family::new_with_constructor(seconds_histogram),
            tokens: Family::default(),
            cost: Family::default(),
            fallbacks: Family::default(),
            hedges: Family::default(),
            resumes: Family::default(),
            breaker: Family::default(),
            enabled: Family::default(),
            history_lost: Gauge::default(),
            history_behind: Gauge::default(),
            history_spooled: Gauge::default(),
            history_spool_bytes: Gauge::default(),
            cache_requests: Family::default(),
            cache_saved: Counter::default(),
            cache_entries: Gauge::default(),
            cache_bytes: Gauge::default(),
            queue_depth: Family::default(),
            key_leases: Family::default(),
            queue_wait: Family::default(),
            budget_spent_ratio: Family::default(),
            team_degraded: Gauge::default(),
            trace_spans_exported: Counter::default(),
            trace_spans_dropped: Family::default(),
            cache_sync: Mutex::default(),
            series: Mutex::default(),
            member_requests: Family::default(),
            member_cost: Family::default(),
            members_named: Mutex::default(),
            registry: Registry::default(),
        };
        registry.register("requests", "Requests answered, by endpoint and outcome", m.requests.clone());
        registry.register(
            "attempts",
            "Upstream attempts, by provider, model, outcome and reason (outcome skipped: passed over, not called)",
            m.attempts.clone(),
        );
        registry.register("attempt_duration_seconds", "Upstream attempt duration", m.attempt_seconds.clone());
        registry.register("time_to_first_token_seconds", "Time to a stream's first content", m.ttft_seconds.clone());
        registry.register("tokens", "Tokens, by provider, model and kind (input, output, cached)", m.tokens.clone());
        registry.register("cost_usd", "Spend in US dollars, by provider and model", m.cost.clone());
        registry.register("fallbacks", "Fallbacks from one provider to another", m.fallbacks.clone());
        registry.register(
            "resumes",
            "Streams broken off after content with resume on, by outcome (resumed, not_resumable, failed)",
            m.resumes.clone(),
        );
        registry.register(
            "hedges",
            "Hedged first bytes, by the provider started and outcome (won, lost, failed, withheld)",
            m.hedges.clone(),
        );
        registry.register("breaker_state", "Circuit breaker: 0 closed, 1 half-open, 2 open", m.breaker.clone());
        registry.register("provider_enabled", "1 when the provider is enabled", m.enabled.clone());
        registry.register("history_records_lost", "History records that could not be written", m.history_lost.clone());
        registry.register(
            "budget_spent_ratio",
            "Each budget's spend over its limit in its current period (1 is the limit)",
            m.budget_spent_ratio.clone(),
        );
        registry.register(
            "team_degraded",
            "1 while this gateway's team has its Redis out of reach and each instance decides alone",
            m.team_degraded.clone(),
        );
        registry.register(
            "trace_spans_exported",
            "Spans the OpenTelemetry exporter delivered to the collector",
            m.trace_spans_exported.clone(),
        );
        // Both reasons from the start: an alert on their increase needs the series before the first loss.
        for reason in ["queue_full", "export_failed"] {
            let _ = m.trace_spans_dropped.get_or_create(&DropLabel { reason });
        }
        registry.register(
            "trace_spans_dropped",
            "Spans lost on the way to the collector, by reason (queue_full, export_failed)",
            m.trace_spans_dropped.clone(),
        );
        registry.register(
            "history_behind",
            "1 while the history database is out of reach and records wait in the spool",
            m.history_behind.clone(),
        );
        registry.register(
            "history_spooled_records",
            "Completed requests in the spool not yet in the history database",
            m.history_spooled.clone(),
        );
        registry.register("history_spool_bytes", "Bytes the history spool holds", m.history_spool_bytes.clone());
        registry.register(
            "cache_requests",
            "Requests by what the response cache did: hit, miss, stale, bypass",
            m.cache_requests.clone(),
        );
        registry.register("cache_saved_usd", "What answers served from the cache had cost", m.cache_saved.clone());
        registry.register("cache_entries", "Answers in the response cache", m.cache_entries.clone());
        registry.register("cache_bytes", "Bytes the response cache stores", m.cache_bytes.clone());
        registry.register("queue_depth", "Requests waiting in a provider's queue", m.queue_depth.clone());
        registry.register("key_leases", "Key leases held, by provider", m.key_leases.clone());
        registry.register(
            "queue_wait_seconds_total",
            "Seconds the requests served from a provider's queue waited in all",
            m.queue_wait.clone(),
        );
        registry.register("member_requests", "Requests by team member and outcome", m.member_requests.clone());
        registry.register("member_cost_usd", "Spend in US dollars by team member", m.member_cost.clone());
        Metrics { registry, ..m }
    }

    /// Counts a member's finished request and its cost.
    pub fn member_request(&self, member: &str, outcome: &'static str, cost_usd: Option<f64>) {
        let member = self.member_label(member);
        self.member_requests.get_or_create(&MemberLabels { member: member.clone(), outcome }).inc();
        if let Some(cost) = cost_usd.filter(|c| c.is_finite() && *c > 0.0) {
            self.member_cost.get_or_create(&MemberLabel { member }).inc_by(cost);
        }
    }

    fn member_label(&self, member: &str) -> String {
        let mut named = self.members_named.lock().unwrap_or_else(|p| p.into_inner());
        if named.contains(member) || named.len() < MAX_MEMBERS && named.insert(member.to_string()) {
            member.to_string()
        } else {
            crate::telemetry::stats::OTHER_MODEL.to_string()
        }
    }

    /// Sets a provider's queue figures, at scrape time.
    pub fn set_queue(&self, provider: &str, stats: &crate::policy::QueueStats) {
        let label = ProviderLabel { provider: provider.to_string() };
        self.queue_depth.get_or_create(&label).set(i64::try_from(stats.depth).unwrap_or(i64::MAX));
        self.key_leases.get_or_create(&label).set(i64::try_from(stats.leases).unwrap_or(i64::MAX));
        self.queue_wait.get_or_create(&label).set(stats.wait_total_ms / 1000.0);
    }

    /// Brings the cache's figures up to `stats` (they only grow, but for
    /// the gauges), at scrape time.
    /// Every budget's spend as `rows` count it, at scrape time.
    pub fn set_budgets(&self, rows: &[crate::policy::BudgetRow]) {
        for row in rows {
            let labels =
                BudgetLabels { budget: row.name.clone(), scope: row.scope.clone(), period: row.period.as_str() };
            self.budget_spent_ratio.get_or_create(&labels).set(row.fraction);
        }
    }

    /// The history writer's state, at scrape time.
    pub fn set_history(&self, status: &crate::history::HistoryStatus) {
        let gauge = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        self.history_lost.set(gauge(status.lost));
        self.history_behind.set(i64::from(status.state == "behind"));
        self.history_spooled.set(gauge(status.spooled));
        self.history_spool_bytes.set(gauge(status.spool_bytes));
    }

    pub fn set_cache(&self, stats: &crate::cache::CacheStats) {
        let _one = self.cache_sync.lock().unwrap_or_else(|p| p.into_inner());
        for (status, count) in
            [("hit", stats.hits), ("miss", stats.misses), ("stale", stats.stale), ("bypass", stats.bypasses)]
        {
            let counter = self.cache_requests.get_or_create(&CacheLabel { status });
            counter.inc_by(count.saturating_sub(counter.get()));
        }
        let saved = stats.saved_usd - self.cache_saved.get();
        if saved > 0.0 {
            self.cache_saved.inc_by(saved);
        }
        self.cache_entries.set(i64::try_from(stats.entries).unwrap_or(i64::MAX));
        self.cache_bytes.set(i64::try_from(stats.bytes).unwrap_or(i64::MAX));
    }

    /// Runs `f` on the series of `provider` and `model` (used at `minute`),
    /// or on the provider's `other` series past the bound.
    pub fn with_series<T>(&self, provider: &str, model: &str, minute: i64, f: impl FnOnce(&mut Series) -> T) -> T {
        let mut all = self.series.lock().unwrap_or_else(|p| p.into_inner());
        let models = match all.get_mut(provider) {
            Some(models) => models,
            None => all.entry(provider.to_string()).or_default(),
        };
        models.with(model, minute, |name| self.new_series(provider, name), |_, old| self.retire(old), f)
    }

    /// Takes a series that gave its place up out of every family.
    fn retire(&self, series: Series) {
        let pm = ProviderModel { provider: series.provider, model: series.model };
        for (outcome, reason, _) in series.attempts {
            let labels = AttemptLabels {
                provider: pm.provider.clone(),
                model: pm.model.clone(),
                outcome: outcome.into(),
                reason: reason.into(),
            };
            self.attempts.remove(&labels);
        }
        for kind in TOKEN_KINDS {
            let labels = TokenLabels { provider: pm.provider.clone(), model: pm.model.clone(), kind: kind.into() };
            self.tokens.remove(&labels);
        }
        self.attempt_seconds.remove(&pm);
        self.ttft_seconds.remove(&pm);
        self.cost.remove(&pm);
    }

    fn new_series(&self, provider: &str, model: &str) -> Series {
        let pm = ProviderModel { provider: provider.to_string(), model: model.to_string() };
        let tokens = TOKEN_KINDS.map(|kind| {
            let labels = TokenLabels { provider: provider.to_string(), model: model.to_string(), kind: kind.into() };
            self.tokens.get_or_create(&labels).clone()
        });
        Series {
            provider: provider.to_string(),
            model: model.to_string(),
            attempt_seconds: self.attempt_seconds.get_or_create(&pm).clone(),
            ttft_seconds: self.ttft_seconds.get_or_create(&pm).clone(),
            cost: self.cost.get_or_create(&pm).clone(),
            tokens,
            attempts: Vec::new(),
        }
    }

    /// The Prometheus text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::stats::{MAX_MODELS, OTHER_MODEL};

    fn count(m: &Metrics, provider: &str, model: &str, minute: i64) {
        m.with_series(provider, model, minute, |s| {
            s.attempts(&m.attempts, "ok", "first").inc();
            s.tokens[0].inc_by(3);
        });
    }

    #[test]
    fn members_past_the_bound_are_other() {
        let m = Metrics::new();
        for i in 0..MAX_MEMBERS + 3 {
            m.member_request(&format!("u{i}"), "ok", Some(0.5));
        }
        m.member_request("u0", "rejected", None);
        let text = m.encode();
        assert!(text.contains("switchyard_member_requests_total{member=\"u0\",outcome=\"rejected\"} 1"), "{text}");
        assert!(text.contains("switchyard_member_requests_total{member=\"other\",outcome=\"ok\"} 3"), "{text}");
        assert!(text.contains("switchyard_member_cost_usd_total{member=\"other\"} 1.5"), "{text}");
        assert!(!text.contains(&format!("member=\"u{MAX_MEMBERS}\"")));
    }

    #[test]
    fn series_past_the_bound_are_other_and_idle_ones_give_their_place_up() {
        let m = Metrics::new();
        for i in 0..MAX_MODELS + 10 {
            count(&m, "wild", &format!("m{i}"), 0);
        }
        let text = m.encode();
        assert!(text.contains(&format!("model=\"{OTHER_MODEL}\"")), "{text}");
        assert!(text.contains("model=\"m0\""));
        assert!(!text.contains(&format!("model=\"m{MAX_MODELS}\"")));
        // An hour on, a new name takes the place of one unused since.
        count(&m, "wild", "m1", 30);
        count(&m, "wild", "fresh", 60);
        let text = m.encode();
        assert!(text.contains("model=\"fresh\"") && text.contains("model=\"m1\""), "{text}");
        let models: std::collections::BTreeSet<&str> =
            text.lines().filter_map(|l| l.split("model=\"").nth(1)?.split('"').next()).collect();
        assert_eq!(models.len(), MAX_MODELS + 1, "{models:?}");
    }
}
