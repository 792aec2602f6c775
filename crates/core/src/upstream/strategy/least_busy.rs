//! `least_busy`: the provider with the fewest requests in flight from
//! this gateway first, ties broken by recent latency (then chain order).
//! In flight is the concurrency permit count the provider's capacity
//! keeps anyway: held from admission until the answer has been relayed.

use super::{Ask, Routing, Strategy};
use crate::upstream::routing::Candidate;

pub fn order(candidates: &mut [Candidate<'_>], ask: &Ask<'_>) {
    for c in candidates.iter_mut() {
        let in_flight = u32::try_from(c.provider.capacity().in_use()).unwrap_or(u32::MAX);
        let latency_ms = c.provider.recent().ms(ask.streamed);
        c.routing = Some(Routing { in_flight: Some(in_flight), latency_ms, ..Routing::by(Strategy::LeastBusy) });
    }
    candidates.sort_by(|a, b| load(a).cmp(&load(b)).then(super::latency::key(a).total_cmp(&super::latency::key(b))));
}

fn load(c: &Candidate<'_>) -> u32 {
    c.routing.and_then(|r| r.in_flight).unwrap_or(0)
}
