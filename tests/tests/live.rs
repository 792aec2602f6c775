//! Live health, events and metrics against a real gateway.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{json, Value};
use switchyard_core::telemetry::GatewayEvent;
use switchyard_sim::{Fault, Script, SimProvider};
use switchyard_tests::{http, keys_for, ConfigText, TestGateway, ADMIN_TOKEN};

const FAST: &str = "[policy]\nbackoff_base = \"1ms\"\nbackoff_cap = \"2ms\"\nmax_retries = 0\nbreaker_consecutive_failures = 3\nbreaker_cooldown = \"200ms\"\nbreaker_close_after = 1";

fn chat() -> Value {
    json!({ "model": "m", "messages": [{ "role": "user", "content": "hi" }] })
}

async fn send(gw: &TestGateway) -> reqwest::Response {
    gw.post("/v1/chat/completions", &chat()).await
}

async fn post_admin(gw: &TestGateway, path: &str) -> reqwest::Response {
    http().post(gw.url(path)).bearer_auth(ADMIN_TOKEN).send().await.unwrap()
}

async fn two(primary: Script) -> (SimProvider, SimProvider, TestGateway) {
    let p = SimProvider::start("primary", primary).await.unwrap();
    let b = SimProvider::start("backup", Script::ok()).await.unwrap();
    let config = ConfigText::new().raw(FAST).provider(&p, "openai", &["m"]).provider(&b, "openai", &["m"]);
    let keys =
        switchyard_core::secrets::MemoryStore::new().with("primary", "main", "sk-p").with("backup", "main", "sk-b");
    let gw = TestGateway::start(config.build(), keys).await;
    (p, b, gw)
}

#[tokio::test]
async fn every_kind_of_event_is_published() {
    let primary = Script::ok()
        .then_once(Fault::status(401))
        .then_once(Fault::status_with(429, &[("retry-after", "1")]))
        .fail_first(0, Fault::None);
    let (p, _b, gw) = two(primary).await;
    let mut rx = gw.gateway.telemetry().events.subscribe();
    // 401 → key revoked → fallback; then the primary has no key left.
    send(&gw).await.bytes().await.unwrap();
    gw.gateway.set_enabled("backup", false).unwrap();
    gw.gateway.set_enabled("backup", true).unwrap();
    p.set_script(Script::always(Fault::status(500)));
    switchyard_core::secrets::SecretStore::set(
        gw.gateway.secrets(),
        "primary",
        "second",
        &secrecy::SecretString::from("sk-p2".to_string()),
    )
    .unwrap();
    gw.gateway.reload_keys();
    for _ in 0..4 {
        send(&gw).await.bytes().await.unwrap();
    }
    std::fs::write(gw.config_file(), "[server\n").unwrap();
    assert_eq!(post_admin(&gw, "/admin/reload").await.status(), 422);

    let mut kinds = BTreeSet::new();
    while let Ok(Ok(e)) = tokio::time::timeout(Duration::from_millis(300), rx.recv()).await {
        kinds.insert(e.event.kind().as_str());
        if let GatewayEvent::Breaker { to, reason, .. } = &e.event {
            assert_eq!(*to, switchyard_core::policy::BreakerState::Open);
            assert!(reason.contains("failures in a row"), "{reason}");
        }
    }
    for kind in
        ["request_finished", "fallback", "key_revoked", "provider_toggled", "breaker", "health", "config_reloaded"]
    {
        assert!(kinds.contains(kind), "no {kind} event in {kinds:?}");
    }
}

#[tokio::test]
async fn rate_limits_publish_a_cooling_event() {
    let (_p, _b, gw) = two(Script::ok().then_once(Fault::status_with(429, &[("retry-after", "30")]))).await;
    let mut rx = gw.gateway.telemetry().events.subscribe();
    send(&gw).await.bytes().await.unwrap();
    let mut seen = false;
    while let Ok(Ok(e)) = tokio::time::timeout(Duration::from_millis(200), rx.recv()).await {
        if let GatewayEvent::KeyCooling { provider, until_ms, .. } = &e.event {
            assert_eq!(provider, "primary");
            assert!(*until_ms > e.at_ms + 25_000);
            seen = true;
        }
    }
    assert!(seen);
    let providers = gw.admin("/admin/providers").await;
    let primary = providers.as_array().unwrap().iter().find(|p| p["name"] == "primary").unwrap();
    assert_eq!(primary["state"], "rate_limited");
}

#[tokio::test]
async fn the_event_stream_sends_a_snapshot_then_events_and_resumes() {
    let (_p, _b, gw) = two(Script::ok()).await;
    let r = http().get(gw.url("/admin/events")).bearer_auth(ADMIN_TOKEN).send().await.unwrap();
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    let mut body = r.bytes_stream();
    let mut text = String::new();
    let mut next_event = async || loop {
        if let Some(end) = text.find("\n\n") {
            let event: String = text.drain(..end + 2).collect();
            if !event.starts_with(':') {
                return event;
            }
            continue;
        }
        let chunk = tokio::time::timeout(Duration::from_secs(3), body.next()).await.unwrap().unwrap().unwrap();
        text.push_str(&String::from_utf8_lossy(&chunk));
    };
    let snapshot = next_event().await;
    assert!(snapshot.contains("event: snapshot"), "{snapshot}");
    assert!(snapshot.contains("\"providers\""));
    send(&gw).await.bytes().await.unwrap();
    let finished = next_event().await;
    assert!(
        finished.contains("event: request_finished") && finished.contains("\"provider\":\"primary\""),
        "{finished}"
    );
    let id: u64 = finished.lines().find_map(|l| l.strip_prefix("id:")).unwrap().trim().parse().unwrap();

    // Resuming from before that event replays it, with no snapshot.
    let r = http()
        .get(gw.url("/admin/events"))
        .bearer_auth(ADMIN_TOKEN)
        .header("last-event-id", (id - 1).to_string())
        .send()
        .await
        .unwrap();
    let first = r.bytes_stream().next().await.unwrap().unwrap();
    let first = String::from_utf8_lossy(&first);
    assert!(first.contains(&format!("id: {id}")) || first.contains(&format!("id:{id}")), "{first}");
    assert!(!first.contains("snapshot"));
}

#[tokio::test]
async fn a_subscriber_that_never_reads_does_not_slow_requests() {
    let (_p, _b, gw) = two(Script::ok()).await;
    let _stuck = gw.gateway.telemetry().events.subscribe();
    let _stuck_http = http().get(gw.url("/admin/events")).bearer_auth(ADMIN_TOKEN).send().await.unwrap();
    for n in 0..3000 {
        gw.gateway.telemetry().publish(GatewayEvent::ProviderToggled { provider: format!("x{n}"), enabled: true });
    }
    let started = std::time::Instant::now();
    for _ in 0..50 {
        assert_eq!(send(&gw).await.status(), 200);
    }
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn toggles_stop_traffic_and_survive_a_restart() {
    let (p, b, gw) = two(Script::ok()).await;
    let r = post_admin(&gw, "/admin/providers/primary/disable").await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<Value>().await.unwrap()["state"], "disabled");
    assert_eq!(send(&gw).await.headers()["x-switchyard-provider"], "backup");
    let keys =
        switchyard_core::secrets::MemoryStore::new().with("primary", "main", "sk-p").with("backup", "main", "sk-b");
    let gw = gw.restart(keys).await;
    let providers = gw.admin("/admin/providers").await;
    let primary = providers.as_array().unwrap().iter().find(|p| p["name"] == "primary").unwrap();
    assert_eq!((primary["enabled"].as_bool(), primary["state"].as_str()), (Some(false), Some("disabled")));
    assert_eq!(send(&gw).await.headers()["x-switchyard-provider"], "backup");
    assert_eq!(p.calls(), 0);
    assert_eq!(post_admin(&gw, "/admin/providers/primary/enable").await.status(), 200);
    assert_eq!(send(&gw).await.headers()["x-switchyard-provider"], "primary");
    assert_eq!(b.calls(), 2);
    assert_eq!(post_admin(&gw, "/admin/providers/nope/enable").await.status(), 404);
}

#[tokio::test]
async fn a_bad_reload_keeps_the_old_config_serving_and_a_good_one_applies() {
    let (_p, b, gw) = two(Script::ok()).await;
    let good = std::fs::read_to_string(gw.config_file()).unwrap();
    std::fs::write(gw.config_file(), good.replace("kind = \"openai\"", "kind = \"opneai\"")).unwrap();
    let r = post_admin(&gw, "/admin/reload").await;
    assert_eq!(r.status(), 422);
    let err = r.json::<Value>().await.unwrap();
    let message = err["error"]["message"].as_str().unwrap();
    assert!(message.contains("switchyard.toml:") && message.contains("providers[0].kind"), "{message}");
    assert_eq!(send(&gw).await.status(), 200, "the old config keeps serving");

    // A valid change: route `m` to the backup first.
    std::fs::write(gw.config_file(), format!("{good}\n[[routes]]\nmodel = \"m\"\nchain = [\"backup\", \"primary\"]\n"))
        .unwrap();
    assert_eq!(post_admin(&gw, "/admin/reload").await.status(), 200);
    assert_eq!(send(&gw).await.headers()["x-switchyard-provider"], "backup");
    assert_eq!(b.calls(), 1);
}

#[tokio::test]
async fn the_breaker_can_be_opened_and_reset_by_hand_and_a_probe_closes_it() {
    let (p, _b, gw) = two(Script::always(Fault::status(500))).await;
    for _ in 0..3 {
        send(&gw).await.bytes().await.unwrap();
    }
    let providers = gw.admin("/admin/providers").await;
    let primary = providers.as_array().unwrap().iter().find(|p| p["name"] == "primary").unwrap();
    assert_eq!(primary["state"], "open");
    assert!(primary["until_ms"].as_i64().is_some());
    assert!(primary["stats"]["m5"]["requests"].as_u64().unwrap() >= 3);

    // After the cool-down a probe (GET /models) closes it without user traffic.
    p.set_script(Script::ok());
    tokio::time::sleep(Duration::from_millis(250)).await;
    let probe: Value = post_admin(&gw, "/admin/providers/primary/probe").await.json().await.unwrap();
    assert_eq!((probe["ok"].as_bool(), probe["breaker"].as_str()), (Some(true), Some("closed")), "{probe}");

    let opened: Value = post_admin(&gw, "/admin/providers/primary/breaker/open").await.json().await.unwrap();
    assert_eq!(opened["breaker"], "open");
    assert_eq!(send(&gw).await.headers()["x-switchyard-provider"], "backup");
    let reset: Value = post_admin(&gw, "/admin/providers/primary/breaker/reset").await.json().await.unwrap();
    assert_eq!(reset["breaker"], "closed");
    assert_eq!(send(&gw).await.headers()["x-switchyard-provider"], "primary");
}

#[tokio::test]
async fn metrics_parse_as_prometheus_text() {
    let (_p, _b, gw) = two(Script::ok().then_once(Fault::status(503))).await;
    for _ in 0..3 {
        send(&gw).await.bytes().await.unwrap();
    }
    let text = http().get(gw.url("/metrics")).send().await.unwrap().text().await.unwrap();
    let lines = text.lines().map(|l| Ok(l.to_string()));
    let scrape = prometheus_parse::Scrape::parse(lines).expect("valid Prometheus text");
    let names: BTreeSet<&str> = scrape.samples.iter().map(|s| s.metric.as_str()).collect();
    for name in [
        "switchyard_requests_total",
        "switchyard_attempts_total",
        "switchyard_fallbacks_total",
        "switchyard_tokens_total",
        "switchyard_breaker_state",
        "switchyard_attempt_duration_seconds",
    ] {
        assert!(names.contains(name), "{name} missing from {names:?}");
    }
    let histogram = scrape.samples.iter().find(|s| s.metric == "switchyard_attempt_duration_seconds").unwrap();
    assert!(matches!(histogram.value, prometheus_parse::Value::Histogram(_)), "{:?}", histogram.value);
    let fallback = scrape.samples.iter().find(|s| s.metric == "switchyard_fallbacks_total").unwrap();
    assert_eq!(fallback.labels.get("from"), Some("primary"));
    assert_eq!(fallback.labels.get("to"), Some("backup"));
    let ok_attempts: f64 = scrape
        .samples
        .iter()
        .filter(|s| s.metric == "switchyard_attempts_total" && s.labels.get("outcome") == Some("ok"))
        .map(|s| match s.value {
            prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Untyped(v) => v,
            _ => 0.0,
        })
        .sum();
    assert_eq!(ok_attempts, 3.0);
    // One 503 and three answers, each timed once in its provider's histogram.
    let timed: f64 = scrape
        .samples
        .iter()
        .filter(|s| s.metric == "switchyard_attempt_duration_seconds")
        .map(|s| match &s.value {
            prometheus_parse::Value::Histogram(buckets) => {
                buckets.iter().filter(|b| b.less_than.is_infinite()).map(|b| b.count).sum()
            }
            _ => 0.0,
        })
        .sum();
    assert_eq!(timed, 4.0);
}

#[tokio::test]
async fn stats_have_percentiles_per_provider_and_model() {
    let p = SimProvider::start("p", Script::ok().latency(Duration::from_millis(20))).await.unwrap();
    let gw = TestGateway::start(ConfigText::new().provider(&p, "openai", &["m", "n"]).build(), keys_for(&["p"])).await;
    for model in ["m", "m", "n"] {
        gw.post("/v1/chat/completions", &json!({ "model": model, "messages": [] })).await.bytes().await.unwrap();
    }
    let stats = gw.admin("/admin/stats").await;
    let p = &stats["providers"][0];
    assert_eq!(p["stats"]["m1"]["requests"], 3);
    assert_eq!(p["stats"]["m5"]["success_rate"], 1.0);
    assert!(p["stats"]["m60"]["latency_p95_ms"].as_u64().unwrap() >= 20);
    let models: Vec<(&str, u64)> = p["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["model"].as_str().unwrap(), m["stats"]["m5"]["requests"].as_u64().unwrap()))
        .collect();
    assert_eq!(models, [("m", 2), ("n", 1)]);
    assert!(p["today"]["output_tokens"].as_u64().unwrap() > 0);
}

/// The provider named `name` in `/admin/providers`.
async fn provider_view(gw: &TestGateway, name: &str) -> Value {
    let providers = gw.admin("/admin/providers").await;
    providers.as_array().unwrap().iter().find(|p| p["name"] == name).cloned().unwrap()
}

/// Polls `/admin/providers` until `name` is in `state`; how long that took.
async fn until_state(gw: &TestGateway, name: &str, state: &str, within: Duration) -> Duration {
    let started = tokio::time::Instant::now();
    loop {
        let view = provider_view(gw, name).await;
        if view["state"] == state {
            return started.elapsed();
        }
        assert!(started.elapsed() < within, "{name} not {state} within {within:?}: {view}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Slack for a loaded machine on top of a probe period.
const SLACK: Duration = Duration::from_millis(400);

#[tokio::test]
async fn a_dead_local_server_is_unreachable_skipped_with_the_reason_and_healthy_once_it_answers() {
    const PERIOD: Duration = Duration::from_millis(300);
    // A port nothing listens on, then the fake that starts there.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let backup = SimProvider::start("backup", Script::ok()).await.unwrap();
    let config = ConfigText::new()
        .raw("[server]\nprobe_every = \"300ms\"")
        .provider_at("local", &format!("http://127.0.0.1:{port}/v1"), "openai", &["m"])
        .raw("auth = \"none\"")
        .provider(&backup, "openai", &["m"]);
    let gw = TestGateway::start(config.build(), keys_for(&["backup"])).await;

    until_state(&gw, "local", "unreachable", PERIOD + SLACK).await;
    let local = provider_view(&gw, "local").await;
    let detail = local["detail"].as_str().unwrap();
    assert!(detail.contains("no answer") && detail.contains("refused"), "{local}");
    assert!(local["last_probe"]["at_ms"].as_i64().unwrap() <= switchyard_core::history::now_ms(), "{local}");
    assert_eq!(local["last_probe"]["ok"], false, "{local}");

    // A request routed through it goes to the backup without trying it.
    let r = send(&gw).await;
    assert_eq!(r.headers()["x-switchyard-provider"], "backup");
    r.bytes().await.unwrap();
    gw.recorded(1).await;
    let listed = gw.admin("/admin/requests").await;
    let id = listed["requests"][0]["id"].as_str().unwrap();
    let request = gw.admin(&format!("/admin/requests/{id}")).await;
    let attempts = request["attempts"].as_array().unwrap();
    let first = (attempts[0]["provider"].as_str(), attempts[0]["outcome"].as_str());
    assert_eq!(first, (Some("local"), Some("skipped")), "{request}");
    let why = attempts[0]["error"].as_str().unwrap();
    assert!(why.contains("unreachable") && why.contains("refused"), "{request}");

    // The fake comes up: healthy by the next probe, however far it backed off.
    let next_ms = provider_view(&gw, "local").await["last_probe"]["next_ms"].as_i64().unwrap();
    let period = Duration::from_millis((next_ms - switchyard_core::history::now_ms()).max(0) as u64);
    assert!(period <= PERIOD * 2, "backed off to {period:?} after a moment down");
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.unwrap();
    let _fake = SimProvider::serve(listener, "local", Script::ok()).unwrap();
    until_state(&gw, "local", "healthy", period + SLACK).await;
    let r = send(&gw).await;
    assert_eq!(r.headers()["x-switchyard-provider"], "local");
}

#[tokio::test]
async fn a_provider_never_probed_and_never_used_is_unknown_not_healthy() {
    let p = SimProvider::start("remote", Script::ok()).await.unwrap();
    let config = ConfigText::new().raw(FAST).provider(&p, "openai", &["m"]).raw("probe = false");
    let gw = TestGateway::start(config.build(), keys_for(&["remote"])).await;
    assert_eq!(provider_view(&gw, "remote").await["state"], "unknown");
    send(&gw).await.bytes().await.unwrap();
    assert_eq!(provider_view(&gw, "remote").await["state"], "healthy");
}
