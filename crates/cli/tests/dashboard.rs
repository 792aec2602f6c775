//! The dashboard end to end: `switchyard serve` (real keychain, real
//! history) in front of simulated providers with scripted faults, signed in
//! with `switchyard open --print`, driven in Debian's Chromium by
//! `ui/e2e/dashboard.mjs`. `.ci/run` installs Chromium and the UI packages
//! and runs this under a throwaway Secret Service.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use support::{provider_toml, secret_tool_lookup, switchyard, Served};
use switchyard_core::history::{
    now_ms, AttemptOutcome, AttemptRecord, Reason, Record, RequestOutcome, RequestRecord, Store,
};
use switchyard_core::protocol::Usage;
use switchyard_sim::{Fault, Script, SimProvider};

const ADMIN_TOKEN: &str = "sya-dashboard-e2e";
/// Probes would add calls the test does not script.
const NO_PROBE: &str = "probe = false";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_states_fallbacks_toggles_and_takes_keys_into_the_keychain() {
    assert!(
        std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_some(),
        "the dashboard test stores a key in the keychain: run it through .ci/run (a session D-Bus with a Secret Service)"
    );
    let ui = workspace().join("ui");
    assert!(
        ui.join("node_modules/playwright-core").exists() && Path::new("/usr/bin/chromium").exists(),
        "the dashboard test needs `npm ci` in ui/ and Debian's chromium: .ci/run installs both"
    );

    let primary = SimProvider::start("primary", Script::ok().fail_first(1, Fault::status(503))).await.unwrap();
    let backup = SimProvider::start("backup", Script::ok()).await.unwrap();
    let broken = SimProvider::start("broken", Script::always(Fault::status(503))).await.unwrap();
    let nokey = SimProvider::start("nokey", Script::ok()).await.unwrap();
    // One provider for each way a request can end badly, for the outcome filter.
    let refusing = SimProvider::start("refusing", Script::always(Fault::status(400))).await.unwrap();
    let dropping =
        SimProvider::start("dropping", Script::always(Fault::DropAfter(2)).stream(4, Duration::from_millis(5)))
            .await
            .unwrap();
    let thinking = SimProvider::start("thinking", Script::always(Fault::Hang)).await.unwrap();
    // A priced model behind the response cache, with a queue: what a hit saves, and queue figures.
    let cached = SimProvider::start("cached", Script::ok()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("switchyard.toml");
    let text = [
        // The browser run ends by recording 10,000 requests from one address.
        "[server]\nrate_limit_per_minute = 1000000\n\n[policy]\nmax_retries = 0\nbackoff_base = \"1ms\"\n".to_string(),
        provider_toml("dash-primary", &primary, "[\"m\"]", NO_PROBE),
        provider_toml("dash-backup", &backup, "[\"m\"]", NO_PROBE),
        provider_toml(
            "dash-broken",
            &broken,
            "[\"b\"]",
            "probe = false\n[providers.policy]\nbreaker_consecutive_failures = 1\nbreaker_cooldown = \"10m\"",
        ),
        provider_toml("dash-nokey", &nokey, "[\"n\"]", NO_PROBE),
        provider_toml("dash-refusing", &refusing, "[\"e\"]", NO_PROBE),
        provider_toml("dash-dropping", &dropping, "[\"f\"]", NO_PROBE),
        provider_toml("dash-thinking", &thinking, "[\"s\"]", NO_PROBE),
        provider_toml(
            "dash-cached",
            &cached,
            "[\"gpt-4o-mini\"]",
            "probe = false\n[providers.policy]\nmax_concurrency = 2\nmax_queue = 4",
        ),
        "[[routes]]\nmodel = \"gpt-4o-mini\"\nchain = [\"dash-cached\"]\npolicy = { cache = { ttl = \"10m\" } }\n"
            .to_string(),
    ]
    .concat();
    std::fs::write(&config, text).unwrap();
    let data = dir.path().join("data");
    let envs = [
        ("SWITCHYARD_ADMIN_TOKEN", ADMIN_TOKEN),
        ("SWITCHYARD_KEY_DASH_PRIMARY", "sk-dash-primary"),
        ("SWITCHYARD_KEY_DASH_BACKUP", "sk-dash-backup"),
        ("SWITCHYARD_KEY_DASH_BROKEN", "sk-dash-broken"),
        ("SWITCHYARD_KEY_DASH_REFUSING", "sk-dash-refusing"),
        ("SWITCHYARD_KEY_DASH_DROPPING", "sk-dash-dropping"),
        ("SWITCHYARD_KEY_DASH_THINKING", "sk-dash-thinking"),
        ("SWITCHYARD_KEY_DASH_CACHED", "sk-dash-cached"),
    ];
    let served = Served::start(&config, &data, &envs);
    let base = format!("http://{}", served.addr);

    let open = switchyard()
        .args(["open", "--print", "--listen", &served.addr, "--data-dir"])
        .arg(&data)
        .env("SWITCHYARD_ADMIN_TOKEN", ADMIN_TOKEN)
        .output()
        .unwrap();
    assert!(open.status.success(), "switchyard open: {}", String::from_utf8_lossy(&open.stderr));
    let link = String::from_utf8(open.stdout).unwrap().trim().to_string();
    assert!(link.starts_with(&format!("{base}/ui/login?ticket=")), "{link}");

    let secret = format!("sk-dash-e2e-{}", std::process::id());
    let shots = workspace().join("target/dashboard-shots");
    let browser = tokio::process::Command::new("node")
        .arg(ui.join("e2e/dashboard.mjs"))
        .current_dir(&ui)
        .env("SWITCHYARD_LINK", &link)
        .env("SWITCHYARD_BASE", &base)
        .env("SWITCHYARD_ADMIN_TOKEN", ADMIN_TOKEN)
        .env("SHOTS_DIR", &shots)
        .env("E2E_KEY", &secret)
        .output()
        .await
        .unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&browser.stdout), String::from_utf8_lossy(&browser.stderr));
    println!("{said}");

    // Whatever the browser saw, take the test key out of the keychain again.
    let stored = secret_tool_lookup("dash-nokey/e2e");
    let _ = switchyard()
        .args(["keys", "rm", "dash-nokey", "--label", "e2e", "--config"])
        .arg(&config)
        .arg("--data-dir")
        .arg(&data)
        .output();
    let log = served.stop();

    assert!(browser.status.success(), "the browser run failed:\n{said}");
    assert_eq!(stored.as_deref(), Some(secret.as_str()), "the key typed in the form is in the keychain");
    assert!(!log.iter().any(|l| l.contains(&secret)), "the key is in no log line");
    assert!(backup.calls() >= 4, "the fallback and the requests after disabling reached the backup");
    assert!(cached.calls() >= 1, "the cached route's provider answered the first request");
}

/// A request's trace id in its detail, driven in Debian's Chromium by
/// `ui/e2e/trace.mjs`: a "Trace" line in monospace whose copy button puts
/// the id on the clipboard, none for a request without one, and the list's
/// search finds the request by it. Both requests are put in the history
/// before the gateway starts, as one recording with tracing on leaves them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_request_detail_shows_its_trace_id_with_a_copy_button() {
    const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
    let ui = workspace().join("ui");
    assert!(
        ui.join("node_modules/playwright-core").exists() && Path::new("/usr/bin/chromium").exists(),
        "the dashboard test needs `npm ci` in ui/ and Debian's chromium: .ci/run installs both"
    );
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    switchyard_core::private::dir(&data).unwrap();
    let store = Store::open(&data.join("switchyard.db")).await.unwrap();
    let now = now_ms();
    let (traced, untraced) = (recorded("trace-e2e-traced", now - 2000), recorded("trace-e2e-untraced", now - 1000));
    let traced = RequestRecord { trace_id: Some(TRACE_ID.into()), ..traced };
    store.write(&[Record::Request(Box::new(traced)), Record::Request(Box::new(untraced))]).await.unwrap();
    store.close().await;

    let sim = SimProvider::start("trace", Script::ok()).await.unwrap();
    let config = dir.path().join("switchyard.toml");
    std::fs::write(&config, provider_toml("dash-trace", &sim, "[\"m\"]", NO_PROBE)).unwrap();
    let envs = [("SWITCHYARD_ADMIN_TOKEN", ADMIN_TOKEN), ("SWITCHYARD_KEY_DASH_TRACE", "sk-dash-trace")];
    let served = Served::start(&config, &data, &envs);
    let open = switchyard()
        .args(["open", "--print", "--listen", &served.addr, "--data-dir"])
        .arg(&data)
        .env("SWITCHYARD_ADMIN_TOKEN", ADMIN_TOKEN)
        .output()
        .unwrap();
    assert!(open.status.success(), "switchyard open: {}", String::from_utf8_lossy(&open.stderr));
    let link = String::from_utf8(open.stdout).unwrap().trim().to_string();

    let browser = tokio::process::Command::new("node")
        .arg(ui.join("e2e/trace.mjs"))
        .current_dir(&ui)
        .env("SWITCHYARD_LINK", &link)
        .env("SWITCHYARD_BASE", format!("http://{}", served.addr))
        .env("SHOTS_DIR", workspace().join("target/dashboard-shots"))
        .env("TRACE_ID", TRACE_ID)
        .env("TRACED_ID", "trace-e2e-traced")
        .env("UNTRACED_ID", "trace-e2e-untraced")
        .output()
        .await
        .unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&browser.stdout), String::from_utf8_lossy(&browser.stderr));
    println!("{said}");
    served.stop();
    assert!(browser.status.success(), "the browser run failed:\n{said}");
}

/// A request answered by `dash-trace` on its first attempt, as the history
/// keeps it.
fn recorded(id: &str, started_at_ms: i64) -> RequestRecord {
    let usage = Usage { input_tokens: Some(12), output_tokens: Some(3), cached_tokens: None, cache_write_tokens: None };
    RequestRecord {
        started_at_ms,
        finished_at_ms: started_at_ms + 40,
        model: Some("m".into()),
        outcome: RequestOutcome::Ok,
        status: Some(200),
        provider: Some("dash-trace".into()),
        provider_model: Some("m".into()),
        duration_ms: 40.0,
        usage,
        attempts: vec![AttemptRecord {
            seq: 0,
            provider: "dash-trace".into(),
            key_label: None,
            model: "m".into(),
            reason: Reason::First,
            fallback_from: None,
            started_at_ms,
            offset_ms: 0.0,
            timeout_ms: None,
            backoff_ms: 0.0,
            duration_ms: Some(38.0),
            ttfb_ms: Some(30.0),
            ttft_ms: None,
            status: Some(200),
            outcome: AttemptOutcome::Ok,
            retry_after_ms: None,
            breaker_state: None,
            error: None,
            usage,
        }],
        ..RequestRecord::blank(id, id, "/v1/chat/completions", Some("curl/8.5"))
    }
}
