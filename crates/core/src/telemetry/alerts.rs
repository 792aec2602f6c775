//! Alerts: the few things worth interrupting someone for (a budget
//! threshold, a breaker opening, a key revoked, a fallback storm), derived
//! from the events and rate-limited here, in one place, so that a long
//! outage sends a handful of desktop notifications, not hundreds. Each kind
//! and subject (a provider, a key, a budget's threshold) may alert at most
//! once per [`AlertPolicy::every`]; the ones held back are counted and the
//! next alert says how many.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::events::GatewayEvent;
use crate::policy::budget::{BudgetAction, Crossing};
use crate::policy::BreakerState;

/// The window a fallback storm is counted over.
const STORM_WINDOW: Duration = Duration::from_secs(60);

pub use crate::config::AlertPolicy;

/// What an alert is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum AlertKind {
    BudgetThreshold,
    BreakerOpen,
    KeyRevoked,
    FallbackStorm,
}

/// The last alert sent for one kind and subject.
#[derive(Debug)]
struct Sent {
    at: Instant,
    /// Alerts held back since.
    held: u32,
}

#[derive(Debug)]
struct State {
    policy: AlertPolicy,
    sent: HashMap<(AlertKind, String), Sent>,
    /// The latest fallbacks, at most `fallback_storm + 1` of them.
    fallbacks: VecDeque<Instant>,
}

/// The rate limiter and the storm counter.
#[derive(Debug)]
pub struct Alerts {
    state: Mutex<State>,
}

impl Alerts {
    pub fn new(policy: AlertPolicy) -> Alerts {
        Alerts { state: Mutex::new(State { policy, sent: HashMap::new(), fallbacks: VecDeque::new() }) }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A reloaded `[alerts]`; what was sent stays counted.
    pub fn set_policy(&self, policy: AlertPolicy) {
        self.state().policy = policy;
    }

    /// Whether an alert of `kind` about `key` may go at `now`: if so, how
    /// many were held back since the last one.
    pub fn admit(&self, kind: AlertKind, key: &str, now: Instant) -> Option<u32> {
        let mut state = self.state();
        let every = state.policy.every;
        match state.sent.get_mut(&(kind, key.to_string())) {
            Some(sent) if now.saturating_duration_since(sent.at) < every => {
                sent.held += 1;
                None
            }
            Some(sent) => {
                let held = std::mem::take(&mut sent.held);
                sent.at = now;
                Some(held)
            }
            None => {
                state.sent.insert((kind, key.to_string()), Sent { at: now, held: 0 });
                Some(0)
            }
        }
    }

    /// Counts a fallback: the number in the last minute, when it is more
    /// than a storm's threshold.
    pub fn fallback(&self, now: Instant) -> Option<u32> {
        let mut state = self.state();
        let cap = state.policy.fallback_storm as usize + 1;
        state.fallbacks.push_back(now);
        while state.fallbacks.len() > cap {
            state.fallbacks.pop_front();
        }
        let oldest = *state.fallbacks.front()?;
        let storm = state.fallbacks.len() == cap && now.saturating_duration_since(oldest) < STORM_WINDOW;
        storm.then_some(cap as u32)
    }

    /// The alert an event calls for, if any and if it may go now.
    pub fn on_event(&self, event: &GatewayEvent, now: Instant) -> Option<GatewayEvent> {
        match event {
            GatewayEvent::Breaker { provider, to: BreakerState::Open, reason, .. } => self.alert(
                AlertKind::BreakerOpen,
                provider,
                provider,
                format!("{provider}: breaker open"),
                format!("{reason}. Requests go to its fallbacks until it recovers."),
                now,
            ),
            GatewayEvent::KeyRevoked { provider, label, reason, .. } => {
                let subject = format!("{provider}/{label}");
                let title = format!("{provider}: key {label:?} revoked");
                self.alert(AlertKind::KeyRevoked, &subject, &subject, title, reason.clone(), now)
            }
            GatewayEvent::Fallback { from, to, .. } => {
                let count = self.fallback(now)?;
                let message =
                    format!("more than {} fallbacks in the last minute; the latest from {from} to {to}", count - 1);
                self.alert(AlertKind::FallbackStorm, "fallbacks", "fallbacks", "Fallback storm".into(), message, now)
            }
            _ => None,
        }
    }

    /// The alert a budget's crossing calls for, if it may go now.
    pub fn on_crossing(&self, c: &Crossing, now: Instant) -> Option<GatewayEvent> {
        let resets = jiff::Timestamp::from_millisecond(c.resets_at_ms).map(|t| t.to_string()).unwrap_or_default();
        let then = match (c.action, c.threshold >= 100) {
            (BudgetAction::Block, true) => format!("requests in its scope are refused until {resets}"),
            _ => format!("it resets at {resets}"),
        };
        let message = format!(
            "${:.2} of ${:.2} spent this {} ({}); {then}",
            c.spent_usd,
            c.limit_usd,
            c.period.as_str(),
            c.scope
        );
        let title = format!("Budget {:?}: {}% spent", c.budget, c.threshold);
        // Each threshold is its own subject: 80% an instant after 50% still goes.
        let key = format!("{}@{}", c.budget, c.threshold);
        self.alert(AlertKind::BudgetThreshold, &key, &c.budget, title, message, now)
    }

    fn alert(
        &self,
        kind: AlertKind,
        key: &str,
        subject: &str,
        title: String,
        message: String,
        now: Instant,
    ) -> Option<GatewayEvent> {
        let suppressed = self.admit(kind, key, now)?;
        Some(GatewayEvent::Alert { kind, subject: subject.to_string(), title, message, suppressed })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opened(provider: &str) -> GatewayEvent {
        GatewayEvent::Breaker {
            provider: provider.into(),
            from: BreakerState::HalfOpen,
            to: BreakerState::Open,
            reason: "5 failures in a row".into(),
            request_id: None,
        }
    }

    fn policy(storm: u32, every_secs: u64) -> AlertPolicy {
        AlertPolicy { fallback_storm: storm, every: Duration::from_secs(every_secs) }
    }

    #[tokio::test(start_paused = true)]
    async fn a_breaker_that_keeps_opening_alerts_once_per_interval_and_counts_the_rest() {
        let alerts = Alerts::new(policy(20, 600));
        let mut sent = Vec::new();
        // An hour-long outage: the breaker opens again every 30 s.
        for _ in 0..120 {
            if let Some(GatewayEvent::Alert { suppressed, .. }) = alerts.on_event(&opened("groq"), Instant::now()) {
                sent.push(suppressed);
            }
            tokio::time::advance(Duration::from_secs(30)).await;
        }
        assert_eq!(sent, [0, 19, 19, 19, 19, 19], "one per 10 minutes, each saying how many it stands for");
        assert!(alerts.on_event(&opened("openai"), Instant::now()).is_some(), "another subject has its own limit");
    }

    #[tokio::test(start_paused = true)]
    async fn only_events_worth_it_become_alerts() {
        let alerts = Alerts::new(AlertPolicy::default());
        let closed = GatewayEvent::Breaker {
            provider: "p".into(),
            from: BreakerState::HalfOpen,
            to: BreakerState::Closed,
            reason: "ok".into(),
            request_id: None,
        };
        assert!(alerts.on_event(&closed, Instant::now()).is_none());
        let revoked = GatewayEvent::KeyRevoked {
            provider: "p".into(),
            label: "main".into(),
            reason: "HTTP 401".into(),
            request_id: None,
        };
        let Some(GatewayEvent::Alert { kind, subject, .. }) = alerts.on_event(&revoked, Instant::now()) else {
            panic!("a revoked key alerts")
        };
        assert_eq!((kind, subject.as_str()), (AlertKind::KeyRevoked, "p/main"));
    }

    fn fallback() -> GatewayEvent {
        GatewayEvent::Fallback {
            request_id: "r".into(),
            model: None,
            from: "a".into(),
            to: "b".into(),
            reason: "HTTP 503".into(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_storm_is_more_than_n_fallbacks_in_a_minute() {
        let alerts = Alerts::new(policy(3, 600));
        // Three a minute, spread out: never a storm.
        for _ in 0..9 {
            assert!(alerts.on_event(&fallback(), Instant::now()).is_none());
            tokio::time::advance(Duration::from_secs(21)).await;
        }
        tokio::time::advance(STORM_WINDOW).await;
        let kinds: Vec<bool> = (0..4).map(|_| alerts.on_event(&fallback(), Instant::now()).is_some()).collect();
        assert_eq!(kinds, [false, false, false, true], "the fourth within a minute");
        assert!(alerts.on_event(&fallback(), Instant::now()).is_none(), "and the storm is said once");
    }

    #[tokio::test(start_paused = true)]
    async fn each_budget_threshold_is_its_own_subject() {
        let alerts = Alerts::new(AlertPolicy::default());
        let crossing = |threshold| Crossing {
            budget: "daily".into(),
            scope: "all".into(),
            period: crate::policy::BudgetPeriod::Day,
            action: BudgetAction::Block,
            threshold,
            spent_usd: 10.0,
            limit_usd: 10.0,
            resets_at_ms: 0,
        };
        assert!(alerts.on_crossing(&crossing(50), Instant::now()).is_some());
        let Some(GatewayEvent::Alert { message, .. }) = alerts.on_crossing(&crossing(100), Instant::now()) else {
            panic!("100% goes right after 50%")
        };
        assert!(message.contains("refused until 1970-01-01T00:00:00Z"), "{message}");
    }
}
