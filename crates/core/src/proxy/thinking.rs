//! Thinking that follows its owner: a provider verifies only the reasoning
//! signatures it made itself. Reasoning from another family travels in the
//! gateway's envelopes and is opened or removed by family
//! ([`crate::protocol::translate::envelope`]); reasoning from a provider of
//! the same family reaches the client raw, so the gateway knows its maker
//! only by the session ([`crate::policy::stick::Reasoning`]). A session's
//! request loses the raw blocks its provider did not make before it is
//! sent, instead of after the provider has refused them (the repair on
//! that refusal stays, for sessions the gateway does not know).

use tokio::time::Instant;

use crate::gateway::Gateway;
use crate::session::Session;
use crate::upstream::provider::Provider;

/// What an attempt whose body lost them says, among its dropped fields.
pub(super) const REMOVED: &str =
    "thinking: removed: signed by another provider (this session's last), which this one cannot verify";

/// Who made the reasoning a session's request carries, as it goes to one
/// provider.
pub(super) struct Owners {
    target: String,
    reasoning: Option<crate::policy::stick::Reasoning>,
}

impl Owners {
    pub(super) fn of(gateway: &Gateway, session: Option<&Session>, provider: &Provider) -> Owners {
        let target = provider.signer();
        let reasoning = session.and_then(|s| gateway.conversations().reasoning(&s.id, &target, Instant::now()));
        Owners { target, reasoning }
    }

    /// Whether any of the body's raw reasoning may be another's: the
    /// session has been served by a signer other than this provider. A
    /// session only ever served by it (most) costs no look at the body.
    pub(super) fn mixed(&self) -> bool {
        self.reasoning.is_some()
    }

    /// Whether this provider made the raw signed value `raw`.
    pub(super) fn made_here(&self, raw: &str) -> bool {
        self.reasoning.as_ref().is_none_or(|r| r.maker(raw) == self.target)
    }
}
