//! A traced request's log lines name its trace and span. Alone in its
//! file: a subscriber set for one test sees callsites other tests running
//! beside it may already have cached as unwanted.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::json;
use switchyard_sim::{Script, SimProvider};
use switchyard_tests::otlp::Collector;
use switchyard_tests::{http, keys_for, ConfigText, TestGateway};

const CLIENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";

/// Every line logged for a request, at debug level.
#[derive(Clone, Default)]
struct Lines(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

// One thread: the subscriber set for this test sees the gateway's tasks too.
#[tokio::test(flavor = "current_thread")]
async fn a_request_s_log_lines_name_its_trace_and_span_beside_its_correlation_id() {
    let lines = Lines::default();
    let writer = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter("switchyard_core=debug")
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let collector = Collector::http().await;
    let p = SimProvider::start("p", Script::ok()).await.unwrap();
    let telemetry = format!("[telemetry]\nendpoint = \"{}\"\nschedule_delay_ms = 20\n", collector.endpoint());
    let config = ConfigText::new().raw(&telemetry).provider(&p, "openai", &["m"]);
    let gw = TestGateway::start(config.build(), keys_for(&["p"])).await;
    let r = http()
        .post(gw.url("/v1/chat/completions"))
        .header("x-correlation-id", "corr-7")
        .header("traceparent", format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"))
        .json(&json!({ "model": "m", "messages": [{ "role": "user", "content": "hi" }] }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let spans = collector.wait_for(2).await;
    let server = spans.iter().find(|s| s.kind == 2).unwrap();
    let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
    let attempt = text.lines().find(|l| l.contains("attempt")).unwrap_or_else(|| panic!("no attempt line:\n{text}"));
    assert!(attempt.contains("correlation_id=corr-7"), "{attempt}");
    assert!(attempt.contains(&format!("trace_id={CLIENT_TRACE}")), "{attempt}");
    assert!(attempt.contains(&format!("span_id={}", server.span_id)), "{attempt}");
}
