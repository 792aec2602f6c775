//! `switchyard join URL` and `switchyard leave`: this gateway joins a
//! team's gateway as a member, and leaves it again.
//!
//! Joining reads the member's key from standard input (without echo on a
//! terminal), asks the team's gateway which models it offers the member
//! and whether it allows falling back to this gateway's own providers,
//! stores the key in the OS keychain — never in a file — and adds the
//! team's gateway to the config in use as a provider of kind `switchyard`,
//! which a running gateway picks up. Leaving puts the config back byte for
//! byte (or, when it was edited since, takes the team's provider out of
//! it) and removes the key.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use switchyard_core::config::valid_device;
use switchyard_core::members::KEY_PREFIX;
use switchyard_core::secrets::{SecretStore, DEFAULT_LABEL};
use switchyard_core::Config;
use switchyard_keychain::KeychainStore;
use toml_edit::{value, Array, DocumentMut, Table};

use crate::paths::DataDirArgs;

/// What joining left behind, for `leave`.
const MANIFEST: &str = "joined.json";
/// The config as it was before joining.
const BACKUP: &str = "joined-config.toml.orig";

#[derive(Debug, clap::Args)]
pub struct JoinArgs {
    /// The team's gateway, e.g. `https://switchyard.example.com`.
    url: String,
    /// The config to add the team's gateway to (default: the one `serve` uses).
    #[arg(long, short, env = "SWITCHYARD_CONFIG")]
    config: Option<PathBuf>,
    /// The provider's name in the config.
    #[arg(long, default_value = "team")]
    name: String,
    /// The name the team records this device's requests under (default: the host's name).
    #[arg(long)]
    device: Option<String>,
    /// Join over plain HTTP although the address is not this machine's.
    #[arg(long)]
    allow_insecure: bool,
    #[command(flatten)]
    data: DataDirArgs,
}

#[derive(Debug, clap::Args)]
pub struct LeaveArgs {
    /// The config the team was added to (default: the one `join` wrote to).
    #[arg(long, short, env = "SWITCHYARD_CONFIG")]
    config: Option<PathBuf>,
    #[command(flatten)]
    data: DataDirArgs,
}

/// What `join` changed: enough for `leave` to undo it.
#[derive(Debug, Serialize, Deserialize)]
struct Manifest {
    config: PathBuf,
    provider: String,
    url: String,
    /// Whether the config existed before (its bytes are in [`BACKUP`]).
    existed: bool,
    /// The config as `join` wrote it.
    written: String,
}

/// What the team's gateway offers the member.
#[derive(Debug)]
struct Offer {
    models: Vec<String>,
    allow_local_fallback: bool,
}

pub async fn join(args: JoinArgs) -> Result<()> {
    let base = team_base(&args.url, args.allow_insecure)?;
    let dir = args.data.resolve()?;
    if dir.join(MANIFEST).exists() {
        bail!("this gateway has joined a team already: `switchyard leave` first");
    }
    let device = match args.device {
        Some(d) if valid_device(&d) => d,
        Some(d) => bail!("--device {d:?}: use 1 to 64 letters, digits, '.', '-' and '_'"),
        None => switchyard_core::ground::host::name(),
    };
    let key = read_member_key()?;
    let offer = ask_team(&base, &key).await?;
    let path = args.config.clone().unwrap_or_else(|| crate::paths::config_file(&dir));
    let before = read_optional(&path)?;
    let text = before.clone().unwrap_or_else(|| switchyard_core::config::EMBEDDED_DEFAULT.to_string());
    let written = with_team(&text, &args.name, &base, &device, &offer)?;
    // The result must be a config the gateway runs: checked before anything changes.
    Config::parse(&written, &path).with_context(|| format!("the config with {} added", args.name))?;
    let keychain = KeychainStore::default();
    // The key first: a gateway reloading the config finds it there.
    keychain.set(&args.name, DEFAULT_LABEL, &key).context("cannot store the member key in the keychain")?;
    if let Some(original) = &before {
        switchyard_core::private::write(&dir.join(BACKUP), original.as_bytes()).context("cannot back up the config")?;
    }
    let manifest = Manifest {
        config: path.clone(),
        provider: args.name.clone(),
        url: base.clone(),
        existed: before.is_some(),
        written: written.clone(),
    };
    // Saved before the config changes, so a crash in between can still be undone.
    switchyard_core::private::write(&dir.join(MANIFEST), &serde_json::to_vec_pretty(&manifest)?)?;
    switchyard_core::private::write(&path, written.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))?;
    println!("joined {base} as device {device:?}: {} model(s) through the team", offer.models.len());
    println!("  the member key is in the keychain; {} names the team's gateway first", path.display());
    if !offer.allow_local_fallback {
        println!("  the team allows no fallback to this gateway's own providers");
    }
    Ok(())
}

pub fn leave(args: LeaveArgs) -> Result<()> {
    let dir = args.data.resolve()?;
    let manifest_path = dir.join(MANIFEST);
    let Some(text) = read_optional(&manifest_path)? else { bail!("this gateway has joined no team") };
    let manifest: Manifest = serde_json::from_str(&text).context("the record of joining is unreadable")?;
    if let Some(config) = args.config.filter(|c| *c != manifest.config) {
        bail!("the team was joined in {}, not {}", manifest.config.display(), config.display());
    }
    let current = read_optional(&manifest.config)?;
    match (current.as_deref() == Some(manifest.written.as_str()), manifest.existed) {
        // Untouched since: as it was, byte for byte.
        (true, true) => {
            let original = std::fs::read(dir.join(BACKUP)).context("the config's backup is missing")?;
            switchyard_core::private::write(&manifest.config, &original)?;
        }
        (true, false) => std::fs::remove_file(&manifest.config)?,
        // Edited since: those edits stay, the team's provider goes.
        (false, _) => {
            if let Some(current) = current {
                let without = without_team(&current, &manifest.provider)?;
                switchyard_core::private::write(&manifest.config, without.as_bytes())?;
                println!(
                    "{} was edited since joining: only {} was taken out",
                    manifest.config.display(),
                    manifest.provider
                );
            }
        }
    }
    let keychain = KeychainStore::default();
    keychain.remove(&manifest.provider, DEFAULT_LABEL).context("cannot remove the member key from the keychain")?;
    let _ = std::fs::remove_file(dir.join(BACKUP));
    std::fs::remove_file(&manifest_path)?;
    println!("left {}: the member key is gone from the keychain", manifest.url);
    Ok(())
}

/// The team's gateway's address, without a trailing `/` or `/v1`. Plain
/// HTTP only to this machine, or when told.
fn team_base(url: &str, allow_insecure: bool) -> Result<String> {
    let parsed = url::Url::parse(url).with_context(|| format!("{url:?} is not a URL"))?;
    let loopback = match parsed.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(d)) => d == "localhost",
        None => bail!("{url:?} names no host"),
    };
    match parsed.scheme() {
        "https" => {}
        "http" if loopback || allow_insecure => {}
        "http" => bail!("{url} is plain HTTP to another machine: the member key would cross the network readable; use https, or --allow-insecure"),
        other => bail!("{url:?}: {other} is not http or https"),
    }
    let text = parsed.as_str().trim_end_matches('/');
    Ok(text.strip_suffix("/v1").unwrap_or(text).to_string())
}

fn read_member_key() -> Result<SecretString> {
    let key = crate::keys::read_secret("Member key (input hidden): ")?;
    if !key.expose_secret().starts_with(KEY_PREFIX) {
        bail!("no member key on standard input (a member key starts with {KEY_PREFIX}; `switchyard members add` on the team's gateway makes one)");
    }
    Ok(key)
}

/// The models the team offers the member, and its word on falling back.
async fn ask_team(base: &str, key: &SecretString) -> Result<Offer> {
    let client = crate::remote::client()?;
    let url = format!("{base}/v1/models");
    let response = client
        .get(&url)
        .bearer_auth(key.expose_secret())
        .send()
        .await
        .with_context(|| format!("cannot reach the team's gateway at {base}"))?;
    let status = response.status();
    let allow =
        response.headers().get("x-switchyard-allow-local-fallback").and_then(|v| v.to_str().ok()).map(|v| v != "false");
    let body: serde_json::Value = response.json().await.unwrap_or_default();
    if !status.is_success() {
        let message = body.pointer("/error/message").and_then(|m| m.as_str()).unwrap_or("no reason given");
        bail!("the team's gateway refused the member key ({status}): {message}");
    }
    let Some(allow_local_fallback) = allow else {
        bail!("{base} did not answer as a team's gateway for a member (is the key a member's, and is it Switchyard?)");
    };
    let models: Vec<String> = body["data"]
        .as_array()
        .map(|d| d.iter().filter_map(|m| m["id"].as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    if models.is_empty() {
        bail!("the team's gateway offers this member no models");
    }
    Ok(Offer { models, allow_local_fallback })
}

fn read_optional(path: &Path) -> Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// `text` with the team's gateway as a provider, the rest as it was.
fn with_team(text: &str, name: &str, base: &str, device: &str, offer: &Offer) -> Result<String> {
    let mut doc: DocumentMut = text.parse().context("the config is not valid TOML")?;
    let providers = doc
        .entry("providers")
        .or_insert_with(|| toml_edit::Item::ArrayOfTables(toml_edit::ArrayOfTables::new()))
        .as_array_of_tables_mut()
        .context("[providers] is not a list of tables in the config")?;
    if providers.iter().any(|t| t.get("name").and_then(|n| n.as_str()) == Some(name)) {
        bail!("the config has a provider named {name:?} already: --name another");
    }
    let mut table = Table::new();
    table.insert("name", value(name));
    table.insert("kind", value("switchyard"));
    table.insert("base_url", value(base));
    table.insert("models", value(offer.models.iter().collect::<Array>()));
    table.insert("device", value(device));
    table.insert("allow_local_fallback", value(offer.allow_local_fallback));
    providers.push(table);
    Ok(doc.to_string())
}

/// `text` without the provider `name`.
fn without_team(text: &str, name: &str) -> Result<String> {
    let mut doc: DocumentMut = text.parse().context("the config is not valid TOML")?;
    if let Some(providers) = doc.get_mut("providers").and_then(|p| p.as_array_of_tables_mut()) {
        providers.retain(|t| t.get("name").and_then(|n| n.as_str()) != Some(name));
    }
    Ok(doc.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_http_only_to_this_machine_or_when_told() {
        assert_eq!(team_base("https://team.example.com/v1/", false).unwrap(), "https://team.example.com");
        assert_eq!(team_base("http://127.0.0.1:4141", false).unwrap(), "http://127.0.0.1:4141");
        assert_eq!(team_base("http://localhost:4141/", false).unwrap(), "http://localhost:4141");
        let refused = team_base("http://team.example.com", false).unwrap_err().to_string();
        assert!(refused.contains("plain HTTP") && refused.contains("--allow-insecure"), "{refused}");
        assert!(team_base("http://team.example.com", true).is_ok());
        assert!(team_base("ftp://team.example.com", true).is_err());
    }

    #[test]
    fn the_team_goes_in_as_a_provider_and_out_again_leaving_the_rest() {
        let text = "# mine\n[server]\nlisten = \"127.0.0.1:4141\"\n\n[[providers]]\nname = \"own\"\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodels = [\"m\"]\n";
        let offer = Offer { models: vec!["m".into(), "claude-sonnet-4-5".into()], allow_local_fallback: false };
        let joined = with_team(text, "team", "http://127.0.0.1:5000", "laptop", &offer).unwrap();
        assert!(joined.starts_with(text), "the rest as it was:\n{joined}");
        let config = Config::parse(&joined, Path::new("c.toml")).unwrap();
        let team = config.provider("team").unwrap();
        assert_eq!(team.kind_name(), "switchyard");
        let j = team.joined.as_ref().unwrap();
        assert_eq!((j.device.as_str(), j.allow_local_fallback), ("laptop", false));
        assert!(with_team(&joined, "team", "http://x", "d", &offer).is_err(), "a second team of that name");
        assert_eq!(without_team(&joined, "team").unwrap().trim_end(), text.trim_end());
    }
}
