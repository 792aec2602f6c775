//! What one provider's turn passes between its steps ([`super::provider`],
//! [`super::hedge`], [`super::resume`]): the gates' word on an attempt,
//! the attempt on record as begun, and the attempt sent and judged. Kept
//! apart so the steps name these without naming each other.

use std::time::Duration;

use axum::http::StatusCode;

use super::journal::AttemptEnd;
use super::{attempt, Tried};
use crate::ground::outcome::Verdict;
use crate::policy::budget::Covering;
use crate::policy::classify::Repair;
use crate::protocol::Endpoint;
use crate::upstream::provider::Ticket;

/// An attempt on record as begun, with what judging it needs.
pub(super) struct Prepared {
    pub index: usize,
    pub endpoint: Endpoint,
    pub key_label: Option<String>,
    pub strip_usage: bool,
    pub patience: attempt::Patience,
}

/// What the gates said to one attempt.
pub(super) enum Admit {
    Go(Ticket),
    /// Waited (the provider's or the team's rate limit): ask again.
    Again,
    /// Not tried this time.
    Done(Tried),
}

/// One attempt sent and judged, before its answer is delivered or its
/// failure weighed.
pub(super) struct Sent {
    pub index: usize,
    pub attempted: attempt::Attempted,
    /// What the provider said, before a translated answer is rewritten for the client.
    pub status: Option<StatusCode>,
    /// The wait the provider asked for, when it refused.
    pub wait: Option<Duration>,
    pub verdict: Verdict,
    pub key_label: Option<String>,
    /// Whether the gateway asked for stream usage the client did not.
    pub strip_usage: bool,
    /// A refusal the request can be mended for, in the provider's own words.
    pub refusal: Option<Repair>,
    /// The endpoint the attempt went to.
    pub endpoint: Endpoint,
}

impl Sent {
    pub(super) fn end(&self, error: Option<String>) -> AttemptEnd {
        AttemptEnd {
            status: self.status,
            ttfb: self.attempted.ttfb,
            ttft: self.attempted.ttft,
            retry_after: self.wait,
            error,
        }
    }
}

/// The team-wide spend counters `covering` asks to reserve.
pub(super) fn asks(covering: &[Covering]) -> Vec<crate::team::SpendAsk> {
    covering.iter().map(|c| c.ask.clone()).collect()
}
