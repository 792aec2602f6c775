//! `switchyard join` and `leave` between two real gateways: a team's
//! gateway with members, and a member's own gateway that joins it with a
//! key from `members add`, kept in the real Secret Service (`.ci/run` runs
//! this under `dbus-run-session` with an unlocked throwaway gnome-keyring).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::io::Write;
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

use support::{client, provider_toml, secret_tool_lookup, switchyard, until_every, Served};
use switchyard_sim::{Script, SimProvider};

fn run(args: &[&str], config: &Path, data: &Path, stdin: &str) -> Output {
    let mut child = switchyard()
        .args(args)
        .arg("--config")
        .arg(config)
        .arg("--data-dir")
        .arg(data)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

fn ok(out: &Output, what: &str) -> String {
    assert!(out.status.success(), "{what}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).to_string()
}

async fn chat(addr: &str) -> reqwest::Response {
    client()
        .post(format!("http://{addr}/v1/chat/completions"))
        .json(&serde_json::json!({ "model": "m", "messages": [{ "role": "user", "content": "hi" }] }))
        .send()
        .await
        .unwrap()
}

fn served_by(r: &reqwest::Response) -> String {
    r.headers().get("x-switchyard-provider").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_members_gateway_joins_the_team_is_refused_with_it_and_leaves_without_a_trace() {
    assert!(
        std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_some(),
        "the join test needs a session D-Bus with an unlocked Secret Service: run it through .ci/run"
    );
    let dir = tempfile::tempdir().unwrap();
    // The team's gateway and its provider.
    let p = SimProvider::start("p", Script::ok()).await.unwrap();
    let team_config = dir.path().join("team.toml");
    std::fs::write(&team_config, provider_toml("p", &p, "[\"m\"]", "")).unwrap();
    let team_data = dir.path().join("team");
    let team = Served::start(&team_config, &team_data, &[("SWITCHYARD_KEY_P", "sk-p")]);
    let al = ok(&run(&["members", "add", "al"], &team_config, &team_data, ""), "members add").trim().to_string();

    // The member's own gateway and provider.
    let own = SimProvider::start("own", Script::ok()).await.unwrap();
    let config = dir.path().join("mine.toml");
    let original = format!("# my own gateway\n{}", provider_toml("own", &own, "[\"m\"]", ""));
    std::fs::write(&config, &original).unwrap();
    let data = dir.path().join("mine");
    let mine = Served::start(&config, &data, &[("SWITCHYARD_KEY_OWN", "sk-own"), ("SWITCHYARD_CONFIG_POLL", "100ms")]);
    assert_eq!(served_by(&chat(&mine.addr).await), "own");

    // Plain HTTP to another machine is refused before anything changes.
    let refused = run(&["join", "http://team.example.com"], &config, &data, &format!("{al}\n"));
    assert!(!refused.status.success() && String::from_utf8_lossy(&refused.stderr).contains("--allow-insecure"));
    let said = ok(
        &run(&["join", &format!("http://{}", team.addr), "--device", "laptop"], &config, &data, &format!("{al}\n")),
        "join",
    );
    assert!(said.contains("joined") && !said.contains(&al), "{said}");
    assert_eq!(secret_tool_lookup("team").as_deref(), Some(al.as_str()), "the key is in the Secret Service");
    let written = std::fs::read_to_string(&config).unwrap();
    assert!(written.contains("kind = \"switchyard\"") && !written.contains(&al), "no key in the file:\n{written}");

    // The running gateway picks it up: served by the team, as al's.
    let through_team = until_every(Duration::from_secs(10), Duration::from_millis(100), || async {
        served_by(&chat(&mine.addr).await) == "team"
    })
    .await;
    assert!(through_team.is_some(), "the joined gateway never went through the team");
    assert!(p.calls() >= 1);

    // Revoked on the team: refused within seconds, never served here.
    let own_calls = own.calls();
    ok(&run(&["members", "revoke", "al"], &team_config, &team_data, ""), "members revoke");
    let refused_now = until_every(Duration::from_secs(5), Duration::from_millis(100), || async {
        chat(&mine.addr).await.status() == 401
    })
    .await;
    assert!(refused_now.is_some(), "the revoked member was still served");
    let r = chat(&mine.addr).await;
    assert_eq!(r.headers()["x-switchyard-error"], "key_revoked");
    assert_eq!(own.calls(), own_calls, "the team's refusal is never served by the member's own provider");

    // Leaving: the config as it was, byte for byte; the key gone.
    let said = ok(&run(&["leave"], &config, &data, ""), "leave");
    assert!(said.contains("left"), "{said}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), original, "the config back byte for byte");
    assert_eq!(secret_tool_lookup("team"), None, "the key is gone from the Secret Service");
    let back_home = until_every(Duration::from_secs(10), Duration::from_millis(100), || async {
        served_by(&chat(&mine.addr).await) == "own"
    })
    .await;
    assert!(back_home.is_some(), "served by its own provider again");
    mine.stop();
    team.stop();
}
