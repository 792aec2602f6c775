//! Rolling statistics per provider and per provider/model over 1, 5 and 60
//! minutes, in per-minute buckets with HDR histograms (constant memory,
//! accurate percentiles), plus passive health with hysteresis so a provider
//! does not flap between healthy and unhealthy on single outcomes.
//!
//! Model names come from clients (a wildcard provider takes any), so what
//! is kept per model is bounded: [`ByModel`] keeps at most [`MAX_MODELS`]
//! names per provider and counts the rest as [`OTHER_MODEL`]. The
//! Prometheus series ([`crate::telemetry::metrics`]) are bounded the same way.

use std::collections::VecDeque;
use std::sync::Mutex;

// Keyed by provider and model names from the config and looked up several
// times per request: a fast hash, not a DoS-resistant one, is what fits.
use foldhash::HashMap;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Longest latency tracked, in milliseconds (longer ones count as this).
const MAX_MS: u64 = 30 * 60 * 1000;
const MINUTES: usize = 60;

/// Model names tracked on their own per provider. Each costs some 30 kB of
/// statistics for every minute it is used in, and a few Prometheus series.
pub const MAX_MODELS: usize = 64;
/// Where the names beyond [`MAX_MODELS`] are counted.
pub const OTHER_MODEL: &str = "other";
/// A name unused for this long gives its place to a new one, when every
/// place is taken: its statistics have nothing left to show.
const IDLE_MINUTES: i64 = MINUTES as i64;

/// What is kept per model name, for at most [`MAX_MODELS`] names plus
/// [`OTHER_MODEL`]. A new name takes a free place; when none is free, the
/// place of the name unused longest, if that has been idle for an hour;
/// otherwise it is counted as [`OTHER_MODEL`].
#[derive(Debug)]
pub struct ByModel<V> {
    /// Each name's value and the last minute it was used in.
    names: HashMap<String, (V, i64)>,
}

impl<V> Default for ByModel<V> {
    fn default() -> ByModel<V> {
        ByModel { names: HashMap::default() }
    }
}

impl<V> ByModel<V> {
    /// Runs `f` on the value for `model` at `minute`, made by `new` (given
    /// the name it is kept under) if there is none; a value that gives its
    /// place up goes to `retire`.
    pub fn with<T>(
        &mut self,
        model: &str,
        minute: i64,
        new: impl FnOnce(&str) -> V,
        retire: impl FnOnce(&str, V),
        f: impl FnOnce(&mut V) -> T,
    ) -> T {
        // Looked up by reference first: the name is copied only the once it is new.
        if let Some((value, used)) = self.names.get_mut(model) {
            *used = (*used).max(minute);
            return f(value);
        }
        let own = self.names.len() - usize::from(self.names.contains_key(OTHER_MODEL));
        let key = if own < MAX_MODELS {
            model
        } else if let Some(idle) = self.idlest(minute) {
            if let Some((old, (value, _))) = self.names.remove_entry(&idle) {
                retire(&old, value);
            }
            model
        } else {
            OTHER_MODEL
        };
        let (value, used) = self.names.entry(key.to_string()).or_insert_with(|| (new(key), minute));
        *used = (*used).max(minute);
        f(value)
    }

    /// The name unused longest, if it has been idle long enough to give its place up.
    fn idlest(&self, minute: i64) -> Option<String> {
        self.names
            .iter()
            .filter(|(name, (_, used))| name.as_str() != OTHER_MODEL && *used <= minute - IDLE_MINUTES)
            .min_by_key(|(_, (_, used))| *used)
            .map(|(name, _)| name.clone())
    }

    /// Every name kept, [`OTHER_MODEL`] among them once it is used.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &V)> {
        self.names.iter().map(|(name, (value, _))| (name.as_str(), value))
    }
}

#[allow(clippy::expect_used)] // Constant bounds that hdrhistogram accepts: this cannot fail.
fn histogram() -> Histogram<u64> {
    // Two significant digits: percentiles within 1%, a few kilobytes each.
    Histogram::new_with_bounds(1, MAX_MS, 2).expect("valid histogram bounds")
}

#[derive(Debug)]
struct Minute {
    index: i64,
    attempts: u64,
    ok: u64,
    fallbacks_in: u64,
    fallbacks_out: u64,
    latency: Histogram<u64>,
    ttft: Histogram<u64>,
}

impl Minute {
    fn new(index: i64) -> Minute {
        Minute { index, attempts: 0, ok: 0, fallbacks_in: 0, fallbacks_out: 0, latency: histogram(), ttft: histogram() }
    }
}

/// One attempt as the statistics see it.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub ok: bool,
    pub latency_ms: f64,
    pub ttft_ms: Option<f64>,
    pub fallback_in: bool,
    pub fallback_out: bool,
}

/// Statistics over one window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Window {
    pub requests: u64,
    pub success_rate: Option<f64>,
    pub requests_per_minute: f64,
    pub latency_p50_ms: Option<u64>,
    pub latency_p95_ms: Option<u64>,
    pub latency_p99_ms: Option<u64>,
    pub ttft_p50_ms: Option<u64>,
    pub ttft_p95_ms: Option<u64>,
    pub fallbacks_in: u64,
    pub fallbacks_out: u64,
}

#[derive(Debug, Default)]
pub struct Rolling {
    minutes: VecDeque<Minute>,
}

impl Rolling {
    pub fn record(&mut self, minute: i64, s: Sample) {
        if self.minutes.back().is_none_or(|m| m.index < minute) {
            self.minutes.push_back(Minute::new(minute));
        }
        while self.minutes.front().is_some_and(|m| m.index <= minute - MINUTES as i64) {
            self.minutes.pop_front();
        }
        let Some(m) = self.minutes.iter_mut().rev().find(|m| m.index <= minute) else { return };
        m.attempts += 1;
        m.ok += u64::from(s.ok);
        m.fallbacks_in += u64::from(s.fallback_in);
        m.fallbacks_out += u64::from(s.fallback_out);
        let _ = m.latency.record((s.latency_ms.round() as u64).clamp(1, MAX_MS));
        if let Some(t) = s.ttft_ms {
            let _ = m.ttft.record((t.round() as u64).clamp(1, MAX_MS));
        }
    }

    /// The last `span` minutes up to and including `minute`.
    pub fn window(&self, minute: i64, span: u32) -> Window {
        let from = minute - i64::from(span) + 1;
        let mut latency = histogram();
        let mut ttft = histogram();
        let mut w = Window::default();
        let mut ok = 0;
        for m in self.minutes.iter().filter(|m| m.index >= from && m.index <= minute) {
            w.requests += m.attempts;
            ok += m.ok;
            w.fallbacks_in += m.fallbacks_in;
            w.fallbacks_out += m.fallbacks_out;
            let _ = latency.add(&m.latency);
            let _ = ttft.add(&m.ttft);
        }
        let q = |h: &Histogram<u64>, p: f64| (!h.is_empty()).then(|| h.value_at_quantile(p));
        w.success_rate = (w.requests > 0).then(|| ok as f64 / w.requests as f64);
        w.requests_per_minute = w.requests as f64 / f64::from(span);
        w.latency_p50_ms = q(&latency, 0.50);
        w.latency_p95_ms = q(&latency, 0.95);
        w.latency_p99_ms = q(&latency, 0.99);
        w.ttft_p50_ms = q(&ttft, 0.50);
        w.ttft_p95_ms = q(&ttft, 0.95);
        w
    }
}

impl Rolling {
    /// The 95th percentile over the last `span` minutes up to `minute`,
    /// of the time to first token (`streamed`) or of the whole latency,
    /// with how many attempts it was read from.
    pub fn p95(&self, minute: i64, span: u32, streamed: bool) -> (u64, Option<u64>) {
        let from = minute - i64::from(span) + 1;
        let mut h = histogram();
        for m in self.minutes.iter().filter(|m| m.index >= from && m.index <= minute) {
            let _ = h.add(if streamed { &m.ttft } else { &m.latency });
        }
        (h.len(), (!h.is_empty()).then(|| h.value_at_quantile(0.95)))
    }
}

/// Passive health from real traffic: `fail_after` failures in a row mark a
/// provider unhealthy, `recover_after` successes in a row mark it healthy.
#[derive(Debug, Clone)]
pub struct Passive {
    pub healthy: bool,
    failures: u32,
    successes: u32,
    fail_after: u32,
    recover_after: u32,
}

impl Passive {
    pub fn new(fail_after: u32, recover_after: u32) -> Passive {
        Passive {
            healthy: true,
            failures: 0,
            successes: 0,
            fail_after: fail_after.max(1),
            recover_after: recover_after.max(1),
        }
    }

    /// Notes an outcome; returns the new state when it changed.
    pub fn observe(&mut self, ok: bool) -> Option<bool> {
        if ok {
            self.failures = 0;
            self.successes += 1;
            if !self.healthy && self.successes >= self.recover_after {
                self.healthy = true;
                return Some(true);
            }
        } else {
            self.successes = 0;
            self.failures += 1;
            if self.healthy && self.failures >= self.fail_after {
                self.healthy = false;
                return Some(false);
            }
        }
        None
    }
}

/// Tokens and cost since the start of the UTC day.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Today {
    #[serde(skip)]
    day: i64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: f64,
}

impl Today {
    pub fn add(&mut self, day: i64, input: u64, output: u64, cost: Option<f64>) {
        if day != self.day {
            *self = Today { day, ..Today::default() };
        }
        self.input_tokens += input;
        self.output_tokens += output;
        self.cost_usd += cost.unwrap_or(0.0);
    }

    pub fn current(&self, day: i64) -> Today {
        if day == self.day {
            self.clone()
        } else {
            Today { day, ..Today::default() }
        }
    }
}

#[derive(Debug)]
pub struct ProviderStats {
    pub all: Rolling,
    by_model: ByModel<Rolling>,
    pub today: Today,
    pub passive: Passive,
}

impl ProviderStats {
    fn new() -> ProviderStats {
        ProviderStats {
            all: Rolling::default(),
            by_model: ByModel::default(),
            today: Today::default(),
            passive: Passive::new(3, 2),
        }
    }

    /// Records an attempt on `model` (or on [`OTHER_MODEL`], past the bound).
    pub fn record_model(&mut self, model: &str, minute: i64, s: Sample) {
        self.by_model.with(model, minute, |_| Rolling::default(), |_, _| {}, |r| r.record(minute, s));
    }

    /// The statistics of each model kept.
    pub fn models(&self) -> impl Iterator<Item = (&str, &Rolling)> {
        self.by_model.iter()
    }
}

/// Statistics for every provider, behind one lock taken briefly per request.
#[derive(Debug, Default)]
pub struct Stats {
    providers: Mutex<HashMap<String, ProviderStats>>,
}

impl Stats {
    /// Runs `f` on a provider's statistics.
    pub fn with<T>(&self, provider: &str, f: impl FnOnce(&mut ProviderStats) -> T) -> T {
        let mut map = self.providers.lock().unwrap_or_else(|p| p.into_inner());
        // Looked up by reference first: the name is copied only the once it is new.
        match map.get_mut(provider) {
            Some(stats) => f(stats),
            None => f(map.entry(provider.to_string()).or_insert_with(ProviderStats::new)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(ok: bool, ms: f64) -> Sample {
        Sample { ok, latency_ms: ms, ttft_ms: Some(ms / 2.0), fallback_in: false, fallback_out: !ok }
    }

    #[test]
    fn windows_cover_their_minutes_only() {
        let mut r = Rolling::default();
        for i in 0..100 {
            r.record(10, sample(i % 10 != 0, f64::from(i + 1)));
        }
        r.record(14, sample(true, 500.0));
        assert_eq!(r.window(14, 5).requests, 101);
        assert_eq!(r.window(14, 1).requests, 1);
        let w = r.window(14, 60);
        assert_eq!(w.fallbacks_out, 10);
        assert!((w.success_rate.unwrap() - 91.0 / 101.0).abs() < 1e-9);
        assert_eq!(w.latency_p50_ms, Some(51));
        assert!(w.latency_p99_ms.unwrap() >= 100);
        r.record(70, sample(true, 20.0));
        assert_eq!(r.window(70, 60).requests, 2, "the hour up to minute 70 starts at minute 11");
    }

    #[test]
    fn hysteresis_needs_runs_not_single_outcomes() {
        let mut p = Passive::new(3, 2);
        assert_eq!(p.observe(false), None);
        assert_eq!(p.observe(false), None);
        assert_eq!(p.observe(true), None, "a success resets the run");
        assert_eq!(p.observe(false), None);
        assert_eq!(p.observe(false), None);
        assert_eq!(p.observe(false), Some(false));
        assert_eq!(p.observe(true), None);
        assert_eq!(p.observe(false), None);
        assert_eq!(p.observe(true), None);
        assert_eq!(p.observe(true), Some(true));
    }

    #[test]
    fn model_names_past_the_bound_count_as_other() {
        let mut p = ProviderStats::new();
        for i in 0..MAX_MODELS * 3 {
            p.record_model(&format!("m{i}"), 10, sample(true, 5.0));
        }
        assert_eq!(p.models().count(), MAX_MODELS + 1);
        let other = p.models().find(|(m, _)| *m == OTHER_MODEL).map(|(_, r)| r.window(10, 1).requests);
        assert_eq!(other, Some(2 * MAX_MODELS as u64));
        // A name already kept keeps its place.
        p.record_model("m0", 11, sample(true, 5.0));
        assert_eq!(p.models().find(|(m, _)| *m == "m0").map(|(_, r)| r.window(11, 5).requests), Some(2));
    }

    #[test]
    fn a_name_idle_for_an_hour_gives_its_place_to_a_new_one() {
        let mut kept: ByModel<u32> = ByModel::default();
        let mut retired = Vec::new();
        for i in 0..MAX_MODELS {
            kept.with(&format!("m{i}"), 0, |_| 0, |_, _| {}, |n| *n += 1);
        }
        kept.with("m1", 30, |_| 0, |_, _| {}, |n| *n += 1);
        kept.with("early", 59, |_| 0, |_, _| {}, |n| *n += 1);
        assert!(kept.iter().any(|(m, _)| m == OTHER_MODEL), "not idle long enough yet");
        kept.with("late", 60, |_| 0, |name, n| retired.push((name.to_string(), n)), |n| *n += 1);
        assert_eq!(retired.len(), 1);
        assert_ne!(retired[0].0, "m1", "the one used since stays");
        assert!(kept.iter().any(|(m, _)| m == "late"));
        assert_eq!(kept.iter().count(), MAX_MODELS + 1);
    }

    #[test]
    fn today_resets_at_a_new_day() {
        let mut t = Today::default();
        t.add(5, 10, 20, Some(0.5));
        t.add(5, 1, 2, None);
        assert_eq!(t.current(5).input_tokens, 11);
        assert_eq!(t.current(6).input_tokens, 0);
        t.add(6, 3, 3, Some(0.1));
        assert_eq!(t.current(6).output_tokens, 3);
    }
}
