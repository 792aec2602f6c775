//! `weighted`: each provider takes its weight's share of the requests
//! (`chain = [{ provider = "a", weight = 9 }, { provider = "b", weight = 1 }]`),
//! in a smooth weighted round-robin worked out when the config was read
//! ([`super::Schedule`]): exact over every round, and interleaved, so a
//! small share is not served in bursts. The provider whose turn it is goes
//! first, the others after it in chain order. A chain without weights
//! goes round its providers in turn.
//!
//! A turn whose provider the plan left out (disabled, no key) goes to the
//! first in chain order, as `ordered` would send it.

use super::{Ask, Routing, Strategy};
use crate::upstream::routing::Candidate;

pub fn order(candidates: &mut [Candidate<'_>], ask: &Ask<'_>) {
    for c in candidates.iter_mut() {
        let weight = ask.schedule.map_or(Some(1), |s| s.weight(c.position));
        c.routing = Some(Routing { weight, ..Routing::by(Strategy::Weighted) });
    }
    let due = match ask.schedule {
        Some(schedule) => schedule.position(ask.turn).and_then(|p| candidates.iter().position(|c| c.position == p)),
        None => usize::try_from(ask.turn % candidates.len().max(1) as u64).ok(),
    };
    if let Some(at) = due.filter(|at| *at < candidates.len()) {
        candidates[..=at].rotate_right(1);
    }
}
