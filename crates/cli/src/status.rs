//! `switchyard status` and `switchyard providers enable|disable`.

use anyhow::Result;
use switchyard_core::health::ProviderView;

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

fn ms(v: Option<u64>) -> String {
    v.map_or("-".into(), |n| format!("{n}"))
}

fn state_text(p: &ProviderView) -> String {
    let until = p.state.until_ms.map(|t| {
        let now = switchyard_core::history::record::now_ms();
        format!(" ({}s)", ((t - now).max(0) + 999) / 1000)
    });
    format!("{}{}", word(p.state.state), until.unwrap_or_default())
}

/// The word an enum is sent as.
pub fn word(v: impl serde::Serialize) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        _ => "?".into(),
    }
}

pub fn row(p: &ProviderView) -> String {
    let m5 = &p.stats.m5;
    let success = m5.success_rate.map_or("-".into(), |r| format!("{:.0}%", r * 100.0));
    let keys: Vec<String> = p.keys.iter().map(|k| format!("{}…{} {}", k.label, k.last4, word(k.status))).collect();
    format!(
        "{:<20} {:<18} {:>8} {:>7} {:>7} {:>7} {:>10} {:>10}  {}",
        p.name,
        state_text(p),
        success,
        ms(m5.latency_p50_ms),
        ms(m5.latency_p95_ms),
        format!("{:.1}", m5.requests_per_minute),
        p.today.output_tokens + p.today.input_tokens,
        format!("{:.4}", p.today.cost_usd),
        if keys.is_empty() { p.state.detail.clone().unwrap_or_default() } else { keys.join(", ") }
    )
}

pub async fn status(args: StatusArgs) -> Result<()> {
    let remote = Remote::connect(&args.remote).await?;
    let providers: Vec<ProviderView> = remote.get_json("/admin/providers").await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&providers)?);
        return Ok(());
    }
    println!("gateway {}", remote.base);
    println!(
        "{:<20} {:<18} {:>8} {:>7} {:>7} {:>7} {:>10} {:>10}  keys",
        "provider", "state", "ok 5m", "p50 ms", "p95 ms", "rpm", "tokens", "cost $"
    );
    for p in &providers {
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
    let p: ProviderView = remote.post_json(&format!("/admin/providers/{name}/{verb}")).await?;
    println!("{name}: {}", state_text(&p));
    Ok(())
}
