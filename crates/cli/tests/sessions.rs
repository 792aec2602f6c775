//! Sessions as a user sees them beside a running `switchyard serve`: two
//! sessions through one gateway, their figures split exactly between them
//! (`switchyard sessions`, `sessions show`, `/admin/requests?session=`);
//! `switchyard statusline` fed what Claude Code feeds it prints that
//! session's line, and nothing (successfully) with the gateway down;
//! `connect claude --statusline` sets Claude Code's status line and
//! `disconnect` puts the user's own back.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::io::Write;
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Instant;

use serde_json::{json, Value};
use support::{client, switchyard, Served};
use switchyard_sim::{Script, SimProvider};

const PRICES: &str = "[[prices]]\nprovider = \"p\"\nmodel = \"*\"\ninput = 1000000\noutput = 1000000\n";

fn with_place(cmd: &mut std::process::Command, config: &Path, data: &Path, addr: &str) {
    cmd.args(["--listen", addr, "--config"]).arg(config).arg("--data-dir").arg(data);
}

fn cli(config: &Path, data: &Path, addr: &str, args: &[&str]) -> String {
    let mut cmd = switchyard();
    cmd.args(args);
    with_place(&mut cmd, config, data, addr);
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "switchyard {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// `switchyard statusline` with `stdin`, and how long it took.
fn statusline(config: &Path, data: &Path, addr: &str, stdin: &str) -> (Output, std::time::Duration) {
    let mut cmd = switchyard();
    cmd.arg("statusline");
    with_place(&mut cmd, config, data, addr);
    let started = Instant::now();
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    (out, started.elapsed())
}

async fn ask(addr: &str, session: &str, text: &str) {
    let r = client()
        .post(format!("http://{addr}/v1/chat/completions"))
        .header("x-switchyard-session-id", session)
        .header("user-agent", "claude-cli/2.1.197 (external, cli)")
        .json(&json!({ "model": "m", "messages": [{ "role": "user", "content": text }] }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

/// What Claude Code passes its status-line command (2.1.197).
fn claude_status_input(session: &str) -> String {
    json!({
        "hook_event_name": "Status",
        "session_id": session,
        "transcript_path": "/tmp/t.jsonl",
        "cwd": "/tmp/w",
        "model": { "id": "m", "display_name": "M" },
        "workspace": { "current_dir": "/tmp/w", "project_dir": "/tmp/w" },
        "version": "2.1.197",
        "output_style": { "name": "default" },
        "cost": { "total_cost_usd": 0.01, "total_duration_ms": 1000, "total_api_duration_ms": 500,
                  "total_lines_added": 0, "total_lines_removed": 0 }
    })
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sessions_split_exactly_and_the_status_line_shows_one() {
    let p = SimProvider::start("p", Script::ok()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("switchyard.toml");
    let provider = support::provider_toml("p", &p, "[\"m\"]", "");
    std::fs::write(&config, format!("{PRICES}\n{provider}")).unwrap();
    let data = dir.path().join("data");
    let served = Served::start(&config, &data, &[("SWITCHYARD_KEY_P", "sk-p")]);
    let addr = served.addr.clone();

    // Refused once its body was read (no route for the model): still the session's.
    let refused = client()
        .post(format!("http://{addr}/v1/chat/completions"))
        .header("x-switchyard-session-id", "s-b")
        .json(&json!({ "model": "no-such-model", "messages": [{ "role": "user", "content": "x" }] }))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 404);
    for (session, text) in [("s-a", "one"), ("s-b", "a longer question"), ("s-a", "two"), ("s-a", "three, longer")] {
        ask(&addr, session, text).await;
    }

    let page: Value = serde_json::from_str(&cli(&config, &data, &addr, &["sessions", "--json"])).unwrap();
    let sessions = page["sessions"].as_array().unwrap();
    let ids: Vec<&str> = sessions.iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["s-a", "s-b"], "newest last request first");
    let token = std::fs::read_to_string(data.join("admin-token")).unwrap();
    for path in ["/admin/sessions", "/admin/sessions/s-a", "/admin/spend?by=session"] {
        let anonymous = client().get(format!("http://{addr}{path}")).send().await.unwrap();
        assert_eq!(anonymous.status(), 401, "{path}: behind the admin token like every admin route");
    }
    for s in sessions {
        assert_eq!(s["client"], "claude-code");
        assert_eq!(s["client_version"], "2.1.197");
        let id = s["id"].as_str().unwrap();
        let rows: Value = client()
            .get(format!("http://{addr}/admin/requests?session={id}"))
            .bearer_auth(token.trim())
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let rows = rows["requests"].as_array().unwrap();
        let sum = |f: &dyn Fn(&Value) -> i64| rows.iter().map(f).sum::<i64>();
        assert_eq!(s["requests"].as_i64().unwrap(), rows.len() as i64);
        assert_eq!(s["input_tokens"].as_i64().unwrap(), sum(&|r| r["usage"]["input_tokens"].as_i64().unwrap_or(0)));
        assert_eq!(s["output_tokens"].as_i64().unwrap(), sum(&|r| r["usage"]["output_tokens"].as_i64().unwrap_or(0)));
        let cost: f64 = rows.iter().filter_map(|r| r["cost_usd"].as_f64()).sum();
        assert!((s["cost_usd"].as_f64().unwrap() - cost).abs() < 1e-9, "{s} vs {cost}");
        assert!(rows.iter().all(|r| r["session"] == id));
    }
    assert_eq!((sessions[0]["requests"].as_i64(), sessions[1]["requests"].as_i64()), (Some(3), Some(2)));
    assert_eq!((sessions[0]["errors"].as_i64(), sessions[1]["errors"].as_i64()), (Some(0), Some(1)));
    let admin = |path: String| {
        let (token, url) = (token.trim().to_string(), format!("http://{addr}{path}"));
        async move { client().get(url).bearer_auth(token).send().await.unwrap() }
    };
    let spend: Value = admin("/admin/spend?by=session&since=1h".into()).await.json().await.unwrap();
    let by_session: Vec<(&str, i64)> = spend["by_session"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["id"].as_str().unwrap(), s["requests"].as_i64().unwrap()))
        .collect();
    assert_eq!(by_session, [("s-a", 3), ("s-b", 2)], "the costliest first");
    let spend: Value = admin("/admin/spend?by=client&since=1h".into()).await.json().await.unwrap();
    let clients = spend["by_client"].as_array().unwrap();
    assert_eq!(
        (clients[0]["client"].as_str(), clients[0]["requests"].as_i64()),
        (Some("claude-code"), Some(4)),
        "{clients:?}"
    );
    assert_eq!(admin("/admin/spend?by=nothing".into()).await.status(), 400);
    let only_codex = cli(&config, &data, &addr, &["sessions", "--client", "codex", "--json"]);
    assert_eq!(serde_json::from_str::<Value>(&only_codex).unwrap()["sessions"], json!([]));
    let table = cli(&config, &data, &addr, &["sessions", "--since", "1d"]);
    assert!(table.lines().count() == 3 && table.contains("claude-code 2.1.197"), "{table}");
    let shown = cli(&config, &data, &addr, &["sessions", "show", "s-a"]);
    assert!(shown.contains("requests  3 (0 fell back, 0 failed)") && shown.contains("served by p/m: 3"), "{shown}");
    assert!(shown.contains("turns     3\n") && shown.contains("0 written to it"), "{shown}");
    let header = table.lines().next().unwrap();
    assert!(header.contains("turns") && header.contains("cache wr"), "{table}");

    let (out, took) = statusline(&config, &data, &addr, &claude_status_input("s-a"));
    assert!(out.status.success());
    let line = String::from_utf8(out.stdout).unwrap();
    let cost = sessions[0]["cost_usd"].as_f64().unwrap();
    assert_eq!(line, format!("p/m · ${cost:.2} · cache 0%\n"));
    println!("statusline answered in {took:?}");
    assert!(took.as_millis() < 500, "the status line waits on it: {took:?}");
    let (out, _) = statusline(&config, &data, &addr, &claude_status_input("never-seen"));
    assert!(out.status.success() && out.stdout.is_empty(), "an unknown session prints nothing");

    // The gateway gone: nothing printed, success, quickly.
    served.stop();
    let (out, took) = statusline(&config, &data, &addr, &claude_status_input("s-a"));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stdout.is_empty() && out.stderr.is_empty(), "{out:?}");
    assert!(took.as_millis() < 1000, "{took:?}");
}

#[test]
fn connect_claude_statusline_sets_it_and_disconnect_restores_the_users_own() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let settings = home.join(".claude/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    let mine = "{\n  \"theme\": \"dark\",\n  \"statusLine\": { \"type\": \"command\", \"command\": \"my-line\" }\n}\n";
    std::fs::write(&settings, mine).unwrap();
    let config = dir.path().join("switchyard.toml");
    std::fs::write(&config, "").unwrap();
    let data = dir.path().join("data");
    let run = |args: &[&str]| {
        let mut cmd = switchyard();
        cmd.args(args).arg("--config").arg(&config).arg("--data-dir").arg(&data);
        cmd.env("HOME", &home).env_remove("CLAUDE_CONFIG_DIR");
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    run(&["connect", "claude", "--statusline"]);
    let set: Value = serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    assert_eq!(set["statusLine"]["type"], "command");
    let command = set["statusLine"]["command"].as_str().unwrap();
    assert_eq!(command, format!("{} statusline", env!("CARGO_BIN_EXE_switchyard")));
    assert_eq!(set["theme"], "dark", "the user's other settings stay");
    run(&["disconnect", "claude"]);
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), mine, "byte for byte the user's own");
}
