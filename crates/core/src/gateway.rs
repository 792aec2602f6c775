//! The gateway's shared state: the live configuration with its providers
//! (swapped whole on reload; providers whose settings did not change keep
//! their breakers and statistics), one pooled HTTP client for every upstream
//! call, where history goes, and the live telemetry.

use arc_swap::ArcSwap;
use secrecy::SecretString;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::config::{Config, RouteConfig};
use crate::history::pricing::Prices;
use crate::history::record::{now_ms, RequestOutcome};
use crate::history::{History, Store};
use crate::http::session::Sessions;
use crate::policy::budget::{Budgets, Covering};
use crate::policy::clients::ClientRates;
use crate::policy::strategy::RouteState;
use crate::proxy::journal::Sink;
use crate::secrets::SecretStore;
use crate::team::{micros, AdmitAsk, Admitted, Change, Seed, Team};
use crate::telemetry::events::GatewayEvent;
use crate::telemetry::Telemetry;
use crate::upstream::provider::Provider;

#[derive(Debug, thiserror::Error)]
pub enum InitError {
    #[error(transparent)]
    Client(#[from] crate::upstream::ClientError),
    #[error("[server] access_token = true, but no access token was given to the gateway")]
    AccessTokenMissing,
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
    /// The other instances this one shares verdicts with (`[team]`).
    team: Option<Arc<dyn Team>>,
    /// Proxied requests served since the start, for the team's view.
    served: AtomicU64,
    /// The share of every provider's limits this instance takes (1: the
    /// whole limits; N while the team's shared ones are out of reach).
    share: std::sync::atomic::AtomicU32,
    /// `x-switchyard-instance`, on every response in team mode.
    instance_header: Option<axum::http::HeaderValue>,
    /// Which requests are captured beyond `store_bodies` ([`crate::proxy::capture`]).
    capture: crate::proxy::capture::Switch,
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
}

impl Builder {
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
        let providers = self
            .config
            .providers
            .iter()
            .cloned()
            .map(|p| {
                let provider = Provider::load(p, self.secrets.as_ref(), telemetry.clone()).with_team(self.team.clone());
                if let Some(enabled) = toggles.get(provider.name()) {
                    provider.set_enabled(*enabled);
                }
                Arc::new(provider)
            })
            .collect();
        let client = crate::upstream::Client::new()?;
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
                instance_header: self
                    .team
                    .as_deref()
                    .and_then(|t| axum::http::HeaderValue::from_str(t.instance()).ok()),
                team: self.team,
                served: AtomicU64::new(0),
                capture: crate::proxy::capture::Switch::default(),
                share: std::sync::atomic::AtomicU32::new(1),
            }),
        };
        gateway.keep_members_fresh();
        Ok(gateway)
    }
}

/// What the history has on record for `scope` since `since`: the rollups'
/// cost by provider and model, or the rows' by member.
async fn on_record(
    store: &Store,
    scope: &crate::policy::BudgetScope,
    since: i64,
) -> Result<f64, crate::history::StoreError> {
    if let Some(member) = scope.member() {
        let spent = store.member_spend(since).await?;
        return Ok(spent.iter().filter(|m| m.member == member).map(|m| m.cost_usd).sum());
    }
    let rows = store.cost_since(since).await?;
    Ok(rows.iter().filter(|(p, m, _)| scope.covers(p, m)).map(|(_, _, usd)| usd).sum())
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
    pub fn capture_switch(&self) -> &crate::proxy::capture::Switch {
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

    /// Seeds the team's spend counters for `covering[i]`, each `i` of
    /// `missing`: what the history has on record for the budget's scope
    /// since its period began, or what this instance's own ledger counts
    /// when that is more (the history is written in batches, a moment
    /// behind). A shared history seeds the whole counter once; a history
    /// per instance adds this instance's part, once (see [`Team::seed_spend`]).
    pub async fn seed_team_spend(&self, covering: &[Covering], missing: &[usize]) {
        let Some(team) = self.team() else { return };
        let now = now_ms();
        let seed = match self.store().map(Store::backend) {
            Some("postgres") => Seed::Whole,
            _ => Seed::Own,
        };
        for c in missing.iter().filter_map(|i| covering.get(*i)) {
            let scope = &c.budget.scope;
            let on_record = match self.store() {
                Some(store) => match on_record(store, scope, c.bounds.start_ms).await {
                    Ok(usd) => usd,
                    Err(e) => {
                        tracing::warn!("team: the spend on record could not be read to seed a budget: {e}");
                        0.0
                    }
                },
                None => 0.0,
            };
            let ours = self.budgets().spent(scope, c.budget.period, c.bounds, now);
            let usd = f64::max(on_record, ours);
            team.seed_spend(&c.ask.counter, micros(usd), c.ask.expires_at_ms, seed).await;
        }
    }

    /// Takes in an event another instance of the team published: onto this
    /// instance's feed and, for a request of a session it answered, into
    /// the session's stick ([`crate::policy::stick`]), so the session's
    /// next turn starts where its last was served, whichever instance the
    /// balancer sends it to. (What it failed is not carried: a turn that
    /// failed everywhere leaves the stick as it was, costing one attempt.)
    pub fn take_remote_event(&self, instance: &str, at_ms: i64, event: GatewayEvent) {
        if let GatewayEvent::RequestFinished { request } = &event {
            let served = request.provider.as_deref().filter(|_| request.outcome == RequestOutcome::Ok);
            if let (Some(session), Some(name)) = (&request.session, served) {
                if let Some(provider) = self.live().provider(name) {
                    let signer = crate::proxy::thinking::signer(provider);
                    self.conversations().served(session, name, &signer, tokio::time::Instant::now());
                }
            }
        }
        self.telemetry().events.publish_remote(instance, at_ms, event);
    }

    /// Brings back the team's spend counters Redis lost (it restarted) or
    /// a new period starts, each instance adding what its history holds,
    /// without waiting for a request to find them missing. The team's
    /// runner calls it every second.
    pub async fn keep_team_spend(&self) {
        let team = self.team().filter(|t| t.connected());
        // Out of reach, this instance's ledger raises the alerts it can see.
        self.budgets().alert_by_team(team.is_some());
        let Some(team) = team else { return };
        let covering = self.budgets().every_counter(now_ms());
        if covering.is_empty() {
            return;
        }
        let ask = AdmitAsk {
            provider: String::new(),
            provider_max: None,
            key: None,
            requests_per_minute: None,
            tokens_per_minute: None,
            tokens: 0,
            budgets: covering.iter().map(|c| c.ask.clone()).collect(),
            line: None,
        };
        // Reserves nothing, refuses nothing: says which counters need seeding.
        if let Admitted::Unseeded(missing) = team.admit(ask).await {
            self.seed_team_spend(&covering, &missing).await;
        }
        self.raise_team_alerts(team.as_ref(), covering).await;
    }

    /// Alerts for the thresholds the team's spend has crossed, each raised
    /// by the one instance that claims it first and seen by the others on
    /// the team's events; every instance's ledger sees only its own part.
    async fn raise_team_alerts(&self, team: &dyn Team, covering: Vec<Covering>) {
        let counters = covering.iter().map(|c| c.ask.counter.clone()).collect();
        let Some(spent) = team.spent(counters).await.filter(|s| s.len() == covering.len()) else { return };
        let counted: Vec<(Covering, i64)> =
            covering.into_iter().zip(spent).filter_map(|(c, micros)| Some((c, micros?))).collect();
        for (c, crossing) in self.budgets().crossed_by_team(&counted, now_ms()) {
            let what = format!("{}|{}", c.ask.counter, crossing.threshold);
            // Out of reach now: raising it here twice beats not at all.
            if team.claim(&what, c.ask.expires_at_ms).await != Some(false) {
                self.telemetry().budget_crossed(&crossing);
            }
        }
    }

    /// Each budget's spend in its current period: in a team within reach,
    /// the team's counter (every instance's spend, and what is reserved for
    /// requests in flight); else, or for a counter Redis does not have yet,
    /// this instance's own ledger.
    /// The members' budgets (`member:NAME`) come last, as last read.
    pub async fn budget_rows(&self, now_ms: i64) -> Vec<crate::policy::BudgetRow> {
        self.refresh_members().await;
        let rows = self.budgets().rows(now_ms);
        let Some(team) = self.team().filter(|t| t.connected()) else { return rows };
        let counters = self.budgets().every_counter(now_ms).into_iter().map(|c| c.ask.counter).collect();
        let Some(spent) = team.spent(counters).await.filter(|s| s.len() == rows.len()) else { return rows };
        rows.into_iter()
            .zip(spent)
            .map(|(row, micros)| match micros {
                Some(micros) => row.counted_by_team(micros),
                None => row,
            })
            .collect()
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
        if let Some(team) = self.team().filter(|t| t.connected()) {
            team.share(Change::Toggled { provider: name.to_string(), enabled });
        }
        Ok(())
    }

    /// The team this instance belongs to, in team mode.
    pub fn team(&self) -> Option<&Arc<dyn Team>> {
        self.inner.team.as_ref()
    }

    /// This instance's name in its team, for responses and views.
    pub fn instance(&self) -> Option<&str> {
        self.inner.team.as_deref().map(Team::instance)
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

    /// Follows a decision another instance of the team made (`by` names it).
    pub fn apply_team(&self, by: &str, change: &Change) {
        let live = self.live();
        let Some(provider) = live.provider(change.provider()) else { return };
        match change {
            Change::BreakerTripped { for_ms, reason, .. } => provider.team_open(*for_ms, reason, by),
            Change::BreakerClosed { reason, .. } => provider.team_close(reason, by),
            Change::BreakerForced { open, .. } => provider.force_breaker(*open),
            Change::Cooling { key, for_ms, .. } => provider.team_cooling(key.as_deref(), *for_ms),
            Change::Revoked { key, reason, .. } => provider.team_revoked(key, reason, by),
            Change::Toggled { provider: name, enabled } => {
                if provider.is_enabled() != *enabled {
                    if let Err(e) = self.toggle(name, *enabled) {
                        tracing::warn!("{e}");
                    }
                }
            }
        }
    }

    /// The team's one probe of `provider` after a trip is this instance's.
    pub fn team_probe(&self, provider: &str) {
        if let Some(p) = self.live().provider(provider) {
            p.team_probe();
        }
    }

    /// The team holds no verdict for `provider`'s held breaker: its own
    /// timer leads again.
    pub fn team_release(&self, provider: &str) {
        if let Some(p) = self.live().provider(provider) {
            p.team_release();
        }
    }

    /// Each provider takes `1 / instances` of its concurrency caps (1: the
    /// whole caps), while the team's shared caps are out of reach.
    pub fn team_share(&self, instances: u32) {
        self.inner.share.store(instances, Ordering::Relaxed);
        for p in &self.live().providers {
            p.share_caps(instances);
        }
    }

    /// The team went out of reach (`false`) or came back (`true`).
    pub fn team_reachable(&self, reachable: bool) {
        for p in &self.live().providers {
            p.team_reachable(reachable);
        }
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
                    let share = self.inner.share.load(Ordering::Relaxed);
                    if share > 1 {
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
