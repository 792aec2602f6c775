//! Talking to a running gateway's admin API, as `status`, `providers` and
//! `tail` do: its address from the config (or `--listen`), its token from
//! the data dir (or `SWITCHYARD_ADMIN_TOKEN`).

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use secrecy::{ExposeSecret, SecretString};
use serde_json::Value;
use switchyard_core::Config;

use crate::paths::{self, DataDirArgs};

/// Which gateway to talk to.
#[derive(Debug, Clone, clap::Args)]
pub struct RemoteArgs {
    /// The gateway's config (for its listen address).
    #[arg(long, short, env = "SWITCHYARD_CONFIG", global = true)]
    config: Option<PathBuf>,
    /// The gateway's address, overriding the config's.
    #[arg(long, env = "SWITCHYARD_LISTEN", global = true)]
    listen: Option<SocketAddr>,
    #[command(flatten)]
    pub data: DataDirArgs,
}

#[derive(Debug)]
pub struct Remote {
    pub base: String,
    token: SecretString,
    pub http: reqwest::Client,
}

impl Remote {
    pub fn new(args: &RemoteArgs) -> Result<Remote> {
        let dir = args.data.resolve()?;
        let listen = match (args.listen, &args.config) {
            (Some(addr), _) => addr,
            (None, Some(path)) => Config::load(path)?.server.listen,
            (None, None) => paths::default_config(&dir)?.server.listen,
        };
        let token = paths::admin_token(&dir)?;
        let http = reqwest::Client::builder().no_proxy().tls_built_in_root_certs(false).build()?;
        Ok(Remote { base: format!("http://{listen}"), token, http })
    }

    pub fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.http.get(format!("{}{path}", self.base)).bearer_auth(self.token.expose_secret())
    }

    pub async fn get_json(&self, path: &str) -> Result<Value> {
        let r = self.get(path).send().await.with_context(|| self.unreachable())?;
        answer(r).await
    }

    pub async fn post_json(&self, path: &str) -> Result<Value> {
        let r = self
            .http
            .post(format!("{}{path}", self.base))
            .bearer_auth(self.token.expose_secret())
            .send()
            .await
            .with_context(|| self.unreachable())?;
        answer(r).await
    }

    fn unreachable(&self) -> String {
        format!("no gateway answers at {} (is `switchyard serve` running? pass --listen or --config)", self.base)
    }
}

async fn answer(r: reqwest::Response) -> Result<Value> {
    let status = r.status();
    let body: Value = r.json().await.unwrap_or(Value::Null);
    if !status.is_success() {
        let message = body["error"]["message"].as_str().unwrap_or("no details");
        bail!("the gateway answered {status}: {message}");
    }
    Ok(body)
}
