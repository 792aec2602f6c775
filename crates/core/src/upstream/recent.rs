//! A provider's recent speed, as `latency`, `least_busy` and `cheapest`
//! weigh it: moving averages of time to first token (streams) and of
//! latency (whole answers), fed by every attempt that answers.
//!
//! The rolling statistics keep percentiles per minute, which a dashboard
//! wants; a routing decision wants one number, read without a lock,
//! that follows a provider slowing down within a few requests. Each
//! average is an `f64`'s bits in an atomic: readers never wait, and two
//! writers racing lose one sample, which an average can spare.
//!
//! A provider never measured is put first, to be measured; one that was
//! tried and failed before it ever answered is put last instead (its
//! average reads infinite until it answers), or a provider that fails at
//! once would stay "never measured", and first, until its breaker opened.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Weight of the newest sample: a provider that turns ten times slower
/// is seen as slower than a steady one within two or three answers.
const WEIGHT: f64 = 0.3;
/// Bits of `f64` that stand for "nothing measured yet" (a NaN no sample makes).
const NONE: u64 = u64::MAX;

#[derive(Debug)]
pub struct Recent {
    ttft: AtomicU64,
    latency: AtomicU64,
}

impl Default for Recent {
    fn default() -> Recent {
        Recent { ttft: AtomicU64::new(NONE), latency: AtomicU64::new(NONE) }
    }
}

impl Recent {
    /// Adds one answer's time: to first token for a stream, to the whole
    /// answer otherwise.
    pub fn observe(&self, streamed: bool, took: Duration) {
        let slot = self.slot(streamed);
        let sample = took.as_secs_f64() * 1000.0;
        let next = match read(slot) {
            Some(avg) if avg.is_finite() => avg + WEIGHT * (sample - avg),
            _ => sample,
        };
        slot.store(next.to_bits(), Ordering::Relaxed);
    }

    /// An attempt failed without saying how fast the provider is (a quick
    /// error): a provider with no measure yet goes after those with one.
    /// A measured one keeps its measure: its breaker judges its failures.
    pub fn failed(&self, streamed: bool) {
        let slot = self.slot(streamed);
        let _ = slot.compare_exchange(NONE, f64::INFINITY.to_bits(), Ordering::Relaxed, Ordering::Relaxed);
    }

    /// The recent average in ms for a stream (`streamed`) or a whole
    /// answer; a stream's falls back on the whole answers' when no stream
    /// was measured (a slow provider is slow to start either way).
    pub fn ms(&self, streamed: bool) -> Option<f64> {
        read(self.slot(streamed)).or_else(|| read(self.slot(!streamed)))
    }

    fn slot(&self, streamed: bool) -> &AtomicU64 {
        if streamed {
            &self.ttft
        } else {
            &self.latency
        }
    }
}

fn read(slot: &AtomicU64) -> Option<f64> {
    let bits = slot.load(Ordering::Relaxed);
    (bits != NONE).then(|| f64::from_bits(bits))
}
