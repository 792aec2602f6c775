//! Client-side limits per provider: token buckets for requests and tokens
//! per minute (the concurrency cap is [`super::queue::Capacity`]), tightened by the remaining-quota headers so the gateway slows
//! down before a 429 arrives rather than after.

use std::time::Duration;

use tokio::time::Instant;

/// A token bucket refilled continuously up to its capacity.
#[derive(Debug, Clone)]
pub struct Bucket {
    capacity: f64,
    tokens: f64,
    per_second: f64,
    last: Instant,
}

impl Bucket {
    pub fn per_minute(limit: u32, now: Instant) -> Bucket {
        let capacity = f64::from(limit.max(1));
        Bucket { capacity, tokens: capacity, per_second: capacity / 60.0, last: now }
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.per_second).min(self.capacity);
        self.last = now;
    }

    /// How long until `n` tokens are there (zero: they are now).
    pub fn wait_for(&mut self, n: f64, now: Instant) -> Duration {
        self.refill(now);
        let n = n.min(self.capacity);
        if self.tokens >= n {
            Duration::ZERO
        } else {
            Duration::from_secs_f64((n - self.tokens) / self.per_second)
        }
    }

    /// The same bucket with another limit, keeping what it holds now (at
    /// most the new capacity): a limit shared out or given back whole does
    /// not refill it.
    pub fn resized(&self, limit: u32, now: Instant) -> Bucket {
        let mut old = self.clone();
        old.refill(now);
        let mut b = Bucket::per_minute(limit, now);
        b.tokens = old.tokens.min(b.capacity);
        b
    }

    /// Takes `n` tokens; the balance may go negative, which delays later takers.
    pub fn take(&mut self, n: f64, now: Instant) {
        self.refill(now);
        self.tokens -= n.min(self.capacity);
    }

    /// The provider says only `remaining` are left: never believe in more.
    pub fn clamp(&mut self, remaining: u64, now: Instant) {
        self.refill(now);
        self.tokens = self.tokens.min(remaining as f64);
    }
}

/// The rate buckets of one provider.
#[derive(Debug, Clone, Default)]
pub struct Rates {
    pub requests: Option<Bucket>,
    pub tokens: Option<Bucket>,
}

impl Rates {
    pub fn new(requests_per_minute: Option<u32>, tokens_per_minute: Option<u32>, now: Instant) -> Rates {
        Rates {
            requests: requests_per_minute.map(|l| Bucket::per_minute(l, now)),
            tokens: tokens_per_minute.map(|l| Bucket::per_minute(l, now)),
        }
    }

    /// The same buckets with other limits, each keeping what it holds
    /// ([`Bucket::resized`]); a bucket new to a limit starts full.
    pub fn resized(&self, requests_per_minute: Option<u32>, tokens_per_minute: Option<u32>, now: Instant) -> Rates {
        let resize = |old: &Option<Bucket>, limit: Option<u32>| {
            limit.map(|l| old.as_ref().map_or_else(|| Bucket::per_minute(l, now), |b| b.resized(l, now)))
        };
        Rates { requests: resize(&self.requests, requests_per_minute), tokens: resize(&self.tokens, tokens_per_minute) }
    }

    /// The wait before a request of about `tokens` tokens may go.
    pub fn wait_for(&mut self, tokens: u64, now: Instant) -> Duration {
        let r = self.requests.as_mut().map_or(Duration::ZERO, |b| b.wait_for(1.0, now));
        let t = self.tokens.as_mut().map_or(Duration::ZERO, |b| b.wait_for(tokens as f64, now));
        r.max(t)
    }

    pub fn take(&mut self, tokens: u64, now: Instant) {
        if let Some(b) = self.requests.as_mut() {
            b.take(1.0, now);
        }
        if let Some(b) = self.tokens.as_mut() {
            b.take(tokens as f64, now);
        }
    }

    /// Applies remaining-quota headers.
    pub fn observe(&mut self, requests_left: Option<u64>, tokens_left: Option<u64>, now: Instant) {
        if let (Some(b), Some(n)) = (self.requests.as_mut(), requests_left) {
            b.clamp(n, now);
        }
        if let (Some(b), Some(n)) = (self.tokens.as_mut(), tokens_left) {
            b.clamp(n, now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::advance;

    #[tokio::test(start_paused = true)]
    async fn a_bucket_resized_keeps_what_it_holds_and_never_refills() {
        let now = Instant::now();
        let mut rates = Rates::new(Some(60), None, now);
        for _ in 0..50 {
            rates.take(0, now);
        }
        let shared = rates.resized(Some(20), None, now);
        let mut back = shared.resized(Some(60), Some(100), now);
        assert!(back.requests.as_ref().unwrap().tokens <= 10.0 + 1e-9, "10 left, not a fresh bucket");
        assert_eq!(back.tokens.as_ref().unwrap().tokens, 100.0, "a bucket new to a limit starts full");
        assert_eq!(back.wait_for(0, now), Duration::ZERO);
        let mut shared = rates.resized(Some(5), None, now);
        for _ in 0..5 {
            assert_eq!(shared.wait_for(0, now), Duration::ZERO);
            shared.take(0, now);
        }
        assert!(shared.wait_for(0, now) > Duration::ZERO, "a share of 5 holds 5 at most");
    }

    #[tokio::test(start_paused = true)]
    async fn bucket_refills_over_time() {
        let mut r = Rates::new(Some(60), None, Instant::now());
        for _ in 0..60 {
            assert_eq!(r.wait_for(0, Instant::now()), Duration::ZERO);
            r.take(0, Instant::now());
        }
        assert_eq!(r.wait_for(0, Instant::now()), Duration::from_secs(1));
        advance(Duration::from_millis(500)).await;
        assert_eq!(r.wait_for(0, Instant::now()), Duration::from_millis(500));
        advance(Duration::from_millis(500)).await;
        assert_eq!(r.wait_for(0, Instant::now()), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn token_bucket_and_remaining_headers() {
        let mut r = Rates::new(Some(600), Some(6000), Instant::now());
        assert_eq!(r.wait_for(1000, Instant::now()), Duration::ZERO);
        r.observe(Some(0), None, Instant::now());
        // No request left: wait for one to refill at 10 per second.
        assert_eq!(r.wait_for(1, Instant::now()), Duration::from_millis(100));
        r.observe(None, Some(100), Instant::now());
        assert_eq!(r.wait_for(1100, Instant::now()), Duration::from_secs(10));
    }
}
