//! A `kill -9` of a loaded gateway leaves a sound database and, with the
//! spool beside it, every request that had completed, and every capture
//! of one: history opened again holds them all, and the gateway starts
//! again on it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::Served;
use switchyard_core::config::HistoryConfig;
use switchyard_core::history::{History, Store};
use switchyard_sim::{Fault, Script, SimProvider};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_load_loses_no_completed_request_and_corrupts_nothing() {
    let primary = SimProvider::start("primary", Script::ok().chaos(0.3, Fault::status(503)).stream(3, Duration::ZERO))
        .await
        .unwrap();
    let backup = SimProvider::start("backup", Script::ok().stream(3, Duration::ZERO)).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("switchyard.toml");
    std::fs::write(
        &config,
        format!(
            "[history]\nstore_bodies = true\n\n[policy]\nbackoff_base = \"1ms\"\nbackoff_cap = \"2ms\"\n\n[[providers]]\nname = \"primary\"\nkind = \"openai\"\nbase_url = \"{}\"\nauth = \"none\"\nmodels = [\"m\"]\n\n[[providers]]\nname = \"backup\"\nkind = \"openai\"\nbase_url = \"{}\"\nauth = \"none\"\nmodels = [\"m\"]\n",
            primary.base_url(),
            backup.base_url()
        ),
    )
    .unwrap();
    let data = dir.path().join("data");
    let served = Served::start(&config, &data, &[]);
    let addr = served.addr.clone();

    let completed: Arc<Mutex<Vec<(String, Instant)>>> = Arc::default();
    let client = support::client();
    let mut workers = Vec::new();
    for w in 0..8 {
        let (client, addr, completed) = (client.clone(), addr.clone(), completed.clone());
        workers.push(tokio::spawn(async move {
            // Bounded: at most 400 requests per worker, and the kill ends it sooner.
            for i in 0..400 {
                let body = serde_json::json!({ "model": "m", "stream": (i + w) % 2 == 0, "messages": [{ "role": "user", "content": "hi" }] });
                let Ok(r) = client.post(format!("http://{addr}/v1/chat/completions")).json(&body).send().await else { return };
                let id = r.headers()["x-request-id"].to_str().unwrap().to_string();
                if r.bytes().await.is_err() {
                    return;
                }
                completed.lock().unwrap().push((id, Instant::now()));
            }
        }));
    }
    while completed.lock().unwrap().len() < 300 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let killed_at = served.kill_9();
    for w in workers {
        w.await.unwrap();
    }

    let history = History::open(&data.join("switchyard.db"), &HistoryConfig::default()).await.unwrap();
    let store = history.store();
    assert_eq!(store.integrity_check().await.unwrap(), "ok");
    let done: Vec<(String, Instant)> =
        completed.lock().unwrap().iter().filter(|(_, at)| *at < killed_at).cloned().collect();
    let (mut missing, mut uncaptured) = (Vec::new(), Vec::new());
    for (id, _) in &done {
        if store.request(id).await.unwrap().is_none() {
            missing.push(id.clone());
        }
        // Every request is captured (`store_bodies`), and its capture is
        // spooled with it.
        if store.capture(id).await.unwrap().is_none() {
            uncaptured.push(id.clone());
        }
    }
    assert!(
        missing.is_empty(),
        "{} of {} completed requests missing after kill -9: {missing:?}",
        missing.len(),
        done.len()
    );
    assert!(
        uncaptured.is_empty(),
        "{} of {} completed requests' captures missing after kill -9: {uncaptured:?}",
        uncaptured.len(),
        done.len()
    );
    history.close(Duration::from_secs(5)).await;

    // The gateway starts again on the same database and keeps recording.
    let again = Served::start(&config, &data, &[]);
    let r = again.chat("m").await;
    assert_eq!(r.status(), 200);
    again.stop();
    let store = Store::open(&data.join("switchyard.db")).await.unwrap();
    assert!(store.request(r.headers()["x-request-id"].to_str().unwrap()).await.unwrap().is_some());
}
