//! One live truth for the UI, the tray, the CLI and Prometheus: every
//! finished request updates the rolling statistics, passive health and
//! metrics, and is published on the event bus with its fallbacks.

pub mod alerts;
pub(crate) mod events;
pub(crate) mod health;
pub(crate) mod metrics;
pub(crate) mod stats;
pub mod trace;

pub use alerts::{AlertKind, AlertPolicy};
pub use events::{Envelope, GatewayEvent};
pub use health::{views, ProviderStateName, ProviderView};
pub use stats::{Window, MAX_MODELS, OTHER_MODEL};

use crate::ground::clock::now_ms;
use crate::ground::outcome::AttemptOutcome;
use crate::ground::outcome::Reason;
use crate::ground::outcome::Verdict;
use crate::history::record::{AttemptRecord, RequestRecord};
use crate::history::Recorder;
use crate::policy::budget::{Budgets, Crossing};
use events::{EventBus, PassiveHealth, RequestBrief};
use metrics::Metrics;
use metrics::{FallbackLabels, RequestLabels};
use stats::{Sample, Stats};

#[derive(Debug)]
pub struct Telemetry {
    pub events: EventBus,
    pub stats: Stats,
    pub metrics: Metrics,
    /// Spend per budget, counted here as each request's cost is known.
    pub budgets: Budgets,
    pub alerts: alerts::Alerts,
}

fn minute_of(ms: i64) -> i64 {
    ms.div_euclid(60_000)
}

fn day_of(ms: i64) -> i64 {
    ms.div_euclid(86_400_000)
}

/// Whether an attempt says the provider is working (`None`: says nothing),
/// by the verdict the breaker was given for it.
fn healthy(a: &AttemptRecord) -> Option<bool> {
    match crate::policy::classify::recorded(a.outcome, a.status) {
        Verdict::Healthy => Some(true),
        Verdict::Failed | Verdict::Unreachable => Some(false),
        Verdict::RateLimited(_) | Verdict::Neutral => None,
    }
}

impl Telemetry {
    /// Telemetry without budgets, with the default alert policy.
    pub fn new(recorder: Option<Recorder>) -> Telemetry {
        let budgets = Budgets::new(jiff::tz::TimeZone::system(), &[]);
        Telemetry::with(recorder, budgets, AlertPolicy::default())
    }

    pub fn with(recorder: Option<Recorder>, budgets: Budgets, alerts: AlertPolicy) -> Telemetry {
        Telemetry {
            events: EventBus::new(recorder),
            stats: Stats::default(),
            metrics: Metrics::new(),
            budgets,
            alerts: alerts::Alerts::new(alerts),
        }
    }

    /// `provider`'s 95th-percentile time to first token (`streamed`) or
    /// latency over the last five minutes, when enough of its attempts
    /// say it ([`crate::policy::hedge::P95_MIN_SAMPLES`]).
    pub fn recent_p95(&self, provider: &str, streamed: bool) -> Option<std::time::Duration> {
        let minute = minute_of(now_ms());
        let (n, p95) = self.stats.with(provider, |s| s.all.p95(minute, 5, streamed));
        p95.filter(|_| n >= crate::policy::hedge::P95_MIN_SAMPLES).map(std::time::Duration::from_millis)
    }

    /// Publishes an event, and the alert it calls for (if one may go now).
    pub fn publish(&self, event: GatewayEvent) {
        let alert = self.alerts.on_event(&event, tokio::time::Instant::now());
        self.events.publish(event);
        if let Some(alert) = alert {
            self.events.publish(alert);
        }
    }

    /// Counts a finished request's cost against the budgets, and alerts for
    /// the thresholds it crossed.
    fn spend(&self, r: &RequestRecord) {
        let (Some(provider), Some(model), Some(cost)) = (&r.provider, &r.provider_model, r.cost_usd) else { return };
        for crossing in self.budgets.record(provider, model, r.member.as_deref(), cost, r.started_at_ms, now_ms()) {
            self.budget_crossed(&crossing);
        }
    }

    /// Alerts for a budget's threshold crossed (if the alert may go now).
    pub fn budget_crossed(&self, crossing: &Crossing) {
        if let Some(alert) = self.alerts.on_crossing(crossing, tokio::time::Instant::now()) {
            self.events.publish(alert);
        }
    }

    /// Takes in a finished request.
    pub fn request_finished(&self, r: &RequestRecord) {
        self.metrics
            .requests
            .get_or_create(&RequestLabels { endpoint: r.endpoint.clone(), outcome: r.outcome.as_str() })
            .inc();
        if let Some(member) = &r.member {
            self.metrics.member_request(member, r.outcome.as_str(), r.cost_usd);
        }
        let minute = minute_of(r.started_at_ms);
        // A skipped attempt made no call: it is counted by outcome, and
        // is neither a sample of the provider nor a hop between providers.
        let mut called = r.attempts.iter().filter(|a| a.outcome.called()).peekable();
        while let Some(a) = called.next() {
            self.attempt(r, a, called.peek().copied(), minute);
        }
        for a in r.attempts.iter().filter(|a| !a.outcome.called()) {
            self.metrics.with_series(&a.provider, &a.model, minute, |series| {
                series.attempts(&self.metrics.attempts, a.outcome.as_str(), a.reason.as_str()).inc();
            });
        }
        if let (Some(provider), Some(model)) = (&r.provider, &r.provider_model) {
            self.metrics.with_series(provider, model, minute, |series| {
                let counts = [r.usage.input_tokens, r.usage.output_tokens, r.usage.cached_tokens];
                for (counter, n) in series.tokens.iter().zip(counts) {
                    if let Some(n) = n {
                        counter.inc_by(n);
                    }
                }
                if let Some(cost) = r.cost_usd {
                    series.cost.inc_by(cost);
                }
            });
            let (input, output) = (r.usage.input_tokens.unwrap_or(0), r.usage.output_tokens.unwrap_or(0));
            self.stats.with(provider, |s| s.today.add(day_of(r.started_at_ms), input, output, r.cost_usd));
        }
        self.events.publish(GatewayEvent::RequestFinished { request: brief(r) });
        self.spend(r);
    }

    fn attempt(&self, r: &RequestRecord, a: &AttemptRecord, next: Option<&AttemptRecord>, minute: i64) {
        // A resume is a fallback in mid-stream: an event and a hop like one.
        let hop = |r: Reason| matches!(r, Reason::Fallback | Reason::Resume);
        let fallback_out = next.is_some_and(|n| hop(n.reason));
        let sample = Sample {
            ok: a.outcome == AttemptOutcome::Ok,
            latency_ms: a.duration_ms.unwrap_or(0.0),
            ttft_ms: a.ttft_ms,
            fallback_in: hop(a.reason),
            fallback_out,
        };
        // An attempt let go for its hedge is no sample of the provider.
        let change = a
            .outcome
            .sampled()
            .then(|| {
                self.stats.with(&a.provider, |s| {
                    s.all.record(minute, sample);
                    s.record_model(&a.model, minute, sample);
                    healthy(a).and_then(|ok| s.passive.observe(ok))
                })
            })
            .flatten();
        if a.reason == Reason::Hedge {
            let outcome = match a.outcome {
                AttemptOutcome::Ok => "won",
                AttemptOutcome::Hedged => "lost",
                _ => "failed",
            };
            self.metrics.hedge(&a.provider, outcome);
        }
        if let Some(now_healthy) = change {
            let (from, to) = if now_healthy {
                (PassiveHealth::Unhealthy, PassiveHealth::Healthy)
            } else {
                (PassiveHealth::Healthy, PassiveHealth::Unhealthy)
            };
            let reason = if now_healthy {
                "successes in a row".to_string()
            } else {
                format!("failures in a row, last: {}", a.error.as_deref().unwrap_or(a.outcome.as_str()))
            };
            self.events.publish(GatewayEvent::Health {
                provider: a.provider.clone(),
                from,
                to,
                reason,
                request_id: Some(r.id.clone()),
            });
        }
        self.metrics.with_series(&a.provider, &a.model, minute, |series| {
            series.attempts(&self.metrics.attempts, a.outcome.as_str(), a.reason.as_str()).inc();
            if let Some(d) = a.duration_ms {
                series.attempt_seconds.observe(d / 1000.0);
            }
            if let Some(t) = a.ttft_ms {
                series.ttft_seconds.observe(t / 1000.0);
            }
        });
        if let (Some(n), true) = (next, fallback_out) {
            self.metrics
                .fallbacks
                .get_or_create(&FallbackLabels { from: a.provider.clone(), to: n.provider.clone() })
                .inc();
            self.publish(GatewayEvent::Fallback {
                request_id: r.id.clone(),
                model: r.model.clone(),
                from: a.provider.clone(),
                to: n.provider.clone(),
                reason: a.error.clone().unwrap_or_else(|| a.outcome.as_str().to_string()),
            });
        }
    }
}

fn brief(r: &RequestRecord) -> RequestBrief {
    RequestBrief {
        id: r.id.clone(),
        endpoint: r.endpoint.clone(),
        model: r.model.clone(),
        provider: r.provider.clone(),
        outcome: r.outcome,
        status: r.status,
        duration_ms: r.duration_ms,
        ttft_ms: r.ttft_ms,
        input_tokens: r.usage.input_tokens,
        output_tokens: r.usage.output_tokens,
        cost_usd: r.cost_usd,
        cache: r.cache,
        member: r.member.clone(),
        session: r.session.clone(),
        attempts: r
            .attempts
            .iter()
            .map(|a| {
                format!("{}:{}", a.provider, a.status.map_or_else(|| a.outcome.as_str().to_string(), |s| s.to_string()))
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ground::outcome::AttemptOutcome;
    use crate::history::record::sample_request;
    use crate::protocol::usage::Usage;

    fn attempt(seq: u32, provider: &str, reason: Reason, outcome: AttemptOutcome) -> AttemptRecord {
        let called = outcome.called();
        AttemptRecord {
            seq,
            provider: provider.into(),
            key_label: None,
            model: "m".into(),
            reason,
            fallback_from: (reason == Reason::Fallback).then(|| "a".into()),
            started_at_ms: 0,
            offset_ms: 0.0,
            timeout_ms: None,
            backoff_ms: 0.0,
            duration_ms: Some(if called { 40.0 } else { 0.0 }),
            ttfb_ms: None,
            ttft_ms: None,
            status: match outcome {
                AttemptOutcome::Ok => Some(200),
                AttemptOutcome::HttpError => Some(503),
                _ => None,
            },
            outcome,
            retry_after_ms: None,
            breaker_state: None,
            error: (!called).then(|| "`tools`: none".into()),
            usage: Usage::default(),
        }
    }

    /// `a` fails, `b` is passed over, `c` answers: the hop is `a → c`,
    /// and `b`, never called, is in no statistics but its own skip count.
    #[test]
    fn a_skipped_attempt_is_no_sample_and_no_hop() {
        let telemetry = Telemetry::new(None);
        let mut events = telemetry.events.subscribe();
        let mut r = sample_request("r");
        r.attempts = vec![
            attempt(1, "a", Reason::First, AttemptOutcome::HttpError),
            attempt(2, "b", Reason::Fallback, AttemptOutcome::Skipped),
            attempt(3, "c", Reason::Fallback, AttemptOutcome::Ok),
        ];
        // Enough of them to turn passive health, were skips failures.
        for _ in 0..5 {
            telemetry.request_finished(&r);
        }
        let minute = minute_of(r.started_at_ms);
        let requests = |p: &str| telemetry.stats.with(p, |s| s.all.window(minute, 1).requests);
        assert_eq!((requests("a"), requests("b"), requests("c")), (5, 0, 5));
        assert_eq!(telemetry.stats.with("b", |s| s.all.window(minute, 1).fallbacks_out), 0);
        let mut hops = Vec::new();
        while let Ok(e) = events.try_recv() {
            match &e.event {
                GatewayEvent::Fallback { from, to, .. } => hops.push(format!("{from}>{to}")),
                GatewayEvent::Health { provider, .. } => assert_ne!(provider, "b", "a skip is no failure"),
                _ => {}
            }
        }
        assert_eq!(hops, ["a>c"; 5]);
        let text = telemetry.metrics.encode();
        let skips = text
            .lines()
            .find(|l| l.contains("provider=\"b\"") && l.contains("outcome=\"skipped\"") && l.contains("_total"))
            .unwrap_or_else(|| panic!("{text}"));
        assert!(skips.ends_with(" 5"), "{skips}");
        assert!(!text.lines().any(|l| l.contains("attempt_seconds") && l.contains("provider=\"b\"")), "{text}");
    }
}
