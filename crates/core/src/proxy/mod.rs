//! The proxied request path: read and inspect the body, plan the provider
//! chain, then try each candidate under one deadline, with retries, the
//! breaker and the guardrails, and relay the first acceptable answer.

mod admit;
pub(crate) mod attempt;
pub(crate) mod body;
pub(crate) mod cached;
pub(crate) mod capture;
mod chain;
pub(crate) mod headers;
mod hedge;
pub(crate) mod journal;
mod line;
mod plan;
mod provider;
pub(crate) mod redact;
pub(crate) mod relay;
pub(crate) mod repair;
mod resume;
pub(crate) mod scrub;
pub(crate) mod thinking;
mod turn;
pub(crate) mod wire;

use std::fmt::Write as _;
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, HeaderMap, Method, Request, Response, Uri};
use axum::response::IntoResponse;
use bytes::Bytes;
use http_body_util::Full;
use tokio::time::Instant;
use tracing::{debug, warn};

use crate::gateway::Gateway;
use crate::ground::outcome::Reason;
use crate::http::correlation::RequestIds;
use crate::policy::backoff;
use crate::policy::budget::Blocked;
use crate::policy::classify::Outcome;
use crate::policy::deadline::Deadline;
use crate::policy::step::{Facts, Keys, Repairs};
use crate::policy::RequestPolicy;
use crate::protocol::error::{ApiError, ErrorCode};
use crate::protocol::translate::error::{self as translate_error, Untranslatable};
use crate::protocol::translate::passthrough::Scrub;
use crate::protocol::{Endpoint, Protocol};
use crate::secrets::ProviderKey;
use crate::upstream::provider::Provider;
use crate::upstream::routing::Candidate;
use crate::upstream::strategy::RouteState;
use body::RequestHead;
use journal::{Journal, Skip};
use scrub::OnDemand;

/// One proxied request, as the handler received it.
#[derive(Debug, Clone)]
pub struct Inbound {
    pub endpoint: Endpoint,
    /// The model, for an endpoint whose path names it (Gemini's).
    pub path_model: Option<String>,
    pub ids: RequestIds,
    pub headers: HeaderMap,
    pub uri: Uri,
    /// The client's address, for the per-address limit on wrong keys.
    pub peer: Option<std::net::IpAddr>,
}

pub async fn handle(gateway: &Gateway, inbound: Inbound, body: Body) -> Response<Body> {
    gateway.count_served();
    let user_agent = inbound.headers.get(header::USER_AGENT).and_then(|v| v.to_str().ok());
    let mut journal = Journal::start(
        gateway.sink().cloned(),
        gateway.telemetry().clone(),
        &inbound.ids.request_id,
        &inbound.ids.correlation_id,
        inbound.endpoint.gateway_path(),
        user_agent,
        gateway.instance(),
    )
    .with_trace(gateway.tracer().begin(&inbound.headers));
    if let Some(ids) = journal.trace_ids() {
        // The request's log lines name its trace beside its correlation id.
        let span = tracing::Span::current();
        span.record("trace_id", tracing::field::display(ids.trace_id));
        span.record("span_id", tracing::field::display(ids.span_id));
    }
    capture::begin(gateway, &inbound, &mut journal);
    capture::begin_span_content(gateway, &inbound, &mut journal);
    let member = match admit::identify(gateway, &inbound).await {
        Ok(member) => member,
        Err(refusal) => return admit::refuse(&inbound, journal, &refusal).await,
    };
    if let Some(m) = &member {
        journal.member(&m.name, admit::device(&inbound));
    }
    match serve(gateway, &inbound, body, member.as_ref(), &mut journal).await {
        Ok(response) => response,
        Err(error) => {
            journal.finish_error(&error).await;
            // Nothing answered: the error as a problem document SDKs still parse.
            if error.code.is_exhausted() {
                crate::cache::problem(&error, Some(&inbound.ids.request_id))
            } else {
                error.into_response()
            }
        }
    }
}

/// The stages in order: admitted ([`admit`]), planned ([`plan`]), the
/// chain walked ([`chain`], each provider by [`provider`], each attempt by
/// [`attempt`]), the answer delivered ([`relay`]) and recorded
/// ([`journal`]); what answers when the chain cannot comes last.
async fn serve(
    gateway: &Gateway,
    inbound: &Inbound,
    body: Body,
    member: Option<&crate::members::Member>,
    journal: &mut Journal,
) -> Result<Response<Body>, ApiError> {
    let protocol = inbound.endpoint.protocol();
    let started = Instant::now();
    let live = gateway.live();
    let request = admit::request(gateway, &live, inbound, body, member, journal).await?;
    let (head, bytes) = (&request.head, &request.bytes);
    if let Some(response) = plan::count_locally(&live, inbound, bytes, head) {
        let response = response.map_err(|e| ApiError::new(protocol, ErrorCode::InvalidRequest, e.to_string()))?;
        journal.take().finish_local(response.status()).await;
        return Ok(response);
    }
    let policy = live.config.request_policy(&head.model);
    let deadline = Deadline::for_request(&inbound.headers, policy.deadline, started);
    let mut cached = cached::Cached::plan(gateway.cache(), gateway.team(), &live.config, inbound, head, bytes);
    if let Some(c) = &mut cached {
        // An identical request in flight is waited for, but only for half
        // of what is left of the deadline: should its answer not come (its
        // request failed, its instance died), this one still has the time
        // to ask a provider itself.
        let now = tokio::time::Instant::now();
        let wait_until = now + deadline.at.saturating_duration_since(now) / 2;
        if let Some(hit) = c.lookup(journal, wait_until).await {
            return Ok(hit);
        }
    }
    let planned = plan::chain(gateway, &live, inbound, &request, policy)?;
    let mut run = Run {
        gateway,
        inbound,
        head,
        body: bytes,
        policy,
        deadline,
        tokens: request.tokens,
        route: planned.route,
        attempts: 0,
        notes: String::new(),
        out_of_time: false,
        refused: Vec::new(),
        journal,
        last_failed: None,
        backoff: Duration::ZERO,
        scrub: OnDemand::new(gateway, &live.providers, &inbound.headers, inbound.uri.query()),
        cached: cached.as_ref(),
        budget: None,
        // Only a session that steers is kept on its key and provider.
        session: request.session.as_ref().filter(|s| s.steers()),
        partner: None,
        lineup: if planned.candidates.iter().any(|c| resume::resumes(policy, c.provider)) {
            planned.candidates.iter().map(|c| (c.provider.name().to_string(), c.upstream_model.to_string())).collect()
        } else {
            Vec::new()
        },
    };
    if let Some(provider) = &planned.stuck {
        run.note(provider, "tried first: it served this session last, after a fallback");
    }
    if let Some(team) = &planned.team_alone {
        run.note(team, "the team allows no fallback to this gateway's own providers");
    }
    if let Some(response) = run.chain(&planned.candidates).await {
        return Ok(response);
    }
    let error = run.exhausted(protocol, planned.candidates.len());
    // Every provider that counts failed (an Anthropic one down while the
    // chain's others serve the model): the count is estimated, labelled so,
    // as when no provider counts at all. Claude Code counts constantly.
    if let Some(Ok(response)) = plan::estimate_count(&live, inbound, bytes, head) {
        journal.take().finish_local(response.status()).await;
        return Ok(response);
    }
    if let Some(c) = &mut cached {
        if let Some(stale) = c.stale(journal).await {
            return Ok(stale);
        }
        c.count_live();
    }
    if let Some(fallback) = live.config.fallback_response(&head.model) {
        journal.take().finish_error(&error).await;
        return Ok(fallback.response(error.attempts));
    }
    Err(error)
}

/// How one provider's turn ended.
enum Tried {
    Answered(Response<Body>),
    Failed,
    /// Passed over without an attempt (breaker open, cooling down).
    Passed,
    /// Passed over for what the request asks: the provider cannot take it
    /// (tools it lacks, state it does not keep), now or later.
    Refused(Untranslatable),
    /// Passed over for want of capacity (full, its keys all leased, others
    /// queued): its queue may take the request.
    Busy,
}

/// One request's progress through its chain.
struct Run<'a> {
    gateway: &'a Gateway,
    inbound: &'a Inbound,
    head: &'a RequestHead,
    body: &'a Bytes,
    policy: &'a RequestPolicy,
    deadline: Deadline,
    tokens: u64,
    /// Where the route counts which provider answered.
    route: &'a RouteState,
    attempts: u32,
    notes: String,
    out_of_time: bool,
    /// Why providers could not take the request at all, in chain order.
    refused: Vec<Untranslatable>,
    journal: &'a mut Journal,
    /// The last provider that was tried and failed: the next one is a fallback.
    last_failed: Option<String>,
    /// Slept since the last attempt (backoff or throttle).
    backoff: Duration,
    /// Secrets to take out of upstream error text, gathered at the first failure.
    scrub: OnDemand<'a>,
    /// What the response cache does for this request.
    cached: Option<&'a cached::Cached>,
    /// Candidates a budget kept from being tried, and the budget that
    /// allows them again last.
    budget: Option<(usize, Blocked)>,
    /// The conversation this request is part of ([`crate::session`]),
    /// when it steers routing.
    session: Option<&'a crate::session::Session>,
    /// What became of the chain's next candidate in the turn just taken,
    /// when it was started as a hedge.
    partner: Option<hedge::PartnerTurn>,
    /// The chain's providers and upstream models in order, when a stream
    /// may be resumed at the next ([`resume`]); empty otherwise.
    lineup: Vec<(String, String)>,
}

impl Run<'_> {
    fn note(&mut self, provider: &str, what: &str) {
        let ids = &self.inbound.ids;
        match self.journal.trace_ids() {
            Some(t) => warn!(
                provider,
                request_id = %ids.request_id,
                correlation_id = %ids.correlation_id,
                trace_id = %t.trace_id,
                span_id = %t.span_id,
                "{what}"
            ),
            None => warn!(provider, request_id = %ids.request_id, correlation_id = %ids.correlation_id, "{what}"),
        }
        // A breaker open, a cool-down, a share or a limit: an event on the request's span.
        self.journal.passed(provider, what.trim());
        if !self.notes.is_empty() {
            self.notes.push_str("; ");
        }
        let _ = write!(self.notes, "{provider}: {}", what.trim());
    }

    /// Passes `candidate` over without calling it, on record as a skipped
    /// attempt that says `why`. For what the request is (a field the
    /// provider cannot be sent, tools it lacks) or what a policy forbids;
    /// not for the provider's passing state (breaker, capacity), which its
    /// own events report. No breaker outcome, retry or fallback share is
    /// spent, and the next provider is no fallback from this one.
    fn skip(&mut self, candidate: &Candidate<'_>, why: String) {
        let provider = candidate.provider.name();
        self.note(provider, &format!("not tried: {why}"));
        let fallback_from = self.last_failed.clone();
        self.journal.skip(Skip {
            provider: provider.to_string(),
            model: candidate.upstream_model.to_string(),
            reason: if fallback_from.is_some() { Reason::Fallback } else { Reason::First },
            fallback_from,
            why,
            routing: candidate.routing,
        });
    }

    /// A budget keeps `candidate` from being tried: a skipped attempt, and
    /// remembered for the error if nothing else can serve.
    fn blocked(&mut self, candidate: &Candidate<'_>, blocked: Blocked) {
        self.skip(candidate, blocked.to_string());
        self.budget = match self.budget.take() {
            Some((n, last)) if last.resets_at_ms >= blocked.resets_at_ms => Some((n + 1, last)),
            Some((n, _)) => Some((n + 1, blocked)),
            None => Some((1, blocked)),
        };
    }

    /// The client's request as the repair step sees it.
    fn client(&self) -> (Endpoint, Option<&str>, &Bytes, &RequestHead) {
        (self.inbound.endpoint, self.inbound.path_model.as_deref(), self.body, self.head)
    }

    /// What goes to `candidate`: the request translated to its format, or
    /// the client's own, scrubbed of envelopes; or why it cannot go at all.
    fn outgoing(&self, candidate: &Candidate<'_>) -> Result<repair::Outgoing, Untranslatable> {
        let provider = candidate.provider;
        let endpoint = self.inbound.endpoint;
        if provider.config.joined.is_some() {
            // As the client sent it: the team's gateway scrubs, clamps and
            // translates for its own providers.
            return Ok(repair::Outgoing::default());
        }
        if provider.config.speaks(endpoint) {
            // Only a provider without tools costs the native body a look.
            if !provider.config.profile.tools && body::carries_tools(self.body) {
                return Err(Untranslatable::new("tools", translate_error::NO_TOOLS));
            }
            return Ok(self.native(candidate));
        }
        let profile = provider.profile();
        let session = self.session.map(|s| s.id.as_str());
        let translated = wire::translate(
            endpoint,
            (self.head, self.body),
            &provider.config,
            &profile,
            candidate.upstream_model,
            session,
        )?;
        Ok(repair::Outgoing { translated, ..repair::Outgoing::default() })
    }

    /// The client's own body for a provider that speaks its format: the
    /// reasoning it cannot verify taken out, an output limit above the
    /// model's lowered; each change said on the attempt.
    fn native(&self, candidate: &Candidate<'_>) -> repair::Outgoing {
        let provider = candidate.provider;
        let (endpoint, path_model) = (self.inbound.endpoint, self.inbound.path_model.as_deref());
        let owners = thinking::Owners::of(self.gateway, self.session, provider);
        let made_here = |raw: &str| owners.made_here(raw);
        let scrub = if owners.mixed() { Scrub::Foreign(&made_here) } else { Scrub::Envelopes };
        let mut native = wire::scrubbed(endpoint, path_model, self.body, scrub);
        let mut removed = Vec::new();
        // Said only when raw blocks went, not envelopes alone: the body
        // is scrubbed again as usual to tell (rare: the session moved).
        if let (Some((sent, _)), Scrub::Foreign(_)) = (&native, scrub) {
            let usual = wire::scrubbed(endpoint, path_model, self.body, Scrub::Envelopes);
            if usual.as_ref().map_or(&self.body[..], |(b, _)| &b[..]) != &sent[..] {
                removed.push(thinking::REMOVED.to_string());
            }
        }
        let (body, head) = native.as_ref().map_or((&self.body[..], self.head), |(b, h)| (&b[..], h));
        let limit = head.max_output.and_then(|_| {
            crate::protocol::translate::quirks::output_limit_for(&provider.config.profile, candidate.upstream_model)
        });
        let lowered = limit.and_then(|limit| {
            let clamped = head.with_output_limit(body, u64::from(limit))?;
            let again = body::inspect(&clamped).ok()?;
            Some((limit, Bytes::from(clamped), again))
        });
        if let Some((limit, clamped, again)) = lowered {
            let asked = head.max_output.unwrap_or_default();
            removed.push(format!("max_tokens: clamped from {asked} to {limit}, the model's output limit"));
            native = Some((clamped, again));
        }
        repair::Outgoing { translated: None, native, removed }
    }

    /// What [`step::next`] weighs after a failed attempt on `provider`.
    fn facts(
        &self,
        provider: &Provider,
        outcome: Outcome,
        requested_wait: Option<Duration>,
        retries: u32,
        key: Option<&str>,
    ) -> Facts<'_> {
        let now = Instant::now();
        let keys = match key {
            Some(label) => Keys {
                used: true,
                another_ready: provider.keys.has_ready(now),
                another_usable: provider.keys.usable_besides(label),
            },
            None => Keys::default(),
        };
        let backoff = match requested_wait {
            Some(_) => Duration::ZERO,
            None => backoff::full_jitter(retries, self.policy.backoff_base, self.policy.backoff_cap, &mut rand::rng()),
        };
        Facts {
            outcome,
            requested_wait,
            retries,
            backoff,
            keys,
            deadline: &self.deadline,
            now,
            repair: None,
            repairs_left: Repairs::default(),
        }
    }

    /// The upstream request, the label of the key it carries, and whether the
    /// gateway asked for stream usage the client did not.
    fn request(
        &self,
        candidate: &Candidate<'_>,
        key: Option<&ProviderKey>,
        translated: Option<&wire::Translated>,
        native: Option<(&Bytes, &RequestHead)>,
    ) -> (Request<Full<Bytes>>, bool) {
        let provider = candidate.provider;
        let mut headers = headers::upstream_request(
            &self.inbound.headers,
            provider.config.kind,
            &provider.config.profile,
            key,
            &self.inbound.ids.correlation_id,
        );
        if let Some(joined) = &provider.config.joined {
            headers::to_team(&self.inbound.headers, &mut headers, &joined.device);
        }
        if let Some(t) = translated {
            let url = provider.url(t.endpoint, candidate.upstream_model, t.query());
            debug!(provider = provider.name(), model = candidate.upstream_model, wire = %t.label(), "attempt");
            return (crate::upstream::request(Method::POST, url, headers, t.body.clone()), false);
        }
        let url = provider.url(self.inbound.endpoint, candidate.upstream_model, self.inbound.uri.query());
        let (body, head) = native.unwrap_or((self.body, self.head));
        let strip_usage = self.inbound.endpoint == Endpoint::ChatCompletions
            && head.stream
            && !head.has_stream_options
            && provider.config.stream_usage
            && provider.sends_stream_options()
            && self.gateway.sink().is_some();
        let body = head.upstream_body(body, candidate.upstream_model, strip_usage);
        debug!(provider = provider.name(), model = candidate.upstream_model, "attempt");
        (crate::upstream::request(Method::POST, url, headers, body), strip_usage)
    }

    /// The error when no provider answered. When every one in the chain
    /// was refused for what the request asks, it is the client's to fix: a
    /// 400 naming the field, not a 503 a retry would meet again.
    fn exhausted(self, protocol: Protocol, candidates: usize) -> ApiError {
        let model = &self.head.model;
        if let Some((n, blocked)) = self.budget.as_ref().filter(|(n, _)| *n == candidates) {
            // Every candidate is over budget: nothing helps before the period ends.
            let message = format!("over budget for `{model}`: {}", self.notes);
            debug!(blocked = n, "budget exceeded");
            return ApiError::new(protocol, ErrorCode::BudgetExceeded, message).until(blocked.resets_at_ms);
        }
        let (code, message) = if self.attempts == 0 && !self.refused.is_empty() && self.refused.len() == candidates {
            let first = &self.refused[0];
            let message =
                format!("`{}`: {} (no provider for `{model}` can take it: {})", first.field, first.reason, self.notes);
            (ErrorCode::InvalidRequest, message)
        } else if self.out_of_time {
            let budget = humantime::format_duration(self.deadline.budget);
            (ErrorCode::DeadlineExceeded, format!("the {budget} deadline for `{model}` ran out: {}", self.notes))
        } else if self.attempts == 0 {
            (ErrorCode::NoProviderAvailable, format!("no provider can take `{model}` right now: {}", self.notes))
        } else {
            (ErrorCode::AllProvidersFailed, format!("all providers failed for `{model}`: {}", self.notes))
        };
        ApiError::new(protocol, code, message).with_attempts(self.attempts)
    }
}

pub(crate) use admit::read_body;
