//! Hedged first bytes ([`crate::policy::hedge`]): a provider's first
//! attempt whose first byte is late is raced by the chain's next
//! candidate, started alongside once every rule that would govern it as a
//! fallback lets it go now. The first to answer is kept and the other let
//! go at once: its connection closed and its slot, lease and key returned,
//! on record as `hedged`. A failure on either side leaves the other
//! running; with both failed the chain goes on past them.

use std::pin::pin;
use std::time::Duration;

use tokio::time::Instant;
use tracing::debug;

use super::journal::AttemptEnd;
use super::turn::{Prepared, Sent};
use super::{attempt, repair, Run, Tried};
use crate::ground::clock::now_ms;
use crate::ground::outcome::{AttemptOutcome, Reason};
use crate::policy::classify;
use crate::policy::hedge::Hedge;
use crate::policy::step::Repairs;
use crate::upstream::provider::{Gate, TeamGate, Ticket};
use crate::upstream::routing::Candidate;

/// How a hedged first attempt came out. The primary's is the common way,
/// and goes on by value.
#[allow(clippy::large_enum_variant)]
pub(super) enum Raced {
    /// The primary's attempt, judged, to go on as any attempt does: no
    /// hedge started, the primary answered first, or the hedge failed.
    Primary(Sent),
    /// The hedge answered first.
    Partner(Box<Won>),
}

/// A hedge that answered first, ready to deliver.
pub(super) struct Won {
    pub sent: Sent,
    pub ticket: Ticket,
    pub out: repair::Outgoing,
    /// The primary's attempt, when it had failed before: its failure is
    /// the primary's to record. `None`: it was let go, on record already.
    pub primary_failed: Option<Sent>,
}

/// What became of the chain's next candidate in a provider's turn, for
/// the walk down the chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PartnerTurn {
    /// It answered the request.
    Won,
    /// It was tried as a hedge and failed: the chain goes on past it.
    Failed,
}

/// A hedge started: its attempt, its ticket and what it sends.
struct Started {
    ticket: Ticket,
    out: repair::Outgoing,
    prepared: Prepared,
    request: axum::http::Request<http_body_util::Full<bytes::Bytes>>,
}

/// Which attempt of the race finished.
enum First {
    Primary(attempt::Attempted),
    Hedge(attempt::Attempted),
}

impl Run<'_> {
    /// The first attempt at `candidate`, hedged with `partner` when its
    /// first byte is later than the route's `hedge_after` allows.
    pub(super) async fn hedged(
        &mut self,
        candidate: &Candidate<'_>,
        ticket: &mut Ticket,
        out: &repair::Outgoing,
        partner: &Candidate<'_>,
        repairs_left: Repairs,
        timeout: Duration,
    ) -> Raced {
        let provider = candidate.provider;
        let Some(hedge) = self.policy.hedge else {
            return Raced::Primary(self.send(candidate, ticket, out, 0, repairs_left, timeout).await);
        };
        let streamed = self.head.stream;
        let telemetry = self.gateway.telemetry();
        let delay = hedge.after.delay(|| telemetry.recent_p95(provider.name(), streamed)).filter(|d| *d < timeout);
        let reason = self.reason(provider, ticket, 0);
        let (prepared, request) = self.prepare(candidate, ticket, out, reason, timeout).await;
        let gateway = self.gateway;
        // The race's own: the run's is borrowed by neither attempt, so the
        // hedge can be started while the primary's attempt is pending.
        let scrub = self.scrub.another();
        let mut primary = pin!(attempt::run(gateway.client(), request, prepared.endpoint, prepared.patience, &scrub));
        let Some(delay) = delay else {
            let attempted = primary.await;
            return Raced::Primary(self.judge(candidate, out, prepared, attempted, repairs_left).await);
        };
        let since = Instant::now();
        let late = tokio::select! {
            biased;
            attempted = &mut primary => Err(attempted),
            () = tokio::time::sleep(delay) => Ok(()),
        };
        let started = match late {
            Ok(()) => tokio::select! {
                biased;
                attempted = &mut primary => Err(attempted),
                started = self.start_hedge(partner, hedge) => Ok(started),
            },
            Err(attempted) => Err(attempted),
        };
        let started = match started {
            Ok(Some(started)) => started,
            Ok(None) => {
                let attempted = primary.await;
                return Raced::Primary(self.judge(candidate, out, prepared, attempted, repairs_left).await);
            }
            Err(attempted) => {
                return Raced::Primary(self.judge(candidate, out, prepared, attempted, repairs_left).await);
            }
        };
        debug!(provider = provider.name(), hedge = partner.provider.name(), after = ?since.elapsed(), "hedged");
        let Started { ticket: mut hedge_ticket, out: hedge_out, prepared: hedge_prepared, request } = started;
        let hedge_index = hedge_prepared.index;
        let mut hedging =
            pin!(attempt::run(gateway.client(), request, hedge_prepared.endpoint, hedge_prepared.patience, &scrub));
        let first = tokio::select! {
            biased;
            attempted = &mut primary => First::Primary(attempted),
            attempted = &mut hedging => First::Hedge(attempted),
        };
        let partner_repairs = repair::allowed(partner.provider);
        match first {
            First::Primary(attempted) if classify::delivers(attempted.outcome) => {
                self.let_go(hedge_index, candidate.provider.name(), since);
                drop(hedge_ticket);
                Raced::Primary(self.judge(candidate, out, prepared, attempted, repairs_left).await)
            }
            First::Primary(attempted) => {
                let failed = self.judge(candidate, out, prepared, attempted, repairs_left).await;
                let attempted = hedging.await;
                let sent = self.judge(partner, &hedge_out, hedge_prepared, attempted, partner_repairs).await;
                if classify::delivers(sent.attempted.outcome) {
                    let won = Won { sent, ticket: hedge_ticket, out: hedge_out, primary_failed: Some(failed) };
                    return Raced::Partner(Box::new(won));
                }
                self.hedge_failed(partner, &mut hedge_ticket, sent).await;
                Raced::Primary(failed)
            }
            First::Hedge(attempted) if classify::delivers(attempted.outcome) => {
                let index = prepared.index;
                // A primary this slow is at least this slow: the strategies hear so.
                provider.recent().observe(streamed, since.elapsed() + delay);
                self.let_go(index, partner.provider.name(), since);
                let sent = self.judge(partner, &hedge_out, hedge_prepared, attempted, partner_repairs).await;
                Raced::Partner(Box::new(Won { sent, ticket: hedge_ticket, out: hedge_out, primary_failed: None }))
            }
            First::Hedge(attempted) => {
                let sent = self.judge(partner, &hedge_out, hedge_prepared, attempted, partner_repairs).await;
                self.hedge_failed(partner, &mut hedge_ticket, sent).await;
                let attempted = primary.await;
                Raced::Primary(self.judge(candidate, out, prepared, attempted, repairs_left).await)
            }
        }
    }

    /// Starts `partner` as a hedge when every rule lets it go now, as a
    /// fallback would: the route's share of hedges, time for it in the
    /// deadline, its budgets, its share of fallbacks, its breaker, caps and
    /// rate limits and the team's, none of them waited for. A hedge held
    /// back is counted as `withheld`.
    async fn start_hedge(&mut self, partner: &Candidate<'_>, hedge: Hedge) -> Option<Started> {
        let provider = partner.provider;
        let now = Instant::now();
        let timeout = self.deadline.attempt_timeout(self.policy.attempt_timeout, now);
        let may = self.deadline.allows_fallback(self.policy.min_fallback_budget, now)
            && !timeout.is_zero()
            && self.gateway.budgets().admit(provider.name(), partner.upstream_model, now_ms()).is_ok()
            && provider.allows_fallback();
        let out = may.then(|| self.outgoing(partner).ok()).flatten();
        let ticket = match out.as_ref().map(|_| {
            provider.gate(self.need(), &self.deadline, self.policy.max_retry_wait, self.policy.min_fallback_budget)
        }) {
            Some(Gate::Go(ticket)) => Some(ticket),
            _ => None,
        };
        let (Some(out), Some(mut ticket)) = (out, ticket) else {
            self.gateway.telemetry().metrics.hedge(provider.name(), "withheld");
            return None;
        };
        let output = self.head.max_output.unwrap_or(0);
        let estimate = self.tokens.saturating_add(output);
        let covering = self.covering(partner, output);
        let gate = ticket.team_admit(estimate, || (super::turn::asks(&covering), None)).await;
        // Taken last, so that a hedge the rules hold back takes none of the share.
        if !matches!(gate, TeamGate::Go) || !self.route.hedges.take(hedge.max_share) {
            self.gateway.telemetry().metrics.hedge(provider.name(), "withheld");
            return None;
        }
        ticket.caused_by(&self.inbound.ids.request_id);
        provider.note_fallback();
        let (prepared, request) = self.prepare(partner, &ticket, &out, Reason::Hedge, timeout).await;
        Some(Started { ticket, out, prepared, request })
    }

    /// The hedge answered first: the primary's failure, if it had one, on
    /// record, its ticket returned, and the hedge's answer delivered.
    pub(super) async fn partner_won(
        &mut self,
        candidate: &Candidate<'_>,
        partner: &Candidate<'_>,
        mut ticket: Ticket,
        won: Won,
    ) -> Tried {
        let Won { mut sent, ticket: hedge_ticket, out, primary_failed } = won;
        if let Some(mut failed) = primary_failed {
            ticket.record(failed.verdict);
            self.failed_attempt(candidate.provider, &mut failed).await;
        }
        drop(ticket);
        self.partner = Some(PartnerTurn::Won);
        match sent.attempted.upstream.take() {
            Some(upstream) => Tried::Answered(self.deliver(partner, &sent, &out, upstream, hedge_ticket).await),
            // What delivers has an answer; should it not, the hedge failed.
            None => {
                let mut hedge_ticket = hedge_ticket;
                self.hedge_failed(partner, &mut hedge_ticket, sent).await;
                Tried::Failed
            }
        }
    }

    /// The attempt at `index` let go unanswered: `winner` answered first.
    fn let_go(&mut self, index: usize, winner: &str, since: Instant) {
        let waited = humantime::format_duration(Duration::from_millis(since.elapsed().as_millis() as u64));
        let error = Some(format!("let go: {winner} answered first, {waited} into the hedge"));
        let end = AttemptEnd { status: None, ttfb: None, ttft: None, retry_after: None, error };
        self.journal.end(index, AttemptOutcome::Hedged, end);
    }

    /// A hedge that failed: on record, its provider's verdict given, and
    /// the walk told to go on past it.
    async fn hedge_failed(&mut self, partner: &Candidate<'_>, ticket: &mut Ticket, mut sent: Sent) {
        ticket.record(sent.verdict);
        self.failed_attempt(partner.provider, &mut sent).await;
        self.partner = Some(PartnerTurn::Failed);
    }
}
