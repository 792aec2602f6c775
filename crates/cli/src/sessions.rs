//! `switchyard sessions` and `switchyard statusline`: coding agents'
//! sessions, read from the running gateway's admin API as `status` is.
//!
//! `statusline` is the command Claude Code runs to draw its status line
//! (`switchyard connect claude --statusline` sets it up). It runs after
//! every turn, so it must be quick and must never get in the way: with the
//! gateway down, or the session unknown, it prints nothing and succeeds.

use std::io::Read;
use std::time::Duration;

use anyhow::Result;
use serde::Deserialize;
use serde_json::Value;
use switchyard_core::history::{SessionPage, SessionSummary};

use crate::remote::{Remote, RemoteArgs};

/// How long `statusline` waits to reach the gateway, then for its answer.
const STATUS_CONNECT: Duration = Duration::from_millis(200);
const STATUS_ANSWER: Duration = Duration::from_millis(500);

#[derive(Debug, clap::Args)]
pub struct SessionsArgs {
    #[command(subcommand)]
    show: Option<Action>,
    /// Only sessions of this client: claude-code, codex, gemini-cli, or a user agent's product name.
    #[arg(long)]
    client: Option<String>,
    // A week back unless `--since` says otherwise (the admin API's default).
    #[command(flatten)]
    list: crate::list::ListArgs,
    #[command(flatten)]
    remote: RemoteArgs,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// One session: its figures, what served it, its requests.
    Show {
        id: String,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, clap::Args)]
pub struct StatuslineArgs {
    #[command(flatten)]
    remote: RemoteArgs,
}

pub async fn run(args: SessionsArgs) -> Result<()> {
    let remote = Remote::connect(&args.remote).await?;
    if let Some(Action::Show { id, json }) = &args.show {
        let detail: Value = remote.get_query(&format!("/admin/sessions/{}", segment(id)), &[]).await?;
        if *json || args.list.json {
            println!("{}", serde_json::to_string_pretty(&detail)?);
        } else {
            print!("{}", show_text(&detail));
        }
        return Ok(());
    }
    let mut query = vec![("limit", args.list.limit.to_string())];
    let filters = [
        ("client", &args.client),
        ("model", &args.list.model),
        ("provider", &args.list.provider),
        ("member", &args.list.member),
    ];
    for (name, value) in filters {
        if let Some(v) = value {
            query.push((name, v.clone()));
        }
    }
    if let Some(since) = &args.list.since {
        query.push(("since", since.clone()));
    }
    let page: SessionPage = remote.get_query("/admin/sessions", &query).await?;
    if args.list.json {
        println!("{}", serde_json::to_string_pretty(&page)?);
        return Ok(());
    }
    for line in table(&page.sessions) {
        println!("{line}");
    }
    Ok(())
}

/// A path segment with everything but the unreserved characters escaped.
fn segment(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn percent(rate: Option<f64>) -> String {
    rate.map_or("-".into(), |r| format!("{:.0}%", r * 100.0))
}

fn dollars(cost: Option<f64>) -> String {
    cost.map_or("-".into(), |c| format!("{c:.4}"))
}

/// The list's table: a header and a line per session, with the members
/// whose keys made its requests when any session has one.
pub fn table(sessions: &[SessionSummary]) -> Vec<String> {
    let with_members = sessions.iter().any(|s| !s.members.is_empty());
    let line = |cells: [&str; 13]| {
        let [id, client, first, last, turns, reqs, tokens, cache, writes, cost, fb, err, members] = cells;
        let text = format!(
            "{id:<38} {client:<18} {first:<19} {last:<19} {turns:>5} {reqs:>5} {tokens:>13} {cache:>6} {writes:>9} {cost:>9} {fb:>3} {err:>3}"
        );
        if with_members {
            format!("{text} {members}")
        } else {
            text
        }
    };
    let mut out = vec![line([
        "session",
        "client",
        "first",
        "last",
        "turns",
        "reqs",
        "tokens in/out",
        "cache",
        "cache wr",
        "cost $",
        "fb",
        "err",
        "member",
    ])];
    for s in sessions {
        let client = match (&s.client, &s.client_version) {
            (Some(c), Some(v)) => format!("{c} {v}"),
            (Some(c), None) => c.clone(),
            _ => "-".into(),
        };
        out.push(line([
            &s.id,
            &client,
            &crate::history::clock(s.first_at),
            &crate::history::clock(s.last_at),
            &s.turns.to_string(),
            &s.requests.to_string(),
            &format!("{}/{}", s.input_tokens, s.output_tokens),
            &percent(s.cache_hit_rate),
            &s.cache_write_tokens.to_string(),
            &dollars(s.cost_usd),
            &s.fallbacks.to_string(),
            &s.errors.to_string(),
            &if s.members.is_empty() { "-".to_string() } else { s.members.join(",") },
        ]));
    }
    out
}

/// One session as text: its figures, then a line per request.
fn show_text(d: &Value) -> String {
    let n = |k: &str| d[k].as_i64().unwrap_or(0);
    let mut out = format!("session   {}\n", d["id"].as_str().unwrap_or("?"));
    out += &format!("client    {}\n", d["user_agent"].as_str().unwrap_or("-"));
    let members: Vec<&str> = d["members"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    if !members.is_empty() {
        out += &format!("member    {}\n", members.join(", "));
    }
    out += &format!("when      {} .. {}\n", crate::history::clock(n("first_at")), crate::history::clock(n("last_at")));
    out += &format!("requests  {} ({} fell back, {} failed)\n", n("requests"), n("fallbacks"), n("errors"));
    out += &format!("turns     {}\n", n("turns"));
    out += &format!(
        "tokens    {} in, {} out, {} read from the provider's cache ({}), {} written to it\n",
        n("input_tokens"),
        n("output_tokens"),
        n("cache_read_tokens"),
        percent(d["cache_hit_rate"].as_f64()),
        n("cache_write_tokens")
    );
    out += &format!(
        "cost $    {} (the cache saved {})\n",
        dollars(d["cost_usd"].as_f64()),
        dollars(d["cache_saved_usd"].as_f64())
    );
    for p in d["providers"].as_array().into_iter().flatten() {
        out += &format!(
            "served by {}/{}: {} requests\n",
            p["provider"].as_str().unwrap_or("?"),
            p["model"].as_str().unwrap_or("?"),
            p["requests"]
        );
    }
    for r in d["timeline"].as_array().into_iter().flatten() {
        out += &format!(
            "  {} {} {:<24} {:<12} {:>7}/{:<6} {:>9} {}\n",
            crate::history::clock(r["started_at"].as_i64().unwrap_or(0)),
            r["id"].as_str().unwrap_or("?"),
            r["provider_model"].as_str().or(r["model"].as_str()).unwrap_or("-"),
            r["provider"].as_str().unwrap_or("-"),
            r["usage"]["input_tokens"].as_i64().unwrap_or(0),
            r["usage"]["output_tokens"].as_i64().unwrap_or(0),
            dollars(r["cost_usd"].as_f64()),
            r["outcome"].as_str().unwrap_or("?"),
        );
    }
    out
}

/// What Claude Code passes a status-line command on stdin (the fields used).
#[derive(Debug, Deserialize)]
struct StatusInput {
    session_id: String,
}

/// Prints the status line, or nothing: never an error.
pub async fn statusline(args: StatuslineArgs) -> Result<()> {
    let mut stdin = String::new();
    if std::io::stdin().read_to_string(&mut stdin).is_err() {
        return Ok(());
    }
    if let Some(line) = status_text(&args.remote, &stdin).await {
        println!("{line}");
    }
    Ok(())
}

async fn status_text(remote: &RemoteArgs, stdin: &str) -> Option<String> {
    let input: StatusInput = serde_json::from_str(stdin).ok()?;
    let http = crate::remote::client_builder().connect_timeout(STATUS_CONNECT).timeout(STATUS_ANSWER).build().ok()?;
    let remote = Remote::connect_with(remote, http).await.ok()?;
    let path = format!("/admin/sessions/{}", segment(&input.session_id));
    let detail: Value = remote.get_query(&path, &[("limit", "1".into())]).await.ok()?;
    Some(status_line(&detail))
}

/// `provider/model · $cost · cache N% [· fell back]`.
pub fn status_line(d: &Value) -> String {
    let serving = match (d["provider"].as_str(), d["model"].as_str()) {
        (Some(p), Some(m)) => format!("{p}/{m}"),
        (Some(p), None) => p.to_string(),
        _ => "-".into(),
    };
    let cost = d["cost_usd"].as_f64().map_or("$-".into(), |c| format!("${c:.2}"));
    let mut line = format!("{serving} · {cost} · cache {}", percent(d["cache_hit_rate"].as_f64()));
    if d["fallbacks"].as_i64().unwrap_or(0) > 0 {
        line += " · fell back";
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_line_names_what_serves_the_session() {
        let d = serde_json::json!({
            "provider": "anthropic", "model": "claude-sonnet-4-5", "cost_usd": 1.234,
            "cache_hit_rate": 0.875, "fallbacks": 1
        });
        assert_eq!(status_line(&d), "anthropic/claude-sonnet-4-5 · $1.23 · cache 88% · fell back");
        let d = serde_json::json!({ "provider": "p", "model": "m", "cost_usd": null, "cache_hit_rate": null, "fallbacks": 0 });
        assert_eq!(status_line(&d), "p/m · $- · cache -");
        assert_eq!(segment("a b/c"), "a%20b%2Fc");
    }
}
