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

/// The team's refusal of the member in words, for this gateway's record:
/// the team's own error code (`x-switchyard-error`) read where it gives one.
pub fn refusal(outcome: Outcome, code: Option<&str>) -> Option<String> {
    if !is_final(outcome) {
        return None;
    }
    let said = match code {
        Some("key_revoked") => "revoked by the team",
        Some("key_expired") => "the member key expired on the team",
        Some("budget_exceeded") => "over the team's budget",
        Some("rate_limited") => "over the team's rate limit",
        Some("model_not_allowed") => "the team does not offer the member this model",
        _ if outcome == Outcome::Status(StatusCode::TOO_MANY_REQUESTS) => "over the team's budget or limits",
        _ => "refused by the team",
    };
    Some(said.to_string())
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
        let revoked = Outcome::Status(StatusCode::UNAUTHORIZED);
        assert_eq!(refusal(revoked, Some("key_revoked")).as_deref(), Some("revoked by the team"));
        let over = Outcome::Status(StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(refusal(over, Some("budget_exceeded")).as_deref(), Some("over the team's budget"));
        assert_eq!(refusal(over, None).as_deref(), Some("over the team's budget or limits"));
        for outcome in [Outcome::Status(StatusCode::BAD_GATEWAY), Outcome::Connect, Outcome::Timeout] {
            assert_eq!(refusal(outcome, Some("key_revoked")), None);
            assert!(!is_final(outcome), "{outcome:?}");
            let said = classify::verdict(outcome, None);
            assert_eq!(verdict(outcome, said), said, "{outcome:?}");
        }
    }
}
