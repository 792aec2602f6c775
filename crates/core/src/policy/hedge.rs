//! Hedged first bytes: when the provider tried has sent nothing after a
//! while, the next candidate starts alongside and the first to answer is
//! kept ("The Tail at Scale", Dean and Barroso). A hedge is extra load on a
//! provider that may be struggling, so it is bounded twice: it starts only
//! past a delay most answers beat (a fixed one, or the provider's own
//! recent 95th percentile), and at most a share of a route's requests in a
//! minute are hedged, however slow the primary turns.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::policy::share::WindowCounter;

/// How long a route waits for a first byte before it hedges.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum HedgeAfter {
    Fixed(Duration),
    /// The provider's 95th-percentile time to first byte (to first token
    /// for a stream) over the last minutes.
    P95,
}

/// A route's hedging (`hedge_after`, `hedge_max_share`); off unless set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hedge {
    pub after: HedgeAfter,
    /// The most of a route's requests in a minute that may be hedged.
    pub max_share: f64,
}

/// Without `hedge_max_share`: one request in ten at most.
pub const DEFAULT_MAX_SHARE: f64 = 0.10;

/// A `p95` never hedges sooner than this: a provider whose every answer
/// comes within a few milliseconds would otherwise be hedged for the
/// jitter of its fastest ones.
const P95_FLOOR: Duration = Duration::from_millis(50);

/// A `p95` is read only from this many answers in its window: fewer say
/// too little of the provider's tail, and it is not hedged.
pub const P95_MIN_SAMPLES: u64 = 20;

/// The window the share is counted over.
const SHARE_WINDOW: Duration = Duration::from_secs(60);

impl HedgeAfter {
    /// `"300ms"`, `"2s"` or `"p95"`.
    pub fn parse(text: &str) -> Option<HedgeAfter> {
        if text.trim().eq_ignore_ascii_case("p95") {
            return Some(HedgeAfter::P95);
        }
        humantime::parse_duration(text).ok().filter(|d| !d.is_zero()).map(HedgeAfter::Fixed)
    }

    /// The delay for a provider whose recent 95th percentile is `p95`
    /// (none when too few answers say it): `None` means no hedge.
    pub fn delay(self, p95: impl FnOnce() -> Option<Duration>) -> Option<Duration> {
        match self {
            HedgeAfter::Fixed(d) => Some(d),
            HedgeAfter::P95 => p95().map(|p| p.max(P95_FLOOR)),
        }
    }
}

impl std::fmt::Display for HedgeAfter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HedgeAfter::Fixed(d) => write!(f, "{}", humantime::format_duration(*d)),
            HedgeAfter::P95 => f.write_str("p95"),
        }
    }
}

/// A route's requests and hedges over the last minute.
#[derive(Debug)]
pub struct HedgeShare {
    counts: Mutex<Option<(WindowCounter, WindowCounter)>>,
}

impl Default for HedgeShare {
    fn default() -> HedgeShare {
        HedgeShare { counts: Mutex::new(None) }
    }
}

impl HedgeShare {
    fn with<T>(&self, f: impl FnOnce(&mut WindowCounter, &mut WindowCounter, Instant) -> T) -> T {
        let now = Instant::now();
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let (requests, hedged) = counts
            .get_or_insert_with(|| (WindowCounter::new(SHARE_WINDOW, now), WindowCounter::new(SHARE_WINDOW, now)));
        f(requests, hedged, now)
    }

    /// One more request of the route that may be hedged.
    pub fn request(&self) {
        self.with(|requests, _, now| requests.add(now));
    }

    /// Takes one hedge when it keeps the hedged within `max_share` of the
    /// minute's requests (this one counted): the first requests of a
    /// quiet minute are not hedged, as the share cannot yet tell.
    pub fn take(&self, max_share: f64) -> bool {
        self.with(|requests, hedged, now| {
            // The tolerance keeps 10 × 0.1 from reading as just under 1.
            let cap = requests.total(now) as f64 * max_share.clamp(0.0, 1.0) + 1e-9;
            let allowed = (hedged.total(now) + 1) as f64 <= cap;
            if allowed {
                hedged.add(now);
            }
            allowed
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delay_is_a_duration_or_p95() {
        assert_eq!(HedgeAfter::parse("300ms"), Some(HedgeAfter::Fixed(Duration::from_millis(300))));
        assert_eq!(HedgeAfter::parse("P95"), Some(HedgeAfter::P95));
        assert_eq!(HedgeAfter::parse("0s"), None);
        assert_eq!(HedgeAfter::parse("p99"), None);
        assert_eq!(HedgeAfter::P95.delay(|| None), None, "too few answers: no hedge");
        assert_eq!(HedgeAfter::P95.delay(|| Some(Duration::from_millis(3))), Some(P95_FLOOR));
        assert_eq!(HedgeAfter::P95.delay(|| Some(Duration::from_millis(800))), Some(Duration::from_millis(800)));
        assert_eq!(HedgeAfter::Fixed(Duration::from_secs(1)).delay(|| None), Some(Duration::from_secs(1)));
    }

    fn config(text: &str) -> Result<crate::config::Config, String> {
        let providers = "[[providers]]\nname = \"a\"\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\nauth = \"none\"\nmodels = [\"m\"]\n";
        crate::config::Config::parse(&format!("{text}\n{providers}"), std::path::Path::new("t.toml"))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn hedging_is_set_in_policy_or_a_route_and_checked() {
        let c = config("[policy]\nhedge_after = \"300ms\"").unwrap();
        let hedge = Hedge { after: HedgeAfter::Fixed(Duration::from_millis(300)), max_share: DEFAULT_MAX_SHARE };
        assert_eq!(c.policy.hedge, Some(hedge));
        let c = config("[policy]\nhedge_after = \"p95\"\n[[routes]]\nmodel = \"m\"\nchain = [\"a\"]\npolicy = { hedge_max_share = 0.25 }")
            .unwrap();
        assert_eq!(c.routes[0].policy.hedge, Some(Hedge { after: HedgeAfter::P95, max_share: 0.25 }));
        assert_eq!(c.policy.hedge.map(|h| h.max_share), Some(DEFAULT_MAX_SHARE));
        assert_eq!(config("").unwrap().policy.hedge, None, "off by default");
        let cases = [
            ("[policy]\nhedge_after = \"soon\"", "t.toml:2:", "policy.hedge_after", "or \"p95\""),
            ("[policy]\nhedge_max_share = 0.5", "t.toml:2:", "hedge_max_share", "needs `hedge_after`"),
            (
                "[policy]\nhedge_after = \"1s\"\nhedge_max_share = 2.0",
                "t.toml:3:",
                "hedge_max_share",
                "between 0 and 1",
            ),
        ];
        for (text, at, field, message) in cases {
            let error = config(text).unwrap_err();
            assert!(error.starts_with(at) && error.contains(field) && error.contains(message), "{text}: {error}");
        }
        let text = "[[providers]]\nname = \"a\"\nkind = \"openai\"\nbase_url = \"http://x/v1\"\n[providers.policy]\nhedge_after = \"1s\"\n";
        let error = crate::config::Config::parse(text, std::path::Path::new("t.toml")).unwrap_err().to_string();
        assert!(error.contains("providers[0].policy.hedge_after") && error.contains("request setting"), "{error}");
    }

    #[tokio::test(start_paused = true)]
    async fn the_share_holds_however_many_ask() {
        let share = HedgeShare::default();
        let mut taken = 0;
        for _ in 0..100 {
            share.request();
            taken += u32::from(share.take(0.10));
        }
        assert_eq!(taken, 10, "one in ten of 100 requests, each of them slow");
        tokio::time::advance(Duration::from_secs(61)).await;
        share.request();
        assert!(!share.take(0.10), "a new minute's first request cannot be a tenth");
        for _ in 0..9 {
            share.request();
        }
        assert!(share.take(0.10), "ten requests into the minute, one may be hedged");
        assert!(!share.take(0.10));
    }
}
