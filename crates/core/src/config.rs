//! Configuration: TOML parsed into raw, spanned structs, then validated into
//! [`Config`]. Every error names the file, the line and the field, because a
//! gateway that refuses to start must say exactly what to fix.

use std::fmt;
use std::net::SocketAddr;
use std::ops::Range;
use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use serde::Deserialize;
use toml::Spanned;

use crate::policy::order::{Schedule, Strategy};
use crate::policy::queue::QueuePolicy;
use crate::policy::{ProviderPolicy, RequestPolicy};
use crate::protocol::{Endpoint, Format, Profile, Protocol};

mod budgets;
mod chain;
mod desktop;
pub(crate) mod edit;
mod history_url;
mod policy;
mod team;
mod telemetry;
pub use budgets::AlertPolicy;
pub use desktop::DesktopConfig;
use desktop::RawDesktop;
pub use history_url::HistoryUrl;
pub use policy::{CachePolicy, FallbackResponse};
use policy::{PolicyError, RawPolicy};
pub use team::{redact as redact_redis_url, TeamConfig};
pub use telemetry::{is_endpoint as is_telemetry_endpoint, shown_url, TelemetryConfig, SAMPLERS};

/// The configuration used when none is given: well-known providers that stay
/// unused until a key exists for them, and a local Ollama that needs none.
pub const EMBEDDED_DEFAULT: &str = include_str!("default.toml");

/// Default cap on a request body; large enough for image-bearing prompts.
pub const DEFAULT_MAX_BODY_BYTES: usize = 32 * 1024 * 1024;

/// A validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub server: ServerConfig,
    /// Request policy for models without a route of their own.
    pub policy: RequestPolicy,
    /// Provider policy from `[policy]`, before each provider's overrides.
    pub provider_policy: ProviderPolicy,
    /// The response cache for models without a route of their own (`[policy] cache`); off when `None`.
    pub cache: Option<CachePolicy>,
    pub providers: Vec<ProviderConfig>,
    pub routes: Vec<RouteConfig>,
    pub history: HistoryConfig,
    /// Price overrides, ahead of the shipped table.
    pub prices: Vec<Price>,
    /// Spend limits (`[[budgets]]`), in config order.
    pub budgets: Vec<crate::policy::Budget>,
    /// How often alerts may repeat, and what a fallback storm is (`[alerts]`).
    pub alerts: AlertPolicy,
    /// The desktop app's own settings (`[desktop]`).
    pub desktop: DesktopConfig,
    /// Team mode (`[team]`): state shared with other instances through
    /// Redis; `None` decides everything here, as a lone gateway does.
    pub team: Option<TeamConfig>,
    /// Where traces go (`[telemetry]`), before the `OTEL_*` variables.
    pub telemetry: TelemetryConfig,
    /// What the gateway tells the devices its members join it from (`[members]`).
    pub members: MembersConfig,
}

/// `[members]`: the team's word to the gateways its members have joined
/// it from, told with the models on offer (`GET /v1/models`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MembersConfig {
    /// Whether a joined gateway may send a member's request to its own
    /// providers when this gateway cannot answer it (down, failing).
    pub allow_local_fallback: bool,
}

impl Default for MembersConfig {
    fn default() -> MembersConfig {
        MembersConfig { allow_local_fallback: true }
    }
}

/// What is recorded and for how long.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryConfig {
    pub enabled: bool,
    /// Requests older than this are removed.
    pub retention: std::time::Duration,
    /// The database is kept under this size by removing the oldest requests.
    pub max_size_bytes: u64,
    /// Store request and response bodies (truncated), for debugging.
    pub store_bodies: bool,
    pub body_limit: usize,
    /// The response cache's file is kept under this size (`cache_max_size_mb`).
    pub cache_max_bytes: u64,
    /// The spool holds at most this much while the database is out of
    /// reach (`spool_max_size_mb`).
    pub spool_max_bytes: u64,
    /// The PostgreSQL database to record in; `None`: SQLite in the data directory.
    pub url: Option<HistoryUrl>,
}

impl Default for HistoryConfig {
    fn default() -> HistoryConfig {
        HistoryConfig {
            enabled: true,
            retention: std::time::Duration::from_secs(30 * 24 * 3600),
            max_size_bytes: 512 * 1024 * 1024,
            store_bodies: false,
            body_limit: 16 * 1024,
            cache_max_bytes: 64 * 1024 * 1024,
            spool_max_bytes: crate::ground::limits::SPOOL_BYTES,
            url: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub max_body_bytes: usize,
    /// Host names accepted besides the loopback names (DNS-rebinding guard).
    pub allowed_hosts: Vec<String>,
    /// Browser origins allowed to call the proxy endpoints (none by default).
    pub allowed_origins: Vec<String>,
    /// Clients must send the local access token as their API key.
    pub access_token: bool,
    pub max_header_bytes: usize,
    pub max_connections: usize,
    /// Requests per minute from one client address.
    pub rate_limit_per_minute: u32,
    /// Time allowed to send the request head.
    pub header_timeout: std::time::Duration,
    /// Time allowed to send the request body.
    pub body_timeout: std::time::Duration,
    /// How often providers with `probe = true` are probed (a provider that
    /// stays unreachable backs off to ten times this).
    pub probe_every: std::time::Duration,
    /// Secrets the gateway knows and credential shapes are taken out of a
    /// prompt before it goes upstream ([`crate::proxy::redact`]).
    pub redact_outgoing: bool,
}

/// How the gateway authenticates to a provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Auth {
    /// A key from the secret store, sent in the provider's own header.
    Key,
    /// No key at all (a local server such as Ollama).
    None,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ProviderConfig {
    pub name: String,
    pub kind: Protocol,
    /// Base URL including the API version segment, e.g. `https://api.openai.com/v1`.
    pub base_url: url::Url,
    pub models: ModelMap,
    pub enabled: bool,
    pub auth: Auth,
    pub policy: ProviderPolicy,
    /// For OpenAI-kind chat streams: ask for usage the client did not ask
    /// for (and strip it again), so spend is counted.
    pub stream_usage: bool,
    /// Probe the provider (`GET /models`) in the background. On by default
    /// for local servers, off for remote ones that may bill for it.
    pub probe: bool,
    /// What the provider accepts beyond its wire format, for requests
    /// translated to it (`responses = true` is `profile.responses`).
    pub profile: Profile,
    /// Waiting for capacity (`max_queue`, `max_queue_wait`); off by default.
    pub queue: QueuePolicy,
    /// Requests at once per key (`keys = { max_concurrency = N }`); no cap by default.
    pub key_max_concurrency: Option<u32>,
    /// `kind = "switchyard"`: a team's gateway this one has joined.
    pub joined: Option<Joined>,
}

/// A team's gateway this one has joined (`kind = "switchyard"`, written by
/// `switchyard join`). It speaks every format the gateway does, so a
/// request goes to it as the client sent it, with the member's key; and
/// its word on the member (a refused key, a spent budget) is the answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Joined {
    /// The name the team's gateway records requests under, beside the
    /// member (`x-switchyard-device`): `device`, else the host's name.
    pub device: String,
    /// The team's word on whether a request may go to this gateway's own
    /// providers when the team's gateway cannot answer (down, failing).
    pub allow_local_fallback: bool,
}

impl ProviderConfig {
    /// Whether the provider takes requests to `endpoint` as they are.
    pub fn speaks(&self, endpoint: Endpoint) -> bool {
        if self.joined.is_some() {
            return true;
        }
        match endpoint {
            Endpoint::Responses => self.kind == Protocol::OpenAi && self.profile.responses,
            Endpoint::ChatCompletions => self.kind == Protocol::OpenAi && self.profile.chat,
            e => self.kind == e.protocol(),
        }
    }

    /// The format requests are translated to for this provider.
    pub fn translated_format(&self) -> Format {
        match self.kind {
            Protocol::OpenAi if !self.profile.chat => Format::Responses,
            Protocol::OpenAi => Format::Chat,
            Protocol::Anthropic => Format::Messages,
            Protocol::Gemini => Format::Gemini,
        }
    }

    /// The path below `base_url` a request to `endpoint` goes to (naming
    /// `model` in Gemini's). A joined team's gateway takes the gateway's
    /// own paths below its address.
    pub fn path(&self, endpoint: Endpoint, model: &str) -> std::borrow::Cow<'static, str> {
        match &self.joined {
            Some(_) => endpoint.gateway_path().trim_start_matches('/').replace("{model}", model).into(),
            None => endpoint.upstream_path(model),
        }
    }

    /// The kind as the config names it.
    pub fn kind_name(&self) -> &'static str {
        match &self.joined {
            Some(_) => "switchyard",
            None => self.kind.as_str(),
        }
    }

    /// Whether the provider can serve a request to `endpoint`, as it is or
    /// translated.
    pub fn reaches(&self, endpoint: Endpoint) -> bool {
        self.speaks(endpoint) || endpoint.format().is_some()
    }
}

/// The models a provider serves: the name clients ask for, mapped to the
/// provider's own name. `"*"` as a client name accepts any model unchanged.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelMap(IndexMap<String, String>);

impl ModelMap {
    pub const WILDCARD: &'static str = "*";

    /// The provider's name for `model`, if the provider lists it explicitly.
    pub fn explicit(&self, model: &str) -> Option<&str> {
        if model == Self::WILDCARD {
            return None;
        }
        self.0.get(model).map(String::as_str)
    }

    pub fn has_wildcard(&self) -> bool {
        self.0.contains_key(Self::WILDCARD)
    }

    /// Client-facing model names, in config order, without the wildcard.
    pub fn client_names(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str).filter(|m| *m != Self::WILDCARD)
    }
}

#[derive(Debug, Clone)]
pub struct RouteConfig {
    pub model: String,
    pub chain: Vec<String>,
    /// The weights `chain` was given (`{ provider = "a", weight = 9 }`),
    /// as a round `weighted` goes by; `None` when no entry has one.
    pub schedule: Option<crate::policy::order::Schedule>,
    /// `policy.strategy` is the route's strategy: its own, else `[policy]`'s.
    pub policy: RequestPolicy,
    /// The route's cache: its own `cache`, else `[policy]`'s.
    pub cache: Option<CachePolicy>,
    /// What the client gets when the chain fails and nothing stale can stand in.
    pub fallback_response: Option<FallbackResponse>,
}

impl Config {
    /// The embedded default configuration.
    pub fn embedded_default() -> Result<Config, ConfigError> {
        Config::parse(EMBEDDED_DEFAULT, Path::new("<embedded default>"))
    }

    /// Reads and validates a config file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::Io { file: path.to_path_buf(), message: e.to_string() })?;
        Config::parse(&text, path)
    }

    /// Parses and validates TOML text; `file` is only used in error messages.
    pub fn parse(text: &str, file: &Path) -> Result<Config, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| {
            let span = e.span().unwrap_or(0..0);
            ConfigError::at(file, text, span.clone(), field_of(e.message(), text, span), e.message())
        })?;
        Validator { file, text }.config(raw)
    }

    pub fn provider(&self, name: &str) -> Option<&ProviderConfig> {
        self.providers.iter().find(|p| p.name == name)
    }

    /// Listens on `listen` instead of the file's address (`--listen`,
    /// `SWITCHYARD_LISTEN`, the desktop app's override), held to the same
    /// rule as the file: off loopback only with the access token required.
    /// `origin` names the override in the error.
    pub fn override_listen(&mut self, listen: SocketAddr, origin: &str) -> Result<(), ConfigError> {
        exposure(listen, self.server.access_token).map_err(|message| ConfigError::Override {
            origin: origin.to_string(),
            field: "server.listen",
            message,
        })?;
        self.server.listen = listen;
        Ok(())
    }

    /// Joins a team on the Redis at `url` (from `origin`, such as
    /// `SWITCHYARD_TEAM_REDIS`), keeping a `[team]` table's other settings.
    pub fn override_team_redis(&mut self, url: &str, origin: &str) -> Result<(), ConfigError> {
        let joined = TeamConfig::on(url).map_err(|message| ConfigError::Override {
            origin: origin.to_string(),
            field: "team.redis",
            message,
        })?;
        match &mut self.team {
            Some(team) => team.redis = joined.redis,
            None => self.team = Some(joined),
        }
        Ok(())
    }

    /// Records history in the PostgreSQL database at `url` (from `origin`,
    /// such as `SWITCHYARD_HISTORY_URL`) instead of the file's setting.
    pub fn override_history_url(&mut self, url: &str, origin: &str) -> Result<(), ConfigError> {
        let url = HistoryUrl::parse(url).map_err(|message| ConfigError::Override {
            origin: origin.to_string(),
            field: "history.url",
            message,
        })?;
        self.history.url = Some(url);
        Ok(())
    }

    /// The request policy for a model: its route's, else the global one.
    pub fn request_policy(&self, model: &str) -> &RequestPolicy {
        // Routes are few; a linear scan beats hashing here.
        self.routes.iter().find(|r| r.model == model).map_or(&self.policy, |r| &r.policy)
    }

    /// The cache settings for a model: its route's, else the global ones.
    pub fn cache_policy(&self, model: &str) -> Option<&CachePolicy> {
        match self.routes.iter().find(|r| r.model == model) {
            Some(route) => route.cache.as_ref(),
            None => self.cache.as_ref(),
        }
    }

    /// The static answer a model's route names for when its chain fails.
    pub fn fallback_response(&self, model: &str) -> Option<&FallbackResponse> {
        self.routes.iter().find(|r| r.model == model).and_then(|r| r.fallback_response.as_ref())
    }
}

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{}: cannot read: {message}", file.display())]
    Io { file: PathBuf, message: String },
    #[error("{}:{line}:{column}: {field}: {message}", file.display())]
    Invalid { file: PathBuf, line: usize, column: usize, field: String, message: String },
    /// A setting given outside the file (a flag or environment variable).
    #[error("{origin}: {field}: {message}")]
    Override { origin: String, field: &'static str, message: String },
}

/// Whether the gateway may listen on `listen`: an address other machines
/// can reach spends the user's keys for anyone who finds it, unless every
/// client must send the local access token.
fn exposure(listen: SocketAddr, access_token: bool) -> Result<(), String> {
    if listen.ip().is_loopback() || access_token {
        return Ok(());
    }
    Err(format!(
        "{listen} is reachable from other machines: set [server] access_token = true to require the local access token"
    ))
}

impl ConfigError {
    fn at(file: &Path, text: &str, span: Range<usize>, field: String, message: &str) -> ConfigError {
        let (line, column) = line_column(text, span.start);
        ConfigError::Invalid { file: file.to_path_buf(), line, column, field, message: message.trim().to_string() }
    }
}

/// One-based line and column of a byte offset.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rfind('\n').map_or(before.len(), |nl| before.len() - nl - 1) + 1;
    (line, column)
}

/// Best guess at the field a parse error is about: serde names it in
/// backticks for missing and unknown fields; otherwise the key on that line.
fn field_of(message: &str, text: &str, span: Range<usize>) -> String {
    let names_field = message.contains("missing field") || message.contains("unknown field");
    if let Some(start) = message.find('`').filter(|_| names_field) {
        if let Some(len) = message[start + 1..].find('`') {
            return message[start + 1..start + 1 + len].to_string();
        }
    }
    let start = text[..span.start.min(text.len())].rfind('\n').map_or(0, |i| i + 1);
    let line = text[start..].lines().next().unwrap_or("");
    match line.split_once('=') {
        Some((key, _)) => key.trim().to_string(),
        None => line.trim().to_string(),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    server: RawServer,
    #[serde(default)]
    policy: RawPolicy,
    #[serde(default)]
    providers: Vec<RawProvider>,
    #[serde(default)]
    routes: Vec<RawRoute>,
    #[serde(default)]
    history: RawHistory,
    #[serde(default)]
    prices: Vec<Spanned<Price>>,
    #[serde(default)]
    budgets: Vec<budgets::RawBudget>,
    #[serde(default)]
    alerts: budgets::RawAlerts,
    #[serde(default)]
    desktop: RawDesktop,
    team: Option<Spanned<team::RawTeam>>,
    #[serde(default)]
    telemetry: telemetry::RawTelemetry,
    #[serde(default)]
    members: RawMembers,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMembers {
    allow_local_fallback: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHistory {
    enabled: Option<bool>,
    retention: Option<Spanned<String>>,
    max_size_mb: Option<Spanned<i64>>,
    store_bodies: Option<bool>,
    body_limit: Option<Spanned<i64>>,
    cache_max_size_mb: Option<Spanned<i64>>,
    spool_max_size_mb: Option<Spanned<i64>>,
    url: Option<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServer {
    listen: Option<Spanned<String>>,
    max_body_bytes: Option<Spanned<i64>>,
    #[serde(default)]
    allowed_hosts: Vec<String>,
    #[serde(default)]
    allowed_origins: Vec<Spanned<String>>,
    access_token: Option<bool>,
    max_header_bytes: Option<Spanned<i64>>,
    max_connections: Option<Spanned<i64>>,
    rate_limit_per_minute: Option<Spanned<i64>>,
    header_timeout: Option<Spanned<String>>,
    body_timeout: Option<Spanned<String>>,
    probe_every: Option<Spanned<String>>,
    redact_outgoing: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProvider {
    name: Spanned<String>,
    kind: Spanned<String>,
    base_url: Spanned<String>,
    #[serde(default)]
    models: Option<Spanned<RawModels>>,
    #[serde(default = "yes")]
    enabled: bool,
    auth: Option<Spanned<String>>,
    #[serde(default)]
    policy: RawPolicy,
    #[serde(default = "yes")]
    stream_usage: bool,
    probe: Option<bool>,
    /// An OpenAI-kind provider that speaks the Responses API too.
    responses: Option<Spanned<bool>>,
    /// `false`: an OpenAI-kind provider that speaks only Responses.
    chat: Option<Spanned<bool>>,
    #[serde(default)]
    profile: Profile,
    keys: Option<RawKeys>,
    /// `kind = "switchyard"`: the name the team records this device under.
    device: Option<Spanned<String>>,
    /// `kind = "switchyard"`: the team's word on falling back locally.
    allow_local_fallback: Option<Spanned<bool>>,
}

/// `keys = { max_concurrency = N }` in a `[[providers]]` entry.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKeys {
    max_concurrency: Option<Spanned<i64>>,
}

fn yes() -> bool {
    true
}

/// A device name a header carries and a filter matches as it is.
pub fn valid_device(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RawModels {
    List(Vec<String>),
    Map(IndexMap<String, String>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRoute {
    model: Spanned<String>,
    chain: Spanned<Vec<chain::RawEntry>>,
    /// Over the route's `policy.strategy` and `[policy]`'s.
    strategy: Option<Spanned<String>>,
    max_latency: Option<Spanned<String>>,
    #[serde(default)]
    policy: RawPolicy,
    fallback_response: Option<Spanned<RawFallback>>,
}

/// `fallback_response = { status = 503, body = "...", content_type = "application/json" }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFallback {
    status: i64,
    body: String,
    content_type: Option<String>,
}

/// A provider on this machine (probing it costs nothing).
fn is_local(url: &url::Url) -> bool {
    let Some(host) = url.host_str() else { return false };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost"
        || host.ends_with(".localhost")
        || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

struct Validator<'a> {
    file: &'a Path,
    text: &'a str,
}

impl Validator<'_> {
    fn error<T>(
        &self,
        span: Range<usize>,
        field: impl fmt::Display,
        message: impl fmt::Display,
    ) -> Result<T, ConfigError> {
        Err(ConfigError::at(self.file, self.text, span, field.to_string(), &message.to_string()))
    }

    fn policy_error<T>(&self, prefix: &str, e: PolicyError) -> Result<T, ConfigError> {
        self.error(e.span, format!("{prefix}.{}", e.field), e.message)
    }

    fn config(&self, raw: RawConfig) -> Result<Config, ConfigError> {
        let server = self.server(raw.server)?;
        let policy = raw.policy.request(&RequestPolicy::default()).or_else(|e| self.policy_error("policy", e))?;
        let provider_policy =
            raw.policy.provider(&ProviderPolicy::default()).or_else(|e| self.policy_error("policy", e))?;
        let cache = raw.policy.cache(None).or_else(|e| self.policy_error("policy", e))?;
        let queue = raw.policy.queue(&QueuePolicy::default()).or_else(|e| self.policy_error("policy", e))?;
        let defaults = Defaults { provider: &provider_policy, queue, request: &policy, cache: cache.as_ref() };
        let mut providers: Vec<ProviderConfig> = Vec::with_capacity(raw.providers.len());
        for (i, p) in raw.providers.into_iter().enumerate() {
            let provider = self.provider(i, p, &providers, &defaults)?;
            providers.push(provider);
        }
        let mut routes: Vec<RouteConfig> = Vec::with_capacity(raw.routes.len());
        for (i, r) in raw.routes.into_iter().enumerate() {
            let route = self.route(i, r, &providers, &routes, &defaults)?;
            routes.push(route);
        }
        let history = self.history(raw.history)?;
        let mut prices = Vec::with_capacity(raw.prices.len());
        for (i, price) in raw.prices.into_iter().enumerate() {
            let span = price.span();
            let price = price.into_inner();
            if [price.input, price.output, price.cached.unwrap_or(0.0)].iter().any(|v| !v.is_finite() || *v < 0.0) {
                return self.error(
                    span,
                    format!("prices[{i}]"),
                    "prices must be zero or more (USD per million tokens)",
                );
            }
            prices.push(price);
        }
        let budgets = self.budgets(raw.budgets, &providers)?;
        let alerts = self.alerts(raw.alerts)?;
        let desktop = self.desktop(raw.desktop)?;
        let team = self.team(raw.team)?;
        let telemetry = self.telemetry(raw.telemetry)?;
        Ok(Config {
            server,
            policy,
            provider_policy,
            cache,
            providers,
            routes,
            history,
            prices,
            budgets,
            alerts,
            desktop,
            team,
            telemetry,
            members: MembersConfig { allow_local_fallback: raw.members.allow_local_fallback.unwrap_or(true) },
        })
    }

    fn history(&self, raw: RawHistory) -> Result<HistoryConfig, ConfigError> {
        let mut h = HistoryConfig::default();
        if let Some(e) = raw.enabled {
            h.enabled = e;
        }
        if let Some(r) = raw.retention {
            match humantime::parse_duration(r.get_ref()) {
                Ok(d) if !d.is_zero() => h.retention = d,
                _ => {
                    return self.error(
                        r.span(),
                        "history.retention",
                        format!("{:?} is not a duration such as \"30days\"", r.get_ref()),
                    )
                }
            }
        }
        if let Some(m) = raw.max_size_mb {
            match u64::try_from(*m.get_ref()) {
                Ok(mb) if mb >= 1 => match mb.checked_mul(1024 * 1024) {
                    Some(bytes) => h.max_size_bytes = bytes,
                    None => return self.error(m.span(), "history.max_size_mb", "must be less than 2^44"),
                },
                _ => return self.error(m.span(), "history.max_size_mb", "must be at least 1"),
            }
        }
        if let Some(b) = raw.store_bodies {
            h.store_bodies = b;
        }
        if let Some(l) = raw.body_limit {
            match usize::try_from(*l.get_ref()) {
                Ok(n) if n >= 1 => h.body_limit = n,
                _ => return self.error(l.span(), "history.body_limit", "must be at least 1 byte"),
            }
        }
        if let Some(m) = raw.cache_max_size_mb {
            match u64::try_from(*m.get_ref()).ok().filter(|mb| *mb >= 1).and_then(|mb| mb.checked_mul(1024 * 1024)) {
                Some(bytes) => h.cache_max_bytes = bytes,
                None => {
                    return self.error(m.span(), "history.cache_max_size_mb", "must be at least 1 and less than 2^44")
                }
            }
        }
        if let Some(m) = raw.spool_max_size_mb {
            match u64::try_from(*m.get_ref()).ok().filter(|mb| *mb >= 1).and_then(|mb| mb.checked_mul(1024 * 1024)) {
                Some(bytes) => h.spool_max_bytes = bytes,
                None => {
                    return self.error(m.span(), "history.spool_max_size_mb", "must be at least 1 and less than 2^44")
                }
            }
        }
        if let Some(url) = raw.url {
            // The message names the field, never the value: it may hold a password.
            h.url = Some(HistoryUrl::parse(url.get_ref()).or_else(|why| self.error(url.span(), "history.url", why))?);
        }
        Ok(h)
    }

    fn server(&self, raw: RawServer) -> Result<ServerConfig, ConfigError> {
        let listen = match &raw.listen {
            None => SocketAddr::from(([127, 0, 0, 1], 4141)),
            Some(s) => match s.get_ref().parse() {
                Ok(addr) => addr,
                Err(_) => {
                    return self.error(
                        s.span(),
                        "server.listen",
                        format!("{:?} is not an address like \"127.0.0.1:4141\"", s.get_ref()),
                    )
                }
            },
        };
        let count = |v: &Option<Spanned<i64>>, field: &str, min: i64, default: i64| -> Result<i64, ConfigError> {
            match v {
                None => Ok(default),
                Some(n) if *n.get_ref() >= min => Ok(*n.get_ref()),
                Some(n) => self.error(n.span(), field, format!("must be at least {min}")),
            }
        };
        let duration = |v: &Option<Spanned<String>>,
                        field: &str,
                        default: u64|
         -> Result<std::time::Duration, ConfigError> {
            match v {
                None => Ok(std::time::Duration::from_secs(default)),
                Some(d) => match humantime::parse_duration(d.get_ref()) {
                    Ok(t) if !t.is_zero() => Ok(t),
                    _ => self.error(d.span(), field, format!("{:?} is not a duration such as \"10s\"", d.get_ref())),
                },
            }
        };
        let access_token = raw.access_token.unwrap_or(false);
        if let Err(message) = exposure(listen, access_token) {
            let span = raw.listen.as_ref().map_or(0..0, Spanned::span);
            return self.error(span, "server.listen", message);
        }
        for origin in &raw.allowed_origins {
            let ok =
                url::Url::parse(origin.get_ref()).is_ok_and(|u| u.path() == "/" && !origin.get_ref().ends_with('/'));
            if !ok {
                return self.error(
                    origin.span(),
                    "server.allowed_origins",
                    format!("{:?} is not an origin such as \"http://localhost:5173\"", origin.get_ref()),
                );
            }
        }
        Ok(ServerConfig {
            listen,
            max_body_bytes: count(&raw.max_body_bytes, "server.max_body_bytes", 1024, DEFAULT_MAX_BODY_BYTES as i64)?
                as usize,
            allowed_hosts: raw.allowed_hosts.iter().map(|h| h.to_ascii_lowercase()).collect(),
            allowed_origins: raw.allowed_origins.into_iter().map(Spanned::into_inner).collect(),
            access_token,
            max_header_bytes: count(&raw.max_header_bytes, "server.max_header_bytes", 1024, 64 * 1024)? as usize,
            max_connections: count(&raw.max_connections, "server.max_connections", 1, 1024)? as usize,
            rate_limit_per_minute: u32::try_from(count(
                &raw.rate_limit_per_minute,
                "server.rate_limit_per_minute",
                1,
                6000,
            )?)
            .or_else(|_| {
                let span = raw.rate_limit_per_minute.as_ref().map_or(0..0, Spanned::span);
                self.error(span, "server.rate_limit_per_minute", format!("must be at most {}", u32::MAX))
            })?,
            header_timeout: duration(&raw.header_timeout, "server.header_timeout", 10)?,
            body_timeout: duration(&raw.body_timeout, "server.body_timeout", 30)?,
            probe_every: duration(&raw.probe_every, "server.probe_every", 30)?,
            redact_outgoing: raw.redact_outgoing.unwrap_or(false),
        })
    }

    fn provider(
        &self,
        i: usize,
        raw: RawProvider,
        earlier: &[ProviderConfig],
        defaults: &Defaults<'_>,
    ) -> Result<ProviderConfig, ConfigError> {
        let field = |f: &str| format!("providers[{i}].{f}");
        let name = raw.name.get_ref().clone();
        let valid_name = !name.is_empty()
            && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
        if !valid_name {
            return self.error(raw.name.span(), field("name"), "use lower-case letters, digits, '-' and '_'");
        }
        if earlier.iter().any(|p| p.name == name) {
            return self.error(raw.name.span(), field("name"), format!("provider {name:?} is defined twice"));
        }
        let kind = match raw.kind.get_ref().as_str() {
            // A team's gateway is called with a bearer key, as OpenAI is.
            "openai" | "switchyard" => Protocol::OpenAi,
            "anthropic" => Protocol::Anthropic,
            "gemini" => Protocol::Gemini,
            other => {
                return self.error(
                    raw.kind.span(),
                    field("kind"),
                    format!("{other:?} is not \"openai\", \"anthropic\", \"gemini\" or \"switchyard\""),
                )
            }
        };
        let joined = match (raw.kind.get_ref().as_str(), &raw.device, &raw.allow_local_fallback) {
            ("switchyard", device, allow) => Some(Joined {
                device: device.as_ref().map_or_else(crate::ground::host::name, |d| d.get_ref().trim().to_string()),
                allow_local_fallback: allow.as_ref().is_none_or(|a| *a.get_ref()),
            }),
            (_, Some(d), _) => {
                return self.error(d.span(), field("device"), "is for a `kind = \"switchyard\"` provider")
            }
            (_, _, Some(a)) => {
                return self.error(a.span(), field("allow_local_fallback"), "is for a `kind = \"switchyard\"` provider")
            }
            _ => None,
        };
        if let Some(device) = raw.device.as_ref().filter(|d| !valid_device(d.get_ref())) {
            return self.error(device.span(), field("device"), "use 1 to 64 letters, digits, '.', '-' and '_'");
        }
        let base_url = match url::Url::parse(raw.base_url.get_ref().trim_end_matches('/')) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => u,
            _ => {
                return self.error(
                    raw.base_url.span(),
                    field("base_url"),
                    "must be an http(s) URL such as \"https://api.openai.com/v1\"",
                )
            }
        };
        let auth = match raw.auth.as_ref().map(|a| a.get_ref().as_str()) {
            None | Some("key") => Auth::Key,
            Some("none") => Auth::None,
            Some(other) => {
                let span = raw.auth.as_ref().map_or(0..0, Spanned::span);
                return self.error(span, field("auth"), format!("{other:?} is not \"key\" or \"none\""));
            }
        };
        let models = match raw.models {
            None => ModelMap::default(),
            Some(m) => {
                let span = m.span();
                let map: IndexMap<String, String> = match m.into_inner() {
                    RawModels::List(list) => list.into_iter().map(|m| (m.clone(), m)).collect(),
                    RawModels::Map(map) => map,
                };
                if map.iter().any(|(k, v)| k.is_empty() || v.is_empty()) {
                    return self.error(span, field("models"), "model names must not be empty");
                }
                ModelMap(map)
            }
        };
        if let Some((setting, span)) = raw.policy.first_request_setting() {
            return self.error(
                span,
                field(&format!("policy.{setting}")),
                "is a request setting: set it in [policy] or in a route's policy",
            );
        }
        let mut policy = raw.policy.provider(defaults.provider).or_else(|e| self.policy_error(&field("policy"), e))?;
        policy.resume = raw.policy.provider_resume();
        let queue = raw.policy.queue(&defaults.queue).or_else(|e| self.policy_error(&field("policy"), e))?;
        let key_max_concurrency = match raw.keys.and_then(|k| k.max_concurrency) {
            None => None,
            Some(n) => match u32::try_from(*n.get_ref()) {
                Ok(c) if c >= 1 => Some(c),
                _ => {
                    return self.error(n.span(), field("keys.max_concurrency"), "must be a whole number of at least 1")
                }
            },
        };
        let local = is_local(&base_url);
        let mut profile = raw.profile;
        if let Some(responses) = &raw.responses {
            if kind != Protocol::OpenAi && *responses.get_ref() {
                return self.error(
                    responses.span(),
                    field("responses"),
                    "only an openai-kind provider speaks Responses",
                );
            }
            profile.responses = *responses.get_ref();
        }
        if let Some(chat) = &raw.chat {
            if !(*chat.get_ref() || kind == Protocol::OpenAi && profile.responses) {
                return self.error(
                    chat.span(),
                    field("chat"),
                    "`chat = false` is for an openai-kind provider that speaks Responses (`responses = true`)",
                );
            }
            profile.chat = *chat.get_ref();
        }
        Ok(ProviderConfig {
            name,
            kind,
            base_url,
            models,
            enabled: raw.enabled,
            auth,
            policy,
            stream_usage: raw.stream_usage,
            // A team's gateway is probed for its word on the member.
            probe: raw.probe.unwrap_or(local || joined.is_some()),
            profile,
            queue,
            key_max_concurrency,
            joined,
        })
    }

    fn route(
        &self,
        i: usize,
        raw: RawRoute,
        providers: &[ProviderConfig],
        earlier: &[RouteConfig],
        defaults: &Defaults<'_>,
    ) -> Result<RouteConfig, ConfigError> {
        let model = raw.model.get_ref().clone();
        if model.is_empty() || model == ModelMap::WILDCARD {
            return self.error(raw.model.span(), format!("routes[{i}].model"), "must name a model");
        }
        if earlier.iter().any(|r| r.model == model) {
            return self.error(
                raw.model.span(),
                format!("routes[{i}].model"),
                format!("a route for {model:?} is defined twice"),
            );
        }
        if raw.chain.get_ref().is_empty() {
            return self.error(raw.chain.span(), format!("routes[{i}].chain"), "must name at least one provider");
        }
        let (chain, weights) = self.chain(i, raw.chain.into_inner(), providers)?;
        if let Some((setting, span)) = raw.policy.first_provider_setting() {
            return self.error(
                span,
                format!("routes[{i}].policy.{setting}"),
                "is a provider setting: set it in [policy] or in a provider's policy",
            );
        }
        let mut policy =
            raw.policy.request(defaults.request).or_else(|e| self.policy_error(&format!("routes[{i}].policy"), e))?;
        policy::routing(&raw.strategy, &raw.max_latency, &mut policy)
            .or_else(|e| self.policy_error(&format!("routes[{i}]"), e))?;
        let schedule = match weights.iter().find_map(|(w, span)| w.map(|_| span.clone())) {
            None => None,
            Some(span) if policy.strategy != Strategy::Weighted => {
                return self.error(
                    span,
                    format!("routes[{i}].chain"),
                    "weights are for a weighted route: set strategy = \"weighted\"",
                )
            }
            Some(_) => Some(Schedule::new(&weights.iter().map(|(w, _)| w.unwrap_or(1)).collect::<Vec<_>>())),
        };
        let cache =
            raw.policy.cache(defaults.cache).or_else(|e| self.policy_error(&format!("routes[{i}].policy"), e))?;
        let fallback_response = match raw.fallback_response {
            Some(f) => Some(self.fallback(&format!("routes[{i}].fallback_response"), f)?),
            None => None,
        };
        Ok(RouteConfig { model, chain, schedule, policy, cache, fallback_response })
    }

    /// A route's providers, and each one's weight where it has one (with
    /// where it was written).
    fn chain(
        &self,
        i: usize,
        entries: Vec<chain::RawEntry>,
        providers: &[ProviderConfig],
    ) -> Result<(Vec<String>, Vec<Weight>), ConfigError> {
        let mut chain = Vec::with_capacity(entries.len());
        let mut weights = Vec::with_capacity(entries.len());
        for (j, entry) in entries.into_iter().enumerate() {
            let name = entry.provider;
            if !providers.iter().any(|p| &p.name == name.get_ref()) {
                return self.error(
                    name.span(),
                    format!("routes[{i}].chain[{j}]"),
                    format!("no provider is named {:?}", name.get_ref()),
                );
            }
            let weight = match entry.weight {
                None => (None, name.span()),
                Some(w) => match u32::try_from(*w.get_ref()) {
                    Ok(n) if (1..=1000).contains(&n) => (Some(n), w.span()),
                    _ => {
                        return self.error(
                            w.span(),
                            format!("routes[{i}].chain[{j}].weight"),
                            "must be a whole number from 1 to 1000",
                        )
                    }
                },
            };
            weights.push(weight);
            chain.push(name.into_inner());
        }
        Ok((chain, weights))
    }

    fn fallback(&self, field: &str, raw: Spanned<RawFallback>) -> Result<FallbackResponse, ConfigError> {
        let span = raw.span();
        let raw = raw.into_inner();
        let status = match u16::try_from(raw.status).ok().and_then(|s| axum::http::StatusCode::from_u16(s).ok()) {
            Some(s) if (200..600).contains(&s.as_u16()) => s,
            _ => return self.error(span, format!("{field}.status"), "must be an HTTP status from 200 to 599"),
        };
        let content_type = raw.content_type.unwrap_or_else(|| "application/json".into());
        let Ok(header) = axum::http::HeaderValue::from_str(&content_type) else {
            return self.error(span, format!("{field}.content_type"), format!("{content_type:?} is not a media type"));
        };
        if content_type.contains("json") && serde_json::from_str::<serde::de::IgnoredAny>(&raw.body).is_err() {
            return self.error(span, format!("{field}.body"), format!("is not JSON, as {content_type:?} says it is"));
        }
        Ok(FallbackResponse { status, body: bytes::Bytes::from(raw.body), content_type: header })
    }
}

/// A chain entry's weight, if it has one, and where it was written.
type Weight = (Option<u32>, Range<usize>);

/// A `[[prices]]` entry: USD per million tokens.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// The provider it applies to; absent for any provider.
    #[serde(default)]
    pub provider: Option<String>,
    /// The provider's model name, or `"*"` for every model of `provider`.
    pub model: String,
    pub input: f64,
    pub output: f64,
    /// Cached input; the input price when absent.
    #[serde(default)]
    pub cached: Option<f64>,
    /// Input written to the provider's prompt cache (Anthropic bills a
    /// 5-minute write at 1.25 times the input price); the input price when
    /// absent.
    #[serde(default)]
    pub cache_write: Option<f64>,
}

/// What `[policy]` sets for every provider and route that does not say otherwise.
struct Defaults<'a> {
    provider: &'a ProviderPolicy,
    queue: QueuePolicy,
    request: &'a RequestPolicy,
    cache: Option<&'a CachePolicy>,
}

#[cfg(test)]
#[path = "config/cache_tests.rs"]
mod cache_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    pub(super) fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, Path::new("test.toml"))
    }

    /// The line, field and message of the error `text` is refused with.
    pub(super) fn invalid(text: &str) -> (usize, String, String) {
        match parse(text) {
            Err(ConfigError::Invalid { line, field, message, .. }) => (line, field, message),
            other => panic!("expected an invalid config, got {other:?}"),
        }
    }

    #[test]
    fn embedded_default_is_valid() {
        let config = Config::embedded_default().unwrap();
        assert_eq!(config.server.listen.to_string(), "127.0.0.1:4141");
        let ollama = config.provider("ollama").unwrap();
        assert_eq!(ollama.auth, Auth::None);
        assert!(config.providers.iter().any(|p| p.kind == Protocol::Anthropic));
        use crate::protocol::translate::profile::ReasoningField;
        let openrouter = config.provider("openrouter").unwrap();
        assert_eq!(openrouter.profile.reasoning_field, ReasoningField::ReasoningDetails);
    }

    #[test]
    fn chat_false_makes_a_responses_only_provider() {
        let provider = |extra: &str| {
            format!("[[providers]]\nname = \"a\"\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\n{extra}\n")
        };
        let config = parse(&provider("responses = true\nchat = false")).unwrap();
        let a = config.provider("a").unwrap();
        assert!(a.speaks(Endpoint::Responses) && !a.speaks(Endpoint::ChatCompletions));
        assert_eq!(a.translated_format(), Format::Responses, "a Chat client's request is translated to Responses");
        let plain = parse(&provider("")).unwrap();
        assert_eq!(plain.provider("a").unwrap().translated_format(), Format::Chat);
        let (line, field, message) = invalid(&provider("chat = false"));
        assert_eq!((line, field.as_str()), (5, "providers[0].chat"));
        assert!(message.contains("responses = true"), "{message}");
        // OpenAI's own API takes a system message mid-conversation.
        let default = Config::embedded_default().unwrap();
        assert!(default.provider("openai").unwrap().profile.mid_system);
        assert!(!default.provider("groq").unwrap().profile.mid_system);
    }

    #[test]
    fn stream_options_is_yes_no_or_probe_with_the_old_flag_still_read() {
        let provider = |value: &str| {
            format!(
                "[[providers]]\nname = \"a\"\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\n\
                 profile = {{ stream_options = {value} }}\n"
            )
        };
        let read = |value: &str| parse(&provider(value)).unwrap().providers[0].profile.stream_options;
        use crate::protocol::translate::profile::StreamOptions;
        assert_eq!(read("\"probe\""), StreamOptions::Probe);
        assert_eq!(read("\"no\""), StreamOptions::No);
        assert_eq!(read("true"), StreamOptions::Yes, "the earlier boolean form");
        assert_eq!(read("false"), StreamOptions::No);
        match parse(&provider("\"sometimes\"")) {
            Err(e) => {
                let text = e.to_string();
                assert!(text.contains("test.toml:5") && text.contains(r#""yes", "no" or "probe""#), "{text}");
            }
            Ok(_) => panic!("an unknown stream_options value was accepted"),
        }
    }

    #[test]
    fn models_as_list_or_alias_map() {
        let config = parse(
            r#"
[[providers]]
name = "a"
kind = "openai"
base_url = "http://127.0.0.1:1/v1/"
models = ["m1"]

[[providers]]
name = "b"
kind = "openai"
base_url = "http://127.0.0.1:2/v1"
models = { "m1" = "other-m1" }
"#,
        )
        .unwrap();
        assert_eq!(config.providers[0].models.explicit("m1"), Some("m1"));
        assert_eq!(config.providers[1].models.explicit("m1"), Some("other-m1"));
        assert_eq!(config.providers[0].base_url.as_str(), "http://127.0.0.1:1/v1");
    }

    #[test]
    fn numbers_too_large_to_hold_are_refused() {
        // 2^44 MB is 2^64 bytes: the product overflowed (a panic in a debug
        // build, a cap of 0 bytes in a release one), and 2^32 requests a
        // minute was cut to 0, which refused every request.
        let (line, field, message) = invalid("[history]\nmax_size_mb = 17592186044416\n");
        assert_eq!((line, field.as_str(), message.as_str()), (2, "history.max_size_mb", "must be less than 2^44"));
        let config = parse("[history]\nmax_size_mb = 17592186044415\n").unwrap();
        assert_eq!(config.history.max_size_bytes, 17592186044415 * 1024 * 1024);
        let (line, field, _) = invalid("[server]\nrate_limit_per_minute = 4294967296\n");
        assert_eq!((line, field.as_str()), (2, "server.rate_limit_per_minute"));
        let config = parse("[server]\nrate_limit_per_minute = 4294967295\n").unwrap();
        assert_eq!(config.server.rate_limit_per_minute, u32::MAX);
    }

    #[test]
    fn syntax_error_names_line_and_field() {
        let (line, field, _) = invalid("[server]\nlisten = \n");
        assert_eq!(line, 2);
        assert_eq!(field, "listen");
    }

    #[test]
    fn wrong_type_names_line_and_field() {
        let (line, field, message) = invalid("[server]\n\nmax_body_bytes = \"big\"\n");
        assert_eq!((line, field.as_str()), (3, "max_body_bytes"));
        assert!(message.contains("invalid type"), "{message}");
    }

    #[test]
    fn unknown_field_is_named() {
        let (line, field, _) = invalid("[server]\nlisten = \"127.0.0.1:1\"\nlisen = \"x\"\n");
        assert_eq!((line, field.as_str()), (3, "lisen"));
    }

    #[test]
    fn missing_field_is_named() {
        let (_, field, _) = invalid("[[providers]]\nname = \"a\"\nkind = \"openai\"\n");
        assert_eq!(field, "base_url");
    }

    #[test]
    fn validation_errors_point_at_the_value() {
        let (line, field, message) =
            invalid("[[providers]]\nname = \"a\"\nkind = \"palm\"\nbase_url = \"http://x/v1\"\n");
        assert_eq!((line, field.as_str()), (3, "providers[0].kind"));
        assert!(message.contains("gemini"));

        let (line, field, _) = invalid("[server]\nlisten = \"localhost\"\n");
        assert_eq!((line, field.as_str()), (2, "server.listen"));

        let (line, field, _) = invalid("[[providers]]\nname = \"a\"\nkind = \"openai\"\nbase_url = \"ftp:nope\"\n");
        assert_eq!((line, field.as_str()), (4, "providers[0].base_url"));
    }

    #[test]
    fn route_to_unknown_provider_is_refused() {
        let (line, field, message) = invalid(
            "[[providers]]\nname = \"a\"\nkind = \"openai\"\nbase_url = \"http://x/v1\"\n\n[[routes]]\nmodel = \"m\"\nchain = [\"a\", \"b\"]\n",
        );
        assert_eq!((line, field.as_str()), (8, "routes[0].chain[1]"));
        assert!(message.contains("\"b\""));
    }

    #[test]
    fn duplicate_provider_is_refused() {
        let (line, _, message) = invalid(
            "[[providers]]\nname = \"a\"\nkind = \"openai\"\nbase_url = \"http://x/v1\"\n[[providers]]\nname = \"a\"\nkind = \"openai\"\nbase_url = \"http://x/v1\"\n",
        );
        assert_eq!(line, 6);
        assert!(message.contains("twice"));
    }

    #[test]
    fn policy_defaults_and_overrides() {
        let config = parse(
            r#"
[policy]
deadline = "45s"
breaker_cooldown = "5s"
max_concurrency = 8

[[providers]]
name = "a"
kind = "openai"
base_url = "http://x/v1"
models = ["m"]
policy = { max_concurrency = 2, breaker_failure_rate = 0.25 }

[[providers]]
name = "b"
kind = "openai"
base_url = "http://y/v1"
models = ["m", "n"]

[[routes]]
model = "m"
chain = ["a", "b"]
policy = { deadline = "10s", retry_timeouts = true }
"#,
        )
        .unwrap();
        assert_eq!(config.policy.deadline, Duration::from_secs(45));
        assert_eq!(config.request_policy("m").deadline, Duration::from_secs(10));
        assert!(config.request_policy("m").retry_timeouts);
        assert_eq!(config.request_policy("n").deadline, Duration::from_secs(45));
        let (a, b) = (&config.providers[0].policy, &config.providers[1].policy);
        assert_eq!((a.max_concurrency, b.max_concurrency), (Some(2), Some(8)));
        assert_eq!(a.breaker.failure_rate, 0.25);
        assert_eq!(a.breaker.cooldown, Duration::from_secs(5));
    }

    #[test]
    fn policy_errors_name_the_setting() {
        let (line, field, message) = invalid(
            "[policy]
deadline = \"soon\"
",
        );
        assert_eq!((line, field.as_str()), (2, "policy.deadline"));
        assert!(message.contains("\"soon\""));
        let (_, field, _) = invalid(
            "[policy]
fallback_share = 1.5
",
        );
        assert_eq!(field, "policy.fallback_share");
        let (line, field, message) = invalid(
            "[[providers]]\nname = \"a\"\nkind = \"openai\"\nbase_url = \"http://x/v1\"\npolicy = { deadline = \"1s\" }\n",
        );
        assert_eq!((line, field.as_str()), (5, "providers[0].policy.deadline"));
        assert!(message.contains("request setting"));
        let (_, field, _) = invalid(
            "[policy]
max_retries = -1
",
        );
        assert_eq!(field, "policy.max_retries");
    }

    #[test]
    fn a_listen_address_off_loopback_needs_the_access_token() {
        let (line, field, message) = invalid("[server]\nlisten = \"0.0.0.0:4141\"\n");
        assert_eq!((line, field.as_str()), (2, "server.listen"));
        assert!(message.contains("access_token = true"));
        assert!(parse("[server]\nlisten = \"0.0.0.0:4141\"\naccess_token = true\n").is_ok());
        let (_, field, _) = invalid("[server]\nallowed_origins = [\"localhost\"]\n");
        assert_eq!(field, "server.allowed_origins");
    }

    #[test]
    fn a_listen_override_is_held_to_the_same_rule() {
        let mut config = parse("").unwrap();
        let err = config.override_listen("0.0.0.0:4196".parse().unwrap(), "--listen").unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("--listen: server.listen: 0.0.0.0:4196 is reachable"), "{text}");
        assert_eq!(config.server.listen.to_string(), "127.0.0.1:4141", "refused overrides change nothing");
        config.override_listen("127.0.0.1:9".parse().unwrap(), "--listen").unwrap();
        assert_eq!(config.server.listen.to_string(), "127.0.0.1:9");
        let mut guarded = parse("[server]\naccess_token = true\n").unwrap();
        guarded.override_listen("0.0.0.0:4196".parse().unwrap(), "--listen").unwrap();
    }

    #[test]
    fn error_display_has_file_line_field() {
        let err = parse("[server]\nlisten = 4\n").unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("test.toml:2:"), "{text}");
        assert!(text.contains("listen"), "{text}");
    }
}
