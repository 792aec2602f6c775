//! The resilience policy end to end: deadline, retries, breaker, guardrails
//! and stream commit, against simulated providers on real sockets.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use serde_json::{json, Value};
use switchyard_sim::{Fault, Script, SimProvider};
use switchyard_tests::{http, keys_for, ConfigText, TestGateway};

/// Fast backoff so retries cost milliseconds, not the production quarter second.
const FAST: &str = "[policy]\nbackoff_base = \"1ms\"\nbackoff_cap = \"5ms\"\nmin_fallback_budget = \"100ms\"";

async fn sim(name: &str, script: Script) -> SimProvider {
    SimProvider::start(name, script).await.unwrap()
}

async fn two(primary: Script, backup: Script, policy: &str) -> (SimProvider, SimProvider, TestGateway) {
    let p = sim("primary", primary).await;
    let b = sim("backup", backup).await;
    let config = ConfigText::new()
        .raw(policy)
        .provider(&p, "openai", &["m"])
        .provider(&b, "openai", &["m"])
        .provider_at("primary-an", &p.base_url(), "anthropic", &["c"])
        .provider_at("backup-an", &b.base_url(), "anthropic", &["c"]);
    let gw = TestGateway::start(config.build(), keys_for(&["primary", "backup", "primary-an", "backup-an"])).await;
    (p, b, gw)
}

fn messages(stream: bool) -> Value {
    json!({ "model": "c", "stream": stream, "max_tokens": 8, "messages": [{ "role": "user", "content": "hi" }] })
}

async fn send_messages(gw: &TestGateway, body: &Value) -> reqwest::Response {
    gw.post("/v1/messages", body).await
}

fn chat(stream: bool) -> Value {
    json!({ "model": "m", "stream": stream, "messages": [{ "role": "user", "content": "hi" }] })
}

async fn send(gw: &TestGateway, body: &Value) -> reqwest::Response {
    gw.post("/v1/chat/completions", body).await
}

fn header<'a>(r: &'a reqwest::Response, name: &str) -> &'a str {
    r.headers().get(name).map_or("", |v| v.to_str().unwrap())
}

#[tokio::test]
async fn primary_503_is_retried_once_then_served_by_the_fallback() {
    let (p, b, gw) = two(Script::always(Fault::status(503)), Script::ok(), FAST).await;
    let r = send(&gw, &chat(false)).await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-switchyard-provider"), "backup");
    assert_eq!(header(&r, "x-switchyard-attempts"), "3");
    assert_eq!((p.calls(), b.calls()), (2, 1));
}

#[tokio::test]
async fn retry_after_longer_than_allowed_falls_back_at_once_and_cools_the_provider() {
    let limited = Script::always(Fault::status_with(429, &[("retry-after", "30")]));
    let (p, b, gw) = two(limited, Script::ok(), FAST).await;
    let started = Instant::now();
    let r = send(&gw, &chat(false)).await;
    assert!(started.elapsed() < Duration::from_secs(2), "slept for the retry-after");
    assert_eq!(header(&r, "x-switchyard-provider"), "backup");
    assert_eq!(p.calls(), 1, "a 30 s wait is not worth it: no retry");
    // While it cools down the provider is not called at all.
    for _ in 0..3 {
        assert_eq!(header(&send(&gw, &chat(false)).await, "x-switchyard-provider"), "backup");
    }
    assert_eq!((p.calls(), b.calls()), (1, 4));
}

#[tokio::test]
async fn a_short_retry_after_is_honoured_on_the_same_provider() {
    let once = Script::ok().then_once(Fault::status_with(429, &[("retry-after-ms", "60")]));
    let (p, b, gw) = two(once, Script::ok(), FAST).await;
    let started = Instant::now();
    let r = send(&gw, &chat(false)).await;
    assert!(started.elapsed() >= Duration::from_millis(60), "did not wait as asked");
    assert_eq!(header(&r, "x-switchyard-provider"), "primary");
    assert_eq!((p.calls(), b.calls()), (2, 0));
}

#[tokio::test]
async fn both_hanging_providers_end_in_a_deadline_error_within_the_deadline() {
    let policy = "[policy]\nattempt_timeout = \"1s\"\nmin_fallback_budget = \"100ms\"";
    let (p, b, gw) = two(Script::always(Fault::Hang), Script::always(Fault::Hang), policy).await;
    let started = Instant::now();
    let r = http()
        .post(gw.url("/v1/messages"))
        .header("x-switchyard-timeout-ms", "1500")
        .json(&json!({ "model": "c", "max_tokens": 8, "messages": [{ "role": "user", "content": "hi" }] }))
        .send()
        .await
        .unwrap();
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_millis(1450) && elapsed < Duration::from_millis(1800), "{elapsed:?}");
    assert_eq!(r.status(), 504);
    assert_eq!(header(&r, "x-should-retry"), "false");
    assert_eq!(header(&r, "x-switchyard-attempts"), "2");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "deadline_exceeded");
    assert!(v["error"]["message"].as_str().unwrap().contains("1s 500ms deadline"), "{v}");
    for sim in [&p, &b] {
        assert!(sim.wait_for_disconnects(1, Duration::from_millis(500)).await, "{} still connected", sim.name());
    }
}

#[tokio::test]
async fn the_breaker_stops_traffic_to_a_failing_provider_and_probes_it_back() {
    let policy = format!(
        "{FAST}\nmax_retries = 0\nbreaker_consecutive_failures = 2\nbreaker_cooldown = \"300ms\"\nbreaker_close_after = 1"
    );
    let (p, b, gw) = two(Script::always(Fault::status(500)), Script::ok(), &policy).await;
    for _ in 0..5 {
        assert_eq!(header(&send(&gw, &chat(false)).await, "x-switchyard-provider"), "backup");
    }
    assert_eq!(p.calls(), 2, "the breaker opened after two failures");
    let r = send(&gw, &chat(false)).await;
    assert_eq!(header(&r, "x-switchyard-attempts"), "1", "an open breaker costs no attempt");

    p.set_script(Script::ok());
    tokio::time::sleep(Duration::from_millis(350)).await;
    let r = send(&gw, &chat(false)).await;
    assert_eq!(header(&r, "x-switchyard-provider"), "primary", "the half-open probe went through");
    assert_eq!(header(&send(&gw, &chat(false)).await, "x-switchyard-provider"), "primary", "closed again");
    assert_eq!(b.calls(), 6);
}

#[tokio::test]
async fn an_error_event_before_content_falls_back_with_a_clean_stream() {
    let (p, _b, gw) = two(Script::always(Fault::ErrorEvent), Script::ok(), &format!("{FAST}\nmax_retries = 0")).await;
    let r = send(&gw, &chat(true)).await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-switchyard-provider"), "backup");
    let text = r.text().await.unwrap();
    assert!(text.contains("\"content\":\"Hello\"") && text.contains("backup."), "{text}");
    assert!(!text.contains("error"), "the primary's preamble and error leaked: {text}");
    assert!(text.ends_with("data: [DONE]\n\n"));
    assert_eq!(p.calls(), 1);

    let r = send_messages(&gw, &messages(true)).await;
    assert_eq!(header(&r, "x-switchyard-provider"), "backup-an");
    let text = r.text().await.unwrap();
    assert_eq!(text.matches("event: message_start").count(), 1, "one preamble only: {text}");
    assert!(text.ends_with("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"));
}

#[tokio::test]
async fn a_stall_before_content_falls_back() {
    let policy = format!("{FAST}\nattempt_timeout = \"200ms\"");
    let (p, _b, gw) = two(Script::always(Fault::SlowFirstByte(Duration::from_secs(5))), Script::ok(), &policy).await;
    let r = send(&gw, &chat(true)).await;
    assert_eq!(header(&r, "x-switchyard-provider"), "backup");
    assert!(r.text().await.unwrap().contains("backup."));
    assert!(p.wait_for_disconnects(1, Duration::from_millis(500)).await);
}

#[tokio::test]
async fn a_drop_after_content_ends_the_stream_with_the_protocols_error_event() {
    let (_p, b, gw) = two(Script::always(Fault::DropAfter(2)), Script::ok(), FAST).await;
    let r = send(&gw, &chat(true)).await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-switchyard-provider"), "primary");
    let text = r.text().await.unwrap();
    assert!(text.contains("\"content\":\" from\""), "{text}");
    let last = text.trim_end().rsplit("\n\n").next().unwrap();
    let error: Value = serde_json::from_str(last.strip_prefix("data: ").unwrap()).unwrap();
    assert_eq!(error["error"]["code"], "upstream_error");

    let r = send_messages(&gw, &messages(true)).await;
    let text = r.text().await.unwrap();
    assert!(text.contains("event: content_block_delta"));
    assert!(text.trim_end().rsplit("\n\n").next().unwrap().starts_with("event: error\ndata: {"), "{text}");
    assert_eq!(b.calls(), 0, "content was sent: no fallback after it");
}

#[tokio::test]
async fn a_client_that_leaves_cancels_the_attempt_and_everything_after_it() {
    let (p, b, gw) = two(Script::always(Fault::Hang), Script::ok(), FAST).await;
    let request = http().post(gw.url("/v1/chat/completions")).json(&chat(false)).send();
    assert!(tokio::time::timeout(Duration::from_millis(100), request).await.is_err());
    assert!(p.wait_for_disconnects(1, Duration::from_millis(500)).await, "upstream outlived the client");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!((p.calls(), b.calls()), (1, 0), "no attempt after the client left");
}

#[tokio::test]
async fn the_concurrency_cap_sends_overflow_elsewhere_instead_of_queueing() {
    let p = sim("primary", Script::ok().latency(Duration::from_millis(300))).await;
    let b = sim("backup", Script::ok()).await;
    let config = ConfigText::new()
        .raw(FAST)
        .provider(&p, "openai", &["m"])
        .raw("policy = { max_concurrency = 2 }")
        .provider(&b, "openai", &["m"]);
    let gw = TestGateway::start(config.build(), keys_for(&["primary", "backup"])).await;
    let body = chat(false);
    let replies = join_all((0..6).map(|_| send(&gw, &body))).await;
    let by_primary = replies.iter().filter(|r| header(r, "x-switchyard-provider") == "primary").count();
    assert!(replies.iter().all(|r| r.status() == 200));
    assert_eq!(by_primary, 2);
    assert_eq!((p.calls(), b.calls()), (2, 4));
}

#[tokio::test]
async fn the_fallback_share_caps_diverted_traffic_under_parallel_load() {
    let p = sim("primary", Script::always(Fault::status(503))).await;
    let b = sim("backup", Script::ok()).await;
    let config = ConfigText::new()
        .raw(&format!("{FAST}\nmax_retries = 0\nbreaker_consecutive_failures = 1000\nbreaker_min_calls = 1000"))
        .provider(&p, "openai", &["m"])
        .provider(&b, "openai", &["m"])
        .raw("policy = { fallback_share = 0.5, fallback_min = 0 }");
    let gw = TestGateway::start(config.build(), keys_for(&["primary", "backup"])).await;
    let body = chat(false);
    let replies = join_all((0..20).map(|_| send(&gw, &body))).await;
    let served = replies.iter().filter(|r| r.status() == 200).count();
    assert!((1..=10).contains(&served), "backup took {served} of 20");
    assert_eq!(b.calls(), served);
    for r in replies.iter().filter(|r| r.status() != 200) {
        assert_eq!(r.status(), 502);
        assert_eq!(header(r, "x-should-retry"), "false");
    }
}

#[tokio::test]
async fn the_throttle_slows_down_before_a_429_from_remaining_quota_headers() {
    let p = sim("primary", Script::ok().reply_headers(&[("x-ratelimit-remaining-requests", "0")])).await;
    let b = sim("backup", Script::ok()).await;
    let config = ConfigText::new()
        .raw(&format!("{FAST}\nmax_retry_wait = \"100ms\""))
        .provider(&p, "openai", &["m"])
        .raw("policy = { requests_per_minute = 60 }")
        .provider(&b, "openai", &["m"]);
    let gw = TestGateway::start(config.build(), keys_for(&["primary", "backup"])).await;
    assert_eq!(header(&send(&gw, &chat(false)).await, "x-switchyard-provider"), "primary");
    // The provider said no request is left: the next slot is a second away,
    // longer than the gateway may wait, so the request goes elsewhere at once.
    let started = Instant::now();
    assert_eq!(header(&send(&gw, &chat(false)).await, "x-switchyard-provider"), "backup");
    assert!(started.elapsed() < Duration::from_millis(500));
    assert_eq!(p.calls(), 1, "no 429 was provoked");
}
