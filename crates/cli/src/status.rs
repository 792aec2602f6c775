//! `switchyard status` and `switchyard providers enable|disable`.

use anyhow::Result;
use switchyard_core::admin::routes::RoutesView;
use switchyard_core::team::TeamView;
use switchyard_core::telemetry::ProviderView;
use switchyard_core::upstream::strategy::{Share, Strategy};

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
        let now = switchyard_core::history::now_ms();
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

/// The table `switchyard status` prints: a header and a line per provider,
/// the name and state columns as wide as their longest entry.
pub fn table(providers: &[ProviderView]) -> Vec<String> {
    let states: Vec<String> = providers.iter().map(state_text).collect();
    let name_w = providers.iter().map(|p| p.name.chars().count()).chain([20]).max().unwrap_or(20);
    let state_w = states.iter().map(|s| s.chars().count()).chain([18]).max().unwrap_or(18);
    let line = |name: &str, state: &str, rest: [&str; 6], keys: &str| {
        let [ok, p50, p95, rpm, tokens, cost] = rest;
        format!("{name:<name_w$} {state:<state_w$} {ok:>8} {p50:>7} {p95:>7} {rpm:>7} {tokens:>10} {cost:>10}  {keys}")
    };
    let mut out = vec![line("provider", "state", ["ok 5m", "p50 ms", "p95 ms", "rpm", "tokens", "cost $"], "keys")];
    for (p, state) in providers.iter().zip(&states) {
        let m5 = &p.stats.m5;
        let keys: Vec<String> = p.keys.iter().map(|k| format!("{}…{} {}", k.label, k.last4, word(k.status))).collect();
        // A dead server's probe error says more than its keys.
        let unreachable = p.state.state == switchyard_core::telemetry::ProviderStateName::Unreachable;
        let keys =
            if keys.is_empty() || unreachable { p.state.detail.clone().unwrap_or_default() } else { keys.join(", ") };
        let numbers = [
            m5.success_rate.map_or("-".into(), |r| format!("{:.0}%", r * 100.0)),
            ms(m5.latency_p50_ms),
            ms(m5.latency_p95_ms),
            format!("{:.1}", m5.requests_per_minute),
            (p.today.output_tokens + p.today.input_tokens).to_string(),
            format!("{:.4}", p.today.cost_usd),
        ];
        out.push(line(&p.name, state, numbers.each_ref().map(String::as_str), &keys));
    }
    out
}

/// What `switchyard status` says of the team: nothing for a lone gateway;
/// else Redis's state, then a line per live instance, this one marked.
pub fn team_lines(team: &TeamView, now_ms: i64) -> Vec<String> {
    if !team.enabled {
        return Vec::new();
    }
    let redis = team.redis.as_deref().unwrap_or("?");
    let namespace = team.namespace.as_deref().unwrap_or("?");
    let mut out = vec![format!(
        "team {namespace} on {redis}: {}, {} instance(s), history on {}",
        team.state,
        team.members.len(),
        team.history
    )];
    let name_w = team.members.iter().map(|m| m.name.chars().count()).chain([8]).max().unwrap_or(8);
    for m in &team.members {
        let me = if m.name == team.instance { "  (this one)" } else { "" };
        let seen = ((now_ms - m.seen_at).max(0) as f64 / 1000.0).round();
        out.push(format!(
            "  {:<name_w$} {:<21} v{:<8} {:>8} requests  seen {seen}s ago{me}",
            m.name, m.address, m.version, m.requests
        ));
    }
    out
}

/// What `switchyard status` says of the history: where it is and whether
/// it keeps up.
pub fn history_line(h: &switchyard_core::history::HistoryStatus) -> String {
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    let mut line = match h.state.as_str() {
        "keeping_up" => format!("history on {}: keeping up", h.backend),
        state => format!(
            "history on {}: {} for {:.0}s, {} requests in the spool ({:.1} of {:.0} MiB)",
            h.backend,
            state.replace('_', " "),
            h.lag_ms as f64 / 1000.0,
            h.spooled,
            mib(h.spool_bytes),
            mib(h.spool_limit_bytes)
        ),
    };
    if let Some(error) = &h.error {
        line.push_str(&format!(": {error}"));
    }
    if h.lost > 0 {
        line.push_str(&format!(" ({} records lost)", h.lost));
    }
    line
}

pub async fn status(args: StatusArgs) -> Result<()> {
    let remote = Remote::connect(&args.remote).await?;
    let providers: Vec<ProviderView> = remote.get_json("/admin/providers").await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&providers)?);
        return Ok(());
    }
    println!("gateway {}", remote.base);
    // A gateway from before team mode has no /admin/team: it is alone.
    if let Ok(team) = remote.get_json::<TeamView>("/admin/team").await {
        for line in team_lines(&team, switchyard_core::history::now_ms()) {
            println!("{line}");
        }
        if let Some(history) = &team.history_status {
            println!("{}", history_line(history));
        }
    }
    for line in table(&providers) {
        println!("{line}");
    }
    // A gateway from before routing strategies has no /admin/routes.
    if let Ok(routes) = remote.get_json::<RoutesView>("/admin/routes").await {
        for line in route_lines(&routes) {
            println!("{line}");
        }
    }
    Ok(())
}

/// A line per route: its model, strategy, chain (with weights) and where
/// its requests went lately; then the models without a route, when any
/// were served or their strategy is not the default.
pub fn route_lines(view: &RoutesView) -> Vec<String> {
    let minutes = view.split_window_s / 60;
    let split = |shares: &[Share]| -> String {
        if shares.iter().all(|s| s.requests == 0) {
            return format!("no requests in {minutes}m");
        }
        let parts: Vec<String> =
            shares.iter().map(|s| format!("{} {:.0}% ({})", s.provider, s.share * 100.0, s.requests)).collect();
        format!("{} in {minutes}m", parts.join(", "))
    };
    let model_w = view.routes.iter().map(|r| r.model.chars().count()).chain([12]).max().unwrap_or(12);
    let mut out = Vec::new();
    for r in &view.routes {
        let chain: Vec<String> = r
            .chain
            .iter()
            .map(|c| match c.weight {
                Some(w) => format!("{}×{w}", c.provider),
                None => c.provider.clone(),
            })
            .collect();
        let bound = r.max_latency_ms.map(|ms| format!(" ≤{ms}ms")).unwrap_or_default();
        let strategy = format!("{}{bound}", word(r.strategy));
        let hedge = r.hedge_after.as_ref().map(|after| format!(", hedged after {after}")).unwrap_or_default();
        let (chain, split) = (chain.join(" → "), split(&r.split));
        out.push(format!("route {:<model_w$} {strategy:<12} [{chain}]  {split}{hedge}", r.model));
    }
    let u = &view.unrouted;
    if !u.split.is_empty() || u.strategy != Strategy::Ordered {
        let other = "(other)";
        out.push(format!("route {other:<model_w$} {:<12} [by model]  {}", word(u.strategy), split(&u.split)));
    }
    out
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn provider(name: &str) -> ProviderView {
        let w = serde_json::to_value(switchyard_core::telemetry::Window::default()).unwrap();
        serde_json::from_value(serde_json::json!({
            "name": name, "kind": "openai", "base_url": "http://x/v1", "enabled": true,
            "state": "rate_limited", "until_ms": null, "detail": null, "breaker": "closed",
            "passive_healthy": true, "models": [], "keys": [], "probe": false,
            "today": { "input_tokens": 1, "output_tokens": 2, "cost_usd": 0.5 },
            "stats": { "m1": w, "m5": w, "m60": w },
        }))
        .unwrap()
    }

    #[test]
    fn the_team_is_a_line_for_redis_then_one_per_instance_and_nothing_alone() {
        let member = |name: &str, seen_at: i64| switchyard_core::team::Member {
            name: name.into(),
            id: format!("id-{name}"),
            started_at: 1,
            version: "0.1.0".into(),
            address: "10.0.0.1:4141".into(),
            requests: 42,
            seen_at,
        };
        let team = TeamView {
            enabled: true,
            instance: "gw-b".into(),
            state: "connected".into(),
            redis: Some("redis://:***@10.0.0.5:6379/0".into()),
            namespace: Some("switchyard".into()),
            history: "sqlite".into(),
            history_status: None,
            members: vec![member("gw-a", 9_000), member("gw-b", 10_000)],
        };
        let lines = team_lines(&team, 10_000);
        assert_eq!(
            lines[0],
            "team switchyard on redis://:***@10.0.0.5:6379/0: connected, 2 instance(s), history on sqlite"
        );
        assert!(lines[1].contains("gw-a") && lines[1].contains("seen 1s ago") && !lines[1].contains("this one"));
        assert!(lines[2].contains("gw-b") && lines[2].ends_with("(this one)"), "{lines:?}");
        assert!(lines[2].contains("42 requests"));
        assert!(team_lines(&TeamView::solo("h:4141", "sqlite"), 0).is_empty());
    }

    #[test]
    fn the_history_line_says_whether_it_keeps_up_and_what_waits() {
        let mut h = switchyard_core::history::HistoryStatus {
            backend: "postgres".into(),
            state: "keeping_up".into(),
            spooled: 0,
            spool_bytes: 0,
            spool_limit_bytes: 256 * 1024 * 1024,
            pending: 0,
            lag_ms: 0,
            last_commit_ms: Some(1),
            lost: 0,
            error: None,
        };
        assert_eq!(history_line(&h), "history on postgres: keeping up");
        h.state = "behind".into();
        h.lag_ms = 12_400;
        h.spooled = 1234;
        h.spool_bytes = 3 * 1024 * 1024;
        h.error = Some("connection refused".into());
        assert_eq!(
            history_line(&h),
            "history on postgres: behind for 12s, 1234 requests in the spool (3.0 of 256 MiB): connection refused"
        );
    }

    #[test]
    fn a_route_is_a_line_with_its_strategy_chain_and_split() {
        use switchyard_core::admin::routes::{ChainEntry, RouteView, UnroutedView};
        let share = |p: &str, requests, share| Share { provider: p.into(), requests, share };
        let entry = |p: &str, weight| ChainEntry { provider: p.into(), weight };
        let view = RoutesView {
            routes: vec![
                RouteView {
                    model: "gpt-4o".into(),
                    strategy: Strategy::Weighted,
                    chain: vec![entry("a", Some(9)), entry("b", Some(1))],
                    max_latency_ms: None,
                    hedge_after: None,
                    hedge_max_share: None,
                    split: vec![share("a", 90, 0.9), share("b", 10, 0.1)],
                },
                RouteView {
                    model: "claude".into(),
                    strategy: Strategy::Cheapest,
                    chain: vec![entry("c", None), entry("d", None)],
                    max_latency_ms: Some(2000),
                    hedge_after: Some("300ms".into()),
                    hedge_max_share: Some(0.1),
                    split: Vec::new(),
                },
            ],
            unrouted: UnroutedView { strategy: Strategy::Ordered, split: Vec::new() },
            split_window_s: 300,
        };
        assert_eq!(
            route_lines(&view),
            [
                "route gpt-4o       weighted     [a×9 → b×1]  a 90% (90), b 10% (10) in 5m",
                "route claude       cheapest ≤2000ms [c → d]  no requests in 5m, hedged after 300ms",
            ]
        );
    }

    #[test]
    fn a_long_provider_name_widens_its_column_instead_of_shifting_the_row() {
        let lines = table(&[provider("a"), provider("a-provider-with-a-very-long-name")]);
        let column = |line: &str| line.find("rate_limited").or_else(|| line.find("state")).unwrap();
        assert!(lines.iter().all(|l| column(l) == column(&lines[0])), "{lines:#?}");
        let tokens = |line: &str| line.find(" 3 ").unwrap();
        assert_eq!(tokens(&lines[1]), tokens(&lines[2]), "{lines:#?}");
    }

    #[test]
    fn an_unreachable_provider_shows_its_probe_error_instead_of_its_keys() {
        let mut p = provider("ollama");
        p.state.state = switchyard_core::telemetry::ProviderStateName::Unreachable;
        p.state.detail = Some("the probe got no answer: connection refused".into());
        p.keys = serde_json::from_value(serde_json::json!([
            { "label": "main", "last4": "abcd", "status": "ok", "detail": null }
        ]))
        .unwrap();
        let lines = table(&[p]);
        assert!(lines[1].contains("unreachable") && lines[1].ends_with("connection refused"), "{lines:#?}");
    }
}
