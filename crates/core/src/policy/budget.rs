//! Spend budgets: what each `[[budgets]]` entry has spent in its current
//! period (a local day, a week from Monday, a calendar month), whether it
//! blocks a candidate, and when it crosses 50, 80 and 100% of its limit.
//!
//! Spend is kept per period, provider and provider model (a ledger), not per
//! budget, so a budget added by a reload counts what was spent before it
//! existed. It is seeded from the history's rollups when the gateway starts
//! (so it survives restarts) and grows as each request's cost is known
//! ([`Budgets::record`], from the journal's finished record, streams
//! included). A request counts in the period it started in, as the rollups
//! count it.
//!
//! A team member's budget ([`BudgetScope::Member`]) is one of them too, put
//! in force from the members table ([`Budgets::set_members`]) rather than
//! the config. It is checked once per request, before any provider is
//! considered, and reserves the request's estimated cost while it runs
//! ([`Budgets::reserve`]), so requests in flight count: a burst of them
//! cannot all pass a budget that has room for one.
//!
//! Everything here takes the time as Unix milliseconds and the zone as a
//! value, so the arithmetic is tested on fixed instants in any zone.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use jiff::civil::Date;
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};
use serde::Serialize;

use crate::ground::money::micros;

/// What a budget counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BudgetScope {
    All,
    /// Requests a provider answered.
    Provider(String),
    /// Requests answered by a provider's model of this name.
    Model(String),
    /// Requests made with this team member's key, wherever they went.
    Member(String),
}

impl BudgetScope {
    /// Whether spend (or an attempt) at `provider` on its `model` is in
    /// scope. A member's scope is not about providers: it is checked once
    /// per request ([`Budgets::reserve`]), never per attempt.
    pub fn covers(&self, provider: &str, model: &str) -> bool {
        match self {
            BudgetScope::All => true,
            BudgetScope::Provider(p) => p == provider,
            BudgetScope::Model(m) => m == model,
            BudgetScope::Member(_) => false,
        }
    }

    /// Whether a request's spend at `provider` on its `model`, made by
    /// `member` (`None`: the owner), is in scope.
    pub fn counts(&self, provider: &str, model: &str, member: Option<&str>) -> bool {
        match self {
            BudgetScope::Member(name) => member == Some(name.as_str()),
            _ => self.covers(provider, model),
        }
    }

    /// The member whose budget this is.
    pub fn member(&self) -> Option<&str> {
        match self {
            BudgetScope::Member(name) => Some(name),
            _ => None,
        }
    }
}

impl fmt::Display for BudgetScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BudgetScope::All => f.write_str("all"),
            BudgetScope::Provider(p) => write!(f, "provider:{p}"),
            BudgetScope::Model(m) => write!(f, "model:{m}"),
            BudgetScope::Member(m) => write!(f, "member:{m}"),
        }
    }
}

/// A budget's period, in local time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum BudgetPeriod {
    Day,
    /// From Monday 00:00.
    Week,
    Month,
}

impl BudgetPeriod {
    pub const ALL: [BudgetPeriod; 3] = [BudgetPeriod::Day, BudgetPeriod::Week, BudgetPeriod::Month];

    pub fn as_str(self) -> &'static str {
        match self {
            BudgetPeriod::Day => "day",
            BudgetPeriod::Week => "week",
            BudgetPeriod::Month => "month",
        }
    }

    fn index(self) -> usize {
        match self {
            BudgetPeriod::Day => 0,
            BudgetPeriod::Week => 1,
            BudgetPeriod::Month => 2,
        }
    }
}

/// What a budget does past its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum BudgetAction {
    /// Announce 50, 80 and 100%; never refuse.
    Warn,
    /// Announce as `warn` does, and past the limit skip the providers in scope.
    Block,
}

/// A `[[budgets]]` entry, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    pub name: String,
    pub scope: BudgetScope,
    pub period: BudgetPeriod,
    pub limit_usd: f64,
    pub action: BudgetAction,
}

/// The shares of the limit that are announced, in percent.
pub const THRESHOLDS: [u8; 3] = [50, 80, 100];

/// A period's span in Unix milliseconds: `start_ms` included, `end_ms` not.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bounds {
    pub start_ms: i64,
    pub end_ms: i64,
}

impl Bounds {
    pub fn contains(self, at_ms: i64) -> bool {
        self.start_ms <= at_ms && at_ms < self.end_ms
    }
}

/// The period that holds `at_ms`, in `zone`: local midnight to local
/// midnight, so a day is 23 or 25 hours long where the clocks change.
pub fn bounds(period: BudgetPeriod, at_ms: i64, zone: &TimeZone) -> Bounds {
    // Fails only outside jiff's range (beyond the years ±9999): a UTC day there.
    zoned_bounds(period, at_ms, zone).unwrap_or_else(|_| {
        let start_ms = at_ms - at_ms.rem_euclid(86_400_000);
        Bounds { start_ms, end_ms: start_ms.saturating_add(86_400_000) }
    })
}

fn zoned_bounds(period: BudgetPeriod, at_ms: i64, zone: &TimeZone) -> Result<Bounds, jiff::Error> {
    let today = Timestamp::from_millisecond(at_ms)?.to_zoned_datetime(zone.clone()).date();
    let (first, next) = match period {
        BudgetPeriod::Day => (today, today.tomorrow()?),
        BudgetPeriod::Week => {
            let monday = today.checked_sub(i64::from(today.weekday().to_monday_zero_offset()).days())?;
            (monday, monday.checked_add(7.days())?)
        }
        BudgetPeriod::Month => {
            let first = today.first_of_month();
            (first, first.checked_add(1.month())?)
        }
    };
    Ok(Bounds { start_ms: midnight(first, zone)?, end_ms: midnight(next, zone)? })
}

/// When `date` begins in `zone`: midnight, or the first moment after it
/// where the clocks skip midnight.
fn midnight(date: Date, zone: &TimeZone) -> Result<i64, jiff::Error> {
    Ok(date.to_zoned_datetime(zone.clone())?.timestamp().as_millisecond())
}

/// The highest threshold `spent` has reached (0 for none).
pub fn level(spent_usd: f64, limit_usd: f64) -> u8 {
    THRESHOLDS.iter().rev().copied().find(|t| spent_usd >= limit_usd * f64::from(*t) / 100.0).unwrap_or(0)
}

/// A budget that crossed a threshold with the request just recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct Crossing {
    pub budget: String,
    pub scope: String,
    pub period: BudgetPeriod,
    pub action: BudgetAction,
    pub threshold: u8,
    pub spent_usd: f64,
    pub limit_usd: f64,
    pub resets_at_ms: i64,
}

/// Why a candidate may not be tried: a `block` budget over its limit.
#[derive(Debug, Clone, PartialEq)]
pub struct Blocked {
    pub budget: String,
    pub scope: String,
    pub period: BudgetPeriod,
    pub spent_usd: f64,
    pub limit_usd: f64,
    /// When the period ends and the budget allows requests again.
    pub resets_at_ms: i64,
}

impl fmt::Display for Blocked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let resets = Timestamp::from_millisecond(self.resets_at_ms).map(|t| t.to_string()).unwrap_or_default();
        write!(
            f,
            "budget {:?} ({}, per {}) has spent ${:.2} of ${:.2}; it resets at {resets}",
            self.budget,
            self.scope,
            self.period.as_str(),
            self.spent_usd,
            self.limit_usd
        )
    }
}

/// How long a team's spend counter outlives its period, so one read just
/// as the period ends still finds it.
const COUNTER_OUTLIVES_MS: i64 = 3_600_000;

/// A budget that covers an attempt, and its counter in the team.
#[derive(Debug, Clone)]
pub struct Covering {
    pub ask: SpendAsk,
    pub budget: Budget,
    /// The period the counter counts.
    pub bounds: Bounds,
}

impl Covering {
    /// Why the team refused the attempt: this budget has spent
    /// `spent_micros` across the team, its limit or more.
    pub fn blocked(&self, spent_micros: i64) -> Blocked {
        let b = &self.budget;
        Blocked {
            budget: b.name.clone(),
            scope: b.scope.to_string(),
            period: b.period,
            spent_usd: spent_micros as f64 / 1_000_000.0,
            limit_usd: b.limit_usd,
            resets_at_ms: self.bounds.end_ms,
        }
    }
}

/// A budget as the admin API and the dashboard show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct BudgetRow {
    pub name: String,
    /// `all`, `provider:NAME`, `model:NAME` or `member:NAME` (a team member's).
    pub scope: String,
    pub period: BudgetPeriod,
    pub action: BudgetAction,
    pub limit_usd: f64,
    pub spent_usd: f64,
    /// Spent over the limit: 1 is the limit.
    pub fraction: f64,
    pub period_start_ms: i64,
    pub resets_at_ms: i64,
    /// A `block` budget past its limit: requests in scope are refused.
    pub blocking: bool,
    /// Whether `spent_usd` is the team's (the shared counter, reservations
    /// in flight included) rather than this instance's own ledger.
    pub team: bool,
}

impl BudgetRow {
    /// The row with the team's spend, `spent_micros` across every instance.
    pub fn counted_by_team(self, spent_micros: i64) -> BudgetRow {
        let spent_usd = spent_micros.max(0) as f64 / 1_000_000.0;
        BudgetRow {
            spent_usd,
            fraction: spent_usd / self.limit_usd,
            blocking: self.action == BudgetAction::Block && spent_usd >= self.limit_usd,
            team: true,
            ..self
        }
    }
}

/// USD per provider, then per provider model, in one period; and per
/// member, spent and reserved by requests in flight.
#[derive(Debug, Default)]
struct Tally {
    bounds: Bounds,
    spent: HashMap<String, HashMap<String, f64>>,
    members: HashMap<String, f64>,
    reserved: HashMap<String, f64>,
}

impl Tally {
    fn fresh(bounds: Bounds) -> Tally {
        Tally { bounds, ..Tally::default() }
    }

    fn add_member(&mut self, member: &str, cost: f64) {
        *self.members.entry(member.to_string()).or_default() += cost;
    }

    /// What `member` has spent, and reserved for its requests in flight.
    fn committed(&self, member: &str) -> f64 {
        self.members.get(member).copied().unwrap_or(0.0) + self.reserved.get(member).copied().unwrap_or(0.0)
    }

    fn add(&mut self, provider: &str, model: &str, cost: f64) {
        let models = match self.spent.get_mut(provider) {
            Some(models) => models,
            None => self.spent.entry(provider.to_string()).or_default(),
        };
        match models.get_mut(model) {
            Some(sum) => *sum += cost,
            None => {
                models.insert(model.to_string(), cost);
            }
        }
    }

    fn spent(&self, scope: &BudgetScope) -> f64 {
        if let BudgetScope::Member(name) = scope {
            return self.members.get(name).copied().unwrap_or(0.0);
        }
        let mut sum = 0.0;
        for (provider, models) in &self.spent {
            for (model, cost) in models {
                if scope.covers(provider, model) {
                    sum += cost;
                }
            }
        }
        sum
    }
}

/// A configured budget and the highest threshold announced in its period.
#[derive(Debug)]
struct Watched {
    budget: Budget,
    /// (period start, threshold): a start other than the current one is a
    /// period that has ended, with nothing announced in the new one yet.
    announced: (i64, u8),
}

#[derive(Debug)]
struct Ledger {
    tallies: [Tally; 3],
    watched: Vec<Watched>,
}

/// What a member's request in flight holds of its budget, until its cost
/// is recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct Reserved {
    member: String,
    period: BudgetPeriod,
    within: Bounds,
    usd: f64,
}

impl Ledger {
    fn member_budget(&self, member: &str) -> Option<&Budget> {
        self.watched.iter().map(|w| &w.budget).find(|b| b.scope.member() == Some(member))
    }

    /// Starts over every period `now_ms` is not in.
    fn roll(&mut self, now_ms: i64, zone: &TimeZone) {
        for period in BudgetPeriod::ALL {
            let tally = &mut self.tallies[period.index()];
            if !tally.bounds.contains(now_ms) {
                *tally = Tally::fresh(bounds(period, now_ms, zone));
            }
        }
    }

    fn tally(&self, period: BudgetPeriod) -> &Tally {
        &self.tallies[period.index()]
    }

    /// A budget's spend and level now, as announced so far or not.
    fn announced_now(&self, w: &Watched) -> u8 {
        let start = self.tally(w.budget.period).bounds.start_ms;
        if w.announced.0 == start {
            w.announced.1
        } else {
            0
        }
    }

    /// The crossing of watched budget `i` at `spent_usd`, when it reaches
    /// a threshold not yet announced this period: announced from now on.
    fn cross(&mut self, i: usize, spent_usd: f64) -> Option<Crossing> {
        let w = &self.watched[i];
        let reached = level(spent_usd, w.budget.limit_usd);
        if reached <= self.announced_now(w) {
            return None;
        }
        let bounds = self.tally(w.budget.period).bounds;
        let b = &w.budget;
        let crossing = Crossing {
            budget: b.name.clone(),
            scope: b.scope.to_string(),
            period: b.period,
            action: b.action,
            threshold: reached,
            spent_usd,
            limit_usd: b.limit_usd,
            resets_at_ms: bounds.end_ms,
        };
        self.watched[i].announced = (bounds.start_ms, reached);
        Some(crossing)
    }

    /// `b` as it was in `old` (with what it announced), or new: announcing
    /// only the thresholds still ahead of its spend.
    fn keep_or_add(&self, old: &[Watched], b: &Budget) -> Watched {
        if let Some(w) = old.iter().find(|w| w.budget == *b) {
            return Watched { budget: b.clone(), announced: w.announced };
        }
        let tally = self.tally(b.period);
        let announced = (tally.bounds.start_ms, level(tally.spent(&b.scope), b.limit_usd));
        Watched { budget: b.clone(), announced }
    }

    /// Counts every threshold already reached as announced.
    fn settle(&mut self) {
        let levels: Vec<(i64, u8)> = self
            .watched
            .iter()
            .map(|w| {
                let tally = self.tally(w.budget.period);
                (tally.bounds.start_ms, level(tally.spent(&w.budget.scope), w.budget.limit_usd))
            })
            .collect();
        for (w, now) in self.watched.iter_mut().zip(levels) {
            w.announced = now;
        }
    }

    fn row(&self, b: &Budget) -> BudgetRow {
        let tally = self.tally(b.period);
        let spent_usd = tally.spent(&b.scope);
        BudgetRow {
            name: b.name.clone(),
            scope: b.scope.to_string(),
            period: b.period,
            action: b.action,
            limit_usd: b.limit_usd,
            spent_usd,
            fraction: spent_usd / b.limit_usd,
            period_start_ms: tally.bounds.start_ms,
            resets_at_ms: tally.bounds.end_ms,
            blocking: b.action == BudgetAction::Block && spent_usd >= b.limit_usd,
            team: false,
        }
    }
}

/// Every budget's spend, shared by the request path and the telemetry.
#[derive(Debug)]
pub struct Budgets {
    zone: TimeZone,
    ledger: Mutex<Ledger>,
    /// Whether spend on record has been loaded (once per process).
    seeded: AtomicBool,
    /// Whether any budget blocks: without one, admitting a candidate on
    /// the request path takes no lock.
    blocking: AtomicBool,
    /// Whether the team's counters raise the alerts ([`Budgets::crossed_by_team`]):
    /// then a request's cost is counted here but crosses nothing, as this
    /// instance's ledger holds only its own part of the spend.
    alerts_by_team: AtomicBool,
}

fn any_blocks(budgets: &[Budget]) -> bool {
    budgets.iter().any(|b| b.action == BudgetAction::Block)
}

impl Budgets {
    /// Budgets counted in `zone` (the system's own, but for tests).
    pub fn new(zone: TimeZone, budgets: &[Budget]) -> Budgets {
        let watched = budgets.iter().map(|b| Watched { budget: b.clone(), announced: (0, 0) }).collect();
        Budgets {
            zone,
            ledger: Mutex::new(Ledger { tallies: Default::default(), watched }),
            seeded: AtomicBool::new(false),
            blocking: AtomicBool::new(any_blocks(budgets)),
            alerts_by_team: AtomicBool::new(false),
        }
    }

    fn ledger(&self, now_ms: i64) -> std::sync::MutexGuard<'_, Ledger> {
        let mut ledger = self.ledger.lock().unwrap_or_else(|p| p.into_inner());
        ledger.roll(now_ms, &self.zone);
        ledger
    }

    /// Puts a reloaded list in force. A budget kept as it was keeps what it
    /// announced; a new or changed one announces only what is still ahead,
    /// not the thresholds its spend already passed. The members' budgets
    /// are not the config's: they stay as they are.
    pub fn configure(&self, budgets: &[Budget], now_ms: i64) {
        let mut ledger = self.ledger(now_ms);
        self.blocking.store(any_blocks(budgets), Ordering::Release);
        let old = std::mem::take(&mut ledger.watched);
        let (members, config): (Vec<Watched>, Vec<Watched>) =
            old.into_iter().partition(|w| w.budget.scope.member().is_some());
        for b in budgets {
            let w = ledger.keep_or_add(&config, b);
            ledger.watched.push(w);
        }
        ledger.watched.extend(members);
    }

    /// Puts the members' budgets in force (`member:NAME`, each blocking),
    /// as the members table has them now: one added, changed or gone
    /// since the last call is so from now on. Spend counted for a member
    /// stays, whether its budget is new or changed.
    pub fn set_members(&self, budgets: &[Budget], now_ms: i64) {
        let mut ledger = self.ledger(now_ms);
        let unchanged = {
            let current = ledger.watched.iter().filter(|w| w.budget.scope.member().is_some());
            current.map(|w| &w.budget).eq(budgets.iter())
        };
        if unchanged {
            return;
        }
        let old = std::mem::take(&mut ledger.watched);
        let (members, config): (Vec<Watched>, Vec<Watched>) =
            old.into_iter().partition(|w| w.budget.scope.member().is_some());
        ledger.watched = config;
        for b in budgets.iter().filter(|b| b.scope.member().is_some()) {
            let w = ledger.keep_or_add(&members, b);
            ledger.watched.push(w);
        }
    }

    /// The first call returns true, and only it: spend on record is loaded once.
    pub fn take_seed(&self) -> bool {
        !self.seeded.swap(true, Ordering::AcqRel)
    }

    /// Each period's bounds now, for loading what was spent in them.
    pub fn periods(&self, now_ms: i64) -> Vec<(BudgetPeriod, Bounds)> {
        let ledger = self.ledger(now_ms);
        BudgetPeriod::ALL.iter().map(|p| (*p, ledger.tally(*p).bounds)).collect()
    }

    /// Spend on record for one period: (provider, provider model, USD) since
    /// its start. Ignored if the period has ended since it was read.
    pub fn seed(&self, period: BudgetPeriod, within: Bounds, spent: &[(String, String, f64)], now_ms: i64) {
        let mut ledger = self.ledger(now_ms);
        let tally = &mut ledger.tallies[period.index()];
        if tally.bounds != within {
            return;
        }
        tally.spent.clear();
        for (provider, model, cost) in spent {
            tally.add(provider, model, *cost);
        }
        // Thresholds passed before the restart were announced then.
        ledger.settle();
    }

    /// Spend on record for one period by member: (member, USD) since its
    /// start. Ignored if the period has ended since it was read.
    pub fn seed_members(&self, period: BudgetPeriod, within: Bounds, spent: &[(String, f64)], now_ms: i64) {
        let mut ledger = self.ledger(now_ms);
        let tally = &mut ledger.tallies[period.index()];
        if tally.bounds != within {
            return;
        }
        tally.members.clear();
        for (member, cost) in spent {
            tally.add_member(member, *cost);
        }
        ledger.settle();
    }

    /// Counts a request's cost, made by `member` (`None`: the owner);
    /// returns the budgets that crossed a threshold with it (the highest
    /// each reached, once per period).
    pub fn record(
        &self,
        provider: &str,
        model: &str,
        member: Option<&str>,
        cost_usd: f64,
        started_ms: i64,
        now_ms: i64,
    ) -> Vec<Crossing> {
        if !cost_usd.is_finite() || cost_usd <= 0.0 {
            return Vec::new();
        }
        let mut ledger = self.ledger(now_ms);
        for tally in &mut ledger.tallies {
            if tally.bounds.contains(started_ms) {
                tally.add(provider, model, cost_usd);
                if let Some(member) = member {
                    tally.add_member(member, cost_usd);
                }
            }
        }
        if self.alerts_by_team.load(Ordering::Acquire) {
            return Vec::new();
        }
        let mut crossings = Vec::new();
        for i in 0..ledger.watched.len() {
            let w = &ledger.watched[i];
            if !w.budget.scope.counts(provider, model, member) {
                continue;
            }
            let spent_usd = ledger.tally(w.budget.period).spent(&w.budget.scope);
            if let Some(c) = ledger.cross(i, spent_usd) {
                crossings.push(c);
            }
        }
        crossings
    }

    /// Hands the alerts to the team's counters (`true`: in a team with
    /// Redis in reach) or back to this instance's ledger.
    pub fn alert_by_team(&self, team: bool) {
        self.alerts_by_team.store(team, Ordering::Release);
    }

    /// The thresholds each budget has crossed as the team counts it:
    /// `counted` is every counter ([`Budgets::every_counter`]) with what
    /// the team's holds, in micro-dollars (reservations in flight
    /// included). Each threshold once per period here, the highest
    /// reached; with its counter, which the team claims it by.
    pub fn crossed_by_team<'a>(&self, counted: &'a [(Covering, i64)], now_ms: i64) -> Vec<(&'a Covering, Crossing)> {
        let mut ledger = self.ledger(now_ms);
        let mut crossings = Vec::new();
        for (c, micros) in counted {
            let current = ledger.tally(c.budget.period).bounds == c.bounds;
            let Some(i) = ledger.watched.iter().position(|w| w.budget == c.budget).filter(|_| current) else {
                continue;
            };
            if let Some(crossing) = ledger.cross(i, (*micros).max(0) as f64 / 1_000_000.0) {
                crossings.push((c, crossing));
            }
        }
        crossings
    }

    /// Whether an attempt at `provider` on its `model` may go: refused by
    /// the `block` budget in scope past its limit that resets last.
    pub fn admit(&self, provider: &str, model: &str, now_ms: i64) -> Result<(), Blocked> {
        if !self.blocking.load(Ordering::Acquire) {
            return Ok(());
        }
        let ledger = self.ledger(now_ms);
        let mut blocked: Option<Blocked> = None;
        for w in &ledger.watched {
            let b = &w.budget;
            if b.action != BudgetAction::Block || !b.scope.covers(provider, model) {
                continue;
            }
            let tally = ledger.tally(b.period);
            let spent_usd = tally.spent(&b.scope);
            if spent_usd < b.limit_usd || blocked.as_ref().is_some_and(|x| x.resets_at_ms >= tally.bounds.end_ms) {
                continue;
            }
            blocked = Some(Blocked {
                budget: b.name.clone(),
                scope: b.scope.to_string(),
                period: b.period,
                spent_usd,
                limit_usd: b.limit_usd,
                resets_at_ms: tally.bounds.end_ms,
            });
        }
        blocked.map_or(Ok(()), Err)
    }

    /// Reserves `estimate_usd` of `member`'s budget for a request about to
    /// go, or says why it may not: what the member has spent in the
    /// budget's period and reserved for its requests in flight has reached
    /// the limit. `None`: the member has no budget. The reservation is the
    /// caller's to give back ([`Budgets::release`]) once the request's
    /// cost is recorded.
    pub fn reserve(&self, member: &str, estimate_usd: f64, now_ms: i64) -> Result<Option<Reserved>, Blocked> {
        let mut ledger = self.ledger(now_ms);
        let Some(b) = ledger.member_budget(member).cloned() else { return Ok(None) };
        let tally = &mut ledger.tallies[b.period.index()];
        let committed = tally.committed(member);
        if committed >= b.limit_usd {
            return Err(Blocked {
                budget: b.name.clone(),
                scope: b.scope.to_string(),
                period: b.period,
                spent_usd: committed,
                limit_usd: b.limit_usd,
                resets_at_ms: tally.bounds.end_ms,
            });
        }
        let usd = if estimate_usd.is_finite() { estimate_usd.max(0.0) } else { 0.0 };
        *tally.reserved.entry(member.to_string()).or_default() += usd;
        Ok(Some(Reserved { member: member.to_string(), period: b.period, within: tally.bounds, usd }))
    }

    /// Gives back a reservation (its request's cost is recorded, or it
    /// made none); nothing once its period has ended.
    pub fn release(&self, reserved: &Reserved, now_ms: i64) {
        let mut ledger = self.ledger(now_ms);
        let tally = &mut ledger.tallies[reserved.period.index()];
        if tally.bounds != reserved.within {
            return;
        }
        if let Some(held) = tally.reserved.get_mut(&reserved.member) {
            *held = (*held - reserved.usd).max(0.0);
            if *held == 0.0 {
                tally.reserved.remove(&reserved.member);
            }
        }
    }

    /// `member`'s budget as the team counts it: its counter for the
    /// current period, reserving `estimate_usd` (none without a budget).
    pub fn member_counter(&self, member: &str, estimate_usd: f64, now_ms: i64) -> Vec<Covering> {
        self.counters(|scope| scope.member() == Some(member), estimate_usd, now_ms)
    }

    /// The budgets that cover an attempt at `provider` on its `model`, as
    /// the team counts them: one shared counter each for the current
    /// period, reserving `estimate_usd`.
    pub fn covering(&self, provider: &str, model: &str, estimate_usd: f64, now_ms: i64) -> Vec<Covering> {
        self.counters(|scope| scope.covers(provider, model), estimate_usd, now_ms)
    }

    /// Every budget's counter in the team for the current period, with
    /// nothing to reserve and no limit: for seeding counters Redis lost.
    pub fn every_counter(&self, now_ms: i64) -> Vec<Covering> {
        let mut all = self.counters(|_| true, 0.0, now_ms);
        for c in &mut all {
            c.ask.limit_micros = None;
        }
        all
    }

    fn counters(&self, covers: impl Fn(&BudgetScope) -> bool, estimate_usd: f64, now_ms: i64) -> Vec<Covering> {
        let ledger = self.ledger(now_ms);
        ledger
            .watched
            .iter()
            .filter(|w| covers(&w.budget.scope))
            .map(|w| {
                let b = &w.budget;
                let bounds = ledger.tally(b.period).bounds;
                let ask = SpendAsk {
                    counter: format!("{}|{}|{}|{}", b.name, b.scope, b.period.as_str(), bounds.start_ms),
                    limit_micros: (b.action == BudgetAction::Block).then(|| micros(b.limit_usd)),
                    estimate_micros: micros(estimate_usd),
                    expires_at_ms: bounds.end_ms.saturating_add(COUNTER_OUTLIVES_MS),
                };
                Covering { ask, budget: b.clone(), bounds }
            })
            .collect()
    }

    /// What this instance's ledger counts for `scope` in the period
    /// `within` (nothing once that period has ended).
    pub fn spent(&self, scope: &BudgetScope, period: BudgetPeriod, within: Bounds, now_ms: i64) -> f64 {
        let ledger = self.ledger(now_ms);
        let tally = ledger.tally(period);
        if tally.bounds == within {
            tally.spent(scope)
        } else {
            0.0
        }
    }

    /// Every budget with its spend in the current period, in config order.
    pub fn rows(&self, now_ms: i64) -> Vec<BudgetRow> {
        let ledger = self.ledger(now_ms);
        ledger.watched.iter().map(|w| ledger.row(&w.budget)).collect()
    }
}

#[cfg(test)]
#[path = "budget_tests.rs"]
mod tests;

/// One budget's spend in one period, counted across the team: the
/// attempt's estimated cost is reserved at admission (refused when the
/// spend, reservations included, has reached the limit), then settled
/// with the real cost. So a budget of $X admits at most $X plus one
/// request's estimate, however many instances ask at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpendAsk {
    /// Names the counter: the budget, its scope, its period and the
    /// period's start, so a new period starts a new counter.
    pub counter: String,
    /// Micro-dollars at which the budget refuses; `None` never refuses
    /// (a `warn` budget, counted all the same).
    pub limit_micros: Option<i64>,
    /// The attempt's estimated cost in micro-dollars (its prompt and its
    /// output limit at the provider's prices; 0 when unpriced).
    pub estimate_micros: i64,
    /// When the counter expires (Unix ms): a while after the period ends.
    pub expires_at_ms: i64,
}
