//! The proxied request path: read and inspect the body, plan the provider
//! chain, then try each candidate under one deadline, with retries, the
//! breaker and the guardrails, and relay the first acceptable answer.

pub(crate) mod attempt;
pub(crate) mod body;
pub(crate) mod cached;
pub(crate) mod capture;
mod chain;
pub(crate) mod headers;
pub(crate) mod journal;
mod line;
pub(crate) mod redact;
pub(crate) mod relay;
pub(crate) mod repair;
pub(crate) mod scrub;
pub(crate) mod thinking;
pub(crate) mod wire;

use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use axum::body::Body;
use axum::http::{header, HeaderMap, Method, Request, Response, Uri};
use axum::response::IntoResponse;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use tokio::time::Instant;
use tracing::{debug, warn};

use crate::gateway::{Gateway, Live};
use crate::history::record::{now_ms, AttemptOutcome, Reason};
use crate::http::correlation::RequestIds;
use crate::policy::backoff;
use crate::policy::breaker::Admission;
use crate::policy::budget::{Blocked, Covering};
use crate::policy::classify::{self, Outcome};
use crate::policy::deadline::Deadline;
use crate::policy::step::{self, Facts, GiveUp, Keys, Next, Repairs};
use crate::policy::strategy::{self, Ask, RouteState, Strategy};
use crate::policy::RequestPolicy;
use crate::protocol::error::{ApiError, ErrorCode};
use crate::protocol::translate::error::{self as translate_error, Untranslatable};
use crate::protocol::translate::passthrough::Scrub;
use crate::protocol::usage::Usage;
use crate::protocol::{Endpoint, Protocol};
use crate::secrets::ProviderKey;
use crate::upstream::provider::{Gate, Need, Pass, Provider, TeamGate, Ticket, Verdict};
use crate::upstream::routing::{self, Candidate, RouteError};
use body::{BodyError, RequestHead};
use journal::{AttemptEnd, AttemptStart, Journal, Skip};
use relay::{Answered, Delivery};
use scrub::OnDemand;

/// One proxied request, as the handler received it.
#[derive(Debug)]
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
    );
    capture::begin(gateway, &inbound, &mut journal);
    let member = match identify(gateway, &inbound).await {
        Ok(member) => member,
        Err(refusal) => return refuse(&inbound, journal, &refusal).await,
    };
    if let Some(m) = &member {
        journal.member(&m.name);
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

/// The member whose key the request carries (`None`: the owner, or a
/// gateway without members), or why it is refused.
async fn identify(
    gateway: &Gateway,
    inbound: &Inbound,
) -> Result<Option<crate::members::Member>, crate::members::gate::Refusal> {
    let token = crate::http::guard::client_token(&inbound.headers, inbound.uri.query());
    let members = gateway.members();
    let who = members.identify(gateway.store(), token.as_deref(), gateway.access_token(), inbound.peer, now_ms()).await;
    // A member read just now (its key was new to the copy) brings its budget.
    gateway.apply_member_budgets();
    who
}

/// A member refusal, on record (with no upstream call, as the member's
/// when the key was one) and in the client's protocol.
async fn refuse(inbound: &Inbound, mut journal: Journal, refusal: &crate::members::gate::Refusal) -> Response<Body> {
    if let Some(name) = refusal.member() {
        journal.member(name);
    }
    let error = refusal.in_protocol(inbound.endpoint.protocol());
    journal.finish_error(&error).await;
    error.into_response()
}

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
    // A rough size for the token buckets and for prices; providers count the real thing.
    let tokens = (bytes.len() / 4) as u64;
    if let Some(m) = member {
        gateway.members().check(m, &head.model, tokens).map_err(|r| r.in_protocol(protocol))?;
        // Only a budget reserves it: pricing plans the route, which a
        // member without one need not pay for on every request.
        let estimate = match m.budget {
            Some(_) => estimate_usd(gateway, &live, inbound, &head, tokens),
            None => 0.0,
        };
        let hold = crate::members::spend::admit(gateway, m, tokens, estimate).await;
        journal.member_hold(hold.map_err(|r| r.in_protocol(protocol))?);
    }
    if let Some(response) = count_locally(&live, inbound, &bytes, &head) {
        let response = response.map_err(|e| ApiError::new(protocol, ErrorCode::InvalidRequest, e.to_string()))?;
        journal.take().finish_local(response.status()).await;
        return Ok(response);
    }
    let mut cached = cached::Cached::plan(gateway.cache(), gateway.team(), &live.config, inbound, &head, &bytes);
    if let Some(c) = &mut cached {
        // An identical request in flight is waited for, but only for half
        // of what is left of the deadline: should its answer not come (its
        // request failed, its instance died), this one still has the time
        // to ask a provider itself.
        let policy = live.config.request_policy(&head.model);
        let deadline = Deadline::for_request(&inbound.headers, policy.deadline, started).at;
        let now = tokio::time::Instant::now();
        let wait_until = now + deadline.saturating_duration_since(now) / 2;
        if let Some(hit) = c.lookup(journal, wait_until).await {
            return Ok(hit);
        }
    }
    let mut plan = routing::plan(&live.providers, &live.config.routes, inbound.endpoint, &head.model).map_err(|e| {
        let code = match e {
            RouteError::UnknownModel(_) => ErrorCode::ModelNotFound,
            RouteError::NoneAvailable { .. } => ErrorCode::NoProviderAvailable,
        };
        ApiError::new(protocol, code, e.to_string())
    })?;
    gateway.capture_switch().pin(&inbound.ids.request_id, &mut plan.candidates);
    let policy = live.config.request_policy(&head.model);
    let route = route_in_order(gateway, &live, &head, policy, tokens, &mut plan.candidates);
    // Only a session that steers is kept on its key and provider.
    let steering = session.as_ref().filter(|s| s.steers());
    let stuck = steering.and_then(|s| stick_first(gateway, s, policy, &mut plan.candidates));
    let mut run = Run {
        gateway,
        inbound,
        head: &head,
        body: &bytes,
        policy,
        deadline: Deadline::for_request(&inbound.headers, policy.deadline, started),
        tokens,
        route,
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
        session: steering,
    };
    if let Some(provider) = stuck {
        run.note(&provider, "tried first: it served this session last, after a fallback");
    }
    for candidate in &plan.candidates {
        candidate.provider.note_planned();
    }
    // Candidates passed over only for want of capacity, in chain order.
    let mut busy = Vec::new();
    if let Some(response) = run.walk(plan.candidates.iter(), &mut busy).await {
        return Ok(response);
    }
    if let Some(response) = run.wait_for_capacity(busy).await {
        return Ok(response);
    }
    let error = run.exhausted(protocol, plan.candidates.len());
    // Every provider that counts failed (an Anthropic one down while the
    // chain's others serve the model): the count is estimated, labelled so,
    // as when no provider counts at all. Claude Code counts constantly.
    if let Some(Ok(response)) = estimate_count(&live, inbound, &bytes, &head) {
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
fn count_locally(live: &Live, inbound: &Inbound, body: &[u8], head: &RequestHead) -> Option<Counted> {
    let counts = is_count(inbound.endpoint)
        && routing::plan(&live.providers, &live.config.routes, inbound.endpoint, &head.model).is_ok();
    if counts {
        return None;
    }
    estimate_count(live, inbound, body, head)
}

/// A local estimate for a token count, when some provider serves the model.
fn estimate_count(live: &Live, inbound: &Inbound, body: &[u8], head: &RequestHead) -> Option<Counted> {
    if !is_count(inbound.endpoint) {
        return None;
    }
    let any = routing::plan(&live.providers, &live.config.routes, Endpoint::Messages, &head.model).is_ok();
    any.then(|| wire::estimated_count(inbound.endpoint, body, head))
}

fn is_count(endpoint: Endpoint) -> bool {
    matches!(endpoint, Endpoint::CountTokens | Endpoint::GeminiCountTokens)
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
}

fn attempt_outcome(outcome: Outcome) -> AttemptOutcome {
    match outcome {
        Outcome::Status(s) if s.is_success() => AttemptOutcome::Ok,
        Outcome::Status(_) => AttemptOutcome::HttpError,
        Outcome::Connect => AttemptOutcome::ConnectError,
        Outcome::Transport => AttemptOutcome::TransportError,
        Outcome::Timeout => AttemptOutcome::Timeout,
        Outcome::StreamError => AttemptOutcome::StreamError,
        Outcome::StreamDropped => AttemptOutcome::StreamDropped,
        Outcome::BrokenAfterContent => AttemptOutcome::MidStreamFailure,
    }
}

impl Run<'_> {
    fn note(&mut self, provider: &str, what: &str) {
        let ids = &self.inbound.ids;
        warn!(provider, request_id = %ids.request_id, correlation_id = %ids.correlation_id, "{what}");
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

    /// What the team says to an attempt at `candidate` holding `ticket`:
    /// its caps, rate buckets and budgets, in one round trip. The tokens
    /// reserved are the prompt and the output limit; the spend reserved is
    /// what they would cost at the provider's prices. Budget counters a
    /// Redis restart lost are seeded from the history first, then asked
    /// again. A provider full across the team that has a queue keeps the
    /// request in its line across the team ([`line`]) until its turn.
    /// Also the budgets asked about, to name one that refuses.
    async fn team_gate(&mut self, ticket: &mut Ticket, candidate: &Candidate<'_>) -> (TeamGate, Vec<Covering>) {
        let (provider, model) = (candidate.provider.name(), candidate.upstream_model);
        let output = self.head.max_output.unwrap_or(0);
        let estimate = self.tokens.saturating_add(output);
        let covering = match self.gateway.team().filter(|t| t.connected()) {
            Some(_) => {
                let usage = Usage {
                    input_tokens: Some(self.tokens),
                    output_tokens: Some(output),
                    cached_tokens: None,
                    cache_write_tokens: None,
                };
                let usd = self.journal.price(provider, model, &usage).unwrap_or(0.0);
                self.gateway.budgets().covering(provider, model, usd, now_ms())
            }
            None => Vec::new(),
        };
        let asks = || covering.iter().map(|c| c.ask.clone()).collect::<Vec<_>>();
        let line = self.gateway.team().filter(|t| t.connected()).and_then(|_| self.line(candidate.provider));
        let mut gate = ticket.team_admit(estimate, asks(), line.clone()).await;
        if let TeamGate::Unseeded(missing) = &gate {
            self.gateway.seed_team_spend(&covering, missing).await;
            gate = ticket.team_admit(estimate, asks(), line.clone()).await;
        }
        if let (TeamGate::Queued { .. }, Some(line)) = (&gate, line) {
            gate = self.wait_in_line(ticket, candidate.provider, line, estimate, &covering).await;
        }
        (gate, covering)
    }

    /// What each attempt asks of a provider's gate.
    fn need(&self) -> Need {
        Need { tokens: self.tokens, affinity: self.session.map(crate::session::Session::affinity) }
    }

    async fn pause(&mut self, wait: Duration) {
        tokio::time::sleep(wait).await;
        self.backoff += wait;
    }

    /// Tries one provider: attempts, retries with backoff, until it answers,
    /// fails for good, or the budget says to move on.
    async fn provider(&mut self, candidate: &Candidate<'_>, mut queued: Option<Ticket>) -> Tried {
        let provider = candidate.provider;
        // Translated once per provider, not per attempt: retries send the
        // same body (a repair changes it, below).
        let mut out = match self.outgoing(candidate) {
            Ok(out) => out,
            Err(refused) => {
                let why = match refused.field.as_str() {
                    "" => refused.reason.clone(),
                    field => format!("`{field}`: {}", refused.reason),
                };
                self.skip(candidate, why);
                return Tried::Refused(refused);
            }
        };
        let mut repairs_left = repair::allowed(provider);
        let mut retry = 0u32;
        loop {
            let gate = match queued.take() {
                Some(ticket) => Gate::Go(ticket),
                None => provider.gate(
                    self.need(),
                    &self.deadline,
                    self.policy.max_retry_wait,
                    self.policy.min_fallback_budget,
                ),
            };
            let mut ticket = match gate {
                Gate::Go(mut ticket) => {
                    let (gate, covering) = self.team_gate(&mut ticket, candidate).await;
                    match gate {
                        // Unseeded twice: seeding failed, this instance's ledger decides.
                        TeamGate::Go | TeamGate::Unseeded(_) => {}
                        TeamGate::OverBudget { budget, spent_micros } => {
                            drop(ticket);
                            if let Some(c) = covering.get(budget) {
                                self.blocked(candidate, c.blocked(spent_micros));
                            }
                            return if retry == 0 { Tried::Passed } else { Tried::Failed };
                        }
                        TeamGate::Full | TeamGate::Queued { .. } => {
                            drop(ticket);
                            self.note(provider.name(), "not tried: at its concurrency cap across the team");
                            return if retry == 0 { Tried::Busy } else { Tried::Failed };
                        }
                        TeamGate::LineFull { waiting } => {
                            drop(ticket);
                            let why = format!("not queued: its line across the team is full ({waiting} waiting)");
                            self.note(provider.name(), &why);
                            return if retry == 0 { Tried::Passed } else { Tried::Failed };
                        }
                        TeamGate::Waited(waited) => {
                            drop(ticket);
                            let waited = humantime::format_duration(Duration::from_millis(waited.as_millis() as u64));
                            self.note(
                                provider.name(),
                                &format!("not tried: waited {waited} in its line across the team"),
                            );
                            return if retry == 0 { Tried::Passed } else { Tried::Failed };
                        }
                        TeamGate::Wait(wait) => {
                            drop(ticket);
                            let (max, min) = (self.policy.max_retry_wait, self.policy.min_fallback_budget);
                            if crate::policy::step::may_wait(wait, &self.deadline, max, min, Instant::now()) {
                                self.pause(wait).await;
                                continue;
                            }
                            let pass = Pass::Throttled { wait };
                            self.note(provider.name(), &format!("not tried: across the team, {pass}"));
                            return if retry == 0 { Tried::Passed } else { Tried::Failed };
                        }
                    }
                    ticket.caused_by(&self.inbound.ids.request_id);
                    ticket
                }
                Gate::Wait(wait) => {
                    self.pause(wait).await;
                    continue;
                }
                // A dead server is on record, so the user sees why it was not tried.
                Gate::Pass(pass @ Pass::Unreachable { .. }) => {
                    self.skip(candidate, pass.to_string());
                    return Tried::Passed;
                }
                Gate::Pass(pass) => {
                    self.note(provider.name(), &format!("not tried: {pass}"));
                    return match retry {
                        0 if Provider::queueable(&pass) => Tried::Busy,
                        0 => Tried::Passed,
                        _ => Tried::Failed,
                    };
                }
            };
            let timeout = self.deadline.attempt_timeout(self.policy.attempt_timeout, Instant::now());
            if timeout.is_zero() {
                self.out_of_time = true;
                return Tried::Failed;
            }
            let fallback = self.last_failed.is_some() && retry == 0;
            if fallback {
                provider.note_fallback();
            }
            let reason = match (ticket.admission(), retry, fallback) {
                (Some(Admission::Probe), _, _) => Reason::Probe,
                (_, 0, true) => Reason::Fallback,
                (_, 0, false) => Reason::First,
                _ => Reason::Retry,
            };
            self.attempts += 1;
            let translated = out.translated.as_ref();
            let native = out.native.as_ref().map(|(body, head)| (body, head));
            let (request, strip_usage) = self.request(candidate, ticket.key.as_ref(), translated, native);
            let key_label = ticket.key.as_ref().map(|k| k.label.clone());
            let index = self.journal.begin(AttemptStart {
                provider: provider.name().to_string(),
                key_label: key_label.clone(),
                model: candidate.upstream_model.to_string(),
                reason,
                fallback_from: if fallback { self.last_failed.clone() } else { None },
                timeout,
                backoff: std::mem::take(&mut self.backoff),
                breaker_state: provider.breaker_state().name(),
                translation: translated.map(|t| (t.client, t.upstream)),
                dropped: translated.map_or_else(|| out.removed.clone(), |t| t.dropped.clone()),
                routing: candidate.routing,
            });
            let request = capture::outgoing(self.gateway, self.journal, index, request).await;
            let endpoint = translated.map_or(self.inbound.endpoint, |t| t.endpoint);
            let patience = attempt::Patience {
                timeout,
                thinking: self.policy.stream_idle_timeout,
                deadline: self.deadline.at,
                keepalive: self.policy.stream_keepalive,
            };
            let mut attempted = attempt::run(self.gateway.client(), request, endpoint, patience, &self.scrub).await;
            // What the provider said, before a translated answer is rewritten for the client.
            let provider_status = attempted.upstream.as_ref().map(|u| u.status);
            // Read in the provider's own words, before a translation rewrites them.
            let refusal = repair::refusal(provider, &mut attempted, repairs_left).await;
            let attempted = match translated {
                Some(t) => {
                    let left = self.deadline.attempt_timeout(self.policy.attempt_timeout, Instant::now());
                    wire::answer(attempted, t, left).await
                }
                None => attempted,
            };
            // A wait is asked for by a refusal. On a success, reset headers
            // tell when a quota window starts over, not that anyone should wait.
            let wait = attempted
                .upstream
                .as_ref()
                .filter(|u| !u.status.is_success())
                .and_then(|u| backoff::requested_wait(&u.headers, SystemTime::now()));
            if let Some(u) = &attempted.upstream {
                let (requests, tokens) = backoff::remaining_quota(&u.headers);
                provider.observe_quota(requests, tokens);
            }
            let verdict = classify::verdict(attempted.outcome, wait);
            self.observe_speed(provider, &attempted, verdict, timeout);
            let end = AttemptEnd {
                status: provider_status,
                ttfb: attempted.ttfb,
                ttft: attempted.ttft,
                retry_after: wait,
                error: None,
            };
            // A refusal the request can be mended for goes to the step,
            // which says whether to; the mended request is made now, so
            // one that would change nothing is delivered as it is.
            let mended = refusal.and_then(|r| {
                let facts = Facts {
                    repair: Some(r),
                    repairs_left,
                    ..self.facts(provider, attempted.outcome, wait, retry, key_label.as_deref())
                };
                match step::next(&facts, self.policy) {
                    Next::Repair(r) => repair::mend(r, &out, self.client(), strip_usage).map(|m| (r, m)),
                    _ => None,
                }
            });
            // Matched in place, not as a tuple: a tuple would be another
            // copy of the answer, kept in this future while it is relayed.
            let deliver = classify::delivers(attempted.outcome) && mended.is_none();
            match attempted.upstream {
                Some(upstream) if deliver => {
                    debug!(
                        provider = provider.name(),
                        status = upstream.status.as_u16(),
                        attempts = self.attempts,
                        "answered"
                    );
                    self.journal.end(index, attempt_outcome(attempted.outcome), end);
                    self.journal.deliver(index, upstream.status);
                    let translator =
                        translated.and_then(|t| t.stream(upstream.sse && upstream.status.is_success(), self.head));
                    let delivery = Delivery {
                        answered: Answered { provider: provider.name(), attempts: self.attempts },
                        endpoint: self.inbound.endpoint,
                        // A stream is tapped as the provider sent it; a whole
                        // translated answer is already in the client's format.
                        upstream_endpoint: if translator.is_some() { endpoint } else { self.inbound.endpoint },
                        translator,
                        idle: self.policy.stream_idle_timeout,
                        keepalive: self.policy.stream_keepalive,
                        strip_usage,
                        journal: self.journal.take(),
                        keep: self.cached.and_then(|c| c.keeper(provider.name())),
                    };
                    let mut response = relay::respond(upstream, ticket, verdict, delivery).await;
                    if let Some(c) = self.cached {
                        c.mark_live(response.headers_mut());
                    }
                    return Tried::Answered(response);
                }
                upstream => {
                    // A repaired request keeps the ticket: same provider,
                    // same key, and one breaker outcome for the pair.
                    if mended.is_none() {
                        ticket.record(verdict);
                    }
                    let detail = match upstream {
                        Some(u) => {
                            let status = u.status;
                            let reason = status.canonical_reason().unwrap_or("");
                            format!("HTTP {} {reason}: {}", status.as_u16(), u.error_text().await)
                        }
                        None => attempted.detail,
                    };
                    self.journal.end(
                        index,
                        attempt_outcome(attempted.outcome),
                        AttemptEnd { error: Some(detail.clone()), ..end },
                    );
                    self.note(provider.name(), &detail);
                    if let Some((r, mended)) = mended {
                        if r == classify::Repair::WithoutStreamOptions {
                            provider.refuse_stream_options();
                        }
                        self.note(provider.name(), repair::described(r));
                        repairs_left.spend(r);
                        out = mended;
                        queued = Some(ticket);
                        retry += 1;
                        continue;
                    }
                    drop(ticket);
                    // Asked once the verdict is in: a rate limit has cooled the key by now.
                    let facts = self.facts(provider, attempted.outcome, wait, retry, key_label.as_deref());
                    match step::next(&facts, self.policy) {
                        // The pool's next key goes at once; no retry is spent.
                        Next::AnotherKey => {}
                        Next::Retry(pause) => {
                            self.pause(pause).await;
                            retry += 1;
                        }
                        Next::RevokeKey { another } => {
                            if let Some(label) = &key_label {
                                provider.revoke_key(label, &detail, &self.inbound.ids.request_id);
                            }
                            if !another {
                                return Tried::Failed;
                            }
                        }
                        Next::AnotherProvider(why) => {
                            self.out_of_time |= why == GiveUp::OutOfTime;
                            return Tried::Failed;
                        }
                        // What classify delivers took the arm above, and a
                        // repair was asked about there.
                        Next::Deliver | Next::Repair(_) => return Tried::Failed,
                    }
                }
            }
        }
    }

    /// Feeds what the attempt took to the provider's recent speed (the
    /// strategies' measure): an answer's time to first token or to its
    /// head, or the whole timeout for one that timed out (a provider too
    /// slow to answer is slow). A quick failure says nothing of its speed,
    /// but puts a provider never measured after the measured ones; the
    /// client's own errors and rate limits say nothing at all.
    fn observe_speed(&self, provider: &Provider, attempted: &attempt::Attempted, verdict: Verdict, timeout: Duration) {
        let took = match attempted.outcome {
            Outcome::Timeout => Some(timeout),
            Outcome::Status(s) if s.is_success() => {
                if self.head.stream {
                    attempted.ttft.or(attempted.ttfb)
                } else {
                    attempted.ttfb
                }
            }
            _ => None,
        };
        match (took, verdict) {
            (Some(took), _) => provider.recent().observe(self.head.stream, took),
            (None, Verdict::Failed | Verdict::Unreachable) => provider.recent().failed(self.head.stream),
            (None, Verdict::Healthy | Verdict::RateLimited(_) | Verdict::Neutral) => {}
        }
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
        let headers = headers::upstream_request(
            &self.inbound.headers,
            provider.config.kind,
            &provider.config.profile,
            key,
            &self.inbound.ids.correlation_id,
        );
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
