//! `switchyard status` and `switchyard providers enable|disable`.

use anyhow::Result;
use serde_json::Value;

use crate::remote::{Remote, RemoteArgs};

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// The providers as JSON instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    remote: RemoteArgs,
}

#[derive(Debug, clap::Args)]
pub struct ProvidersArgs {
    #[command(subcommand)]
    command: ProvidersCommand,
    #[command(flatten)]
    remote: RemoteArgs,
}

#[derive(Debug, clap::Subcommand)]
enum ProvidersCommand {
    /// Send traffic to this provider again.
    Enable { name: String },
    /// Stop sending traffic to this provider (kept across restarts).
    Disable { name: String },
}

fn ms(v: &Value) -> String {
    v.as_u64().map_or("-".into(), |n| format!("{n}"))
}

fn state_text(p: &Value) -> String {
    let state = p["state"].as_str().unwrap_or("?");
    let until = p["until_ms"].as_i64().map(|t| {
        let now = switchyard_core::history::record::now_ms();
        format!(" ({}s)", ((t - now).max(0) + 999) / 1000)
    });
    format!("{state}{}", until.unwrap_or_default())
}

pub fn row(p: &Value) -> String {
    let m5 = &p["stats"]["m5"];
    let success = m5["success_rate"].as_f64().map_or("-".into(), |r| format!("{:.0}%", r * 100.0));
    let keys: Vec<String> = p["keys"]
        .as_array()
        .map(|ks| {
            ks.iter()
                .map(|k| {
                    format!(
                        "{}…{} {}",
                        k["label"].as_str().unwrap_or(""),
                        k["last4"].as_str().unwrap_or(""),
                        k["status"].as_str().unwrap_or("")
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    format!(
        "{:<20} {:<18} {:>8} {:>7} {:>7} {:>7} {:>10} {:>10}  {}",
        p["name"].as_str().unwrap_or("?"),
        state_text(p),
        success,
        ms(&m5["latency_p50_ms"]),
        ms(&m5["latency_p95_ms"]),
        format!("{:.1}", m5["requests_per_minute"].as_f64().unwrap_or(0.0)),
        p["today"]["output_tokens"].as_u64().unwrap_or(0) + p["today"]["input_tokens"].as_u64().unwrap_or(0),
        format!("{:.4}", p["today"]["cost_usd"].as_f64().unwrap_or(0.0)),
        if keys.is_empty() { p["detail"].as_str().unwrap_or("").to_string() } else { keys.join(", ") }
    )
}

pub async fn status(args: StatusArgs) -> Result<()> {
    let remote = Remote::connect(&args.remote).await?;
    let providers = remote.get_json("/admin/providers").await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&providers)?);
        return Ok(());
    }
    println!("gateway {}", remote.base);
    println!(
        "{:<20} {:<18} {:>8} {:>7} {:>7} {:>7} {:>10} {:>10}  keys",
        "provider", "state", "ok 5m", "p50 ms", "p95 ms", "rpm", "tokens", "cost $"
    );
    for p in providers.as_array().into_iter().flatten() {
        println!("{}", row(p));
    }
    Ok(())
}

pub async fn providers(args: ProvidersArgs) -> Result<()> {
    let remote = Remote::connect(&args.remote).await?;
    let (name, verb) = match &args.command {
        ProvidersCommand::Enable { name } => (name, "enable"),
        ProvidersCommand::Disable { name } => (name, "disable"),
    };
    let p = remote.post_json(&format!("/admin/providers/{name}/{verb}")).await?;
    println!("{name}: {}", state_text(&p));
    Ok(())
}
