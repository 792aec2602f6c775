//! The gateway's shared state: validated config, providers with their keys
//! and live policy state, one pooled HTTP client for every upstream call,
//! and where history goes.

use std::sync::Arc;
use std::time::Duration;

use secrecy::SecretString;

use crate::config::Config;
use crate::guard::ClientRates;
use crate::history::pricing::Prices;
use crate::history::{History, Store};
use crate::journal::Sink;
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
    #[error("[server] access_token = true, but no access token was given to the gateway")]
    AccessTokenMissing,
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
    sink: Option<Sink>,
    store: Option<Store>,
    admin_token: Option<SecretString>,
    access_token: Option<SecretString>,
    client_rates: ClientRates,
    secrets: Arc<dyn SecretStore>,
}

/// Assembles a [`Gateway`] from what its caller owns.
#[derive(Debug)]
pub struct Builder {
    config: Config,
    secrets: Arc<dyn SecretStore>,
    history: Option<(Sink, Store)>,
    admin_token: Option<SecretString>,
    access_token: Option<SecretString>,
}

impl Builder {
    /// Records every request in `history`.
    pub fn history(mut self, history: &History) -> Builder {
        let config = &self.config;
        let sink = Sink {
            recorder: history.recorder(),
            prices: Arc::new(Prices::with_overrides(config.prices.clone())),
            keep_bodies: config.history.store_bodies.then_some(config.history.body_limit),
        };
        self.history = Some((sink, history.store().clone()));
        self
    }

    /// The token the admin API requires; without one the admin API is off.
    pub fn admin_token(mut self, token: SecretString) -> Builder {
        self.admin_token = Some(token);
        self
    }

    /// The local access token clients must send when `[server] access_token = true`.
    pub fn access_token(mut self, token: SecretString) -> Builder {
        self.access_token = Some(token);
        self
    }

    /// Reads keys from the secret store once, here.
    pub fn build(self) -> Result<Gateway, InitError> {
        let providers =
            self.config.providers.iter().cloned().map(|p| Arc::new(Provider::load(p, self.secrets.as_ref()))).collect();
        let client = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .tcp_nodelay(true)
            // Redirects would resend the provider key to wherever they point.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("switchyard/", env!("CARGO_PKG_VERSION")))
            .build()?;
        let (sink, store) = match self.history {
            Some((sink, store)) => (Some(sink), Some(store)),
            None => (None, None),
        };
        let access_token = match (self.config.server.access_token, self.access_token) {
            (true, Some(token)) => Some(token),
            (true, None) => return Err(InitError::AccessTokenMissing),
            (false, _) => None,
        };
        Ok(Gateway {
            inner: Arc::new(Inner {
                config: self.config,
                providers,
                client,
                sink,
                store,
                admin_token: self.admin_token,
                access_token,
                client_rates: ClientRates::default(),
                secrets: self.secrets,
            }),
        })
    }
}

impl Gateway {
    pub fn builder(config: Config, secrets: Arc<dyn SecretStore>) -> Builder {
        Builder { config, secrets, history: None, admin_token: None, access_token: None }
    }

    /// A gateway without history or admin API.
    pub fn new(config: Config, secrets: Arc<dyn SecretStore>) -> Result<Gateway, InitError> {
        Gateway::builder(config, secrets).build()
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

    pub fn sink(&self) -> Option<&Sink> {
        self.inner.sink.as_ref()
    }

    pub fn store(&self) -> Option<&Store> {
        self.inner.store.as_ref()
    }

    pub fn admin_token(&self) -> Option<&SecretString> {
        self.inner.admin_token.as_ref()
    }

    /// The required local access token, when `[server] access_token = true`.
    pub fn access_token(&self) -> Option<&SecretString> {
        self.inner.access_token.as_ref()
    }

    pub fn client_rates(&self) -> &ClientRates {
        &self.inner.client_rates
    }

    pub fn secrets(&self) -> &dyn SecretStore {
        self.inner.secrets.as_ref()
    }

    /// Reads every provider's keys again (after a key was set or removed).
    pub fn reload_keys(&self) {
        for provider in self.providers() {
            provider.keys.reload(self.secrets());
        }
    }
}
