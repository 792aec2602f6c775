//! Whether a provider's server answers at all, as its active probes found:
//! a probe that got no HTTP answer (refused, reset, timed out) makes the
//! provider unreachable, and traffic passes over it until a probe gets an
//! answer again. While it stays down, probes back off: every probe period
//! at first, then twice as long each time, up to ten periods (30 s, then
//! doubling to 5 min with the default period), so a dead local server costs
//! next to nothing; the first probe after it comes back clears it.
//!
//! A provider nobody probed and nobody used is neither: its state is unknown.

use std::time::Duration;

use tokio::time::Instant;

/// The longest wait between probes of a provider that stays down, in probe periods.
const MAX_BACKOFF_PERIODS: u32 = 10;

/// The last probe, as users see it.
#[derive(Debug, Clone, PartialEq)]
pub struct Probed {
    /// When it was sent (Unix ms).
    pub at_ms: i64,
    /// Why it got no answer, or the status it got that was no success;
    /// `None`: it succeeded.
    pub error: Option<String>,
    /// Whether the server answered at all.
    pub answered: bool,
}

#[derive(Debug, Default)]
pub struct Reach {
    last: Option<Probed>,
    /// Probes in a row that got no answer.
    unanswered: u32,
    /// Probe ticks still to skip before the next probe.
    skip: u32,
    /// An attempt's outcome was recorded (the provider was used).
    used: bool,
}

impl Reach {
    /// Records a probe's outcome.
    pub fn probed(&mut self, probed: Probed) {
        if probed.answered {
            self.unanswered = 0;
            self.skip = 0;
        } else {
            self.unanswered = self.unanswered.saturating_add(1);
            self.skip = backoff_periods(self.unanswered) - 1;
        }
        self.last = Some(probed);
    }

    /// One probe period passed: whether to probe now (else it backs off).
    pub fn tick(&mut self) -> bool {
        if self.skip == 0 {
            return true;
        }
        self.skip -= 1;
        false
    }

    /// The last probe got no answer: the provider takes no traffic.
    pub fn unreachable(&self) -> Option<&Probed> {
        self.last.as_ref().filter(|p| !p.answered)
    }

    /// When the next probe is due, for a probe period of `period`.
    pub fn next_probe(&self, period: Duration, now: Instant) -> Instant {
        now + period * (self.skip + 1)
    }

    pub fn last(&self) -> Option<&Probed> {
        self.last.as_ref()
    }

    pub fn note_used(&mut self) {
        self.used = true;
    }

    /// Nothing is known: never probed, never used.
    pub fn unknown(&self) -> bool {
        self.last.is_none() && !self.used
    }
}

/// How many probe periods to wait after `unanswered` probes in a row got no answer.
fn backoff_periods(unanswered: u32) -> u32 {
    let doubled = 1u32.checked_shl(unanswered.saturating_sub(1)).unwrap_or(u32::MAX);
    doubled.min(MAX_BACKOFF_PERIODS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(answered: bool) -> Probed {
        Probed { at_ms: 1, error: (!answered).then(|| "connection refused".into()), answered }
    }

    /// Probes on the ticks at which `reach` probes, over `ticks` periods,
    /// with the server down throughout.
    fn probed_ticks(reach: &mut Reach, ticks: u32) -> Vec<u32> {
        let mut at = vec![];
        for t in 0..ticks {
            if reach.tick() {
                at.push(t);
                reach.probed(probe(false));
            }
        }
        at
    }

    #[test]
    fn a_server_that_stays_down_is_probed_less_and_less_often_up_to_ten_periods() {
        let mut reach = Reach::default();
        // Waits of 1, 2, 4, 8, then 10 periods (30 s to 5 min at 30 s).
        assert_eq!(probed_ticks(&mut reach, 50), vec![0, 1, 3, 7, 15, 25, 35, 45]);
        assert!(reach.unreachable().is_some());
    }

    #[test]
    fn an_answer_clears_unreachable_and_the_backoff() {
        let mut reach = Reach::default();
        assert!(reach.unknown());
        probed_ticks(&mut reach, 8);
        assert_eq!(reach.unreachable().and_then(|p| p.error.as_deref()), Some("connection refused"));
        while !reach.tick() {}
        reach.probed(probe(true));
        assert!(reach.unreachable().is_none() && !reach.unknown());
        assert!(reach.tick(), "probed every period again");
    }

    #[test]
    fn a_provider_used_but_never_probed_is_known() {
        let mut reach = Reach::default();
        reach.note_used();
        assert!(!reach.unknown() && reach.unreachable().is_none());
    }
}
