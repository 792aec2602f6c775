//! One live truth for the UI, the tray, the CLI and Prometheus: every
//! finished request updates the rolling statistics, passive health and
//! metrics, and is published on the event bus with its fallbacks.

pub(crate) mod events;
pub(crate) mod health;
pub(crate) mod metrics;
pub(crate) mod stats;

pub use events::GatewayEvent;
pub use health::{views, ProviderStateName, ProviderView};
pub use stats::{Window, MAX_MODELS, OTHER_MODEL};

use crate::history::record::{AttemptOutcome, AttemptRecord, Reason, RequestRecord};
use crate::history::Recorder;
use crate::upstream::provider::Verdict;
use events::{EventBus, PassiveHealth, RequestBrief};
use metrics::Metrics;
use metrics::{FallbackLabels, RequestLabels};
use stats::{Sample, Stats};

#[derive(Debug)]
pub struct Telemetry {
    pub events: EventBus,
    pub stats: Stats,
    pub metrics: Metrics,
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
        Verdict::Failed => Some(false),
        Verdict::RateLimited(_) | Verdict::Neutral => None,
    }
}

impl Telemetry {
    pub fn new(recorder: Option<Recorder>) -> Telemetry {
        Telemetry { events: EventBus::new(recorder), stats: Stats::default(), metrics: Metrics::new() }
    }

    pub fn publish(&self, event: GatewayEvent) {
        self.events.publish(event);
    }

    /// Takes in a finished request.
    pub fn request_finished(&self, r: &RequestRecord) {
        self.metrics
            .requests
            .get_or_create(&RequestLabels { endpoint: r.endpoint.clone(), outcome: r.outcome.as_str() })
            .inc();
        let minute = minute_of(r.started_at_ms);
        for (i, a) in r.attempts.iter().enumerate() {
            self.attempt(r, a, r.attempts.get(i + 1), minute);
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
    }

    fn attempt(&self, r: &RequestRecord, a: &AttemptRecord, next: Option<&AttemptRecord>, minute: i64) {
        let fallback_out = next.is_some_and(|n| n.reason == Reason::Fallback);
        let sample = Sample {
            ok: a.outcome == AttemptOutcome::Ok,
            latency_ms: a.duration_ms.unwrap_or(0.0),
            ttft_ms: a.ttft_ms,
            fallback_in: a.reason == Reason::Fallback,
            fallback_out,
        };
        let change = self.stats.with(&a.provider, |s| {
            s.all.record(minute, sample);
            s.record_model(&a.model, minute, sample);
            healthy(a).and_then(|ok| s.passive.observe(ok))
        });
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
            self.events.publish(GatewayEvent::Fallback {
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
        attempts: r
            .attempts
            .iter()
            .map(|a| {
                format!("{}:{}", a.provider, a.status.map_or_else(|| a.outcome.as_str().to_string(), |s| s.to_string()))
            })
            .collect(),
    }
}
