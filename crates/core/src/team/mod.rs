//! Team mode's seam: what one gateway shares with the others of its team,
//! and how it takes what they share.
//!
//! The core makes every decision; a [`Team`] (the `switchyard-team` crate,
//! on Redis) carries decisions between instances and keeps the shared
//! state, so the core builds and tests without a Redis client. A lone
//! gateway (no `[team]`) is a team of one, [`Solo`]: it shares nothing,
//! counts nothing beyond this instance and pays nothing for it. The core
//! asks whichever it has the same way; whether the shared state is in
//! reach is the team's own business.
//!
//! What is shared here are *verdicts*, read on every request and changed
//! rarely: breaker states, rate-limit cool-downs, refused keys, provider
//! toggles. Each instance keeps its own copy, changed by what the team
//! says ([`crate::gateway::Inbound::apply`]), so the request path
//! never waits on Redis for them. Keys are named by their
//! [`crate::upstream::keys::fingerprint`], never by their secret.

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use serde::{Deserialize, Serialize};

mod solo;

pub use crate::ground::money::micros;
pub use crate::ground::share::Roll;
pub use crate::policy::budget::SpendAsk;
pub use solo::Solo;

/// A decision one instance makes that the others follow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "change", rename_all = "snake_case")]
pub enum Change {
    /// The provider's breaker tripped here: open for `for_ms` more. `local`
    /// when every failure behind it was only this instance's to see (it
    /// could not connect: its DNS, its network): the others open only when
    /// a second instance trips the same way.
    BreakerTripped { provider: String, for_ms: u64, reason: String, local: bool },
    /// The probe after a trip succeeded here: closed for everyone.
    BreakerClosed { provider: String, reason: String },
    /// Opened (`open`) or reset by hand, from a dashboard, tray or CLI.
    BreakerForced { provider: String, open: bool },
    /// A rate limit: the key (by fingerprint) or, without one, the whole
    /// provider cools down for `for_ms`. A later reset wins; an earlier one
    /// never shortens a cool-down.
    Cooling { provider: String, key: Option<String>, for_ms: u64 },
    /// The provider refused the key (401/403): not used again until keys
    /// are reloaded.
    Revoked { provider: String, key: String, reason: String },
    /// The provider switched on or off by hand.
    Toggled { provider: String, enabled: bool },
}

impl Change {
    /// The provider the change is about.
    pub fn provider(&self) -> &str {
        match self {
            Change::BreakerTripped { provider, .. }
            | Change::BreakerClosed { provider, .. }
            | Change::BreakerForced { provider, .. }
            | Change::Cooling { provider, .. }
            | Change::Revoked { provider, .. }
            | Change::Toggled { provider, .. } => provider,
        }
    }
}

/// A team-wide admission: a place under the provider's caps (a lease on
/// one request in flight, and on its key when the key has a cap of its
/// own) and what its team-wide rate buckets allow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmitAsk {
    pub provider: String,
    /// `max_concurrency`, team-wide.
    pub provider_max: Option<u32>,
    /// The key's fingerprint and its cap (`keys = { max_concurrency }`).
    pub key: Option<(String, u32)>,
    /// `requests_per_minute` and `tokens_per_minute`, team-wide.
    pub requests_per_minute: Option<u32>,
    pub tokens_per_minute: Option<u32>,
    /// The request's estimated tokens (its prompt and its output limit),
    /// reserved from the token bucket and settled with the real usage.
    pub tokens: u64,
    /// The team-wide spend counters of the budgets that cover the attempt,
    /// each reserving the attempt's estimated cost.
    pub budgets: Vec<SpendAsk>,
    /// This request's place in the provider's team-wide line, when the
    /// provider has a queue (`max_queue`): a request that finds the cap
    /// full waits in it, and the one at its head is the only one admitted
    /// when a place frees. `None`: no queue, a full cap is passed over
    /// (and a newcomer never passes those waiting).
    pub line: Option<Line>,
}

/// A request's place in a provider's line across the team.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// Names the place; the same on every ask of one wait.
    pub ticket: String,
    /// The most that may wait in line across the team.
    pub max_queue: u32,
    /// How long ago the request arrived at its instance: the line is
    /// ordered by arrival, measured on the team's clock less this age, so
    /// a request that waited on its own instance first keeps its turn.
    pub age_ms: u64,
}

/// What an attempt really used, once known. `None` for either: not known
/// (the provider said nothing of its usage, or the model has no price),
/// and the reservation stands as it was.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Used {
    pub tokens: Option<u64>,
    pub cost_usd: Option<f64>,
}

/// What an admission holds: a lease (renewed while the request and its
/// stream run), reserved tokens and reserved spend. Dropped, it releases
/// the lease and settles the reservations in one round trip: with what
/// [`Held::settle`] said the attempt used, or, when nothing was said (the
/// attempt failed, the client left), by returning them whole.
pub trait Held: Send + Sync + fmt::Debug {
    /// The attempt's real usage, settled when the hold is dropped.
    fn settle(&mut self, used: Used);
}

/// What the team said to a lease.
#[derive(Debug)]
pub enum Admitted {
    /// Admitted, holding a lease when a cap applies.
    Granted(Option<Box<dyn Held>>),
    /// A team-wide rate bucket has room again after this long.
    Wait(std::time::Duration),
    /// The provider (or the key) serves as many requests as it may, across
    /// the team.
    Full,
    /// In the provider's line ([`AdmitAsk::line`]) behind this many: ask
    /// again (with the same ticket) to keep the place and to be admitted
    /// once at its head with a place free; [`Team::leave_line`] gives it up.
    Queued { ahead: u32 },
    /// The provider's line across the team holds its `max_queue` already.
    LineFull { waiting: u32 },
    /// The budget at this index of [`AdmitAsk::budgets`] has spent (with
    /// what is reserved) this many micro-dollars, its limit or more.
    OverBudget { budget: usize, spent_micros: i64 },
    /// These budgets' counters are missing (Redis restarted, or a new
    /// period began) or this instance has not added its part to them yet:
    /// seed them ([`Team::seed_spend`]) and ask again. Nothing was taken.
    Unseeded(Vec<usize>),
    /// The shared state is out of reach (it failed this ask, or has been
    /// since before it): this instance's share of every limit decides
    /// alone, from this request on. What it holds is counted toward this
    /// instance's share of the budgets and brought to the team's count
    /// when the shared state is back.
    Unreachable(Option<Box<dyn Held>>),
    /// Nothing is counted across a team for this ask (a gateway alone, or
    /// an ask with no shared limit): this instance's own limits decide.
    Alone,
}

/// An admission's ask, built only by a team that counts it: a gateway
/// alone, or a team out of reach, never pays for building it. `None`:
/// nothing in it is limited.
pub type Asking<'a> = Box<dyn FnOnce() -> Option<AdmitAsk> + Send + 'a>;

/// A boxed future, for the object-safe [`Team`].
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// This instance's link to the rest of its team: one trait per concern
/// the instances share, each with a local implementation ([`Solo`], a
/// gateway alone) and the Redis one (`switchyard_team::RedisTeam`).
pub trait Team: Verdicts + Admission + SpendCounters + SharedCache {
    /// This instance's name: on every response (`x-switchyard-instance`)
    /// and in the team's view.
    fn instance(&self) -> &str;

    /// Whether the shared state is in reach. While it is not, every
    /// decision is this instance's alone (breakers follow their own
    /// timers). For views and the team's own runner; the request path
    /// asks the team and takes its answer.
    fn connected(&self) -> bool;

    /// This instance's place in the last roll call it saw: out of reach,
    /// each instance takes its [`Roll::share`] of every limit, and the
    /// shares add up to the limit.
    fn roll(&self) -> Roll {
        Roll::WHOLE
    }

    /// Whether this instance decides alone, at its share of every limit,
    /// because its team's shared state is out of reach; never for a team
    /// of one, which has nothing out of reach.
    fn degraded(&self) -> bool {
        false
    }

    /// A request found the shared state out of reach while this instance
    /// still counted it in reach: check now, so every instance takes its
    /// share of the caps at once rather than at its next heartbeat.
    fn out_of_reach(&self) {}

    /// The team as its shared state knows it, for `/admin/team`.
    fn view(&self) -> BoxFuture<'_, TeamView>;
}

/// Decisions one instance makes that the others follow: breakers,
/// cool-downs, refused keys, toggles.
pub trait Verdicts: Send + Sync + fmt::Debug {
    /// Hands a decision to the team; never waits for it to arrive. Whether
    /// the team took it: alone, or out of reach, the decision stays this
    /// instance's own (a tripped breaker follows its own timer).
    fn share(&self, change: Change) -> bool;
}

/// Places under the providers' caps, room in their rate buckets, their
/// lines, and the spend a budget reserves, across the team.
pub trait Admission: Send + Sync + fmt::Debug {
    /// An attempt's admission under the team's shared caps and rate
    /// limits, in one atomic step. `ask` is called only when the team
    /// counts it ([`Admitted::Alone`] otherwise).
    fn admit<'a>(&'a self, ask: Asking<'a>) -> BoxFuture<'a, Admitted>;

    /// Gives up `ticket`'s place in `provider`'s line (admitted elsewhere,
    /// out of time, or the client left), off the request path: never
    /// waits for Redis. A place not given up expires by itself shortly
    /// after its last ask.
    fn leave_line(&self, provider: &str, ticket: &str) {
        let _ = (provider, ticket);
    }
}

/// The budgets' spend counted across the team, and the one instance that
/// announces each threshold crossed.
pub trait SpendCounters: Send + Sync + fmt::Debug {
    /// Seeds a spend counter Redis lost (or a new period's) with what
    /// this instance's history has on record, `micros`, once per instance
    /// name: [`Seed::Whole`] when the history is the team's (PostgreSQL),
    /// set only while the counter is missing, so two instances seeding at
    /// once do not count it twice; [`Seed::Own`] when each instance keeps
    /// its own history (SQLite), added once per instance so the counter
    /// is the sum of every instance's part. Whether Redis answered.
    fn seed_spend(&self, counter: &str, micros: i64, expires_at_ms: i64, seed: Seed) -> BoxFuture<'_, bool>;

    /// What the team's spend counters named by `counters` hold now, in
    /// micro-dollars, in the same order (`None`: a counter Redis does not
    /// have); `None` when Redis is out of reach. One round trip.
    fn spent(&self, counters: Vec<String>) -> BoxFuture<'_, Option<Vec<Option<i64>>>> {
        let _ = counters;
        Box::pin(async { None })
    }

    /// Claims `what` (a budget's threshold in one period) for this
    /// instance to announce: `Some(true)` for the first instance of the
    /// team to claim it while the claim lives (until `expires_at_ms`),
    /// `Some(false)` for every other; `None` when Redis is out of reach.
    /// So an alert the team raises goes out once, from one instance.
    fn claim(&self, what: &str, expires_at_ms: i64) -> BoxFuture<'_, Option<bool>> {
        let _ = (what, expires_at_ms);
        Box::pin(async { None })
    }
}

/// The response cache across the team: an answer stored by one instance
/// is found by the others, and one instance at a time fills a key.
pub trait SharedCache: Send + Sync + fmt::Debug {
    /// The team's cached answer under `key` (a cache key's hex) or, when
    /// there is none, the fill lock on it if no other instance holds it
    /// (held for `lock_ttl` at most): one round trip. A team without a
    /// shared cache has nothing.
    fn cache_fill(&self, key: &str, lock_ttl: std::time::Duration) -> BoxFuture<'_, Shared> {
        let _ = (key, lock_ttl);
        Box::pin(async { Shared::Unreachable })
    }

    /// Stores the answer `entry` gives (its bytes; `None`: it cannot be
    /// kept) under `key` for `ttl`, and lets go of the fill `lock` this
    /// instance held for it, off the request path: never waits for Redis.
    /// A team without a shared cache never calls `entry`.
    fn cache_store(
        &self,
        key: &str,
        entry: &mut dyn FnMut() -> Option<Vec<u8>>,
        ttl: std::time::Duration,
        lock: Option<String>,
    ) {
        let _ = (key, entry, ttl, lock);
    }

    /// Lets go of a fill lock without an answer (the chain failed, or its
    /// answer cannot be kept), so a waiting instance takes it at once
    /// rather than after its TTL. Never waits for Redis.
    fn cache_release(&self, key: &str, lock: String) {
        let _ = (key, lock);
    }
}

/// What the team's cache said of one answer, in one round trip.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shared {
    /// An instance stored it: the entry's bytes, as the response cache
    /// encodes them for the team.
    Found(Vec<u8>),
    /// No instance has it and none is filling it: this one fills it, under
    /// the fill lock this token names, until it stores the answer
    /// ([`Team::cache_store`]) or gives up ([`Team::cache_release`]); a
    /// lock left behind expires with its TTL.
    Fill(String),
    /// Another instance is filling it now: ask again shortly.
    Filling,
    /// Redis is out of reach (or the entry could not be read): the local
    /// cache alone.
    Unreachable,
}

/// What the history a spend counter is seeded from holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seed {
    /// The whole team's spend (a shared PostgreSQL history).
    Whole,
    /// This instance's own spend (its SQLite history).
    Own,
}

/// The team, for `/admin/team`, `switchyard status` and the dashboard.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct TeamView {
    /// Whether this gateway is in a team at all (`[team]`).
    pub enabled: bool,
    /// This instance's name.
    pub instance: String,
    /// `connected`, or `degraded` while Redis is out of reach.
    pub state: String,
    /// The Redis URL, its password redacted.
    pub redis: Option<String>,
    pub namespace: Option<String>,
    /// Where the history is recorded: `sqlite` or `postgres`.
    pub history: String,
    /// Whether the history keeps up (its spool, its lag); absent when off.
    pub history_status: Option<crate::history::HistoryStatus>,
    /// Every live instance, this one included, by name.
    pub members: Vec<Member>,
}

/// One live instance of the team.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Member {
    pub name: String,
    /// Unique per process start.
    pub id: String,
    /// When it started, in Unix milliseconds.
    pub started_at: i64,
    pub version: String,
    /// Where it listens.
    pub address: String,
    /// Requests it has served since it started.
    pub requests: u64,
    /// Its last heartbeat, in Unix milliseconds (Redis's clock).
    pub seen_at: i64,
}

impl TeamView {
    /// A gateway without a team: itself alone.
    pub fn solo(instance: &str, history: &str) -> TeamView {
        TeamView {
            enabled: false,
            instance: instance.to_owned(),
            state: "solo".into(),
            redis: None,
            namespace: None,
            history: history.to_owned(),
            history_status: None,
            members: Vec::new(),
        }
    }
}

/// What an instance is called when `[team] instance` names none: the
/// host's name and the port it listens on.
pub fn solo_name(listen: std::net::SocketAddr) -> String {
    format!("{}:{}", crate::ground::host::name(), listen.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spend_is_counted_in_whole_micro_dollars_never_below_zero() {
        assert_eq!(micros(0.61), 610_000);
        assert_eq!(micros(0.000_000_4), 0);
        assert_eq!(micros(-1.0), 0);
        assert_eq!(micros(f64::NAN), 0);
    }

    #[test]
    fn changes_cross_as_tagged_json() {
        let c = Change::Cooling { provider: "p".into(), key: Some("ab12".into()), for_ms: 1500 };
        let text = serde_json::to_string(&c).unwrap();
        assert_eq!(text, r#"{"change":"cooling","provider":"p","key":"ab12","for_ms":1500}"#);
        assert_eq!(serde_json::from_str::<Change>(&text).unwrap(), c);
        assert_eq!(c.provider(), "p");
    }
}
