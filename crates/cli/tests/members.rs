//! `switchyard members` as a user runs it, beside a running `switchyard
//! serve`: the key is printed once, answers as its member, is refused
//! within a second of `members revoke`, and no issued key is anywhere in
//! the data directory, the debug log or an export (`history --json`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use support::pg::Db;
use support::redis::Redis;
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

/// Two instances of one team (Redis for the counters, PostgreSQL for the
/// history and the members): a member's requests a minute hold across
/// both, and a revocation made on one is refused on the other within a
/// second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_members_rpm_and_revocation_hold_across_a_team() {
    let (redis, db) = (Redis::start(), Db::create("sy_members"));
    let p = SimProvider::start("p", Script::ok()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = |name: &str| {
        let text = format!(
            "[team]\nredis = \"redis://127.0.0.1:{}/0\"\nnamespace = \"t\"\ninstance = \"{name}\"\n\n\
             [history]\nurl = \"postgres://postgres@127.0.0.1:5432/{}\"\n\n{}",
            redis.port,
            db.name,
            support::provider_toml("p", &p, "[\"m\"]", "auth = \"none\""),
        );
        let path = dir.path().join(format!("{name}.toml"));
        std::fs::write(&path, text).unwrap();
        path
    };
    let (config_a, config_b) = (config("gw-a"), config("gw-b"));
    let (data_a, data_b) = (dir.path().join("a"), dir.path().join("b"));
    let a = Served::start(&config_a, &data_a, &[]);
    let b = Served::start(&config_b, &data_b, &[]);
    let al = stdout(&members(&config_a, &data_a, &["add", "al", "--rpm", "4"])).trim().to_string();

    let mut served = 0;
    for i in 0..8 {
        let addr = if i % 2 == 0 { &a.addr } else { &b.addr };
        let r = chat_as(addr, &al).await;
        match r.status().as_u16() {
            200 => served += 1,
            429 => assert_eq!(r.headers()["x-switchyard-error"], "rate_limited"),
            other => panic!("{other}: {}", r.text().await.unwrap()),
        }
    }
    assert_eq!(served, 4, "4 a minute across the team, not 4 on each instance");
    assert_eq!(p.calls(), 4);

    let token = std::fs::read_to_string(data_a.join("admin-token")).unwrap();
    let r = client()
        .post(format!("http://{}/admin/members/al/revoke", a.addr))
        .bearer_auth(token.trim())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let revoked = Instant::now();
    loop {
        let r = chat_as(&b.addr, &al).await;
        if r.headers()["x-switchyard-error"] == "key_revoked" {
            break;
        }
        assert!(
            revoked.elapsed() < Duration::from_millis(1500),
            "B served al {:?} after A revoked it",
            revoked.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Two instances of one team: a member's budget is the team's spend
/// counter in Redis, so a request in flight on A (its estimate reserved)
/// and then its cost, once paid, refuse the member's next request on B at
/// once, with no upstream call; `/admin/budgets` on B shows the team's count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_members_budget_spent_on_one_instance_refuses_on_the_other() {
    let (redis, db) = (Redis::start(), Db::create("sy_members"));
    let p = SimProvider::start("p", Script::ok().latency(Duration::from_millis(400))).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = |name: &str| {
        // A dollar a token: one request's estimate is over the $5 budget.
        let text = format!(
            "[team]\nredis = \"redis://127.0.0.1:{}/0\"\nnamespace = \"t\"\ninstance = \"{name}\"\n\n\
             [history]\nurl = \"postgres://postgres@127.0.0.1:5432/{}\"\n\n\
             [[prices]]\nprovider = \"p\"\nmodel = \"*\"\ninput = 1000000\noutput = 1000000\n\n{}",
            redis.port,
            db.name,
            support::provider_toml("p", &p, "[\"m\"]", "auth = \"none\""),
        );
        let path = dir.path().join(format!("{name}.toml"));
        std::fs::write(&path, text).unwrap();
        path
    };
    let (config_a, config_b) = (config("gw-a"), config("gw-b"));
    let (data_a, data_b) = (dir.path().join("a"), dir.path().join("b"));
    let a = Served::start(&config_a, &data_a, &[]);
    let b = Served::start(&config_b, &data_b, &[]);
    let al = stdout(&members(&config_a, &data_a, &["add", "al", "--budget", "5/day"])).trim().to_string();

    let (addr_a, key) = (a.addr.clone(), al.clone());
    let on_a = tokio::spawn(async move { chat_as(&addr_a, &key).await.status().as_u16() });
    let deadline = Instant::now() + Duration::from_secs(5);
    while p.calls() == 0 {
        assert!(Instant::now() < deadline, "A never called the provider");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let refused = chat_as(&b.addr, &al).await;
    assert_eq!(refused.status(), 429, "B served al while A's request held the budget");
    assert_eq!(refused.headers()["x-switchyard-error"], "budget_exceeded");
    assert_eq!(refused.headers()["x-should-retry"], "false");
    assert_eq!(on_a.await.unwrap(), 200);

    let refused = chat_as(&b.addr, &al).await;
    assert_eq!(refused.status(), 429, "B served al after A spent its budget");
    assert_eq!(p.calls(), 1, "B's refusals called nobody");
    let token = std::fs::read_to_string(data_b.join("admin-token")).unwrap();
    let budgets: serde_json::Value = client()
        .get(format!("http://{}/admin/budgets", b.addr))
        .bearer_auth(token.trim())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let row = budgets.as_array().unwrap().iter().find(|r| r["scope"] == "member:al").unwrap();
    assert_eq!(row["team"], true, "{row}");
    assert!(row["spent_usd"].as_f64().unwrap() > 5.0 && row["blocking"] == true, "{row}");
}

/// Sessions by member: a session row names the members whose keys made its
/// requests, `switchyard sessions --member` (and `/admin/sessions?member=`)
/// keeps one member's, and the table shows a member column.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_name_their_members_and_filter_by_one() {
    let p = SimProvider::start("p", Script::ok()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("switchyard.toml");
    std::fs::write(&config, support::provider_toml("p", &p, "[\"m\"]", "")).unwrap();
    let data = dir.path().join("data");
    let served = Served::start(&config, &data, &[("SWITCHYARD_KEY_P", "sk-p")]);
    let al = stdout(&members(&config, &data, &["add", "al"])).trim().to_string();
    let bo = stdout(&members(&config, &data, &["add", "bo"])).trim().to_string();
    for (key, session) in [(&al, "s-al"), (&al, "s-both"), (&bo, "s-both"), (&bo, "s-bo")] {
        let r = client()
            .post(format!("http://{}/v1/chat/completions", served.addr))
            .bearer_auth(key)
            .header("x-switchyard-session-id", session)
            .json(&serde_json::json!({ "model": "m", "messages": [{ "role": "user", "content": "hi" }] }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    let sessions = |args: &[&str]| {
        let out = switchyard()
            .arg("sessions")
            .args(args)
            .args(["--listen", &served.addr, "--config"])
            .arg(&config)
            .arg("--data-dir")
            .arg(&data)
            .output()
            .unwrap();
        assert!(out.status.success(), "sessions {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let named = |args: &[&str]| {
        let page: serde_json::Value = serde_json::from_str(&sessions(args)).unwrap();
        let mut rows: Vec<(String, Vec<String>, i64)> = page["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                let members = s["members"].as_array().unwrap().iter().map(|m| m.as_str().unwrap().to_string());
                (s["id"].as_str().unwrap().to_string(), members.collect(), s["requests"].as_i64().unwrap())
            })
            .collect();
        rows.sort();
        rows
    };
    let strings = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
    assert_eq!(
        named(&["--json"]),
        [
            ("s-al".to_string(), strings(&["al"]), 1),
            ("s-bo".to_string(), strings(&["bo"]), 1),
            ("s-both".to_string(), strings(&["al", "bo"]), 2),
        ]
    );
    assert_eq!(
        named(&["--member", "al", "--json"]),
        [("s-al".to_string(), strings(&["al"]), 1), ("s-both".to_string(), strings(&["al"]), 1)],
        "only al's requests, in the sessions they are in"
    );
    let table = sessions(&[]);
    let header = table.lines().next().unwrap();
    assert!(header.ends_with("member"), "{table}");
    assert!(table.lines().any(|l| l.starts_with("s-both") && l.ends_with("al,bo")), "{table}");
    let shown = sessions(&["show", "s-both"]);
    assert!(shown.contains("member    al, bo"), "{shown}");
}

/// `connect --member-key` writes the member's key, not the access token,
/// into the tool's settings; a key that is not a member's is refused.
#[test]
fn connect_writes_a_members_key_into_a_tools_settings() {
    let dir = tempfile::tempdir().unwrap();
    let (home, data) = (dir.path().join("home"), dir.path().join("data"));
    std::fs::create_dir_all(&home).unwrap();
    let config = dir.path().join("switchyard.toml");
    std::fs::write(&config, "[server]\naccess_token = true\n").unwrap();
    let key = format!("sy-m-{}", "ab".repeat(32));
    let connect = |key: &str| {
        switchyard()
            .args(["connect", "claude", "--member-key", "--config"])
            .arg(&config)
            .arg("--data-dir")
            .arg(&data)
            .env("HOME", &home)
            .env_remove("CLAUDE_CONFIG_DIR")
            .env("SWITCHYARD_MEMBER_KEY", key)
            .output()
            .unwrap()
    };
    assert!(!connect("sy-not-a-member").status.success());
    let out = connect(&key);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let settings = std::fs::read_to_string(home.join(".claude/settings.json")).unwrap();
    assert!(settings.contains(&key), "{settings}");
    let access = std::fs::read_to_string(data.join("access-token")).unwrap_or_default();
    assert!(access.trim().is_empty() || !settings.contains(access.trim()), "the access token is not written");
}
