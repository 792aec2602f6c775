//! The response cache end to end: repeated deterministic requests answered
//! from SQLite without an upstream call, in the form the client asks for;
//! stale answers and static fallbacks when the chain fails; the cache
//! across a restart and past a damaged row.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use serde_json::{json, Value};
use switchyard_sim::{Fault, Script, SimProvider};
use switchyard_tests::{http, keys_for, request_id, ConfigText, TestGateway};

const CACHE: &str = "[policy]\ncache = { ttl = \"10m\" }";

async fn sim(name: &str, script: Script) -> SimProvider {
    SimProvider::start(name, script).await.unwrap()
}

/// A gateway with one OpenAI provider `p` for `m` (and Anthropic `c` on the
/// same fake, and `t`: an Anthropic client's model served by translation).
async fn gateway(script: Script, policy: &str) -> (SimProvider, TestGateway) {
    let p = sim("p", script).await;
    let config = ConfigText::new().raw(policy).both_kinds(&p, &["m", "t"], &["c"]);
    let gw = TestGateway::start(config.build(), keys_for(&["p", "p-an"])).await;
    (p, gw)
}

fn chat(stream: bool, temperature: f64) -> Value {
    json!({ "model": "m", "stream": stream, "temperature": temperature,
            "messages": [{ "role": "user", "content": "hi" }] })
}

fn messages(model: &str, stream: bool) -> Value {
    json!({ "model": model, "stream": stream, "temperature": 0, "max_tokens": 32,
            "messages": [{ "role": "user", "content": "hi" }] })
}

fn header<'a>(r: &'a reqwest::Response, name: &str) -> &'a str {
    r.headers().get(name).map_or("", |v| v.to_str().unwrap())
}

/// Status, cache header and body of a chat request.
async fn ask(gw: &TestGateway, path: &str, body: &Value) -> (u16, String, String) {
    let r = gw.post(path, body).await;
    let (status, cache) = (r.status().as_u16(), header(&r, "x-switchyard-cache").to_string());
    (status, cache, r.text().await.unwrap())
}

/// The text of a Chat answer, whole or streamed.
fn chat_text(answer: &str) -> String {
    if let Ok(body) = serde_json::from_str::<Value>(answer) {
        return body["choices"][0]["message"]["content"].as_str().unwrap_or_default().to_string();
    }
    data(answer).iter().filter_map(|e| e["choices"][0]["delta"]["content"].as_str().map(str::to_string)).collect()
}

/// The text of a Messages answer, whole or streamed.
fn anthropic_text(answer: &str) -> String {
    if let Ok(body) = serde_json::from_str::<Value>(answer) {
        return body["content"].as_array().into_iter().flatten().filter_map(|b| b["text"].as_str()).collect();
    }
    data(answer).iter().filter_map(|e| e["delta"]["text"].as_str().map(str::to_string)).collect()
}

/// The JSON `data:` payloads of an event stream.
fn data(stream: &str) -> Vec<Value> {
    stream
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .collect()
}

#[tokio::test]
async fn a_repeated_deterministic_request_is_answered_once_upstream() {
    let (p, gw) = gateway(Script::ok(), CACHE).await;
    let first = gw.post("/v1/chat/completions", &chat(false, 0.0)).await;
    assert_eq!((first.status().as_u16(), header(&first, "x-switchyard-cache")), (200, "miss"));
    let first_body = first.text().await.unwrap();
    gw.cache.flush().await;
    let second = gw.post("/v1/chat/completions", &chat(false, 0.0)).await;
    assert_eq!((second.status().as_u16(), header(&second, "x-switchyard-cache")), (200, "hit"));
    assert!(header(&second, "age").parse::<u64>().is_ok(), "a hit says its age");
    assert_eq!(header(&second, "content-type"), "application/json");
    assert_eq!(second.text().await.unwrap(), first_body, "the same answer, byte for byte");
    assert_eq!(p.calls(), 1, "the second answer came from the cache");
    // Another spelling of the same question: keys sorted, whitespace trimmed, `user` dropped.
    let respelled = json!({ "messages": [{ "content": "  hi ", "role": "user" }], "temperature": 0,
                            "user": "someone", "model": "m" });
    assert_eq!(ask(&gw, "/v1/chat/completions", &respelled).await.1, "hit");
    assert_eq!(p.calls(), 1);
}

#[tokio::test]
async fn a_stored_answer_is_replayed_as_a_stream_and_a_stored_stream_as_json() {
    let (p, gw) = gateway(Script::ok().stream(3, Duration::ZERO), CACHE).await;
    // Stored as JSON, asked for as a stream.
    let (_, cache, whole) = ask(&gw, "/v1/chat/completions", &chat(false, 0.0)).await;
    assert_eq!(cache, "miss");
    gw.cache.flush().await;
    let r = gw.post("/v1/chat/completions", &chat(true, 0.0)).await;
    assert_eq!((header(&r, "x-switchyard-cache"), header(&r, "content-type")), ("hit", "text/event-stream"));
    let streamed = r.text().await.unwrap();
    assert!(streamed.trim_end().ends_with("data: [DONE]"), "{streamed}");
    assert_eq!(chat_text(&streamed), chat_text(&whole));
    assert!(!chat_text(&whole).is_empty());
    // Stored as a stream (an Anthropic one), asked for as JSON.
    let (_, cache, stream) = ask(&gw, "/v1/messages", &messages("c", true)).await;
    assert_eq!(cache, "miss");
    gw.cache.flush().await;
    let r = gw.post("/v1/messages", &messages("c", false)).await;
    assert_eq!((header(&r, "x-switchyard-cache"), header(&r, "content-type")), ("hit", "application/json"));
    let folded: Value = r.json().await.unwrap();
    assert_eq!(folded["type"], "message");
    assert_eq!(anthropic_text(&folded.to_string()), anthropic_text(&stream));
    assert_eq!(p.calls(), 2);
}

#[tokio::test]
async fn a_translated_answer_is_stored_in_the_clients_format() {
    let (p, gw) = gateway(Script::ok().stream(3, Duration::ZERO), CACHE).await;
    // An Anthropic client, an OpenAI provider: the stream is translated, and stored so.
    let (status, cache, stream) = ask(&gw, "/v1/messages", &messages("t", true)).await;
    assert_eq!((status, cache.as_str()), (200, "miss"));
    assert!(stream.contains("event: message_stop"), "{stream}");
    gw.cache.flush().await;
    for streamed in [true, false] {
        let (status, cache, again) = ask(&gw, "/v1/messages", &messages("t", streamed)).await;
        assert_eq!((status, cache.as_str()), (200, "hit"));
        assert_eq!(anthropic_text(&again), anthropic_text(&stream));
        assert!(!anthropic_text(&again).is_empty());
    }
    assert_eq!(p.calls(), 1);
}

#[tokio::test]
async fn refresh_and_off_bypass_the_cache_and_a_sampled_request_is_not_cached() {
    let (p, gw) = gateway(Script::ok(), CACHE).await;
    assert_eq!(ask(&gw, "/v1/chat/completions", &chat(false, 0.0)).await.1, "miss");
    gw.cache.flush().await;
    for directive in ["refresh", "off"] {
        let r = http()
            .post(gw.url("/v1/chat/completions"))
            .header("x-switchyard-cache", directive)
            .json(&chat(false, 0.0))
            .send()
            .await
            .unwrap();
        assert_eq!((r.status().as_u16(), header(&r, "x-switchyard-cache")), (200, "bypass"), "{directive}");
    }
    assert_eq!(p.calls(), 3, "refresh and off both went upstream");
    gw.cache.flush().await;
    assert_eq!(ask(&gw, "/v1/chat/completions", &chat(false, 0.0)).await.1, "hit");
    for _ in 0..2 {
        assert_eq!(ask(&gw, "/v1/chat/completions", &chat(false, 0.7)).await.1, "bypass");
        gw.cache.flush().await;
    }
    assert_eq!(p.calls(), 5, "temperature 0.7 is asked upstream every time");
}

#[tokio::test]
async fn an_expired_answer_stands_in_only_when_the_chain_fails() {
    let policy = "[policy]\nbackoff_base = \"1ms\"\nbackoff_cap = \"2ms\"\ncache = { ttl = \"100ms\", stale = \"1h\" }";
    let (p, gw) = gateway(Script::ok(), policy).await;
    let (_, _, first) = ask(&gw, "/v1/chat/completions", &chat(false, 0.0)).await;
    gw.cache.flush().await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    // Expired, and the provider answers: the live answer, stored anew.
    assert_eq!(ask(&gw, "/v1/chat/completions", &chat(false, 0.0)).await.1, "miss");
    assert_eq!(p.calls(), 2);
    gw.cache.flush().await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    p.set_script(Script::always(Fault::status(503)));
    let r = gw.post("/v1/chat/completions", &chat(false, 0.0)).await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-switchyard-cache"), "stale");
    assert_eq!(header(&r, "warning"), "110 - \"Response is Stale\"");
    let id = request_id(&r);
    assert_eq!(chat_text(&r.text().await.unwrap()), chat_text(&first));
    assert!(p.calls() > 2, "the chain was tried first");
    gw.recorded(3).await;
    let detail = gw.admin(&format!("/admin/requests/{id}")).await;
    assert_eq!((&detail["outcome"], &detail["cache"]), (&json!("ok"), &json!("stale")), "{detail}");
    let attempts = detail["attempts"].as_array().unwrap();
    assert!(!attempts.is_empty() && attempts.iter().all(|a| a["status"] == 503), "{detail}");
}

#[tokio::test]
async fn a_failed_chain_answers_with_the_routes_fallback_or_a_problem_document() {
    let p = sim("p", Script::always(Fault::status(503))).await;
    let config = ConfigText::new()
        .raw("[policy]\nbackoff_base = \"1ms\"\nbackoff_cap = \"2ms\"")
        .provider(&p, "openai", &["m", "n"])
        .route("m", &["p"])
        .raw("fallback_response = { status = 503, body = '{\"error\":{\"message\":\"try later\"}}' }")
        .route("n", &["p"]);
    let gw = TestGateway::start(config.build(), keys_for(&["p"])).await;
    let r = gw.post("/v1/chat/completions", &chat(false, 0.0)).await;
    assert_eq!((r.status().as_u16(), header(&r, "x-fallback-response")), (503, "true"));
    assert_eq!(header(&r, "content-type"), "application/json");
    assert_eq!(r.json::<Value>().await.unwrap(), json!({ "error": { "message": "try later" } }));
    let mut other = chat(false, 0.0);
    other["model"] = json!("n");
    let r = gw.post("/v1/chat/completions", &other).await;
    let id = request_id(&r);
    assert_eq!((r.status().as_u16(), header(&r, "x-fallback-response")), (502, "true"));
    assert_eq!(header(&r, "content-type"), "application/problem+json");
    let problem: Value = r.json().await.unwrap();
    assert_eq!(problem["type"], "/problems/all_providers_failed");
    assert_eq!(problem["request_id"], id.as_str());
    assert_eq!(problem["error"]["code"], "all_providers_failed", "still OpenAI's error shape: {problem}");
}

#[tokio::test]
async fn a_hit_is_on_record_as_answered_with_no_attempts_and_no_cost() {
    let (_p, gw) = gateway(Script::ok(), CACHE).await;
    ask(&gw, "/v1/chat/completions", &chat(false, 0.0)).await;
    gw.cache.flush().await;
    let r = gw.post("/v1/chat/completions", &chat(false, 0.0)).await;
    assert_eq!(header(&r, "x-switchyard-cache"), "hit");
    let id = request_id(&r);
    r.bytes().await.unwrap();
    gw.recorded(2).await;
    let detail = gw.admin(&format!("/admin/requests/{id}")).await;
    assert_eq!((&detail["outcome"], &detail["status"]), (&json!("ok"), &json!(200)), "{detail}");
    assert_eq!(detail["attempts"], json!([]));
    assert_eq!((&detail["cost_usd"], &detail["cache"]), (&json!(0.0), &json!("hit")));
    let stats = gw.cache.counters().snapshot();
    assert_eq!((stats.hits, stats.misses), (1, 1));
}

#[tokio::test]
async fn the_cache_survives_a_restart() {
    let (p, gw) = gateway(Script::ok(), CACHE).await;
    let (_, _, first) = ask(&gw, "/v1/chat/completions", &chat(false, 0.0)).await;
    let gw = gw.restart(keys_for(&["p", "p-an"])).await;
    let (status, cache, again) = ask(&gw, "/v1/chat/completions", &chat(false, 0.0)).await;
    assert_eq!((status, cache.as_str()), (200, "hit"));
    assert_eq!(again, first);
    assert_eq!(p.calls(), 1);
}

#[tokio::test]
async fn a_damaged_cache_row_is_a_miss_not_an_error() {
    let (p, gw) = gateway(Script::ok(), CACHE).await;
    ask(&gw, "/v1/chat/completions", &chat(false, 0.0)).await;
    gw.cache.flush().await;
    let file = gw.config_file().with_file_name("switchyard.cache.db");
    let conn = rusqlite::Connection::open(&file).unwrap();
    assert_eq!(conn.execute("UPDATE entries SET body = x'00ff00ff'", []).unwrap(), 1);
    drop(conn);
    let (status, cache, body) = ask(&gw, "/v1/chat/completions", &chat(false, 0.0)).await;
    assert_eq!((status, cache.as_str()), (200, "miss"), "{body}");
    assert_eq!(p.calls(), 2);
    gw.cache.flush().await;
    assert_eq!(ask(&gw, "/v1/chat/completions", &chat(false, 0.0)).await.1, "hit", "stored again");
    assert_eq!(gw.cache.counters().snapshot().corrupt, 1);
}

#[tokio::test]
async fn hits_and_misses_are_metrics() {
    let (_p, gw) = gateway(Script::ok(), CACHE).await;
    for _ in 0..3 {
        ask(&gw, "/v1/chat/completions", &chat(false, 0.0)).await;
        gw.cache.flush().await;
    }
    ask(&gw, "/v1/chat/completions", &chat(false, 0.7)).await;
    let text = http().get(gw.url("/metrics")).send().await.unwrap().text().await.unwrap();
    for line in [
        "switchyard_cache_requests_total{status=\"hit\"} 2",
        "switchyard_cache_requests_total{status=\"miss\"} 1",
        "switchyard_cache_requests_total{status=\"bypass\"} 1",
        "switchyard_cache_entries 1",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
    }
    // A second scrape counts nothing twice.
    let again = http().get(gw.url("/metrics")).send().await.unwrap().text().await.unwrap();
    assert!(again.lines().any(|l| l == "switchyard_cache_requests_total{status=\"hit\"} 2"), "{again}");
}
