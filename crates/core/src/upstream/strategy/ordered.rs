//! `ordered`: the chain as written. The first usable provider takes the
//! traffic; the others wait for it to fail. Nothing is weighed, so
//! nothing is noted: an attempt without routing was routed in chain order.

use crate::upstream::routing::Candidate;

pub fn order(candidates: &mut [Candidate<'_>]) {
    for c in candidates {
        c.routing = None;
    }
}
