//! The second stage: what answers the request and in what order. A token
//! count answered here, a cached answer, or the chain of candidates in the
//! order the route's strategy and the request's session give them.

use axum::body::Body;
use axum::http::Response;
use tokio::time::Instant;

use super::admit::Admitted;
use super::body::RequestHead;
use super::{wire, Inbound};
use crate::gateway::{Gateway, Live};
use crate::policy::RequestPolicy;
use crate::protocol::error::{ApiError, ErrorCode};
use crate::protocol::translate::error as translate_error;
use crate::protocol::Endpoint;
use crate::upstream::routing::{self, Candidate, RouteError};
use crate::upstream::strategy::{self, Ask, RouteState, Strategy};

/// The candidates in the order they are tried, where the route counts
/// which one answered, and the provider the session's stick put first.
pub(super) struct Planned<'l> {
    pub candidates: Vec<Candidate<'l>>,
    pub route: &'l RouteState,
    pub stuck: Option<String>,
    /// The joined team's gateway, when the team allows no other.
    pub team_alone: Option<String>,
}

/// Plans `request`'s chain: the model's route (or its providers), cut to
/// the one provider a replay names, in the strategy's order, with the
/// session's provider first where it sticks.
pub(super) fn chain<'l>(
    gateway: &Gateway,
    live: &'l Live,
    inbound: &Inbound,
    request: &'l Admitted,
    policy: &RequestPolicy,
) -> Result<Planned<'l>, ApiError> {
    let head = &request.head;
    let mut plan = routing::plan(&live.providers, &live.config.routes, inbound.endpoint, &head.model).map_err(|e| {
        let code = match e {
            RouteError::UnknownModel(_) => ErrorCode::ModelNotFound,
            RouteError::NoneAvailable { .. } => ErrorCode::NoProviderAvailable,
        };
        ApiError::new(inbound.endpoint.protocol(), code, e.to_string())
    })?;
    gateway.capture_switch().pin(&inbound.ids.request_id, &mut plan.candidates);
    let route = route_in_order(gateway, live, head, policy, request.tokens, &mut plan.candidates);
    let steering = request.session.as_ref().filter(|s| s.steers());
    let stuck = steering.and_then(|s| stick_first(gateway, s, policy, &mut plan.candidates));
    let team_alone = team_first(&mut plan.candidates, &head.model);
    Ok(Planned { candidates: plan.candidates, route, stuck, team_alone })
}

/// Puts a joined team's gateway first, whatever the strategy or the
/// session said: the member's requests are the team's. When the team
/// allows no fallback to this gateway's own providers, the chain is the
/// team's gateway alone; its name is returned then. The team's word as
/// last heard ([`crate::upstream::provider::TeamWord`]) is over the one
/// written at joining: a model it no longer offers is not its to serve.
fn team_first(candidates: &mut Vec<Candidate<'_>>, model: &str) -> Option<String> {
    let at = candidates.iter().position(|c| c.provider.config.joined.is_some())?;
    let joined = candidates[at].provider.config.joined.as_ref()?;
    let word = candidates[at].provider.team_word();
    if word.as_ref().is_some_and(|w| !w.offers(model)) {
        candidates.remove(at);
        return None;
    }
    let allow = word.map_or(joined.allow_local_fallback, |w| w.allow_local_fallback);
    candidates[..=at].rotate_right(1);
    if allow || candidates.len() == 1 {
        return None;
    }
    candidates.truncate(1);
    Some(candidates[0].provider.name().to_string())
}

/// Puts the provider `session` sticks to ([`crate::policy::stick`]) first,
/// when the chain has it and it is not first already; returns its name.
fn stick_first(
    gateway: &Gateway,
    session: &crate::session::Session,
    policy: &RequestPolicy,
    candidates: &mut [Candidate<'_>],
) -> Option<String> {
    let provider = gateway.conversations().stuck_to(&session.id, policy.session_stick, Instant::now())?;
    let at = candidates.iter().position(|c| c.provider.name() == provider).filter(|&i| i > 0)?;
    candidates[..=at].rotate_right(1);
    Some(provider)
}

/// Output tokens a request that sets no limit is priced for, by `cheapest`.
const ASSUMED_OUTPUT_TOKENS: u64 = 500;

/// Puts `candidates` in the order `model`'s strategy gives them for this
/// request; returns the state its answer is counted in.
fn route_in_order<'l>(
    gateway: &Gateway,
    live: &'l Live,
    head: &RequestHead,
    policy: &RequestPolicy,
    tokens: u64,
    candidates: &mut [Candidate<'_>],
) -> &'l RouteState {
    let (route, state) = match live.route(&head.model) {
        Some((route, state)) => (Some(route), state),
        None => (None, &live.unrouted),
    };
    if policy.strategy == Strategy::Ordered {
        return state;
    }
    let ask = Ask {
        strategy: policy.strategy,
        streamed: head.stream,
        input_tokens: tokens,
        output_tokens: head.max_output.unwrap_or(ASSUMED_OUTPUT_TOKENS),
        prices: gateway.sink().map(|s| &*s.prices),
        max_latency: policy.max_latency,
        turn: state.turns.next(),
        schedule: route.and_then(|r| r.schedule.as_ref()),
    };
    strategy::order(candidates, &ask);
    state
}

/// A token count answered here, or why its body cannot be read.
type Counted = Result<Response<Body>, translate_error::Untranslatable>;

/// A token count for a model no provider of the counting API's own kind
/// serves, answered from a local estimate; `None` when one does (it then
/// counts, as any request is served).
pub(super) fn count_locally(live: &Live, inbound: &Inbound, body: &[u8], head: &RequestHead) -> Option<Counted> {
    let counts = is_count(inbound.endpoint)
        && routing::plan(&live.providers, &live.config.routes, inbound.endpoint, &head.model).is_ok();
    if counts {
        return None;
    }
    estimate_count(live, inbound, body, head)
}

/// A local estimate for a token count, when some provider serves the model.
pub(super) fn estimate_count(live: &Live, inbound: &Inbound, body: &[u8], head: &RequestHead) -> Option<Counted> {
    if !is_count(inbound.endpoint) {
        return None;
    }
    let any = routing::plan(&live.providers, &live.config.routes, Endpoint::Messages, &head.model).is_ok();
    any.then(|| wire::estimated_count(inbound.endpoint, body, head))
}

fn is_count(endpoint: Endpoint) -> bool {
    matches!(endpoint, Endpoint::CountTokens | Endpoint::GeminiCountTokens)
}
