//! Waiting for capacity instead of failing: a bounded FIFO per provider,
//! and leases on keys that allow only so many requests at a time.
//!
//! [`Capacity`] is one provider's concurrency cap (it replaces
//! [`super::limiter::Concurrency`], whose contract [`Capacity::try_enter`]
//! keeps) with a queue in front of it. A request that no provider can take
//! now, but that one could take before its deadline, [`Capacity::wait`]s
//! in that provider's queue: the first in line is the only one that may
//! take what frees up (a slot, a key lease) or what time brings (a bucket
//! refilled, a cool-down over), and newcomers do not pass it: while anyone
//! waits, `try_enter` says [`Busy::Queued`]. What the head needs besides a
//! slot is the caller's to say, through the `ready` function it passes
//! (the provider's gate): now, at a known time, once something is
//! released, or never.
//!
//! Bounds: at most `max_queue` waiters (past it, refused at once), none
//! longer than `max_queue_wait` or past the time it is given (its deadline
//! less what its attempt needs). A request whose expected wait already
//! exceeds that is refused at once rather than after waiting in vain: the
//! expectation is the permits it must see released (those ahead of it, and
//! its own) in rounds of the cap, each round taking the average time a
//! permit is held (a moving average of recent holds, or a seed such as the
//! provider's median latency). Without any hold time known yet, nothing is
//! refused on expectation.
//!
//! A waiter whose future is dropped (the client left) leaves the queue at
//! once, and the next in line is woken if it was first. Permits and leases
//! are guards: released on drop, whatever ends the request (an answer, an
//! error, the client gone, a panic unwinding).
//!
//! [`QueueCounters`] holds the figures (depth, waits, refusals, leases).

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::ground::share::{AtomicRoll, Roll};

/// How long and how many may wait for one provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueuePolicy {
    /// Waiters at most; 0 turns the queue off (a full provider is passed over).
    pub max_queue: u32,
    /// Longest wait in the queue, whatever the deadline allows.
    pub max_wait: Duration,
}

impl Default for QueuePolicy {
    fn default() -> QueuePolicy {
        QueuePolicy { max_queue: 0, max_wait: Duration::from_secs(10) }
    }
}

/// Why [`Capacity::try_enter`] cannot admit a request now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Busy {
    /// At the concurrency cap.
    Full,
    /// Others are waiting: they go first.
    Queued,
}

/// What the head of the queue is told by the caller's `ready` function.
#[derive(Debug)]
pub enum Ready<T> {
    /// Go: here is what the attempt needs (the gate's ticket).
    Now(T),
    /// Not before then (a bucket refills, a cool-down ends).
    At(Instant),
    /// When something is released (every key is leased out).
    Released,
    /// Not in any time worth waiting for.
    Never(String),
}

/// Why a request does not get capacity from the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The provider has no queue (`max_queue = 0`).
    NoQueue,
    QueueFull {
        max: u32,
    },
    /// The expected wait does not fit in the time the request has.
    WouldMissDeadline {
        expected: Duration,
    },
    /// The provider is ready only after the request's time is up.
    NotInTime {
        ready_in: Duration,
    },
    /// Waited as long as it could (`max_queue_wait`, or its deadline).
    TimedOut {
        waited: Duration,
    },
    /// The provider cannot take it, however long it waits.
    Unavailable(String),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = |d: &Duration| humantime::format_duration(Duration::from_millis(d.as_millis() as u64)).to_string();
        match self {
            Refusal::NoQueue => f.write_str("full, and it has no queue"),
            Refusal::QueueFull { max } => write!(f, "its queue is full ({max} waiting)"),
            Refusal::WouldMissDeadline { expected } => {
                write!(f, "the expected wait in its queue ({}) does not fit the deadline", d(expected))
            }
            Refusal::NotInTime { ready_in } => write!(f, "ready only in {}, after the deadline", d(ready_in)),
            Refusal::TimedOut { waited } => write!(f, "waited {} in its queue", d(waited)),
            Refusal::Unavailable(why) => f.write_str(why),
        }
    }
}

/// The queue's figures, as plain atomics.
#[derive(Debug, Default)]
pub struct QueueCounters {
    /// Waiting now.
    pub depth: AtomicU64,
    /// Permits held now.
    pub in_use: AtomicU64,
    /// Key leases held now.
    pub leases: AtomicU64,
    pub entered: AtomicU64,
    pub served: AtomicU64,
    /// Left before being served (the client went away).
    pub left: AtomicU64,
    pub refused_full: AtomicU64,
    /// Refused or given up for lack of time.
    pub refused_time: AtomicU64,
    /// Total and longest wait of those served, in microseconds.
    pub wait_total_us: AtomicU64,
    pub wait_max_us: AtomicU64,
    /// A moving average of the waits of those served lately, in microseconds.
    pub wait_recent_us: AtomicU64,
    /// When the last one was served (Unix ms; 0: never), to tell a recent
    /// average from an old one.
    pub served_at_ms: AtomicI64,
}

impl QueueCounters {
    pub fn snapshot(&self) -> QueueStats {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        QueueStats {
            depth: get(&self.depth),
            in_use: get(&self.in_use),
            leases: get(&self.leases),
            entered: get(&self.entered),
            served: get(&self.served),
            left: get(&self.left),
            refused_full: get(&self.refused_full),
            refused_time: get(&self.refused_time),
            wait_total_ms: get(&self.wait_total_us) as f64 / 1000.0,
            wait_max_ms: get(&self.wait_max_us) as f64 / 1000.0,
            wait_recent_ms: get(&self.wait_recent_us) as f64 / 1000.0,
            served_at_ms: self.served_at_ms.load(Ordering::Relaxed),
        }
    }

    /// Counts one served after waiting `waited_us`.
    fn served(&self, waited_us: u64) {
        self.served.fetch_add(1, Ordering::Relaxed);
        self.wait_total_us.fetch_add(waited_us, Ordering::Relaxed);
        self.wait_max_us.fetch_max(waited_us, Ordering::Relaxed);
        let first = self.served_at_ms.swap(crate::ground::clock::now_ms(), Ordering::Relaxed) == 0;
        // Two served at once may each weigh the other's old average: a
        // figure for people to read, it need not be exact.
        let _ = self.wait_recent_us.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |avg| {
            Some(if first {
                waited_us
            } else {
                (avg as f64 * (1.0 - WAIT_WEIGHT) + waited_us as f64 * WAIT_WEIGHT) as u64
            })
        });
    }
}

/// Weight of the newest wait in [`QueueCounters::wait_recent_us`].
const WAIT_WEIGHT: f64 = 0.3;

/// A copy of [`QueueCounters`] at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct QueueStats {
    pub depth: u64,
    pub in_use: u64,
    pub leases: u64,
    pub entered: u64,
    pub served: u64,
    pub left: u64,
    pub refused_full: u64,
    pub refused_time: u64,
    pub wait_total_ms: f64,
    pub wait_max_ms: f64,
    pub wait_recent_ms: f64,
    /// Unix ms; 0 when nobody has been served from the queue.
    pub served_at_ms: i64,
}

/// One provider's capacity: its concurrency cap, its key leases, its queue.
#[derive(Debug)]
pub struct Capacity {
    limit: Option<u32>,
    key_limit: Option<u32>,
    /// In a team whose shared state is out of reach, this instance's place
    /// in the last roll call: it takes its share of the caps and of the
    /// queue, the shares adding up to them.
    share: AtomicRoll,
    policy: QueuePolicy,
    state: Mutex<State>,
    counters: QueueCounters,
}

#[derive(Debug, Default)]
struct State {
    in_use: u32,
    keys: HashMap<String, u32>,
    waiters: VecDeque<Waiter>,
    next_id: u64,
    /// Moving average of how long a permit is held.
    hold: Option<Duration>,
}

#[derive(Debug)]
struct Waiter {
    id: u64,
    wake: Arc<Notify>,
}

/// Weight of the newest hold in the moving average.
const HOLD_WEIGHT: f64 = 0.3;

impl Capacity {
    /// `limit`: requests in flight at once (none: no cap); `key_limit`: per key.
    pub fn new(limit: Option<u32>, key_limit: Option<u32>, policy: QueuePolicy) -> Arc<Capacity> {
        Arc::new(Capacity {
            limit: limit.map(|n| n.max(1)),
            key_limit: key_limit.map(|n| n.max(1)),
            share: AtomicRoll::default(),
            policy,
            state: Mutex::default(),
            counters: QueueCounters::default(),
        })
    }

    pub fn policy(&self) -> QueuePolicy {
        self.policy
    }

    /// Requests in flight at once at most (`None`: no cap).
    pub fn limit(&self) -> Option<u32> {
        self.limit
    }

    /// The per-key cap (`None`: no cap).
    pub fn key_limit(&self) -> Option<u32> {
        self.key_limit
    }

    /// Takes `share` of the caps and of the queue (its part by the last
    /// roll call, [`Roll::share`]) while a team's shared caps are out of
    /// reach; [`Roll::WHOLE`] restores them.
    pub fn set_share(&self, share: Roll) {
        self.share.store(share);
        // A share that grew may have room for the first in line now.
        Capacity::wake_head(&self.state());
    }

    /// Whether more permits (or leases on `key`) are held than `share` of
    /// the caps allows, the caller's own among them: an instance that
    /// finds its team out of reach goes no further past its share.
    pub fn over_share(&self, share: Roll, key: Option<&str>) -> bool {
        let s = self.state();
        let over = |held: u32, cap: Option<u32>| share.share_of(cap).is_some_and(|c| held > c);
        over(s.in_use, self.limit) || key.is_some_and(|k| over(s.keys.get(k).copied().unwrap_or(0), self.key_limit))
    }

    /// A cap as this instance may use it now (0: not at all).
    fn shared(&self, cap: Option<u32>) -> Option<u32> {
        self.share.load().share_of(cap)
    }

    /// How many may wait in line here now.
    fn max_queue(&self) -> u32 {
        self.share.load().share(self.policy.max_queue)
    }

    pub fn counters(&self) -> &QueueCounters {
        &self.counters
    }

    /// Requests holding a slot now: in flight from this gateway.
    pub fn in_use(&self) -> u64 {
        self.counters.in_use.load(Ordering::Relaxed)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A permit now, if a slot is free and nobody waits for one.
    pub fn try_enter(self: &Arc<Self>) -> Result<Permit, Busy> {
        let mut s = self.state();
        if !s.waiters.is_empty() {
            return Err(Busy::Queued);
        }
        if self.shared(self.limit).is_some_and(|l| s.in_use >= l) {
            return Err(Busy::Full);
        }
        Ok(self.take_slot(&mut s))
    }

    fn take_slot(self: &Arc<Self>, s: &mut State) -> Permit {
        s.in_use += 1;
        self.counters.in_use.store(u64::from(s.in_use), Ordering::Relaxed);
        Permit { capacity: Some(Arc::clone(self)), since: Instant::now() }
    }

    /// A lease on the key `label`, if it has room (always, without a per-key cap).
    pub fn try_lease(self: &Arc<Self>, label: &str) -> Option<KeyLease> {
        let mut s = self.state();
        let held = s.keys.get(label).copied().unwrap_or(0);
        if self.shared(self.key_limit).is_some_and(|l| held >= l) {
            return None;
        }
        s.keys.insert(label.to_string(), held + 1);
        self.counters.leases.fetch_add(1, Ordering::Relaxed);
        Some(KeyLease { capacity: Arc::clone(self), label: label.to_string() })
    }

    /// Leases held on `label` now.
    pub fn leased(&self, label: &str) -> u32 {
        self.state().keys.get(label).copied().unwrap_or(0)
    }

    /// Seeds (or updates) the expected hold time, e.g. from the provider's
    /// median latency, before any permit has been released.
    pub fn observe_hold(&self, held: Duration) {
        let mut s = self.state();
        s.hold = Some(match s.hold {
            None => held,
            Some(avg) => avg.mul_f64(1.0 - HOLD_WEIGHT) + held.mul_f64(HOLD_WEIGHT),
        });
    }

    /// The wait a request joining now should expect, or `None` if it
    /// cannot join (no queue, or a full one). Zero when nothing is known:
    /// for choosing the provider that frees up first.
    pub fn expected_wait(&self) -> Option<Duration> {
        let s = self.state();
        let max_queue = self.max_queue();
        // A share of no slot frees none: not a line to join.
        if max_queue == 0 || s.waiters.len() >= max_queue as usize || self.shared(self.limit) == Some(0) {
            return None;
        }
        Some(self.expectation(&s).unwrap_or(Duration::ZERO))
    }

    /// Permits to see released before a newcomer has one, in rounds of the
    /// cap, times the average hold. `None` when no hold time is known.
    fn expectation(&self, s: &State) -> Option<Duration> {
        let (limit, hold) = (self.shared(self.limit)?, s.hold?);
        let free = limit.saturating_sub(s.in_use) as usize;
        let needed = (s.waiters.len() + 1).saturating_sub(free);
        // A share of nothing frees nothing: the wait is not known.
        let rounds = needed.div_ceil(usize::try_from(limit).ok().filter(|l| *l > 0)?);
        Some(hold.saturating_mul(rounds as u32))
    }

    /// Waits in line until `ready` says go, for at most `max_queue_wait`
    /// and never past `until`. As the head of the line, with a slot free,
    /// `ready` is asked (outside the queue's lock, so it may take a key
    /// lease) what else the request needs; it is asked again whenever a
    /// permit or lease is released, or the time it named comes.
    pub async fn wait<T>(
        self: &Arc<Self>,
        until: Instant,
        mut ready: impl FnMut() -> Ready<T>,
    ) -> Result<(Permit, T), Refusal> {
        let entered = Instant::now();
        let until = entered.checked_add(self.policy.max_wait).map_or(until, |cap| until.min(cap));
        let mut place = self.join(entered, until)?;
        loop {
            let mut wake_at = until;
            if let Some(slot) = place.slot() {
                match ready() {
                    Ready::Now(value) => {
                        place.served(entered);
                        return Ok((slot, value));
                    }
                    Ready::At(at) if at > until => {
                        slot.unused();
                        return Err(place
                            .refused(Refusal::NotInTime { ready_in: at.saturating_duration_since(Instant::now()) }));
                    }
                    Ready::At(at) => {
                        slot.unused();
                        wake_at = at;
                    }
                    Ready::Released => slot.unused(),
                    Ready::Never(why) => {
                        slot.unused();
                        return Err(place.refused(Refusal::Unavailable(why)));
                    }
                }
            }
            let wake = Arc::clone(&place.wake);
            tokio::select! {
                () = wake.notified() => {}
                () = tokio::time::sleep_until(wake_at) => {}
            }
            if Instant::now() >= until {
                return Err(place.refused(Refusal::TimedOut { waited: entered.elapsed() }));
            }
        }
    }

    /// A place at the end of the line, unless the line is full or the
    /// expected wait does not fit.
    fn join(self: &Arc<Self>, now: Instant, until: Instant) -> Result<Place, Refusal> {
        let max_queue = self.max_queue();
        if self.policy.max_queue == 0 {
            return Err(Refusal::NoQueue);
        }
        let mut s = self.state();
        if s.waiters.len() >= max_queue as usize {
            self.counters.refused_full.fetch_add(1, Ordering::Relaxed);
            return Err(Refusal::QueueFull { max: max_queue });
        }
        if let Some(expected) = self.expectation(&s).filter(|e| now + *e > until) {
            self.counters.refused_time.fetch_add(1, Ordering::Relaxed);
            return Err(Refusal::WouldMissDeadline { expected });
        }
        let id = s.next_id;
        s.next_id += 1;
        let wake = Arc::new(Notify::new());
        s.waiters.push_back(Waiter { id, wake: Arc::clone(&wake) });
        self.counters.entered.fetch_add(1, Ordering::Relaxed);
        self.counters.depth.store(s.waiters.len() as u64, Ordering::Relaxed);
        Ok(Place { capacity: Arc::clone(self), id, wake, done: false })
    }

    /// Wakes the first in line, to look again.
    fn wake_head(s: &State) {
        if let Some(head) = s.waiters.front() {
            head.wake.notify_one();
        }
    }
}

/// A request's place in line. Dropped while still in line (the client
/// left), it leaves at once, and wakes the next if it was first.
struct Place {
    capacity: Arc<Capacity>,
    id: u64,
    wake: Arc<Notify>,
    done: bool,
}

impl Place {
    /// A slot, if this place is first in line and one is free.
    fn slot(&self) -> Option<Permit> {
        let c = &self.capacity;
        let mut s = c.state();
        let first = s.waiters.front().is_some_and(|w| w.id == self.id);
        if !first || c.shared(c.limit).is_some_and(|l| s.in_use >= l) {
            return None;
        }
        Some(c.take_slot(&mut s))
    }

    fn leave(&mut self) {
        let c = &self.capacity;
        let mut s = c.state();
        if let Some(at) = s.waiters.iter().position(|w| w.id == self.id) {
            s.waiters.remove(at);
            if at == 0 {
                Capacity::wake_head(&s);
            }
        }
        c.counters.depth.store(s.waiters.len() as u64, Ordering::Relaxed);
        self.done = true;
    }

    fn served(&mut self, entered: Instant) {
        self.leave();
        self.capacity.counters.served(entered.elapsed().as_micros() as u64);
    }

    fn refused(&mut self, why: Refusal) -> Refusal {
        self.leave();
        let counter = match why {
            Refusal::Unavailable(_) => None,
            _ => Some(&self.capacity.counters.refused_time),
        };
        if let Some(c) = counter {
            c.fetch_add(1, Ordering::Relaxed);
        }
        why
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        if !self.done {
            self.leave();
            self.capacity.counters.left.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A concurrency slot, held for as long as the attempt (and a relayed
/// body) runs; released on drop, which wakes the first in line.
#[derive(Debug)]
pub struct Permit {
    capacity: Option<Arc<Capacity>>,
    since: Instant,
}

impl Permit {
    /// Gives the slot back without counting a hold: it was taken only to
    /// ask `ready`, and the one asking is the one who would be woken.
    fn unused(mut self) {
        if let Some(c) = self.capacity.take() {
            let mut s = c.state();
            s.in_use = s.in_use.saturating_sub(1);
            c.counters.in_use.store(u64::from(s.in_use), Ordering::Relaxed);
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let Some(c) = self.capacity.take() else { return };
        let held = self.since.elapsed();
        c.observe_hold(held);
        let mut s = c.state();
        s.in_use = s.in_use.saturating_sub(1);
        c.counters.in_use.store(u64::from(s.in_use), Ordering::Relaxed);
        Capacity::wake_head(&s);
    }
}

/// A lease on one key; released on drop, which wakes the first in line.
#[derive(Debug)]
pub struct KeyLease {
    capacity: Arc<Capacity>,
    label: String,
}

impl KeyLease {
    pub fn label(&self) -> &str {
        &self.label
    }
}

impl Drop for KeyLease {
    fn drop(&mut self) {
        let c = &self.capacity;
        let mut s = c.state();
        if let Some(n) = s.keys.get_mut(&self.label) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                s.keys.remove(&self.label);
            }
        }
        c.counters.leases.fetch_sub(1, Ordering::Relaxed);
        Capacity::wake_head(&s);
    }
}

/// Of the providers' expected waits (in chain order; `None`: cannot queue),
/// the index of the one to wait for: the shortest, the earlier on a tie.
pub fn earliest(waits: impl IntoIterator<Item = Option<Duration>>) -> Option<usize> {
    waits.into_iter().enumerate().filter_map(|(i, w)| w.map(|w| (w, i))).min().map(|(_, i)| i)
}

#[cfg(test)]
#[path = "queue_tests.rs"]
mod tests;
