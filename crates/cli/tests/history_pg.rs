//! The history on PostgreSQL, with real `switchyard serve` processes on a
//! real server: 127.0.0.1:5432, trust auth, database `test` (`.ci/run`
//! starts it). Each test makes a database of its own and drops it; a
//! missing server fails these tests, it never skips them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::pg::Db;
use support::{client, Served};
use switchyard_sim::{Script, SimProvider};

fn config(dir: &std::path::Path, sim: &SimProvider) -> std::path::PathBuf {
    let path = dir.join("switchyard.toml");
    std::fs::write(&path, support::provider_toml("sim", sim, "[\"m\"]", "auth = \"none\"")).unwrap();
    path
}

struct Instance {
    served: Served,
    data: std::path::PathBuf,
}

fn start(dir: &std::path::Path, name: &str, config: &std::path::Path, db: &Db) -> Instance {
    let data = dir.join(name);
    let served = Served::start(config, &data, &[("SWITCHYARD_HISTORY_URL", &db.url())]);
    Instance { served, data }
}

async fn admin(i: &Instance, path: &str) -> Value {
    let token = std::fs::read_to_string(i.data.join("admin-token")).unwrap();
    let r = client().get(format!("http://{}{path}", i.served.addr)).bearer_auth(token.trim()).send().await.unwrap();
    assert_eq!(r.status(), 200, "{path}");
    r.json().await.unwrap()
}

/// One request with its own correlation id; true if the client saw it answered.
async fn request(http: &reqwest::Client, addr: &str, id: &str) -> bool {
    let sent = http
        .post(format!("http://{addr}/v1/chat/completions"))
        .header("x-correlation-id", id)
        .json(&serde_json::json!({ "model": "m", "messages": [{ "role": "user", "content": "hi" }] }))
        .send()
        .await;
    match sent {
        Ok(r) if r.status() == 200 => r.bytes().await.is_ok(),
        _ => false,
    }
}

/// Sends `n` requests, `concurrency` at a time, each to the next address in
/// `addrs` (read at every send, so a test can swap one) and, when that one
/// does not answer, to the next; returns the ids the clients saw answered
/// and how many requests no instance answered.
async fn load(
    addrs: Arc<Mutex<Vec<String>>>,
    n: usize,
    concurrency: usize,
    answered: Arc<Mutex<Vec<String>>>,
) -> usize {
    let next = Arc::new(AtomicUsize::new(0));
    let unanswered = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for _ in 0..concurrency {
        let (addrs, next, answered, unanswered) = (addrs.clone(), next.clone(), answered.clone(), unanswered.clone());
        workers.push(tokio::spawn(async move {
            let http = client();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    return;
                }
                let id = format!("c{i:06}");
                let mut done = false;
                for hop in 0..6 {
                    let addr = {
                        let addrs = addrs.lock().unwrap();
                        addrs[(i + hop) % addrs.len()].clone()
                    };
                    if request(&http, &addr, &id).await {
                        done = true;
                        break;
                    }
                }
                if done {
                    answered.lock().unwrap().push(id);
                } else {
                    unanswered.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    for w in workers {
        w.await.unwrap();
    }
    unanswered.load(Ordering::Relaxed)
}

/// Polls `check` every 20 ms until it holds or `within` passes.
async fn until<F, Fut>(within: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// Fails unless every request answered is on record exactly once (ids
/// kept in the correlation id), and the rollups' sums equal the rows.
fn assert_on_record_once(db: &Db, answered: &[String]) {
    let twice = db.query("SELECT COUNT(*) FROM (SELECT correlation_id FROM requests GROUP BY 1 HAVING COUNT(*) > 1) d");
    assert_eq!(twice, "0", "a request on record twice");
    let on_record: HashSet<String> =
        db.query("SELECT correlation_id FROM requests").lines().map(str::to_owned).collect();
    let missing: Vec<&String> = answered.iter().filter(|id| !on_record.contains(*id)).collect();
    assert!(
        missing.is_empty(),
        "{} answered requests missing, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
    let rows = db.query("SELECT COUNT(*) FROM requests");
    let minute_sums = db.query("SELECT COALESCE(SUM(requests), 0) FROM rollups WHERE span = 60000");
    assert_eq!(minute_sums, rows, "rollups equal the rows");
}

/// Three gateways on one database: migrations applied once; load spread
/// over them with one `kill -9` in the middle; after the killed one starts
/// again, every answered request is on record exactly once, the rollups
/// equal the rows, every instance shows the same spend, and PostgreSQL saw
/// no deadlock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_gateways_on_one_database_record_every_request_once_across_a_kill_9() {
    let db = Db::create("sy_cli");
    let sim = SimProvider::start("sim", Script::ok()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &sim);
    // Started together: the migration lock lets one apply them.
    let starts: Vec<_> = ["a", "b", "c"]
        .into_iter()
        .map(|name| {
            let (dir, config, url) = (dir.path().to_path_buf(), config.clone(), db.url());
            std::thread::spawn(move || {
                let data = dir.join(name);
                Instance { served: Served::start(&config, &data, &[("SWITCHYARD_HISTORY_URL", &url)]), data }
            })
        })
        .collect();
    let mut instances: Vec<Instance> = starts.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(
        db.query("SELECT COUNT(*) FROM _sqlx_migrations"),
        db.query("SELECT MAX(version) FROM _sqlx_migrations")
    );

    let addrs = Arc::new(Mutex::new(instances.iter().map(|i| i.served.addr.clone()).collect::<Vec<_>>()));
    let answered: Arc<Mutex<Vec<String>>> = Arc::default();
    let running = tokio::spawn(load(addrs.clone(), 3000, 12, answered.clone()));
    // A third of the way in, b dies mid-load and starts again on its data.
    let third = until(Duration::from_secs(60), || {
        let answered = answered.clone();
        async move { answered.lock().unwrap().len() >= 1000 }
    })
    .await;
    assert!(third, "a thousand requests answered");
    let b = instances.remove(1);
    b.served.kill_9();
    let b = start(dir.path(), "b", &config, &db);
    addrs.lock().unwrap()[1] = b.served.addr.clone();
    instances.insert(1, b);
    let unanswered = running.await.unwrap();
    let answered = answered.lock().unwrap().clone();
    assert!(answered.len() + unanswered == 3000 && answered.len() >= 2990, "{} answered", answered.len());

    // Each writer lets records gather for a moment: wait for them all.
    let all_in = until(Duration::from_secs(20), || async {
        db.query("SELECT COUNT(*) FROM requests").parse::<usize>().unwrap() >= answered.len()
    })
    .await;
    assert!(all_in, "{} of {} on record", db.query("SELECT COUNT(*) FROM requests"), answered.len());
    assert_on_record_once(&db, &answered);
    let rows: u64 = db.query("SELECT COUNT(*) FROM requests").parse().unwrap();
    for i in &instances {
        let spend = admin(i, "/admin/spend?bucket=day&since=1d").await;
        let requests: u64 = spend["rows"].as_array().unwrap().iter().map(|r| r["requests"].as_u64().unwrap()).sum();
        assert_eq!(requests, rows, "{}'s spend counts the team's requests", i.served.addr);
        // Every request opened the same conversation: one session, whichever
        // instance served each of its requests.
        let sessions = admin(i, "/admin/sessions").await;
        let sessions = sessions["sessions"].as_array().unwrap();
        assert_eq!(sessions.len(), 1, "{sessions:?}");
        assert_eq!(sessions[0]["requests"].as_u64(), Some(rows), "{}", sessions[0]);
    }
    let deadlocks = db.query(&format!("SELECT deadlocks FROM pg_stat_database WHERE datname = '{}'", db.name));
    assert_eq!(deadlocks, "0");
    let team = admin(&instances[0], "/admin/team").await;
    assert_eq!(team["history"], "postgres");
    assert_eq!(team["history_status"]["state"], "keeping_up", "{team}");
}

/// The database goes away under load and comes back: no client request
/// fails because of it; meanwhile `/admin/team` and `switchyard status`
/// say the history is behind and how much waits in the spool; afterwards
/// the spool is replayed and nothing is missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_going_away_under_load_fails_no_request_and_loses_nothing() {
    let db = Db::create("sy_cli");
    let sim = SimProvider::start("sim", Script::ok()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &sim);
    let gw = start(dir.path(), "gw", &config, &db);
    let addrs = Arc::new(Mutex::new(vec![gw.served.addr.clone()]));
    let answered: Arc<Mutex<Vec<String>>> = Arc::default();
    let running = tokio::spawn(load(addrs.clone(), 1500, 8, answered.clone()));
    let started = until(Duration::from_secs(60), || {
        let answered = answered.clone();
        async move { answered.lock().unwrap().len() >= 200 }
    })
    .await;
    assert!(started);

    db.reachable(false);
    let behind = until(Duration::from_secs(20), || async {
        admin(&gw, "/admin/team").await["history_status"]["state"] == "behind"
    })
    .await;
    let during = admin(&gw, "/admin/team").await;
    assert!(behind, "{during}");
    let status = support::switchyard()
        .args(["status", "--listen", &gw.served.addr, "--data-dir"])
        .arg(&gw.data)
        .output()
        .unwrap();
    let status = String::from_utf8_lossy(&status.stdout).to_string();
    assert!(status.contains("history on postgres: behind"), "{status}");
    // Requests go on while it is gone.
    let at_outage = answered.lock().unwrap().len();
    let served_meanwhile = until(Duration::from_secs(30), || {
        let answered = answered.clone();
        async move { answered.lock().unwrap().len() >= at_outage + 200 }
    })
    .await;
    assert!(served_meanwhile, "requests keep being answered with the database gone");
    let spooled = admin(&gw, "/admin/team").await["history_status"]["spooled"].as_u64().unwrap();
    assert!(spooled > 0, "the spool holds what waits");

    db.reachable(true);
    let unanswered = running.await.unwrap();
    assert_eq!(unanswered, 0, "no request failed because the database was gone");
    let answered = answered.lock().unwrap().clone();
    let caught_up = until(Duration::from_secs(30), || async {
        let h = admin(&gw, "/admin/team").await["history_status"].clone();
        h["state"] == "keeping_up" && h["spooled"] == 0
    })
    .await;
    assert!(caught_up, "{}", admin(&gw, "/admin/team").await);
    let all_in = until(Duration::from_secs(10), || async {
        db.query("SELECT COUNT(*) FROM requests").parse::<usize>().unwrap() >= answered.len()
    })
    .await;
    assert!(all_in);
    assert_on_record_once(&db, &answered);
    assert_eq!(admin(&gw, "/admin/team").await["history_status"]["lost"], 0);
    let log = gw.served.stop().join("\n");
    assert!(log.contains("history write failed") && log.contains("history caught up"), "{log}");
    assert!(!log.contains(&db.url().replace("postgres@", "postgres:")), "no URL with a password in the log");
}

/// A database that does not exist stops the gateway at the start with the
/// setting named, and nothing is served.
#[test]
fn a_history_url_naming_no_database_is_refused_with_the_setting_named() {
    let dir = tempfile::tempdir().unwrap();
    let out = support::switchyard()
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .env("SWITCHYARD_HISTORY_URL", "postgres://postgres:hunter2@127.0.0.1:5432/sy_no_such_database")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("history.url") && stderr.contains("sy_no_such_database"), "{stderr}");
    assert!(!stderr.contains("hunter2"), "the password is never printed: {stderr}");
}
