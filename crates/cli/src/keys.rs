//! `switchyard keys`: provider keys in the OS keychain. A key is read from
//! standard input (without echo on a terminal) and never printed; listings
//! show the label and the last four characters only.

use std::io::{BufRead, IsTerminal};

use anyhow::{bail, Context, Result};
use secrecy::{ExposeSecret, SecretString};
use switchyard_core::secrets::{EnvStore, SecretStore, DEFAULT_LABEL};
use switchyard_core::Config;
use switchyard_keychain::KeychainStore;

use crate::paths::DataDirArgs;

#[derive(Debug, clap::Args)]
pub struct KeysArgs {
    #[command(subcommand)]
    command: KeysCommand,
    /// The config whose providers and listen address apply (default: the embedded one).
    #[arg(long, short, env = "SWITCHYARD_CONFIG", global = true)]
    config: Option<std::path::PathBuf>,
    #[command(flatten)]
    data: DataDirArgs,
}

#[derive(Debug, clap::Subcommand)]
enum KeysCommand {
    /// Store a provider's key in the keychain; the key is read from standard input.
    Set {
        provider: String,
        /// A name for this key, for key pools (default: `default`).
        #[arg(long, default_value = DEFAULT_LABEL)]
        label: String,
    },
    /// The keys each provider has: label, where it is kept, last four characters.
    List,
    /// Remove a provider's key from the keychain.
    Rm {
        provider: String,
        #[arg(long, default_value = DEFAULT_LABEL)]
        label: String,
    },
}

fn last4(secret: &SecretString) -> String {
    let s = secret.expose_secret();
    let n = s.chars().count();
    s.chars().skip(n.saturating_sub(4)).collect()
}

fn read_key(provider: &str) -> Result<SecretString> {
    read_secret(&format!("Key for {provider} (input hidden): "))
}

/// A secret from standard input: typed without echo after `prompt` on a
/// terminal, else its first line; an empty one is refused.
pub(crate) fn read_secret(prompt: &str) -> Result<SecretString> {
    let stdin = std::io::stdin();
    let key = if stdin.is_terminal() {
        rpassword::prompt_password(prompt)?
    } else {
        let mut line = String::new();
        stdin.lock().read_line(&mut line)?;
        line
    };
    let key = key.trim();
    if key.is_empty() {
        bail!("no key given on standard input");
    }
    Ok(SecretString::from(key.to_string()))
}

pub async fn run(args: KeysArgs) -> Result<()> {
    let config = match &args.config {
        Some(path) => Config::load(path)?,
        None => Config::embedded_default()?,
    };
    let keychain = KeychainStore::default();
    match args.command {
        KeysCommand::Set { provider, label } => {
            known(&config, &provider)?;
            let key = read_key(&provider)?;
            keychain.set(&provider, &label, &key).context("cannot store the key")?;
            println!("stored key {label:?} for {provider} in the keychain (…{})", last4(&key));
            notify_gateway(&config, &args.data).await;
        }
        KeysCommand::Rm { provider, label } => {
            known(&config, &provider)?;
            if !keychain.remove(&provider, &label).context("cannot remove the key")? {
                bail!("{provider} has no key labelled {label:?} in the keychain");
            }
            println!("removed key {label:?} of {provider} from the keychain");
            notify_gateway(&config, &args.data).await;
        }
        KeysCommand::List => list(&config, &keychain),
    }
    Ok(())
}

fn known(config: &Config, provider: &str) -> Result<()> {
    if config.provider(provider).is_none() {
        let names: Vec<&str> = config.providers.iter().map(|p| p.name.as_str()).collect();
        bail!("no provider named {provider:?} in the config (known: {})", names.join(", "));
    }
    Ok(())
}

fn list(config: &Config, keychain: &KeychainStore) {
    let env = EnvStore::from_process();
    if let Err(e) = keychain.status() {
        println!("keychain: {e}");
    }
    println!("{:<20} {:<16} {:<12} key", "provider", "label", "kept in");
    for p in &config.providers {
        if p.auth == switchyard_core::config::Auth::None {
            println!("{:<20} {:<16} {:<12} no key needed", p.name, "-", "-");
            continue;
        }
        let mut any = false;
        for (store, keys) in [("keychain", keychain.keys(&p.name)), ("environment", env.keys(&p.name))] {
            for k in keys.unwrap_or_default() {
                any = true;
                println!("{:<20} {:<16} {:<12} …{}", p.name, k.label, store, last4(&k.secret));
            }
        }
        if !any {
            println!("{:<20} {:<16} {:<12} no key", p.name, "-", "-");
        }
    }
}

/// Tells a running gateway to read its keys again; silent when none runs.
async fn notify_gateway(config: &Config, data: &DataDirArgs) {
    let Ok(dir) = data.resolve() else { return };
    let Ok(token) = crate::paths::admin_token(&dir) else { return };
    let addr = crate::remote::reachable(config.server.listen);
    let Ok(client) = crate::remote::client() else { return };
    if let Err(e) = crate::remote::verify_gateway(&client, addr, &token).await {
        if matches!(e, crate::remote::VerifyError::Impostor(_)) {
            eprintln!("not telling the gateway: {e}");
        }
        return;
    }
    let url = format!("http://{addr}/admin/keys/reload");
    if let Ok(r) = client.post(&url).bearer_auth(token.expose_secret()).send().await {
        if r.status().is_success() {
            println!("the running gateway at {} picked up the change", config.server.listen);
        }
    }
}
