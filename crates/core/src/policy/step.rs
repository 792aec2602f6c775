//! The retry decision in one place. After each attempt on a provider, [`next`]
//! says what the request does next: deliver the answer, retry after a wait,
//! go on with another key, send a repaired request once, or give this
//! provider up (and why). It is pure:
//! the loop in [`crate::proxy`] gathers the facts, asks, and carries the
//! answer out; [`crate::policy::classify`] is what it asks about the outcome.

use std::time::Duration;

use tokio::time::Instant;

use super::deadline::Deadline;
use super::RequestPolicy;
use crate::policy::classify::{self, Decision, Outcome, Repair};

/// What is known once an attempt has ended.
#[derive(Debug, Clone, Copy)]
pub struct Facts<'a> {
    pub outcome: Outcome,
    /// A wait the provider asked for (`retry-after`, rate-limit resets).
    pub requested_wait: Option<Duration>,
    /// Retries already spent on this provider.
    pub retries: u32,
    /// What the next retry sleeps when the provider asks for no wait.
    pub backoff: Duration,
    pub keys: Keys,
    pub deadline: &'a Deadline,
    pub now: Instant,
    /// What the provider's error says a changed request would fix
    /// ([`classify::repair`]).
    pub repair: Option<Repair>,
    /// The repairs this request may still make on this provider.
    pub repairs_left: Repairs,
}

/// A set of [`Repair`]s: each is made at most once per request and
/// provider, and only where the provider's profile allows it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Repairs {
    strip_thinking: bool,
    without_stream_options: bool,
}

impl Repairs {
    /// The set of `repairs`.
    pub fn of(repairs: &[Repair]) -> Repairs {
        let mut set = Repairs::default();
        for r in repairs {
            *set.slot(*r) = true;
        }
        set
    }

    pub fn has(self, repair: Repair) -> bool {
        match repair {
            Repair::StripThinking => self.strip_thinking,
            Repair::WithoutStreamOptions => self.without_stream_options,
        }
    }

    /// Takes `repair` out: it has been made.
    pub fn spend(&mut self, repair: Repair) {
        *self.slot(repair) = false;
    }

    fn slot(&mut self, repair: Repair) -> &mut bool {
        match repair {
            Repair::StripThinking => &mut self.strip_thinking,
            Repair::WithoutStreamOptions => &mut self.without_stream_options,
        }
    }
}

/// The provider's keys, as far as the next step cares.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Keys {
    /// The attempt carried a key from the provider's pool.
    pub used: bool,
    /// Another key could go at once (none refused, none cooling down).
    pub another_ready: bool,
    /// A key would be left if the one used were refused.
    pub another_usable: bool,
}

/// What the request does next with this provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Hand the answer to the client: a success, or an error only the client can fix.
    Deliver,
    /// The same provider again after this wait; a retry is spent.
    Retry(Duration),
    /// The same provider at once with another key (only the key was rate-limited); no retry is spent.
    AnotherKey,
    /// The same provider and key at once, with the request changed as the
    /// refusal asked; a retry is spent.
    Repair(Repair),
    /// The provider refused the key: revoke it, then go on with another
    /// key at once if `another`, else give the provider up.
    RevokeKey { another: bool },
    /// Done with this provider: the chain's next one may go.
    AnotherProvider(GiveUp),
}

/// Why a provider is given up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GiveUp {
    /// Trying this provider again cannot help (classify says fall back).
    NotRetryable,
    RetriesSpent,
    /// The wait before a retry would cost more than moving on.
    WaitTooLong,
    /// The request's deadline ran out during the attempt.
    OutOfTime,
    /// The provider refused the gateway's credentials and no other key is left.
    KeyRefused,
}

/// The next step after an attempt.
pub fn next(facts: &Facts<'_>, policy: &RequestPolicy) -> Next {
    let decision = classify::decide(facts.outcome, policy.retry_timeouts);
    match decision {
        Decision::Deliver => return Next::Deliver,
        // Only the client can fix it, unless the provider named something
        // the gateway itself put there, or can do without.
        Decision::Fail => {
            return match facts.repair.filter(|r| facts.repairs_left.has(*r)) {
                Some(r) => Next::Repair(r),
                None => Next::Deliver,
            }
        }
        Decision::RevokeKey if facts.keys.used => return Next::RevokeKey { another: facts.keys.another_usable },
        Decision::RevokeKey => return Next::AnotherProvider(GiveUp::KeyRefused),
        Decision::Retry | Decision::Fallback => {}
    }
    if facts.outcome == Outcome::Timeout && facts.deadline.expired(facts.now) {
        return Next::AnotherProvider(GiveUp::OutOfTime);
    }
    if classify::is_rate_limit(facts.outcome) && facts.keys.used && facts.keys.another_ready {
        // Only this key is limited: the pool's next key goes at once.
        return Next::AnotherKey;
    }
    if decision != Decision::Retry {
        return Next::AnotherProvider(GiveUp::NotRetryable);
    }
    if facts.retries >= policy.max_retries {
        return Next::AnotherProvider(GiveUp::RetriesSpent);
    }
    let pause = facts.requested_wait.unwrap_or(facts.backoff);
    if !may_wait(pause, facts.deadline, policy.max_retry_wait, policy.min_fallback_budget, facts.now) {
        return Next::AnotherProvider(GiveUp::WaitTooLong);
    }
    Next::Retry(pause)
}

/// Whether waiting `wait` (before a retry, or for a provider's throttle) is
/// worth it: no longer than `max_wait`, and leaving `min_budget` of the
/// deadline for the attempt after it.
pub fn may_wait(wait: Duration, deadline: &Deadline, max_wait: Duration, min_budget: Duration, now: Instant) -> bool {
    wait <= max_wait && deadline.allows_wait(wait, min_budget, now)
}

#[cfg(test)]
mod tests {
    use axum::http::{HeaderMap, StatusCode};

    use super::*;

    fn policy() -> RequestPolicy {
        RequestPolicy {
            max_retries: 2,
            max_retry_wait: Duration::from_secs(10),
            min_fallback_budget: Duration::from_secs(2),
            ..RequestPolicy::default()
        }
    }

    fn status(code: u16) -> Outcome {
        Outcome::Status(StatusCode::from_u16(code).unwrap())
    }

    /// A deadline of `secs` from now.
    fn deadline(secs: u64) -> Deadline {
        Deadline::for_request(&HeaderMap::new(), Duration::from_secs(secs), Instant::now())
    }

    fn after(outcome: Outcome, deadline: &Deadline) -> Facts<'_> {
        Facts {
            outcome,
            requested_wait: None,
            retries: 0,
            backoff: Duration::from_millis(250),
            keys: Keys::default(),
            deadline,
            now: Instant::now(),
            repair: None,
            repairs_left: Repairs::default(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_refusal_the_gateway_can_mend_is_repaired_once_and_only_where_allowed() {
        let d = deadline(60);
        let both = Repairs::of(&[Repair::StripThinking, Repair::WithoutStreamOptions]);
        let refused = |repair, left| Facts { repair, repairs_left: left, ..after(status(400), &d) };
        let strip = Some(Repair::StripThinking);
        assert_eq!(next(&refused(strip, both), &policy()), Next::Repair(Repair::StripThinking));
        let none_retries = RequestPolicy { max_retries: 0, ..policy() };
        assert_eq!(next(&refused(strip, both), &none_retries), Next::Repair(Repair::StripThinking));
        let mut spent = both;
        spent.spend(Repair::StripThinking);
        assert!(!spent.has(Repair::StripThinking) && spent.has(Repair::WithoutStreamOptions));
        assert_eq!(next(&refused(strip, spent), &policy()), Next::Deliver, "once: the second refusal is the client's");
        let options = Some(Repair::WithoutStreamOptions);
        assert_eq!(next(&refused(options, Repairs::default()), &policy()), Next::Deliver, "the profile allows none");
        assert_eq!(next(&refused(None, both), &policy()), Next::Deliver);
        let ok = Facts { repair: strip, repairs_left: both, ..after(status(200), &d) };
        assert_eq!(next(&ok, &policy()), Next::Deliver);
    }

    #[tokio::test(start_paused = true)]
    async fn answers_are_delivered_and_client_errors_handed_on() {
        let d = deadline(60);
        assert_eq!(next(&after(status(200), &d), &policy()), Next::Deliver);
        assert_eq!(next(&after(status(400), &d), &policy()), Next::Deliver);
        assert_eq!(next(&after(status(422), &d), &policy()), Next::Deliver);
    }

    #[tokio::test(start_paused = true)]
    async fn a_retryable_failure_is_retried_after_the_backoff_until_the_retries_are_spent() {
        let d = deadline(60);
        let first = after(status(503), &d);
        assert_eq!(next(&first, &policy()), Next::Retry(Duration::from_millis(250)));
        assert_eq!(next(&Facts { retries: 1, ..first }, &policy()), Next::Retry(Duration::from_millis(250)));
        assert_eq!(next(&Facts { retries: 2, ..first }, &policy()), Next::AnotherProvider(GiveUp::RetriesSpent));
        let none = RequestPolicy { max_retries: 0, ..policy() };
        assert_eq!(next(&first, &none), Next::AnotherProvider(GiveUp::RetriesSpent));
    }

    #[tokio::test(start_paused = true)]
    async fn the_providers_own_wait_replaces_the_backoff_unless_it_is_too_long() {
        let d = deadline(60);
        let asked = |secs| Facts { requested_wait: Some(Duration::from_secs(secs)), ..after(status(429), &d) };
        assert_eq!(next(&asked(3), &policy()), Next::Retry(Duration::from_secs(3)));
        assert_eq!(next(&asked(11), &policy()), Next::AnotherProvider(GiveUp::WaitTooLong), "past max_retry_wait");
    }

    #[tokio::test(start_paused = true)]
    async fn a_retry_must_leave_time_for_its_attempt() {
        let d = deadline(10);
        let wait = Facts { requested_wait: Some(Duration::from_secs(5)), ..after(status(503), &d) };
        assert_eq!(next(&wait, &policy()), Next::Retry(Duration::from_secs(5)));
        tokio::time::advance(Duration::from_secs(4)).await;
        let later = Facts { now: Instant::now(), ..wait };
        assert_eq!(next(&later, &policy()), Next::AnotherProvider(GiveUp::WaitTooLong), "5 s + 2 s left for 6 s");
    }

    #[tokio::test(start_paused = true)]
    async fn a_timeout_falls_back_unless_the_route_retries_them_and_ends_all_when_time_is_up() {
        let d = deadline(60);
        let timed_out = after(Outcome::Timeout, &d);
        assert_eq!(next(&timed_out, &policy()), Next::AnotherProvider(GiveUp::NotRetryable));
        let retrying = RequestPolicy { retry_timeouts: true, ..policy() };
        assert_eq!(next(&timed_out, &retrying), Next::Retry(Duration::from_millis(250)));
        tokio::time::advance(Duration::from_secs(60)).await;
        let expired = Facts { now: Instant::now(), ..timed_out };
        assert_eq!(next(&expired, &retrying), Next::AnotherProvider(GiveUp::OutOfTime));
    }

    #[tokio::test(start_paused = true)]
    async fn a_broken_connection_or_stream_is_not_sent_again() {
        let d = deadline(60);
        for outcome in [Outcome::Transport, Outcome::StreamDropped, status(501)] {
            assert_eq!(
                next(&after(outcome, &d), &policy()),
                Next::AnotherProvider(GiveUp::NotRetryable),
                "{outcome:?}"
            );
        }
        for outcome in [Outcome::Connect, Outcome::StreamError] {
            assert!(matches!(next(&after(outcome, &d), &policy()), Next::Retry(_)), "{outcome:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_refused_key_is_revoked_and_another_tried_while_one_is_left() {
        let d = deadline(60);
        let refused = |keys| Facts { keys, ..after(status(401), &d) };
        let pool = Keys { used: true, another_ready: true, another_usable: true };
        assert_eq!(next(&refused(pool), &policy()), Next::RevokeKey { another: true });
        let last = Keys { used: true, another_ready: false, another_usable: false };
        assert_eq!(next(&refused(last), &policy()), Next::RevokeKey { another: false });
        assert_eq!(
            next(&refused(Keys::default()), &policy()),
            Next::AnotherProvider(GiveUp::KeyRefused),
            "no key to revoke"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_rate_limited_key_makes_way_for_a_ready_one_without_spending_a_retry() {
        let d = deadline(60);
        let limited = |keys| Facts { keys, retries: 2, ..after(status(429), &d) };
        let pool = Keys { used: true, another_ready: true, another_usable: true };
        assert_eq!(next(&limited(pool), &policy()), Next::AnotherKey);
        let all_cooling = Keys { another_ready: false, ..pool };
        assert_eq!(next(&limited(all_cooling), &policy()), Next::AnotherProvider(GiveUp::RetriesSpent));
    }

    #[tokio::test(start_paused = true)]
    async fn a_throttle_is_waited_for_only_when_short_and_in_time() {
        let d = deadline(10);
        let (max, min) = (Duration::from_secs(5), Duration::from_secs(2));
        assert!(may_wait(Duration::from_secs(5), &d, max, min, Instant::now()));
        assert!(!may_wait(Duration::from_secs(6), &d, max, min, Instant::now()), "longer than max_wait");
        tokio::time::advance(Duration::from_secs(5)).await;
        assert!(!may_wait(Duration::from_secs(4), &d, max, min, Instant::now()), "4 s + 2 s do not fit in 5 s");
    }
}
