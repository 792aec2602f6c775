//! The gateway's shared state: the live configuration with its providers
//! (swapped whole on reload; providers whose settings did not change keep
//! their breakers and statistics), one pooled HTTP client for every upstream
//! call, where history goes, and the live telemetry. Its side of the team
//! seam is [`team`]'s.

pub mod capture;
pub mod sessions;
mod team;

pub use team::Inbound;

use arc_swap::ArcSwap;
use secrecy::SecretString;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::config::{Config, RouteConfig};
use crate::gateway::sessions::Sessions;
use crate::ground::clock::now_ms;
use crate::history::pricing::Prices;
use crate::history::{History, Sink, Store};
use crate::policy::budget::Budgets;
use crate::policy::clients::ClientRates;
use crate::secrets::SecretStore;
use crate::team::{Change, Solo, Team};
use crate::telemetry::events::GatewayEvent;
use crate::telemetry::Telemetry;
use crate::upstream::provider::Provider;
use crate::upstream::strategy::RouteState;

#[derive(Debug, thiserror::Error)]
pub enum InitError {
    #[error(transparent)]
    Client(#[from] crate::upstream::ClientError),
    #[error("[server] access_token = true, but no access token was given to the gateway")]
    AccessTokenMissing,
    #[error(transparent)]
    TraceExport(#[from] crate::telemetry::trace::ExportError),
}

/// The configuration in force and its providers. A request takes one
/// snapshot and uses it throughout, so a reload never mixes two configs.
#[derive(Debug)]
pub struct Live {
    pub config: Config,
    pub providers: Vec<Arc<Provider>>,
    /// Each route's turns and recent split, by its place in `config.routes`.
    pub routes: Vec<Arc<RouteState>>,
    /// The same for the models without a route of their own, together.
    pub unrouted: Arc<RouteState>,
}

impl Live {
    /// Puts `config` in force with `providers`; a route of the same model
    /// in `old` keeps its turns and recent split.
    fn new(config: Config, providers: Vec<Arc<Provider>>, old: Option<&Live>) -> Live {
        let kept = |model: &str| old.and_then(|o| o.route(model)).map(|(_, state)| state.clone());
        let routes = config.routes.iter().map(|r| kept(&r.model).unwrap_or_default()).collect();
        let unrouted = old.map(|o| o.unrouted.clone()).unwrap_or_default();
        Live { config, providers, routes, unrouted }
    }

    pub fn provider(&self, name: &str) -> Option<&Arc<Provider>> {
        self.providers.iter().find(|p| p.name() == name)
    }

    /// `model`'s route and its state, when it has a route of its own.
    pub fn route(&self, model: &str) -> Option<(&RouteConfig, &Arc<RouteState>)> {
        // Routes are few; a linear scan beats hashing here.
        let at = self.config.routes.iter().position(|r| r.model == model)?;
        Some((self.config.routes.get(at)?, self.routes.get(at)?))
    }
}

/// Everything a request needs; cheap to clone.
#[derive(Debug, Clone)]
pub struct Gateway {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    live: ArcSwap<Live>,
    client: crate::upstream::Client,
    sink: Option<Sink>,
    store: Option<Store>,
    /// The response cache, beside the history.
    cache: Option<crate::cache::Store>,
    admin_token: Option<SecretString>,
    access_token: Option<SecretString>,
    client_rates: ClientRates,
    sessions: Sessions,
    /// Each conversation's last provider ([`crate::policy::stick`]).
    conversations: crate::policy::stick::Sessions,
    /// Team members: who may use the gateway with a key of their own.
    members: crate::members::gate::Members,
    /// The read of the members whose budgets are in force.
    member_budgets_read: AtomicU64,
    /// Config-file edits, one at a time.
    config_edits: std::sync::Mutex<()>,
    secrets: Arc<dyn SecretStore>,
    telemetry: Arc<Telemetry>,
    /// Where provider toggles persist (`<data dir>/state.json`).
    state_file: Option<PathBuf>,
    /// The config file, for reloads.
    config_path: Option<PathBuf>,
    /// Browser origins of the host application's own pages (the desktop
    /// window), allowed whatever the config says.
    trusted_origins: Vec<String>,
    /// The other instances this one shares verdicts with (`[team]`);
    /// alone, a team of one.
    team: Arc<dyn Team>,
    /// Proxied requests served since the start, for the team's view.
    served: AtomicU64,
    /// The share of every limit this instance takes: the whole, or its
    /// part by the last roll call while the team's shared state is out
    /// of reach.
    share: crate::ground::share::AtomicRoll,
    /// Whether this gateway was given a team (`[team]`): alone, it has no
    /// name to give in responses and records.
    in_team: bool,
    /// `x-switchyard-instance`, on every response in team mode.
    instance_header: Option<axum::http::HeaderValue>,
    /// Which requests are captured beyond `store_bodies` ([`crate::proxy::capture`]).
    capture: capture::Switch,
    /// OpenTelemetry traces (`[telemetry]`, `OTEL_*`): off unless an endpoint is set.
    tracer: crate::telemetry::trace::Tracer,
}

/// Assembles a [`Gateway`] from what its caller owns.
#[derive(Debug)]
pub struct Builder {
    config: Config,
    secrets: Arc<dyn SecretStore>,
    history: Option<(Sink, Store)>,
    cache: Option<crate::cache::Store>,
    admin_token: Option<SecretString>,
    access_token: Option<SecretString>,
    state_file: Option<PathBuf>,
    config_path: Option<PathBuf>,
    trusted_origins: Vec<String>,
    /// Where budget periods begin and end; the system's zone unless set.
    time_zone: Option<jiff::tz::TimeZone>,
    team: Option<Arc<dyn Team>>,
    /// Where the `OTEL_*` variables are read: the process's environment.
    otel_env: fn(&str) -> Option<String>,
}

impl Builder {
    /// Reads the `OTEL_*` variables from `env` instead of the process's
    /// environment (a test's gateway, whatever its shell exports).
    pub fn otel_env(mut self, env: fn(&str) -> Option<String>) -> Builder {
        self.otel_env = env;
        self
    }

    /// Counts budget periods (days, weeks, months) in `zone` rather than
    /// in the system's local time.
    pub fn time_zone(mut self, zone: jiff::tz::TimeZone) -> Builder {
        self.time_zone = Some(zone);
        self
    }

    /// Allows a browser origin that belongs to the host application (the
    /// desktop window's pages), independent of `[server] allowed_origins`.
    pub fn trusted_origin(mut self, origin: &str) -> Builder {
        self.trusted_origins.push(origin.to_string());
        self
    }

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

    /// Answers repeated requests from `cache`, where the config or the
    /// client asks for it.
    pub fn cache(mut self, cache: crate::cache::Store) -> Builder {
        self.cache = Some(cache);
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

    /// Persists provider toggles in this file and applies the ones it holds.
    pub fn state_file(mut self, path: PathBuf) -> Builder {
        self.state_file = Some(path);
        self
    }

    /// The file the configuration came from, so it can be reloaded.
    pub fn config_path(mut self, path: PathBuf) -> Builder {
        self.config_path = Some(path);
        self
    }

    /// Joins a team: verdicts are shared with its other instances.
    pub fn team(mut self, team: Arc<dyn Team>) -> Builder {
        self.team = Some(team);
        self
    }

    /// Reads keys from the secret store once, here.
    pub fn build(self) -> Result<Gateway, InitError> {
        let zone = self.time_zone.unwrap_or_else(jiff::tz::TimeZone::system);
        let members = crate::members::gate::Members::new();
        let budgets = Budgets::new(zone, &self.config.budgets);
        let recorder = self.history.as_ref().map(|(sink, _)| sink.recorder.clone());
        let telemetry = Arc::new(Telemetry::with(recorder, budgets, self.config.alerts.clone()));
        let toggles = self.state_file.as_deref().map(read_toggles).unwrap_or_default();
        // Named in a team; alone, `x-switchyard-instance` is not sent.
        let in_team = self.team.is_some();
        let instance_header = self.team.as_deref().and_then(|t| axum::http::HeaderValue::from_str(t.instance()).ok());
        let team = self
            .team
            .unwrap_or_else(|| Arc::new(Solo::new(crate::team::solo_name(self.config.server.listen))) as Arc<dyn Team>);
        let providers = self
            .config
            .providers
            .iter()
            .cloned()
            .map(|p| {
                let provider = Provider::load(p, self.secrets.as_ref(), telemetry.clone()).with_team(team.clone());
                if let Some(enabled) = toggles.get(provider.name()) {
                    provider.set_enabled(*enabled);
                }
                Arc::new(provider)
            })
            .collect();
        let client = crate::upstream::Client::new()?;
        let tracer = tracer(&self.config, self.otel_env, team.instance(), &telemetry)?;
        let (sink, store) = match self.history {
            Some((sink, store)) => (Some(sink), Some(store)),
            None => (None, None),
        };
        let access_token = match (self.config.server.access_token, self.access_token) {
            (true, Some(token)) => Some(token),
            (true, None) => return Err(InitError::AccessTokenMissing),
            (false, _) => None,
        };
        let gateway = Gateway {
            inner: Arc::new(Inner {
                live: ArcSwap::from_pointee(Live::new(self.config, providers, None)),
                client,
                sink,
                store,
                cache: self.cache,
                admin_token: self.admin_token,
                access_token,
                client_rates: ClientRates::default(),
                sessions: Sessions::default(),
                conversations: crate::policy::stick::Sessions::default(),
                members,
                member_budgets_read: AtomicU64::new(0),
                config_edits: std::sync::Mutex::new(()),
                secrets: self.secrets,
                telemetry,
                state_file: self.state_file,
                config_path: self.config_path,
                trusted_origins: self.trusted_origins,
                in_team,
                instance_header,
                team,
                served: AtomicU64::new(0),
                capture: capture::Switch::default(),
                share: crate::ground::share::AtomicRoll::default(),
                tracer,
            }),
        };
        gateway.keep_members_fresh();
        Ok(gateway)
    }
}

/// Tracing as `[telemetry]` and the `OTEL_*` variables say (read once, at
/// start), its spans carrying `instance`.
fn tracer(
    config: &Config,
    env: fn(&str) -> Option<String>,
    instance: &str,
    telemetry: &Telemetry,
) -> Result<crate::telemetry::trace::Tracer, InitError> {
    use crate::telemetry::trace::{settings, SpanCounters, Tracer};
    let resolved = settings::resolve(&config.telemetry, &env);
    for warning in &resolved.warnings {
        tracing::warn!("traces: {warning}");
    }
    let Some(settings) = resolved.settings else { return Ok(Tracer::off()) };
    let counters = SpanCounters {
        exported: telemetry.metrics.trace_spans_exported.clone(),
        dropped: telemetry.metrics.trace_spans_dropped.clone(),
    };
    let endpoint = crate::config::shown_url(&settings.endpoint);
    tracing::info!(endpoint = %endpoint, service = %settings.service_name, "traces: exporting over OTLP");
    Ok(Tracer::start(settings, instance, counters)?)
}

fn read_toggles(path: &std::path::Path) -> BTreeMap<String, bool> {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .and_then(|v| serde_json::from_value(v["enabled"].clone()).ok())
        .unwrap_or_default()
}

/// Why a toggle could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum ToggleError {
    #[error("no provider named {0:?}")]
    UnknownProvider(String),
    #[error("cannot save provider toggles to {path}: {reason}")]
    Persist { path: String, reason: String },
}

impl Gateway {
    pub fn builder(config: Config, secrets: Arc<dyn SecretStore>) -> Builder {
        Builder {
            config,
            secrets,
            history: None,
            cache: None,
            admin_token: None,
            access_token: None,
            state_file: None,
            config_path: None,
            trusted_origins: Vec::new(),
            time_zone: None,
            team: None,
            otel_env: crate::telemetry::trace::settings::process_env,
        }
    }

    /// A gateway without history or admin API.
    pub fn new(config: Config, secrets: Arc<dyn SecretStore>) -> Result<Gateway, InitError> {
        Gateway::builder(config, secrets).build()
    }

    /// The configuration and providers in force now.
    pub fn live(&self) -> Arc<Live> {
        self.inner.live.load_full()
    }

    /// `[server] redact_outgoing` in force: read per attempt, without
    /// taking a reference on the configuration.
    pub(crate) fn redacts_outgoing(&self) -> bool {
        self.inner.live.load().config.server.redact_outgoing
    }

    pub fn client(&self) -> &crate::upstream::Client {
        &self.inner.client
    }

    /// Which requests are captured beyond `store_bodies`.
    pub fn capture_switch(&self) -> &capture::Switch {
        &self.inner.capture
    }

    pub fn sink(&self) -> Option<&Sink> {
        self.inner.sink.as_ref()
    }

    pub fn store(&self) -> Option<&Store> {
        self.inner.store.as_ref()
    }

    /// The response cache, when history is kept.
    pub fn cache(&self) -> Option<&crate::cache::Store> {
        self.inner.cache.as_ref()
    }

    pub fn admin_token(&self) -> Option<&SecretString> {
        self.inner.admin_token.as_ref()
    }

    /// The required local access token, when `[server] access_token = true`.
    pub fn access_token(&self) -> Option<&SecretString> {
        self.inner.access_token.as_ref()
    }

    /// The team members in force and their counters.
    /// Each conversation's last provider ([`crate::policy::stick`]).
    pub fn conversations(&self) -> &crate::policy::stick::Sessions {
        &self.inner.conversations
    }

    pub fn members(&self) -> &crate::members::gate::Members {
        &self.inner.members
    }

    /// Reads the members again if the copy is a second old, and puts
    /// their budgets in force: one added or changed anywhere (the CLI, any
    /// instance's admin API) is applied within a second, as a revocation.
    pub async fn refresh_members(&self) {
        if let Some(store) = self.store() {
            self.members().refresh(store).await;
        }
        self.apply_member_budgets();
    }

    /// Reads the members again every second in the background, so a
    /// request waits on the history database for them only when it brings a
    /// key the copy does not know ([`crate::members::gate::Members::identify`]).
    /// Stops with the gateway. Needs a runtime; without one (or a history)
    /// requests read them as the copy ages.
    fn keep_members_fresh(&self) {
        let (Some(_), Ok(runtime)) = (self.store(), tokio::runtime::Handle::try_current()) else { return };
        let gateway = Arc::downgrade(&self.inner);
        runtime.spawn(async move {
            loop {
                let Some(inner) = gateway.upgrade() else { break };
                Gateway { inner }.keep_members_read().await;
                tokio::time::sleep(crate::members::gate::REFRESH).await;
            }
        });
    }

    /// The background's read: every time while there are members; with
    /// none there is nothing to revoke or change, and a new member's key is
    /// read when it first comes, so an idle gateway (the tray app's) reads
    /// less often.
    async fn keep_members_read(&self) {
        let members = self.members();
        if members.list().is_empty() && !members.older_than(crate::members::gate::REFRESH_WITHOUT_MEMBERS) {
            return;
        }
        self.reload_members().await;
    }

    /// Reads the members again now (after a change through this gateway).
    pub async fn reload_members(&self) {
        if let Some(store) = self.store() {
            self.members().reload(store).await;
        }
        self.apply_member_budgets();
    }

    /// The members' budgets as last read, in the budget engine, once per read.
    pub(crate) fn apply_member_budgets(&self) {
        // Every request passes here: nothing is built unless a read is new.
        if self.inner.member_budgets_read.load(Ordering::Acquire) == self.members().reads() {
            return;
        }
        let now = now_ms();
        let (read, budgets) = self.members().budgets(now);
        if self.inner.member_budgets_read.swap(read, Ordering::AcqRel) != read {
            self.budgets().set_members(&budgets, now);
        }
    }

    pub fn client_rates(&self) -> &ClientRates {
        &self.inner.client_rates
    }

    /// Dashboard sessions and login tickets.
    pub fn sessions(&self) -> &Sessions {
        &self.inner.sessions
    }

    /// Held while the config file is read, edited and written.
    pub fn edit_lock(&self) -> std::sync::MutexGuard<'_, ()> {
        self.inner.config_edits.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn secrets(&self) -> &dyn SecretStore {
        self.inner.secrets.as_ref()
    }

    pub fn trusted_origins(&self) -> &[String] {
        &self.inner.trusted_origins
    }

    pub fn config_path(&self) -> Option<&std::path::Path> {
        self.inner.config_path.as_deref()
    }

    pub fn telemetry(&self) -> &Arc<Telemetry> {
        &self.inner.telemetry
    }

    /// The gateway's OpenTelemetry tracing (off unless configured).
    pub fn tracer(&self) -> &crate::telemetry::trace::Tracer {
        &self.inner.tracer
    }

    /// Spend per budget in the current periods.
    pub fn budgets(&self) -> &Budgets {
        &self.inner.telemetry.budgets
    }

    /// Loads what was spent in the current periods from the history's
    /// rollups, once per process, so budgets survive a restart. Called
    /// before the first request is served: what it reads and what requests
    /// add later are then never the same spend.
    pub async fn seed_budgets(&self) -> Result<(), crate::history::StoreError> {
        let (Some(store), true) = (self.store(), self.budgets().take_seed()) else { return Ok(()) };
        let now = now_ms();
        for (period, within) in self.budgets().periods(now) {
            let spent = store.cost_since(within.start_ms).await?;
            self.budgets().seed(period, within, &spent, now);
            let by_member = store.member_spend(within.start_ms).await?;
            let by_member: Vec<(String, f64)> = by_member.into_iter().map(|m| (m.member, m.cost_usd)).collect();
            self.budgets().seed_members(period, within, &by_member, now);
        }
        Ok(())
    }

    /// Reads every provider's keys again (after a key was set or removed).
    pub fn reload_keys(&self) {
        for provider in &self.live().providers {
            provider.keys.reload(self.secrets());
        }
    }

    /// Enables or disables a provider, and saves the choice so it survives
    /// a restart; in a team, every instance follows.
    pub fn set_enabled(&self, name: &str, enabled: bool) -> Result<(), ToggleError> {
        self.toggle(name, enabled)?;
        self.team().share(Change::Toggled { provider: name.to_string(), enabled });
        Ok(())
    }

    /// The team this instance belongs to: alone, a team of one.
    /// The share of every limit this instance takes now: the whole, or
    /// its part while the team's shared state is out of reach.
    pub fn share(&self) -> crate::ground::share::Roll {
        self.inner.share.load()
    }

    pub fn team(&self) -> &Arc<dyn Team> {
        &self.inner.team
    }

    /// This instance's name in its team, for responses and views; none
    /// for a gateway alone.
    pub fn instance(&self) -> Option<&str> {
        self.inner.in_team.then(|| self.inner.team.instance())
    }

    /// The `x-switchyard-instance` value, in team mode.
    pub(crate) fn instance_header(&self) -> Option<&axum::http::HeaderValue> {
        self.inner.instance_header.as_ref()
    }

    /// Counts a proxied request served.
    pub(crate) fn count_served(&self) {
        self.inner.served.fetch_add(1, Ordering::Relaxed);
    }

    /// Proxied requests served since the start.
    pub fn served(&self) -> u64 {
        self.inner.served.load(Ordering::Relaxed)
    }

    /// Enables or disables a provider here, and saves the choice.
    fn toggle(&self, name: &str, enabled: bool) -> Result<(), ToggleError> {
        let live = self.live();
        let provider = live.provider(name).ok_or_else(|| ToggleError::UnknownProvider(name.to_string()))?;
        provider.set_enabled(enabled);
        self.save_toggles(&live)?;
        self.inner.telemetry.publish(GatewayEvent::ProviderToggled { provider: name.to_string(), enabled });
        Ok(())
    }

    fn save_toggles(&self, live: &Live) -> Result<(), ToggleError> {
        let Some(path) = &self.inner.state_file else { return Ok(()) };
        let enabled: BTreeMap<&str, bool> = live.providers.iter().map(|p| (p.name(), p.is_enabled())).collect();
        let text = serde_json::json!({ "enabled": enabled }).to_string();
        crate::private::write(path, text.as_bytes())
            .map_err(|e| ToggleError::Persist { path: path.display().to_string(), reason: e.to_string() })
    }

    /// Puts a new configuration in force. Providers whose settings are
    /// unchanged carry over with their breakers, keys and toggles. The
    /// listen address and server limits apply at the next start.
    pub fn reload(&self, config: Config) {
        let old = self.live();
        let toggles = self.inner.state_file.as_deref().map(read_toggles).unwrap_or_default();
        let providers = config
            .providers
            .iter()
            .map(|c| match old.provider(&c.name).filter(|p| p.config == *c) {
                Some(same) => same.clone(),
                None => {
                    let provider = Provider::load(c.clone(), self.secrets(), self.inner.telemetry.clone())
                        .with_team(self.inner.team.clone());
                    // A provider new to a reload while the team is out of
                    // reach takes the same share as the others.
                    let share = self.inner.share.load();
                    if !share.is_whole() {
                        provider.share_caps(share);
                    }
                    if let Some(enabled) = toggles.get(&c.name) {
                        provider.set_enabled(*enabled);
                    }
                    Arc::new(provider)
                }
            })
            .collect();
        if config.server != old.config.server {
            tracing::warn!("[server] changes (listen address, limits) apply at the next start");
        }
        self.budgets().configure(&config.budgets, now_ms());
        self.inner.telemetry.alerts.set_policy(config.alerts.clone());
        self.inner.live.store(Arc::new(Live::new(config, providers, Some(&old))));
        self.inner.telemetry.publish(GatewayEvent::ConfigReloaded { ok: true, error: None });
    }

    /// Reports a configuration that was refused; the old one keeps serving.
    pub fn reload_refused(&self, error: String) {
        tracing::warn!("config reload refused, the old configuration keeps serving: {error}");
        self.inner.telemetry.publish(GatewayEvent::ConfigReloaded { ok: false, error: Some(error) });
    }
}
