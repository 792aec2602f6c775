//! `latency`: the provider with the lowest recent time to first token
//! (streams) or latency (whole answers) first, the others after it by the
//! same measure. A provider never measured goes first, to be measured.
//!
//! One request in [`EXPLORE_EVERY`] puts another provider first instead,
//! in turn: the chosen one's figures stay fresh because it takes the
//! traffic, and this keeps the others' fresh too, so one that has
//! recovered is noticed.

use super::{Ask, Routing, Strategy};
use crate::upstream::routing::Candidate;

/// One request in this many explores: 5% of the traffic.
pub const EXPLORE_EVERY: u64 = 20;

pub fn order(candidates: &mut [Candidate<'_>], ask: &Ask<'_>) {
    for c in candidates.iter_mut() {
        let latency_ms = c.provider.recent().ms(ask.streamed);
        c.routing = Some(Routing { latency_ms, ..Routing::by(Strategy::Latency) });
    }
    // Stable: equal figures keep chain order.
    candidates.sort_by(|a, b| key(a).total_cmp(&key(b)));
    explore(candidates, ask.turn);
}

/// The figure sorted by: never measured sorts first.
pub(super) fn key(c: &Candidate<'_>) -> f64 {
    c.routing.and_then(|r| r.latency_ms).unwrap_or(f64::NEG_INFINITY)
}

/// On every [`EXPLORE_EVERY`]th turn, moves one of the others to the
/// front, each in turn.
fn explore(candidates: &mut [Candidate<'_>], turn: u64) {
    let others = candidates.len().saturating_sub(1) as u64;
    if others == 0 || turn % EXPLORE_EVERY != EXPLORE_EVERY - 1 {
        return;
    }
    let pick = 1 + usize::try_from((turn / EXPLORE_EVERY) % others).unwrap_or(0);
    candidates[..=pick].rotate_right(1);
    if let Some(r) = &mut candidates[0].routing {
        r.explored = true;
    }
}
