//! The Grafana dashboard and the Prometheus alert rules shipped in
//! `deploy/` ask only for series the gateway exports: a metric renamed or
//! dropped in the code would otherwise leave a panel empty or an alert that
//! can never fire, and nothing would say so.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde_json::{json, Value};
use switchyard_sim::{Fault, Script, SimProvider};
use switchyard_tests::{http, ConfigText, TestGateway, ADMIN_TOKEN};

/// Retries off, so that a failed attempt falls back at once, a price on
/// each provider, so that cost is counted, and a budget, so that its
/// spend is exported.
const CONFIG: &str = "[policy]\nbackoff_base = \"1ms\"\nbackoff_cap = \"2ms\"\nmax_retries = 0\n\
[[prices]]\nprovider = \"primary\"\nmodel = \"*\"\ninput = 1\noutput = 2\n\
[[prices]]\nprovider = \"backup\"\nmodel = \"*\"\ninput = 1\noutput = 2\n\
[[budgets]]\nscope = \"all\"\nperiod = \"day\"\nlimit_usd = 100.0\naction = \"warn\"\n\
[server]\nrate_limit_per_minute = 100000\n";

fn deploy(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy").join(path)
}

/// Every `switchyard_` identifier in a PromQL expression, outside quoted
/// label values.
fn metric_names(expr: &str, into: &mut BTreeSet<String>) {
    for outside in expr.split('"').step_by(2) {
        identifiers(outside, into);
    }
}

fn identifiers(expr: &str, into: &mut BTreeSet<String>) {
    let is_start = |c: char| c.is_ascii_alphabetic() || c == '_' || c == ':';
    let is_part = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let mut rest = expr;
    while let Some(start) = rest.find(is_start) {
        let word = &rest[start..];
        let end = word.find(|c: char| !is_part(c)).unwrap_or(word.len());
        // An identifier only if it does not continue one (`x1switchyard_`).
        let joined = rest[..start].chars().next_back().is_some_and(is_part);
        if !joined && word[..end].starts_with("switchyard_") {
            into.insert(word[..end].to_string());
        }
        rest = &word[end..];
    }
}

/// Every string in the dashboard: panel `expr`s and the template
/// variables' queries, which name metrics too.
fn strings(v: &Value, into: &mut Vec<String>) {
    match v {
        Value::String(s) => into.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|v| strings(v, into)),
        Value::Object(o) => o.values().for_each(|v| strings(v, into)),
        _ => {}
    }
}

/// The `expr`s of a rules file: inline (`expr: a > 1`) or a block
/// (`expr: |` and the lines indented under it).
fn rule_exprs(yaml: &str) -> Vec<String> {
    let mut exprs = Vec::new();
    let mut lines = yaml.lines().peekable();
    while let Some(line) = lines.next() {
        let Some(value) = line.trim_start().strip_prefix("expr:") else { continue };
        let indent = line.len() - line.trim_start().len();
        let value = value.trim();
        if value.starts_with('|') || value.starts_with('>') {
            let mut block = String::new();
            while let Some(next) = lines.next_if(|l| l.trim().is_empty() || l.len() - l.trim_start().len() > indent) {
                block.push_str(next.trim());
                block.push('\n');
            }
            exprs.push(block);
        } else {
            exprs.push(value.trim_matches(|c| c == '\'' || c == '"').to_string());
        }
    }
    exprs
}

/// The metric names of every sample in Prometheus text (histograms as
/// their `_bucket`, `_sum` and `_count` series, as PromQL asks for them).
fn exported(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split(['{', ' ']).next().unwrap().to_string())
        .collect()
}

/// A gateway whose every family has a series: a fallback (the primary's
/// first answer is a 503), a hedge, a stream (time to first token), priced tokens,
/// a team member, and the cache, queue, breaker and history gauges that
/// `/metrics` sets when scraped.
async fn scrape() -> String {
    let p = SimProvider::start("primary", Script::ok().then_once(Fault::status(503))).await.unwrap();
    let b = SimProvider::start("backup", Script::ok().stream(3, std::time::Duration::from_millis(5))).await.unwrap();
    // A route whose slow first byte is hedged by the backup.
    let slow = SimProvider::start("slow", Script::always(Fault::SlowFirstByte(std::time::Duration::from_millis(400))))
        .await
        .unwrap();
    let config = ConfigText::new()
        .raw(CONFIG)
        .provider(&p, "openai", &["m"])
        .provider(&b, "openai", &["m", "h"])
        .provider(&slow, "openai", &["h"])
        .raw("[[routes]]\nmodel = \"h\"\nchain = [\"slow\", \"backup\"]\npolicy = { hedge_after = \"20ms\", hedge_max_share = 1.0 }");
    let keys = switchyard_core::secrets::MemoryStore::new()
        .with("primary", "main", "sk-p")
        .with("backup", "main", "sk-b")
        .with("slow", "main", "sk-s");
    let gw = TestGateway::start(config.build(), keys).await;

    let r = http().post(gw.url("/admin/members")).bearer_auth(ADMIN_TOKEN).json(&json!({ "name": "al" }));
    let member: Value = r.send().await.unwrap().json().await.unwrap();
    let key = member["key"].as_str().unwrap().to_string();
    for stream in [false, true, false] {
        let body = json!({ "model": "m", "stream": stream, "messages": [{ "role": "user", "content": "hi" }] });
        let r = http().post(gw.url("/v1/chat/completions")).bearer_auth(&key).json(&body).send().await.unwrap();
        assert_eq!(r.status(), 200);
        r.bytes().await.unwrap();
    }
    let body = json!({ "model": "h", "stream": true, "messages": [{ "role": "user", "content": "hi" }] });
    let r = http().post(gw.url("/v1/chat/completions")).bearer_auth(&key).json(&body).send().await.unwrap();
    assert_eq!((r.status().as_u16(), r.headers()["x-switchyard-provider"].to_str().unwrap()), (200, "backup"));
    r.bytes().await.unwrap();
    gw.recorded(4).await;
    http().get(gw.url("/metrics")).send().await.unwrap().text().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_grafana_dashboard_and_the_alert_rules_ask_only_for_exported_metrics() {
    let text = scrape().await;
    let have = exported(&text);
    assert!(have.contains("switchyard_fallbacks_total"), "the scrape is the full set:\n{text}");

    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(deploy("grafana/switchyard.json")).unwrap()).unwrap();
    let mut in_dashboard = Vec::new();
    strings(&dashboard, &mut in_dashboard);
    let rules = std::fs::read_to_string(deploy("prometheus/alerts.yml")).unwrap();
    let exprs = rule_exprs(&rules);
    assert!(exprs.len() >= 6, "every rule's expr is read: {exprs:?}");

    for (file, texts) in [("grafana/switchyard.json", in_dashboard), ("prometheus/alerts.yml", exprs)] {
        let mut used = BTreeSet::new();
        texts.iter().for_each(|t| metric_names(t, &mut used));
        assert!(used.len() >= 6, "{file}: metrics found: {used:?}");
        let missing: Vec<&String> = used.iter().filter(|m| !have.contains(*m)).collect();
        assert!(
            missing.is_empty(),
            "deploy/{file} uses metrics /metrics does not export: {missing:?}\nexported: {have:?}"
        );
    }
}

#[test]
fn metric_names_are_whole_identifiers() {
    let mut names = BTreeSet::new();
    metric_names(
        "histogram_quantile(0.9, sum by (le) (rate(switchyard_a_bucket{x=\"switchyard_no\"}[5m]))) / x_switchyard_b + switchyard_c",
        &mut names,
    );
    assert_eq!(names, BTreeSet::from(["switchyard_a_bucket".into(), "switchyard_c".into()]));
    let exprs = rule_exprs("  - alert: A\n    expr: switchyard_x == 2\n    for: 5m\n  - alert: B\n    expr: |\n      sum(switchyard_y)\n        > 1\n    for: 1m\n");
    assert_eq!(exprs, ["switchyard_x == 2", "sum(switchyard_y)\n> 1\n"]);
}
