//! Running `switchyard` as a child process, as a user would.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod pg;
pub mod redis;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

pub fn switchyard() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_switchyard"));
    cmd.env_remove("RUST_LOG").env_remove("SWITCHYARD_CONFIG").env_remove("SWITCHYARD_LISTEN");
    cmd
}

/// A running `switchyard serve`, its address, and every log line it wrote.
pub struct Served {
    pub child: Child,
    pub addr: String,
    pub log: Arc<Mutex<Vec<String>>>,
}

/// A test that fails before `stop` still ends its gateway: a child left
/// running would outlive the test run and hold its output open.
impl Drop for Served {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl Served {
    pub fn start(config: &Path, data: &Path, envs: &[(&str, &str)]) -> Served {
        let mut cmd = switchyard();
        cmd.args(["serve", "--listen", "127.0.0.1:0", "--log-format", "json", "--config"])
            .arg(config)
            .arg("--data-dir")
            .arg(data)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let log: Arc<Mutex<Vec<String>>> = Arc::default();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let addr = loop {
            let line = lines.next().expect("serve exited before listening").unwrap();
            log.lock().unwrap().push(line.clone());
            let json: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
            if let Some(rest) = json["message"].as_str().and_then(|m| m.strip_prefix("listening on http://")) {
                break rest.to_string();
            }
        };
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        Served { child, addr, log }
    }

    /// An empty Chat request for `model`, the least a client can send.
    pub async fn chat(&self, model: &str) -> reqwest::Response {
        client()
            .post(format!("http://{}/v1/chat/completions", self.addr))
            .json(&serde_json::json!({ "model": model, "messages": [] }))
            .send()
            .await
            .unwrap()
    }

    /// SIGKILL, as a crash would; returns when it happened.
    pub fn kill_9(mut self) -> std::time::Instant {
        Command::new("kill").args(["-KILL", &self.child.id().to_string()]).status().unwrap();
        let at = std::time::Instant::now();
        let _ = self.child.wait();
        at
    }

    /// SIGTERM, and waits for a clean exit.
    pub fn stop(mut self) -> Vec<String> {
        Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().unwrap();
        assert!(self.child.wait().unwrap().success(), "serve did not exit cleanly");
        std::thread::sleep(std::time::Duration::from_millis(50));
        self.log.lock().unwrap().clone()
    }
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().tls_built_in_root_certs(false).build().unwrap()
}

/// What the Secret Service holds for `account` under Switchyard's service, read with `secret-tool`.
pub fn secret_tool_lookup(account: &str) -> Option<String> {
    let out =
        Command::new("secret-tool").args(["lookup", "service", "switchyard", "username", account]).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// A `[[providers]]` entry for a simulated OpenAI-style provider, with
/// `models` as TOML and any `extra` lines after it.
pub fn provider_toml(name: &str, sim: &switchyard_sim::SimProvider, models: &str, extra: &str) -> String {
    format!(
        "[[providers]]\nname = \"{name}\"\nkind = \"openai\"\nbase_url = \"{}\"\nmodels = {models}\n{extra}\n",
        sim.base_url()
    )
}

/// Polls `check` every `every` until it holds or `within` passes; returns
/// how long it took.
pub async fn until_every<F, Fut>(
    within: std::time::Duration,
    every: std::time::Duration,
    mut check: F,
) -> Option<std::time::Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = std::time::Instant::now();
    while start.elapsed() < within {
        if check().await {
            return Some(start.elapsed());
        }
        tokio::time::sleep(every).await;
    }
    None
}
