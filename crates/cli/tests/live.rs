//! `switchyard status`, `providers`, `tail` and config reload on file change,
//! against a running `switchyard serve`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;

use support::{client, switchyard, Served};
use switchyard_sim::{Script, SimProvider};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_toggles_tail_and_reload_on_change() {
    let a = SimProvider::start("a", Script::ok()).await.unwrap();
    let b = SimProvider::start("b", Script::ok()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("switchyard.toml");
    let base = format!(
        "[[providers]]\nname = \"a\"\nkind = \"openai\"\nbase_url = \"{}\"\nauth = \"none\"\nmodels = [\"m\"]\n\n[[providers]]\nname = \"b\"\nkind = \"openai\"\nbase_url = \"{}\"\nauth = \"none\"\nmodels = [\"m\"]\n",
        a.base_url(),
        b.base_url()
    );
    std::fs::write(&config, &base).unwrap();
    let data = dir.path().join("data");
    let served = Served::start(&config, &data, &[("SWITCHYARD_CONFIG_POLL", "100ms")]);
    let at = |path: &str| format!("http://{}{path}", served.addr);
    let cli = |args: &[&str]| {
        let out = switchyard().args(args).args(["--listen", &served.addr, "--data-dir"]).arg(&data).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let chat = serde_json::json!({ "model": "m", "messages": [] });

    let mut tail = switchyard()
        .args(["tail", "--json", "--listen", &served.addr, "--data-dir"])
        .arg(&data)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut tail_lines = BufReader::new(tail.stdout.take().unwrap()).lines();
    std::thread::sleep(Duration::from_millis(300));

    let r = client().post(at("/v1/chat/completions")).json(&chat).send().await.unwrap();
    assert_eq!(r.headers()["x-switchyard-provider"], "a");
    let status = cli(&["status"]);
    assert!(status.lines().any(|l| l.starts_with("a ") && l.contains("healthy")), "{status}");
    // Where the models without a route went lately: all to a, in chain order.
    assert!(
        status.lines().any(|l| l.starts_with("route (other)") && l.contains("ordered") && l.contains("a 100% (1)")),
        "{status}"
    );

    let said = cli(&["providers", "disable", "a"]);
    assert_eq!(said.trim(), "a: disabled");
    let r = client().post(at("/v1/chat/completions")).json(&chat).send().await.unwrap();
    assert_eq!(r.headers()["x-switchyard-provider"], "b");

    // The tail saw the snapshot, both requests and the toggle.
    let mut kinds = Vec::new();
    while kinds.iter().filter(|k| *k == "request_finished").count() < 2 {
        let line = tail_lines.next().unwrap().unwrap();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        kinds.push(v["type"].as_str().unwrap().to_string());
    }
    assert_eq!(kinds[0], "snapshot");
    assert!(kinds.contains(&"provider_toggled".to_string()), "{kinds:?}");
    tail.kill().unwrap();
    tail.wait().unwrap();

    let ask_n =
        || client().post(at("/v1/chat/completions")).json(&serde_json::json!({ "model": "n", "messages": [] })).send();
    let ask_n = || async { ask_n().await.unwrap() };
    // A changed config file is picked up; a broken one is refused and the old one serves.
    std::fs::write(&config, format!("{base}\n[[routes]]\nmodel = \"n\"\nchain = [\"b\"]\n")).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let r = ask_n().await;
        if r.status() == 200 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the new route never applied");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    std::fs::write(&config, "[[providers]]\nname = 7\n").unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let r = ask_n().await;
    assert_eq!(r.status(), 200, "the old config keeps serving");
    let log = served.stop().join("\n");
    assert!(log.contains("config reload refused") && log.contains("switchyard.toml:2:"), "{log}");
}
