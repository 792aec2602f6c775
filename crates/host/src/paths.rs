//! Where Switchyard keeps its files, and the admin token.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use secrecy::SecretString;

/// The data directory, created owner-only if missing: `explicit` when
/// given, else the platform's app-data folder.
pub fn data_dir(explicit: Option<&Path>) -> Result<PathBuf> {
    let dir = match explicit {
        Some(dir) => dir.to_path_buf(),
        None => directories::ProjectDirs::from("dev", "Switchyard", "switchyard")
            .map(|d| d.data_dir().to_path_buf())
            .context("no home folder to put the data directory in: pass --data-dir")?,
    };
    switchyard_core::private::dir(&dir)
        .with_context(|| format!("cannot create the data directory {} (owner-only)", dir.display()))?;
    Ok(dir)
}

/// The config used without `--config`: written by the dashboard's edits.
pub fn config_file(dir: &Path) -> PathBuf {
    dir.join("config.toml")
}

/// `<data dir>/config.toml` when it exists, else the embedded default.
pub fn default_config(dir: &Path) -> Result<switchyard_core::Config> {
    let path = config_file(dir);
    Ok(if path.exists() { switchyard_core::Config::load(&path)? } else { switchyard_core::Config::embedded_default()? })
}

pub fn database(dir: &Path) -> PathBuf {
    dir.join("switchyard.db")
}

/// The admin token: `SWITCHYARD_ADMIN_TOKEN`, else the one in
/// `<data dir>/admin-token` (owner-only), generated on first use.
pub fn admin_token(dir: &Path) -> Result<SecretString> {
    token(dir, "SWITCHYARD_ADMIN_TOKEN", "admin-token", "sya-")
}

/// The local access token clients send as their API key:
/// `SWITCHYARD_ACCESS_TOKEN`, else `<data dir>/access-token`, generated on first use.
pub fn access_token(dir: &Path) -> Result<SecretString> {
    token(dir, "SWITCHYARD_ACCESS_TOKEN", "access-token", "sy-")
}

fn token(dir: &Path, variable: &str, file: &str, prefix: &str) -> Result<SecretString> {
    if let Ok(token) = std::env::var(variable) {
        if !token.trim().is_empty() {
            return Ok(SecretString::from(token.trim().to_string()));
        }
    }
    let path = dir.join(file);
    if let Ok(token) = std::fs::read_to_string(&path) {
        if !token.trim().is_empty() {
            return Ok(SecretString::from(token.trim().to_string()));
        }
    }
    let token = format!("{prefix}{}", random_hex(32));
    write_private(&path, &token).with_context(|| format!("cannot write a token to {}", path.display()))?;
    Ok(SecretString::from(token))
}

pub fn random_hex(bytes: usize) -> String {
    use rand::RngCore;
    let mut buf = vec![0u8; bytes];
    rand::rng().fill_bytes(&mut buf);
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes a file only its owner can read.
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()
}
