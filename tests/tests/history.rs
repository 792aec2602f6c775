//! Every attempt on record: the history database against real traffic.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use futures_util::stream::{self, StreamExt};
use serde_json::{json, Value};
use switchyard_core::history::CountTable;
use switchyard_sim::{Fault, Script, SimProvider};
use switchyard_tests::{http, keys_for, request_id, ConfigText, TestGateway, ADMIN_TOKEN};

const FAST: &str = "[policy]\nbackoff_base = \"1ms\"\nbackoff_cap = \"5ms\"\nmin_fallback_budget = \"100ms\"\nattempt_timeout = \"2s\"";

async fn sim(name: &str, script: Script) -> SimProvider {
    SimProvider::start(name, script).await.unwrap()
}

fn chat(model: &str, stream: bool) -> Value {
    json!({ "model": model, "stream": stream, "messages": [{ "role": "user", "content": "hi" }] })
}

fn messages(model: &str, stream: bool) -> Value {
    json!({ "model": model, "stream": stream, "max_tokens": 16, "messages": [{ "role": "user", "content": "hi" }] })
}

/// The id of the request `r` answers and its detail from the history, once
/// `on_record` requests are recorded.
async fn recorded_detail(gw: &TestGateway, r: reqwest::Response, on_record: i64) -> (String, Value) {
    let id = request_id(&r);
    r.bytes().await.unwrap();
    gw.recorded(on_record).await;
    let detail = gw.admin(&format!("/admin/requests/{id}")).await;
    (id, detail)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_attempt_of_a_mixed_fault_run_has_exactly_one_row() {
    let flaky = |s: Script| {
        s.chaos(0.25, Fault::status(503))
            .chaos(0.1, Fault::ErrorEvent)
            .chaos(0.05, Fault::DropAfter(1))
            .chaos(0.05, Fault::status_with(429, &[("retry-after-ms", "5")]))
            .stream(4, Duration::ZERO)
    };
    let p = sim("primary", flaky(Script::ok())).await;
    let b = sim("backup", flaky(Script::ok())).await;
    let config = ConfigText::new()
        .raw(&format!("{FAST}\nbreaker_consecutive_failures = 1000\nbreaker_min_calls = 100000\nfallback_min = 100000"))
        .provider(&p, "openai", &["m"])
        .provider(&b, "openai", &["m"])
        .provider_at("primary-an", &p.base_url(), "anthropic", &["c"])
        .provider_at("backup-an", &b.base_url(), "anthropic", &["c"]);
    let gw = TestGateway::start(config.build(), keys_for(&["primary", "backup", "primary-an", "backup-an"])).await;

    const N: usize = 300;
    let statuses: Vec<u16> = stream::iter(0..N)
        .map(|i| {
            let gw = &gw;
            async move {
                let (path, body) = match i % 4 {
                    0 => ("/v1/chat/completions", chat("m", false)),
                    1 => ("/v1/chat/completions", chat("m", true)),
                    2 => ("/v1/messages", messages("c", false)),
                    _ => ("/v1/messages", messages("c", true)),
                };
                let r = http().post(gw.url(path)).json(&body).send().await.unwrap();
                let status = r.status().as_u16();
                let _ = r.bytes().await;
                status
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    assert_eq!(statuses.len(), N);
    assert!(statuses.iter().filter(|s| **s == 200).count() > N / 2, "most requests are served");

    assert_eq!(gw.recorded(N as i64).await, N as i64);
    let attempt_rows = gw.store.count(CountTable::Attempts).await.unwrap();
    assert_eq!(attempt_rows, (p.calls() + b.calls()) as i64, "one row per attempt the providers saw");
    let sum: i64 = sqlx_sum(&gw).await;
    assert_eq!(sum, attempt_rows, "each request row counts its own attempts");
}

async fn sqlx_sum(gw: &TestGateway) -> i64 {
    let mut cursor: Option<String> = None;
    let mut total = 0;
    loop {
        let q = cursor.as_ref().map_or(String::new(), |c| format!("&cursor={c}"));
        let page = gw.admin(&format!("/admin/requests?limit=37{q}")).await;
        total += page["requests"].as_array().unwrap().iter().map(|r| r["attempt_count"].as_i64().unwrap()).sum::<i64>();
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return total,
        }
    }
}

#[tokio::test]
async fn stream_usage_is_recorded_whether_or_not_the_client_asked() {
    let behind = sim("p", Script::ok()).await;
    let direct = sim("p", Script::ok()).await;
    let config = ConfigText::new().provider(&behind, "openai", &["gpt-4o-mini"]);
    let gw = TestGateway::start(config.build(), keys_for(&["p"])).await;

    // Not asked: the client's stream is byte-identical to the provider's plain stream.
    let plain = chat("gpt-4o-mini", true);
    let via = gw.post("/v1/chat/completions", &plain).await;
    let id = request_id(&via);
    let via = via.bytes().await.unwrap();
    let straight = http()
        .post(format!("{}/chat/completions", direct.base_url()))
        .json(&plain)
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(via, straight);
    assert!(!String::from_utf8_lossy(&via).contains("usage"));
    let sent: Value = serde_json::from_slice(&behind.requests()[0].body).unwrap();
    assert_eq!(sent["stream_options"]["include_usage"], true, "the gateway asked upstream");

    // Asked: the usage chunk reaches the client.
    let mut asked = chat("gpt-4o-mini", true);
    asked["stream_options"] = json!({ "include_usage": true });
    let via = gw.post("/v1/chat/completions", &asked).await;
    let asked_id = request_id(&via);
    assert!(String::from_utf8_lossy(&via.bytes().await.unwrap()).contains("\"completion_tokens\":5"));

    gw.recorded(2).await;
    for id in [id, asked_id] {
        let detail = gw.admin(&format!("/admin/requests/{id}")).await;
        assert_eq!(detail["usage"]["output_tokens"], 5, "{detail}");
        assert!(detail["usage"]["input_tokens"].as_i64().unwrap() > 0);
        assert!(detail["cost_usd"].as_f64().unwrap() > 0.0, "gpt-4o-mini has a price");
        assert_eq!(detail["outcome"], "ok");
        assert_eq!(detail["streamed"], true);
        assert!(detail["ttft_ms"].as_f64().is_some());
    }
}

#[tokio::test]
async fn only_a_refusal_records_the_wait_a_provider_asked_for() {
    // OpenAI sends when its quota windows reset with every answer. On a
    // success that is not a request to wait, and the timeline must not say so.
    let resets = [("x-ratelimit-reset-requests", "6m0s"), ("retry-after", "30")];
    let script = Script::ok().reply_headers(&resets).then_once(Fault::status_with(429, &[("retry-after-ms", "20")]));
    let p = sim("primary", script).await;
    let config = ConfigText::new().raw(FAST).provider(&p, "openai", &["no-price-model"]);
    let gw = TestGateway::start(config.build(), keys_for(&["primary"])).await;
    let r = gw.post("/v1/chat/completions", &chat("no-price-model", false)).await;
    assert_eq!(r.status(), 200);
    let (_, detail) = recorded_detail(&gw, r, 1).await;
    let attempts = detail["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2, "{detail}");
    assert_eq!(attempts[0]["status"], 429);
    assert_eq!(attempts[0]["retry_after_ms"].as_f64(), Some(20.0), "{detail}");
    assert_eq!(attempts[1]["status"], 200);
    assert!(attempts[1]["retry_after_ms"].is_null(), "{detail}");
}

#[tokio::test]
async fn a_request_detail_shows_its_attempts_in_order() {
    let p = sim("primary", Script::always(Fault::status(503))).await;
    let b = sim("backup", Script::ok()).await;
    let config = ConfigText::new().raw(FAST).provider(&p, "anthropic", &["no-price-model"]).provider(
        &b,
        "anthropic",
        &["no-price-model"],
    );
    let gw = TestGateway::start(config.build(), keys_for(&["primary", "backup"])).await;
    let r = http()
        .post(gw.url("/v1/messages"))
        .header("x-correlation-id", "trace-history-1")
        .json(&messages("no-price-model", false))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let (id, detail) = recorded_detail(&gw, r, 1).await;
    let attempts = detail["attempts"].as_array().unwrap();
    let summary: Vec<(&str, &str, &str, i64)> = attempts
        .iter()
        .map(|a| {
            (
                a["provider"].as_str().unwrap(),
                a["reason"].as_str().unwrap(),
                a["outcome"].as_str().unwrap(),
                a["status"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("primary", "first", "http_error", 503),
            ("primary", "retry", "http_error", 503),
            ("backup", "fallback", "ok", 200)
        ]
    );
    assert_eq!(attempts[2]["fallback_from"], "primary");
    assert!(attempts[1]["backoff_ms"].as_f64().unwrap() >= 0.0);
    assert_eq!(attempts[0]["key_label"], "main");
    assert!(attempts[0]["error"].as_str().unwrap().contains("503"));
    assert_eq!(detail["provider"], "backup");
    assert_eq!(detail["fallback"], true);
    assert_eq!(detail["correlation_id"], "trace-history-1");
    assert!(detail["cost_usd"].is_null(), "unknown price: null, not zero");
    assert!(detail["usage"]["output_tokens"].as_i64().unwrap() > 0, "tokens are still recorded");

    let listed = gw.admin("/admin/requests?correlation_id=trace-history-1").await;
    assert_eq!(listed["requests"].as_array().unwrap().len(), 1);
    assert_eq!(listed["requests"][0]["id"], id.as_str());
    let listed = gw.admin("/admin/requests?fallback=true&provider=primary").await;
    assert_eq!(listed["requests"].as_array().unwrap().len(), 1);
    // Without a caller's id, a request's correlation id is its own id.
    let own = http().post(gw.url("/v1/messages")).json(&messages("no-price-model", false)).send().await.unwrap();
    let own_id = request_id(&own);
    own.bytes().await.unwrap();
    gw.recorded(2).await;
    let listed = gw.admin(&format!("/admin/requests?correlation_id={own_id}")).await;
    let ids: Vec<&str> = listed["requests"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(ids, [own_id.as_str()]);
    let listed = gw.admin(&format!("/admin/requests?correlation_id={id}")).await;
    assert!(listed["requests"].as_array().unwrap().is_empty(), "its correlation id is the caller's, not its id");
    // An outcome history never records is refused, not answered with nothing.
    let listed = gw.admin("/admin/requests?outcome=ok").await;
    assert_eq!(listed["requests"].as_array().unwrap().len(), 2);
    let bogus = http().get(gw.url("/admin/requests?outcome=cancelled")).bearer_auth(ADMIN_TOKEN).send().await.unwrap();
    assert_eq!(bogus.status(), 400);
    let body: Value = bogus.json().await.unwrap();
    assert_eq!(body["error"]["code"], "bad_outcome");
}

#[tokio::test]
async fn refused_and_canceled_requests_are_on_record_too() {
    let hung = sim("hung", Script::always(Fault::Hang)).await;
    let config = ConfigText::new().provider(&hung, "openai", &["m"]);
    let gw = TestGateway::start(config.build(), keys_for(&["hung"])).await;
    let bad = http().post(gw.url("/v1/chat/completions")).body("{oops").send().await.unwrap();
    assert_eq!(bad.status(), 400);
    let request = http().post(gw.url("/v1/chat/completions")).json(&chat("m", false)).send();
    assert!(tokio::time::timeout(Duration::from_millis(100), request).await.is_err());
    assert_eq!(gw.recorded(2).await, 2);
    let page = gw.admin("/admin/requests").await;
    let outcomes: Vec<&str> =
        page["requests"].as_array().unwrap().iter().map(|r| r["outcome"].as_str().unwrap()).collect();
    assert_eq!(outcomes, ["canceled", "rejected"]);
    let canceled = gw.admin(&format!("/admin/requests/{}", page["requests"][0]["id"].as_str().unwrap())).await;
    assert_eq!(canceled["attempts"][0]["outcome"], "canceled");
    let rejected = &page["requests"][1];
    assert_eq!(rejected["error_code"], "invalid_json");
}

#[tokio::test]
async fn filters_are_data_not_sql_and_the_admin_api_needs_its_token() {
    let p = sim("p", Script::ok()).await;
    let gw = TestGateway::start(ConfigText::new().provider(&p, "openai", &["m"]).build(), keys_for(&["p"])).await;
    gw.post("/v1/chat/completions", &chat("m", false)).await.bytes().await.unwrap();
    gw.recorded(1).await;
    for hostile in ["x' OR '1'='1", "p'; DROP TABLE requests; --", "%", "\"); DELETE FROM attempts; --"] {
        let q: String = url_encode(hostile);
        let page = gw.admin(&format!("/admin/requests?provider={q}&model={q}&correlation_id={q}")).await;
        assert_eq!(page["requests"].as_array().unwrap().len(), 0, "{hostile}");
    }
    assert_eq!(gw.store.count(CountTable::Requests).await.unwrap(), 1);
    assert_eq!(gw.store.count(CountTable::Attempts).await.unwrap(), 1);

    let r = http().get(gw.url("/admin/requests")).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let r = http().get(gw.url("/admin/requests")).bearer_auth("wrong").send().await.unwrap();
    assert_eq!(r.status(), 401);
    let r = http().get(gw.url("/admin/requests?cursor=nonsense")).bearer_auth(ADMIN_TOKEN).send().await.unwrap();
    assert_eq!(r.status(), 400);
}

fn url_encode(text: &str) -> String {
    text.bytes()
        .map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect()
}

#[tokio::test]
async fn spend_sums_tokens_and_cost_per_provider_and_model() {
    let p = sim("p", Script::ok()).await;
    let config = ConfigText::new().provider(&p, "openai", &["gpt-4o-mini", "mystery-model"]);
    let gw = TestGateway::start(config.build(), keys_for(&["p"])).await;
    for model in ["gpt-4o-mini", "gpt-4o-mini", "mystery-model"] {
        gw.post("/v1/chat/completions", &chat(model, false)).await.bytes().await.unwrap();
    }
    gw.recorded(3).await;
    let spend = gw.admin("/admin/spend?bucket=hour&since=1h").await;
    let rows = spend["rows"].as_array().unwrap();
    let mini = rows.iter().find(|r| r["model"] == "gpt-4o-mini").unwrap();
    assert_eq!(mini["requests"], 2);
    assert_eq!(mini["output_tokens"], 10);
    let expected = (mini["input_tokens"].as_f64().unwrap() * 0.15 + 10.0 * 0.60) / 1e6;
    assert!((mini["cost_usd"].as_f64().unwrap() - expected).abs() < 1e-12);
    let mystery = rows.iter().find(|r| r["model"] == "mystery-model").unwrap();
    assert!(mystery["cost_usd"].is_null());
    assert!((spend["totals"]["today_usd"].as_f64().unwrap() - expected).abs() < 1e-12);
    // The default chart (by day, 30 days) gives its totals from its own rows: the same.
    let by_day = gw.admin("/admin/spend").await;
    assert_eq!(by_day["totals"], spend["totals"], "{by_day}");
}

#[tokio::test]
async fn bodies_are_stored_only_when_asked_and_truncated() {
    let p = sim("p", Script::ok()).await;
    let config =
        ConfigText::new().raw("[history]\nstore_bodies = true\nbody_limit = 40").provider(&p, "openai", &["m"]);
    let gw = TestGateway::start(config.build(), keys_for(&["p"])).await;
    let r = gw.post("/v1/chat/completions", &chat("m", false)).await;
    let (_, detail) = recorded_detail(&gw, r, 1).await;
    assert_eq!(detail["request_body"].as_str().unwrap().len(), 40);
    assert_eq!(detail["response_body"].as_str().unwrap().len(), 40);

    let q = sim("q", Script::ok()).await;
    let gw = TestGateway::start(ConfigText::new().provider(&q, "openai", &["m"]).build(), keys_for(&["q"])).await;
    let r = gw.post("/v1/chat/completions", &chat("m", false)).await;
    assert!(recorded_detail(&gw, r, 1).await.1["request_body"].is_null());
}

#[tokio::test]
async fn each_request_says_what_the_cache_did_and_hits_count_what_they_saved() {
    let p = sim("p", Script::ok()).await;
    // A cache on `gpt-4o-mini` (priced), none on `mystery-model`.
    let config = ConfigText::new()
        .provider(&p, "openai", &["gpt-4o-mini", "mystery-model"])
        .route("gpt-4o-mini", &["p"])
        .raw("policy = { cache = { ttl = \"10m\" } }")
        .route("mystery-model", &["p"]);
    let gw = TestGateway::start(config.build(), keys_for(&["p"])).await;
    let deterministic =
        |model: &str| json!({ "model": model, "temperature": 0, "messages": [{ "role": "user", "content": "hi" }] });
    let sampled =
        json!({ "model": "gpt-4o-mini", "temperature": 0.7, "messages": [{ "role": "user", "content": "hi" }] });
    let mut ids = Vec::new();
    for body in [deterministic("gpt-4o-mini"), deterministic("gpt-4o-mini"), sampled, deterministic("mystery-model")] {
        let r = gw.post("/v1/chat/completions", &body).await;
        ids.push(request_id(&r));
        r.bytes().await.unwrap();
        gw.cache.flush().await;
    }
    assert_eq!(p.calls(), 3, "the second was answered from the cache");
    gw.recorded(4).await;
    let mut rows = Vec::new();
    for id in &ids {
        rows.push(gw.admin(&format!("/admin/requests/{id}")).await);
    }
    let statuses: Vec<&Value> = rows.iter().map(|r| &r["cache"]).collect();
    assert_eq!(statuses, [&json!("miss"), &json!("hit"), &json!("bypass"), &Value::Null]);
    // The hit cost nothing and saved what the first answer costs at today's prices.
    let (first, hit) = (&rows[0], &rows[1]);
    let cost = first["cost_usd"].as_f64().unwrap();
    assert!(cost > 0.0, "{first}");
    assert_eq!((&hit["cost_usd"], &hit["attempts"], &hit["provider"]), (&json!(0.0), &json!([]), &json!("p")));
    assert!((hit["saved_usd"].as_f64().unwrap() - cost).abs() < 1e-12, "{hit}");
    assert!(first["saved_usd"].is_null() && rows[3]["saved_usd"].is_null());

    // The list says the same, and filters on it.
    let page = gw.admin("/admin/requests").await;
    let listed: Vec<&Value> = page["requests"].as_array().unwrap().iter().map(|r| &r["cache"]).collect();
    assert_eq!(listed, [&Value::Null, &json!("bypass"), &json!("hit"), &json!("miss")], "newest first");
    let hits = gw.admin("/admin/requests?cache=hit").await;
    let hit_ids: Vec<&str> = hits["requests"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(hit_ids, [ids[1].as_str()]);
    let misses = gw.admin("/admin/requests?cache=miss&provider=p").await;
    assert_eq!(misses["requests"].as_array().unwrap().len(), 1);
    let bad = http().get(gw.url("/admin/requests?cache=maybe")).bearer_auth(ADMIN_TOKEN).send().await.unwrap();
    assert_eq!(bad.status(), 400);

    // The spend sums what the hits saved, apart from what was spent.
    let spend = gw.admin("/admin/spend?bucket=hour&since=1h").await;
    let mini = spend["rows"].as_array().unwrap().iter().find(|r| r["model"] == "gpt-4o-mini").unwrap();
    assert_eq!(mini["requests"], 3);
    assert!((mini["saved_usd"].as_f64().unwrap() - cost).abs() < 1e-12, "{mini}");
    assert!((spend["totals"]["saved_today_usd"].as_f64().unwrap() - cost).abs() < 1e-12, "{spend}");
    let spent = spend["totals"]["today_usd"].as_f64().unwrap();
    assert!(spent > cost && spent < 3.0 * cost, "the hit is not spend: {spend}");
}
