//! The first stage: a request admitted, or refused before any provider
//! is considered. Who sends it (the owner, or a member by their key), its
//! body read within the limits and looked at, and a member's limits and
//! budget taken.

use std::time::Duration;

use axum::body::Body;
use axum::http::{header, HeaderMap, Response};
use axum::response::IntoResponse;
use bytes::Bytes;
use http_body_util::{BodyExt, LengthLimitError, Limited};

use super::body::{self, BodyError, RequestHead};
use super::journal::Journal;
use super::Inbound;
use crate::gateway::{Gateway, Live};
use crate::ground::clock::now_ms;
use crate::members::gate::{across_team, AcrossTeam, Refusal};
use crate::members::spend::MemberHold;
use crate::members::Member;
use crate::protocol::error::{ApiError, ErrorCode};
use crate::protocol::usage::Usage;
use crate::session::Session;
use crate::upstream::routing;

/// A request let in: its body, what it asks, the conversation it is part
/// of, and its rough size in tokens (for the token buckets and prices;
/// providers count the real thing).
pub(super) struct Admitted {
    pub bytes: Bytes,
    pub head: RequestHead,
    pub session: Option<Session>,
    pub tokens: u64,
}

/// The member whose key the request carries (`None`: the owner, or a
/// gateway without members), or why it is refused.
pub(super) async fn identify(gateway: &Gateway, inbound: &Inbound) -> Result<Option<Member>, Refusal> {
    let token = crate::http::guard::client_token(&inbound.headers, inbound.uri.query());
    let members = gateway.members();
    let who = members.identify(gateway.store(), token.as_deref(), gateway.access_token(), inbound.peer, now_ms()).await;
    // A member read just now (its key was new to the copy) brings its budget.
    gateway.apply_member_budgets();
    who
}

/// The device a member's joined gateway names (`x-switchyard-device`),
/// when it is one a filter can match; recorded beside the member only.
pub(super) fn device(inbound: &Inbound) -> Option<&str> {
    let device = inbound.headers.get(crate::ground::headers::name::X_SWITCHYARD_DEVICE)?.to_str().ok()?;
    crate::config::valid_device(device).then_some(device)
}

/// A member refusal, on record (with no upstream call, as the member's
/// when the key was one) and in the client's protocol.
pub(super) async fn refuse(inbound: &Inbound, mut journal: Journal, refusal: &Refusal) -> Response<Body> {
    if let Some(name) = refusal.member() {
        journal.member(name, device(inbound));
    }
    let error = refusal.in_protocol(inbound.endpoint.protocol());
    journal.finish_error(&error).await;
    error.into_response()
}

/// Reads and looks at the body, and takes what a member's request needs
/// of its limits and budget (the hold goes with the request's record).
pub(super) async fn request(
    gateway: &Gateway,
    live: &Live,
    inbound: &Inbound,
    body: Body,
    member: Option<&Member>,
    journal: &mut Journal,
) -> Result<Admitted, ApiError> {
    let protocol = inbound.endpoint.protocol();
    let server = &live.config.server;
    let bytes = read_body(body, &inbound.headers, server.max_body_bytes, server.body_timeout)
        .await
        .map_err(|e| e.in_protocol(protocol))?;
    let inspected = match &inbound.path_model {
        Some(model) => body::inspect_with_model(&bytes, model, inbound.endpoint.streams()),
        None => body::inspect(&bytes),
    };
    let head = inspected.map_err(|e| {
        let code = match e {
            BodyError::Malformed(_) => ErrorCode::InvalidJson,
            BodyError::MissingModel => ErrorCode::InvalidRequest,
        };
        ApiError::new(protocol, code, e.to_string())
    })?;
    journal.request(&head.model, head.stream, &bytes);
    let session = crate::session::identify(&inbound.headers, &head.conversation, &bytes);
    journal.session(session.as_ref(), head.conversation.turn());
    let tokens = (bytes.len() / 4) as u64;
    if let Some(m) = member {
        gateway.members().check(m, &head.model, tokens, gateway.share()).map_err(|r| r.in_protocol(protocol))?;
        // Only a budget reserves it: pricing plans the route, which a
        // member without one need not pay for on every request.
        let estimate = match m.budget {
            Some(_) => estimate_usd(gateway, live, inbound, &head, tokens),
            None => 0.0,
        };
        let hold = member_admit(gateway, m, tokens, estimate).await;
        journal.member_hold(hold.map_err(|r| r.in_protocol(protocol))?);
    }
    Ok(Admitted { bytes, head, session, tokens })
}

/// What a request may cost, for its member's budget to reserve: its prompt
/// and its output limit at the dearest of its candidates' prices, as an
/// attempt reserves at its own provider's (0 when unpriced or unrouted).
fn estimate_usd(gateway: &Gateway, live: &Live, inbound: &Inbound, head: &RequestHead, tokens: u64) -> f64 {
    let Some(prices) = gateway.sink().map(|s| &s.prices) else { return 0.0 };
    let Ok(plan) = routing::plan(&live.providers, &live.config.routes, inbound.endpoint, &head.model) else {
        return 0.0;
    };
    let usage = Usage {
        input_tokens: Some(tokens),
        output_tokens: head.max_output,
        cached_tokens: None,
        cache_write_tokens: None,
    };
    plan.candidates.iter().filter_map(|c| prices.cost(c.provider.name(), c.upstream_model, &usage)).fold(0.0, f64::max)
}

/// Whether `member` may make a request of about `tokens` tokens costing
/// about `estimate_usd` now: its budget (with what its requests in flight
/// reserve) and, in a team, its requests and tokens a minute across the
/// team. The hold goes with the request's record.
async fn member_admit(
    gateway: &Gateway,
    member: &Member,
    tokens: u64,
    estimate_usd: f64,
) -> Result<MemberHold, Refusal> {
    let mut hold = MemberHold::new(gateway.telemetry().clone(), tokens);
    let team = gateway.team().as_ref();
    // The member's budget counter, built only when the team asks for it.
    let mut counter = Vec::new();
    let count = || gateway.budgets().member_counter(&member.name, estimate_usd, now_ms());
    let mut answer = across_team(team, member, tokens, &mut counter, count).await?;
    if let AcrossTeam::Unseeded(missing) = &answer {
        gateway.seed_team_spend(&counter, missing).await;
        answer = across_team(team, member, tokens, &mut counter, count).await?;
    }
    match answer {
        AcrossTeam::Granted(held) => {
            hold.hold_team(held);
            if !counter.is_empty() {
                return Ok(hold);
            }
        }
        AcrossTeam::Alone(held) => hold.hold_team(held),
        AcrossTeam::Unseeded(_) => {}
    }
    // Alone, Redis out of reach, or a counter that could not be seeded.
    match gateway.budgets().reserve(&member.name, estimate_usd, now_ms()) {
        Ok(reserved) => {
            hold.hold_local(reserved);
            Ok(hold)
        }
        Err(blocked) => Err(Refusal::over_budget(&member.name, &blocked)),
    }
}

#[derive(Debug)]
pub(crate) enum ReadError {
    TooLarge(usize),
    Broken(String),
    TooSlow(Duration),
}

impl ReadError {
    pub(crate) fn in_protocol(self, protocol: crate::protocol::Protocol) -> ApiError {
        match self {
            ReadError::TooLarge(limit) => ApiError::new(
                protocol,
                ErrorCode::BodyTooLarge,
                format!("request body exceeds the gateway's limit of {limit} bytes (server.max_body_bytes)"),
            ),
            ReadError::TooSlow(limit) => ApiError::new(
                protocol,
                ErrorCode::BodyTimeout,
                format!(
                    "the request body did not arrive within {} (server.body_timeout)",
                    humantime::format_duration(limit)
                ),
            ),
            ReadError::Broken(reason) => {
                ApiError::new(protocol, ErrorCode::InvalidRequest, format!("could not read the request body: {reason}"))
            }
        }
    }
}

pub(crate) async fn read_body(
    body: Body,
    headers: &HeaderMap,
    limit: usize,
    within: Duration,
) -> Result<Bytes, ReadError> {
    let declared =
        headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(ReadError::TooLarge(limit));
    }
    let collected = tokio::time::timeout(within, Limited::new(body, limit).collect()).await;
    match collected.map_err(|_| ReadError::TooSlow(within))? {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => Err(ReadError::TooLarge(limit)),
        Err(e) => Err(ReadError::Broken(e.to_string())),
    }
}
