//! One provider of the chain: its gate and the team's, then attempts,
//! retries with backoff and repairs, until it answers, fails for good or
//! the policy says to move on. What each attempt sends is
//! [`super::attempt`]'s; an answer is delivered by [`super::relay`].

use std::time::{Duration, SystemTime};

use axum::body::Body;
use axum::http::{Request, Response};
use bytes::Bytes;
use http_body_util::Full;
use tokio::time::Instant;
use tracing::debug;

use super::attempt::Upstream;
use super::hedge::Raced;
use super::journal::AttemptStart;
use super::relay::{Answered, Delivery};
use super::turn::{asks, Admit, Prepared, Sent};
use super::{attempt, capture, relay, repair, wire, Run, Tried};
use crate::ground::clock::now_ms;
use crate::ground::headers::name;
use crate::ground::outcome::{AttemptOutcome, Reason, Verdict};
use crate::policy::backoff;
use crate::policy::breaker::Admission;
use crate::policy::budget::Covering;
use crate::policy::classify::{self, Outcome, Repair};
use crate::policy::joined;
use crate::policy::step::{self, Facts, GiveUp, Next, Repairs};
use crate::protocol::usage::Usage;
use crate::upstream::provider::{Gate, Need, Pass, Provider, TeamGate, Ticket};
use crate::upstream::routing::Candidate;

/// What follows a failed attempt at the same provider.
enum After {
    /// A retry, after its backoff.
    Retry,
    /// The pool's next key, at once: no retry spent.
    AnotherKey,
    /// This provider is done with.
    Done(Tried),
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
    /// Tries one provider: attempts, retries with backoff, until it answers,
    /// fails for good, or the budget says to move on.
    /// `partner`, the chain's next candidate, may be started alongside the
    /// first attempt as its hedge ([`super::hedge`]).
    pub(super) async fn provider(
        &mut self,
        candidate: &Candidate<'_>,
        mut queued: Option<Ticket>,
        partner: Option<&Candidate<'_>>,
    ) -> Tried {
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
            let mut ticket = match self.admit(candidate, queued.take(), retry).await {
                Admit::Go(ticket) => ticket,
                Admit::Again => continue,
                Admit::Done(tried) => return tried,
            };
            let timeout = self.deadline.attempt_timeout(self.policy.attempt_timeout, Instant::now());
            if timeout.is_zero() {
                self.out_of_time = true;
                return Tried::Failed;
            }
            // A joined team's gateway is neither hedged nor a hedge: a
            // slow team is waited for, its budget never bypassed.
            let hedge = partner.filter(|p| {
                retry == 0
                    && self.policy.hedge.is_some()
                    && provider.config.joined.is_none()
                    && p.provider.config.joined.is_none()
            });
            let mut sent = match hedge {
                // Boxed: the race's future is large, and inline it would make
                // every request's as large, hedged or not.
                Some(partner) => {
                    match Box::pin(self.hedged(candidate, &mut ticket, &out, partner, repairs_left, timeout)).await {
                        Raced::Primary(sent) => sent,
                        Raced::Partner(won) => {
                            return Box::pin(self.partner_won(candidate, partner, ticket, *won)).await;
                        }
                    }
                }
                None => self.send(candidate, &ticket, &out, retry, repairs_left, timeout).await,
            };
            // A refusal the request can be mended for goes to the step,
            // which says whether to; the mended request is made now, so
            // one that would change nothing is delivered as it is.
            let mended = sent.refusal.and_then(|r| self.mend(provider, r, &sent, &out, retry, repairs_left));
            let outcome = sent.attempted.outcome;
            let teams_word = provider.config.joined.is_some() && joined::is_final(outcome);
            let deliver = (classify::delivers(outcome) || teams_word) && mended.is_none();
            // Taken out in place, not as a tuple: a tuple would be another
            // copy of the answer, kept in this future while it is relayed.
            if let Some(upstream) = sent.attempted.upstream.take_if(|_| deliver) {
                debug!(
                    provider = provider.name(),
                    status = upstream.status.as_u16(),
                    attempts = self.attempts,
                    "answered"
                );
                // Awaited here, not through `deliver`: the relay's future is
                // then built in this one's place instead of moved into it.
                let delivery = self.delivery(candidate, &sent, &out, &upstream);
                let mut response = relay::respond(upstream, ticket, sent.verdict, delivery).await;
                if let Some(c) = self.cached {
                    c.mark_live(response.headers_mut());
                }
                return Tried::Answered(response);
            }
            // A repaired request keeps the ticket: same provider, same
            // key, and one breaker outcome for the pair.
            if mended.is_none() {
                ticket.record(sent.verdict);
            }
            let detail = self.failed_attempt(provider, &mut sent).await;
            if let Some((r, mended)) = mended {
                if r == Repair::WithoutStreamOptions {
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
            match self.after(provider, &sent, &detail, retry).await {
                After::Done(tried) => return tried,
                After::Retry => retry += 1,
                // Another key of the pool goes at once: no retry is spent.
                After::AnotherKey => {}
            }
        }
    }

    /// Asks the provider's gate (unless its queue already admitted
    /// `queued`), then the team's, for one attempt.
    pub(super) async fn admit(&mut self, candidate: &Candidate<'_>, queued: Option<Ticket>, retry: u32) -> Admit {
        let provider = candidate.provider;
        let gate = match queued {
            Some(ticket) => Gate::Go(ticket),
            None => {
                provider.gate(self.need(), &self.deadline, self.policy.max_retry_wait, self.policy.min_fallback_budget)
            }
        };
        match gate {
            Gate::Go(ticket) => self.past_team(candidate, ticket, retry).await,
            Gate::Wait(wait) => {
                self.pause(wait).await;
                Admit::Again
            }
            // A dead server is on record, so the user sees why it was not tried.
            Gate::Pass(pass @ Pass::Unreachable { .. }) => {
                self.skip(candidate, pass.to_string());
                Admit::Done(Tried::Passed)
            }
            Gate::Pass(pass) => {
                self.note(provider.name(), &format!("not tried: {pass}"));
                Admit::Done(match retry {
                    0 if Provider::queueable(&pass) => Tried::Busy,
                    0 => Tried::Passed,
                    _ => Tried::Failed,
                })
            }
        }
    }

    /// The team's word on an attempt the provider's own gate let through.
    async fn past_team(&mut self, candidate: &Candidate<'_>, mut ticket: Ticket, retry: u32) -> Admit {
        let (gate, covering) = self.team_gate(&mut ticket, candidate).await;
        match gate {
            // Unseeded twice: seeding failed, this instance's ledger decides.
            TeamGate::Go | TeamGate::Unseeded(_) => {
                ticket.caused_by(&self.inbound.ids.request_id);
                Admit::Go(ticket)
            }
            // A refusal lets the ticket go before anything else (a wait, a note).
            refused => {
                drop(ticket);
                self.refused_by_team(candidate, refused, &covering, retry).await
            }
        }
    }

    /// What follows the team's refusal of an attempt at `candidate`.
    async fn refused_by_team(
        &mut self,
        candidate: &Candidate<'_>,
        refused: TeamGate,
        covering: &[Covering],
        retry: u32,
    ) -> Admit {
        let name = candidate.provider.name();
        let done = |tried| Admit::Done(if retry == 0 { tried } else { Tried::Failed });
        match refused {
            // Not a refusal: asked again.
            TeamGate::Go | TeamGate::Unseeded(_) => Admit::Again,
            TeamGate::OverBudget { budget, spent_micros } => {
                if let Some(c) = covering.get(budget) {
                    self.blocked(candidate, c.blocked(spent_micros));
                }
                done(Tried::Passed)
            }
            TeamGate::Full | TeamGate::Queued { .. } => {
                self.note(name, "not tried: at its concurrency cap across the team");
                done(Tried::Busy)
            }
            TeamGate::LineFull { waiting } => {
                self.note(name, &format!("not queued: its line across the team is full ({waiting} waiting)"));
                done(Tried::Passed)
            }
            TeamGate::Waited(waited) => {
                let waited = humantime::format_duration(Duration::from_millis(waited.as_millis() as u64));
                self.note(name, &format!("not tried: waited {waited} in its line across the team"));
                done(Tried::Passed)
            }
            TeamGate::Wait(wait) => {
                let (max, min) = (self.policy.max_retry_wait, self.policy.min_fallback_budget);
                if step::may_wait(wait, &self.deadline, max, min, Instant::now()) {
                    self.pause(wait).await;
                    return Admit::Again;
                }
                let pass = Pass::Throttled { wait };
                self.note(name, &format!("not tried: across the team, {pass}"));
                done(Tried::Passed)
            }
        }
    }

    /// Sends one attempt holding `ticket` and judges its outcome: on
    /// record as begun, its answer read (and translated back) up to its
    /// first content, what the provider said of its quota and its speed
    /// taken in.
    pub(super) async fn send(
        &mut self,
        candidate: &Candidate<'_>,
        ticket: &Ticket,
        out: &repair::Outgoing,
        retry: u32,
        repairs_left: Repairs,
        timeout: Duration,
    ) -> Sent {
        let reason = self.reason(candidate.provider, ticket, retry);
        let (prepared, request) = self.prepare(candidate, ticket, out, reason, timeout).await;
        let attempted =
            attempt::run(self.gateway.client(), request, prepared.endpoint, prepared.patience, &self.scrub).await;
        self.judge(candidate, out, prepared, attempted, repairs_left).await
    }

    /// Why an attempt at `provider` holding `ticket` starts; a fallback is
    /// counted against the provider's share as it is named.
    pub(super) fn reason(&self, provider: &Provider, ticket: &Ticket, retry: u32) -> Reason {
        let fallback = self.last_failed.is_some() && retry == 0;
        if fallback {
            provider.note_fallback();
        }
        match (ticket.admission(), retry, fallback) {
            (Some(Admission::Probe), _, _) => Reason::Probe,
            (_, 0, true) => Reason::Fallback,
            (_, 0, false) => Reason::First,
            _ => Reason::Retry,
        }
    }

    /// One attempt on record as begun, and its request, ready to send.
    pub(super) async fn prepare(
        &mut self,
        candidate: &Candidate<'_>,
        ticket: &Ticket,
        out: &repair::Outgoing,
        reason: Reason,
        timeout: Duration,
    ) -> (Prepared, Request<Full<Bytes>>) {
        let provider = candidate.provider;
        self.attempts += 1;
        let translated = out.translated.as_ref();
        let native = out.native.as_ref().map(|(body, head)| (body, head));
        let (mut request, strip_usage) = self.request(candidate, ticket.key.as_ref(), translated, native);
        let key_label = ticket.key.as_ref().map(|k| k.label.clone());
        let index = self.journal.begin(AttemptStart {
            provider: provider.name().to_string(),
            key_label: key_label.clone(),
            model: candidate.upstream_model.to_string(),
            reason,
            fallback_from: if reason == Reason::Fallback { self.last_failed.clone() } else { None },
            timeout,
            backoff: std::mem::take(&mut self.backoff),
            breaker_state: provider.breaker_state().name(),
            translation: translated.map(|t| (t.client, t.upstream)),
            dropped: translated.map_or_else(|| out.removed.clone(), |t| t.dropped.clone()),
            routing: candidate.routing,
        });
        let endpoint = translated.map_or(self.inbound.endpoint, |t| t.endpoint);
        self.journal.trace_attempt(index, provider.config.kind, endpoint, &mut request);
        let request = capture::outgoing(self.gateway, self.journal, index, request).await;
        let patience = attempt::Patience {
            timeout,
            thinking: self.policy.stream_idle_timeout,
            deadline: self.deadline.at,
            keepalive: self.policy.stream_keepalive,
        };
        (Prepared { index, endpoint, key_label, strip_usage, patience }, request)
    }

    /// Judges what an attempt brought: a refusal read in the provider's
    /// own words, the answer translated back, the wait it asks for, its
    /// quota and speed taken in.
    pub(super) async fn judge(
        &mut self,
        candidate: &Candidate<'_>,
        out: &repair::Outgoing,
        prepared: Prepared,
        mut attempted: attempt::Attempted,
        repairs_left: Repairs,
    ) -> Sent {
        let provider = candidate.provider;
        let Prepared { index, endpoint, key_label, strip_usage, patience } = prepared;
        let status = attempted.upstream.as_ref().map(|u| u.status);
        // Read in the provider's own words, before a translation rewrites them.
        let refusal = repair::refusal(provider, &mut attempted, repairs_left).await;
        let attempted = match out.translated.as_ref() {
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
        let mut verdict = classify::verdict(attempted.outcome, wait);
        if provider.config.joined.is_some() {
            verdict = joined::verdict(attempted.outcome, verdict);
        }
        self.observe_speed(provider, &attempted, verdict, patience.timeout);
        Sent { index, attempted, status, wait, verdict, key_label, strip_usage, refusal, endpoint }
    }

    /// The mended request for `refusal`, when the step says to mend it and
    /// mending changes anything.
    fn mend(
        &self,
        provider: &Provider,
        refusal: Repair,
        sent: &Sent,
        out: &repair::Outgoing,
        retry: u32,
        repairs_left: Repairs,
    ) -> Option<(Repair, repair::Outgoing)> {
        let facts = Facts {
            repair: Some(refusal),
            repairs_left,
            ..self.facts(provider, sent.attempted.outcome, sent.wait, retry, sent.key_label.as_deref())
        };
        match step::next(&facts, self.policy) {
            Next::Repair(r) => repair::mend(r, out, self.client(), sent.strip_usage).map(|m| (r, m)),
            _ => None,
        }
    }

    /// How an answer goes to the client: on record as delivered, a stream
    /// translated back when it went translated, tapped, and kept by the
    /// cache where the cache keeps it.
    fn delivery<'c>(
        &mut self,
        candidate: &Candidate<'c>,
        sent: &Sent,
        out: &repair::Outgoing,
        upstream: &Upstream,
    ) -> Delivery<'c> {
        let (status, sse) = (upstream.status, upstream.sse);
        let provider = candidate.provider;
        // A joined team's refusal of the member, said so on this record.
        let refused = provider.config.joined.as_ref().and_then(|_| {
            let code = upstream.headers.get(name::X_SWITCHYARD_ERROR).and_then(|c| c.to_str().ok());
            joined::refusal(sent.attempted.outcome, code)
        });
        self.journal.end(sent.index, attempt_outcome(sent.attempted.outcome), sent.end(refused));
        self.journal.deliver(sent.index, status);
        let mut translator = out.translated.as_ref().and_then(|t| t.stream(sse && status.is_success(), self.head));
        let resume = (super::resume::resumes(self.policy, provider) && sse && status.is_success())
            .then(|| super::resume::Resumer::new(self, provider.name(), candidate.upstream_model, translator.is_none()))
            .flatten();
        if let (Some(_), Some(t)) = (&resume, &mut translator) {
            t.watch();
        }
        Delivery {
            answered: Answered { provider: provider.name(), attempts: self.attempts },
            endpoint: self.inbound.endpoint,
            // A stream is tapped as the provider sent it; a whole
            // translated answer is already in the client's format.
            upstream_endpoint: if translator.is_some() { sent.endpoint } else { self.inbound.endpoint },
            translator,
            idle: self.policy.stream_idle_timeout,
            keepalive: self.policy.stream_keepalive,
            strip_usage: sent.strip_usage,
            journal: self.journal.take(),
            keep: self.cached.and_then(|c| c.keeper(provider.name())),
            resume,
        }
    }

    /// A failed attempt on record, with what went wrong in words.
    pub(super) async fn failed_attempt(&mut self, provider: &Provider, sent: &mut Sent) -> String {
        let detail = match sent.attempted.upstream.take() {
            Some(u) => {
                let status = u.status;
                let reason = status.canonical_reason().unwrap_or("");
                format!("HTTP {} {reason}: {}", status.as_u16(), u.error_text().await)
            }
            None => std::mem::take(&mut sent.attempted.detail),
        };
        self.journal.end(sent.index, attempt_outcome(sent.attempted.outcome), sent.end(Some(detail.clone())));
        self.note(provider.name(), &detail);
        detail
    }

    /// What follows a failed attempt, asked once the verdict is in (a rate
    /// limit has cooled the key by now).
    async fn after(&mut self, provider: &Provider, sent: &Sent, detail: &str, retry: u32) -> After {
        let facts = self.facts(provider, sent.attempted.outcome, sent.wait, retry, sent.key_label.as_deref());
        match step::next(&facts, self.policy) {
            Next::AnotherKey => After::AnotherKey,
            Next::Retry(pause) => {
                self.pause(pause).await;
                After::Retry
            }
            Next::RevokeKey { another } => {
                if let Some(label) = &sent.key_label {
                    provider.revoke_key(label, detail, &self.inbound.ids.request_id);
                }
                if another {
                    After::AnotherKey
                } else {
                    After::Done(Tried::Failed)
                }
            }
            Next::AnotherProvider(why) => {
                self.out_of_time |= why == GiveUp::OutOfTime;
                After::Done(Tried::Failed)
            }
            // What classify delivers took its way above, and a repair was
            // asked about there.
            Next::Deliver | Next::Repair(_) => After::Done(Tried::Failed),
        }
    }

    /// What the team says to an attempt at `candidate` holding `ticket`:
    /// its caps, rate buckets and budgets, in one round trip. The tokens
    /// reserved are the prompt and the output limit; the spend reserved is
    /// what they would cost at the provider's prices. Budget counters a
    /// Redis restart lost are seeded from the history first, then asked
    /// again. A provider full across the team that has a queue keeps the
    /// request in its line across the team ([`super::line`]) until its turn.
    /// Also the budgets asked about, to name one that refuses: none when
    /// the team asked for none (a gateway alone builds nothing here).
    async fn team_gate(&mut self, ticket: &mut Ticket, candidate: &Candidate<'_>) -> (TeamGate, Vec<Covering>) {
        let output = self.head.max_output.unwrap_or(0);
        let estimate = self.tokens.saturating_add(output);
        let (mut covering, mut line) = (Vec::new(), None);
        let mut gate = ticket
            .team_admit(estimate, || {
                covering = self.covering(candidate, output);
                line = self.line(candidate.provider);
                (asks(&covering), line.clone())
            })
            .await;
        if let TeamGate::Unseeded(missing) = &gate {
            self.gateway.seed_team_spend(&covering, missing).await;
            gate = ticket.team_admit(estimate, || (asks(&covering), line.clone())).await;
        }
        if let (TeamGate::Queued { .. }, Some(line)) = (&gate, line) {
            let since = Instant::now();
            gate = self.wait_in_line(ticket, candidate.provider, line, estimate, &covering).await;
            self.journal.waited(candidate.provider.name(), "team_queue", since.elapsed());
        }
        (gate, covering)
    }

    /// The budgets that cover an attempt at `candidate`, each reserving
    /// what its prompt and `output` tokens would cost at its prices.
    pub(super) fn covering(&self, candidate: &Candidate<'_>, output: u64) -> Vec<Covering> {
        let (provider, model) = (candidate.provider.name(), candidate.upstream_model);
        let usage = Usage {
            input_tokens: Some(self.tokens),
            output_tokens: Some(output),
            cached_tokens: None,
            cache_write_tokens: None,
        };
        let usd = self.journal.price(provider, model, &usage).unwrap_or(0.0);
        self.gateway.budgets().covering(provider, model, usd, now_ms())
    }

    /// What each attempt asks of a provider's gate.
    pub(super) fn need(&self) -> Need {
        Need { tokens: self.tokens, affinity: self.session.map(crate::session::Session::affinity) }
    }

    async fn pause(&mut self, wait: Duration) {
        tokio::time::sleep(wait).await;
        self.backoff += wait;
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
}

impl<'a> Run<'a> {
    /// The client's response from `upstream`, the answer `sent` brought.
    /// Not an `async fn`, as [`relay::respond`] is not: the future holds
    /// the relay alone, not its makings beside it.
    pub(super) fn deliver(
        &mut self,
        candidate: &Candidate<'_>,
        sent: &Sent,
        out: &repair::Outgoing,
        upstream: Upstream,
        ticket: Ticket,
    ) -> impl std::future::Future<Output = Response<Body>> + Send + 'a {
        let status = upstream.status;
        debug!(provider = candidate.provider.name(), status = status.as_u16(), attempts = self.attempts, "answered");
        let delivery = self.delivery(candidate, sent, out, &upstream);
        let respond = relay::respond(upstream, ticket, sent.verdict, delivery);
        let cached = self.cached;
        async move {
            let mut response = respond.await;
            if let Some(c) = cached {
                c.mark_live(response.headers_mut());
            }
            response
        }
    }
}
