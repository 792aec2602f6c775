//! `switchyard connect` with the real Claude Code and Codex: after it, with
//! no variables of ours in their environment, both answer through the
//! gateway (in front of simulated providers, the local access token
//! required); after `disconnect` their settings files are byte for byte
//! what the user had.
//!
//! The CLIs come from npm at the versions in `tests/clis/package.json`:
//! `.ci/run` installs them (`npm ci --prefix tests/clis`);
//! `SWITCHYARD_TEST_CLIS` names another `node_modules/.bin`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use support::{switchyard, Served};
use switchyard_sim::{Script, SimProvider};

fn clis() -> PathBuf {
    if let Some(dir) = std::env::var_os("SWITCHYARD_TEST_CLIS") {
        return PathBuf::from(dir);
    }
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/clis/node_modules/.bin");
    assert!(
        bin.join("claude").exists() && bin.join("codex").exists(),
        "no Claude Code or Codex: run `npm ci --prefix tests/clis` at the workspace root, or set SWITCHYARD_TEST_CLIS"
    );
    bin
}

/// A command with an environment of a user's shell, nothing of ours: PATH
/// (node and the CLIs), HOME, and nothing that names the gateway.
fn clean(program: &Path, home: &Path) -> Command {
    let mut cmd = Command::new(program);
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", clis().display());
    cmd.env_clear().env("PATH", path).env("HOME", home).env("LANG", "C.UTF-8").current_dir(home);
    cmd.stdin(Stdio::null());
    cmd
}

fn run(cmd: &mut Command, what: &str) -> String {
    let out: Output = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{what} failed ({}):\n{text}", out.status);
    text
}

fn switchyard_in(home: &Path, data: &Path, config: &Path, addr: &str, args: &[&str]) -> String {
    let mut cmd = switchyard();
    cmd.args(args).args(["--listen", addr, "--config"]).arg(config).arg("--data-dir").arg(data);
    cmd.env("HOME", home)
        .env_remove("CODEX_HOME")
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("SWITCHYARD_ACCESS_TOKEN");
    run(&mut cmd, &format!("switchyard {}", args.join(" ")))
}

const CLAUDE_SETTINGS: &str = r#"{
  "theme": "dark",
  "permissions": {
    "allow": ["Read"]
  },
  "env": {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1"
  }
}
"#;

const CODEX_CONFIG: &str =
    "# my Codex settings\napproval_policy = \"never\" # no prompts\n\n[analytics]\nenabled = false\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_and_codex_answer_through_the_gateway_after_connect() {
    let an = SimProvider::start("an", Script::ok()).await.unwrap();
    let oa = SimProvider::start("oa", Script::ok()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (home, data) = (dir.path().join("home"), dir.path().join("data"));
    std::fs::create_dir_all(home.join(".claude")).unwrap();
    std::fs::create_dir_all(home.join(".codex")).unwrap();
    let claude_settings = home.join(".claude/settings.json");
    let codex_config = home.join(".codex/config.toml");
    std::fs::write(&claude_settings, CLAUDE_SETTINGS).unwrap();
    std::fs::write(&codex_config, CODEX_CONFIG).unwrap();
    let config = dir.path().join("switchyard.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\naccess_token = true\n\n\
             [[providers]]\nname = \"an\"\nkind = \"anthropic\"\nbase_url = \"{}\"\nmodels = {{ \"claude-sim\" = \"claude-sim\" }}\n\n\
             [[providers]]\nname = \"oa\"\nkind = \"openai\"\nbase_url = \"{}\"\nmodels = {{ \"gpt-sim\" = \"gpt-sim\" }}\n",
            an.base_url(),
            oa.base_url()
        ),
    )
    .unwrap();
    let served = Served::start(&config, &data, &[("SWITCHYARD_KEY_AN", "sk-an"), ("SWITCHYARD_KEY_OA", "sk-oa")]);
    let addr = served.addr.clone();

    switchyard_in(&home, &data, &config, &addr, &["connect", "claude", "--model", "claude-sim"]);
    switchyard_in(&home, &data, &config, &addr, &["connect", "codex", "--model", "gpt-sim"]);
    let token = std::fs::read_to_string(data.join("access-token")).unwrap();
    let written = std::fs::read_to_string(&claude_settings).unwrap();
    assert!(written.contains(token.trim()), "the access token is what Claude Code sends: {written}");
    assert!(!written.contains("sk-an") && !std::fs::read_to_string(&codex_config).unwrap().contains("sk-oa"));

    let claude = run(clean(&clis().join("claude"), &home).args(["-p", "Say hello"]), "claude -p");
    assert!(claude.contains("Hello from an."), "Claude Code's answer came from the simulated provider:\n{claude}");
    let codex =
        run(clean(&clis().join("codex"), &home).args(["exec", "--skip-git-repo-check", "Say hello"]), "codex exec");
    assert!(codex.contains("Hello from oa."), "Codex's answer came from the simulated provider:\n{codex}");
    // Through the gateway: each provider saw its own key, never the client's token.
    for seen in an.requests().iter().chain(oa.requests().iter()) {
        let auth = seen.headers.get("x-api-key").or_else(|| seen.headers.get("authorization")).unwrap();
        assert!(auth.to_str().unwrap().contains("sk-"), "{auth:?}");
    }

    switchyard_in(&home, &data, &config, &addr, &["disconnect", "claude"]);
    switchyard_in(&home, &data, &config, &addr, &["disconnect", "codex"]);
    assert_eq!(std::fs::read(&claude_settings).unwrap(), CLAUDE_SETTINGS.as_bytes());
    assert_eq!(std::fs::read(&codex_config).unwrap(), CODEX_CONFIG.as_bytes());
    served.stop();
}
