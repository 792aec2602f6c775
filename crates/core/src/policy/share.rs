//! The cap on traffic one provider may take as a fallback. When a primary
//! fails, shifting all its load onto the backup can take the backup down
//! too; the cap keeps an outage from cascading.

use std::time::Duration;

use tokio::time::Instant;

const BUCKETS: usize = 12;

/// Counts events over a sliding window, in fixed buckets (constant memory
/// whatever the traffic).
#[derive(Debug, Clone)]
pub struct WindowCounter {
    bucket_len: Duration,
    counts: [u64; BUCKETS],
    /// Index of the bucket that `current_start` opens.
    head: usize,
    current_start: Instant,
}

impl WindowCounter {
    pub fn new(window: Duration, now: Instant) -> WindowCounter {
        let bucket_len = (window / BUCKETS as u32).max(Duration::from_millis(1));
        WindowCounter { bucket_len, counts: [0; BUCKETS], head: 0, current_start: now }
    }

    fn advance(&mut self, now: Instant) {
        let mut elapsed = now.saturating_duration_since(self.current_start);
        let mut steps = 0;
        while elapsed >= self.bucket_len && steps < BUCKETS {
            self.head = (self.head + 1) % BUCKETS;
            self.counts[self.head] = 0;
            self.current_start += self.bucket_len;
            elapsed -= self.bucket_len;
            steps += 1;
        }
        if steps == BUCKETS {
            // Idle longer than the window: everything has expired.
            self.counts = [0; BUCKETS];
            self.current_start = now;
        }
    }

    pub fn add(&mut self, now: Instant) {
        self.advance(now);
        self.counts[self.head] += 1;
    }

    pub fn total(&mut self, now: Instant) -> u64 {
        self.advance(now);
        self.counts.iter().sum()
    }
}

/// Whether a provider may take one more fallback: at least `min` per window
/// always, beyond that at most `share` of all requests in the window.
pub fn allows(fallbacks_taken: u64, requests: u64, share: f64, min: u32) -> bool {
    let cap = (requests as f64 * share.clamp(0.0, 1.0)).floor() as u64;
    fallbacks_taken < cap.max(u64::from(min))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::advance;

    #[tokio::test(start_paused = true)]
    async fn counts_expire_after_the_window() {
        let mut c = WindowCounter::new(Duration::from_secs(12), Instant::now());
        c.add(Instant::now());
        advance(Duration::from_secs(6)).await;
        c.add(Instant::now());
        c.add(Instant::now());
        assert_eq!(c.total(Instant::now()), 3);
        advance(Duration::from_secs(7)).await;
        assert_eq!(c.total(Instant::now()), 2, "the first event left the window");
        advance(Duration::from_secs(60)).await;
        assert_eq!(c.total(Instant::now()), 0);
    }

    #[test]
    fn share_and_minimum() {
        assert!(allows(0, 0, 0.5, 1));
        assert!(!allows(1, 0, 0.5, 1));
        assert!(allows(4, 10, 0.5, 1));
        assert!(!allows(5, 10, 0.5, 1));
        assert!(allows(9, 10, 0.5, 10), "the minimum applies at low traffic");
        assert!(!allows(0, 100, 0.0, 0));
    }
}
