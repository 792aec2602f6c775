//! What a member's request holds of its budget: the budget engine's scope
//! `member:NAME` ([`crate::policy::budget`]), checked once per request
//! before any provider is considered (the proxy's admit stage),
//! reserving the request's estimated cost until its real cost is recorded.
//!
//! In a team within reach the reservation is the team's (its Redis spend
//! counter, in the same atomic step as the member's requests and tokens a
//! minute), so a budget spent on one instance refuses on every other at
//! once. Alone, or with Redis out of reach, this instance's ledger decides.

use std::sync::Arc;

use crate::ground::clock::now_ms;
use crate::policy::budget::Reserved;
use crate::team::{Held, Used};
use crate::telemetry::Telemetry;

/// What a member's request holds of its budget while it runs. Settled
/// ([`MemberHold::settle`]) once its cost is recorded, and given back when
/// dropped: the ledger's reservation at once, the team's in one round trip
/// (the estimate less the real cost; all of it when nothing was settled).
#[derive(Debug)]
pub struct MemberHold {
    telemetry: Arc<Telemetry>,
    local: Option<Reserved>,
    team: Option<Box<dyn Held>>,
    /// The request's estimated tokens, which the member's token bucket keeps.
    tokens: u64,
    settled: bool,
}

impl MemberHold {
    /// Holds nothing yet, for a request of about `tokens` tokens.
    pub(crate) fn new(telemetry: Arc<Telemetry>, tokens: u64) -> MemberHold {
        MemberHold { telemetry, local: None, team: None, tokens, settled: false }
    }

    /// What the team took (its spend counter's reservation, its buckets).
    pub(crate) fn hold_team(&mut self, held: Option<Box<dyn Held>>) {
        self.team = held;
    }

    /// What this instance's ledger reserved.
    pub(crate) fn hold_local(&mut self, reserved: Option<Reserved>) {
        self.local = reserved;
    }

    /// The request's cost is on record (`None`: it cost nothing known): the
    /// team's counter keeps it in place of the estimate.
    pub fn settle(&mut self, cost_usd: Option<f64>) {
        self.settled = true;
        if let Some(held) = &mut self.team {
            held.settle(Used { tokens: Some(self.tokens), cost_usd: Some(cost_usd.unwrap_or(0.0)) });
        }
    }
}

impl Drop for MemberHold {
    fn drop(&mut self) {
        if let Some(reserved) = self.local.take() {
            self.telemetry.budgets.release(&reserved, now_ms());
        }
        if let Some(held) = self.team.as_mut().filter(|_| !self.settled) {
            // Unsettled (the request never got as far as a cost): the
            // member's tokens are still the estimate's, its spend nothing.
            held.settle(Used { tokens: Some(self.tokens), cost_usd: Some(0.0) });
        }
    }
}
