//! Budgets and alerts end to end: a `block` budget refuses in the client's
//! protocol and the chain moves to providers outside its scope; spend
//! survives a restart; a long outage sends a bounded number of alerts.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use serde_json::{json, Value};
use switchyard_core::policy::BreakerState;
use switchyard_core::telemetry::{AlertKind, GatewayEvent};
use switchyard_sim::{Fault, Script, SimProvider};
use switchyard_tests::{chat_hi, header, http, keys_for, messages_hi, ConfigText, TestGateway};

async fn sim(name: &str, script: Script) -> SimProvider {
    SimProvider::start(name, script).await.unwrap()
}

fn budget(scope: &str, limit: f64, action: &str) -> String {
    format!("[[budgets]]\nscope = {scope:?}\nperiod = \"day\"\nlimit_usd = {limit}\naction = {action:?}\n")
}

/// A dollar a token for every model of these providers: one request is
/// over any small limit.
fn prices_for(providers: &[&str]) -> String {
    providers
        .iter()
        .map(|p| format!("[[prices]]\nprovider = {p:?}\nmodel = \"*\"\ninput = 1000000\noutput = 1000000\n"))
        .collect()
}

/// Sends one request that must be served, and waits until it is on record
/// (by then its cost is counted).
async fn spend(gw: &TestGateway, path: &str, body: &Value, on_record: i64) {
    let r = gw.post(path, body).await;
    let status = r.status();
    let text = r.text().await.unwrap();
    assert_eq!(status, 200, "{text}");
    gw.recorded(on_record).await;
}

#[tokio::test]
async fn a_blocking_budget_refuses_in_each_clients_protocol_without_a_retry() {
    let p = sim("p", Script::ok()).await;
    let config = ConfigText::new()
        .provider(&p, "openai", &["m"])
        .provider_at("p-an", &p.base_url(), "anthropic", &["c"])
        .raw(&prices_for(&["p", "p-an"]))
        .raw(&budget("all", 0.5, "block"));
    let gw = TestGateway::start(config.build(), keys_for(&["p", "p-an"])).await;
    spend(&gw, "/v1/chat/completions", &chat_hi("m"), 1).await;

    let r = gw.post("/v1/chat/completions", &chat_hi("m")).await;
    assert_eq!(r.status(), 429);
    assert_eq!(header(&r, "x-should-retry"), "false");
    assert_eq!(header(&r, "x-switchyard-error"), "budget_exceeded");
    let retry_after: u64 = header(&r, "retry-after").parse().unwrap();
    assert!((1..=25 * 3600).contains(&retry_after), "{retry_after}");
    let reset = header(&r, "x-switchyard-budget-reset").to_string();
    assert!(reset.ends_with('Z') && reset.contains('T'), "{reset}");
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        (v["error"]["code"].as_str(), v["error"]["type"].as_str()),
        (Some("budget_exceeded"), Some("rate_limit_error"))
    );
    assert!(v["error"]["message"].as_str().unwrap().contains("resets at"), "{v}");

    let r = gw.post("/v1/messages", &messages_hi("c")).await;
    assert_eq!((r.status().as_u16(), header(&r, "x-should-retry")), (429, "false"));
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["type"], "error");
    assert_eq!(
        (v["error"]["type"].as_str(), v["error"]["code"].as_str()),
        (Some("rate_limit_error"), Some("budget_exceeded"))
    );
    assert_eq!(p.calls(), 1, "refused requests never reach the provider");

    let rows = gw.admin("/admin/budgets").await;
    let row = &rows[0];
    assert_eq!(
        (row["scope"].as_str(), row["action"].as_str(), row["blocking"].as_bool()),
        (Some("all"), Some("block"), Some(true))
    );
    assert!(row["spent_usd"].as_f64().unwrap() > 0.5 && row["fraction"].as_f64().unwrap() > 1.0, "{row}");
    let alerts: Vec<String> = gw
        .gateway
        .telemetry()
        .events
        .recent_changes(100)
        .iter()
        .filter_map(|e| match &e.event {
            GatewayEvent::Alert { kind: AlertKind::BudgetThreshold, title, .. } => Some(title.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(alerts, ["Budget \"all per day\": 100% spent"], "the highest threshold reached, once");
    // The refusal is on record with its code.
    gw.recorded(3).await;
    let refused = gw.admin("/admin/requests?outcome=rejected").await;
    assert_eq!(refused["requests"][0]["error_code"], "budget_exceeded", "{refused}");
}

#[tokio::test]
async fn the_budgets_endpoint_is_guarded_like_the_other_admin_routes() {
    let p = sim("p", Script::ok()).await;
    let config = ConfigText::new().provider(&p, "openai", &["m"]).raw(&budget("provider:p", 5.0, "warn"));
    let gw = TestGateway::start(config.build(), keys_for(&["p"])).await;
    let r = http().get(gw.url("/admin/budgets")).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "admin_token_required");
    let r = http().get(gw.url("/admin/budgets")).bearer_auth("wrong").send().await.unwrap();
    assert_eq!(r.status(), 401);
    let rows = gw.admin("/admin/budgets").await;
    assert_eq!(rows[0]["name"], "provider:p per day");
    assert_eq!(rows[0]["spent_usd"], 0.0);
}

/// Providers a and b serving the client model `m` as `at_a` and `at_b`,
/// chained a then b, under a `block` budget on `scope`; a has spent it.
async fn chain_past(at_a: &str, at_b: &str, scope: &str) -> (SimProvider, SimProvider, TestGateway) {
    let a = sim("a", Script::ok()).await;
    let b = sim("b", Script::ok()).await;
    let config = ConfigText::new()
        .provider(&a, "openai", &[format!("m={at_a}").as_str()])
        .provider(&b, "openai", &[format!("m={at_b}").as_str()])
        .route("m", &["a", "b"])
        .raw(&prices_for(&["a", "b"]))
        .raw(&budget(scope, 0.5, "block"));
    let gw = TestGateway::start(config.build(), keys_for(&["a", "b"])).await;
    spend(&gw, "/v1/chat/completions", &chat_hi("m"), 1).await;
    (a, b, gw)
}

#[tokio::test]
async fn a_chain_moves_on_to_providers_outside_the_blocked_scope() {
    let (a, b, gw) = chain_past("m", "m", "provider:a").await;
    for _ in 0..2 {
        let r = gw.post("/v1/chat/completions", &chat_hi("m")).await;
        assert_eq!((r.status().as_u16(), header(&r, "x-switchyard-provider")), (200, "b"));
        r.bytes().await.unwrap();
    }
    assert_eq!((a.calls(), b.calls()), (1, 2));
    // The blocked provider is on record as passed over, with the budget named.
    gw.recorded(3).await;
    let listed = gw.admin("/admin/requests").await;
    let id = listed["requests"][0]["id"].as_str().unwrap();
    let detail = gw.admin(&format!("/admin/requests/{id}")).await;
    let attempts = detail["attempts"].as_array().unwrap();
    let outcomes: Vec<_> = attempts.iter().map(|a| (a["provider"].as_str(), a["outcome"].as_str())).collect();
    assert_eq!(outcomes, [(Some("a"), Some("skipped")), (Some("b"), Some("ok"))], "{detail}");
    assert!(attempts[0]["error"].as_str().is_some_and(|e| e.contains("provider:a")), "{detail}");
}

#[tokio::test]
async fn a_model_budget_skips_only_attempts_on_that_upstream_model() {
    // The same client model is "big" at a and "small" at b.
    let (a, b, gw) = chain_past("big", "small", "model:big").await;
    let r = gw.post("/v1/chat/completions", &chat_hi("m")).await;
    assert_eq!(header(&r, "x-switchyard-provider"), "b");
    r.bytes().await.unwrap();
    assert_eq!((a.calls(), b.calls()), (1, 1));
}

#[tokio::test]
async fn spend_survives_a_restart_on_the_same_data() {
    let p = sim("p", Script::ok()).await;
    let config = ConfigText::new()
        .provider(&p, "openai", &["m"])
        .raw(&prices_for(&["p"]))
        .raw(&budget("provider:p", 0.5, "block"))
        .raw("[[budgets]]\nname = \"monthly\"\nscope = \"all\"\nperiod = \"month\"\nlimit_usd = 100000\n");
    let gw = TestGateway::start(config.build(), keys_for(&["p"])).await;
    // A stream's usage is counted as well as a whole answer's.
    let stream = json!({ "model": "m", "stream": true, "messages": [{ "role": "user", "content": "hi" }] });
    spend(&gw, "/v1/chat/completions", &stream, 1).await;
    let before = gw.admin("/admin/budgets").await;
    let spent = before[1]["spent_usd"].as_f64().unwrap();
    assert!(spent > 0.5, "{before}");

    let gw = gw.restart(keys_for(&["p"])).await;
    let after = gw.admin("/admin/budgets").await;
    assert!((after[1]["spent_usd"].as_f64().unwrap() - spent).abs() < 1e-9, "{before} then {after}");
    assert_eq!(after[0]["blocking"], true);
    let r = gw.post("/v1/chat/completions", &chat_hi("m")).await;
    assert_eq!(r.status(), 429, "still over budget after the restart");
    assert_eq!(p.calls(), 1);
}

#[tokio::test]
async fn a_long_outage_sends_a_handful_of_alerts_not_one_per_event() {
    let p = sim("primary", Script::always(Fault::status(500))).await;
    let b = sim("backup", Script::ok()).await;
    let policy =
        "[policy]\nmax_retries = 0\nbackoff_base = \"1ms\"\nbackoff_cap = \"2ms\"\nmin_fallback_budget = \"10ms\"\n\
        breaker_consecutive_failures = 1\nbreaker_cooldown = \"5ms\"\nbreaker_cooldown_max = \"5ms\"\n\
        fallback_min = 100000\n[alerts]\nfallback_storm = 3\n";
    let config = ConfigText::new().raw(policy).provider(&p, "openai", &["m"]).provider(&b, "openai", &["m"]);
    let gw = TestGateway::start(config.build(), keys_for(&["primary", "backup"])).await;
    for _ in 0..40 {
        let r = gw.post("/v1/chat/completions", &chat_hi("m")).await;
        assert_eq!(r.status(), 200);
        r.bytes().await.unwrap();
        // Past the cool-down: the next request probes, fails, and opens the breaker again.
        tokio::time::sleep(Duration::from_millis(8)).await;
    }
    gw.recorded(40).await;
    let events = gw.gateway.telemetry().events.since(0).unwrap();
    let opened =
        events.iter().filter(|e| matches!(&e.event, GatewayEvent::Breaker { to: BreakerState::Open, .. })).count();
    let alerts: Vec<(AlertKind, u32)> = events
        .iter()
        .filter_map(|e| match &e.event {
            GatewayEvent::Alert { kind, suppressed, .. } => Some((*kind, *suppressed)),
            _ => None,
        })
        .collect();
    assert!(opened >= 10, "the breaker opened {opened} times");
    assert_eq!(
        alerts,
        [(AlertKind::BreakerOpen, 0), (AlertKind::FallbackStorm, 0)],
        "one alert per kind and subject in ten minutes, whatever the outage did ({opened} openings)"
    );
}
