//! `switchyard members` as a user runs it, beside a running `switchyard
//! serve`: the key is printed once, answers as its member, is refused
//! within a second of `members revoke`, and no issued key is anywhere in
//! the data directory, the debug log or an export (`history --json`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use support::{client, switchyard, Served};
use switchyard_sim::{Script, SimProvider};

fn members(config: &Path, data: &Path, args: &[&str]) -> std::process::Output {
    let out = switchyard()
        .arg("members")
        .args(args)
        .arg("--config")
        .arg(config)
        .arg("--data-dir")
        .arg(data)
        .output()
        .unwrap();
    assert!(out.status.success(), "members {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

async fn chat_as(addr: &str, key: &str) -> reqwest::Response {
    client()
        .post(format!("http://{addr}/v1/chat/completions"))
        .bearer_auth(key)
        .json(&serde_json::json!({ "model": "m", "messages": [{ "role": "user", "content": "hi" }] }))
        .send()
        .await
        .unwrap()
}

fn files_with(dir: &Path, needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if std::fs::read(&path).unwrap().windows(needle.len()).any(|w| w == needle.as_bytes()) {
                found.push(path.display().to_string());
            }
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_members_key_is_printed_once_served_revoked_and_never_written() {
    let p = SimProvider::start("p", Script::ok()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("switchyard.toml");
    let provider = support::provider_toml("p", &p, "[\"m\"]", "");
    std::fs::write(&config, format!("[history]\nstore_bodies = true\n\n{provider}")).unwrap();
    let data = dir.path().join("data");
    let served = Served::start(&config, &data, &[("SWITCHYARD_KEY_P", "sk-p"), ("RUST_LOG", "debug")]);

    let al = stdout(&members(
        &config,
        &data,
        &["add", "al", "--budget", "50/month", "--rpm", "60", "--models", "m,claude-*", "--expires", "90d"],
    ));
    let al = al.trim().to_string();
    assert!(al.starts_with("sy-m-") && !al.contains('\n'), "only the key on stdout: {al}");
    let bo = stdout(&members(&config, &data, &["add", "bo"])).trim().to_string();
    let listed = stdout(&members(&config, &data, &["list"]));
    assert!(listed.contains("al") && listed.contains("$50/month") && listed.contains("60 rpm"), "{listed}");
    assert!(!listed.contains("sy-m-"), "no key in a listing: {listed}");

    for key in [&al, &al, &bo] {
        assert_eq!(chat_as(&served.addr, key).await.status(), 200);
    }
    assert_eq!(chat_as(&served.addr, "sy-m-wrong").await.status(), 401);

    members(&config, &data, &["revoke", "al"]);
    let revoked = Instant::now();
    loop {
        let r = chat_as(&served.addr, &al).await;
        if r.status() == 401 {
            assert_eq!(r.headers()["x-switchyard-error"], "key_revoked");
            break;
        }
        assert!(revoked.elapsed() < Duration::from_millis(1500), "served {:?} after the revocation", revoked.elapsed());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let rotated = stdout(&members(&config, &data, &["rotate", "bo"])).trim().to_string();
    let log = served.stop();

    let export = switchyard()
        .args(["history", "--json", "--member", "al", "--config"])
        .arg(&config)
        .arg("--data-dir")
        .arg(&data)
        .output()
        .unwrap();
    let export = String::from_utf8(export.stdout).unwrap();
    let rows: serde_json::Value = serde_json::from_str(&export).unwrap();
    let rows = rows["requests"].as_array().unwrap();
    assert!(rows.len() >= 3 && rows.iter().all(|r| r["member"] == "al"), "{export}");
    assert_eq!(rows[0]["error_code"], "key_revoked", "the refusal is on record as al's: {export}");
    let log = log.join("\n");
    assert!(log.len() > 1000, "the debug log was read");
    for key in [&al, &bo, &rotated] {
        let secret = &key["sy-m-".len()..];
        assert_eq!(files_with(&data, secret), Vec::<String>::new(), "a key in the data dir");
        assert!(!log.contains(secret), "a key in the log");
        assert!(!export.contains(secret), "a key in the export");
    }
}
