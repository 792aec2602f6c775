//! The gateway's shared state: validated config, providers with their keys,
//! and one pooled HTTP client for every upstream call.

use std::sync::Arc;
use std::time::Duration;

use crate::config::Config;
use crate::provider::Provider;
use crate::secrets::SecretStore;

/// How long to wait for a TCP (and TLS) connection to a provider.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Idle pooled connections are closed after this long.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

#[derive(Debug, thiserror::Error)]
pub enum InitError {
    #[error("cannot build the HTTP client: {0}")]
    Client(#[from] reqwest::Error),
}

/// Everything a request needs; cheap to clone.
#[derive(Debug, Clone)]
pub struct Gateway {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: Config,
    providers: Vec<Arc<Provider>>,
    client: reqwest::Client,
}

impl Gateway {
    /// Builds the gateway; keys are read from `secrets` once, here.
    pub fn new(config: Config, secrets: &dyn SecretStore) -> Result<Gateway, InitError> {
        let providers = config.providers.iter().cloned().map(|p| Arc::new(Provider::load(p, secrets))).collect();
        let client = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .tcp_nodelay(true)
            // Redirects would resend the provider key to wherever they point.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("switchyard/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Gateway { inner: Arc::new(Inner { config, providers, client }) })
    }

    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    pub fn providers(&self) -> &[Arc<Provider>] {
        &self.inner.providers
    }

    pub fn client(&self) -> &reqwest::Client {
        &self.inner.client
    }

    pub fn provider(&self, name: &str) -> Option<&Arc<Provider>> {
        self.inner.providers.iter().find(|p| p.name() == name)
    }
}
