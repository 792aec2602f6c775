//! Waiting for capacity instead of failing, end to end: a provider at its
//! concurrency cap queues requests in FIFO order within their deadlines,
//! refuses at once one that cannot be served in time, forgets a client that
//! left, goes on down the chain when the attempt it waited for fails, and a
//! key that allows one request at a time never serves two.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use serde_json::{json, Value};
use switchyard_sim::{Fault, Script, SimProvider};
use switchyard_tests::{http, keys_for, ConfigText, TestGateway};

const POLICY: &str = "[policy]\nmin_fallback_budget = \"100ms\"";

async fn gateway(latency: Duration, provider_policy: &str) -> (SimProvider, TestGateway) {
    let p = SimProvider::start("p", Script::ok().latency(latency)).await.unwrap();
    let config = ConfigText::new().raw(POLICY).provider(&p, "openai", &["m"]).raw(provider_policy);
    let gw = TestGateway::start(config.build(), keys_for(&["p"])).await;
    (p, gw)
}

fn chat() -> Value {
    json!({ "model": "m", "messages": [{ "role": "user", "content": "hi" }] })
}

/// A chat request with a deadline of `ms`; its status and how long it took.
async fn send(gw: &TestGateway, ms: u64) -> (u16, Duration, String) {
    let started = Instant::now();
    let r = http()
        .post(gw.url("/v1/chat/completions"))
        .header("x-switchyard-timeout-ms", ms.to_string())
        .json(&chat())
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (status, started.elapsed(), text)
}

fn queue_stats(gw: &TestGateway) -> switchyard_core::policy::QueueStats {
    queue_stats_of(gw, "p")
}

fn queue_stats_of(gw: &TestGateway, provider: &str) -> switchyard_core::policy::QueueStats {
    gw.gateway.live().provider(provider).unwrap().capacity().counters().snapshot()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_wait_their_turn_and_one_that_cannot_make_it_fails_fast() {
    let slow = Duration::from_millis(300);
    let (p, gw) = gateway(slow, "policy = { max_concurrency = 1, max_queue = 8 }").await;
    // One on its own first: the queue learns how long a request holds its slot.
    assert_eq!(send(&gw, 5000).await.0, 200);
    let started = Instant::now();
    let four = join_all((0..4).map(|_| send(&gw, 5000))).await;
    let took = started.elapsed();
    assert!(four.iter().all(|(status, _, _)| *status == 200), "{four:?}");
    assert!(took >= Duration::from_millis(1150) && took < Duration::from_secs(3), "served one after another: {took:?}");
    assert_eq!(p.calls(), 5);
    let stats = queue_stats(&gw);
    assert_eq!((stats.served, stats.depth, stats.in_use), (3, 0, 0), "{stats:?}");

    // Three ahead (one served, two waiting): a 500 ms deadline cannot be met.
    let ahead = tokio::spawn({
        let gw_url = gw.url("/v1/chat/completions");
        async move {
            join_all((0..3).map(|_| http().post(&gw_url).json(&chat()).send()))
                .await
                .into_iter()
                .map(|r| r.unwrap().status().as_u16())
                .collect::<Vec<_>>()
        }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let (status, took, body) = send(&gw, 500).await;
    assert_eq!(status, 503, "{body}");
    assert!(took < Duration::from_millis(200), "refused at once, not after waiting: {took:?}");
    assert!(body.contains("does not fit the deadline"), "{body}");
    assert_eq!(ahead.await.unwrap(), [200, 200, 200]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_leaves_the_queue_frees_its_place() {
    let (p, gw) = gateway(Duration::from_millis(300), "policy = { max_concurrency = 1, max_queue = 1 }").await;
    let first = tokio::spawn({
        let url = gw.url("/v1/chat/completions");
        async move { http().post(&url).json(&chat()).send().await.unwrap().status().as_u16() }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    // Waits in the only place in line, then gives up.
    let gone =
        http().post(gw.url("/v1/chat/completions")).timeout(Duration::from_millis(100)).json(&chat()).send().await;
    assert!(gone.is_err(), "the client gave up first");
    tokio::time::sleep(Duration::from_millis(20)).await;
    let stats = queue_stats(&gw);
    assert_eq!((stats.depth, stats.left), (0, 1), "{stats:?}");
    // The place is free again: the next one queues instead of being refused.
    let (status, _, body) = send(&gw, 5000).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(first.await.unwrap(), 200);
    assert_eq!(p.calls(), 2, "the one that left never reached the provider");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_that_allows_one_request_at_a_time_never_serves_two() {
    let latency = Duration::from_millis(20);
    let (p, gw) =
        gateway(latency, "policy = { max_queue = 64, max_queue_wait = \"10s\" }\nkeys = { max_concurrency = 1 }").await;
    let started = Instant::now();
    let all = join_all((0..50).map(|_| send(&gw, 20_000))).await;
    let took = started.elapsed();
    assert!(all.iter().all(|(status, _, _)| *status == 200), "{:?}", all.iter().find(|r| r.0 != 200));
    assert_eq!(p.calls(), 50);
    assert!(took >= latency * 50, "one at a time takes at least 50 latencies: {took:?}");
    // From the record: no attempt on the key starts before the one before it ended.
    gw.recorded(50).await;
    let page = gw.admin("/admin/requests?limit=100").await;
    let mut spans = Vec::new();
    for r in page["requests"].as_array().unwrap() {
        let detail = gw.admin(&format!("/admin/requests/{}", r["id"].as_str().unwrap())).await;
        for a in detail["attempts"].as_array().unwrap() {
            let start = a["started_at"].as_f64().unwrap();
            spans.push((start, start + a["duration_ms"].as_f64().unwrap()));
        }
    }
    assert_eq!(spans.len(), 50);
    spans.sort_by(|a, b| a.0.total_cmp(&b.0));
    for pair in spans.windows(2) {
        assert!(pair[1].0 + 1.0 >= pair[0].1, "two at once on one key: {pair:?}");
    }
    assert_eq!(queue_stats(&gw).leases, 0, "every lease was given back");
}

#[tokio::test]
async fn the_queue_is_in_the_metrics_the_provider_view_and_the_statistics() {
    let (_p, gw) = gateway(Duration::from_millis(100), "policy = { max_concurrency = 1, max_queue = 4 }").await;
    let two = join_all((0..2).map(|_| send(&gw, 5000))).await;
    assert!(two.iter().all(|r| r.0 == 200), "{two:?}");
    let text = http().get(gw.url("/metrics")).send().await.unwrap().text().await.unwrap();
    assert!(text.lines().any(|l| l == "switchyard_queue_depth{provider=\"p\"} 0"), "{text}");
    assert!(text.lines().any(|l| l == "switchyard_key_leases{provider=\"p\"} 0"), "{text}");
    let waited = text.lines().find_map(|l| l.strip_prefix("switchyard_queue_wait_seconds_total{provider=\"p\"} "));
    assert!(waited.and_then(|w| w.parse::<f64>().ok()).is_some_and(|w| w >= 0.05), "{text}");
    // And in the provider's view and its statistics, for the dashboard's card.
    let providers = gw.admin("/admin/providers").await;
    let stats = gw.admin("/admin/stats").await;
    for queue in [&providers[0]["queue"], &stats["providers"][0]["queue"]] {
        assert_eq!((&queue["depth"], &queue["max_queue"], &queue["in_flight"]), (&json!(0), &json!(4), &json!(0)));
        assert_eq!((&queue["max_concurrency"], &queue["leases"], &queue["served"]), (&json!(1), &json!(0), &json!(1)));
        assert!(queue["recent_wait_ms"].as_f64().is_some_and(|w| w >= 50.0), "the one that waited: {queue}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_attempt_that_fails_goes_on_down_the_chain() {
    let slow = Duration::from_millis(300);
    // `a` answers its first request, then fails; `b` answers. Each takes
    // one request at a time and queues the rest.
    let a =
        SimProvider::start("a", Script::always(Fault::status(503)).then_once(Fault::None).latency(slow)).await.unwrap();
    let b = SimProvider::start("b", Script::ok().latency(slow)).await.unwrap();
    let one_at_a_time = "policy = { max_concurrency = 1, max_queue = 4 }";
    let config = ConfigText::new()
        .raw("[policy]\nmin_fallback_budget = \"100ms\"\nmax_retries = 1\nbackoff_base = \"5ms\"\nbackoff_cap = \"10ms\"")
        .provider(&a, "openai", &["m"])
        .raw(one_at_a_time)
        .provider(&b, "openai", &["m"])
        .raw(one_at_a_time)
        .route("m", &["a", "b"]);
    let gw = TestGateway::start(config.build(), keys_for(&["a", "b"])).await;
    // The first takes `a`, the second `b`: the third waits in `a`'s queue
    // (the first in the chain, on a tie), and `a` fails it twice.
    let first = tokio::spawn({
        let url = gw.url("/v1/chat/completions");
        async move { http().post(&url).json(&chat()).send().await.unwrap().status().as_u16() }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let second = tokio::spawn({
        let url = gw.url("/v1/chat/completions");
        async move { http().post(&url).json(&chat()).send().await.unwrap().status().as_u16() }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let r = http()
        .post(gw.url("/v1/chat/completions"))
        .header("x-switchyard-timeout-ms", "5000")
        .json(&chat())
        .send()
        .await
        .unwrap();
    let (status, id) = (r.status().as_u16(), switchyard_tests::request_id(&r));
    let provider = r.headers().get("x-switchyard-provider").map(|v| v.to_str().unwrap().to_string());
    let body = r.text().await.unwrap();
    assert_eq!((status, provider.as_deref()), (200, Some("b")), "{body}");
    assert_eq!((first.await.unwrap(), second.await.unwrap()), (200, 200));
    assert_eq!((a.calls(), b.calls()), (3, 2));
    gw.recorded(3).await;
    let detail = gw.admin(&format!("/admin/requests/{id}")).await;
    let hops: Vec<(&str, &str)> = detail["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["provider"].as_str().unwrap(), a["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(hops, [("a", "first"), ("a", "retry"), ("b", "fallback")]);
    assert_eq!(queue_stats_of(&gw, "a").served, 1, "it waited in a's queue");
}
