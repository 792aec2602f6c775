//! What a route keeps between requests: its turn counter (for `latency`'s
//! exploration and `weighted`'s round) and its recent split, the requests
//! each provider answered over the last few minutes, for the Providers
//! view, `GET /admin/routes` and `switchyard status`.

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::Turns;
use crate::policy::hedge::HedgeShare;
use crate::policy::share::WindowCounter;

/// How far back the recent split looks.
pub const SPLIT_WINDOW: Duration = Duration::from_secs(300);

#[derive(Debug, Default)]
pub struct RouteState {
    pub turns: Turns,
    /// Per provider, in the order first seen; a chain is short, so a
    /// scan beats a map.
    served: Mutex<Vec<(String, WindowCounter)>>,
    /// Its requests and hedges over the last minute, when it hedges.
    pub hedges: HedgeShare,
}

/// One provider's part of a route's recent traffic.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Share {
    pub provider: String,
    /// Requests it answered in the window.
    pub requests: u64,
    /// Its part of the route's answered requests, 0 to 1.
    pub share: f64,
}

impl RouteState {
    fn served(&self) -> MutexGuard<'_, Vec<(String, WindowCounter)>> {
        self.served.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `provider` answered one of the route's requests.
    pub fn answered(&self, provider: &str) {
        let now = Instant::now();
        let mut served = self.served();
        match served.iter_mut().find(|(name, _)| name == provider) {
            Some((_, counter)) => counter.add(now),
            None => {
                let mut counter = WindowCounter::new(SPLIT_WINDOW, now);
                counter.add(now);
                served.push((provider.to_string(), counter));
            }
        }
    }

    /// The recent split, in the order providers first answered.
    pub fn split(&self) -> Vec<Share> {
        let now = Instant::now();
        let mut served = self.served();
        let counts: Vec<(String, u64)> = served.iter_mut().map(|(p, c)| (p.clone(), c.total(now))).collect();
        let total: u64 = counts.iter().map(|(_, n)| n).sum();
        counts
            .into_iter()
            .map(|(provider, requests)| Share {
                provider,
                requests,
                share: if total == 0 { 0.0 } else { requests as f64 / total as f64 },
            })
            .collect()
    }
}
