//! The cache's and the queue's figures as plain atomics, for the metrics
//! endpoint, the statistics and the dashboard to read (the caller decides
//! how they are exported; nothing here registers itself anywhere).

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

pub use crate::ground::outcome::CacheStatus;

/// Counters of one cache. Counts only go up; `entries` and `bytes` are gauges.
#[derive(Debug, Default)]
pub struct CacheCounters {
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub stale: AtomicU64,
    pub bypasses: AtomicU64,
    /// Answers written.
    pub stores: AtomicU64,
    /// Entries removed to keep the size cap.
    pub evictions: AtomicU64,
    /// Entries found damaged, skipped and deleted.
    pub corrupt: AtomicU64,
    /// Writes dropped because the writer was behind.
    pub dropped_writes: AtomicU64,
    /// What the answers served from the cache had cost, in millionths of a dollar.
    pub saved_micro_usd: AtomicU64,
    pub entries: AtomicU64,
    /// Stored bytes (compressed bodies and row overhead).
    pub bytes: AtomicU64,
}

impl CacheCounters {
    /// Counts what the cache did for one request; a hit (fresh or stale)
    /// also counts what it saved.
    pub fn count(&self, status: CacheStatus, saved_usd: Option<f64>) {
        let counter = match status {
            CacheStatus::Hit => &self.hits,
            CacheStatus::Miss => &self.misses,
            CacheStatus::Stale => &self.stale,
            CacheStatus::Bypass => &self.bypasses,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        if matches!(status, CacheStatus::Hit | CacheStatus::Stale) {
            if let Some(usd) = saved_usd.filter(|u| u.is_finite() && *u > 0.0) {
                self.saved_micro_usd.fetch_add((usd * 1e6).round() as u64, Ordering::Relaxed);
            }
        }
    }

    pub fn snapshot(&self) -> CacheStats {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        CacheStats {
            hits: get(&self.hits),
            misses: get(&self.misses),
            stale: get(&self.stale),
            bypasses: get(&self.bypasses),
            stores: get(&self.stores),
            evictions: get(&self.evictions),
            corrupt: get(&self.corrupt),
            dropped_writes: get(&self.dropped_writes),
            saved_usd: get(&self.saved_micro_usd) as f64 / 1e6,
            entries: get(&self.entries),
            bytes: get(&self.bytes),
        }
    }
}

/// A copy of [`CacheCounters`] at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
    pub stale: u64,
    pub bypasses: u64,
    pub stores: u64,
    pub evictions: u64,
    pub corrupt: u64,
    pub dropped_writes: u64,
    pub saved_usd: f64,
    pub entries: u64,
    pub bytes: u64,
}
