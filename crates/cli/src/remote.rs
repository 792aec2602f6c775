//! Talking to a running gateway's admin API, as `status`, `providers` and
//! `tail` do: its address from the config (or `--listen`), its token from
//! the data dir (or `SWITCHYARD_ADMIN_TOKEN`).
//!
//! The token is sent only after the gateway has proved it holds it
//! ([`verify_gateway`]): another local user who binds the port first must
//! not receive it.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use secrecy::{ExposeSecret, SecretString};
use serde::de::DeserializeOwned;
use serde_json::Value;
use switchyard_core::Config;

pub use switchyard_host::gateway_client::{client, client_builder, reachable, verify_gateway, VerifyError};

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

impl RemoteArgs {
    /// The data dir and the gateway's config, its listen address overridden by `--listen`.
    pub fn resolve(&self) -> Result<(PathBuf, Config)> {
        let dir = self.data.resolve()?;
        let mut config = match &self.config {
            Some(path) => Config::load(path)?,
            None => paths::default_config(&dir)?,
        };
        if let Some(addr) = self.listen {
            config.server.listen = addr;
        }
        Ok((dir, config))
    }
}

#[derive(Debug)]
pub struct Remote {
    pub base: String,
    token: SecretString,
    pub http: reqwest::Client,
}

impl Remote {
    /// Finds the gateway and checks it is this user's before any secret is sent.
    pub async fn connect(args: &RemoteArgs) -> Result<Remote> {
        Remote::connect_with(args, client()?).await
    }

    /// [`Remote::connect`] with a client of the caller's (its own timeouts).
    pub async fn connect_with(args: &RemoteArgs, http: reqwest::Client) -> Result<Remote> {
        let (dir, config) = args.resolve()?;
        let addr = reachable(config.server.listen);
        let token = paths::admin_token(&dir)?;
        let remote = Remote { base: format!("http://{addr}"), token, http };
        verify_gateway(&remote.http, addr, &remote.token).await.map_err(|e| match e {
            VerifyError::Unreachable(_) => anyhow::Error::new(e).context(remote.unreachable()),
            other => other.into(),
        })?;
        Ok(remote)
    }

    pub fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.http.get(format!("{}{path}", self.base)).bearer_auth(self.token.expose_secret())
    }

    /// `GET path`, read as `T` (one of the core's admin API types).
    pub async fn get_json<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        let r = self.get(path).send().await.with_context(|| self.unreachable())?;
        answer(r).await
    }

    /// `GET path?query`, read as `T`; the query's values are escaped.
    pub async fn get_query<T: DeserializeOwned>(&self, path: &str, query: &[(&str, String)]) -> Result<T> {
        let r = self.get(path).query(query).send().await.with_context(|| self.unreachable())?;
        answer(r).await
    }

    pub async fn post_json<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        let r = self
            .http
            .post(format!("{}{path}", self.base))
            .bearer_auth(self.token.expose_secret())
            .send()
            .await
            .with_context(|| self.unreachable())?;
        answer(r).await
    }

    /// `PUT path` with a JSON body, read as `T`.
    pub async fn put_json<T: DeserializeOwned>(&self, path: &str, body: &Value) -> Result<T> {
        let r = self
            .http
            .put(format!("{}{path}", self.base))
            .bearer_auth(self.token.expose_secret())
            .json(body)
            .send()
            .await
            .with_context(|| self.unreachable())?;
        answer(r).await
    }

    fn unreachable(&self) -> String {
        format!("no gateway answers at {} (is `switchyard serve` running? pass --listen or --config)", self.base)
    }
}

async fn answer<T: DeserializeOwned>(r: reqwest::Response) -> Result<T> {
    let status = r.status();
    let text = r.text().await.unwrap_or_default();
    if !status.is_success() {
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let message = body["error"]["message"].as_str().unwrap_or("no details");
        bail!("the gateway answered {status}: {message}");
    }
    let body = serde_json::from_str(&text)
        .with_context(|| format!("the gateway's answer is not what this switchyard expects: {text:.200}"))?;
    Ok(body)
}
