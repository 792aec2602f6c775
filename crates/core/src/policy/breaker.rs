//! A circuit breaker per provider.
//!
//! Closed → Open when the failure rate over a sliding window passes a
//! threshold (with a minimum number of calls), or after N consecutive
//! failures. Open rejects at once for a cool-down that doubles with each
//! trip in a row (capped). Then Half-open admits a few probes: M successes
//! close it, one failure opens it again. Every transition carries a reason.

use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

#[derive(Debug, Clone, PartialEq)]
pub struct BreakerPolicy {
    /// Failure rate (0–1) over `window` that trips the breaker.
    pub failure_rate: f64,
    pub window: Duration,
    /// Calls in the window before the rate counts.
    pub min_calls: u32,
    /// Failures in a row that trip the breaker whatever the rate.
    pub consecutive_failures: u32,
    /// First cool-down; each trip in a row doubles it, up to `cooldown_max`.
    pub cooldown: Duration,
    pub cooldown_max: Duration,
    /// Probes admitted at once while half-open.
    pub half_open_probes: u32,
    /// Probe successes that close the breaker.
    pub close_after: u32,
}

impl Default for BreakerPolicy {
    fn default() -> BreakerPolicy {
        BreakerPolicy {
            failure_rate: 0.5,
            window: Duration::from_secs(30),
            min_calls: 10,
            consecutive_failures: 5,
            cooldown: Duration::from_secs(10),
            cooldown_max: Duration::from_secs(300),
            half_open_probes: 1,
            close_after: 2,
        }
    }
}

/// The breaker's state as others see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Closed,
    /// Rejecting until the instant (`None`: opened by hand, until reset).
    Open {
        until: Option<Instant>,
    },
    HalfOpen,
}

impl State {
    /// The state without its instant: what the admin API and events carry.
    pub fn kind(self) -> BreakerState {
        match self {
            State::Closed => BreakerState::Closed,
            State::Open { .. } => BreakerState::Open,
            State::HalfOpen => BreakerState::HalfOpen,
        }
    }

    pub fn name(self) -> &'static str {
        self.kind().as_str()
    }
}

/// A breaker's state on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum BreakerState {
    Closed,
    Open,
    HalfOpen,
}

impl BreakerState {
    pub fn as_str(self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open => "open",
            BreakerState::HalfOpen => "half_open",
        }
    }
}

impl fmt::Display for BreakerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A change of state and why it happened.
#[derive(Debug, Clone, PartialEq)]
pub struct Transition {
    pub from: State,
    pub to: State,
    pub reason: String,
}

/// How an attempt was let through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    Normal,
    Probe,
}

/// Refused without a network call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rejected {
    pub until: Option<Instant>,
}

#[derive(Debug)]
pub struct Breaker {
    policy: BreakerPolicy,
    state: State,
    /// Outcomes in the window: (when, failed).
    window: VecDeque<(Instant, bool)>,
    consecutive: u32,
    /// Trips since the breaker last closed; sets the next cool-down.
    trips: u32,
    probes_in_flight: u32,
    probe_successes: u32,
    transitions: Vec<Transition>,
    /// Open past its cool-down until the team grants this instance the one
    /// probe ([`Breaker::grant_probe`]): in a team, every instance would
    /// otherwise probe at once when the cool-down ends.
    held: bool,
}

/// Bound on remembered outcomes, whatever the traffic.
const MAX_WINDOW_LEN: usize = 4096;

impl Breaker {
    pub fn new(policy: BreakerPolicy) -> Breaker {
        Breaker {
            policy,
            state: State::Closed,
            window: VecDeque::new(),
            consecutive: 0,
            trips: 0,
            probes_in_flight: 0,
            probe_successes: 0,
            transitions: Vec::new(),
            held: false,
        }
    }

    /// The state at `now` (an expired cool-down reads as half-open).
    pub fn state(&self, now: Instant) -> State {
        match self.state {
            State::Open { until: Some(t) } if now >= t && !self.held => State::HalfOpen,
            s => s,
        }
    }

    /// Transitions since the last call, oldest first.
    pub fn take_transitions(&mut self) -> Vec<Transition> {
        std::mem::take(&mut self.transitions)
    }

    /// Lets an attempt through, or refuses it without a network call.
    pub fn admit(&mut self, now: Instant) -> Result<Admission, Rejected> {
        if let State::Open { until: Some(t) } = self.state {
            if now >= t && !self.held {
                self.go(State::HalfOpen, "cool-down over: probing".into());
            }
        }
        match self.state {
            State::Closed => Ok(Admission::Normal),
            State::Open { until } => Err(Rejected { until }),
            State::HalfOpen if self.probes_in_flight < self.policy.half_open_probes => {
                self.probes_in_flight += 1;
                Ok(Admission::Probe)
            }
            State::HalfOpen => Err(Rejected { until: None }),
        }
    }

    /// Records the outcome of an admitted attempt.
    pub fn record(&mut self, admission: Admission, failed: bool, now: Instant) {
        match admission {
            Admission::Probe => self.record_probe(failed, now),
            Admission::Normal if self.state == State::Closed => self.record_closed(failed, now),
            // Admitted before the breaker opened: the trip already counted.
            Admission::Normal => {}
        }
    }

    /// An admitted attempt ended without an outcome (the client left).
    pub fn release(&mut self, admission: Admission) {
        if admission == Admission::Probe {
            self.probes_in_flight = self.probes_in_flight.saturating_sub(1);
        }
    }

    /// Keeps an open breaker open past its cool-down, until the team grants
    /// the probe or [`Breaker::unhold`] (the team is out of reach).
    pub fn hold(&mut self) {
        self.held = matches!(self.state, State::Open { .. });
    }

    /// Lets an open breaker's own cool-down lead to a probe again.
    pub fn unhold(&mut self) {
        self.held = false;
    }

    /// Opens the breaker until `until` at least, as another instance of
    /// the team decided, and holds it there. A breaker already open stays
    /// open until the later of the two; no transition is noted for that.
    pub fn open_until(&mut self, until: Instant, reason: String) {
        match self.state {
            State::Open { until: Some(t) } => self.state = State::Open { until: Some(t.max(until)) },
            State::Open { until: None } => {}
            _ => self.go(State::Open { until: Some(until) }, reason),
        }
        self.held = true;
    }

    /// The team's one probe is this instance's: half-open now.
    pub fn grant_probe(&mut self) {
        if matches!(self.state, State::Open { until: Some(_) }) {
            self.held = false;
            self.go(State::HalfOpen, "cool-down over: this instance probes for the team".into());
        }
    }

    /// Closes the breaker as the team decided (another instance's probes
    /// succeeded, or it was reset by hand there).
    pub fn close(&mut self, reason: String) {
        self.trips = 0;
        self.window.clear();
        self.consecutive = 0;
        self.held = false;
        self.go(State::Closed, reason);
    }

    /// Opens the breaker by hand until [`Breaker::reset`].
    pub fn force_open(&mut self) {
        self.go(State::Open { until: None }, "opened by hand".into());
    }

    /// Closes the breaker by hand and forgets its history.
    pub fn reset(&mut self) {
        self.held = false;
        self.trips = 0;
        self.window.clear();
        self.consecutive = 0;
        self.go(State::Closed, "reset by hand".into());
    }

    fn record_closed(&mut self, failed: bool, now: Instant) {
        self.window.push_back((now, failed));
        while self.window.len() > MAX_WINDOW_LEN
            || self.window.front().is_some_and(|(t, _)| now.duration_since(*t) > self.policy.window)
        {
            self.window.pop_front();
        }
        if !failed {
            self.consecutive = 0;
            return;
        }
        self.consecutive += 1;
        if self.consecutive >= self.policy.consecutive_failures {
            let reason = format!("{} failures in a row", self.consecutive);
            return self.trip(now, reason);
        }
        let calls = self.window.len();
        let failures = self.window.iter().filter(|(_, f)| *f).count();
        let rate = failures as f64 / calls as f64;
        if calls >= self.policy.min_calls as usize && rate >= self.policy.failure_rate {
            let reason = format!("{failures} of the last {calls} calls failed ({:.0}%)", rate * 100.0);
            self.trip(now, reason);
        }
    }

    fn record_probe(&mut self, failed: bool, now: Instant) {
        self.probes_in_flight = self.probes_in_flight.saturating_sub(1);
        if self.state != State::HalfOpen {
            return;
        }
        if failed {
            return self.trip(now, "probe failed".into());
        }
        self.probe_successes += 1;
        if self.probe_successes >= self.policy.close_after {
            let reason = format!("{} probes succeeded", self.probe_successes);
            self.trips = 0;
            self.window.clear();
            self.consecutive = 0;
            self.go(State::Closed, reason);
        }
    }

    fn trip(&mut self, now: Instant, reason: String) {
        let factor = 2u32.saturating_pow(self.trips.min(16));
        let cooldown = self.policy.cooldown.saturating_mul(factor).min(self.policy.cooldown_max);
        self.trips += 1;
        self.go(
            State::Open { until: Some(now + cooldown) },
            format!("{reason}; open for {}", humantime::format_duration(cooldown)),
        );
    }

    fn go(&mut self, to: State, reason: String) {
        let from = self.state;
        self.state = to;
        self.probes_in_flight = 0;
        self.probe_successes = 0;
        if from != to {
            self.transitions.push(Transition { from, to, reason });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::advance;

    #[tokio::test(start_paused = true)]
    async fn a_held_breaker_waits_for_the_team_s_probe_and_a_team_verdict_is_followed() {
        let mut b = Breaker::new(policy());
        for _ in 0..3 {
            let a = b.admit(Instant::now()).unwrap();
            b.record(a, true, Instant::now());
        }
        b.hold();
        advance(Duration::from_secs(5)).await;
        assert!(matches!(b.state(Instant::now()), State::Open { .. }), "held past its cool-down");
        assert!(b.admit(Instant::now()).is_err());
        b.grant_probe();
        assert_eq!(b.admit(Instant::now()), Ok(Admission::Probe));
        assert!(b.admit(Instant::now()).is_err(), "one probe");

        // Another instance's trip opens this one, for at least as long as it says.
        let mut b = Breaker::new(policy());
        let until = Instant::now() + Duration::from_secs(7);
        b.open_until(until, "opened by gw-2: 5 failures in a row".into());
        assert_eq!(b.state(Instant::now()), State::Open { until: Some(until) });
        b.open_until(Instant::now() + Duration::from_secs(1), "shorter".into());
        assert_eq!(b.state(Instant::now()), State::Open { until: Some(until) }, "a shorter verdict never shortens it");
        assert_eq!(b.take_transitions().len(), 1);
        b.unhold();
        advance(Duration::from_secs(8)).await;
        assert_eq!(b.state(Instant::now()), State::HalfOpen, "out of the team's reach, its own timer leads");
        b.close("gw-2's probes succeeded".into());
        assert_eq!(b.state(Instant::now()), State::Closed);
    }

    fn policy() -> BreakerPolicy {
        BreakerPolicy {
            failure_rate: 0.5,
            window: Duration::from_secs(10),
            min_calls: 4,
            consecutive_failures: 3,
            cooldown: Duration::from_secs(1),
            cooldown_max: Duration::from_secs(3),
            half_open_probes: 1,
            close_after: 2,
        }
    }

    fn call(b: &mut Breaker, failed: bool) -> Result<(), Rejected> {
        let a = b.admit(Instant::now())?;
        b.record(a, failed, Instant::now());
        Ok(())
    }

    #[tokio::test(start_paused = true)]
    async fn consecutive_failures_trip_it_and_open_rejects_until_the_cool_down() {
        let mut b = Breaker::new(policy());
        for _ in 0..3 {
            call(&mut b, true).unwrap();
        }
        let t = b.take_transitions();
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].to.name(), "open");
        assert!(t[0].reason.starts_with("3 failures in a row"), "{}", t[0].reason);
        assert!(call(&mut b, false).is_err());
        advance(Duration::from_millis(999)).await;
        assert!(call(&mut b, false).is_err());
        advance(Duration::from_millis(1)).await;
        assert_eq!(b.state(Instant::now()), State::HalfOpen);
    }

    #[tokio::test(start_paused = true)]
    async fn failure_rate_over_the_window_trips_it() {
        let mut b = Breaker::new(policy());
        for failed in [true, false, true, false, true] {
            call(&mut b, failed).unwrap();
        }
        // Rates are checked on failures: at the fifth call 3 of 5 failed.
        assert!(matches!(b.state(Instant::now()), State::Open { .. }));
        let reason = &b.take_transitions()[0].reason;
        assert!(reason.starts_with("3 of the last 5 calls failed (60%)"), "{reason}");
    }

    #[tokio::test(start_paused = true)]
    async fn old_failures_leave_the_window() {
        let mut b = Breaker::new(policy());
        call(&mut b, true).unwrap();
        call(&mut b, true).unwrap();
        call(&mut b, false).unwrap();
        advance(Duration::from_secs(11)).await;
        for failed in [false, false, true] {
            call(&mut b, failed).unwrap();
        }
        assert_eq!(b.state(Instant::now()), State::Closed, "the two old failures expired");
    }

    #[tokio::test(start_paused = true)]
    async fn half_open_admits_limited_probes_and_closes_after_successes() {
        let mut b = Breaker::new(policy());
        b.force_open();
        assert_eq!(b.admit(Instant::now()), Err(Rejected { until: None }));
        b.reset();
        for _ in 0..3 {
            call(&mut b, true).unwrap();
        }
        advance(Duration::from_secs(1)).await;
        let probe = b.admit(Instant::now()).unwrap();
        assert_eq!(probe, Admission::Probe);
        assert!(b.admit(Instant::now()).is_err(), "only one probe at a time");
        b.record(probe, false, Instant::now());
        let probe = b.admit(Instant::now()).unwrap();
        b.record(probe, false, Instant::now());
        assert_eq!(b.state(Instant::now()), State::Closed);
        let names: Vec<_> = b.take_transitions().iter().map(|t| (t.from.name(), t.to.name())).collect();
        assert_eq!(
            names,
            [
                ("closed", "open"),
                ("open", "closed"),
                ("closed", "open"),
                ("open", "half_open"),
                ("half_open", "closed")
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn failed_probe_reopens_with_a_longer_cool_down_capped() {
        let mut b = Breaker::new(policy());
        for _ in 0..3 {
            call(&mut b, true).unwrap();
        }
        let mut cooldowns = Vec::new();
        for _ in 0..3 {
            let opened = Instant::now();
            let State::Open { until: Some(until) } = b.state(opened) else { panic!("open") };
            cooldowns.push(until - opened);
            advance(until - opened).await;
            call(&mut b, true).unwrap();
        }
        assert_eq!(cooldowns, [Duration::from_secs(1), Duration::from_secs(2), Duration::from_secs(3)]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_canceled_probe_frees_its_slot() {
        let mut b = Breaker::new(policy());
        for _ in 0..3 {
            call(&mut b, true).unwrap();
        }
        advance(Duration::from_secs(1)).await;
        let probe = b.admit(Instant::now()).unwrap();
        b.release(probe);
        assert_eq!(b.admit(Instant::now()), Ok(Admission::Probe));
    }
}
