//! Keys in the real OS keychain: on Linux, the Secret Service. `.ci/run`
//! runs the tests under `dbus-run-session` with an unlocked throwaway
//! gnome-keyring.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::io::Write;
use std::path::Path;
use std::process::{Output, Stdio};

use support::{provider_toml, secret_tool_lookup, switchyard, Served};
use switchyard_sim::{Script, SimProvider};

/// `switchyard keys set`, with the key on standard input as a user would paste it.
fn keys_set(provider: &str, key: &str, config: &Path, data: &Path, envs: &[(&str, &str)]) -> Output {
    let mut set = switchyard()
        .args(["keys", "set", provider, "--config"])
        .arg(config)
        .arg("--data-dir")
        .arg(data)
        .envs(envs.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    set.stdin.take().unwrap().write_all(format!("{key}\n").as_bytes()).unwrap();
    set.wait_with_output().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_set_with_the_cli_lives_in_the_keychain_serves_and_goes() {
    assert!(
        std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_some(),
        "the keychain test needs a session D-Bus with an unlocked Secret Service: run it through .ci/run"
    );
    let sim = SimProvider::start("kc", Script::ok()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("switchyard.toml");
    std::fs::write(&config, provider_toml("kcprov", &sim, "[\"m\"]", "")).unwrap();
    let data = dir.path().join("data");
    let secret = "sk-keychain-test-4321";

    let out = keys_set("kcprov", secret, &config, &data, &[]);
    assert!(out.status.success(), "keys set failed: {}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("…4321") && !said.contains(secret), "{said}");

    assert_eq!(secret_tool_lookup("kcprov").as_deref(), Some(secret), "the key is in the Secret Service");

    let list =
        switchyard().args(["keys", "list", "--config"]).arg(&config).arg("--data-dir").arg(&data).output().unwrap();
    let listed = String::from_utf8_lossy(&list.stdout);
    assert!(listed.contains("kcprov") && listed.contains("keychain") && listed.contains("…4321"), "{listed}");
    assert!(!listed.contains(secret));

    let served = Served::start(&config, &data, &[]);
    let r = served.chat("m").await;
    assert_eq!(r.status(), 200);
    assert_eq!(sim.requests()[0].headers["authorization"], format!("Bearer {secret}").as_str());
    let log = served.stop();
    assert!(!log.iter().any(|l| l.contains(secret)), "the key reached the log");

    let rm = switchyard()
        .args(["keys", "rm", "kcprov", "--config"])
        .arg(&config)
        .arg("--data-dir")
        .arg(&data)
        .output()
        .unwrap();
    assert!(rm.status.success(), "{}", String::from_utf8_lossy(&rm.stderr));
    assert_eq!(secret_tool_lookup("kcprov"), None, "the key is gone from the Secret Service");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_keychain_the_gateway_says_so_and_serves_from_the_environment() {
    let sim = SimProvider::start("envp", Script::ok()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("switchyard.toml");
    std::fs::write(&config, provider_toml("envp", &sim, "[\"m\"]", "")).unwrap();
    let data = dir.path().join("data");
    let no_bus =
        [("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/bus"), ("SWITCHYARD_KEY_ENVP", "sk-from-env-1234")];

    let out = keys_set("envp", "sk-never-stored", &config, &data, &no_bus);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("keychain unavailable") && err.contains("SWITCHYARD_KEY_"), "{err}");

    let served = Served::start(&config, &data, &no_bus);
    let r = served.chat("m").await;
    assert_eq!(r.status(), 200);
    assert_eq!(sim.requests()[0].headers["authorization"], "Bearer sk-from-env-1234");
    let log = served.stop().join("\n");
    assert!(log.contains("keychain unavailable"), "{log}");
}
