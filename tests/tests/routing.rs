//! Routing strategies end to end, on real sockets: the gateway on
//! `127.0.0.1:0` in front of scripted providers with their own delays,
//! prices and failures. A strategy only orders the chain: each test also
//! shows that what follows a failure is the chain walk's, as with `ordered`.
//! Delays are milliseconds, so that each test takes a few seconds at most.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use serde_json::{json, Value};
use switchyard_sim::{Fault, Script, SimProvider};
use switchyard_tests::{http, keys_for, request_id, ConfigText, TestGateway, ADMIN_TOKEN};

/// Fast backoff so retries cost milliseconds, not the production quarter second.
const FAST: &str = "[policy]\nbackoff_base = \"1ms\"\nbackoff_cap = \"5ms\"\nmin_fallback_budget = \"100ms\"";

async fn sim(name: &str, script: Script) -> SimProvider {
    SimProvider::start(name, script).await.unwrap()
}

/// A gateway whose route for `m` goes over `sims` as `route` says
/// (`strategy = ...`, and the chain unless `route` gives its own).
async fn gateway(sims: &[&SimProvider], route: &str, extra: &str) -> TestGateway {
    let mut config = ConfigText::new().raw(FAST);
    for s in sims {
        config = config.provider(s, "openai", &["m"]);
    }
    let names: Vec<&str> = sims.iter().map(|s| s.name()).collect();
    let chain = if route.contains("chain") {
        String::new()
    } else {
        format!("chain = [{}]\n", names.iter().map(|n| format!("{n:?}")).collect::<Vec<_>>().join(", "))
    };
    let config = config.raw(&format!("\n[[routes]]\nmodel = \"m\"\n{chain}{route}\n")).raw(extra);
    TestGateway::start(config.build(), keys_for(&names)).await
}

fn chat() -> Value {
    json!({ "model": "m", "max_tokens": 100, "messages": [{ "role": "user", "content": "hi" }] })
}

/// Sends one request; the provider that answered it.
async fn served_by(gw: &TestGateway) -> String {
    let r = gw.post("/v1/chat/completions", &chat()).await;
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());
    r.headers()["x-switchyard-provider"].to_str().unwrap().to_string()
}

/// Sends `n` requests, `at_once` at a time; how many each provider answered.
async fn split(gw: &TestGateway, n: usize, at_once: usize) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for batch in 0..n.div_ceil(at_once) {
        let size = at_once.min(n - batch * at_once);
        for p in join_all((0..size).map(|_| served_by(gw))).await {
            *counts.entry(p).or_default() += 1;
        }
    }
    counts
}

#[tokio::test]
async fn latency_sends_most_requests_to_the_faster_and_moves_when_it_slows_down() {
    let slow = sim("slow", Script::ok().latency(Duration::from_millis(25))).await;
    let fast = sim("fast", Script::ok().latency(Duration::from_millis(2))).await;
    // The slower one first in the chain: `ordered` would send it everything.
    let gw = gateway(&[&slow, &fast], "strategy = \"latency\"", "").await;
    let counts = split(&gw, 500, 1).await;
    let to_fast = counts.get("fast").copied().unwrap_or(0);
    assert!(to_fast >= 450, "at least 90% of 500 to the faster: {counts:?}");
    assert!(
        counts.get("slow").copied().unwrap_or(0) >= 20,
        "the exploration share keeps the other measured: {counts:?}"
    );

    // The fast one slows down to well past the other.
    fast.set_script(Script::ok().latency(Duration::from_millis(80)));
    let slowed = Instant::now();
    let mut after = Vec::new();
    for _ in 0..40 {
        after.push(served_by(&gw).await);
    }
    let moved = after.iter().position(|p| p == "slow").expect("traffic moves to the other");
    let settled = after[moved..].iter().filter(|p| *p == "slow").count();
    assert!(moved <= 5, "moved after {moved} requests: {after:?}");
    assert!(settled * 10 >= (40 - moved) * 9, "and stays there: {after:?}");
    assert!(slowed.elapsed() < Duration::from_secs(30), "within 30 s: {:?}", slowed.elapsed());
}

#[tokio::test]
async fn latency_judges_streams_by_their_first_token_not_their_length() {
    // Quick to start (its first content in about 30 ms) and long to finish
    // (about 80 ms); slower to start (60 ms), and done at once.
    let paced = Script::ok().latency(Duration::from_millis(2)).stream(8, Duration::from_millis(10));
    let starts_fast = sim("starts-fast", paced).await;
    let starts_slow =
        sim("starts-slow", Script::ok().latency(Duration::from_millis(60)).stream(1, Duration::ZERO)).await;
    let gw = gateway(&[&starts_slow, &starts_fast], "strategy = \"latency\"", "").await;
    let mut counts = BTreeMap::<String, usize>::new();
    let body = json!({ "model": "m", "stream": true, "messages": [{ "role": "user", "content": "hi" }] });
    for _ in 0..60 {
        let r = gw.post("/v1/chat/completions", &body).await;
        let provider = r.headers()["x-switchyard-provider"].to_str().unwrap().to_string();
        assert!(r.text().await.unwrap().contains("[DONE]"));
        *counts.entry(provider).or_default() += 1;
    }
    assert!(counts.get("starts-fast").copied().unwrap_or(0) >= 54, "{counts:?}");
}

#[tokio::test]
async fn least_busy_keeps_requests_in_flight_within_one_of_each_other() {
    let a = sim("a", Script::ok().latency(Duration::from_millis(300))).await;
    let b = sim("b", Script::ok().latency(Duration::from_millis(300))).await;
    let gw = gateway(&[&a, &b], "strategy = \"least_busy\"", "").await;
    let watch = async {
        let started = Instant::now();
        while a.in_flight() + b.in_flight() < 32 && started.elapsed() < Duration::from_secs(5) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        (a.in_flight(), b.in_flight())
    };
    let (counts, (in_a, in_b)) = tokio::join!(split(&gw, 32, 32), watch);
    assert_eq!(in_a + in_b, 32, "all 32 in flight at once");
    assert!(in_a.abs_diff(in_b) <= 1, "in flight: a {in_a}, b {in_b}");
    assert!(counts.values().all(|n| (15..=17).contains(n)), "{counts:?}");
}

/// `[[prices]]` for model `m`: USD per million tokens, in and out.
fn prices(table: &[(&str, f64)]) -> String {
    table
        .iter()
        .map(|(p, usd)| format!("\n[[prices]]\nprovider = {p:?}\nmodel = \"m\"\ninput = {usd}\noutput = {usd}\n"))
        .collect()
}

#[tokio::test]
async fn cheapest_picks_by_price_and_skips_to_the_next_when_the_cheap_one_fails() {
    let dear = sim("dear", Script::ok()).await;
    let cheap = sim("cheap", Script::ok()).await;
    let mid = sim("mid", Script::ok()).await;
    let table = prices(&[("dear", 15.0), ("cheap", 0.5), ("mid", 3.0)]);
    let gw = gateway(&[&dear, &mid, &cheap], "strategy = \"cheapest\"", &table).await;
    assert_eq!(split(&gw, 10, 5).await, BTreeMap::from([("cheap".to_string(), 10)]));

    cheap.set_script(Script::always(Fault::status(503)));
    let r = gw.post("/v1/chat/completions", &chat()).await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["x-switchyard-provider"], "mid", "the next cheapest, not the chain's first");
    assert_eq!(r.headers()["x-switchyard-attempts"], "3", "a retry on the cheap one, then the fallback");
    let id = request_id(&r);
    gw.recorded(11).await;
    let detail = gw.admin(&format!("/admin/requests/{id}")).await;
    let attempts = detail["attempts"].as_array().unwrap();
    let routing = detail["routing"].as_array().unwrap();
    assert_eq!(routing.len(), attempts.len(), "every attempt says why its provider was chosen: {detail}");
    let why = &routing[2]["routing"];
    assert_eq!((why["strategy"].as_str(), why["rank"].as_u64()), (Some("cheapest"), Some(1)), "{why}");
    let usd = why["usd"].as_f64().unwrap();
    // About 20 prompt tokens and the 100 asked for, at $3 per million.
    assert!(usd > 100.0 * 3.0 / 1e6 && usd < 200.0 * 3.0 / 1e6, "{usd}");
}

#[tokio::test]
async fn weighted_nine_to_one_lands_within_three_points_over_two_thousand() {
    let a = sim("a", Script::ok()).await;
    let b = sim("b", Script::ok()).await;
    let route = "strategy = \"weighted\"\nchain = [{ provider = \"a\", weight = 9 }, { provider = \"b\", weight = 1 }]";
    let gw = gateway(&[&a, &b], route, "").await;
    let counts = split(&gw, 2000, 25).await;
    let share = counts.get("a").copied().unwrap_or(0) as f64 / 2000.0;
    assert!((0.87..=0.93).contains(&share), "{counts:?}");
    assert_eq!(a.calls() + b.calls(), 2000);
}

/// What each attempt of a request was: provider, reason, outcome, status,
/// and where it fell back from.
async fn attempt_rows(gw: &TestGateway, id: &str) -> (Vec<String>, Value) {
    let detail = gw.admin(&format!("/admin/requests/{id}")).await;
    let rows = detail["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| format!("{} {} {} {} {}", a["provider"], a["reason"], a["outcome"], a["status"], a["fallback_from"]))
        .collect();
    (rows, detail["routing"].clone())
}

#[tokio::test]
async fn every_strategy_falls_back_exactly_as_ordered_when_a_provider_fails() {
    let mut seen = Vec::new();
    for strategy in ["ordered", "latency", "least_busy", "cheapest", "weighted"] {
        let down = sim("down", Script::always(Fault::status(503))).await;
        let up = sim("up", Script::ok()).await;
        let route = format!("strategy = {strategy:?}");
        // Priced so that `cheapest` puts the failing one first too.
        let gw = gateway(&[&down, &up], &route, &prices(&[("down", 1.0), ("up", 2.0)])).await;
        let r = gw.post("/v1/chat/completions", &chat()).await;
        assert_eq!(r.status(), 200, "{strategy}");
        let header = |name: &str| r.headers()[name].to_str().unwrap().to_string();
        let headers = (header("x-switchyard-provider"), header("x-switchyard-attempts"));
        assert_eq!((headers.0.as_str(), headers.1.as_str()), ("up", "3"), "{strategy}");
        let id = request_id(&r);
        gw.recorded(1).await;
        let (rows, routing) = attempt_rows(&gw, &id).await;
        let noted = routing.as_array().unwrap().iter().map(|r| r["routing"]["strategy"].clone()).collect::<Vec<_>>();
        if strategy == "ordered" {
            assert!(noted.is_empty(), "chain order notes nothing: {routing}");
        } else {
            assert_eq!(noted, vec![json!(strategy); 3], "{routing}");
        }
        assert_eq!((down.calls(), up.calls()), (2, 1), "{strategy}");
        seen.push((strategy, rows));
    }
    let (_, ordered) = &seen[0];
    assert_eq!(
        ordered,
        &[
            "\"down\" \"first\" \"http_error\" 503 null",
            "\"down\" \"retry\" \"http_error\" 503 null",
            "\"up\" \"fallback\" \"ok\" 200 \"down\"",
        ]
    );
    for (strategy, rows) in &seen[1..] {
        assert_eq!(rows, ordered, "{strategy} falls back as ordered does");
    }
}

#[tokio::test]
async fn admin_routes_shows_each_strategy_and_split_behind_the_admin_token() {
    let a = sim("a", Script::ok()).await;
    let b = sim("b", Script::ok()).await;
    let route = "strategy = \"weighted\"\nchain = [{ provider = \"a\", weight = 3 }, { provider = \"b\", weight = 1 }]";
    let gw = gateway(&[&a, &b], route, "").await;
    split(&gw, 8, 4).await;

    let anonymous = http().get(gw.url("/admin/routes")).send().await.unwrap();
    assert_eq!(anonymous.status(), 401);
    let wrong = http().get(gw.url("/admin/routes")).bearer_auth("not-the-token").send().await.unwrap();
    assert_eq!(wrong.status(), 401);

    let view = gw.admin("/admin/routes").await;
    let route = &view["routes"][0];
    assert_eq!((route["model"].as_str(), route["strategy"].as_str()), (Some("m"), Some("weighted")), "{view}");
    assert_eq!(route["chain"], json!([{ "provider": "a", "weight": 3 }, { "provider": "b", "weight": 1 }]));
    let shares: Vec<(String, u64)> = route["split"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["provider"].as_str().unwrap().to_string(), s["requests"].as_u64().unwrap()))
        .collect();
    assert_eq!(shares, [("a".to_string(), 6), ("b".to_string(), 2)]);
    assert_eq!(view["unrouted"]["strategy"], "ordered");

    // The config API changes a route's strategy, as the dashboard's select does.
    let put = http()
        .put(gw.url("/admin/config/routes/m"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({ "strategy": "latency" }))
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 200, "{}", put.text().await.unwrap_or_default());
    let view = gw.admin("/admin/routes").await;
    assert_eq!(view["routes"][0]["strategy"], "latency");
    assert_eq!(view["routes"][0]["split"].as_array().unwrap().len(), 2, "the split survives the edit");
    let refused = http()
        .put(gw.url("/admin/config/routes/m"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({ "strategy": "fastest" }))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 422);
    assert!(refused.text().await.unwrap().contains("routes[0].strategy"));
}
