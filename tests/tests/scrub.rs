//! No secret leaves through upstream text: a provider that echoes the
//! request it got (the injected key with it) into its error body and
//! headers gets its words passed on, stored, logged and published with every
//! key and the client's credential redacted; and no credential header a
//! client sends reaches a provider.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{json, Value};
use switchyard_core::secrets::MemoryStore;
use switchyard_sim::{Fault, Script, SimProvider};
use switchyard_tests::{http, request_id, ConfigText, TestGateway, ACCESS_TOKEN, ADMIN_TOKEN};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;

/// The keys of the echoing provider's pool, and the fallback's key.
const ECHO_KEY_1: &str = "sk-echo-first-4f1c9a7e2b5d8c3a";
const ECHO_KEY_2: &str = "sk-echo-second-9d2e7b4a1c6f3e8b";
const BACKUP_KEY: &str = "sk-ant-backup-6b3f8e1d4a7c2e9f";
/// Credentials the client sends besides the access token.
const CLIENT_QUERY_KEY: &str = "cli-query-secret-5e8a2d7f";
const CLIENT_AZURE_KEY: &str = "cli-azure-secret-3c7e1a9b";
const CLIENT_GOOG_KEY: &str = "cli-goog-secret-8f2b6d4e";

const SECRETS: [&str; 7] =
    [ECHO_KEY_1, ECHO_KEY_2, BACKUP_KEY, ACCESS_TOKEN, CLIENT_QUERY_KEY, CLIENT_AZURE_KEY, CLIENT_GOOG_KEY];

/// Everything the gateway logs, as text.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Logs {
    /// Captures the gateway's logs, every level, on this thread: the tests
    /// run on a current-thread runtime, so that is where the gateway runs.
    fn capture() -> (Logs, tracing::subscriber::DefaultGuard) {
        let logs = Logs::default();
        let writer = logs.clone();
        let fmt = tracing_subscriber::fmt::layer().with_ansi(false).with_writer(move || writer.clone());
        let filter = Targets::new().with_target("switchyard_core", tracing::Level::TRACE);
        let guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(fmt).with(filter));
        (logs, guard)
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

#[track_caller]
fn assert_clean(what: &str, text: &str) {
    for secret in SECRETS {
        assert!(!text.contains(secret), "{what} holds {secret}: {text}");
        // A cut-off copy would do too: not even the secret part of its start.
        assert!(!text.contains(&secret[..secret.len() - 4]), "{what} holds most of {secret}: {text}");
    }
}

fn keys() -> MemoryStore {
    MemoryStore::new()
        .with("echo", "first", ECHO_KEY_1)
        .with("echo", "second", ECHO_KEY_2)
        .with("backup", "main", BACKUP_KEY)
}

/// Every file of the gateway's data directory (database, WAL, spool), as text.
fn data_files(gw: &TestGateway) -> String {
    let dir = gw.config_file().parent().unwrap().to_path_buf();
    let mut text = String::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            text.push_str(&String::from_utf8_lossy(&std::fs::read(&path).unwrap()));
        }
    }
    text
}

/// The first event of `/admin/events`: the snapshot, with the recent state
/// changes and every provider's view (keys included, as summaries).
async fn events_snapshot(gw: &TestGateway) -> String {
    let r = http().get(gw.url("/admin/events")).bearer_auth(ADMIN_TOKEN).send().await.unwrap();
    let mut body = r.bytes_stream();
    let mut text = String::new();
    while !text.contains("\n\n") {
        let chunk = tokio::time::timeout(Duration::from_secs(3), body.next()).await.unwrap().unwrap().unwrap();
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    text
}

fn chat() -> Value {
    json!({ "model": "m", "messages": [{ "role": "user", "content": "hi" }] })
}

/// A chat request carrying every kind of client credential.
async fn send_with_credentials(gw: &TestGateway) -> reqwest::Response {
    http()
        .post(gw.url(&format!("/v1/chat/completions?key={CLIENT_QUERY_KEY}")))
        .bearer_auth(ACCESS_TOKEN)
        .header("api-key", CLIENT_AZURE_KEY)
        .header("x-goog-api-key", CLIENT_GOOG_KEY)
        .json(&chat())
        .send()
        .await
        .unwrap()
}

const FAST: &str = "[server]\naccess_token = true\n\n[history]\nstore_bodies = true\n\n[policy]\nbackoff_base = \"1ms\"\nbackoff_cap = \"2ms\"\nmax_retries = 2\nbreaker_consecutive_failures = 100\nbreaker_min_calls = 1000\nfallback_min = 1000\n";

#[tokio::test(flavor = "current_thread")]
async fn an_echoed_key_is_redacted_everywhere_the_error_goes() {
    let (logs, _guard) = Logs::capture();
    // Refuses both of its keys, echoing each; then the backup fails, echoing its own.
    let echo = SimProvider::start("echo", Script::always(Fault::EchoRequest { status: 401 })).await.unwrap();
    let backup = SimProvider::start("backup", Script::always(Fault::EchoRequest { status: 500 })).await.unwrap();
    let config = ConfigText::new().raw(FAST).provider(&echo, "openai", &["m"]).provider(&backup, "openai", &["m"]);
    let gw = TestGateway::start(config.build(), keys()).await;

    let r = send_with_credentials(&gw).await;
    let id = request_id(&r);
    let status = r.status();
    let head = format!("{:?}", r.headers());
    let body = r.text().await.unwrap();
    assert_eq!(status, 502, "{body}");
    // The echo was there to leak, and went out redacted.
    let seen = &echo.requests()[0];
    assert_eq!(seen.headers["authorization"], format!("Bearer {ECHO_KEY_1}"));
    assert!(!seen.query.as_deref().unwrap_or("").contains(CLIENT_QUERY_KEY), "the client's ?key= stays behind");
    assert_eq!((echo.calls(), backup.calls()), (2, 3), "two keys refused, then a retried fallback");
    assert_clean("the client's error", &body);
    assert_clean("the client's error headers", &head);
    assert!(body.contains("[redacted]"), "{body}");

    let detail = everything_else_is_clean(&gw, &id, &logs).await;
    assert_eq!(detail["attempts"].as_array().unwrap().len(), 5, "{detail}");
    assert!(detail["attempts"][0]["error"].as_str().unwrap().contains("[redacted]"), "{detail}");
    let snapshot = events_snapshot(&gw).await;
    assert!(snapshot.contains("key_revoked") && snapshot.contains("fallback"), "{snapshot}");
    assert!(data_files(&gw).contains("[redacted]"), "the errors are on disk, redacted");
    assert!(logs.text().contains("[redacted]"), "the errors are logged, redacted");
}

#[tokio::test(flavor = "current_thread")]
async fn an_echoing_error_event_in_a_stream_is_redacted_too() {
    let (logs, _guard) = Logs::capture();
    let echo = SimProvider::start("echo", Script::always(Fault::EchoErrorEvent)).await.unwrap();
    let config = ConfigText::new().raw(FAST).provider_at("backup", &echo.base_url(), "anthropic", &["c"]);
    let gw = TestGateway::start(config.build(), keys()).await;
    let r = http()
        .post(gw.url("/v1/messages"))
        .header("x-api-key", ACCESS_TOKEN)
        .json(&json!({ "model": "c", "stream": true, "max_tokens": 8, "messages": [{ "role": "user", "content": "hi" }] }))
        .send()
        .await
        .unwrap();
    let id = request_id(&r);
    let body = r.text().await.unwrap();
    assert_eq!(echo.requests()[0].headers["x-api-key"], BACKUP_KEY);
    assert_clean("the client's error", &body);
    assert!(body.contains("error event before content") && body.contains("x-api-key: [redacted]"), "{body}");
    everything_else_is_clean(&gw, &id, &logs).await;
}

/// Asserts that no secret is in the history (admin API and files), the
/// live events, the admin views, `/metrics` or the logs; returns the
/// request's detail.
async fn everything_else_is_clean(gw: &TestGateway, id: &str, logs: &Logs) -> Value {
    gw.recorded(1).await;
    let list = gw.admin("/admin/requests").await.to_string();
    assert!(list.contains(id));
    assert_clean("/admin/requests", &list);
    let detail = gw.admin(&format!("/admin/requests/{id}")).await;
    assert_clean("/admin/requests/{id}", &detail.to_string());
    for path in ["/admin/providers", "/admin/keys", "/admin/stats"] {
        assert_clean(path, &gw.admin(path).await.to_string());
    }
    assert_clean("/admin/events", &events_snapshot(gw).await);
    let bus = gw.gateway.telemetry().events.since(0).unwrap();
    assert!(!bus.is_empty());
    let bus: Vec<String> = bus.iter().map(|e| serde_json::to_string(&**e).unwrap()).collect();
    assert_clean("the event bus", &bus.join("\n"));
    let metrics = http().get(gw.url("/metrics")).bearer_auth(ACCESS_TOKEN).send().await.unwrap();
    assert_clean("/metrics", &metrics.text().await.unwrap());
    assert_clean("the data directory", &data_files(gw));
    assert_clean("the logs", &logs.text());
    detail
}

#[tokio::test(flavor = "current_thread")]
async fn an_error_relayed_to_the_client_is_redacted_body_headers_and_stored_copy() {
    let (logs, _guard) = Logs::capture();
    // A 400 is the client's to fix: the provider's own answer goes back.
    let echo = SimProvider::start("echo", Script::always(Fault::EchoRequest { status: 400 })).await.unwrap();
    let config = ConfigText::new().raw(FAST).provider(&echo, "openai", &["m"]);
    let gw = TestGateway::start(config.build(), keys()).await;

    let r = send_with_credentials(&gw).await;
    assert_eq!(r.status(), 400);
    let id = request_id(&r);
    let echoed = r.headers()["x-echo"].to_str().unwrap().to_string();
    let head = format!("{:?}", r.headers());
    let body: Value = r.json().await.unwrap();
    let message = body["error"]["message"].as_str().unwrap();
    assert_clean("the relayed body", message);
    assert_clean("the relayed headers", &head);
    assert!(message.contains("authorization: Bearer [redacted]"), "{message}");
    assert!(echoed.contains("authorization: Bearer [redacted]"), "{echoed}");

    gw.recorded(1).await;
    let detail = gw.admin(&format!("/admin/requests/{id}")).await;
    assert_clean("/admin/requests/{id}", &detail.to_string());
    let stored = detail["response_body"].as_str().unwrap_or_default();
    assert!(stored.contains("[redacted]"), "the body is stored, redacted: {detail}");
    assert_clean("the data directory", &data_files(&gw));
    assert_clean("the logs", &logs.text());
}

#[tokio::test]
async fn no_credential_of_the_client_reaches_a_provider() {
    let p = SimProvider::start("p", Script::ok()).await.unwrap();
    let config = ConfigText::new().both_kinds(&p, &["m"], &["c"]);
    let keys = MemoryStore::new().with("p", "main", "sk-p-provider").with("p-an", "main", "sk-p-an-provider");
    let gw = TestGateway::start(config.build(), keys).await;
    let credentials = [
        ("authorization", "Bearer cli-bearer"),
        ("x-api-key", "cli-x-api-key"),
        ("api-key", "cli-azure"),
        ("x-goog-api-key", "cli-goog"),
        ("proxy-authorization", "Basic Y2xpOnByb3h5"),
        ("cookie", "session=cli-cookie"),
        ("x-switchyard-session", "cli-session"),
    ];
    let messages = json!({ "model": "c", "max_tokens": 8, "messages": [{ "role": "user", "content": "hi" }] });
    for (path, body) in
        [("/v1/chat/completions?key=cli-query", chat()), ("/v1/messages?beta=true&api_key=cli-q", messages)]
    {
        let mut request = http().post(gw.url(path)).json(&body);
        for (name, value) in credentials {
            request = request.header(name, value);
        }
        let r = request.send().await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
    }
    let seen = p.requests();
    assert_eq!(seen.len(), 2);
    for (request, (injected, value)) in
        seen.iter().zip([("authorization", "Bearer sk-p-provider"), ("x-api-key", "sk-p-an-provider")])
    {
        for (name, _) in credentials {
            let got: Vec<_> = request.headers.get_all(name).iter().map(|v| v.to_str().unwrap()).collect();
            let expected: Vec<&str> = if name == injected { vec![value] } else { vec![] };
            assert_eq!(got, expected, "{} got {name}", request.path);
        }
        let all = format!("{:?} {:?}", request.query, request.headers);
        assert!(!all.contains("cli-"), "{all}");
    }
}
