//! What this instance keeps so that the team stays inside its limits while
//! Redis is out of reach, and what it brings back when Redis answers again.
//!
//! - **Flights**: every request of this instance in flight under a
//!   team-wide cap, leased in Redis or admitted under this instance's share
//!   while Redis was gone. The leases Redis holds are renewed from here;
//!   when Redis answers again, every flight is counted in the team's leases
//!   ([`Outage::adopt`]) *before* the instance says it is back, so the
//!   team's admission sees them and lets in no burst beside them (a Redis
//!   restarted empty lost the leases of requests still running, too).
//! - **Accounts**: per budget counter, what the team's counter held at its
//!   last read, and what this instance reserved and spent since Redis went.
//!   Out of reach, this instance may spend its share
//!   ([`switchyard_core::team::Roll::share_amount`]) of what remained at
//!   that read; the shares add up to the remainder. What it spent is added
//!   to the team's counter when Redis is back ([`Outage::settle_back`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use redis::aio::ConnectionManager;
use redis::ScriptInvocation;
use switchyard_core::team::{micros, AdmitAsk, Admitted, Held, Roll, Used};
use tracing::{info, warn};

use crate::keys::Keys;
use crate::scripts::{self, Scripts};

/// A flight's lease is not in Redis (admitted while Redis was gone).
const UNWRITTEN: u8 = 0;
/// Its lease is in Redis (granted there, or adopted since).
const WRITTEN: u8 = 1;
/// The request ended; a lease written for it must go.
const GONE: u8 = 2;

/// One request in flight under a team-wide cap.
#[derive(Debug)]
pub struct Flight {
    /// The lease's id in Redis.
    id: String,
    /// The provider's leases and the key's (or the provider's again).
    keys: (String, String),
    state: AtomicU8,
}

impl Flight {
    /// Marks the request ended; whether its lease is in Redis to remove.
    fn end(&self) -> bool {
        self.state.swap(GONE, Ordering::AcqRel) == WRITTEN
    }
}

/// A budget counter (by name) as this instance sees it during an outage.
#[derive(Debug, Default)]
struct Account {
    /// The team's counter at its last read (micro-dollars).
    read: Option<i64>,
    /// Reserved and spent since this outage began.
    committed: i64,
    /// The outage `committed` counts for.
    epoch: u64,
    /// Spent while Redis was out of reach, not yet on the team's counter.
    unsettled: i64,
    /// Estimates of requests admitted alone that still run, not on the
    /// team's counter.
    running: i64,
    /// Estimates of requests admitted alone that still run, on the team's
    /// counter since Redis came back: what they really cost replaces them.
    carried: i64,
    /// A settlement sent and not yet confirmed, by its number: sent again
    /// as it is until Redis confirms it, which takes it once only.
    sending: Option<(u64, i64)>,
}

/// See the module's documentation.
#[derive(Debug, Default)]
pub struct Outage {
    flights: Mutex<HashMap<u64, Arc<Flight>>>,
    next: AtomicU64,
    accounts: Mutex<HashMap<String, Account>>,
    /// Counts the outages: an account's reservations belong to one.
    epoch: AtomicU64,
    /// Leases written for requests that ended while no connection was at
    /// hand: removed at the next chance.
    orphans: Mutex<Vec<(String, String, String)>>,
    /// Numbers the settlements brought back to the team's counters.
    settlements: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Outage {
    /// Redis went out of reach: a new outage, its shares counted afresh.
    pub fn begin(&self) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
    }

    /// The team's counters (by name) as just read: each outage's share is
    /// of what remained at the last read.
    pub fn read(&self, counters: &[String], spent: &[Option<i64>]) {
        let mut accounts = lock(&self.accounts);
        for (key, micros) in counters.iter().zip(spent) {
            if let Some(micros) = micros {
                accounts.entry(key.clone()).or_default().read = Some(*micros);
            }
        }
    }

    /// Counts a request in flight under a cap: `written` when Redis holds
    /// its lease already. The returned guard ends the flight when dropped.
    pub fn fly(self: &Arc<Self>, id: String, keys: (String, String), written: bool) -> Boarded {
        let flight = Arc::new(Flight { id, keys, state: AtomicU8::new(if written { WRITTEN } else { UNWRITTEN }) });
        let slot = self.next.fetch_add(1, Ordering::Relaxed);
        lock(&self.flights).insert(slot, flight.clone());
        Boarded { outage: self.clone(), slot, flight }
    }

    fn land(&self, slot: u64) {
        lock(&self.flights).remove(&slot);
    }

    /// An attempt's admission while Redis is out of reach: its budgets
    /// within this instance's share of what remained (all or nothing), its
    /// place under the caps counted for when Redis is back. The caps
    /// themselves are this instance's share, which the caller holds to.
    pub fn admit(
        self: &Arc<Self>,
        keys: &Keys,
        ask: &AdmitAsk,
        roll: Roll,
        con: Option<ConnectionManager>,
    ) -> Admitted {
        let counters: Vec<&String> = ask.budgets.iter().map(|b| &b.counter).collect();
        let epoch = self.epoch.load(Ordering::Acquire);
        {
            let mut accounts = lock(&self.accounts);
            for (i, (key, b)) in counters.iter().zip(&ask.budgets).enumerate() {
                let account = accounts.entry((*key).clone()).or_default();
                if account.epoch != epoch {
                    account.epoch = epoch;
                    account.committed = 0;
                }
                let Some(limit) = b.limit_micros else { continue };
                let read = account.read.unwrap_or(0);
                let allowed = roll.share_amount(limit.saturating_sub(read));
                if account.committed.saturating_add(b.estimate_micros) > allowed {
                    let spent_micros = read.saturating_add(account.committed);
                    return Admitted::OverBudget { budget: i, spent_micros };
                }
            }
            for (key, b) in counters.iter().zip(&ask.budgets) {
                if let Some(account) = accounts.get_mut(*key) {
                    account.committed = account.committed.saturating_add(b.estimate_micros);
                    account.running = account.running.saturating_add(b.estimate_micros);
                }
            }
        }
        let capped = ask.provider_max.is_some() || ask.key.is_some();
        let boarded = capped.then(|| {
            let provider = keys.leases(&ask.provider);
            let key = ask.key.as_ref().map_or_else(|| provider.clone(), |(fp, _)| keys.key_leases(&ask.provider, fp));
            self.fly(uuid::Uuid::now_v7().to_string(), (provider, key), false)
        });
        let spend: Vec<(String, i64)> = ask.budgets.iter().map(|b| (b.counter.clone(), b.estimate_micros)).collect();
        if boarded.is_none() && spend.is_empty() {
            return Admitted::Unreachable(None);
        }
        let hold = OutageHold { outage: self.clone(), boarded, spend, epoch, used: None, con };
        Admitted::Unreachable(Some(Box::new(hold)))
    }

    /// Counts flights in the team's leases: every one when Redis is back
    /// (`all`: it may have come back empty), else those admitted alone
    /// since (on the way back, before this instance said so); then removes
    /// the leases of flights that ended meanwhile, and of those that ended
    /// with no connection at hand. One round trip, none when there is
    /// nothing to do; an error leaves them to the next try.
    pub async fn adopt(
        &self,
        con: &mut ConnectionManager,
        scripts: &Scripts,
        ttl: Duration,
        all: bool,
    ) -> redis::RedisResult<()> {
        let flights: Vec<Arc<Flight>> = lock(&self.flights)
            .values()
            .filter(|f| all || f.state.load(Ordering::Acquire) == UNWRITTEN)
            .cloned()
            .collect();
        if !flights.is_empty() {
            let calls = lease_calls(&scripts.adopt, &flights, ttl);
            scripts::pipelined(con, &calls).await?;
            let mut ended = Vec::new();
            for f in &flights {
                if f.state.compare_exchange(UNWRITTEN, WRITTEN, Ordering::AcqRel, Ordering::Acquire) == Err(GONE) {
                    ended.push((f.keys.0.clone(), f.keys.1.clone(), f.id.clone()));
                }
            }
            info!(requests = flights.len(), "team: the requests in flight here are counted in the team's leases again");
            lock(&self.orphans).extend(ended);
        }
        self.release_orphans(con).await
    }

    /// Removes the leases of requests that ended with no connection at hand.
    pub async fn release_orphans(&self, con: &mut ConnectionManager) -> redis::RedisResult<()> {
        let orphans = std::mem::take(&mut *lock(&self.orphans));
        if orphans.is_empty() {
            return Ok(());
        }
        let mut pipe = redis::pipe();
        for (provider, key, id) in &orphans {
            pipe.zrem(provider, id).ignore().zrem(key, id).ignore();
        }
        if let Err(e) = pipe.query_async::<()>(con).await {
            lock(&self.orphans).extend(orphans);
            return Err(e);
        }
        Ok(())
    }

    /// Renews the leases Redis holds for this instance's flights: one round
    /// trip for them all. A lease that expired meanwhile (this instance was
    /// paused past its TTL) is not brought back: its place may be another's.
    pub async fn renew(&self, con: &mut ConnectionManager, scripts: &Scripts, ttl: Duration) {
        let flights: Vec<Arc<Flight>> =
            lock(&self.flights).values().filter(|f| f.state.load(Ordering::Acquire) == WRITTEN).cloned().collect();
        if flights.is_empty() {
            return;
        }
        let calls = lease_calls(&scripts.renew, &flights, ttl);
        // Out of reach for now: the next renewal may still make it.
        if let Ok(Ok(answers)) = tokio::time::timeout(ttl / 3, scripts::pipelined(con, &calls)).await {
            let lost = answers.iter().filter(|a| a.first() != Some(&1)).count();
            if lost > 0 {
                warn!(lost, "team: leases expired while their requests ran (this instance was paused or cut off); the requests go on");
            }
        }
    }

    /// Adds to the team's counters what this instance spent while Redis
    /// was out of reach, and the estimates of the requests it admitted
    /// alone that still run (what they really cost replaces them when they
    /// end), only to counters that still hold its part (see the script).
    /// Each settlement is numbered and taken once by Redis, so one sent
    /// again (its answer lost) is not counted twice.
    pub async fn settle_back(
        &self,
        con: &mut ConnectionManager,
        scripts: &Scripts,
        keys: &Keys,
        instance: (&str, &str),
    ) -> redis::RedisResult<()> {
        let owed: Vec<(String, u64, i64)> = {
            let mut accounts = lock(&self.accounts);
            for a in accounts.values_mut() {
                if a.sending.is_none() && a.unsettled.saturating_add(a.running) != 0 {
                    let number = self.settlements.fetch_add(1, Ordering::Relaxed);
                    a.sending = Some((number, a.unsettled.saturating_add(a.running)));
                    a.carried = a.carried.saturating_add(a.running);
                    (a.unsettled, a.running) = (0, 0);
                }
            }
            accounts.iter().filter_map(|(k, a)| a.sending.map(|(n, m)| (k.clone(), n, m))).collect()
        };
        if owed.is_empty() {
            return Ok(());
        }
        let (name, id) = instance;
        let calls: Vec<_> = owed
            .iter()
            .map(|(counter, number, micros)| {
                let mut call = scripts.settle_outage.prepare_invoke();
                call.key(keys.spend(counter)).key(keys.spend_seeded(counter)).key(keys.settled(id, *number));
                call.arg(name).arg(*micros);
                call
            })
            .collect();
        let answers = scripts::pipelined(con, &calls).await?;
        let added = answers.iter().filter(|a| a.first() == Some(&1)).count();
        let mut accounts = lock(&self.accounts);
        for (counter, number, _) in &owed {
            if let Some(a) = accounts.get_mut(counter).filter(|a| a.sending.is_some_and(|(n, _)| n == *number)) {
                a.sending = None;
            }
        }
        info!(
            counters = owed.len(),
            added, "team: what was spent while Redis was out of reach is on the team's budgets"
        );
        Ok(())
    }

    /// An outage hold ends: its reservation becomes what was spent.
    fn settle(&self, spend: &[(String, i64)], epoch: u64, used: Option<Used>) {
        let cost = |estimate: i64| match used {
            None => 0,
            Some(Used { cost_usd: Some(usd), .. }) => micros(usd),
            // Spent, but not known how much: the estimate stands.
            Some(Used { cost_usd: None, .. }) => estimate,
        };
        let mut accounts = lock(&self.accounts);
        for (key, estimate) in spend {
            let account = accounts.entry(key.clone()).or_default();
            let spent = cost(*estimate);
            if account.epoch == epoch {
                account.committed = account.committed.saturating_add(spent - estimate).max(0);
            }
            // Its estimate is on the team's counter already when it was
            // carried back: only the difference is owed.
            if account.carried >= *estimate && *estimate > 0 {
                account.carried -= estimate;
                account.unsettled = account.unsettled.saturating_add(spent - estimate);
            } else {
                account.running = (account.running - estimate).max(0);
                account.unsettled = account.unsettled.saturating_add(spent);
            }
        }
    }
}

/// A flight on the books; dropped, it lands (and its lease, if written,
/// is removed by whoever holds the release: see [`Boarded::landed`]).
#[derive(Debug)]
pub struct Boarded {
    outage: Arc<Outage>,
    slot: u64,
    flight: Arc<Flight>,
}

impl Boarded {
    /// Off the books; whether Redis holds a lease for it still, and its
    /// keys and id, for the caller to remove.
    fn landed(&self) -> Option<(String, String, String)> {
        self.outage.land(self.slot);
        let f = &self.flight;
        f.end().then(|| (f.keys.0.clone(), f.keys.1.clone(), f.id.clone()))
    }

    /// Ends the flight of a lease whose release the caller sends itself.
    pub fn close(&self) {
        let _ = self.landed();
    }
}

/// What an admission while Redis was out of reach holds.
#[derive(Debug)]
struct OutageHold {
    outage: Arc<Outage>,
    boarded: Option<Boarded>,
    spend: Vec<(String, i64)>,
    epoch: u64,
    used: Option<Used>,
    con: Option<ConnectionManager>,
}

impl Held for OutageHold {
    fn settle(&mut self, used: Used) {
        self.used = Some(used);
    }
}

impl Drop for OutageHold {
    fn drop(&mut self) {
        self.outage.settle(&self.spend, self.epoch, self.used);
        let Some(lease) = self.boarded.as_ref().and_then(Boarded::landed) else { return };
        // Adopted into Redis since: its lease goes now.
        let handle = tokio::runtime::Handle::try_current().ok();
        match (self.con.clone(), handle) {
            (Some(mut con), Some(handle)) => {
                let outage = self.outage.clone();
                handle.spawn(async move {
                    let (provider, key, id) = &lease;
                    let mut pipe = redis::pipe();
                    pipe.zrem(provider, id).ignore().zrem(key, id).ignore();
                    let sent = tokio::time::timeout(Duration::from_secs(2), pipe.query_async::<()>(&mut con)).await;
                    if !matches!(sent, Ok(Ok(()))) {
                        lock(&outage.orphans).push(lease);
                    }
                });
            }
            _ => lock(&self.outage.orphans).push(lease),
        }
    }
}

/// `script` called once per flight on its lease (ADOPT, RENEW: KEYS the
/// provider's and the key's leases, ARGV the lease id and its TTL).
fn lease_calls<'a>(script: &'a redis::Script, flights: &'a [Arc<Flight>], ttl: Duration) -> Vec<ScriptInvocation<'a>> {
    flights
        .iter()
        .map(|f| {
            let mut call = script.prepare_invoke();
            call.key(&f.keys.0).key(&f.keys.1).arg(&f.id).arg(millis(ttl));
            call
        })
        .collect()
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use switchyard_core::team::SpendAsk;

    use super::*;

    fn ask(provider_max: Option<u32>, limit: Option<i64>, estimate: i64) -> AdmitAsk {
        AdmitAsk {
            provider: "p".into(),
            provider_max,
            key: None,
            requests_per_minute: None,
            tokens_per_minute: None,
            tokens: 0,
            budgets: vec![SpendAsk {
                counter: "day|all|day|0".into(),
                limit_micros: limit,
                estimate_micros: estimate,
                expires_at_ms: i64::MAX,
            }],
            line: None,
        }
    }

    /// Admits `ask` until refused; the holds taken.
    fn admit_all(outage: &Arc<Outage>, keys: &Keys, ask: &AdmitAsk, roll: Roll) -> Vec<Box<dyn Held>> {
        let mut held = Vec::new();
        for _ in 0..100 {
            match outage.admit(keys, ask, roll, None) {
                Admitted::Unreachable(Some(h)) => held.push(h),
                Admitted::OverBudget { budget: 0, .. } => return held,
                other => panic!("{other:?}"),
            }
        }
        panic!("never refused");
    }

    #[test]
    fn three_instances_out_of_reach_spend_no_more_than_what_remained_between_them() {
        let keys = Keys::new("t");
        let a = ask(None, Some(1_000_000), 50_000);
        let mut spent = 0;
        for rank in 0..3 {
            let outage = Arc::new(Outage::default());
            outage.read(&["day|all|day|0".into()], &[Some(400_000)]);
            outage.begin();
            let held = admit_all(&outage, &keys, &a, Roll::new(3, rank));
            assert_eq!(held.len(), 4, "a share of 200 000 of the 600 000 left, 50 000 a request");
            spent += held.len() as i64 * 50_000;
        }
        assert!(spent <= 600_000, "{spent}");
    }

    #[test]
    fn a_request_that_cost_less_than_its_estimate_leaves_room_and_its_cost_is_owed_to_the_team() {
        let keys = Keys::new("t");
        let outage = Arc::new(Outage::default());
        outage.read(&["day|all|day|0".into()], &[Some(0)]);
        outage.begin();
        let a = ask(None, Some(100_000), 50_000);
        let mut held = admit_all(&outage, &keys, &a, Roll::new(2, 0));
        assert_eq!(held.len(), 1, "half of 100 000 is one estimate");
        held[0].settle(Used { tokens: None, cost_usd: Some(0.01) });
        drop(held);
        let again = admit_all(&outage, &keys, &a, Roll::new(2, 0));
        assert_eq!(again.len(), 0, "10 000 spent: 40 000 left of the share, under one estimate");
        drop(again);
        let owed = lock(&outage.accounts).get("day|all|day|0").unwrap().unsettled;
        assert_eq!(owed, 10_000, "what was spent, to bring to the team's counter");
        // A failed attempt costs nothing and gives its reservation back.
        let failed = outage.admit(&keys, &ask(None, None, 7), Roll::new(2, 0), None);
        assert!(matches!(failed, Admitted::Unreachable(Some(_))));
        drop(failed);
        assert_eq!(lock(&outage.accounts).get("day|all|day|0").unwrap().unsettled, 10_000);
    }

    #[test]
    fn a_warn_budget_refuses_nothing_but_is_counted_and_a_capped_ask_is_on_the_books() {
        let keys = Keys::new("t");
        let outage = Arc::new(Outage::default());
        let Admitted::Unreachable(Some(mut hold)) = outage.admit(&keys, &ask(Some(2), None, 5), Roll::new(3, 2), None)
        else {
            panic!("held")
        };
        assert_eq!(lock(&outage.flights).len(), 1, "counted for when Redis is back");
        hold.settle(Used { tokens: None, cost_usd: None });
        drop(hold);
        assert!(lock(&outage.flights).is_empty(), "landed");
        assert_eq!(lock(&outage.accounts).get("day|all|day|0").unwrap().unsettled, 5, "cost unknown: the estimate");
        assert!(lock(&outage.orphans).is_empty(), "never written, nothing to remove");
    }

    /// The machine's Redis (127.0.0.1:6379, which `.ci/run` starts), under
    /// a namespace of this test's own. Without a Redis the test fails.
    async fn redis() -> (ConnectionManager, Keys) {
        let client = redis::Client::open("redis://127.0.0.1:6379/0").unwrap();
        let con = ConnectionManager::new(client).await.expect("Redis must run on 127.0.0.1:6379 (.ci/run starts it)");
        (con, Keys::new(&format!("test-outage-{}", uuid::Uuid::now_v7())))
    }

    async fn zcard(con: &mut ConnectionManager, key: &str) -> i64 {
        redis::cmd("ZCARD").arg(key).query_async(con).await.unwrap()
    }

    #[tokio::test]
    async fn back_from_an_outage_every_request_in_flight_is_in_the_team_s_leases_and_leaves_with_its_request() {
        let (mut con, keys) = redis().await;
        let scripts = Arc::new(Scripts::new());
        let outage = Arc::new(Outage::default());
        let leases = keys.leases("p");
        let a = AdmitAsk { budgets: Vec::new(), ..ask(Some(4), None, 0) };
        let holds: Vec<_> = (0..3)
            .map(|_| match outage.admit(&keys, &a, Roll::new(3, 0), Some(con.clone())) {
                Admitted::Unreachable(Some(h)) => h,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(zcard(&mut con, &leases).await, 0, "nothing written while Redis is out of reach");
        // A lease a Redis restart lost, of a request granted before it.
        let granted = outage.fly("granted".into(), (leases.clone(), leases.clone()), true);

        outage.adopt(&mut con, &scripts, Duration::from_secs(30), true).await.unwrap();
        assert_eq!(zcard(&mut con, &leases).await, 4, "all four counted before the cap opens whole");
        outage.renew(&mut con, &scripts, Duration::from_secs(30)).await;
        assert_eq!(zcard(&mut con, &leases).await, 4);

        drop(holds);
        granted.close();
        let _: () = redis::cmd("ZREM").arg(&leases).arg("granted").query_async(&mut con).await.unwrap();
        let gone = async {
            while zcard(&mut con.clone(), &leases).await > 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(5), gone).await.expect("no lease left when idle");
        assert!(lock(&outage.flights).is_empty());
    }

    #[tokio::test]
    async fn a_request_admitted_alone_on_the_way_back_is_counted_at_the_next_sync() {
        let (mut con, keys) = redis().await;
        let scripts = Arc::new(Scripts::new());
        let outage = Arc::new(Outage::default());
        let leases = keys.leases("p");
        let granted = outage.fly("granted".into(), (leases.clone(), leases.clone()), true);
        let late = outage.fly("late".into(), (leases.clone(), leases.clone()), false);
        outage.adopt(&mut con, &scripts, Duration::from_secs(30), false).await.unwrap();
        let ids: Vec<String> = redis::cmd("ZRANGE").arg(&leases).arg(0).arg(-1).query_async(&mut con).await.unwrap();
        assert_eq!(ids, vec!["late".to_string()], "only what Redis has not been told of");
        late.close();
        granted.close();
        // Ended after it was written: its lease goes with the next release.
        let _: () = redis::cmd("ZREM").arg(&leases).arg("late").query_async(&mut con).await.unwrap();
    }

    #[tokio::test]
    async fn what_runs_at_the_return_is_carried_and_a_settlement_sent_twice_counts_once() {
        let (mut con, keys) = redis().await;
        let scripts = Arc::new(Scripts::new());
        let counter = "day|all|day|0";
        let _: () = redis::cmd("SET").arg(keys.spend(counter)).arg(0).query_async(&mut con).await.unwrap();
        let _: () = redis::cmd("SADD").arg(keys.spend_seeded(counter)).arg("gw-a").query_async(&mut con).await.unwrap();
        let outage = Arc::new(Outage::default());
        outage.begin();
        let mut running = admit_all(&outage, &keys, &ask(None, Some(1_000_000), 300_000), Roll::WHOLE);
        assert_eq!(running.len(), 3);
        running.truncate(1);
        running[0].settle(Used { tokens: None, cost_usd: Some(0.1) });
        // Two ended before the return (nothing spent), one still runs.
        let running = running.pop().unwrap();
        let get = async |con: &mut ConnectionManager| -> i64 {
            redis::cmd("GET").arg(keys.spend(counter)).query_async(con).await.unwrap()
        };
        outage.settle_back(&mut con, &scripts, &keys, ("gw-a", "id-a")).await.unwrap();
        assert_eq!(get(&mut con).await, 300_000, "the estimate of the one still running is on the team's counter");
        // The same settlement again (its answer was lost): taken once.
        lock(&outage.accounts).get_mut(counter).unwrap().sending = Some((0, 300_000));
        outage.settle_back(&mut con, &scripts, &keys, ("gw-a", "id-a")).await.unwrap();
        assert_eq!(get(&mut con).await, 300_000);
        drop(running);
        outage.settle_back(&mut con, &scripts, &keys, ("gw-a", "id-a")).await.unwrap();
        assert_eq!(get(&mut con).await, 100_000, "its real cost replaced its estimate");
    }

    #[tokio::test]
    async fn spend_made_alone_is_added_only_to_a_counter_that_holds_this_instance_s_part() {
        let (mut con, keys) = redis().await;
        let scripts = Scripts::new();
        for (counter, exists, seeded) in [("kept", true, true), ("lost", false, false), ("reseeded", true, false)] {
            let outage = Outage::default();
            outage.settle(&[(counter.to_string(), 0)], 0, Some(Used { tokens: None, cost_usd: Some(0.25) }));
            if exists {
                let _: () =
                    redis::cmd("SET").arg(keys.spend(counter)).arg(1_000_000).query_async(&mut con).await.unwrap();
            }
            if seeded {
                let _: () =
                    redis::cmd("SADD").arg(keys.spend_seeded(counter)).arg("gw-a").query_async(&mut con).await.unwrap();
            }
            outage.settle_back(&mut con, &scripts, &keys, ("gw-a", "id-a")).await.unwrap();
            let now: Option<i64> = redis::cmd("GET").arg(keys.spend(counter)).query_async(&mut con).await.unwrap();
            let expected = match counter {
                "kept" => Some(1_250_000),
                "lost" => None,
                _ => Some(1_000_000),
            };
            assert_eq!(now, expected, "{counter}");
            assert_eq!(lock(&outage.accounts)[counter].unsettled, 0, "{counter}: off the books either way");
        }
    }
}
