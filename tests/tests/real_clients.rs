//! The official OpenAI and Anthropic Python SDKs against the gateway.
//!
//! Needs a Python with `openai`, `anthropic` and `pytest`: `.ci/run` makes
//! `.venv` at the workspace root; `SWITCHYARD_TEST_PYTHON` points elsewhere.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use switchyard_sim::{Fault, Script, SimProvider};
use switchyard_tests::{keys_for, ConfigText, TestGateway};

fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("SWITCHYARD_TEST_PYTHON") {
        return PathBuf::from(p);
    }
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/python");
    assert!(
        venv.exists(),
        "no Python with the SDKs: run `python3 -m venv .venv && .venv/bin/pip install -r tests/python/requirements.txt` \
         at the workspace root, or set SWITCHYARD_TEST_PYTHON"
    );
    venv
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_python_sdks_work_through_the_gateway() {
    let oa = SimProvider::start("oa", Script::ok()).await.unwrap();
    let an = SimProvider::start("an", Script::ok()).await.unwrap();
    let bad = SimProvider::start("bad", Script::always(Fault::status(503))).await.unwrap();
    let config = ConfigText::new()
        .provider(&oa, "openai", &["gpt-test", "embed-test"])
        .provider(&an, "anthropic", &["claude-test"])
        .provider(&bad, "anthropic", &["doomed"]);
    let gw = TestGateway::start(config.build(), keys_for(&["oa", "an", "bad"])).await;

    let tests = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python");
    let out = tokio::process::Command::new(python())
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=5"])
        .arg(&tests)
        .env("SWITCHYARD_URL", format!("http://{}", gw.addr))
        .env("NO_PROXY", "127.0.0.1")
        .output()
        .await
        .expect("python runs");
    let report = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "SDK tests failed:\n{report}");
    eprintln!("{report}");
    assert!(!report.contains("skipped"), "no SDK test may be skipped:\n{report}");
    // One gateway request: the first attempt and the gateway's one retry.
    // An SDK retry would have doubled it.
    assert_eq!(bad.calls(), 2, "the SDK retried although the gateway said x-should-retry: false");
    // Every SDK request reached a provider with the provider's key, never the client's.
    for seen in oa.requests().iter().chain(an.requests().iter()) {
        let auth = seen.headers.get("authorization").or_else(|| seen.headers.get("x-api-key")).unwrap();
        assert!(!auth.to_str().unwrap().contains("sk-local-client"));
    }
}
