//! `switchyard members`: team members and their keys, in the history's
//! database (the data directory's SQLite file, or `[history] url`), so it
//! works whether the gateway runs or not; a running gateway reads the
//! change within a second. A key is printed once, by `add` and `rotate`.

use anyhow::Result;
use secrecy::ExposeSecret;
use switchyard_core::history::{now_ms, Store};
use switchyard_core::members::ops::{self, MemberView};
use switchyard_core::members::{Member, MemberState, NewMember};

use crate::paths;

#[derive(Debug, clap::Args)]
pub struct MembersArgs {
    #[command(subcommand)]
    command: MembersCommand,
    /// One JSON document instead of text.
    #[arg(long, global = true)]
    json: bool,
    /// The config (for `[history] url`) and the data directory.
    #[command(flatten)]
    place: crate::remote::RemoteArgs,
}

#[derive(Debug, clap::Subcommand)]
enum MembersCommand {
    /// Add a member and print its key, once.
    Add {
        name: String,
        /// Spend limit: `50/month`, `5/day`, `20/week` (USD).
        #[arg(long)]
        budget: Option<String>,
        /// Requests a minute.
        #[arg(long)]
        rpm: Option<u32>,
        /// Tokens a minute.
        #[arg(long)]
        tpm: Option<u64>,
        /// The models it may use, comma-separated globs: `claude-*,gpt-4.1`.
        #[arg(long)]
        models: Option<String>,
        /// When its key stops working, from now: `90d`, `12h`.
        #[arg(long)]
        expires: Option<String>,
    },
    /// Every member: state, limits.
    List,
    /// One member.
    Show { name: String },
    /// A new key for a member (printed once); the old one stops working.
    Rotate { name: String },
    /// Refuse a member's key from now on; its record stays.
    Revoke { name: String },
    /// Delete a member; its requests stay on record under its name.
    Remove { name: String },
}

/// The history the gateway records to, created if it is not there yet.
async fn open(place: &crate::remote::RemoteArgs) -> Result<Store> {
    let (dir, mut config) = place.resolve()?;
    if let Some(url) = std::env::var("SWITCHYARD_HISTORY_URL").ok().filter(|u| !u.trim().is_empty()) {
        config.override_history_url(url.trim(), "SWITCHYARD_HISTORY_URL")?;
    }
    Ok(Store::open_configured(&paths::database(&dir), &config.history).await?)
}

pub async fn run(args: MembersArgs) -> Result<()> {
    let store = open(&args.place).await?;
    let now = now_ms();
    match args.command {
        MembersCommand::Add { name, budget, rpm, tpm, models, expires } => {
            let new = NewMember { name, budget, rpm, tpm, models, expires };
            let (member, key) = ops::add(&store, &new, now).await?;
            print_key(&member, key.expose_secret(), args.json)?;
        }
        MembersCommand::Rotate { name } => {
            let (member, key) = ops::rotate(&store, &name).await?;
            print_key(&member, key.expose_secret(), args.json)?;
        }
        MembersCommand::List => {
            let all: Vec<MemberView> = ops::list(&store).await?.into_iter().map(|m| MemberView::of(m, now)).collect();
            if args.json {
                println!("{}", serde_json::to_string_pretty(&all)?);
            } else if all.is_empty() {
                println!("no members: add one with `switchyard members add NAME`");
            } else {
                all.iter().for_each(|v| println!("{}", line(v)));
            }
        }
        MembersCommand::Show { name } => show(&MemberView::of(ops::get(&store, &name).await?, now), args.json)?,
        MembersCommand::Revoke { name } => {
            let member = ops::revoke(&store, &name, now).await?;
            println!("revoked {:?}: its key is refused within a second on every gateway", member.name);
        }
        MembersCommand::Remove { name } => {
            ops::remove(&store, &name).await?;
            println!("removed {name:?}; its requests stay on record under its name");
        }
    }
    store.close().await;
    Ok(())
}

fn print_key(member: &Member, key: &str, json: bool) -> Result<()> {
    if json {
        let view = MemberView::of(member.clone(), now_ms());
        println!("{}", serde_json::to_string_pretty(&serde_json::json!({ "member": view, "key": key }))?);
    } else {
        println!("{key}");
        eprintln!("the key of {:?}: shown this once, only its hash is kept", member.name);
    }
    Ok(())
}

fn show(v: &MemberView, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(v)?);
    } else {
        println!("{}", line(v));
    }
    Ok(())
}

/// `al  active  budget $50/month  60 rpm  models claude-*,gpt-4.1  expires 2027-03-04T…`
fn line(v: &MemberView) -> String {
    let m = &v.member;
    let state = match v.state {
        MemberState::Active => "active",
        MemberState::Revoked => "revoked",
        MemberState::Expired => "expired",
    };
    let mut out = format!("{:<20} {state:<8}", m.name);
    if let Some(b) = m.budget {
        out.push_str(&format!("  budget ${}/{}", b.limit_usd, b.period.as_str()));
    }
    if let Some(rpm) = m.rpm {
        out.push_str(&format!("  {rpm} rpm"));
    }
    if let Some(tpm) = m.tpm {
        out.push_str(&format!("  {tpm} tpm"));
    }
    if !m.models.is_empty() {
        out.push_str(&format!("  models {}", m.models.join(",")));
    }
    if let Some(ms) = m.expires_at_ms {
        let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(u64::try_from(ms).unwrap_or(0));
        out.push_str(&format!("  expires {}", humantime::format_rfc3339_seconds(at)));
    }
    out
}
