//! Waiting in a provider's line across the team: when a capped provider
//! is full on every instance, a request joins the team's line for it
//! (ordered by arrival, on the team's clock) and keeps its place by asking
//! again every [`ASK_EVERY`] until it is at the head with a place free,
//! its time runs out, or its client leaves. The line lives in the shared
//! state (`Team::admit` with a [`Line`]); this is the waiting.
//!
//! The wait is bounded like the provider's own queue: no longer than
//! `max_queue_wait`, and not past the deadline less what a fallback needs.
//! A place given up (admitted elsewhere, out of time, the client gone)
//! is left at once; one its instance can no longer give up lapses by
//! itself within seconds.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::Run;
use crate::policy::budget::Covering;
use crate::team::{Admission, Line};
use crate::upstream::provider::{Provider, TeamGate, Ticket};

/// How often a request in line asks for its turn (and keeps its place).
/// Each ask is one round trip to the shared state; the head learns a
/// place has freed within this long.
const ASK_EVERY: Duration = Duration::from_millis(20);

/// A place held in a provider's line, given up when dropped unless the
/// admission already took it out of the line.
struct Place {
    team: Arc<dyn Admission>,
    provider: String,
    ticket: String,
    held: bool,
}

impl Drop for Place {
    fn drop(&mut self) {
        if self.held {
            self.team.leave_line(&self.provider, &self.ticket);
        }
    }
}

impl Run<'_> {
    /// This request's place in `provider`'s line across the team, when
    /// the provider has a queue; the ticket is new for each wait, the
    /// arrival (and so the turn) is the request's.
    pub(super) fn line(&self, provider: &Provider) -> Option<Line> {
        let (capacity, queue) = (provider.capacity(), provider.capacity().policy());
        // Only a cap fills up: a provider without one has nobody in line.
        if queue.max_queue == 0 || (capacity.limit().is_none() && capacity.key_limit().is_none()) {
            return None;
        }
        let arrived = self.deadline.at.checked_sub(self.deadline.budget)?;
        Some(Line {
            ticket: uuid::Uuid::now_v7().to_string(),
            max_queue: queue.max_queue,
            age_ms: u64::try_from(arrived.elapsed().as_millis()).unwrap_or(u64::MAX),
        })
    }

    /// Keeps `line`'s place in `provider`'s line, asking every
    /// [`ASK_EVERY`], until the team admits the attempt (or says something
    /// other than "wait your turn"). Out of time: [`TeamGate::Waited`].
    pub(super) async fn wait_in_line(
        &mut self,
        ticket: &mut Ticket,
        provider: &Provider,
        line: Line,
        estimate: u64,
        covering: &[Covering],
    ) -> TeamGate {
        let team = self.gateway.team().clone() as Arc<dyn Admission>;
        let mut place = Place { team, provider: provider.name().to_string(), ticket: line.ticket.clone(), held: true };
        let start = Instant::now();
        let by_deadline = self.deadline.at.checked_sub(self.policy.min_fallback_budget).unwrap_or(self.deadline.at);
        let until = by_deadline.min(start + provider.capacity().policy().max_wait);
        loop {
            if Instant::now() + ASK_EVERY >= until {
                return TeamGate::Waited(start.elapsed());
            }
            tokio::time::sleep(ASK_EVERY).await;
            match ticket.team_admit(estimate, || (super::turn::asks(covering), Some(line.clone()))).await {
                TeamGate::Queued { .. } => {}
                gate => {
                    // Admitted: the same step took the place out of the line.
                    place.held = gate != TeamGate::Go;
                    return gate;
                }
            }
        }
    }
}
