//! `switchyard history` and `switchyard tail`: the record, read straight
//! from the history database (the gateway need not be running).

use std::time::Duration;

use anyhow::{bail, Context, Result};
use switchyard_core::admin::parse_time;
use switchyard_core::admin::StreamMessage;
use switchyard_core::history::Store;
use switchyard_core::history::{
    AttemptOutcome, AttemptRecord as AttemptRow, RequestDetail, RequestFilter, RequestOutcome, RequestSummary,
};
use switchyard_core::telemetry::GatewayEvent;

use crate::paths::{self, DataDirArgs};

#[derive(Debug, clap::Args)]
pub struct HistoryArgs {
    #[command(subcommand)]
    show: Option<Action>,
    /// Only requests that did not end ok.
    #[arg(long)]
    failed: bool,
    /// Only requests that fell back.
    #[arg(long)]
    fallback: bool,
    #[command(flatten)]
    list: crate::list::ListArgs,
    /// The config (for `[history] url`) and the data directory.
    #[command(flatten)]
    place: crate::remote::RemoteArgs,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// One request with its attempt timeline.
    Show {
        id: String,
        #[arg(long)]
        json: bool,
        /// With what was captured: the client's request, each attempt's
        /// upstream request and answer, what the client got, and every
        /// change the gateway made with its reason.
        #[arg(long)]
        bodies: bool,
    },
    /// Captures requests' bodies for the inspector on the running gateway
    /// without `[history] store_bodies`: the next N requests, every request
    /// for a while, or (with neither) says what is set.
    Capture {
        /// Capture the next N requests.
        #[arg(long, value_name = "N")]
        next: Option<u64>,
        /// Capture every request for this long (`10m`, `1h`).
        #[arg(long = "for", value_name = "DURATION")]
        during: Option<String>,
        /// Stop capturing.
        #[arg(long, conflicts_with_all = ["next", "during"])]
        off: bool,
    },
    /// Writes a bug report for one request: versions, OS, the configuration
    /// in force, the request's row, attempts and captured bodies, checked
    /// for secrets by the running gateway before it is written.
    Export {
        id: String,
        /// Where to write it (default `switchyard-<id>.json`; `-` for stdout).
        #[arg(long, short)]
        out: Option<std::path::PathBuf>,
    },
    /// Computes the spend rollups and filter entries again from the recorded
    /// requests. Best run while the gateway is stopped: it holds the
    /// database's write lock until it is done (seconds for a million requests).
    Rebuild,
    /// Deletes every request and event on record, and every answer in the
    /// response cache beside it (stored answers are as sensitive as the
    /// record). Safe while the gateway runs.
    Purge,
    /// Copies this history (the data directory's SQLite file) into a
    /// PostgreSQL database: every request with its attempts, newest first;
    /// the rollups are derived there from the rows. A request already there
    /// is not copied twice, so the copy can run again or resume after an
    /// interruption (from `<data dir>/history-copy.checkpoint`).
    Copy {
        /// The PostgreSQL database, `postgres://user@host:5432/db`
        /// (a password here is never printed).
        #[arg(long, value_name = "URL")]
        to: String,
        /// Start from the newest request, not from the checkpoint.
        #[arg(long)]
        restart: bool,
    },
}

#[derive(Debug, clap::Args)]
pub struct TailArgs {
    /// One JSON object per event.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    remote: crate::remote::RemoteArgs,
}

/// The history the gateway would record to: the PostgreSQL database of
/// `[history] url` (or `SWITCHYARD_HISTORY_URL`), else the data directory's
/// SQLite file.
async fn open(place: &crate::remote::RemoteArgs) -> Result<Store> {
    let (dir, mut config) = place.resolve()?;
    if let Some(url) = std::env::var("SWITCHYARD_HISTORY_URL").ok().filter(|u| !u.trim().is_empty()) {
        config.override_history_url(url.trim(), "SWITCHYARD_HISTORY_URL")?;
    }
    let path = paths::database(&dir);
    if config.history.url.is_none() && !path.exists() {
        bail!("no history at {} yet: start `switchyard serve` (or pass --data-dir)", path.display());
    }
    Ok(Store::open_configured(&path, &config.history).await?)
}

/// The data directory's SQLite history, whatever the config names.
async fn open_sqlite(data: &DataDirArgs) -> Result<(std::path::PathBuf, Store)> {
    let dir = data.resolve()?;
    let path = paths::database(&dir);
    if !path.exists() {
        bail!("no history at {} to copy: pass the --data-dir it is in", path.display());
    }
    Ok((dir, Store::open(&path).await?))
}

pub async fn run(args: HistoryArgs) -> Result<()> {
    if let Some(Action::Copy { to, restart }) = &args.show {
        return copy(&args.place.data, to, *restart).await;
    }
    if let Some(Action::Export { id, out }) = &args.show {
        return export(&args.place, id, out.as_deref()).await;
    }
    if let Some(Action::Capture { next, during, off }) = &args.show {
        return capture(&args.place, *next, during.as_deref(), *off).await;
    }
    let store = open(&args.place).await?;
    if let Some(Action::Rebuild) = &args.show {
        let started = std::time::Instant::now();
        store.rebuild().await?;
        let requests = store.requests_on_record().await?;
        println!("rebuilt the rollups and filter entries of {requests} requests in {:.1?}", started.elapsed());
        return Ok(());
    }
    if let Some(Action::Purge) = &args.show {
        let purged = switchyard_core::history::purge(&store, switchyard_core::cache::purge_beside).await?;
        println!("deleted {} requests and {} cached answers", purged.requests, purged.cached_answers);
        return Ok(());
    }
    if let Some(Action::Show { id, json, bodies }) = &args.show {
        let detail = store.request(id).await?.with_context(|| format!("no request {id:?} on record"))?;
        let inspection = if *bodies {
            let found = switchyard_core::admin::inspection(&store, id).await.map_err(anyhow::Error::msg)?;
            Some(found.with_context(|| format!("no bodies were captured for {id:?}"))?)
        } else {
            None
        };
        match (json, inspection) {
            (true, Some(i)) => println!("{}", serde_json::to_string_pretty(&i)?),
            (true, None) => println!("{}", serde_json::to_string_pretty(&detail)?),
            (false, i) => {
                print!("{}", timeline(&detail));
                if let Some(i) = i {
                    print!("{}", crate::inspect::text(&i));
                }
            }
        }
        return Ok(());
    }
    let since = args
        .list
        .since
        .as_deref()
        .map(|s| parse_time(s).with_context(|| format!("--since {s:?} is not a time")))
        .transpose()?;
    let filter = RequestFilter {
        provider: args.list.provider,
        model: args.list.model,
        member: args.list.member,
        failed: args.failed,
        fallback: args.fallback,
        since,
        limit: Some(args.list.limit),
        ..RequestFilter::default()
    };
    let page = store.requests(&filter).await?;
    if args.list.json {
        println!("{}", serde_json::to_string_pretty(&page)?);
        return Ok(());
    }
    if page.requests.is_empty() {
        println!("no requests on record match");
        return Ok(());
    }
    println!(
        "{:<19}  {:<36}  {:<22} {:<20} {:<18} {:>6} {:>3} {:>8} {:>11} {:>10}",
        "time", "id", "endpoint", "model", "provider", "status", "try", "ms", "tokens", "cost $"
    );
    for r in &page.requests {
        println!("{}", row(r));
    }
    Ok(())
}

/// `switchyard history copy --to URL`, with a progress line on stderr and
/// a checkpoint after each page.
async fn copy(data: &DataDirArgs, to: &str, restart: bool) -> Result<()> {
    use std::io::Write;
    let url = switchyard_core::config::HistoryUrl::parse(to).map_err(|why| anyhow::anyhow!("--to: {why}"))?;
    let (dir, from) = open_sqlite(data).await?;
    let config = switchyard_core::config::HistoryConfig { url: Some(url.clone()), ..Default::default() };
    let into = Store::open_configured(&paths::database(&dir), &config).await?;
    let checkpoint = Checkpoint { path: dir.join("history-copy.checkpoint"), to: url.redacted() };
    let (cursor, copied) = if restart { (None, 0) } else { checkpoint.read() };
    if cursor.is_some() {
        eprintln!("resuming after {copied} requests (--restart starts again from the newest)");
    }
    let started = std::time::Instant::now();
    let done = switchyard_core::history::copy::copy(&from, &into, cursor, copied, |p| {
        checkpoint.write(p);
        let percent = (p.copied * 100).checked_div(p.total).map_or(100, |pc| pc.min(100));
        let bar = "#".repeat((percent / 4) as usize);
        eprint!("\r[{bar:<25}] {percent:>3}%  {}/{} requests", p.copied, p.total);
        let _ = std::io::stderr().flush();
    })
    .await?;
    eprintln!();
    checkpoint.clear();
    println!(
        "copied {} requests into {} in {:.1?}; start the gateway with [history] url set to it",
        done.copied,
        url.redacted(),
        started.elapsed()
    );
    Ok(())
}

/// Where a copy stopped: the destination (redacted) and the cursor, so a
/// checkpoint left for one database is never used for another.
struct Checkpoint {
    path: std::path::PathBuf,
    to: String,
}

impl Checkpoint {
    fn read(&self) -> (Option<String>, u64) {
        let Ok(text) = std::fs::read_to_string(&self.path) else { return (None, 0) };
        let mut lines = text.lines();
        match (lines.next(), lines.next(), lines.next().and_then(|n| n.parse().ok())) {
            (Some(to), Some(cursor), Some(copied)) if to == self.to => (Some(cursor.to_owned()), copied),
            _ => (None, 0),
        }
    }

    fn write(&self, at: &switchyard_core::history::copy::Progress) {
        let Some(cursor) = &at.cursor else { return };
        if let Err(e) = std::fs::write(&self.path, format!("{}\n{cursor}\n{}\n", self.to, at.copied)) {
            tracing::warn!("cannot keep the copy's checkpoint in {}: {e}", self.path.display());
        }
    }

    fn clear(&self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

pub(crate) fn clock(ms: i64) -> String {
    let at = std::time::UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64);
    let text = humantime::format_rfc3339_seconds(at).to_string();
    text.replace('T', " ").trim_end_matches('Z').to_string()
}

fn tokens(r: &RequestSummary) -> String {
    match (r.usage.input_tokens, r.usage.output_tokens) {
        (None, None) => "-".into(),
        (i, o) => format!("{}/{}", i.unwrap_or(0), o.unwrap_or(0)),
    }
}

fn row(r: &RequestSummary) -> String {
    let status = r.status.map_or("-".into(), |s| s.to_string());
    let cost = r.cost_usd.map_or("-".into(), |c| format!("{c:.6}"));
    let outcome = if r.outcome == RequestOutcome::Ok { String::new() } else { format!("  {}", r.outcome) };
    format!(
        "{:<19}  {:<36}  {:<22} {:<20} {:<18} {:>6} {:>3} {:>8.0} {:>11} {:>10}{outcome}",
        clock(r.started_at),
        r.id,
        r.endpoint,
        r.model.as_deref().unwrap_or("-"),
        r.provider.as_deref().unwrap_or("-"),
        status,
        r.attempts,
        r.duration_ms,
        tokens(r),
        cost
    )
}

/// The attempt timeline as text: one bar per attempt on a shared time axis.
fn timeline(d: &RequestDetail) -> String {
    const WIDTH: f64 = 40.0;
    let r = &d.request;
    let mut out = format!(
        "{}  {} {}  → {}  {}  {:.0} ms{}\n",
        r.id,
        r.endpoint,
        r.model.as_deref().unwrap_or("-"),
        r.provider.as_deref().unwrap_or("-"),
        r.outcome,
        r.duration_ms,
        r.error_code.as_deref().map(|c| format!("  [{c}]")).unwrap_or_default()
    );
    out.push_str(&format!(
        "correlation {}  tokens {}  cost {}\n",
        r.correlation_id,
        tokens(r),
        r.cost_usd.map_or("-".into(), |c| format!("${c:.6}"))
    ));
    let total = r.duration_ms.max(1.0);
    for a in &d.attempt_list {
        if a.outcome == AttemptOutcome::Skipped {
            // No call, so no bar: where the chain passed it over, and why.
            let at = ((a.offset_ms / total * WIDTH).round() as usize).min(WIDTH as usize);
            let mark = format!("{}–", " ".repeat(at));
            out.push_str(&format!(
                "  #{} {:<18} {:<8} |{mark:<41}| {}\n",
                a.seq,
                a.provider,
                a.reason,
                attempt_text(a)
            ));
            out.push_str(&routed(d, a.seq));
            continue;
        }
        let start = (a.offset_ms / total * WIDTH).round() as usize;
        let len = ((a.duration_ms.unwrap_or(0.0) / total * WIDTH).round() as usize).max(1);
        let backoff = ((a.backoff_ms / total * WIDTH).round() as usize).min(start);
        let bar = format!(
            "{}{}{}",
            " ".repeat(start - backoff),
            "·".repeat(backoff),
            "█".repeat(len.min(WIDTH as usize + 1 - start.min(WIDTH as usize)))
        );
        out.push_str(&format!("  #{} {:<18} {:<8} |{:<41}| {}\n", a.seq, a.provider, a.reason, bar, attempt_text(a)));
        out.push_str(&routed(d, a.seq));
    }
    out
}

/// Why the route's strategy put attempt `seq`'s provider where it was, as
/// a line of its own; nothing for an attempt in chain order. The figures
/// are stored as numbers and worded only here, when read.
fn routed(d: &RequestDetail, seq: u32) -> String {
    match d.routing.iter().find(|r| r.seq == seq) {
        Some(r) => format!("      chosen by {}\n", r.routing.describe()),
        None => String::new(),
    }
}

fn attempt_text(a: &AttemptRow) -> String {
    if a.outcome == AttemptOutcome::Skipped {
        return format!("skipped, not called: {}", a.error.as_deref().unwrap_or("no reason given"));
    }
    let mut parts = vec![a.status.map_or(a.outcome.to_string(), |s| format!("{s} {}", a.outcome))];
    parts.push(format!("{:.0} ms", a.duration_ms.unwrap_or(0.0)));
    if let Some(t) = a.ttft_ms {
        parts.push(format!("ttft {t:.0} ms"));
    }
    if a.backoff_ms >= 1.0 {
        parts.push(format!("after {:.0} ms backoff", a.backoff_ms));
    }
    if let Some(from) = &a.fallback_from {
        parts.push(format!("from {from}"));
    }
    if let Some(e) = &a.error {
        parts.push(e.chars().take(80).collect());
    }
    parts.join(", ")
}

/// Follows the running gateway's event stream: one line per request with
/// its attempts, and a line for each fallback, breaker or health change.
pub async fn tail(args: TailArgs) -> Result<()> {
    let remote = match crate::remote::Remote::connect(&args.remote).await {
        Ok(remote) => remote,
        Err(e)
            if e.downcast_ref::<crate::remote::VerifyError>()
                .is_some_and(|v| matches!(v, crate::remote::VerifyError::Unreachable(_))) =>
        {
            eprintln!("no gateway answers: following the history database instead");
            return tail_database(args).await;
        }
        Err(e) => return Err(e),
    };
    let response = remote.get("/admin/events").send().await;
    let Ok(response) = response.and_then(|r| r.error_for_status()) else {
        eprintln!("no gateway answers at {}: following the history database instead", remote.base);
        return tail_database(args).await;
    };
    let mut body = response.bytes_stream();
    let mut buffer = String::new();
    loop {
        let chunk = tokio::select! {
            chunk = futures_util::StreamExt::next(&mut body) => chunk,
            () = crate::serve::shutdown_signal() => return Ok(()),
        };
        let Some(chunk) = chunk else { bail!("the gateway closed the event stream") };
        buffer.push_str(&String::from_utf8_lossy(&chunk?));
        while let Some(end) = buffer.find("\n\n") {
            let event: String = buffer.drain(..end + 2).collect();
            let data: String = event.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim).collect();
            if args.json {
                if !data.is_empty() {
                    println!("{data}");
                }
                continue;
            }
            let Ok(message) = serde_json::from_str::<StreamMessage>(&data) else { continue };
            if let Some(line) = event_line(&message) {
                println!("{line}");
            }
        }
    }
}

fn event_line(message: &StreamMessage) -> Option<String> {
    let StreamMessage::Event(e) = message else { return None };
    let or_dash = |s: &Option<String>| s.clone().unwrap_or_else(|| "-".into());
    Some(match &e.event {
        GatewayEvent::RequestFinished { request: r } => format!(
            "{} {:<22} {:<20} → {:<18} {:>6} {:>7.0} ms  [{}]",
            clock(e.at_ms),
            r.endpoint,
            or_dash(&r.model),
            or_dash(&r.provider),
            r.status.map_or("-".into(), |s| s.to_string()),
            r.duration_ms,
            r.attempts.join(" → ")
        ),
        GatewayEvent::Fallback { request_id, from, to, reason, .. } => {
            format!("  ↪ fallback {from} → {to} for {request_id}: {reason}")
        }
        GatewayEvent::Breaker { provider, from, to, reason, .. } => {
            format!("  ⚡ breaker {provider} {from} → {to}: {reason}")
        }
        GatewayEvent::Health { provider, from, to, reason, .. } => {
            format!("  ♥ health {provider} {} → {}: {reason}", crate::status::word(from), crate::status::word(to))
        }
        GatewayEvent::KeyRevoked { provider, label, reason, .. } => {
            format!("  ✗ key {provider}/{label} revoked: {reason}")
        }
        GatewayEvent::KeyCooling { provider, .. } => format!("  ⏸ {provider} rate-limited"),
        GatewayEvent::ProviderToggled { provider, enabled } => {
            format!("  ⏻ {provider} {}", if *enabled { "enabled" } else { "disabled" })
        }
        GatewayEvent::ConfigReloaded { ok, error } => {
            format!("  ⟳ config reloaded: {}", if *ok { "ok".into() } else { or_dash(error) })
        }
        GatewayEvent::Alert { title, message, suppressed, .. } => {
            let more = if *suppressed > 0 { format!(" (+{suppressed} like it held back)") } else { String::new() };
            format!("  ! {title}: {message}{more}")
        }
    })
}

/// Prints each request as it is recorded, from the database.
async fn tail_database(args: TailArgs) -> Result<()> {
    let store = open(&args.remote).await?;
    let mut seen_until = switchyard_core::history::now_ms();
    let mut seen_ids: Vec<String> = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    loop {
        tokio::select! {
            _ = tick.tick() => {},
            () = crate::serve::shutdown_signal() => return Ok(()),
        }
        let filter = RequestFilter { since: Some(seen_until - 5_000), limit: Some(1000), ..RequestFilter::default() };
        let mut page = store.requests(&filter).await?.requests;
        page.reverse();
        page.retain(|r| !seen_ids.contains(&r.id));
        for r in page {
            seen_until = seen_until.max(r.started_at);
            let detail = store.request(&r.id).await?;
            let hops = detail
                .map(|d| {
                    d.attempt_list
                        .iter()
                        .map(|a| {
                            format!("{}:{}", a.provider, a.status.map_or(a.outcome.to_string(), |s| s.to_string()))
                        })
                        .collect::<Vec<_>>()
                        .join(" → ")
                })
                .unwrap_or_default();
            if args.json {
                println!("{}", serde_json::to_string(&r)?);
            } else {
                println!("{}  [{hops}]", row(&r));
            }
            seen_ids.push(r.id);
            if seen_ids.len() > 5000 {
                seen_ids.drain(..1000);
            }
        }
    }
}

/// `switchyard history export ID`: the running gateway builds the report,
/// as it knows every secret to search it for.
async fn export(place: &crate::remote::RemoteArgs, id: &str, out: Option<&std::path::Path>) -> Result<()> {
    let remote = crate::remote::Remote::connect(place).await?;
    let report: serde_json::Value = remote.get_json(&format!("/admin/requests/{id}/export")).await?;
    let text = serde_json::to_string_pretty(&report)?;
    let default = std::path::PathBuf::from(format!("switchyard-{id}.json"));
    match out.unwrap_or(&default) {
        p if p.as_os_str() == "-" => println!("{text}"),
        p => {
            std::fs::write(p, text).with_context(|| format!("writing {}", p.display()))?;
            println!("wrote {}", p.display());
        }
    }
    Ok(())
}

/// `switchyard history capture`: sets (or reads) the running gateway's capture switch.
async fn capture(place: &crate::remote::RemoteArgs, next: Option<u64>, during: Option<&str>, off: bool) -> Result<()> {
    let remote = crate::remote::Remote::connect(place).await?;
    let state: serde_json::Value = if next.is_none() && during.is_none() && !off {
        remote.get_json("/admin/capture").await?
    } else {
        let until_ms = match during {
            Some(d) => {
                let d = humantime::parse_duration(d).with_context(|| format!("--for {d:?} is not a duration"))?;
                switchyard_core::history::now_ms() + i64::try_from(d.as_millis()).unwrap_or(i64::MAX / 2)
            }
            None => 0,
        };
        let body = serde_json::json!({ "remaining": next.unwrap_or(0), "until_ms": until_ms });
        remote.put_json("/admin/capture", &body).await?
    };
    let remaining = state["remaining"].as_u64().unwrap_or(0);
    let until = state["until_ms"].as_i64().unwrap_or(0);
    let now = switchyard_core::history::now_ms();
    match (remaining, until > now) {
        (0, false) => println!(
            "capture is off (requests are captured only with [history] store_bodies or x-switchyard-capture: 1)"
        ),
        (n, false) => println!("capturing the next {n} requests"),
        (n, true) => {
            // Whole seconds, rounded up: "--for 10m" reads back as 10m, not
            // 9m 59s for the milliseconds the round trip took.
            let secs = u64::try_from(until - now).unwrap_or(0).div_ceil(1000);
            let left = humantime::format_duration(std::time::Duration::from_secs(secs));
            println!(
                "capturing every request for {left}{}",
                if n > 0 { format!(", then the next {n}") } else { String::new() }
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A row from the admin API's JSON, as the CLI reads it.
    fn row_of(outcome: &str, error: Option<&str>) -> AttemptRow {
        serde_json::from_value(serde_json::json!({
            "seq": 2, "provider": "ol", "key_label": null, "model": "qwen3", "reason": "first",
            "fallback_from": null, "started_at": 0, "offset_ms": 1.0, "timeout_ms": null, "backoff_ms": 0.0,
            "duration_ms": 0.0, "ttfb_ms": null, "ttft_ms": null, "status": null, "outcome": outcome,
            "retry_after_ms": null, "breaker_state": null, "error": error,
            "usage": { "input_tokens": null, "output_tokens": null, "cached_tokens": null },
        }))
        .unwrap()
    }

    #[test]
    fn a_skipped_attempt_reads_as_not_called_with_its_reason_in_full() {
        let why = format!("`tools`: {}", "the provider does not support tools ".repeat(4));
        let text = attempt_text(&row_of("skipped", Some(&why)));
        assert_eq!(text, format!("skipped, not called: {why}"));
        assert!(!text.contains(" ms"), "no duration for no call: {text}");
        assert!(attempt_text(&row_of("timeout", None)).starts_with("timeout, 0 ms"));
    }
}
