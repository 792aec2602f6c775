//! The order a route's chain is tried in, as configured: the strategy,
//! and the weighted round a `weighted` route takes turns by. The
//! strategies themselves rank providers ([`crate::upstream::strategy`]).

use serde::{Deserialize, Serialize};

/// How a route orders its chain for each request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// The chain as written: the first usable provider takes the traffic.
    #[default]
    Ordered,
    Latency,
    LeastBusy,
    Cheapest,
    Weighted,
}

impl Strategy {
    pub const ALL: [Strategy; 5] =
        [Strategy::Ordered, Strategy::Latency, Strategy::LeastBusy, Strategy::Cheapest, Strategy::Weighted];

    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Ordered => "ordered",
            Strategy::Latency => "latency",
            Strategy::LeastBusy => "least_busy",
            Strategy::Cheapest => "cheapest",
            Strategy::Weighted => "weighted",
        }
    }

    /// The strategy named `text` in a config file or an admin request.
    pub fn parse(text: &str) -> Option<Strategy> {
        Strategy::ALL.into_iter().find(|s| s.as_str() == text)
    }
}

impl std::fmt::Display for Strategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A route's weighted round: which chain position takes each turn, in
/// the order smooth weighted round-robin gives (weights 5, 1, 1 go
/// a a b a c a a, not a a a a a b c), worked out once when the config is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    weights: Vec<u32>,
    turns: Vec<u16>,
}

/// The most turns a round holds; weights are scaled down to fit.
const MAX_ROUND: u32 = 10_000;

impl Schedule {
    /// The round for chain positions weighing `weights` (each at least 1).
    pub fn new(weights: &[u32]) -> Schedule {
        let divisor = weights.iter().copied().fold(0, gcd).max(1);
        let reduced: Vec<u64> = weights.iter().map(|w| u64::from(*w / divisor).max(1)).collect();
        let total: u64 = reduced.iter().sum();
        let mut current = vec![0i64; reduced.len()];
        let mut turns = Vec::with_capacity(usize::try_from(total.min(u64::from(MAX_ROUND))).unwrap_or(0));
        for _ in 0..total.min(u64::from(MAX_ROUND)) {
            for (c, w) in current.iter_mut().zip(&reduced) {
                *c += i64::try_from(*w).unwrap_or(i64::MAX);
            }
            let best = (0..current.len()).fold(0, |best, i| if current[i] > current[best] { i } else { best });
            current[best] -= i64::try_from(total).unwrap_or(i64::MAX);
            turns.push(u16::try_from(best).unwrap_or(u16::MAX));
        }
        Schedule { weights: weights.to_vec(), turns }
    }

    /// The chain position whose turn `turn` is.
    pub fn position(&self, turn: u64) -> Option<usize> {
        let len = u64::try_from(self.turns.len()).ok().filter(|n| *n > 0)?;
        let at = usize::try_from(turn % len).ok()?;
        self.turns.get(at).map(|p| usize::from(*p))
    }

    /// The weight of chain position `position`.
    pub fn weight(&self, position: usize) -> Option<u32> {
        self.weights.get(position).copied()
    }

    pub fn weights(&self) -> &[u32] {
        &self.weights
    }
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Why a strategy put a provider where it did, as figures taken at the
/// moment of the decision. Only the figures the strategy weighed are set.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Routing {
    pub strategy: Strategy,
    /// Place in the strategy's order for this request, 0 first.
    pub rank: u32,
    /// Put first to take a fresh measure of it, not for its figures
    /// (`latency`'s exploration share).
    pub explored: bool,
    /// Recent time to first token (streams) or latency, in ms; none
    /// before the first answer.
    pub latency_ms: Option<f64>,
    /// Requests in flight to the provider.
    pub in_flight: Option<u32>,
    /// The estimated cost of this request at the provider's prices.
    pub usd: Option<f64>,
    /// The provider's weight in the chain.
    pub weight: Option<u32>,
}

impl Routing {
    /// Nothing weighed yet: the strategy fills in its figures.
    pub fn by(strategy: Strategy) -> Routing {
        Routing { strategy, rank: 0, explored: false, latency_ms: None, in_flight: None, usd: None, weight: None }
    }

    /// A line for a person: `latency, 1st: 212 ms`. Made when a row is
    /// read, never while a request is routed.
    pub fn describe(&self) -> String {
        let mut text = format!("{}, #{}", self.strategy, self.rank + 1);
        let mut figure = |label: &str, value: String| {
            text.push_str(if text.contains(':') { ", " } else { ": " });
            text.push_str(label);
            text.push_str(&value);
        };
        if self.explored {
            figure("", "exploring".into());
        }
        if let Some(ms) = self.latency_ms {
            figure("", format!("{ms:.0} ms"));
        }
        if let Some(n) = self.in_flight {
            figure("", format!("{n} in flight"));
        }
        if let Some(usd) = self.usd {
            figure("$", format!("{usd:.6}"));
        }
        if let Some(w) = self.weight {
            figure("weight ", w.to_string());
        }
        text
    }
}
