//! The capture switch the gateway holds: which requests are captured
//! beyond `[history] store_bodies` ([`crate::proxy::capture`] captures them).

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::ground::clock::now_ms;

/// The capture switch: the next N requests, or every request until a time,
/// and the replays on their way (each linked to the request it re-sends).
#[derive(Debug, Default)]
pub struct Switch {
    remaining: AtomicU64,
    until_ms: AtomicI64,
    pending_replays: AtomicUsize,
    replays: Mutex<HashMap<String, String>>,
    /// Replays sent to one chosen provider: request id → provider.
    pending_pins: AtomicUsize,
    pins: Mutex<HashMap<String, String>>,
}

/// What the switch is set to, for the dashboard and the CLI.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct SwitchState {
    /// Requests still to capture.
    #[cfg_attr(test, ts(type = "number"))]
    pub remaining: u64,
    /// Unix ms until which every request is captured; 0: off.
    #[cfg_attr(test, ts(type = "number"))]
    pub until_ms: i64,
}

impl Switch {
    pub fn set(&self, state: SwitchState) {
        self.remaining.store(state.remaining, Ordering::Relaxed);
        self.until_ms.store(state.until_ms, Ordering::Relaxed);
    }

    pub fn state(&self) -> SwitchState {
        SwitchState {
            remaining: self.remaining.load(Ordering::Relaxed),
            until_ms: self.until_ms.load(Ordering::Relaxed),
        }
    }

    /// Whether the switch captures this request (spending one of N).
    pub(crate) fn on(&self) -> bool {
        let until = self.until_ms.load(Ordering::Relaxed);
        if until > 0 && now_ms() < until {
            return true;
        }
        self.remaining.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1)).is_ok()
    }

    /// The request `request_id` about to be sent is a replay of
    /// `original`, to `provider` alone if one is named.
    pub fn expect_replay(&self, request_id: &str, original: &str, provider: Option<&str>) {
        let mut replays = self.replays.lock().unwrap_or_else(|p| p.into_inner());
        replays.insert(request_id.to_string(), original.to_string());
        self.pending_replays.store(replays.len(), Ordering::Release);
        if let Some(provider) = provider {
            let mut pins = self.pins.lock().unwrap_or_else(|p| p.into_inner());
            pins.insert(request_id.to_string(), provider.to_string());
            self.pending_pins.store(pins.len(), Ordering::Release);
        }
    }

    /// For a replay sent to one provider: the chain cut down to it (empty
    /// if the model's chain does not have it). Checked only while one is pending.
    pub fn pin(&self, request_id: &str, candidates: &mut Vec<crate::upstream::routing::Candidate<'_>>) {
        if self.pending_pins.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut pins = self.pins.lock().unwrap_or_else(|p| p.into_inner());
        let Some(provider) = pins.remove(request_id) else { return };
        self.pending_pins.store(pins.len(), Ordering::Release);
        candidates.retain(|c| c.provider.name() == provider);
    }

    /// The request a replay re-sends; checked only while a replay is pending.
    pub(crate) fn replay_of(&self, request_id: &str) -> Option<String> {
        if self.pending_replays.load(Ordering::Acquire) == 0 {
            return None;
        }
        let mut replays = self.replays.lock().unwrap_or_else(|p| p.into_inner());
        let original = replays.remove(request_id);
        self.pending_replays.store(replays.len(), Ordering::Release);
        original
    }
}
