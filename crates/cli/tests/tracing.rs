//! `switchyard serve` traced as an OpenTelemetry user configures it: the
//! standard variables over `[telemetry]`, a bad one named, the last spans
//! sent as it stops.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::Served;
use switchyard_sim::{Script, SimProvider};
use switchyard_tests::otlp::Collector;

fn config(sim: &SimProvider, telemetry: &str) -> String {
    format!(
        "[[providers]]\nname = \"p\"\nkind = \"openai\"\nbase_url = \"{}\"\nauth = \"none\"\nmodels = [\"m\"]\n\n[telemetry]\n{telemetry}\n",
        sim.base_url()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_variables_win_over_the_file_and_the_last_spans_leave_as_it_stops() {
    let collector = Collector::http().await;
    let sim = SimProvider::start("p", Script::ok()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("switchyard.toml");
    // The file names a collector nobody listens at: the variables must win.
    std::fs::write(&path, config(&sim, "endpoint = \"http://127.0.0.1:9\"\nservice_name = \"from-file\"")).unwrap();
    let served = Served::start(
        &path,
        &dir.path().join("data"),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.endpoint()),
            ("OTEL_SERVICE_NAME", "gateway-under-test"),
            ("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=ci"),
        ],
    );
    assert_eq!(served.chat("m").await.status(), 200);
    // The default batch waits five seconds; stopping sends it at once.
    assert!(collector.spans().is_empty(), "sent before its batch was due");
    served.stop();
    let spans = collector.spans();
    assert_eq!(spans.len(), 2, "{spans:#?}");
    for s in &spans {
        assert_eq!(s.resource["service.name"], "gateway-under-test");
        assert_eq!(s.resource["deployment.environment"], "ci");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_variable_that_cannot_be_used_is_named_in_a_warning_and_ignored() {
    let collector = Collector::http().await;
    let sim = SimProvider::start("p", Script::ok()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("switchyard.toml");
    std::fs::write(&path, config(&sim, "")).unwrap();
    // As the OpenTelemetry specification says: warned about, ignored, never fatal.
    let served = Served::start(
        &path,
        &dir.path().join("data"),
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.endpoint()), ("OTEL_TRACES_SAMPLER", "sometimes")],
    );
    assert_eq!(served.chat("m").await.status(), 200);
    let log = served.stop();
    let warned = log.iter().find(|l| l.contains("OTEL_TRACES_SAMPLER")).unwrap_or_else(|| panic!("{log:#?}"));
    assert!(warned.contains("sometimes") && warned.contains("WARN"), "{warned}");
    assert_eq!(collector.spans().len(), 2, "the default sampler keeps every trace");
}
