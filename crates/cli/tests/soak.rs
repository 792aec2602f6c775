//! The soak: a team of three real `switchyard serve` processes on one
//! private Redis and one PostgreSQL database of its own, under steady load
//! from twelve clients, through one fault after another: Redis killed for
//! ten seconds and started again empty, an instance paused past its lease
//! TTL, the database out of reach, an instance killed -9 and started again.
//! In every phase the capped provider never has more than its cap in
//! flight; every answered request is on record exactly once; the budget
//! ends within one request's estimate of its limit; no lease is left when
//! idle; each process's memory stays bounded.
//!
//! The short form (the default) takes about a minute; `SWITCHYARD_SOAK=long`
//! (`bench/soak`) lengthens the steady phases to a few minutes in all.
//! Ignored in the debug suite: `.ci/run` runs the short form in release.
//! Needs `redis-server` and PostgreSQL on 127.0.0.1:5432 (trust auth,
//! database `test`), as team.rs and history_pg.rs do.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::pg::Db;
use support::redis::Redis;
use support::Served;
use switchyard_sim::{Script, SimProvider};

/// The two soaks share two cores: one at a time, so neither's timing is
/// the other's load.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const LEASE_TTL: Duration = Duration::from_millis(1500);

/// How long the steady parts of the phases last: short by default, a few
/// minutes in all with `SWITCHYARD_SOAK=long`.
#[derive(Debug, Clone, Copy)]
struct Pace {
    /// Load before the first fault: past a heartbeat, so every instance
    /// has counted the other two.
    warm_up: Duration,
    /// Load after each fault, once the team is whole again.
    steady: Duration,
}

impl Pace {
    fn from_env() -> Pace {
        match std::env::var("SWITCHYARD_SOAK").as_deref() {
            Ok("long") => Pace { warm_up: Duration::from_secs(30), steady: Duration::from_secs(30) },
            _ => Pace { warm_up: Duration::from_secs(3), steady: Duration::from_secs(2) },
        }
    }
}

/// Polls `check` every `every` until it holds or `within` passes; returns
/// how long it took.
async fn until<F, Fut>(within: Duration, every: Duration, check: F) -> Option<Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    support::until_every(within, every, check).await
}

/// The capped provider and the spare, in a config for instance `name` of
/// the team on `redis` (namespace `ns`): both serve `m` and `b`, the capped
/// one first; `extra` is appended (prices, budgets).
struct Setup<'a> {
    ns: &'a str,
    capped: (&'a str, &'a SimProvider, u32),
    spare: &'a SimProvider,
    extra: String,
}

fn config(dir: &Path, name: &str, redis: &Redis, setup: &Setup<'_>) -> PathBuf {
    let (capped, sim, cap) = setup.capped;
    let text = format!(
        "[team]\nredis = \"{}\"\nnamespace = \"{}\"\ninstance = \"{name}\"\nlease_ttl = \"{}ms\"\n\n\
         [server]\nrate_limit_per_minute = 1000000\n\n\
         [policy]\nmax_retries = 0\n\n\
         {}policy = {{ max_concurrency = {cap} }}\n\n{}\n\
         [[routes]]\nmodel = \"m\"\nchain = [\"{capped}\", \"spare\"]\n\n\
         [[routes]]\nmodel = \"b\"\nchain = [\"{capped}\", \"spare\"]\n\n{}",
        redis.url(),
        setup.ns,
        LEASE_TTL.as_millis(),
        support::provider_toml(capped, sim, "[\"m\", \"b\"]", "auth = \"none\""),
        support::provider_toml("spare", setup.spare, "[\"m\", \"b\"]", "auth = \"none\""),
        setup.extra,
    );
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

struct Instance {
    name: String,
    served: Served,
    data: PathBuf,
    config: PathBuf,
}

/// Starts instance `name` on `config` and its data dir under `dir`, off
/// the async workers (starting blocks until it listens).
async fn start(dir: &Path, name: &str, config: &Path, history: Option<String>) -> Instance {
    let (name, data, config) = (name.to_string(), dir.join(format!("{name}-data")), config.to_path_buf());
    tokio::task::spawn_blocking(move || {
        let envs: Vec<(&str, &str)> =
            history.as_deref().map(|url| ("SWITCHYARD_HISTORY_URL", url)).into_iter().collect();
        let served = Served::start(&config, &data, &envs);
        Instance { name, served, data, config }
    })
    .await
    .unwrap()
}

async fn admin(i: &Instance, path: &str) -> Value {
    let token = std::fs::read_to_string(i.data.join("admin-token")).unwrap();
    let r = support::client()
        .get(format!("http://{}{path}", i.served.addr))
        .bearer_auth(token.trim())
        .timeout(Duration::from_secs(5))
        .send()
        .await;
    match r {
        Ok(r) if r.status() == 200 => r.json().await.unwrap_or_default(),
        _ => Value::Null,
    }
}

/// Whether every instance is connected and counts `n` on the roll call.
async fn whole(instances: &[Option<Instance>], n: usize) -> bool {
    for i in instances.iter().flatten() {
        let team = admin(i, "/admin/team").await;
        if team["state"] != "connected" || team["members"].as_array().map_or(0, Vec::len) != n {
            return false;
        }
    }
    true
}

/// Whether every instance says its team is out of reach.
async fn degraded(instances: &[Option<Instance>]) -> bool {
    for i in instances.iter().flatten() {
        if admin(i, "/admin/team").await["state"] != "degraded" {
            return false;
        }
    }
    true
}

fn unix_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

/// The most memory the process ever had resident (VmHWM), in KiB.
fn vm_hwm_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn signal(pid: u32, signal: &str) {
    Command::new("kill").args([signal, &pid.to_string()]).status().unwrap();
}

/// Where the clients send: each instance's address while it is up, and
/// how many times it went down (so a request cut by a kill is told from
/// a request the gateway failed).
#[derive(Debug, Clone)]
struct Slot {
    addr: Option<String>,
    downs: u64,
}

type Slots = Arc<Mutex<Vec<Slot>>>;

/// What became of one request.
#[derive(Debug, Clone, PartialEq)]
enum Kind {
    /// 200, with the gateway's request id.
    Answered(String),
    /// Refused because the budget is spent: what a `block` budget does.
    OverBudget(u16),
    /// Any other answer but 200: status, error code, message.
    Failed(u16, String, String),
    /// No answer, because its instance was killed on purpose meanwhile.
    CutByKill,
    /// No answer, for another reason.
    Lost(String),
}

#[derive(Debug, Clone)]
struct Outcome {
    phase: usize,
    instance: usize,
    model: &'static str,
    kind: Kind,
}

/// The phases so far: their names, when each began; the one now is the last.
#[derive(Debug, Clone)]
struct Phases {
    now: Arc<AtomicUsize>,
    started: Arc<Mutex<Vec<(&'static str, Instant)>>>,
    /// When each began, in Unix ms, to place the history's records.
    wall: Arc<Mutex<Vec<i64>>>,
    /// The capped provider's most requests in flight at once, per phase.
    peaks: Arc<Vec<AtomicUsize>>,
}

impl Phases {
    fn new(first: &'static str) -> Phases {
        Phases {
            now: Arc::new(AtomicUsize::new(0)),
            started: Arc::new(Mutex::new(vec![(first, Instant::now())])),
            wall: Arc::new(Mutex::new(vec![unix_ms()])),
            peaks: Arc::new((0..16).map(|_| AtomicUsize::new(0)).collect()),
        }
    }

    fn next(&self, name: &'static str) {
        let mut started = self.started.lock().unwrap();
        started.push((name, Instant::now()));
        self.wall.lock().unwrap().push(unix_ms());
        self.now.store(started.len() - 1, Ordering::SeqCst);
        eprintln!("soak: phase {} ({name})", started.len());
    }

    fn now(&self) -> usize {
        self.now.load(Ordering::SeqCst)
    }

    /// The phase under way at `ms` (Unix ms), and how far into it.
    fn at(&self, ms: i64) -> Option<(usize, f64)> {
        let wall = self.wall.lock().unwrap();
        let i = wall.iter().rposition(|start| *start <= ms)?;
        Some((i, (ms - wall[i]) as f64 / 1000.0))
    }

    /// Follows `sim`'s requests in flight until `stop`, keeping each
    /// phase's peak.
    fn watch(&self, sim: &SimProvider, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<()> {
        let mut rx = sim.in_flight_watch();
        let phases = self.clone();
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let n = *rx.borrow_and_update();
                phases.peaks[phases.now()].fetch_max(n, Ordering::Relaxed);
                let _ = tokio::time::timeout(Duration::from_millis(5), rx.changed()).await;
            }
        })
    }
}

/// One client's loop: requests for `model` (its body `body`) to instance
/// `home`, or the next one up while `home` is down; at most one every
/// `every` when paced; until `stop`. Every outcome goes to `outcomes`.
struct Client {
    home: usize,
    model: &'static str,
    body: Vec<u8>,
    every: Option<Duration>,
}

fn client(
    c: Client,
    slots: Slots,
    phases: Phases,
    stop: Arc<AtomicBool>,
    outcomes: Arc<Mutex<Vec<Outcome>>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let http = reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(30)).build().unwrap();
        let mut pace = c.every.map(|every| {
            let mut i = tokio::time::interval(every);
            i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            i
        });
        for _ in 0..1_000_000 {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            if let Some(pace) = &mut pace {
                pace.tick().await;
            }
            let target = {
                let slots = slots.lock().unwrap();
                let n = slots.len();
                (0..n).map(|k| (c.home + k) % n).find_map(|i| Some((i, slots[i].addr.clone()?, slots[i].downs)))
            };
            let Some((instance, addr, downs)) = target else {
                // Every instance down at once never happens here; bounded all the same.
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            };
            let phase = phases.now();
            let sent = http
                .post(format!("http://{addr}/v1/chat/completions"))
                .header("content-type", "application/json")
                .body(c.body.clone())
                .send()
                .await;
            let kind = match sent {
                Ok(r) => {
                    let status = r.status().as_u16();
                    let id = r.headers().get("x-request-id").and_then(|v| v.to_str().ok()).map(str::to_string);
                    match (status, r.bytes().await) {
                        (200, Ok(_)) => Kind::Answered(id.unwrap_or_default()),
                        (status, Ok(body)) => {
                            let v: Value = serde_json::from_slice(&body).unwrap_or_default();
                            let code = v["error"]["code"].as_str().unwrap_or_default().to_string();
                            let message = v["error"]["message"].as_str().unwrap_or_default().to_string();
                            if over_budget(status, &code, &message) {
                                Kind::OverBudget(status)
                            } else {
                                Kind::Failed(status, code, message)
                            }
                        }
                        (_, Err(e)) => cut_or_lost(&slots, instance, downs, e),
                    }
                }
                Err(e) => cut_or_lost(&slots, instance, downs, e),
            };
            outcomes.lock().unwrap().push(Outcome { phase, instance, model: c.model, kind });
        }
    })
}

/// A budget's refusal: a 429 `budget_exceeded` when every candidate is
/// over budget, or a 503 `no_provider_available` whose notes name the
/// budget (the capped provider full, the others over budget).
fn over_budget(status: u16, code: &str, message: &str) -> bool {
    (status == 429 && code == "budget_exceeded")
        || (status == 503 && code == "no_provider_available" && message.contains("budget"))
}

fn cut_or_lost(slots: &Slots, instance: usize, downs: u64, e: reqwest::Error) -> Kind {
    if slots.lock().unwrap()[instance].downs != downs {
        Kind::CutByKill
    } else {
        Kind::Lost(e.to_string())
    }
}

/// A phase's line in the table.
#[derive(Debug, Default, Clone)]
struct Row {
    name: &'static str,
    secs: f64,
    sent: usize,
    answered: usize,
    over_budget: usize,
    failed: usize,
    cut_by_kill: usize,
    lost: usize,
    peak: usize,
}

fn table(phases: &Phases, ended: Instant, outcomes: &[Outcome]) -> Vec<Row> {
    let started = phases.started.lock().unwrap().clone();
    let mut rows: Vec<Row> = started
        .iter()
        .enumerate()
        .map(|(i, (name, at))| {
            let end = started.get(i + 1).map_or(ended, |(_, next)| *next);
            Row {
                name,
                secs: (end - *at).as_secs_f64(),
                peak: phases.peaks[i].load(Ordering::Relaxed),
                ..Row::default()
            }
        })
        .collect();
    for o in outcomes {
        let row = &mut rows[o.phase];
        row.sent += 1;
        match o.kind {
            Kind::Answered(_) => row.answered += 1,
            Kind::OverBudget(_) => row.over_budget += 1,
            Kind::Failed(..) => row.failed += 1,
            Kind::CutByKill => row.cut_by_kill += 1,
            Kind::Lost(_) => row.lost += 1,
        }
    }
    rows
}

fn print_table(title: &str, capped: &str, rows: &[Row]) {
    println!("\n{title}");
    println!(
        "{:<3} {:<26} {:>7} {:>6} {:>6} {:>11} {:>7} {:>9} {:>6} {:>10}",
        "#",
        "phase",
        "secs",
        "sent",
        "200",
        "over budget",
        "failed",
        "cut by -9",
        "lost",
        format!("peak@{capped}")
    );
    for (i, r) in rows.iter().enumerate() {
        println!(
            "{:<3} {:<26} {:>7.1} {:>6} {:>6} {:>11} {:>7} {:>9} {:>6} {:>10}",
            i + 1,
            r.name,
            r.secs,
            r.sent,
            r.answered,
            r.over_budget,
            r.failed,
            r.cut_by_kill,
            r.lost,
            r.peak
        );
    }
}

/// Up to `n` examples of what went wrong, for the failure message.
fn examples(outcomes: &[Outcome], n: usize) -> Vec<String> {
    outcomes
        .iter()
        .filter(|o| matches!(o.kind, Kind::Failed(..) | Kind::Lost(_)))
        .take(n)
        .map(|o| format!("phase {} instance {} model {}: {:?}", o.phase + 1, o.instance, o.model, o.kind))
        .collect()
}

/// A Chat request's body for `model`, allowing `max_tokens` of output.
fn body(model: &str, max_tokens: u64) -> Vec<u8> {
    let json = serde_json::json!({ "model": model, "messages": [{ "role": "user", "content": "hi" }],
        "max_tokens": max_tokens });
    serde_json::to_vec(&json).unwrap()
}

/// The cap across the team, and the providers' latencies.
const CAP: u32 = 4;
const CAPPED_LATENCY: Duration = Duration::from_millis(150);
const SPARE_LATENCY: Duration = Duration::from_millis(100);
/// A cent a token for `b` (USD per million tokens), a hundredth of that for `m`.
const PRICE_B: f64 = 10_000.0;
const PRICE_M: f64 = 100.0;
const MAX_TOKENS: u64 = 50;
/// Clients for `b`, one per instance, each at most one request per this.
const B_EVERY: Duration = Duration::from_millis(200);
/// Clients for `m`, as fast as they are answered.
const M_CLIENTS: usize = 9;
/// When the budget should be spent, from the first fault: well inside
/// Redis's ten seconds out.
const BUDGET_SPENT_INTO_OUTAGE: Duration = Duration::from_secs(4);
/// The phase (from 0) in which Redis is out, in both soaks.
const OUTAGE: usize = 1;
const REDIS_OUT: Duration = Duration::from_secs(10);
const DB_OUT: Duration = Duration::from_secs(5);
const MEMORY_BOUND_KIB: u64 = 200 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a soak: run in release by .ci/run and bench/soak"]
async fn a_team_keeps_its_cap_its_budget_and_its_history_through_faults() {
    let _one = ONE_AT_A_TIME.lock().await;
    let pace = Pace::from_env();
    let mut redis = Redis::start();
    let db = Db::create("sy_soak");
    let slow = SimProvider::start("slow", Script::ok().latency(CAPPED_LATENCY)).await.unwrap();
    let spare = SimProvider::start("spare", Script::ok().latency(SPARE_LATENCY)).await.unwrap();
    let dir = tempfile::tempdir().unwrap();

    // The budget covers model `b` wherever it is served: once spent, `b`
    // is refused, while `m` keeps the capped provider busy in every phase.
    // A `b` request reserves its prompt (a quarter of its body's bytes)
    // and `max_tokens`; it uses its prompt and about 5 tokens of answer.
    let b_body = body("b", MAX_TOKENS);
    let prompt = (b_body.len() / 4) as f64;
    let estimate = (prompt + MAX_TOKENS as f64) * PRICE_B / 1e6;
    let cost = (prompt + 5.0) * PRICE_B / 1e6;
    let b_rate = 3.0 / B_EVERY.as_secs_f64();
    let limit = ((pace.warm_up + BUDGET_SPENT_INTO_OUTAGE).as_secs_f64() * b_rate * cost).round();
    let extra = format!(
        "[[prices]]\nmodel = \"b\"\ninput = {PRICE_B:.1}\noutput = {PRICE_B:.1}\n\n\
         [[prices]]\nmodel = \"m\"\ninput = {PRICE_M:.1}\noutput = {PRICE_M:.1}\n\n\
         [[budgets]]\nname = \"soak\"\nscope = \"model:b\"\nperiod = \"month\"\nlimit_usd = {limit:.1}\naction = \"block\"\n"
    );
    let setup = Setup { ns: "soak", capped: ("slow", &slow, CAP), spare: &spare, extra };
    let names = ["gw-a", "gw-b", "gw-c"];
    let mut instances: Vec<Option<Instance>> = Vec::new();
    for name in names {
        let config = config(dir.path(), name, &redis, &setup);
        instances.push(Some(start(dir.path(), name, &config, Some(db.url())).await));
    }
    let three = until(Duration::from_secs(15), Duration::from_millis(50), || whole(&instances, 3)).await;
    assert!(three.is_some(), "three instances on the roll call");
    eprintln!(
        "soak: {} steady phases; budget ${limit:.2} on model b (a request reserves ${estimate:.2}, uses about ${cost:.2})",
        if pace.steady > Duration::from_secs(5) { "long" } else { "short" }
    );

    let slots: Slots = Arc::new(Mutex::new(
        instances.iter().flatten().map(|i| Slot { addr: Some(i.served.addr.clone()), downs: 0 }).collect(),
    ));
    let phases = Phases::new("warm-up");
    let (stop_clients, stop_watch) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let watcher = phases.watch(&slow, stop_watch.clone());
    let outcomes: Arc<Mutex<Vec<Outcome>>> = Arc::default();
    let m_body = body("m", MAX_TOKENS);
    let mut clients = Vec::new();
    for w in 0..M_CLIENTS + 3 {
        let c = if w < M_CLIENTS {
            Client { home: w % 3, model: "m", body: m_body.clone(), every: None }
        } else {
            Client { home: w % 3, model: "b", body: b_body.clone(), every: Some(B_EVERY) }
        };
        clients.push(client(c, slots.clone(), phases.clone(), stop_clients.clone(), outcomes.clone()));
    }
    let mut memory: Vec<(String, u64)> = Vec::new();

    // 1. Warm-up: steady load, past a heartbeat.
    tokio::time::sleep(pace.warm_up.max(Duration::from_millis(1200))).await;

    // 2. Redis killed, kept down ten seconds, started again empty.
    phases.next("redis down 10 s");
    let killed = Instant::now();
    redis.kill();
    let all_degraded = until(Duration::from_secs(5), Duration::from_millis(50), || degraded(&instances)).await;
    eprintln!("soak: every instance degraded {all_degraded:?} after Redis was killed");
    tokio::time::sleep(REDIS_OUT.saturating_sub(killed.elapsed())).await;

    // 3. Recovery, from the moment Redis is back.
    phases.next("redis back (recovery)");
    redis.start_again();
    let redis_rejoined = until(Duration::from_secs(10), Duration::from_millis(50), || whole(&instances, 3)).await;
    eprintln!("soak: the team whole again {redis_rejoined:?} after Redis came back");
    tokio::time::sleep(pace.steady).await;

    // 4. One instance paused past its lease TTL, then woken.
    phases.next("gw-b SIGSTOP 2x TTL");
    let paused = instances[1].as_ref().unwrap().served.child.id();
    signal(paused, "-STOP");
    tokio::time::sleep(LEASE_TTL * 2).await;
    signal(paused, "-CONT");
    tokio::time::sleep(pace.steady).await;

    // 5. The database out of reach five seconds, then back.
    phases.next("postgres out 5 s");
    db.reachable(false);
    tokio::time::sleep(DB_OUT).await;
    db.reachable(true);
    tokio::time::sleep(pace.steady).await;

    // 6. One instance killed -9, started again on its config and data.
    phases.next("gw-c kill -9, restart");
    let doomed = instances[2].take().unwrap();
    memory.push((format!("{} (killed)", doomed.name), vm_hwm_kib(doomed.served.child.id()).unwrap_or(0)));
    {
        let mut slots = slots.lock().unwrap();
        slots[2].addr = None;
        slots[2].downs += 1;
    }
    let (name, config) = (doomed.name.clone(), doomed.config.clone());
    doomed.served.kill_9();
    let again = start(dir.path(), &name, &config, Some(db.url())).await;
    slots.lock().unwrap()[2].addr = Some(again.served.addr.clone());
    let members = admin(&again, "/admin/team").await["members"].clone();
    let names: Vec<&str> = members.as_array().into_iter().flatten().filter_map(|m| m["name"].as_str()).collect();
    eprintln!("soak: the roll call as the restarted instance first sees it: {names:?}");
    instances[2] = Some(again);
    let restart_rejoined = until(Duration::from_secs(10), Duration::from_millis(50), || whole(&instances, 3)).await;
    eprintln!("soak: the restarted instance back on the roll call {restart_rejoined:?}");
    tokio::time::sleep(pace.steady).await;

    // 7. Idle: the clients stop; every lease is released, not left to expire.
    phases.next("idle");
    stop_clients.store(true, Ordering::Relaxed);
    for c in clients {
        c.await.unwrap();
    }
    let released = until(LEASE_TTL, Duration::from_millis(20), || async { redis.leases("soak", "slow") == 0 }).await;
    let leases_left = redis.leases("soak", "slow");
    tokio::time::sleep((LEASE_TTL * 2).saturating_sub(released.unwrap_or(LEASE_TTL))).await;
    let ended = Instant::now();
    stop_watch.store(true, Ordering::Relaxed);
    watcher.await.unwrap();

    for i in instances.iter().flatten() {
        memory.push((i.name.clone(), vm_hwm_kib(i.served.child.id()).unwrap_or(0)));
    }
    let outcomes = outcomes.lock().unwrap().clone();
    let rows = table(&phases, ended, &outcomes);
    print_table(&format!("soak: three instances, max_concurrency = {CAP} at `slow` across the team"), "slow", &rows);

    // The history: every answered request on record once, once the
    // spools have caught up.
    let answered: Vec<&str> = outcomes
        .iter()
        .filter_map(|o| match &o.kind {
            Kind::Answered(id) => Some(id.as_str()),
            _ => None,
        })
        .collect();
    let on_record = || -> HashMap<String, usize> {
        let mut ids = HashMap::new();
        for id in db.query("SELECT id FROM requests").lines() {
            *ids.entry(id.to_string()).or_insert(0) += 1;
        }
        ids
    };
    let caught_up = until(Duration::from_secs(60), Duration::from_millis(250), || async {
        let ids = on_record();
        answered.iter().all(|id| ids.contains_key(*id))
    })
    .await;
    let ids = on_record();
    let missing: Vec<&&str> = answered.iter().filter(|id| !ids.contains_key(**id)).collect();
    let twice: Vec<(&String, &usize)> = ids.iter().filter(|(_, n)| **n > 1).collect();
    let without_id = answered.iter().filter(|id| id.is_empty()).count();
    println!(
        "history: {} answered, {} rows on record, caught up {caught_up:?}; missing {}, twice {}",
        answered.len(),
        ids.len(),
        missing.len(),
        twice.len()
    );

    // The budget: the team's spend on `b`, from the history.
    let spent: f64 =
        db.query("SELECT COALESCE(SUM(cost_usd), 0) FROM requests WHERE provider_model = 'b'").parse().unwrap();
    let b_served: usize = db.query("SELECT COUNT(*) FROM requests WHERE provider_model = 'b'").parse().unwrap();
    let refused: usize = rows.iter().map(|r| r.over_budget).sum();
    // When the team's spend, as the history has it, reached the limit.
    let mut running = 0.0;
    let reached = db
        .query("SELECT finished_at, cost_usd FROM requests WHERE provider_model = 'b' ORDER BY finished_at")
        .lines()
        .filter_map(|l| l.split_once('|'))
        .find_map(|(at, usd)| {
            running += usd.parse::<f64>().unwrap_or(0.0);
            (running >= limit).then(|| at.parse::<i64>().ok()).flatten()
        })
        .and_then(|ms| phases.at(ms))
        .map(|(phase, secs)| format!("in phase {} ({secs:.1} s in)", phase + 1));
    let first_refused = outcomes.iter().find(|o| matches!(o.kind, Kind::OverBudget(_))).map(|o| o.phase + 1);
    println!(
        "budget: ${spent:.2} spent on b by {b_served} requests, limit ${limit:.2} + one estimate ${estimate:.2} = ${:.2}; \
         the team's spend reached the limit {}; {refused} refused, the first in phase {first_refused:?}",
        limit + estimate,
        reached.as_deref().unwrap_or("never")
    );
    for i in instances.iter().flatten() {
        let budgets = admin(i, "/admin/budgets").await;
        println!("budget as {} shows it: {budgets}", i.name);
    }
    println!("leases at `slow` once idle: {leases_left} (released within the TTL: {released:?})");
    for (name, kib) in &memory {
        println!("memory: {name} VmHWM {:.1} MiB", *kib as f64 / 1024.0);
    }

    let mut failures = Vec::new();
    if all_degraded.is_none() {
        failures.push("not every instance said it was degraded within 5 s of Redis going".to_string());
    }
    if redis_rejoined.is_none() {
        failures.push("the team was not connected and whole within 10 s of Redis coming back".to_string());
    }
    if restart_rejoined.is_none() {
        failures.push("the restarted instance was not on a roll call of three within 10 s".to_string());
    }
    for (i, r) in rows.iter().enumerate() {
        if r.peak > CAP as usize {
            failures.push(format!(
                "phase {} ({}): {} requests in flight at `slow` at once, over its cap of {CAP} across the team",
                i + 1,
                r.name,
                r.peak
            ));
        }
        // With Redis up and load on, the capped provider is kept busy: a
        // phase where it took nothing proved nothing. (While Redis is out,
        // taking nothing is one way to keep the cap; idle takes nothing.)
        if i != OUTAGE && i + 1 < rows.len() && r.peak == 0 {
            failures.push(format!("phase {} ({}): the capped provider took nothing, so proved nothing", i + 1, r.name));
        }
    }
    let failed: usize = rows.iter().map(|r| r.failed + r.lost).sum();
    if failed > 0 {
        failures.push(format!(
            "{failed} requests failed with no budget to blame (per phase in the table), e.g. {:?}",
            examples(&outcomes, 5)
        ));
    }
    let budget_on_m = outcomes.iter().filter(|o| o.model == "m" && matches!(o.kind, Kind::OverBudget(_))).count();
    if budget_on_m > 0 {
        failures.push(format!("{budget_on_m} requests for `m` refused by a budget that covers only `b`"));
    }
    if caught_up.is_none() || !missing.is_empty() || without_id > 0 {
        failures.push(format!(
            "{} answered requests not on record (e.g. {:?}), {without_id} answered without a request id",
            missing.len(),
            &missing[..missing.len().min(5)]
        ));
    }
    if !twice.is_empty() {
        failures.push(format!(
            "{} requests on record more than once, e.g. {:?}",
            twice.len(),
            &twice[..twice.len().min(5)]
        ));
    }
    if refused == 0 {
        failures.push(format!("the budget was never reached (${spent:.2} of ${limit:.2}), so proved nothing"));
    }
    if spent > limit + estimate + 1e-6 {
        failures.push(format!(
            "the team spent ${spent:.2} on `b`, over its budget's ${limit:.2} plus one request's estimate (${estimate:.2})"
        ));
    }
    if released.is_none() {
        failures.push(format!("{leases_left} leases left at `slow` a lease TTL after the load stopped"));
    }
    for (name, kib) in &memory {
        if *kib == 0 || *kib > MEMORY_BOUND_KIB {
            failures.push(format!("{name}: VmHWM {kib} KiB, not within {MEMORY_BOUND_KIB} KiB"));
        }
    }
    assert!(failures.is_empty(), "the soak found:\n- {}", failures.join("\n- "));
}

/// A local model server with one slot, in front of three instances:
/// through a Redis outage, it never has two requests at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a soak: run in release by .ci/run and bench/soak"]
async fn a_one_slot_local_server_never_sees_two_at_once_through_a_redis_outage() {
    let _one = ONE_AT_A_TIME.lock().await;
    let pace = Pace::from_env();
    let mut redis = Redis::start();
    let local = SimProvider::start("local", Script::ok().latency(CAPPED_LATENCY)).await.unwrap();
    let spare = SimProvider::start("spare", Script::ok().latency(SPARE_LATENCY)).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let setup = Setup { ns: "one", capped: ("local", &local, 1), spare: &spare, extra: String::new() };
    let mut instances: Vec<Option<Instance>> = Vec::new();
    for name in ["gw-a", "gw-b", "gw-c"] {
        let config = config(dir.path(), name, &redis, &setup);
        instances.push(Some(start(dir.path(), name, &config, None).await));
    }
    let three = until(Duration::from_secs(15), Duration::from_millis(50), || whole(&instances, 3)).await;
    assert!(three.is_some(), "three instances on the roll call");

    let slots: Slots = Arc::new(Mutex::new(
        instances.iter().flatten().map(|i| Slot { addr: Some(i.served.addr.clone()), downs: 0 }).collect(),
    ));
    let phases = Phases::new("warm-up");
    let (stop_clients, stop_watch) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let watcher = phases.watch(&local, stop_watch.clone());
    let outcomes: Arc<Mutex<Vec<Outcome>>> = Arc::default();
    let m_body = body("m", MAX_TOKENS);
    let clients: Vec<_> = (0..6)
        .map(|w| {
            let c = Client { home: w % 3, model: "m", body: m_body.clone(), every: None };
            client(c, slots.clone(), phases.clone(), stop_clients.clone(), outcomes.clone())
        })
        .collect();

    tokio::time::sleep(pace.warm_up.max(Duration::from_millis(1200))).await;
    phases.next("redis down");
    let killed = Instant::now();
    redis.kill();
    let all_degraded = until(Duration::from_secs(5), Duration::from_millis(50), || degraded(&instances)).await;
    eprintln!("soak: every instance degraded {all_degraded:?} after Redis was killed");
    let out = if pace.steady > Duration::from_secs(5) { REDIS_OUT } else { Duration::from_secs(6) };
    tokio::time::sleep(out.saturating_sub(killed.elapsed())).await;
    phases.next("redis back (recovery)");
    redis.start_again();
    let rejoined = until(Duration::from_secs(10), Duration::from_millis(50), || whole(&instances, 3)).await;
    eprintln!("soak: the team whole again {rejoined:?} after Redis came back");
    tokio::time::sleep(pace.steady).await;
    stop_clients.store(true, Ordering::Relaxed);
    for c in clients {
        c.await.unwrap();
    }
    let ended = Instant::now();
    stop_watch.store(true, Ordering::Relaxed);
    watcher.await.unwrap();

    let outcomes = outcomes.lock().unwrap().clone();
    let rows = table(&phases, ended, &outcomes);
    print_table("soak: three instances, max_concurrency = 1 at `local` across the team", "local", &rows);
    let mut failures = Vec::new();
    if all_degraded.is_none() || rejoined.is_none() {
        failures
            .push(format!("degraded after Redis went: {all_degraded:?}; whole again after it came back: {rejoined:?}"));
    }
    for (i, r) in rows.iter().enumerate() {
        if r.peak > 1 {
            failures.push(format!(
                "phase {} ({}): `local` had {} requests at once, yet it has one slot across the team",
                i + 1,
                r.name,
                r.peak
            ));
        }
        if i != OUTAGE && r.peak == 0 {
            failures.push(format!("phase {} ({}): `local` took nothing, so proved nothing", i + 1, r.name));
        }
    }
    let failed: usize = rows.iter().map(|r| r.failed + r.lost + r.over_budget + r.cut_by_kill).sum();
    if failed > 0 {
        failures.push(format!("{failed} requests not answered, e.g. {:?}", examples(&outcomes, 5)));
    }
    assert!(failures.is_empty(), "the soak found:\n- {}", failures.join("\n- "));
}
