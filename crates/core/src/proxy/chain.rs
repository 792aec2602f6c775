//! Going down a request's chain: each candidate in order, fallbacks only
//! with time left and within their share, and, when nobody can take the
//! request now, a wait in the queue of the provider that frees up first.
//!
//! A queued attempt is an attempt like any other: when it fails, the
//! request goes on down the chain, and the candidates that were busy are
//! asked again (those free by then are tried, the others may be queued
//! for in turn), all within the one deadline.

use axum::body::Body;
use axum::http::Response;
use tokio::time::Instant;

use super::hedge::PartnerTurn;
use super::{Run, Tried};
use crate::ground::clock::now_ms;
use crate::policy::queue::earliest;
use crate::upstream::provider::{Pass, Provider};
use crate::upstream::routing::Candidate;

impl Run<'_> {
    /// Walks `candidates` in order, then waits for the busy ones' queues:
    /// the answer, or none when no provider gave one.
    pub(super) async fn chain<'c>(&mut self, candidates: &'c [Candidate<'c>]) -> Option<Response<Body>> {
        for candidate in candidates {
            candidate.provider.note_planned();
        }
        if self.policy.hedge.is_some() {
            self.route.hedges.request();
        }
        // Candidates passed over only for want of capacity, in chain order.
        let mut busy = Vec::new();
        if let Some(response) = self.walk(candidates.iter(), &mut busy).await {
            return Some(response);
        }
        self.wait_for_capacity(busy).await
    }

    /// Tries `candidates` in chain order until one answers. Those passed
    /// over only for want of capacity are added to `busy`, in order. Each
    /// provider's turn may start the next candidate as its hedge: one
    /// that answered is counted so, one that failed is passed.
    async fn walk<'c>(
        &mut self,
        candidates: impl Iterator<Item = &'c Candidate<'c>> + Send,
        busy: &mut Vec<&'c Candidate<'c>>,
    ) -> Option<Response<Body>> {
        let mut candidates = candidates.peekable();
        while let Some(candidate) = candidates.next() {
            let provider = candidate.provider;
            if let Err(blocked) = self.gateway.budgets().admit(provider.name(), candidate.upstream_model, now_ms()) {
                self.blocked(candidate, blocked);
                continue;
            }
            if self.last_failed.is_some() && !self.may_fall_back(provider) {
                if self.out_of_time {
                    break;
                }
                continue;
            }
            let partner = candidates.peek().copied();
            let tried = self.provider(candidate, None, partner).await;
            let (partner_turn, partner) = (self.partner.take(), partner.map(|p| p.provider));
            match tried {
                Tried::Answered(response) => {
                    let by = partner.filter(|_| partner_turn == Some(PartnerTurn::Won)).unwrap_or(provider);
                    self.answered(by, &response);
                    return Some(response);
                }
                Tried::Failed => self.failed(provider),
                Tried::Passed => {}
                Tried::Refused(why) => self.refused.push(why),
                Tried::Busy => busy.push(candidate),
            }
            if let (Some(PartnerTurn::Failed), Some(partner)) = (partner_turn, partner) {
                candidates.next();
                self.failed(partner);
            }
        }
        None
    }

    /// Waits for the busy candidate expected to free up first, then tries
    /// it. If its queue refuses the request or its attempt fails, the
    /// others go on as after any failure: walked again, and queued for
    /// while some are still busy. Each turn takes one candidate out of
    /// `busy` for good, so the loop ends.
    async fn wait_for_capacity<'c>(&mut self, mut busy: Vec<&'c Candidate<'c>>) -> Option<Response<Body>> {
        while !busy.is_empty() && !self.out_of_time {
            let waits = busy.iter().map(|c| c.provider.capacity().expected_wait());
            let candidate = busy.remove(earliest(waits)?);
            let provider = candidate.provider;
            if self.last_failed.is_some() && !self.may_fall_back(provider) {
                continue;
            }
            match self.queued(candidate).await {
                Tried::Answered(response) => {
                    self.answered(provider, &response);
                    return Some(response);
                }
                Tried::Failed => self.failed(provider),
                Tried::Refused(why) => self.refused.push(why),
                Tried::Passed | Tried::Busy => {}
            }
            let rest = std::mem::take(&mut busy);
            if let Some(response) = self.walk(rest.into_iter(), &mut busy).await {
                return Some(response);
            }
        }
        None
    }

    /// `provider` answered: the route counts it and, when the answer is a
    /// success, the session is its for a while ([`crate::policy::stick`]).
    fn answered(&mut self, provider: &Provider, response: &Response<Body>) {
        self.route.answered(provider.name());
        if let Some(session) = self.session.filter(|_| response.status().is_success()) {
            let signer = provider.signer();
            self.gateway.conversations().served(&session.id, provider.name(), &signer, Instant::now());
        }
    }

    /// `provider` failed this request: the next is a fallback, and the
    /// session no longer sticks to it.
    fn failed(&mut self, provider: &Provider) {
        self.last_failed = Some(provider.name().to_string());
        if let Some(session) = self.session {
            self.gateway.conversations().failed(&session.id, provider.name());
        }
    }

    /// Waits in `candidate`'s queue within the deadline (less what a
    /// fallback needs), then tries it with the slot the wait won. A client
    /// that leaves drops this future and its place in line.
    async fn queued(&mut self, candidate: &Candidate<'_>) -> Tried {
        let provider = candidate.provider;
        let until = self.deadline.at.checked_sub(self.policy.min_fallback_budget).unwrap_or(self.deadline.at);
        let (need, deadline, min) = (self.need(), self.deadline, self.policy.min_fallback_budget);
        let since = Instant::now();
        let waited = provider.capacity().wait(until, || provider.ready(need, &deadline, min)).await;
        self.journal.waited(provider.name(), "queue", since.elapsed());
        match waited {
            Ok((permit, mut ticket)) => {
                ticket.hold(permit);
                self.provider(candidate, Some(ticket), None).await
            }
            Err(refusal) => {
                self.note(provider.name(), &format!("not queued: {refusal}"));
                Tried::Passed
            }
        }
    }

    /// Whether `provider` may take the request as a fallback: enough of the
    /// deadline left (else the request is out of time), and its share of
    /// fallback traffic not taken.
    pub(super) fn may_fall_back(&mut self, provider: &Provider) -> bool {
        if !self.deadline.allows_fallback(self.policy.min_fallback_budget, Instant::now()) {
            self.out_of_time = true;
            self.note(provider.name(), "not tried: too little time left for a fallback");
            return false;
        }
        if !provider.allows_fallback() {
            self.note(provider.name(), &format!("not tried: {}", Pass::FallbackShare));
            return false;
        }
        true
    }
}
