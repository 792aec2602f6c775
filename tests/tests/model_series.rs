//! A wildcard provider takes any model name a client makes up: the
//! statistics and Prometheus series it keeps per model are bounded, with
//! the names beyond the bound counted together as `other`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;

use futures_util::stream::{self, StreamExt};
use serde_json::json;
use switchyard_core::history::{AttemptOutcome, AttemptRecord, Reason, RequestOutcome, RequestRecord};
use switchyard_core::telemetry::Telemetry;
use switchyard_core::telemetry::{MAX_MODELS, OTHER_MODEL};
use switchyard_sim::{Script, SimProvider};
use switchyard_tests::{http, keys_for, ConfigText, TestGateway};

/// Distinct model names sent through the gateway: several times the bound.
const SENT: usize = 4 * MAX_MODELS;

/// The model labels `/metrics` shows for `provider`, per metric family.
fn model_labels(text: &str, provider: &str) -> BTreeSet<String> {
    let lines = text.lines().map(|l| Ok(l.to_string()));
    let scrape = prometheus_parse::Scrape::parse(lines).unwrap();
    scrape
        .samples
        .iter()
        .filter(|s| s.labels.get("provider") == Some(provider))
        .filter_map(|s| s.labels.get("model").map(str::to_string))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn made_up_model_names_beyond_the_bound_count_as_other() {
    let p = SimProvider::start("wild", Script::ok()).await.unwrap();
    let config = ConfigText::new().raw("[server]\nrate_limit_per_minute = 100000").provider(&p, "openai", &["*"]);
    let gw = TestGateway::start(config.build(), keys_for(&["wild"])).await;
    let statuses: Vec<u16> = stream::iter(0..SENT)
        .map(|i| {
            let gw = &gw;
            async move {
                let body =
                    json!({ "model": format!("made-up-{i}"), "messages": [{ "role": "user", "content": "hi" }] });
                let r = gw.post("/v1/chat/completions", &body).await;
                let status = r.status().as_u16();
                r.bytes().await.unwrap();
                status
            }
        })
        .buffer_unordered(8)
        .collect()
        .await;
    assert!(statuses.iter().all(|s| *s == 200), "every made-up name is served");

    let text = http().get(gw.url("/metrics")).send().await.unwrap().text().await.unwrap();
    let labels = model_labels(&text, "wild");
    assert!(labels.contains(OTHER_MODEL), "an `other` series: {labels:?}");
    assert_eq!(labels.len(), MAX_MODELS + 1, "the bound and `other`");
    let others = text
        .lines()
        .find(|l| l.starts_with("switchyard_attempts_total{") && l.contains("model=\"other\""))
        .unwrap_or_else(|| panic!("attempts by `other`: {text}"));
    let counted: f64 = others.rsplit(' ').next().unwrap().parse().unwrap();
    assert_eq!(counted as usize, SENT - MAX_MODELS, "every name beyond the bound is counted: {others}");

    let providers = gw.admin("/admin/providers").await;
    let models = providers[0]["models"].as_array().unwrap();
    assert_eq!(models.len(), MAX_MODELS + 1, "statistics keep the bound and `other`");
    assert!(models.iter().any(|m| m["model"] == OTHER_MODEL));
}

fn finished(provider: &str, model: &str, at_ms: i64) -> RequestRecord {
    let usage = Default::default();
    RequestRecord {
        id: "r".into(),
        correlation_id: "c".into(),
        started_at_ms: at_ms,
        finished_at_ms: at_ms,
        user_agent: None,
        endpoint: "/v1/chat/completions".into(),
        model: Some(model.into()),
        streamed: false,
        outcome: RequestOutcome::Ok,
        status: Some(200),
        provider: Some(provider.into()),
        provider_model: Some(model.into()),
        fallback: false,
        duration_ms: 12.0,
        ttft_ms: None,
        usage,
        cost_usd: Some(0.0001),
        error_code: None,
        error: None,
        request_body: None,
        response_body: None,
        attempts: vec![AttemptRecord {
            seq: 1,
            provider: provider.into(),
            key_label: None,
            model: model.into(),
            reason: Reason::First,
            fallback_from: None,
            started_at_ms: at_ms,
            offset_ms: 0.0,
            timeout_ms: None,
            backoff_ms: 0.0,
            duration_ms: Some(12.0),
            ttfb_ms: Some(5.0),
            ttft_ms: Some(6.0),
            status: Some(200),
            outcome: AttemptOutcome::Ok,
            retry_after_ms: None,
            breaker_state: None,
            error: None,
            usage,
        }],
        translations: Vec::new(),
        cache: None,
        saved_usd: None,
        dropped: Vec::new(),
        instance: None,
        routing: Vec::new(),
        member: None,
        session: None,
        turn: None,
        trace_id: None,
        device: None,
    }
}

/// 2026-01-01, on a minute.
const START_MS: i64 = 1_767_225_600_000;

/// Resident memory of this process, in bytes (Linux only).
fn resident() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// 100,000 made-up names over ten minutes, fed straight to the telemetry:
/// what it keeps stays at the bound. Memory is measured where
/// the platform says (run alone to read it:
/// `cargo test -p switchyard-tests --test model_series -- --nocapture hundred_thousand`).
#[test]
fn a_hundred_thousand_names_keep_memory_flat() {
    let telemetry = Telemetry::new(None);
    let before = resident();
    for i in 0..100_000i64 {
        telemetry.request_finished(&finished("wild", &format!("made-up-{i}"), START_MS + i * 6));
    }
    let after = resident();
    let text = telemetry.metrics.encode();
    assert_eq!(model_labels(&text, "wild").len(), MAX_MODELS + 1);
    let tracked = telemetry.stats.with("wild", |s| s.models().count());
    assert_eq!(tracked, MAX_MODELS + 1);
    if let (Some(before), Some(after)) = (before, after) {
        let grown = after.saturating_sub(before);
        eprintln!("resident memory grew by {:.1} MiB for 100,000 names", grown as f64 / (1024.0 * 1024.0));
        // Some 7 MiB when run alone (2 MiB for the names kept, the minutes
        // of `other` and of the provider's own, the allocator's slack), not
        // the 2.8 GB the names took unbounded. The bound leaves room for
        // the test beside this one, in the same process.
        assert!(grown < 64 * 1024 * 1024, "grew by {grown} bytes");
    }
}
