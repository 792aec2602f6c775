//! OpenTelemetry traces end to end: the gateway exports to a real OTLP
//! collector (the official protobuf definitions decode what it gets), joins
//! the client's W3C trace, and names each attempt's span in the
//! `traceparent` the provider receives.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use serde_json::{json, Value};
use switchyard_sim::{Fault, Script, SimProvider};
use switchyard_tests::otlp::{Collector, Received};
use switchyard_tests::{http, keys_for, python, ConfigText, TestGateway};

const CLIENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";
/// One try per provider, fast: a failure falls back at once.
const POLICY: &str =
    "[policy]\nmax_retries = 0\nbackoff_base = \"1ms\"\nbackoff_cap = \"5ms\"\nmin_fallback_budget = \"100ms\"";

async fn sim(name: &str, script: Script) -> SimProvider {
    SimProvider::start(name, script).await.unwrap()
}

fn telemetry(collector: &Collector, extra: &str) -> String {
    // Batches leave 20 ms after their first span: a test waits no longer.
    format!("[telemetry]\nendpoint = \"{}\"\nschedule_delay_ms = 20\n{extra}\n", collector.endpoint())
}

async fn two(primary: Script, backup: Script, telemetry: &str) -> (SimProvider, SimProvider, TestGateway) {
    let p = sim("primary", primary).await;
    let b = sim("backup", backup).await;
    let config =
        ConfigText::new().raw(POLICY).raw(telemetry).provider(&p, "openai", &["m"]).provider(&b, "openai", &["m"]);
    let gw = TestGateway::start(config.build(), keys_for(&["primary", "backup"])).await;
    (p, b, gw)
}

async fn chat(gw: &TestGateway, body: Value, traceparent: Option<&str>) -> reqwest::Response {
    let mut request = http().post(gw.url("/v1/chat/completions")).json(&body).header("x-correlation-id", "corr-7");
    if let Some(tp) = traceparent {
        request = request.header("traceparent", tp).header("tracestate", "vendor=abc");
    }
    request.send().await.unwrap()
}

fn hi(stream: bool) -> Value {
    json!({ "model": "m", "stream": stream, "messages": [{ "role": "user", "content": "hi" }] })
}

fn by_kind(spans: &[Received], kind: i32) -> Vec<&Received> {
    let mut out: Vec<&Received> = spans.iter().filter(|s| s.kind == kind).collect();
    out.sort_by_key(|s| s.start_ns);
    out
}

const SERVER: i32 = 2;
const CLIENT: i32 = 3;

#[tokio::test]
async fn a_fallback_is_the_client_span_then_the_request_then_one_span_per_attempt() {
    let collector = Collector::http().await;
    let keyed = telemetry(&collector, "headers = { \"x-collector-key\" = \"team-key\" }");
    let (p, b, gw) = two(Script::always(Fault::status(503)), Script::ok(), &keyed).await;
    let traceparent = format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01");
    let r = chat(&gw, hi(false), Some(&traceparent)).await;
    assert_eq!(r.status(), 200);
    let request_id = switchyard_tests::request_id(&r);
    let answer: Value = r.json().await.unwrap();

    let spans = collector.wait_for(3).await;
    assert_eq!(spans.len(), 3, "{spans:#?}");
    assert_eq!(collector.headers()["x-collector-key"], "team-key", "the configured headers reach the collector");
    assert!(spans.iter().all(|s| s.trace_id == CLIENT_TRACE), "one trace, the client's");
    let server = by_kind(&spans, SERVER)[0];
    assert_eq!(server.parent_span_id, CLIENT_SPAN, "the request's span is the client's child");
    assert_eq!(server.name, "POST /v1/chat/completions");
    assert_eq!(server.attr("switchyard.correlation_id"), "corr-7");
    assert_eq!(server.attr("switchyard.request_id"), request_id.as_str());
    assert_eq!(server.attr("gen_ai.request.model"), "m");
    assert_eq!(server.attr("switchyard.outcome"), "ok");
    assert_eq!(server.attr("http.response.status_code"), 200);
    assert_eq!(server.resource["service.name"], "switchyard");
    assert!(server.resource["service.instance.id"].as_str().is_some_and(|s| !s.is_empty()));
    assert_eq!(server.scope, "switchyard");
    let fallback = server.event("switchyard.fallback").expect("the fallback is an event");
    assert_eq!(
        (fallback["switchyard.fallback.from"].as_str(), fallback["switchyard.fallback.to"].as_str()),
        (Some("primary"), Some("backup"))
    );
    assert!(fallback["switchyard.reason"].as_str().is_some_and(|r| r.contains("503")), "{fallback:?}");

    let attempts = by_kind(&spans, CLIENT);
    assert_eq!(attempts.len(), 2);
    for a in &attempts {
        assert_eq!(a.parent_span_id, server.span_id, "each attempt is the request's child");
        assert_eq!(a.name, "chat m");
        assert_eq!(a.attr("gen_ai.operation.name"), "chat");
        assert_eq!(a.attr("gen_ai.provider.name"), "openai");
        assert_eq!(a.attr("gen_ai.request.model"), "m");
        assert_eq!(a.attr("server.address"), "127.0.0.1");
        assert!(a.attr("switchyard.provider.key_label").is_string(), "the key's label, never the key");
        assert!(a.attributes.values().all(|v| !v.to_string().contains("sk-")), "no key on a span");
    }
    let (failed, served) = (attempts[0], attempts[1]);
    assert_eq!(failed.attr("switchyard.provider.name"), "primary");
    assert_eq!(failed.attr("server.port"), i64::from(p.addr().port()));
    assert_eq!((failed.attr("error.type"), failed.status), (&Value::from("503"), 2));
    assert_eq!(served.attr("switchyard.provider.name"), "backup");
    assert_eq!(served.status, 0);
    assert_eq!(served.attr("gen_ai.response.id"), &answer["id"]);
    assert_eq!(served.attr("gen_ai.response.model"), &answer["model"]);
    assert_eq!(served.attr("gen_ai.response.finish_reasons"), &json!(["stop"]));
    assert_eq!(served.attr("gen_ai.usage.input_tokens"), &answer["usage"]["prompt_tokens"]);
    assert_eq!(served.attr("gen_ai.usage.output_tokens"), &answer["usage"]["completion_tokens"]);

    // The history keeps the trace id, for the dashboard to show.
    gw.recorded(1).await;
    let detail = gw.admin(&format!("/admin/requests/{request_id}")).await;
    assert_eq!(detail["trace_id"], CLIENT_TRACE, "{detail}");

    // Each provider got its own attempt's span as parent, and the client's tracestate.
    for (sim, span) in [(&p, failed), (&b, served)] {
        let got = &sim.requests()[0].headers;
        assert_eq!(got["traceparent"], format!("00-{CLIENT_TRACE}-{}-01", span.span_id).as_str());
        assert_eq!(got["tracestate"], "vendor=abc");
    }
}

#[tokio::test]
async fn a_streamed_attempt_span_ends_at_its_last_byte_with_the_stream_s_usage() {
    let collector = Collector::http().await;
    let slow = Script::ok().stream(5, Duration::from_millis(20));
    let (_p, _b, gw) = two(slow, Script::ok(), &telemetry(&collector, "")).await;
    let r = chat(&gw, hi(true), None).await;
    assert_eq!(r.status(), 200);
    let head_at = std::time::SystemTime::now();
    let body = r.text().await.unwrap();
    assert!(body.contains("[DONE]"));
    let spans = collector.wait_for(2).await;
    let attempt = by_kind(&spans, CLIENT)[0];
    let server = by_kind(&spans, SERVER)[0];
    assert!(server.parent_span_id.is_empty(), "no traceparent: the gateway starts the trace");
    let head_ns = head_at.duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    assert!(attempt.end_ns > head_ns, "the attempt's span ends after its head, at its last byte");
    assert!(attempt.attr("gen_ai.usage.output_tokens").as_i64().is_some_and(|n| n > 0), "{attempt:#?}");
    assert_eq!(attempt.attr("gen_ai.response.finish_reasons"), &json!(["stop"]));
    assert!(attempt.attr("gen_ai.response.id").is_string());
}

#[tokio::test]
async fn an_unsampled_parent_exports_nothing_and_still_names_the_attempt_to_the_provider() {
    let collector = Collector::http().await;
    let (p, _b, gw) = two(Script::ok(), Script::ok(), &telemetry(&collector, "")).await;
    let r = chat(&gw, hi(false), Some(&format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-00"))).await;
    assert_eq!(r.status(), 200);
    let unsampled = switchyard_tests::request_id(&r);
    let sent = p.requests()[0].headers["traceparent"].to_str().unwrap().to_string();
    assert!(sent.starts_with(&format!("00-{CLIENT_TRACE}-")) && sent.ends_with("-00"), "{sent}");
    assert!(!sent.contains(CLIENT_SPAN), "the client's header is not passed through");
    // A sampled request after it is exported: the unsampled one never was.
    let r = chat(&gw, hi(false), None).await;
    assert_eq!(r.status(), 200);
    let spans = collector.wait_for(2).await;
    assert!(spans.iter().all(|s| s.trace_id != CLIENT_TRACE), "{spans:#?}");
    gw.recorded(2).await;
    let detail = gw.admin(&format!("/admin/requests/{unsampled}")).await;
    assert!(detail["trace_id"].is_null(), "an unexported trace is not one to look up: {detail}");
}

#[tokio::test]
async fn grpc_exports_the_same_spans() {
    let collector = Collector::grpc().await;
    let grpc = "protocol = \"grpc\"\nheaders = { \"x-collector-key\" = \"team-key\" }";
    let (_p, _b, gw) = two(Script::ok(), Script::ok(), &telemetry(&collector, grpc)).await;
    let r = chat(&gw, hi(false), Some(&format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"))).await;
    assert_eq!(r.status(), 200);
    let spans = collector.wait_for(2).await;
    let server = by_kind(&spans, SERVER)[0];
    assert_eq!((server.trace_id.as_str(), server.parent_span_id.as_str()), (CLIENT_TRACE, CLIENT_SPAN));
    assert_eq!(by_kind(&spans, CLIENT)[0].parent_span_id, server.span_id);
    assert_eq!(collector.headers()["x-collector-key"], "team-key", "the headers go as gRPC metadata");
}

#[tokio::test]
async fn with_tracing_off_the_client_s_context_passes_through_and_no_trace_is_kept() {
    let (p, _b, gw) = two(Script::ok(), Script::ok(), "").await;
    let traceparent = format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01");
    let r = chat(&gw, hi(false), Some(&traceparent)).await;
    assert_eq!(r.status(), 200);
    assert_eq!(p.requests()[0].headers["traceparent"], traceparent.as_str(), "not a hop of the trace");
    assert_eq!(p.requests()[0].headers["tracestate"], "vendor=abc");
    gw.recorded(1).await;
    let detail = gw.admin(&format!("/admin/requests/{}", switchyard_tests::request_id(&r))).await;
    assert!(detail["trace_id"].is_null(), "{detail}");
}

/// The metric's value for `reason`, from `/metrics`.
async fn dropped(gw: &TestGateway, reason: &str) -> f64 {
    let text = http()
        .get(gw.url("/metrics"))
        .bearer_auth(switchyard_tests::ADMIN_TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let line = format!("switchyard_trace_spans_dropped_total{{reason=\"{reason}\"}} ");
    text.lines().find_map(|l| l.strip_prefix(&line)).map_or(0.0, |v| v.parse().unwrap())
}

#[tokio::test]
async fn a_collector_that_refuses_costs_requests_nothing_and_its_drops_are_counted() {
    let collector = Collector::http().await;
    collector.refuse(true);
    let (_p, _b, gw) = two(Script::ok(), Script::ok(), &telemetry(&collector, "")).await;
    for _ in 0..20 {
        assert_eq!(chat(&gw, hi(false), None).await.status(), 200);
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while dropped(&gw, "export_failed").await < 40.0 {
        assert!(tokio::time::Instant::now() < deadline, "the refused spans were not counted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(collector.exports() >= 1, "the exporter did try");
    // Taken again: the next request's spans arrive.
    collector.refuse(false);
    assert_eq!(chat(&gw, hi(false), None).await.status(), 200);
    let spans = collector.wait_for(2).await;
    assert_eq!(spans.len(), 2);
}

#[tokio::test]
async fn a_collector_that_is_down_answers_every_request() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let config = format!("[telemetry]\nendpoint = \"http://{closed}\"\nschedule_delay_ms = 20\n");
    let (_p, _b, gw) = two(Script::ok(), Script::ok(), &config).await;
    let started = std::time::Instant::now();
    for _ in 0..20 {
        assert_eq!(chat(&gw, hi(false), None).await.status(), 200);
    }
    assert!(started.elapsed() < Duration::from_secs(5), "requests waited on the collector");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while dropped(&gw, "export_failed").await < 40.0 {
        assert!(tokio::time::Instant::now() < deadline, "the lost spans were not counted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn the_gateway_s_spans_hang_under_a_python_application_s_own_span() {
    let collector = Collector::http().await;
    let (_p, _b, gw) = two(Script::ok(), Script::ok(), &telemetry(&collector, "")).await;
    let script = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python/traced_client.py");
    let out = tokio::process::Command::new(python())
        .arg(&script)
        .env("SWITCHYARD_URL", format!("http://{}", gw.addr))
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint())
        .env("NO_PROXY", "127.0.0.1")
        .output()
        .await
        .expect("python runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the traced client failed:\n{stderr}");
    let said: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    assert!(said["content"].as_str().is_some_and(|c| c.starts_with("Hello")), "{said}");

    // The application's span, the gateway's request span and its attempt.
    let spans = collector.wait_for(3).await;
    let app = spans.iter().find(|s| s.resource["service.name"] == "client-app").expect("the application's span");
    assert_eq!(
        (app.trace_id.as_str(), app.span_id.as_str()),
        (said["trace_id"].as_str().unwrap(), said["span_id"].as_str().unwrap())
    );
    let server = by_kind(&spans, SERVER).into_iter().find(|s| s.resource["service.name"] == "switchyard").unwrap();
    assert_eq!(server.trace_id, app.trace_id, "one trace from the application to the provider");
    assert_eq!(server.parent_span_id, app.span_id, "the gateway's span is under the application's");
    let attempt = by_kind(&spans, CLIENT).into_iter().find(|s| s.resource["service.name"] == "switchyard").unwrap();
    assert_eq!(attempt.parent_span_id, server.span_id);
}

#[tokio::test]
async fn a_cached_answer_has_a_span_of_its_own_and_no_attempt() {
    let collector = Collector::http().await;
    let cache = "[policy]\ncache = { ttl = \"10m\" }";
    let p = sim("p", Script::ok()).await;
    let config = ConfigText::new().raw(cache).raw(&telemetry(&collector, "")).provider(&p, "openai", &["m"]);
    let gw = TestGateway::start(config.build(), keys_for(&["p"])).await;
    let body = json!({ "model": "m", "temperature": 0, "messages": [{ "role": "user", "content": "hi" }] });
    assert_eq!(chat(&gw, body.clone(), None).await.status(), 200);
    gw.cache.flush().await;
    let hit = chat(&gw, body, None).await;
    assert_eq!(hit.headers()["x-switchyard-cache"], "hit");
    let spans = collector.wait_for(4).await;
    let servers = by_kind(&spans, SERVER);
    let second = servers.iter().find(|s| s.attr("switchyard.cache") == "hit").expect("the hit's request span");
    let in_it: Vec<&Received> =
        spans.iter().filter(|s| s.trace_id == second.trace_id && s.span_id != second.span_id).collect();
    assert_eq!(in_it.len(), 1, "{in_it:#?}");
    assert_eq!(
        (in_it[0].name.as_str(), in_it[0].kind, in_it[0].parent_span_id.as_str()),
        ("cache hit", 1, second.span_id.as_str())
    );
    assert_eq!(p.calls(), 1);
}

#[tokio::test]
async fn a_collector_that_never_answers_fills_the_queue_and_the_rest_is_dropped_and_counted() {
    // Takes connections, never answers: the exporter waits out its timeout.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = silent.local_addr().unwrap();
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            open.push(socket);
        }
    });
    let config = format!(
        "[telemetry]\nendpoint = \"http://{addr}\"\nschedule_delay_ms = 1\nmax_queue_size = 4\nmax_export_batch_size = 2\nexport_timeout_ms = 30000\n"
    );
    let (_p, _b, gw) = two(Script::ok(), Script::ok(), &config).await;
    let started = std::time::Instant::now();
    for _ in 0..20 {
        assert_eq!(chat(&gw, hi(false), None).await.status(), 200);
    }
    assert!(started.elapsed() < Duration::from_secs(5), "requests waited on the collector");
    // 40 spans: the exporter holds one batch, the queue four; the rest are dropped.
    let full = dropped(&gw, "queue_full").await;
    assert!((30.0..=38.0).contains(&full), "dropped for a full queue: {full}");
    held.abort();
}

#[tokio::test]
async fn prompts_and_answers_go_on_a_span_only_when_asked_and_scrubbed() {
    // A prompt that quotes a provider's key: the span must not carry it.
    let leaky = json!({ "model": "m", "messages": [{ "role": "user", "content": "my key is sk-primary, keep it" }] });
    let collector = Collector::http().await;
    let (_p, _b, gw) = two(Script::ok(), Script::ok(), &telemetry(&collector, "")).await;
    assert_eq!(chat(&gw, leaky.clone(), None).await.status(), 200);
    let spans = collector.wait_for(2).await;
    let attempt = by_kind(&spans, CLIENT)[0];
    assert!(attempt.attr("gen_ai.input.messages").is_null(), "content is opt-in");
    assert!(attempt.attr("gen_ai.output.messages").is_null(), "content is opt-in");

    let collector = Collector::http().await;
    let (_p, _b, gw) = two(Script::ok(), Script::ok(), &telemetry(&collector, "capture_content = true")).await;
    let answer: Value = chat(&gw, leaky, None).await.json().await.unwrap();
    let spans = collector.wait_for(2).await;
    let attempt = by_kind(&spans, CLIENT)[0];
    // As the GenAI conventions shape them: roles and parts.
    let input: Value = serde_json::from_str(attempt.attr("gen_ai.input.messages").as_str().unwrap()).unwrap();
    assert_eq!(input, json!([{"role":"user","parts":[{"type":"text","content":"my key is [redacted], keep it"}]}]));
    let output: Value = serde_json::from_str(attempt.attr("gen_ai.output.messages").as_str().unwrap()).unwrap();
    assert_eq!(output[0]["role"], "assistant");
    assert_eq!(output[0]["parts"][0]["content"], answer["choices"][0]["message"]["content"]);
    assert_eq!(output[0]["finish_reason"], "stop");
}

#[tokio::test]
async fn a_provider_passed_over_for_its_open_breaker_is_an_event_on_the_request_s_span() {
    let collector = Collector::http().await;
    let trips = "breaker_consecutive_failures = 1\nbreaker_cooldown = \"10m\"";
    let p = sim("primary", Script::always(Fault::status(503))).await;
    let b = sim("backup", Script::ok()).await;
    let config = ConfigText::new()
        .raw(&format!("{POLICY}\n{trips}"))
        .raw(&telemetry(&collector, ""))
        .provider(&p, "openai", &["m"])
        .provider(&b, "openai", &["m"]);
    let gw = TestGateway::start(config.build(), keys_for(&["primary", "backup"])).await;
    assert_eq!(chat(&gw, hi(false), None).await.status(), 200);
    assert_eq!(chat(&gw, hi(false), None).await.status(), 200);
    assert_eq!(p.calls(), 1, "the open breaker kept the second request off the primary");
    let spans = collector.wait_for(5).await;
    let servers = by_kind(&spans, SERVER);
    let second = servers.last().unwrap();
    let skipped = second.event("switchyard.provider.skipped").unwrap_or_else(|| panic!("{second:#?}"));
    assert_eq!(skipped["switchyard.provider.name"], "primary");
    assert!(skipped["switchyard.reason"].as_str().is_some_and(|r| r.contains("circuit open")), "{skipped:?}");
}
