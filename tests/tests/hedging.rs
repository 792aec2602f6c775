//! Hedged first bytes end to end: a provider slow to its first byte is
//! raced by the chain's next one, the first to answer is kept and the
//! other's connection closed; a healthy primary is never hedged, and the
//! route's share caps how many are.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use serde_json::{json, Value};
use switchyard_sim::{Fault, Script, SimProvider};
use switchyard_tests::{header, keys_for, request_id, ConfigText, TestGateway};

const SLOW: Duration = Duration::from_millis(1500);

async fn sim(name: &str, script: Script) -> SimProvider {
    SimProvider::start(name, script).await.unwrap()
}

/// A route `m` over `a` then `b` (OpenAI kind: every other format is
/// translated), with `policy` in its `[policy]`; `b` also serves `held`.
async fn route(a: &SimProvider, b: &SimProvider, policy: &str) -> TestGateway {
    route_with(a, b, policy, "").await
}

async fn route_with(a: &SimProvider, b: &SimProvider, policy: &str, b_table: &str) -> TestGateway {
    let config = ConfigText::new()
        .raw(&format!("[policy]\nmin_fallback_budget = \"100ms\"\n{policy}"))
        .provider(a, "openai", &["m"])
        .provider(b, "openai", &["m", "held"])
        .raw(b_table)
        .route("m", &["a", "b"]);
    TestGateway::start(config.build(), keys_for(&["a", "b"])).await
}

fn attempts(detail: &Value) -> Vec<(String, String, String)> {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    detail["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (s(&a["provider"]), s(&a["reason"]), s(&a["outcome"])))
        .collect()
}

fn row(provider: &str, reason: &str, outcome: &str) -> (String, String, String) {
    (provider.to_string(), reason.to_string(), outcome.to_string())
}

async fn metrics(gw: &TestGateway) -> String {
    switchyard_tests::http().get(gw.url("/metrics")).send().await.unwrap().text().await.unwrap()
}

fn chat(stream: bool) -> Value {
    json!({ "model": "m", "stream": stream, "messages": [{ "role": "user", "content": "hi" }] })
}

#[tokio::test]
async fn a_slow_first_byte_is_answered_by_the_next_and_the_slow_one_let_go() {
    let a = sim("a", Script::always(Fault::SlowFirstByte(SLOW))).await;
    let b = sim("b", Script::ok()).await;
    let gw = route(&a, &b, "hedge_after = \"100ms\"\nhedge_max_share = 1.0").await;
    let started = Instant::now();
    let r = gw.post("/v1/chat/completions", &chat(true)).await;
    assert_eq!((r.status().as_u16(), header(&r, "x-switchyard-provider")), (200, "b"));
    let id = request_id(&r);
    let body = r.text().await.unwrap();
    assert!(started.elapsed() < SLOW, "waited for the slow provider: {:?}", started.elapsed());
    assert!(body.contains("[DONE]"), "{body}");
    assert!(a.wait_for_disconnects(1, Duration::from_secs(5)).await, "the slow provider's connection stayed open");
    let r2 = gw.post("/v1/chat/completions", &chat(true)).await;
    r2.bytes().await.unwrap();
    let d = gw.detail(&id).await;
    assert_eq!(attempts(&d), [row("a", "first", "hedged"), row("b", "hedge", "ok")], "{d}");
    assert_eq!(d["provider"], "b", "{d}");
    assert!(d["attempts"][0]["error"].as_str().unwrap().contains("b answered first"), "{d}");
    let m = metrics(&gw).await;
    assert!(m.contains(r#"switchyard_hedges_total{provider="b",outcome="won"} 2"#), "{m}");
    assert!(m.contains(r#"outcome="hedged",reason="first""#), "{m}");
}

#[tokio::test]
async fn plain_answers_and_every_format_are_hedged_translated_or_not() {
    let a = sim("a", Script::always(Fault::Hang)).await;
    let b = sim("b", Script::ok()).await;
    let gw = route(&a, &b, "hedge_after = \"50ms\"\nhedge_max_share = 1.0").await;
    let cases = [
        ("/v1/chat/completions", chat(false)),
        ("/v1/chat/completions", chat(true)),
        ("/v1/messages", json!({ "model": "m", "max_tokens": 8, "messages": [{ "role": "user", "content": "hi" }] })),
        (
            "/v1/messages",
            json!({ "model": "m", "max_tokens": 8, "stream": true, "messages": [{ "role": "user", "content": "hi" }] }),
        ),
        ("/v1/responses", json!({ "model": "m", "input": "hi" })),
        ("/v1/responses", json!({ "model": "m", "input": "hi", "stream": true })),
        ("/v1beta/models/m:generateContent", json!({ "contents": [{ "role": "user", "parts": [{ "text": "hi" }] }] })),
        (
            "/v1beta/models/m:streamGenerateContent?alt=sse",
            json!({ "contents": [{ "role": "user", "parts": [{ "text": "hi" }] }] }),
        ),
    ];
    for (i, (path, body)) in cases.iter().enumerate() {
        let r = gw.post(path, body).await;
        assert_eq!((r.status().as_u16(), header(&r, "x-switchyard-provider")), (200, "b"), "{path} {body}");
        let text = r.text().await.unwrap();
        assert!(!text.contains("\"error\":{") && !text.contains("event: error"), "{path}: {text}");
        assert!(text.contains("Hello"), "{path}: {text}");
        assert!(a.wait_for_disconnects(i + 1, Duration::from_secs(5)).await, "{path}: the hung attempt stayed open");
    }
    assert_eq!(b.calls(), cases.len());
}

#[tokio::test]
async fn a_healthy_primary_is_never_hedged_over_a_thousand_requests() {
    let a = sim("a", Script::ok()).await;
    let b = sim("b", Script::ok()).await;
    let gw = route(&a, &b, "hedge_after = \"300ms\"\nhedge_max_share = 1.0").await;
    for round in 0..125 {
        let bodies: Vec<Value> = (0..8).map(|i| chat(i % 2 == 0)).collect();
        let sent = bodies.iter().map(|b| gw.post("/v1/chat/completions", b));
        for r in join_all(sent).await {
            assert_eq!(header(&r, "x-switchyard-provider"), "a", "round {round}");
            r.bytes().await.unwrap();
        }
    }
    assert_eq!((a.calls(), b.calls()), (1000, 0));
    assert!(!metrics(&gw).await.contains("switchyard_hedges_total{"), "a hedge series appeared");
}

#[tokio::test]
async fn under_a_slow_primary_the_share_cap_holds() {
    let a = sim("a", Script::always(Fault::SlowFirstByte(Duration::from_millis(300)))).await;
    let b = sim("b", Script::ok()).await;
    let gw = route(&a, &b, "hedge_after = \"20ms\"").await;
    let mut hedged = 0;
    for _ in 0..5 {
        let body = chat(true);
        let sent = (0..10).map(|_| gw.post("/v1/chat/completions", &body));
        for r in join_all(sent).await {
            hedged += usize::from(header(&r, "x-switchyard-provider") == "b");
            r.bytes().await.unwrap();
        }
    }
    // One in ten of the route's 50 requests in the minute, by default.
    assert_eq!(b.calls(), hedged);
    assert!((1..=5).contains(&hedged), "{hedged} of 50 hedged");
    let m = metrics(&gw).await;
    assert!(m.contains(r#"switchyard_hedges_total{provider="b",outcome="withheld"}"#), "{m}");
}

#[tokio::test]
async fn p95_hedges_past_the_primarys_own_tail() {
    let a = sim("a", Script::ok()).await;
    let b = sim("b", Script::ok()).await;
    let gw = route(&a, &b, "hedge_after = \"p95\"").await;
    // Too few answers to know a tail: a slow one is waited for.
    a.set_script(Script::always(Fault::SlowFirstByte(Duration::from_millis(300))));
    let r = gw.post("/v1/chat/completions", &chat(true)).await;
    assert_eq!(header(&r, "x-switchyard-provider"), "a");
    r.bytes().await.unwrap();
    a.set_script(Script::ok());
    for _ in 0..29 {
        gw.post("/v1/chat/completions", &chat(true)).await.bytes().await.unwrap();
    }
    a.set_script(Script::always(Fault::SlowFirstByte(SLOW)));
    let started = Instant::now();
    let r = gw.post("/v1/chat/completions", &chat(true)).await;
    assert_eq!(header(&r, "x-switchyard-provider"), "b");
    r.bytes().await.unwrap();
    assert!(started.elapsed() < SLOW);
    assert_eq!(b.calls(), 1);
}

#[tokio::test]
async fn a_failed_hedge_leaves_the_primary_and_is_not_tried_again() {
    let a = sim("a", Script::always(Fault::SlowFirstByte(Duration::from_millis(400)))).await;
    let b = sim("b", Script::always(Fault::status(500))).await;
    let gw = route(&a, &b, "hedge_after = \"50ms\"\nhedge_max_share = 1.0\nmax_retries = 0").await;
    let r = gw.post("/v1/chat/completions", &chat(true)).await;
    assert_eq!((r.status().as_u16(), header(&r, "x-switchyard-provider")), (200, "a"));
    let id = request_id(&r);
    r.bytes().await.unwrap();
    let d = gw.detail(&id).await;
    assert_eq!(attempts(&d), [row("a", "first", "ok"), row("b", "hedge", "http_error")], "{d}");

    // Both failing: the hedge is not tried again as the chain's next.
    a.set_script(Script::always(Fault::status(503)).latency(Duration::from_millis(200)));
    let r = gw.post("/v1/chat/completions", &chat(false)).await;
    assert_eq!(r.status().as_u16(), 502, "all providers failed");
    let d = gw.detail(&request_id(&r)).await;
    assert_eq!(attempts(&d), [row("a", "first", "http_error"), row("b", "hedge", "http_error")], "{d}");
    assert_eq!(b.calls(), 2);
}

#[tokio::test]
async fn no_hedge_when_the_deadline_cannot_hold_one() {
    let a = sim("a", Script::always(Fault::SlowFirstByte(Duration::from_millis(300)))).await;
    let b = sim("b", Script::ok()).await;
    let gw = route(&a, &b, "hedge_after = \"50ms\"\nhedge_max_share = 1.0").await;
    // 70 ms left at the hedge's start: under the 100 ms a fallback needs.
    let r = switchyard_tests::http()
        .post(gw.url("/v1/chat/completions"))
        .header("x-switchyard-timeout-ms", "120")
        .json(&chat(true))
        .send()
        .await
        .unwrap();
    assert_ne!(header(&r, "x-switchyard-provider"), "b");
    r.bytes().await.unwrap();
    assert_eq!(b.calls(), 0, "hedged past what the deadline holds");
}

#[tokio::test]
async fn a_hedge_never_passes_the_partners_cap() {
    let a = sim("a", Script::always(Fault::SlowFirstByte(Duration::from_millis(300)))).await;
    // b's one slot is taken by a slow request of its own.
    let b = sim("b", Script::ok().fail_first(1, Fault::SlowFirstByte(Duration::from_millis(800)))).await;
    let gw =
        route_with(&a, &b, "hedge_after = \"50ms\"\nhedge_max_share = 1.0", "policy = { max_concurrency = 1 }").await;
    let held = json!({ "model": "held", "stream": true, "messages": [{ "role": "user", "content": "hi" }] });
    let holding = gw.post("/v1/chat/completions", &held);
    let hedged = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        gw.post("/v1/chat/completions", &chat(true)).await
    };
    let (holding, r) = tokio::join!(holding, hedged);
    assert_eq!(header(&r, "x-switchyard-provider"), "a", "the hedge went past b's cap");
    r.bytes().await.unwrap();
    holding.bytes().await.unwrap();
    assert_eq!(b.calls(), 1);
    let m = metrics(&gw).await;
    assert!(m.contains(r#"switchyard_hedges_total{provider="b",outcome="withheld"} 1"#), "{m}");
}
