//! `switchyard history show ID --bodies` and `switchyard history export ID`
//! against a real `switchyard serve` keeping bodies.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use support::{switchyard, Served};
use switchyard_sim::{Script, SimProvider};

const ADMIN_TOKEN: &str = "sya-inspector-cli-test";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_shows_a_requests_bodies_and_writes_its_bug_report() {
    let sim = SimProvider::start("p", Script::ok()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("switchyard.toml");
    std::fs::write(
        &config,
        format!(
            "[history]\nstore_bodies = true\n\n[[providers]]\nname = \"p\"\nkind = \"openai\"\nbase_url = \"{}\"\nauth = \"none\"\nmodels = {{ fast = \"gpt-4o-mini\" }}\n",
            sim.base_url()
        ),
    )
    .unwrap();
    let data = dir.path().join("data");
    let served = Served::start(&config, &data, &[("SWITCHYARD_ADMIN_TOKEN", ADMIN_TOKEN)]);
    let body = serde_json::json!({ "model": "fast", "messages": [{ "role": "user", "content": "inspect me" }] });
    let r =
        support::client().post(format!("http://{}/v1/chat/completions", served.addr)).json(&body).send().await.unwrap();
    let id = r.headers()["x-request-id"].to_str().unwrap().to_string();
    assert_eq!(r.status(), 200);
    r.bytes().await.unwrap();

    let show = |json: bool| {
        let mut cmd = switchyard();
        cmd.args(["history", "show", &id, "--bodies", "--config"]).arg(&config).arg("--data-dir").arg(&data);
        if json {
            cmd.arg("--json");
        }
        cmd.output().unwrap()
    };
    // The writer commits in batches: the request is on record within moments.
    let mut out = show(true);
    for _ in 0..100 {
        if out.status.success() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        out = show(true);
    }
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let inspection: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(inspection["captured"]["client"]["body"]["text"].as_str().unwrap().contains("inspect me"));
    let upstream = inspection["captured"]["attempts"][0]["request"]["body"]["text"].as_str().unwrap();
    assert_eq!(upstream.as_bytes(), &sim.requests()[0].body[..]);
    let text = String::from_utf8(show(false).stdout).unwrap();
    assert!(text.contains("client request: POST /v1/chat/completions"), "{text}");
    assert!(text.contains("attempt 1:") && text.contains("changed    model: model alias"), "{text}");
    assert!(text.contains("the client got: 200"), "{text}");

    let capture = |args: &[&str]| {
        let out = switchyard()
            .args(["history", "capture", "--listen", &served.addr, "--config"])
            .arg(&config)
            .arg("--data-dir")
            .arg(&data)
            .args(args)
            .env("SWITCHYARD_ADMIN_TOKEN", ADMIN_TOKEN)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    assert!(capture(&[]).starts_with("capture is off"));
    assert_eq!(capture(&["--next", "3"]).trim(), "capturing the next 3 requests");
    let during = capture(&["--for", "10m"]);
    // 10m unless the round trip took a whole second.
    assert!(
        during.starts_with("capturing every request for 10m\n")
            || during.starts_with("capturing every request for 9m 59s"),
        "{during}"
    );
    assert!(capture(&["--off"]).starts_with("capture is off"));

    let report = dir.path().join("report.json");
    let export = switchyard()
        .args(["history", "export", &id, "--listen", &served.addr, "--config"])
        .arg(&config)
        .arg("--data-dir")
        .arg(&data)
        .arg("--out")
        .arg(&report)
        .env("SWITCHYARD_ADMIN_TOKEN", ADMIN_TOKEN)
        .output()
        .unwrap();
    assert!(export.status.success(), "{}", String::from_utf8_lossy(&export.stderr));
    let written = std::fs::read_to_string(&report).unwrap();
    assert!(!written.contains(ADMIN_TOKEN), "{written}");
    let written: serde_json::Value = serde_json::from_str(&written).unwrap();
    assert_eq!(written["request"]["id"], id.as_str());
    assert!(written["bodies"]["captured"]["attempts"][0]["request"].is_object());
    served.stop();
}
