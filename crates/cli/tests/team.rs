//! Team mode: real `switchyard serve` processes on one real Redis (a
//! private `redis-server` on a free port per test), in front of scripted
//! providers. Under CI a missing `redis-server` fails these tests; they
//! never skip.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::redis::Redis;
use support::{client, Served};
use switchyard_sim::{Fault, Script, SimProvider};

/// A config for instance `name` of a team on `redis`: a provider that
/// fails (its breaker trips after two failures and cools down for
/// `cooldown`) first, then one that answers.
fn config(
    dir: &std::path::Path,
    name: &str,
    redis: &Redis,
    bad: &SimProvider,
    good: &SimProvider,
    cooldown: &str,
) -> std::path::PathBuf {
    let text = format!(
        "[team]\nredis = \"{}\"\nnamespace = \"t\"\ninstance = \"{name}\"\n\n\
         [policy]\nmax_retries = 0\nbreaker_consecutive_failures = 2\nbreaker_cooldown = \"{cooldown}\"\n\n\
         {}\n{}\n[[routes]]\nmodel = \"m\"\nchain = [\"bad\", \"good\"]\n",
        redis.url(),
        support::provider_toml("bad", bad, "[\"m\"]", "auth = \"none\""),
        support::provider_toml("good", good, "[\"m\"]", "auth = \"none\""),
    );
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

async fn admin(served: &Served, data: &std::path::Path, path: &str) -> Value {
    let token = std::fs::read_to_string(data.join("admin-token")).unwrap();
    let r = client().get(format!("http://{}{path}", served.addr)).bearer_auth(token.trim()).send().await.unwrap();
    assert_eq!(r.status(), 200, "{path}");
    r.json().await.unwrap()
}

/// The breaker state `served` shows for `provider`.
async fn breaker(served: &Served, data: &std::path::Path, provider: &str) -> String {
    let providers = admin(served, data, "/admin/providers").await;
    let list = providers["providers"].as_array().or(providers.as_array()).cloned().unwrap_or_default();
    let p = list.iter().find(|p| p["name"] == provider).unwrap_or_else(|| panic!("{provider} in {providers}"));
    p["breaker"].as_str().or(p["state"]["breaker"].as_str()).unwrap_or_default().to_string()
}

/// Polls `check` every 5 ms until it holds or `within` passes; returns how
/// long it took.
async fn until<F, Fut>(within: Duration, check: F) -> Option<Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    support::until_every(within, Duration::from_millis(5), check).await
}

/// Two instances, `gw-a` and `gw-b`, each with the config `config` writes
/// for its name, once both are on the roll call.
async fn pair(dir: &std::path::Path, config: impl Fn(&str) -> std::path::PathBuf) -> (Instance, Instance) {
    let (a, b) = (start(dir, "gw-a", &config("gw-a")), start(dir, "gw-b", &config("gw-b")));
    let joined = until(Duration::from_secs(10), || async {
        admin(&b.served, &b.data, "/admin/team").await["members"].as_array().is_some_and(|m| m.len() == 2)
    })
    .await;
    assert!(joined.is_some(), "both instances on the roll call: {}", admin(&b.served, &b.data, "/admin/team").await);
    (a, b)
}

struct Instance {
    served: Served,
    data: std::path::PathBuf,
}

fn start(dir: &std::path::Path, name: &str, config: &std::path::Path) -> Instance {
    let data = dir.join(format!("{name}-data"));
    let served = Served::start(config, &data, &[]);
    Instance { served, data }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_see_each_other_and_every_response_names_its_instance() {
    let redis = Redis::start();
    let (bad, good) = (
        SimProvider::start("bad", Script::ok()).await.unwrap(),
        SimProvider::start("good", Script::ok()).await.unwrap(),
    );
    let dir = tempfile::tempdir().unwrap();
    let a = start(dir.path(), "gw-a", &config(dir.path(), "gw-a", &redis, &bad, &good, "10s"));
    let b = start(dir.path(), "gw-b", &config(dir.path(), "gw-b", &redis, &bad, &good, "10s"));

    let both = until(Duration::from_secs(10), || async {
        admin(&a.served, &a.data, "/admin/team").await["members"].as_array().is_some_and(|m| m.len() == 2)
    })
    .await;
    assert!(both.is_some(), "both instances on the roll call: {}", admin(&a.served, &a.data, "/admin/team").await);
    let team = admin(&b.served, &b.data, "/admin/team").await;
    assert_eq!(team["enabled"], true);
    assert_eq!(team["instance"], "gw-b");
    assert_eq!(team["state"], "connected");
    assert_eq!(team["redis"], redis.url());
    assert_eq!(team["namespace"], "t");
    let names: Vec<&str> = team["members"].as_array().unwrap().iter().map(|m| m["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["gw-a", "gw-b"]);
    for m in team["members"].as_array().unwrap() {
        assert!(m["address"].as_str().unwrap().starts_with("127.0.0.1:"), "{m}");
        assert!(m["started_at"].as_i64().unwrap() > 0 && !m["id"].as_str().unwrap().is_empty(), "{m}");
    }

    // `switchyard status` shows the team, this instance marked.
    let out =
        support::switchyard().args(["status", "--listen", &b.served.addr, "--data-dir"]).arg(&b.data).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let heading = format!("team t on {}: connected, 2 instance(s), history on sqlite", redis.url());
    assert!(text.contains(&heading), "{text}");
    assert!(text.lines().any(|l| l.trim_start().starts_with("gw-a") && !l.contains("this one")), "{text}");
    assert!(text.lines().any(|l| l.trim_start().starts_with("gw-b") && l.ends_with("(this one)")), "{text}");

    let r = a.served.chat("m").await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["x-switchyard-instance"], "gw-a");
    let r = b.served.chat("m").await;
    assert_eq!(r.headers()["x-switchyard-instance"], "gw-b");
    // The request's record names the instance that served it.
    let record = admin(&b.served, &b.data, "/admin/requests").await;
    assert_eq!(record["requests"][0]["instance"], "gw-b", "{record}");
    // The roll call counts what each served, at its next heartbeat.
    let counted = until(Duration::from_secs(5), || async {
        let team = admin(&a.served, &a.data, "/admin/team").await;
        team["members"].as_array().unwrap().iter().all(|m| m["requests"].as_u64() == Some(1))
    })
    .await;
    assert!(counted.is_some(), "{}", admin(&a.served, &a.data, "/admin/team").await);

    // One stops cleanly: it leaves the roll call at once.
    b.served.stop();
    let alone = until(Duration::from_secs(3), || async {
        admin(&a.served, &a.data, "/admin/team").await["members"].as_array().is_some_and(|m| m.len() == 1)
    })
    .await;
    assert!(alone.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_instance_s_events_reach_the_other_s_live_feed() {
    use futures_util::StreamExt;
    let redis = Redis::start();
    let (bad, good) = (
        SimProvider::start("bad", Script::ok()).await.unwrap(),
        SimProvider::start("good", Script::ok()).await.unwrap(),
    );
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = pair(dir.path(), |name| config(dir.path(), name, &redis, &bad, &good, "10s")).await;
    let token = std::fs::read_to_string(b.data.join("admin-token")).unwrap();
    let feed =
        client().get(format!("http://{}/admin/events", b.served.addr)).bearer_auth(token.trim()).send().await.unwrap();
    assert_eq!(feed.status(), 200);
    let mut chunks = feed.bytes_stream();
    // The feed is open on B before A serves anything.
    let _snapshot = chunks.next().await;
    let r = a.served.chat("m").await;
    let id = r.headers()["x-request-id"].to_str().unwrap().to_string();
    let sent = Instant::now();
    let mut text = String::new();
    let found = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(Ok(chunk)) = chunks.next().await {
            text.push_str(&String::from_utf8_lossy(&chunk));
            if text.lines().any(|l| l.contains(&id) && l.contains("\"instance\":\"gw-a\"")) {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(found, Ok(true), "A's finished request on B's feed, marked as A's:\n{text}");
    eprintln!("team: A's event reached B's feed in {:?}", sent.elapsed());
    // B's own events carry no instance: they are its own.
    let r = b.served.chat("m").await;
    assert_eq!(r.status(), 200);
}

/// A chat request of session `session` through `served`.
async fn in_session(served: &Served, session: &str) -> u16 {
    client()
        .post(format!("http://{}/v1/chat/completions", served.addr))
        .header("x-switchyard-session-id", session)
        .json(&serde_json::json!({ "model": "m", "messages": [{ "role": "user", "content": "hi" }] }))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_that_fell_back_on_one_instance_stays_there_on_the_other() {
    let redis = Redis::start();
    // The primary fails the session's first turn, then answers again.
    let bad = SimProvider::start("bad", Script::ok().fail_first(1, Fault::status(500))).await.unwrap();
    let good = SimProvider::start("good", Script::ok()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = pair(dir.path(), |name| config(dir.path(), name, &redis, &bad, &good, "10s")).await;
    assert_eq!(in_session(&a.served, "conversation-1").await, 200);
    assert_eq!((bad.calls(), good.calls()), (1, 1), "A fell back to good");
    // The balancer sends the next turn to B: it goes where the session's
    // prompt cache is, not back to the primary.
    // (A's events reach B within a few milliseconds; see the live feed's test.)
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(in_session(&b.served, "conversation-1").await, 200);
    assert_eq!(
        (bad.calls(), good.calls()),
        (1, 2),
        "B served the session's next turn from good, where A's fallback left it"
    );
    // Another session on B still starts at the head of the chain.
    let before = bad.calls();
    assert_eq!(in_session(&b.served, "conversation-2").await, 200);
    assert_eq!(bad.calls() - before, 1, "a new session goes to the primary");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_breaker_tripped_on_one_instance_is_open_on_the_other_and_the_team_probes_once() {
    let redis = Redis::start();
    let bad = SimProvider::start("bad", Script::always(Fault::status(503))).await.unwrap();
    let good = SimProvider::start("good", Script::ok()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = pair(dir.path(), |name| config(dir.path(), name, &redis, &bad, &good, "1500ms")).await;

    // Two failures on A trip its breaker; each request is still answered by `good`.
    for _ in 0..2 {
        assert_eq!(a.served.chat("m").await.status(), 200);
    }
    assert_eq!(breaker(&a.served, &a.data, "bad").await, "open");
    let tripped = Instant::now();
    let seen = until(Duration::from_secs(2), || async { breaker(&b.served, &b.data, "bad").await == "open" }).await;
    let took = seen.expect("B's breaker opened from A's trip");
    // Reported, not asserted: timings belong to the benchmark.
    eprintln!("team: A's trip reached B in {:?} (polled every 5 ms)", tripped.elapsed().min(took));
    let before = bad.calls();
    for _ in 0..3 {
        assert_eq!(b.served.chat("m").await.status(), 200, "B falls back without calling `bad`");
    }
    assert_eq!(bad.calls(), before, "B sent the provider A saw fail nothing");

    // After the cool-down, requests on both instances at once: one probe
    // across the team, which fails and opens the breaker again for both.
    tokio::time::sleep(Duration::from_millis(1700)).await;
    let before = bad.calls();
    let mut sent = Vec::new();
    for i in 0..10 {
        let target = if i % 2 == 0 { &a.served } else { &b.served };
        sent.push(target.chat("m"));
    }
    for r in futures_util::future::join_all(sent).await {
        assert_eq!(r.status(), 200);
    }
    // Requests sent before the probe was granted fall back too; let the
    // grant happen, then send again.
    tokio::time::sleep(Duration::from_millis(300)).await;
    for i in 0..10 {
        let target = if i % 2 == 0 { &a.served } else { &b.served };
        assert_eq!(target.chat("m").await.status(), 200);
    }
    assert_eq!(bad.calls() - before, 1, "exactly one probe across the team");
    assert_eq!(breaker(&a.served, &a.data, "bad").await, "open");
    assert_eq!(breaker(&b.served, &b.data, "bad").await, "open");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_or_a_toggle_on_one_instance_reaches_the_other_and_a_frozen_redis_stops_nothing() {
    let redis = Redis::start();
    let bad = SimProvider::start("bad", Script::ok()).await.unwrap();
    let good = SimProvider::start("good", Script::ok()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = pair(dir.path(), |name| config(dir.path(), name, &redis, &bad, &good, "10s")).await;
    let post = |served: &Served, data: &std::path::Path, path: &str| {
        let token = std::fs::read_to_string(data.join("admin-token")).unwrap();
        client().post(format!("http://{}{path}", served.addr)).bearer_auth(token.trim()).send()
    };

    // Opened by hand on A: open on B; reset on B: closed on A.
    assert!(post(&a.served, &a.data, "/admin/providers/bad/breaker/open").await.unwrap().status().is_success());
    assert!(until(Duration::from_secs(2), || async { breaker(&b.served, &b.data, "bad").await == "open" })
        .await
        .is_some());
    assert!(post(&b.served, &b.data, "/admin/providers/bad/breaker/reset").await.unwrap().status().is_success());
    assert!(until(Duration::from_secs(2), || async { breaker(&a.served, &a.data, "bad").await == "closed" })
        .await
        .is_some());

    // Disabled on B: A stops sending it anything.
    assert!(post(&b.served, &b.data, "/admin/providers/bad/disable").await.unwrap().status().is_success());
    let off = until(Duration::from_secs(2), || async {
        let providers = admin(&a.served, &a.data, "/admin/providers").await;
        providers.to_string().contains("\"enabled\":false")
    })
    .await;
    assert!(off.is_some(), "{}", admin(&a.served, &a.data, "/admin/providers").await);
    let before = bad.calls();
    assert_eq!(a.served.chat("m").await.status(), 200);
    assert_eq!(bad.calls(), before);

    // Redis frozen: both keep answering, and say they are degraded.
    redis.signal("-STOP");
    for _ in 0..4 {
        assert_eq!(a.served.chat("m").await.status(), 200);
        assert_eq!(b.served.chat("m").await.status(), 200);
    }
    let degraded = until(Duration::from_secs(5), || async {
        admin(&a.served, &a.data, "/admin/team").await["state"] == "degraded"
    })
    .await;
    assert!(degraded.is_some());
    redis.signal("-CONT");
    let back = until(Duration::from_secs(5), || async {
        admin(&a.served, &a.data, "/admin/team").await["state"] == "connected"
    })
    .await;
    assert!(back.is_some(), "reconnected on its own");
}

/// A team on `redis` in front of one slow provider whose cap is 2 across
/// the team, with short leases; the other provider takes what it cannot.
fn capped(
    dir: &std::path::Path,
    name: &str,
    redis: &Redis,
    slow: &SimProvider,
    spare: &SimProvider,
) -> std::path::PathBuf {
    let text = format!(
        "[team]\nredis = \"{}\"\nnamespace = \"cap\"\ninstance = \"{name}\"\nlease_ttl = \"1500ms\"\n\n\
         [server]\nrate_limit_per_minute = 1000000\n\n\
         [policy]\nmax_retries = 0\n\n\
         {}policy = {{ max_concurrency = 2 }}\n\n{}\n[[routes]]\nmodel = \"m\"\nchain = [\"slow\", \"spare\"]\n",
        redis.url(),
        support::provider_toml("slow", slow, "[\"m\"]", "auth = \"none\""),
        support::provider_toml("spare", spare, "[\"m\"]", "auth = \"none\""),
    );
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// The most requests `sim` had in flight at once while `work` ran.
async fn peak_while<F: std::future::Future>(sim: &SimProvider, work: F) -> (usize, F::Output) {
    let peak = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let (peak, stop) = (peak.clone(), stop.clone());
        let sim_in_flight = sim.in_flight_watch();
        tokio::spawn(async move {
            let mut rx = sim_in_flight;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                peak.fetch_max(*rx.borrow_and_update(), std::sync::atomic::Ordering::Relaxed);
                let _ = tokio::time::timeout(Duration::from_millis(5), rx.changed()).await;
            }
        })
    };
    let out = work.await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    watcher.await.unwrap();
    (peak.load(std::sync::atomic::Ordering::Relaxed), out)
}

/// A Chat request to the gateway at `addr`, owning all it needs (for a task).
async fn chat_at(addr: String) -> reqwest::Result<reqwest::Response> {
    client()
        .post(format!("http://{addr}/v1/chat/completions"))
        .json(&serde_json::json!({ "model": "m", "messages": [] }))
        .send()
        .await
}

/// Leases on `provider` in Redis now (expired ones included).
fn leases(redis: &Redis, provider: &str) -> usize {
    redis.leases("cap", provider)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_concurrency_cap_holds_across_the_team_and_leaves_no_lease_behind() {
    let redis = Redis::start();
    let slow = SimProvider::start("slow", Script::ok().latency(Duration::from_millis(300))).await.unwrap();
    let spare = SimProvider::start("spare", Script::ok()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = pair(dir.path(), |name| capped(dir.path(), name, &redis, &slow, &spare)).await;

    let burst = async {
        let sent: Vec<_> = (0..20).map(|i| if i % 2 == 0 { a.served.chat("m") } else { b.served.chat("m") }).collect();
        futures_util::future::join_all(sent).await
    };
    let (peak, answers) = peak_while(&slow, burst).await;
    assert!(answers.iter().all(|r| r.status() == 200), "every request answered, by one provider or the other");
    assert!(slow.calls() >= 2, "the capped provider took its share: {}", slow.calls());
    assert!(peak <= 2, "max_concurrency = 2 across two instances, yet {peak} were in flight at once");
    assert_eq!(leases(&redis, "slow"), 0, "no lease left when idle");

    // An instance killed while holding leases: its places free within the TTL.
    let a_addr = a.served.addr.clone();
    let held = tokio::spawn(async move {
        let sent: Vec<_> = (0..2).map(|_| chat_at(a_addr.clone())).collect();
        tokio::time::timeout(Duration::from_millis(150), futures_util::future::join_all(sent)).await
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(leases(&redis, "slow"), 2, "A holds both places");
    let _ = a.served.kill_9();
    let _ = held.await;
    let freed = until(Duration::from_secs(5), || async {
        let r = b.served.chat("m").await;
        r.headers().get("x-switchyard-provider").is_some_and(|p| p == "slow")
    })
    .await;
    assert!(freed.is_some(), "B reaches the capped provider again once A's leases expired");
}

/// A team on `redis` in front of one provider that takes one request at
/// a time across the team, with a queue in front of it.
fn one_at_a_time(dir: &std::path::Path, name: &str, redis: &Redis, slow: &SimProvider) -> std::path::PathBuf {
    let text = format!(
        "[team]\nredis = \"{}\"\nnamespace = \"line\"\ninstance = \"{name}\"\n\n\
         [policy]\nmax_retries = 0\n\n\
         {}policy = {{ max_concurrency = 1, max_queue = 20, max_queue_wait = \"10s\" }}\n\n\
         [[routes]]\nmodel = \"m\"\nchain = [\"slow\"]\n",
        redis.url(),
        support::provider_toml("slow", slow, "[\"m\"]", "auth = \"none\""),
    );
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// Places in `provider`'s line across the team, in Redis now.
fn in_line(redis: &Redis, provider: &str) -> usize {
    let out = Command::new("redis-cli")
        .args(["-p", &redis.port.to_string(), "ZCARD", &format!("line:{{{provider}}}:line")])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(usize::MAX)
}

/// Request `n` of a test, to the gateway at `addr`: its number is its
/// question, so the provider's log says in which order they reached it.
async fn numbered(addr: String, n: usize, within: Duration) -> reqwest::Result<reqwest::Response> {
    client()
        .post(format!("http://{addr}/v1/chat/completions"))
        .timeout(within)
        .json(&serde_json::json!({ "model": "m", "messages": [{ "role": "user", "content": format!("q{n}") }] }))
        .send()
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_for_a_full_provider_is_first_come_first_served_across_the_team() {
    let redis = Redis::start();
    let slow = SimProvider::start("slow", Script::ok().latency(Duration::from_millis(150))).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = pair(dir.path(), |name| one_at_a_time(dir.path(), name, &redis, &slow)).await;

    // Eight requests 60 ms apart, to A and B in turn: all but the first
    // find the provider busy and wait, some on A, some on B.
    let mut sent = Vec::new();
    for n in 0..8 {
        let addr = if n % 2 == 0 { a.served.addr.clone() } else { b.served.addr.clone() };
        sent.push(tokio::spawn(numbered(addr, n, Duration::from_secs(20))));
        tokio::time::sleep(Duration::from_millis(60)).await;
    }
    for (n, answer) in futures_util::future::join_all(sent).await.into_iter().enumerate() {
        let answer = answer.unwrap().unwrap();
        assert_eq!(answer.status(), 200, "request {n} waited for its turn: {}", answer.text().await.unwrap());
    }
    let order: Vec<String> = slow
        .requests()
        .iter()
        .map(|r| r.json()["messages"][0]["content"].as_str().unwrap_or("?").to_string())
        .collect();
    let expected: Vec<String> = (0..8).map(|n| format!("q{n}")).collect();
    assert_eq!(order, expected, "the provider served them in the order they arrived, whichever instance took them");
    assert_eq!(in_line(&redis, "slow"), 0, "nobody left in line");

    // A client that leaves while in line gives its place up at once: the
    // one behind it is not kept waiting for a place that lapses later.
    let busy = tokio::spawn(numbered(a.served.addr.clone(), 8, Duration::from_secs(20)));
    tokio::time::sleep(Duration::from_millis(30)).await;
    let left = numbered(b.served.addr.clone(), 9, Duration::from_millis(60)).await;
    assert!(left.is_err(), "the client gave up waiting");
    let freed = until(Duration::from_millis(500), || async { in_line(&redis, "slow") == 0 }).await;
    assert!(freed.is_some(), "the place was given up when the client left");
    assert_eq!(busy.await.unwrap().unwrap().status(), 200);
}

/// Requests from `workers` clients at once, each to A and B in turn,
/// until `stop` is set: the statuses they got.
fn load(a: &Instance, b: &Instance, workers: usize, stop: &Arc<AtomicBool>) -> Vec<tokio::task::JoinHandle<Vec<u16>>> {
    (0..workers)
        .map(|w| {
            let (addrs, stop) = ([a.served.addr.clone(), b.served.addr.clone()], stop.clone());
            tokio::spawn(async move {
                let mut statuses = Vec::new();
                for n in 0..10_000 {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let answer = chat_at(addrs[(n + w) % 2].clone()).await;
                    statuses.push(answer.map_or(0, |r| r.status().as_u16()));
                }
                statuses
            })
        })
        .collect()
}

/// `i`'s `/metrics`, as Prometheus would scrape it.
async fn metrics(i: &Instance) -> String {
    let token = std::fs::read_to_string(i.data.join("admin-token")).unwrap();
    let r = client().get(format!("http://{}/metrics", i.served.addr)).bearer_auth(token.trim()).send().await.unwrap();
    assert_eq!(r.status(), 200);
    r.text().await.unwrap()
}

async fn team_state(i: &Instance) -> (String, usize) {
    let team = admin(&i.served, &i.data, "/admin/team").await;
    (team["state"].as_str().unwrap_or_default().to_string(), team["members"].as_array().map_or(0, Vec::len))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_killed_for_ten_seconds_under_load_fails_no_request_and_the_team_converges_after() {
    let mut redis = Redis::start();
    let slow = SimProvider::start("slow", Script::ok().latency(Duration::from_millis(100))).await.unwrap();
    let spare = SimProvider::start("spare", Script::ok()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = pair(dir.path(), |name| capped(dir.path(), name, &redis, &slow, &spare)).await;
    let stop = Arc::new(AtomicBool::new(false));
    let clients = load(&a, &b, 6, &stop);
    // Past a heartbeat under load, so each instance has counted the other
    // (the share it takes when Redis goes is by the last roll call).
    tokio::time::sleep(Duration::from_millis(1200)).await;

    redis.kill();
    let killed = Instant::now();
    let degraded = until(Duration::from_secs(5), || async {
        team_state(&a).await.0 == "degraded" && team_state(&b).await.0 == "degraded"
    })
    .await;
    eprintln!("both instances degraded {degraded:?} after the kill");
    assert!(degraded.is_some(), "both say they are degraded");
    assert!(metrics(&a).await.contains("switchyard_team_degraded 1"), "and so do their metrics");
    // Each takes its share of the cap (2 over 2 instances: 1 each) for the
    // rest of the ten seconds, never the whole cap twice, once the requests
    // the team admitted before Redis went have ended (within 100 ms).
    tokio::time::sleep(Duration::from_millis(150)).await;
    let rest = Duration::from_secs(10).saturating_sub(killed.elapsed());
    let (peak, ()) = peak_while(&slow, tokio::time::sleep(rest)).await;
    assert!(
        peak <= 2,
        "max_concurrency = 2 held at each instance's share while Redis was down, yet {peak} were in flight"
    );
    let slow_calls = slow.calls();

    redis.start_again();
    let converged = until(Duration::from_secs(5), || async {
        team_state(&a).await == ("connected".into(), 2) && team_state(&b).await == ("connected".into(), 2)
    })
    .await;
    eprintln!("the team converged {converged:?} after Redis came back");
    assert!(converged.is_some(), "both connected again and on the roll call within 5 s: {:?}", team_state(&a).await);
    assert!(metrics(&a).await.contains("switchyard_team_degraded 0"));
    // Requests admitted by an instance alone just before it rejoined end
    // within the provider's 100 ms; from then on the team's cap holds.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (peak, ()) = peak_while(&slow, tokio::time::sleep(Duration::from_millis(800))).await;
    assert!(peak <= 2, "the team-wide cap holds again: {peak} in flight");
    assert!(leases(&redis, "slow") <= 2);

    stop.store(true, Ordering::Relaxed);
    let statuses: Vec<u16> =
        futures_util::future::join_all(clients).await.into_iter().flat_map(Result::unwrap).collect();
    assert!(slow.calls() > slow_calls, "the capped provider served again after Redis came back");
    let failed = statuses.iter().filter(|s| **s != 200).count();
    assert_eq!(failed, 0, "no request failed because Redis was gone ({} answered)", statuses.len());
}

/// Fifty instances killed while they hold leases, one after another: once
/// the TTL has passed not one place is lost, and the survivor takes both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_kill_9s_of_instances_holding_leases_leak_no_place() {
    let redis = Redis::start();
    let slow = SimProvider::start("slow", Script::ok().latency(Duration::from_millis(400))).await.unwrap();
    let spare = SimProvider::start("spare", Script::ok()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let survivor = start(dir.path(), "survivor", &capped(dir.path(), "survivor", &redis, &slow, &spare));
    let mut held_at_kill = 0;
    for cycle in 0..50 {
        let name = format!("k{cycle}");
        let doomed = start(dir.path(), &name, &capped(dir.path(), &name, &redis, &slow, &spare));
        let sent: Vec<_> = (0..2).map(|_| tokio::spawn(chat_at(doomed.served.addr.clone()))).collect();
        let holding = until(Duration::from_secs(2), || async { leases(&redis, "slow") >= 2 }).await;
        held_at_kill += usize::from(holding.is_some());
        let _ = doomed.served.kill_9();
        for s in sent {
            let _ = s.await;
        }
    }
    assert!(held_at_kill >= 45, "most instances died holding both places: {held_at_kill} of 50");
    // Past the TTL the survivor has both places: two requests at once both
    // reach the capped provider, and no lease is left after them.
    tokio::time::sleep(Duration::from_millis(1600)).await;
    let before = slow.calls();
    let both = async {
        let sent: Vec<_> = (0..2).map(|_| chat_at(survivor.served.addr.clone())).collect();
        futures_util::future::join_all(sent).await
    };
    let (peak, answers) = peak_while(&slow, both).await;
    for r in answers {
        assert_eq!(r.unwrap().headers()["x-switchyard-provider"], "slow", "a place was lost");
    }
    assert_eq!((slow.calls() - before, peak), (2, 2));
    assert_eq!(leases(&redis, "slow"), 0, "no lease left when idle");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_instance_s_late_release_frees_nothing_it_no_longer_holds() {
    let redis = Redis::start();
    let slow = SimProvider::start("slow", Script::ok().latency(Duration::from_millis(2500))).await.unwrap();
    let spare = SimProvider::start("spare", Script::ok()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = pair(dir.path(), |name| capped(dir.path(), name, &redis, &slow, &spare)).await;

    // A takes one place, then is paused past the lease's TTL.
    let a_request = tokio::spawn(chat_at(a.served.addr.clone()));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(leases(&redis, "slow"), 1);
    Command::new("kill").args(["-STOP", &a.served.child.id().to_string()]).status().unwrap();
    tokio::time::sleep(Duration::from_millis(1800)).await;
    // Its lease expired: B takes both places.
    let b_requests: Vec<_> = (0..2).map(|_| chat_at(b.served.addr.clone())).collect();
    let b_requests = tokio::spawn(async move { futures_util::future::join_all(b_requests).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let b_held = leases(&redis, "slow");
    // A wakes; its request ends and releases its (long expired) lease.
    Command::new("kill").args(["-CONT", &a.served.child.id().to_string()]).status().unwrap();
    let _ = a_request.await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let after = leases(&redis, "slow");
    for r in b_requests.await.unwrap() {
        assert_eq!(r.unwrap().status(), 200);
    }
    assert_eq!(b_held, 2, "B held both places while A was paused");
    assert_eq!(after, 2, "A's late release took neither of B's places");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit_is_one_bucket_for_the_whole_team() {
    let redis = Redis::start();
    let limited = SimProvider::start("limited", Script::ok()).await.unwrap();
    let spare = SimProvider::start("spare", Script::ok()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = |name: &str| {
        let text = format!(
            "[team]\nredis = \"{}\"\nnamespace = \"rate\"\ninstance = \"{name}\"\n\n\
             [policy]\nmax_retries = 0\nmax_retry_wait = \"50ms\"\n\n\
             {}policy = {{ requests_per_minute = 60 }}\n\n{}\n[[routes]]\nmodel = \"m\"\nchain = [\"limited\", \"spare\"]\n",
            redis.url(),
            support::provider_toml("limited", &limited, "[\"m\"]", "auth = \"none\""),
            support::provider_toml("spare", &spare, "[\"m\"]", "auth = \"none\""),
        );
        let path = dir.path().join(format!("{name}.toml"));
        std::fs::write(&path, text).unwrap();
        path
    };
    let (a, b) = pair(dir.path(), config).await;
    let c = start(dir.path(), "gw-c", &config("gw-c"));
    let three = until(Duration::from_secs(10), || async {
        admin(&c.served, &c.data, "/admin/team").await["members"].as_array().is_some_and(|m| m.len() == 3)
    })
    .await;
    assert!(three.is_some(), "three instances on the roll call");

    // 150 requests over three instances, 30 at a time: 60 a minute across
    // the team, so the limited provider takes 60 (and one more for each
    // second the bucket refilled meanwhile), not 60 each.
    let addrs = [a.served.addr.clone(), b.served.addr.clone(), c.served.addr.clone()];
    let started = Instant::now();
    for wave in 0..5 {
        let sent: Vec<_> = (0..30).map(|i| chat_at(addrs[(wave * 30 + i) % 3].clone())).collect();
        for r in futures_util::future::join_all(sent).await {
            assert_eq!(r.unwrap().status(), 200, "every request answered");
        }
    }
    let refilled = started.elapsed().as_secs_f64().ceil() as usize;
    let took = limited.calls();
    println!("requests_per_minute = 60 over three instances: {took} of 150 in {:?}", started.elapsed());
    assert!((60..=60 + refilled).contains(&took), "requests_per_minute = 60 across three instances, yet {took} went");
    assert_eq!(spare.calls(), 150 - took, "the rest fell back");
}

/// A Chat request to `addr` that allows `max_tokens` of output.
async fn chat_max(addr: &str, max_tokens: u64) -> reqwest::Response {
    client()
        .post(format!("http://{addr}/v1/chat/completions"))
        .json(&serde_json::json!({ "model": "m", "messages": [], "max_tokens": max_tokens }))
        .send()
        .await
        .unwrap()
}

/// A team on `redis` (namespace `ns`) in front of `limited`, whose policy
/// is `policy`, falling back to `spare`; `extra` is appended (prices, budgets).
fn limited_config(
    dir: &std::path::Path,
    name: &str,
    ns: &str,
    redis: &Redis,
    limited: (&SimProvider, &str),
    spare: &SimProvider,
    extra: &str,
) -> std::path::PathBuf {
    let text = format!(
        "[team]\nredis = \"{}\"\nnamespace = \"{ns}\"\ninstance = \"{name}\"\n\n\
         [policy]\nmax_retries = 0\nmax_retry_wait = \"50ms\"\n\n\
         {}{}\n\n{}\n[[routes]]\nmodel = \"m\"\nchain = [\"limited\", \"spare\"]\n\n{extra}",
        redis.url(),
        support::provider_toml("limited", limited.0, "[\"m\"]", "auth = \"none\""),
        if limited.1.is_empty() { String::new() } else { format!("policy = {{ {} }}", limited.1) },
        support::provider_toml("spare", spare, "[\"m\"]", "auth = \"none\""),
    );
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_reserved_at_admission_are_settled_with_the_real_usage() {
    let redis = Redis::start();
    let limited = SimProvider::start("limited", Script::ok()).await.unwrap();
    let spare = SimProvider::start("spare", Script::ok()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let policy = "tokens_per_minute = 3000";
    let (a, b) =
        pair(dir.path(), |name| limited_config(dir.path(), name, "tpm", &redis, (&limited, policy), &spare, "")).await;

    // Each request may write 1000 tokens: about 1010 are reserved, so the
    // estimate alone lets 2 of them through a 3000-token minute. The
    // provider reports about 20 used, and the rest goes back each time.
    for i in 0..20 {
        let target = if i % 2 == 0 { &a.served } else { &b.served };
        assert_eq!(chat_max(&target.addr, 1000).await.status(), 200, "every request answered");
    }
    let took = limited.calls();
    eprintln!("team: tokens_per_minute = 3000 took {took} of 20 requests reserving ~1010 tokens each, using ~20");
    assert!(took >= 15, "settled with the real usage, the bucket takes most of them; it took {took}");

    // A failed attempt gives its whole reservation back.
    limited.set_script(Script::always(Fault::status(500)));
    for i in 0..6 {
        let target = if i % 2 == 0 { &a.served } else { &b.served };
        assert_eq!(chat_max(&target.addr, 1000).await.status(), 200, "the spare answers");
    }
    let failed = limited.calls() - took;
    assert!(failed >= 5, "failures return their tokens, so each request still reaches the provider: {failed} of 6");
}

/// The budget's spend as every instance shows it: the team's counter,
/// the same on each.
async fn team_spent(instances: &[&Instance]) -> f64 {
    let mut seen = Vec::new();
    for i in instances {
        let rows = admin(&i.served, &i.data, "/admin/budgets").await;
        assert_eq!(rows[0]["team"], true, "counted across the team: {rows}");
        seen.push(rows[0]["spent_usd"].as_f64().unwrap());
    }
    assert!(seen.iter().all(|s| (s - seen[0]).abs() < 1e-9), "every instance shows the same spend: {seen:?}");
    seen[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_day_budget_holds_across_the_team_and_survives_a_redis_restart() {
    let mut redis = Redis::start();
    let limited = SimProvider::start("limited", Script::ok()).await.unwrap();
    let spare = SimProvider::start("spare", Script::ok()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    // A cent a token: a request reserves about 61 tokens ($0.61: its prompt
    // and `max_tokens = 50`) and uses about 16 ($0.16).
    let extra = "[[prices]]\nmodel = \"m\"\ninput = 10000.0\noutput = 10000.0\n\n\
                 [[budgets]]\nscope = \"provider:limited\"\nperiod = \"day\"\nlimit_usd = 2.0\naction = \"block\"\n";
    let (a, b) =
        pair(dir.path(), |name| limited_config(dir.path(), name, "spend", &redis, (&limited, ""), &spare, extra)).await;
    let (limit, estimate) = (2.0, 0.61);

    // Waves of 6 at once over both instances, well past the limit.
    for _ in 0..8 {
        let wave: Vec<_> =
            (0..6).map(|i| chat_max(if i % 2 == 0 { &a.served.addr } else { &b.served.addr }, 50)).collect();
        for r in futures_util::future::join_all(wave).await {
            assert_eq!(r.status(), 200, "the spare answers what the budget refuses");
        }
    }
    let spent = team_spent(&[&a, &b]).await;
    let calls = limited.calls();
    eprintln!(
        "team: a $2/day budget over two instances paid ${spent:.2} for {calls} requests (bound ${:.2})",
        limit + estimate
    );
    assert!(spent >= limit, "the budget was used up: ${spent:.2}");
    assert!(spent <= limit + estimate, "at most the limit plus one estimate across the team, yet ${spent:.2}");

    // Redis restarts empty: the counter comes back from each instance's
    // history, and the budget still refuses.
    redis.restart();
    let back = until(Duration::from_secs(10), || async {
        admin(&a.served, &a.data, "/admin/team").await["state"] == "connected"
            && admin(&b.served, &b.data, "/admin/team").await["state"] == "connected"
    })
    .await;
    assert!(back.is_some(), "both reconnected to the new Redis");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for i in 0..6 {
        let target = if i % 2 == 0 { &a.served } else { &b.served };
        assert_eq!(chat_max(&target.addr, 50).await.status(), 200);
    }
    assert_eq!(limited.calls(), calls, "after the restart the budget is still spent: nothing more went");
    let counter = Command::new("redis-cli")
        .args(["-p", &redis.port.to_string(), "--scan", "--pattern", "spend:{budgets}:spend:*"])
        .output()
        .unwrap();
    let key = String::from_utf8_lossy(&counter.stdout).trim().to_string();
    let out = Command::new("redis-cli").args(["-p", &redis.port.to_string(), "GET", &key]).output().unwrap();
    let micros: f64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    eprintln!("team: re-seeded counter {key} = ${:.2}", micros / 1e6);
    assert!(
        (micros / 1e6 - spent).abs() < 0.02,
        "re-seeded with the team's spend ${spent:.2}, not ${:.2}",
        micros / 1e6
    );
}

/// The budget alerts on `i`'s live feed (its snapshot's recent events):
/// each one's title, and the instance that raised it (`None`: `i` itself).
async fn budget_alerts(i: &Instance) -> Vec<(String, Option<String>)> {
    use futures_util::StreamExt;
    let token = std::fs::read_to_string(i.data.join("admin-token")).unwrap();
    let feed =
        client().get(format!("http://{}/admin/events", i.served.addr)).bearer_auth(token.trim()).send().await.unwrap();
    let mut chunks = feed.bytes_stream();
    let mut text = String::new();
    let snapshot = loop {
        let chunk = chunks.next().await.expect("the feed opens with a snapshot").unwrap();
        text.push_str(&String::from_utf8_lossy(&chunk));
        let Some((_, rest)) = text.split_once("event: snapshot\n") else { continue };
        let Some((block, _)) = rest.split_once("\n\n") else { continue };
        let data = block.lines().find_map(|l| l.strip_prefix("data: ")).expect("the snapshot's data");
        break serde_json::from_str::<Value>(data).unwrap();
    };
    snapshot["recent"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "budget_threshold")
        .map(|e| (e["title"].as_str().unwrap().to_string(), e["instance"].as_str().map(String::from)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_alert_is_raised_once_for_the_whole_team_on_its_whole_spend() {
    let redis = Redis::start();
    let limited = SimProvider::start("limited", Script::ok()).await.unwrap();
    let spare = SimProvider::start("spare", Script::ok()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    // A cent a token: a request uses about 16 ($0.16). Eight requests over
    // two instances spend about $1.28 of a $1 budget, each instance's own
    // part about $0.64: past 100% for the team, short of 80% on either.
    let extra = "[[prices]]\nmodel = \"m\"\ninput = 10000.0\noutput = 10000.0\n\n\
                 [[budgets]]\nname = \"shared\"\nscope = \"provider:limited\"\nperiod = \"day\"\n\
                 limit_usd = 1.0\naction = \"warn\"\n";
    let (a, b) =
        pair(dir.path(), |name| limited_config(dir.path(), name, "alerts", &redis, (&limited, ""), &spare, extra))
            .await;
    for i in 0..8 {
        let target = if i % 2 == 0 { &a.served } else { &b.served };
        assert_eq!(chat_max(&target.addr, 50).await.status(), 200);
    }
    let raised = until(Duration::from_secs(5), || async {
        let (on_a, on_b) = (budget_alerts(&a).await, budget_alerts(&b).await);
        [on_a, on_b].iter().all(|alerts| alerts.iter().any(|(title, _)| title.contains("100% spent")))
    })
    .await;
    let (on_a, on_b) = (budget_alerts(&a).await, budget_alerts(&b).await);
    eprintln!("team: budget alerts on A {on_a:?}, on B {on_b:?}, raised in {raised:?}");
    assert!(raised.is_some(), "the team's whole spend crossed 100%, on both feeds: A {on_a:?}, B {on_b:?}");
    // Let a few more of the runners' rounds pass: nothing is raised twice.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    for (name, alerts) in [("A", budget_alerts(&a).await), ("B", budget_alerts(&b).await)] {
        let mut titles: Vec<&String> = alerts.iter().map(|(t, _)| t).collect();
        titles.sort();
        let n = titles.len();
        titles.dedup();
        assert_eq!(titles.len(), n, "each threshold raised once across the team, on {name}'s feed: {alerts:?}");
        let raisers: Vec<_> = alerts.iter().filter(|(t, _)| t.contains("100%")).map(|(_, by)| by.clone()).collect();
        assert_eq!(raisers.len(), 1, "one 100% alert on {name}'s feed: {alerts:?}");
    }
    let by = |alerts: &[(String, Option<String>)]| alerts.iter().find(|(t, _)| t.contains("100%")).unwrap().1.clone();
    let (on_a, on_b) = (budget_alerts(&a).await, budget_alerts(&b).await);
    assert!(by(&on_a).is_none() != by(&on_b).is_none(), "raised by one instance, seen by the other: {on_a:?} {on_b:?}");
}

/// A config for instance `name` of a team on `redis` whose route `m`
/// caches answers, in front of `good` alone.
fn cache_config(dir: &std::path::Path, name: &str, redis: &Redis, good: &SimProvider) -> std::path::PathBuf {
    let text = format!(
        "[team]\nredis = \"{}\"\nnamespace = \"t\"\ninstance = \"{name}\"\n\n{}\n\
         [[routes]]\nmodel = \"m\"\nchain = [\"good\"]\npolicy = {{ cache = {{ ttl = \"10m\" }} }}\n",
        redis.url(),
        support::provider_toml("good", good, "[\"m\"]", "auth = \"none\""),
    );
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// A deterministic question (so the cache may answer it) to the instance
/// at `addr`: its status, `x-switchyard-cache` and body.
async fn ask(addr: &str, question: &str) -> (u16, String, String) {
    let r = client()
        .post(format!("http://{addr}/v1/chat/completions"))
        .json(&serde_json::json!({ "model": "m", "temperature": 0,
            "messages": [{ "role": "user", "content": question }] }))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let cache = r.headers().get("x-switchyard-cache").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
    (status, cache, r.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_identical_requests_over_two_instances_make_one_upstream_call() {
    let redis = Redis::start();
    // Slow enough that all twenty are in flight together.
    let good = SimProvider::start("good", Script::ok().latency(Duration::from_millis(500))).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = pair(dir.path(), |name| cache_config(dir.path(), name, &redis, &good)).await;

    let started = Instant::now();
    let mut asked = tokio::task::JoinSet::new();
    for i in 0..20 {
        let addr = if i % 2 == 0 { a.served.addr.clone() } else { b.served.addr.clone() };
        asked.spawn(async move { ask(&addr, "the same question").await });
    }
    let answers: Vec<(u16, String, String)> = asked.join_all().await;
    let took = started.elapsed();
    assert_eq!(good.calls(), 1, "one upstream call across the team");
    assert!(answers.iter().all(|(status, _, _)| *status == 200), "{answers:?}");
    assert!(answers.iter().all(|(_, _, body)| *body == answers[0].2), "every client gets the same answer");
    let hits = answers.iter().filter(|(_, cache, _)| cache == "hit").count();
    assert_eq!(hits, 19, "all but the one that filled it are hits: {answers:?}");
    println!("20 identical requests over two instances: 1 upstream call, all answered in {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_stored_on_one_instance_is_a_hit_on_the_other_and_at_once() {
    let redis = Redis::start();
    let good = SimProvider::start("good", Script::ok()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = pair(dir.path(), |name| cache_config(dir.path(), name, &redis, &good)).await;

    let first = ask(&a.served.addr, "asked on a").await;
    assert_eq!((first.0, first.1.as_str()), (200, "miss"));
    // Straight after: on the other instance, and again on the same one.
    let started = Instant::now();
    let on_b = ask(&b.served.addr, "asked on a").await;
    let took = started.elapsed();
    assert_eq!((on_b.0, on_b.1.as_str()), (200, "hit"), "stored on a, a hit on b");
    assert_eq!(on_b.2, first.2);
    let again = ask(&a.served.addr, "asked on a").await;
    assert_eq!((again.0, again.1.as_str()), (200, "hit"), "a repeat right after an answer is a hit");
    assert_eq!(good.calls(), 1);
    // b keeps it too: a hit there needs Redis no more.
    let from_b = ask(&b.served.addr, "asked on a").await;
    assert_eq!(from_b.1, "hit");
    println!("a hit on b for an answer stored on a: {took:?}");
    // What Redis holds is the answer alone, never the question's headers.
    let keys =
        Command::new("redis-cli").args(["-p", &redis.port.to_string(), "--scan", "--pattern", "t:cache:*"]).output();
    if let Ok(out) = keys {
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert_eq!(text.lines().count(), 1, "one entry and no lock left: {text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_frozen_the_cache_is_local_and_every_request_answered() {
    let redis = Redis::start();
    let good = SimProvider::start("good", Script::ok()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = pair(dir.path(), |name| cache_config(dir.path(), name, &redis, &good)).await;

    redis.signal("-STOP");
    let started = Instant::now();
    for (i, addr) in [&a.served.addr, &b.served.addr].into_iter().cycle().take(8).enumerate() {
        let question = format!("question {}", i / 2);
        let (status, _, _) = ask(addr, &question).await;
        assert_eq!(status, 200, "request {i} answered with Redis frozen");
    }
    // A repeat on the same instance is still a hit, from its own cache.
    let (status, cache, _) = ask(&a.served.addr, "question 0").await;
    assert_eq!((status, cache.as_str()), (200, "hit"));
    let took = started.elapsed();
    redis.signal("-CONT");
    assert!(good.calls() <= 8, "{} upstream calls", good.calls());
    println!("9 requests with Redis frozen, all answered in {took:?}");
    let back = until(Duration::from_secs(10), || async {
        admin(&a.served, &a.data, "/admin/team").await["state"] == "connected"
    })
    .await;
    assert!(back.is_some(), "connected again");
}
