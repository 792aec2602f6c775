//! `cheapest`: the provider whose prices make this request cheapest first,
//! by the price table and the request's estimated tokens. With a latency
//! bound (`max_latency`), providers recently slower than it come after
//! every provider within it, whatever their price; providers without a
//! price come last. Ties keep chain order.

use super::{Ask, Routing, Strategy};
use crate::protocol::usage::Usage;
use crate::upstream::routing::Candidate;

pub fn order(candidates: &mut [Candidate<'_>], ask: &Ask<'_>) {
    let usage = Usage {
        input_tokens: Some(ask.input_tokens),
        output_tokens: Some(ask.output_tokens),
        cached_tokens: None,
        cache_write_tokens: None,
    };
    for c in candidates.iter_mut() {
        let usd = ask.prices.and_then(|p| p.cost(c.provider.name(), c.upstream_model, &usage));
        let latency_ms = c.provider.recent().ms(ask.streamed);
        c.routing = Some(Routing { usd, latency_ms, ..Routing::by(Strategy::Cheapest) });
    }
    let bound = ask.max_latency.map(|d| d.as_secs_f64() * 1000.0);
    candidates.sort_by(|a, b| {
        let (ka, kb) = (key(a, bound), key(b, bound));
        ka.0.cmp(&kb.0).then(ka.1.total_cmp(&kb.1))
    });
}

/// Too slow (a bound is set and passed), then no price, then the price.
/// Never measured is within the bound: it has to be tried to be measured.
fn key(c: &Candidate<'_>, bound: Option<f64>) -> (u8, f64) {
    let r = c.routing.unwrap_or(Routing::by(Strategy::Cheapest));
    let slow = matches!((bound, r.latency_ms), (Some(b), Some(ms)) if ms > b);
    match (slow, r.usd) {
        (true, _) => (2, r.usd.unwrap_or(f64::INFINITY)),
        (false, None) => (1, 0.0),
        (false, Some(usd)) => (0, usd),
    }
}
