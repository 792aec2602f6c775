//! A joined team's gateway (`kind = "switchyard"`) and its word on the
//! member. Its refusal of the member — the key revoked (401, 403), the
//! member over budget or over a limit (429) — is the answer: delivered as
//! the team gave it, never served another way, and no sign of the team
//! gateway's health (no breaker failure, no cool-down, no key revoked
//! here). Down or failing (no answer, 5xx), it is a provider like any
//! other, and the team says whether this gateway's own providers may take
//! over ([`crate::config::Joined::allow_local_fallback`]).

use axum::http::StatusCode;

use super::classify::Outcome;
use crate::ground::outcome::Verdict;

/// Whether `outcome` from a joined team's gateway is its final word.
pub fn is_final(outcome: Outcome) -> bool {
    matches!(outcome, Outcome::Status(s) if s == StatusCode::UNAUTHORIZED
        || s == StatusCode::FORBIDDEN
        || s == StatusCode::TOO_MANY_REQUESTS)
}

/// What `outcome` says of the team's gateway: a refusal of the member
/// says nothing of it.
pub fn verdict(outcome: Outcome, verdict: Verdict) -> Verdict {
    if is_final(outcome) {
        Verdict::Neutral
    } else {
        verdict
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::policy::classify;

    #[test]
    fn the_teams_refusals_are_final_and_neutral_its_failures_are_not() {
        for status in [401, 403, 429] {
            let outcome = Outcome::Status(StatusCode::from_u16(status).unwrap_or_default());
            assert!(is_final(outcome), "{status}");
            let said = classify::verdict(outcome, Some(Duration::from_secs(30)));
            assert_eq!(verdict(outcome, said), Verdict::Neutral, "{status}");
        }
        for outcome in [Outcome::Status(StatusCode::BAD_GATEWAY), Outcome::Connect, Outcome::Timeout] {
            assert!(!is_final(outcome), "{outcome:?}");
            let said = classify::verdict(outcome, None);
            assert_eq!(verdict(outcome, said), said, "{outcome:?}");
        }
    }
}
