//! The live event bus: one typed broadcast of what the gateway does. The
//! request path publishes without waiting; a subscriber that falls behind
//! lags and resyncs from a snapshot. Recent events are kept so a client can
//! resume from the last id it saw (`Last-Event-ID`).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

use super::alerts::AlertKind;
use crate::ground::clock::now_ms;
use crate::ground::outcome::RequestOutcome;
use crate::history::record::{EventRecord, Record};
use crate::history::Recorder;
use crate::policy::breaker::BreakerState;

/// Events kept for resuming subscribers.
const RECENT: usize = 2048;
/// Events a subscriber may fall behind before it lags.
const CHANNEL: usize = 1024;

/// A request as the live view shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct RequestBrief {
    pub id: String,
    pub endpoint: String,
    pub model: Option<String>,
    pub provider: Option<String>,
    pub outcome: RequestOutcome,
    pub status: Option<u16>,
    pub duration_ms: f64,
    pub ttft_ms: Option<f64>,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cost_usd: Option<f64>,
    /// What the response cache did; null when it was not consulted.
    pub cache: Option<crate::ground::outcome::CacheStatus>,
    /// `provider:status-or-outcome` per attempt, in order.
    pub attempts: Vec<String>,
    /// The member whose key made the request; null for the owner (or a
    /// gateway without members). Absent from an older instance's events.
    #[serde(default)]
    pub member: Option<String>,
    /// The session it belongs to ([`crate::session`]): in a team, the
    /// other instances keep the session on the provider that served it.
    /// Absent from an older instance's events.
    #[serde(default)]
    pub session: Option<String>,
}

/// Passive health: what real traffic says about a provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum PassiveHealth {
    Healthy,
    Unhealthy,
}

/// What happened, one word per [`GatewayEvent`] variant: the stream's
/// event names and the history's event kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    RequestFinished,
    Fallback,
    Breaker,
    Health,
    KeyRevoked,
    KeyCooling,
    ProviderToggled,
    ConfigReloaded,
    Alert,
}

impl EventKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::RequestFinished => "request_finished",
            EventKind::Fallback => "fallback",
            EventKind::Breaker => "breaker",
            EventKind::Health => "health",
            EventKind::KeyRevoked => "key_revoked",
            EventKind::KeyCooling => "key_cooling",
            EventKind::ProviderToggled => "provider_toggled",
            EventKind::ConfigReloaded => "config_reloaded",
            EventKind::Alert => "alert",
        }
    }
}

/// What the gateway does, as the live bus carries it. A `request_id` that
/// is `None` is left out of the JSON (and read back as `None`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum GatewayEvent {
    RequestFinished {
        request: RequestBrief,
    },
    Fallback {
        request_id: String,
        model: Option<String>,
        from: String,
        to: String,
        reason: String,
    },
    /// `request_id`: the request whose attempt caused the change, if any
    /// (a timer, a probe or an operator cause the others).
    Breaker {
        provider: String,
        from: BreakerState,
        to: BreakerState,
        reason: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request_id: Option<String>,
    },
    Health {
        provider: String,
        from: PassiveHealth,
        to: PassiveHealth,
        reason: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request_id: Option<String>,
    },
    KeyRevoked {
        provider: String,
        label: String,
        reason: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request_id: Option<String>,
    },
    KeyCooling {
        provider: String,
        label: Option<String>,
        until_ms: i64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request_id: Option<String>,
    },
    ProviderToggled {
        provider: String,
        enabled: bool,
    },
    ConfigReloaded {
        ok: bool,
        error: Option<String>,
    },
    /// Something worth a desktop notification, rate-limited per kind and
    /// subject (`telemetry::alerts`); `suppressed`: alerts like it held
    /// back since the last one that went out.
    Alert {
        kind: AlertKind,
        subject: String,
        title: String,
        message: String,
        suppressed: u32,
    },
}

impl GatewayEvent {
    pub fn kind(&self) -> EventKind {
        match self {
            GatewayEvent::RequestFinished { .. } => EventKind::RequestFinished,
            GatewayEvent::Fallback { .. } => EventKind::Fallback,
            GatewayEvent::Breaker { .. } => EventKind::Breaker,
            GatewayEvent::Health { .. } => EventKind::Health,
            GatewayEvent::KeyRevoked { .. } => EventKind::KeyRevoked,
            GatewayEvent::KeyCooling { .. } => EventKind::KeyCooling,
            GatewayEvent::ProviderToggled { .. } => EventKind::ProviderToggled,
            GatewayEvent::ConfigReloaded { .. } => EventKind::ConfigReloaded,
            GatewayEvent::Alert { .. } => EventKind::Alert,
        }
    }

    fn provider(&self) -> Option<&str> {
        match self {
            GatewayEvent::Breaker { provider, .. }
            | GatewayEvent::Health { provider, .. }
            | GatewayEvent::KeyRevoked { provider, .. }
            | GatewayEvent::KeyCooling { provider, .. }
            | GatewayEvent::ProviderToggled { provider, .. } => Some(provider),
            GatewayEvent::Fallback { to, .. } => Some(to),
            GatewayEvent::RequestFinished { .. } | GatewayEvent::ConfigReloaded { .. } | GatewayEvent::Alert { .. } => {
                None
            }
        }
    }
}

/// An event with its place in the sequence.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Envelope {
    pub id: u64,
    pub at_ms: i64,
    /// In team mode, the instance where it happened when that is another
    /// one; absent for this instance's own events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub instance: Option<String>,
    #[serde(flatten)]
    pub event: GatewayEvent,
}

#[derive(Debug)]
pub struct EventBus {
    tx: broadcast::Sender<Arc<Envelope>>,
    next: AtomicU64,
    recent: Mutex<VecDeque<Arc<Envelope>>>,
    /// State changes also go on record (requests have their own rows).
    recorder: Option<Recorder>,
}

impl EventBus {
    pub fn new(recorder: Option<Recorder>) -> EventBus {
        EventBus {
            tx: broadcast::channel(CHANNEL).0,
            next: AtomicU64::new(1),
            recent: Mutex::new(VecDeque::new()),
            recorder,
        }
    }

    /// Publishes without waiting on anyone.
    pub fn publish(&self, event: GatewayEvent) {
        if let (Some(recorder), false) = (&self.recorder, matches!(event, GatewayEvent::RequestFinished { .. })) {
            let detail = serde_json::to_string(&event).unwrap_or_default();
            let request_id = match &event {
                GatewayEvent::Fallback { request_id, .. } => Some(request_id.clone()),
                _ => None,
            };
            recorder.record_now(Record::Event(EventRecord {
                at_ms: now_ms(),
                kind: event.kind().as_str().to_string(),
                provider: event.provider().map(str::to_string),
                detail,
                request_id,
            }));
        }
        self.deliver(now_ms(), None, event);
    }

    /// Passes on an event that happened on another instance of the team
    /// (at `at_ms`, on `instance`): to this instance's live feed only. It
    /// is on record, and counted, where it happened.
    pub fn publish_remote(&self, instance: &str, at_ms: i64, event: GatewayEvent) {
        self.deliver(at_ms, Some(instance.to_owned()), event);
    }

    fn deliver(&self, at_ms: i64, instance: Option<String>, event: GatewayEvent) {
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        // Numbered under the lock, so ids and delivery order agree.
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let envelope = Arc::new(Envelope { id, at_ms, instance, event });
        if recent.len() == RECENT {
            recent.pop_front();
        }
        recent.push_back(envelope.clone());
        let _ = self.tx.send(envelope);
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Envelope>> {
        self.tx.subscribe()
    }

    /// Events after `id`, if they are all still kept.
    pub fn since(&self, id: u64) -> Option<Vec<Arc<Envelope>>> {
        let recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        let oldest = recent.front().map_or(self.next.load(Ordering::Relaxed), |e| e.id);
        if id + 1 < oldest {
            return None;
        }
        Some(recent.iter().filter(|e| e.id > id).cloned().collect())
    }

    /// The latest state changes kept now (finished requests left out, as
    /// they have their own history), newest last: the live feed's first screen.
    pub fn recent_changes(&self, limit: usize) -> Vec<Arc<Envelope>> {
        let recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        let mut changes: Vec<_> = recent
            .iter()
            .rev()
            .filter(|e| !matches!(e.event, GatewayEvent::RequestFinished { .. }))
            .take(limit)
            .cloned()
            .collect();
        changes.reverse();
        changes
    }

    pub fn last_id(&self) -> u64 {
        self.next.load(Ordering::Relaxed).saturating_sub(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toggled(n: usize) -> GatewayEvent {
        GatewayEvent::ProviderToggled { provider: format!("p{n}"), enabled: n.is_multiple_of(2) }
    }

    #[tokio::test]
    async fn ids_are_sequential_and_resumable() {
        let bus = EventBus::new(None);
        let mut rx = bus.subscribe();
        for n in 0..3 {
            bus.publish(toggled(n));
        }
        assert_eq!(rx.recv().await.unwrap().id, 1);
        let after_one: Vec<u64> = bus.since(1).unwrap().iter().map(|e| e.id).collect();
        assert_eq!(after_one, [2, 3]);
        assert_eq!(bus.last_id(), 3);
    }

    #[tokio::test]
    async fn a_lagging_subscriber_does_not_block_publishing() {
        let bus = EventBus::new(None);
        let mut slow = bus.subscribe();
        for n in 0..(CHANNEL * 3) {
            bus.publish(toggled(n));
        }
        assert!(matches!(slow.recv().await, Err(broadcast::error::RecvError::Lagged(_))));
        assert!(bus.since(1).is_none(), "too old to resume: resync from a snapshot");
        assert_eq!(bus.since(bus.last_id() - 5).unwrap().len(), 5);
    }

    #[test]
    fn events_read_back_as_the_types_they_were() {
        let breaker = GatewayEvent::Breaker {
            provider: "p".into(),
            from: BreakerState::Closed,
            to: BreakerState::Open,
            reason: "r".into(),
            request_id: None,
        };
        for event in [toggled(1), breaker] {
            let text = serde_json::to_string(&Envelope { id: 3, at_ms: 4, instance: None, event }).unwrap();
            let back: Envelope = serde_json::from_str(&text).unwrap();
            assert_eq!(serde_json::to_string(&back).unwrap(), text);
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(v["type"], back.event.kind().as_str(), "the tag and the kind agree");
        }
        let v = serde_json::to_value(GatewayEvent::Health {
            provider: "p".into(),
            from: PassiveHealth::Healthy,
            to: PassiveHealth::Unhealthy,
            reason: "r".into(),
            request_id: None,
        })
        .unwrap();
        assert_eq!((v["from"].as_str(), v["to"].as_str()), (Some("healthy"), Some("unhealthy")));
        assert!(v.get("request_id").is_none(), "a missing cause is left out");
    }

    #[test]
    fn events_serialize_with_their_type() {
        let e = Envelope { id: 7, at_ms: 1, instance: None, event: toggled(2) };
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["type"], "provider_toggled");
        assert_eq!(v["id"], 7);
        assert_eq!(v["enabled"], true);
    }
}
