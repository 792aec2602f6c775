//! Routing strategies: the order in which one request meets its chain.
//!
//! A strategy only orders the candidates a plan holds; everything after
//! that is the chain walk's, as for the `ordered` chain it replaces: the
//! deadline, retries, breakers, cool-downs, budgets, the fallback share
//! and skipped attempts with their reasons. A candidate the strategy puts
//! first that fails is followed by the next in the strategy's order.
//!
//! - [`ordered`]: the chain as written (the default).
//! - [`latency`]: lowest recent time to first token (streams) or latency
//!   (whole answers), with a small share sent elsewhere to notice recovery.
//! - [`least_busy`]: fewest requests in flight, ties by latency.
//! - [`cheapest`]: lowest price for the request's estimated tokens, among
//!   providers within a latency bound when one is set.
//! - [`weighted`]: shares by weight, in a smooth weighted round-robin.
//!
//! Each candidate keeps what the strategy weighed for it ([`Routing`]):
//! figures, not text, so that deciding costs a few hundred nanoseconds;
//! the history formats them when they are read.

pub(crate) mod cheapest;
pub(crate) mod latency;
pub(crate) mod least_busy;
pub(crate) mod ordered;
mod split;
pub(crate) mod weighted;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::history::pricing::Prices;
use crate::upstream::routing::Candidate;

pub use crate::policy::order::{Routing, Schedule, Strategy};
pub use crate::upstream::recent::Recent;
pub use split::{RouteState, Share, SPLIT_WINDOW};

/// What a strategy may weigh about the request being routed.
#[derive(Debug, Clone, Copy)]
pub struct Ask<'a> {
    pub strategy: Strategy,
    /// A stream is judged by time to first token, a whole answer by latency.
    pub streamed: bool,
    /// Estimated prompt and output tokens, for prices.
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub prices: Option<&'a Prices>,
    /// `cheapest`: only providers this fast (recently) go by price first.
    pub max_latency: Option<Duration>,
    /// This request's turn on its route: the counter `latency` explores
    /// by and `weighted` goes round by.
    pub turn: u64,
    /// `weighted`: the route's round, a chain position per turn; none for
    /// a chain without weights (every provider weighs 1).
    pub schedule: Option<&'a Schedule>,
}

/// Orders `candidates` for one request, and notes on each what was
/// weighed. `ordered` leaves them, and their notes, as planned.
pub fn order(candidates: &mut [Candidate<'_>], ask: &Ask<'_>) {
    match ask.strategy {
        Strategy::Ordered => ordered::order(candidates),
        Strategy::Latency => latency::order(candidates, ask),
        Strategy::LeastBusy => least_busy::order(candidates, ask),
        Strategy::Cheapest => cheapest::order(candidates, ask),
        Strategy::Weighted => weighted::order(candidates, ask),
    }
    if ask.strategy != Strategy::Ordered {
        for (rank, c) in candidates.iter_mut().enumerate() {
            if let Some(r) = &mut c.routing {
                r.rank = u32::try_from(rank).unwrap_or(u32::MAX);
            }
        }
    }
}

/// Counts a route's requests: each takes the next turn.
#[derive(Debug, Default)]
pub struct Turns(AtomicU64);

impl Turns {
    pub fn next(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests;
