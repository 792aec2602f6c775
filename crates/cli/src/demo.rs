//! `switchyard demo`: the real gateway in front of simulated providers that
//! fail now and then, with generated traffic, so fallbacks and spend can be
//! watched with no keys at all.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rand::seq::IndexedRandom;
use secrecy::ExposeSecret;
use serde_json::json;
use switchyard_core::secrets::MemoryStore;
use switchyard_core::Config;
use switchyard_sim::{Fault, Script, SimProvider};
use tokio::sync::oneshot;
use tracing::info;

use crate::paths;
use crate::serve::{bind, run_gateway, shutdown_signal, Files, Tokens};
use crate::ListenArgs;

#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    #[command(flatten)]
    listen: ListenArgs,
    /// Keep the demo's history here (default: a temporary folder, removed on exit).
    #[arg(long)]
    data_dir: Option<std::path::PathBuf>,
    /// Stop after this many generated requests (default: run until Ctrl-C).
    #[arg(long)]
    requests: Option<u64>,
    /// Generated requests per second.
    #[arg(long, default_value_t = 2.0)]
    rate: f64,
}

/// The simulated providers: a flaky primary and a steady backup per protocol.
async fn providers() -> Result<Vec<(SimProvider, &'static str)>> {
    let stream = |s: Script| s.stream(24, Duration::from_millis(25));
    Ok(vec![
        (
            SimProvider::start(
                "demo-openai",
                stream(Script::ok().latency(Duration::from_millis(40)))
                    .chaos(0.15, Fault::status(503))
                    .chaos(0.05, Fault::status_with(429, &[("retry-after", "2")])),
            )
            .await?,
            "openai",
        ),
        (SimProvider::start("demo-backup", stream(Script::ok().latency(Duration::from_millis(90)))).await?, "openai"),
        (
            SimProvider::start(
                "demo-anthropic",
                stream(Script::ok().latency(Duration::from_millis(60))).chaos(0.12, Fault::status(529)),
            )
            .await?,
            "anthropic",
        ),
        (
            SimProvider::start("demo-anthropic-backup", stream(Script::ok().latency(Duration::from_millis(120))))
                .await?,
            "anthropic",
        ),
    ])
}

fn config_text(sims: &[(SimProvider, &str)], listen: SocketAddr) -> String {
    let mut text = format!("[server]\nlisten = \"{listen}\"\n");
    for (sim, kind) in sims {
        let models = if *kind == "openai" {
            r#"{ "gpt-4o-mini" = "gpt-4o-mini", "gpt-4.1" = "gpt-4.1" }"#
        } else {
            r#"["claude-sonnet-4-5"]"#
        };
        text.push_str(&format!(
            "\n[[providers]]\nname = \"{}\"\nkind = \"{kind}\"\nbase_url = \"{}\"\nmodels = {models}\n",
            sim.name(),
            sim.base_url()
        ));
    }
    text.push_str("\n[[routes]]\nmodel = \"gpt-4o-mini\"\nchain = [\"demo-openai\", \"demo-backup\"]\n");
    text.push_str(
        "\n[[routes]]\nmodel = \"claude-sonnet-4-5\"\nchain = [\"demo-anthropic\", \"demo-anthropic-backup\"]\n",
    );
    text
}

pub async fn run(args: DemoArgs) -> Result<()> {
    let sims = providers().await.context("cannot start the simulated providers")?;
    let listen = args.listen.listen.unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 4141)));
    let text = config_text(&sims, listen);
    let keys = sims.iter().fold(MemoryStore::new(), |k, (sim, _)| k.with(sim.name(), "demo", "demo-key-not-secret"));
    let listener = bind(listen).await?;
    let addr = listener.local_addr()?;
    info!("demo: simulated providers fail now and then; watch the fallbacks below");

    let (done_tx, done_rx) = oneshot::channel();
    let temp = tempfile::tempdir().context("cannot make a temporary data folder")?;
    let data_dir = args.data_dir.clone().unwrap_or_else(|| temp.path().to_path_buf());
    std::fs::create_dir_all(&data_dir)?;
    // The demo's config is a file, so the dashboard can edit it too.
    let config_file = data_dir.join("demo.toml");
    std::fs::write(&config_file, &text).with_context(|| format!("cannot write {}", config_file.display()))?;
    let config = Config::parse(&text, &config_file)?;
    let admin = paths::admin_token(&data_dir)?;
    let ticket_token = admin.expose_secret().to_string();
    let traffic = tokio::spawn(async move {
        announce_dashboard(addr, &ticket_token).await;
        generate(addr, args.requests, args.rate, done_tx).await
    });
    // Ctrl-C or SIGTERM stops the traffic at once, then the gateway: new
    // requests to a gateway that is shutting down would only fail.
    let stop_traffic = traffic.abort_handle();
    let shutdown = async move {
        tokio::select! {
            () = shutdown_signal() => stop_traffic.abort(),
            _ = done_rx => {},
        }
    };
    let tokens = Tokens { admin, access: None };
    let files = Files { data_dir: Some(data_dir), config: Some(config_file) };
    run_gateway(listener, config, Arc::new(keys), files, tokens, shutdown).await?;
    match traffic.await {
        Err(e) if e.is_cancelled() => Ok(()),
        Err(e) => Err(e).context("traffic generator"),
        Ok(0) => Ok(()),
        Ok(failed) => anyhow::bail!("{failed} generated request(s) were not served"),
    }
}

/// Prints a one-time sign-in link to the dashboard, as `switchyard open --print` would.
async fn announce_dashboard(gateway: SocketAddr, admin_token: &str) {
    let client = reqwest::Client::builder().no_proxy().build().unwrap_or_default();
    let answer = client.post(format!("http://{gateway}/admin/session")).bearer_auth(admin_token).send().await;
    let path = match answer {
        Ok(r) => r.json::<serde_json::Value>().await.ok().and_then(|v| v["path"].as_str().map(str::to_string)),
        Err(_) => None,
    };
    match path {
        Some(path) => println!("dashboard: http://{gateway}{path}  (the link signs you in once)"),
        None => println!("dashboard: http://{gateway}/ui/"),
    }
}

/// Sends requests at `rate` per second; returns how many were not served.
async fn generate(gateway: SocketAddr, limit: Option<u64>, rate: f64, done: oneshot::Sender<()>) -> u64 {
    let client = reqwest::Client::builder().no_proxy().build().unwrap_or_default();
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate.clamp(0.1, 100.0)));
    let mut failed = 0;
    let mut sent = 0u64;
    while limit.is_none_or(|n| sent < n) {
        tick.tick().await;
        sent += 1;
        if !one_request(&client, gateway).await {
            failed += 1;
        }
    }
    let _ = done.send(());
    failed
}

/// The provider first in the demo's route for the request's model.
fn first_choice(body: &serde_json::Value) -> &'static str {
    if body["model"] == "claude-sonnet-4-5" {
        "demo-anthropic"
    } else {
        "demo-openai"
    }
}

async fn one_request(client: &reqwest::Client, gateway: SocketAddr) -> bool {
    let kinds = ["chat", "chat-stream", "responses", "messages", "messages-stream"];
    let kind = kinds.choose(&mut rand::rng()).copied().unwrap_or("chat");
    let (path, body) = match kind {
        "chat" | "chat-stream" => (
            "/v1/chat/completions",
            json!({ "model": "gpt-4o-mini", "stream": kind == "chat-stream", "messages": [{ "role": "user", "content": "Say hello" }] }),
        ),
        "responses" => ("/v1/responses", json!({ "model": "gpt-4o-mini", "input": "Say hello" })),
        _ => (
            "/v1/messages",
            json!({ "model": "claude-sonnet-4-5", "max_tokens": 64, "stream": kind == "messages-stream", "messages": [{ "role": "user", "content": "Say hello" }] }),
        ),
    };
    let started = Instant::now();
    let result = client.post(format!("http://{gateway}{path}")).bearer_auth("demo").json(&body).send().await;
    let response = match result {
        Ok(r) => r,
        Err(e) => {
            println!("ERR {path}: {e}");
            return false;
        }
    };
    let status = response.status();
    let header = |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or("-").to_string();
    let (provider, attempts) = (header("x-switchyard-provider"), header("x-switchyard-attempts"));
    let complete = response.bytes().await.is_ok();
    let note = match (status.is_success(), provider == first_choice(&body), attempts.as_str()) {
        (false, _, _) | (true, true, "1") => "",
        (true, true, _) => "  ← retry",
        (true, false, _) => "  ← fallback",
    };
    println!(
        "{} {kind:<15} {:<18} via {provider:<22} attempts {attempts} {:>5} ms{note}",
        status.as_u16(),
        body["model"].as_str().unwrap_or("-"),
        started.elapsed().as_millis()
    );
    status.is_success() && complete
}
