//! The history's one interface: [`Store`], which every reader and writer of
//! the record goes through, whichever database holds it, and the types it
//! speaks in. Callers never ask which backend is behind it; each backend
//! implements [`Backend`], and [`Store`] hands every call to the one it has.
//!
//! - SQLite ([`super::sqlite`]): a file in the data directory, the default.
//! - PostgreSQL ([`super::pg`]): one database for every gateway of a team,
//!   when `[history] url` names one.

use std::path::Path;

use serde::Serialize;

use super::derived::{Facet, DAY_MS, HOUR_MS, MINUTE_MS, SPANS};
use super::pg::{PgSink, PgStore};
use super::pricing::Prices;
use super::record::{AttemptDropped, AttemptRecord, AttemptRouting, AttemptTranslation, Record};
use super::sessions::{SessionDetail, SessionFilter, SessionPage};
use super::sqlite::SqliteStore;
use crate::config::HistoryConfig;
use crate::ground::outcome::CacheStatus;
use crate::ground::outcome::RequestOutcome;
use crate::protocol::usage::Usage;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("history database {path}: {source}")]
    Open { path: String, source: sqlx::Error },
    #[error("cannot make the history file {path} owner-only: {source}")]
    Private { path: String, source: std::io::Error },
    #[error("history database migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("history database: {0}")]
    Query(#[from] sqlx::Error),
    #[error("history database: {0}")]
    Write(#[from] rusqlite::Error),
    #[error("cannot start the history writer: {0}")]
    Writer(std::io::Error),
    #[error("a history write stopped before it finished: {0}")]
    WriteTask(String),
    #[error("history spool beside {path}: {source}")]
    Spool { path: String, source: std::io::Error },
    #[error("bad cursor {0:?}")]
    Cursor(String),
    #[error("history row: {0}")]
    Corrupt(String),
    /// What a purge deletes beside the record (the response cache's
    /// answers) could not be deleted.
    #[error("{0}")]
    Beside(String),
    /// PostgreSQL unreachable, refused, or not a schema this binary knows.
    /// The URL is shown redacted.
    #[error("history.url {url}: {message}")]
    Server { url: String, message: String },
}

/// Filters for listing requests. All optional; text is matched exactly.
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct RequestFilter {
    pub provider: Option<String>,
    pub model: Option<String>,
    /// Only requests made with this member's key.
    pub member: Option<String>,
    /// Only requests a member's joined gateway sent from this device.
    pub device: Option<String>,
    /// Only requests of this session.
    pub session: Option<String>,
    pub outcome: Option<RequestOutcome>,
    /// Only requests that did not end `ok`.
    #[serde(default)]
    pub failed: bool,
    /// Only requests that involved a fallback.
    #[serde(default)]
    pub fallback: bool,
    /// Only requests the response cache did this for.
    pub cache: Option<CacheStatus>,
    pub correlation_id: Option<String>,
    /// A request id, a prefix of one, a correlation id or a trace id.
    pub search: Option<String>,
    /// Unix milliseconds, inclusive.
    pub since: Option<i64>,
    /// Unix milliseconds, exclusive.
    pub until: Option<i64>,
    /// From a previous page's `next_cursor`.
    pub cursor: Option<String>,
    pub limit: Option<u32>,
}

/// A request row, without its attempts.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct RequestSummary {
    pub id: String,
    pub correlation_id: String,
    pub started_at: i64,
    pub finished_at: i64,
    pub user_agent: Option<String>,
    pub endpoint: String,
    pub model: Option<String>,
    pub streamed: bool,
    pub outcome: RequestOutcome,
    pub status: Option<i64>,
    pub provider: Option<String>,
    pub provider_model: Option<String>,
    /// Attempts made (the detail view lists them as `attempts`).
    #[serde(rename = "attempt_count")]
    pub attempts: i64,
    pub fallback: bool,
    pub duration_ms: f64,
    pub ttft_ms: Option<f64>,
    pub usage: Usage,
    pub cost_usd: Option<f64>,
    pub error_code: Option<String>,
    pub error: Option<String>,
    /// What the response cache did; null when it was not consulted.
    pub cache: Option<CacheStatus>,
    /// For an answer from the cache: what it would have cost from the provider.
    pub saved_usd: Option<f64>,
    /// The team instance that served it; null for a gateway alone.
    pub instance: Option<String>,
    /// The member whose key made it; null for the owner.
    pub member: Option<String>,
    /// The conversation it is part of; null when refused before its body.
    pub session: Option<String>,
    /// True when its newest message was the user's own input, false for an
    /// agent's follow-up after tool calls; null when not known.
    pub turn: Option<bool>,
    /// The device a member's joined gateway sent it from; null otherwise.
    pub device: Option<String>,
}

/// A request with its attempts in order.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct RequestDetail {
    #[serde(flatten)]
    pub request: RequestSummary,
    /// Its W3C trace id (32 lowercase hex digits), to find its spans in a
    /// tracing backend; null when tracing was off.
    pub trace_id: Option<String>,
    pub request_body: Option<String>,
    pub response_body: Option<String>,
    #[serde(rename = "attempts")]
    pub attempt_list: Vec<AttemptRecord>,
    /// The attempts sent in another format than the client's.
    pub translations: Vec<AttemptTranslation>,
    /// What each translated attempt left out or could not map.
    pub dropped: Vec<AttemptDropped>,
    /// Why the route's strategy put each attempt's provider where it did;
    /// attempts in chain order (`ordered`) have none.
    pub routing: Vec<AttemptRouting>,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Page {
    pub requests: Vec<RequestSummary>,
    pub next_cursor: Option<String>,
}

impl Page {
    /// A page from up to `limit + 1` rows, newest first: the extra row says
    /// that another page follows.
    pub(super) fn of(mut requests: Vec<RequestSummary>, limit: u32) -> Page {
        let next_cursor = if requests.len() > limit as usize {
            requests.truncate(limit as usize);
            requests.last().map(|r| format!("{}:{}", r.started_at, r.id))
        } else {
            None
        };
        Page { requests, next_cursor }
    }
}

/// Tokens and cost for one provider/model in one time bucket.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct SpendRow {
    pub bucket: String,
    pub provider: String,
    pub model: String,
    pub requests: i64,
    /// Requests that did not end ok.
    pub failed: i64,
    pub fallbacks: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cached_tokens: i64,
    /// Null when no request in the bucket had a known price.
    pub cost_usd: Option<f64>,
    /// What the answers from the cache would have cost (zero without any).
    pub saved_usd: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, Serialize, Default)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "lowercase")]
pub enum Bucket {
    #[default]
    Day,
    Hour,
    /// For sparklines over the last hour.
    Minute,
}

impl Bucket {
    pub(super) fn span(self) -> i64 {
        match self {
            Bucket::Day => DAY_MS,
            Bucket::Hour => HOUR_MS,
            Bucket::Minute => MINUTE_MS,
        }
    }

    pub(super) fn format(self) -> &'static str {
        match self {
            Bucket::Day => "%Y-%m-%d",
            Bucket::Hour => "%Y-%m-%dT%H:00Z",
            Bucket::Minute => "%Y-%m-%dT%H:%MZ",
        }
    }
}

pub(super) const DEFAULT_PAGE: u32 = 100;
pub(super) const MAX_PAGE: u32 = 1000;

/// One client (a user agent) and its last request: the Tools view's row.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Client {
    pub user_agent: String,
    pub requests: i64,
    pub last_at: i64,
    pub last_id: String,
    pub last_model: Option<String>,
    pub last_outcome: String,
}

#[derive(Debug, Clone, Copy)]
pub enum CountTable {
    Requests,
    Attempts,
    Events,
    Captures,
}

impl CountTable {
    /// The query that counts its rows, the same in every backend.
    pub(crate) fn count_sql(self) -> &'static str {
        match self {
            CountTable::Requests => "SELECT COUNT(*) FROM requests",
            CountTable::Attempts => "SELECT COUNT(*) FROM attempts",
            CountTable::Events => "SELECT COUNT(*) FROM events",
            CountTable::Captures => "SELECT COUNT(*) FROM captures",
        }
    }
}

/// What a history backend does. [`Store`] is the only caller: everything
/// else goes through it, so that a caller cannot tell the backends apart.
pub(crate) trait Backend {
    /// Writes a batch in one transaction, outside the writer (a replay, a test).
    async fn write(&self, batch: &[Record]) -> Result<(), StoreError>;
    /// The writer thread's connection.
    fn sink(&self) -> Sink;
    async fn requests(&self, filter: &RequestFilter) -> Result<Page, StoreError>;
    async fn request(&self, id: &str) -> Result<Option<RequestDetail>, StoreError>;
    async fn spend(&self, bucket: Bucket, since: i64) -> Result<Vec<SpendRow>, StoreError>;
    async fn cost_since(&self, since: i64) -> Result<Vec<(String, String, f64)>, StoreError>;
    async fn clients(&self, limit: i64) -> Result<Vec<Client>, StoreError>;
    async fn requests_on_record(&self) -> Result<i64, StoreError>;
    async fn count(&self, table: CountTable) -> Result<i64, StoreError>;
    async fn rebuild(&self) -> Result<(), StoreError>;
    /// Applies retention once (age, then size); returns the requests removed.
    async fn prune(&self, config: &HistoryConfig) -> Result<u64, StoreError>;
    /// Deletes every request and event on record; returns the requests.
    async fn purge(&self) -> Result<u64, StoreError>;
    async fn used_bytes(&self) -> Result<i64, StoreError>;
    async fn integrity_check(&self) -> Result<String, StoreError>;
    async fn close(&self);
    async fn members(&self) -> Result<Vec<crate::members::Member>, StoreError>;
    /// Adds a member, or replaces the one of that name.
    async fn put_member(&self, member: &crate::members::Member) -> Result<(), StoreError>;
    /// Whether there was a member of that name to remove.
    async fn remove_member(&self, name: &str) -> Result<bool, StoreError>;
    /// Each member's requests and spend since `since` (Unix ms).
    async fn member_spend(&self, since: i64) -> Result<Vec<crate::members::MemberSpend>, StoreError>;
    async fn sessions(&self, filter: &SessionFilter, now: i64) -> Result<SessionPage, StoreError>;
    async fn session(
        &self,
        id: &str,
        window: Window,
        timeline: u32,
        prices: Option<&Prices>,
    ) -> Result<Option<SessionDetail>, StoreError>;
    async fn agent_spend(&self, since: i64) -> Result<Vec<AgentSpend>, StoreError>;
    /// A request's captured bodies, as stored (compressed), if it has them.
    async fn capture(&self, id: &str) -> Result<Option<StoredCapture>, StoreError>;
    /// The requests that replayed `id`, oldest first.
    async fn replays(&self, id: &str) -> Result<Vec<String>, StoreError>;
}

/// The [`Backend`] methods both SQL databases answer alike: members and
/// sessions, read and written by the functions [`super::members`]'s and
/// [`super::sessions`]'s macros expand in each backend's module, on its
/// `pool`. Expanded inside each `impl Backend`.
macro_rules! pooled_backend {
    () => {
        async fn members(&self) -> Result<Vec<crate::members::Member>, StoreError> {
            list_members(&self.pool).await
        }

        async fn put_member(&self, member: &crate::members::Member) -> Result<(), StoreError> {
            put_member(&self.pool, member).await
        }

        async fn remove_member(&self, name: &str) -> Result<bool, StoreError> {
            remove_member(&self.pool, name).await
        }

        async fn sessions(
            &self,
            filter: &crate::history::sessions::SessionFilter,
            now: i64,
        ) -> Result<crate::history::sessions::SessionPage, StoreError> {
            list_sessions(&self.pool, filter, now).await
        }

        async fn session(
            &self,
            id: &str,
            window: crate::history::store::Window,
            timeline: u32,
            prices: Option<&crate::history::pricing::Prices>,
        ) -> Result<Option<crate::history::sessions::SessionDetail>, StoreError> {
            one_session(&self.pool, id, window, timeline, prices).await
        }

        async fn agent_spend(&self, since: i64) -> Result<Vec<crate::history::store::AgentSpend>, StoreError> {
            agent_spend(&self.pool, since).await
        }

        async fn member_spend(&self, since: i64) -> Result<Vec<crate::members::MemberSpend>, StoreError> {
            member_spend(&self.pool, since).await
        }
    };
}
pub(crate) use pooled_backend;

/// A request's captured bodies as the store holds them: see
/// [`crate::proxy::capture`] for what the data holds.
#[derive(Debug, Clone)]
pub struct StoredCapture {
    pub replay_of: Option<String>,
    pub data: Vec<u8>,
}

/// A time window: since (inclusive), until (exclusive), Unix ms.
pub type Window = (i64, Option<i64>);
/// Per user agent: requests, input and output tokens, cost.
pub type AgentSpend = (Option<String>, i64, i64, i64, Option<f64>);

/// A handle on the history, whichever database holds it; cheap to clone.
#[derive(Debug, Clone)]
pub struct Store {
    backend: Backends,
}

#[derive(Debug, Clone)]
enum Backends {
    Sqlite(SqliteStore),
    Postgres(PgStore),
}

/// The writer thread's side of a backend: a blocking write of one batch.
#[derive(Debug)]
pub(crate) enum Sink {
    Sqlite(super::sqlite::insert::SqliteSink),
    Postgres(PgSink),
}

impl Sink {
    /// Writes a batch in one transaction.
    pub(crate) fn write(&mut self, records: &[Record]) -> Result<(), StoreError> {
        match self {
            Sink::Sqlite(s) => s.write(records),
            Sink::Postgres(s) => s.write(records),
        }
    }

    /// Drops the connection after a failure, so the next write opens a fresh one.
    pub(crate) fn reset(&mut self) {
        match self {
            Sink::Sqlite(s) => s.reset(),
            Sink::Postgres(s) => s.reset(),
        }
    }
}

/// Hands a call to whichever backend the store has.
macro_rules! each {
    ($store:expr, $b:ident => $call:expr) => {
        match &$store.backend {
            Backends::Sqlite($b) => $call,
            Backends::Postgres($b) => $call,
        }
    };
}

impl Store {
    /// Opens (creating if needed) and migrates the SQLite database at `path`.
    pub async fn open(path: &Path) -> Result<Store, StoreError> {
        Ok(Store { backend: Backends::Sqlite(SqliteStore::open(path).await?) })
    }

    /// The history `config` asks for: the PostgreSQL database its `url`
    /// names, else the SQLite database at `path`. With PostgreSQL, `path`
    /// is still where the spool and the response cache are kept.
    pub async fn open_configured(path: &Path, config: &HistoryConfig) -> Result<Store, StoreError> {
        let backend = match &config.url {
            Some(url) => Backends::Postgres(PgStore::open(url, path).await?),
            None => Backends::Sqlite(SqliteStore::open(path).await?),
        };
        Ok(Store { backend })
    }

    /// Which database holds the record, for health and `/admin`: `sqlite`
    /// or `postgres`.
    pub fn backend(&self) -> &'static str {
        match &self.backend {
            Backends::Sqlite(_) => "sqlite",
            Backends::Postgres(_) => "postgres",
        }
    }

    /// The local file the history is anchored on: the SQLite database, or
    /// for a server, the place its spool (and the response cache) sit beside.
    pub fn path(&self) -> &Path {
        each!(self, b => b.path())
    }

    /// The SQLite backend, for tests that look at its tables.
    #[cfg(test)]
    pub(crate) fn sqlite(&self) -> Option<&SqliteStore> {
        match &self.backend {
            Backends::Sqlite(s) => Some(s),
            Backends::Postgres(_) => None,
        }
    }

    /// The PostgreSQL backend, for tests that look at its tables.
    #[cfg(test)]
    pub(crate) fn postgres(&self) -> Option<&PgStore> {
        match &self.backend {
            Backends::Postgres(p) => Some(p),
            Backends::Sqlite(_) => None,
        }
    }

    pub(crate) fn sink(&self) -> Sink {
        each!(self, b => b.sink())
    }

    /// Writes a batch in one transaction, on a connection of its own.
    pub async fn write(&self, batch: &[Record]) -> Result<(), StoreError> {
        each!(self, b => b.write(batch).await)
    }

    /// Requests, newest first, one page at a time.
    pub async fn requests(&self, filter: &RequestFilter) -> Result<Page, StoreError> {
        each!(self, b => b.requests(filter).await)
    }

    /// One request with its attempts, in order.
    pub async fn request(&self, id: &str) -> Result<Option<RequestDetail>, StoreError> {
        each!(self, b => b.request(id).await)
    }

    /// Tokens and cost per provider and model per day, hour or minute since
    /// `since`, taken to the minute, from the rollups.
    pub async fn spend(&self, bucket: Bucket, since: i64) -> Result<Vec<SpendRow>, StoreError> {
        each!(self, b => b.spend(bucket, since).await)
    }

    /// Cost per provider and provider model since `since` (to the minute),
    /// from the rollups. Requests no provider answered, or without a known
    /// price, cost nothing.
    pub async fn cost_since(&self, since: i64) -> Result<Vec<(String, String, f64)>, StoreError> {
        each!(self, b => b.cost_since(since).await)
    }

    /// The clients seen, most recently seen first, at most `limit`.
    pub async fn clients(&self, limit: i64) -> Result<Vec<Client>, StoreError> {
        each!(self, b => b.clients(limit).await)
    }

    /// Requests on record, from the rollups.
    pub async fn requests_on_record(&self) -> Result<i64, StoreError> {
        each!(self, b => b.requests_on_record().await)
    }

    /// Computes the rollups, facets and clients again from the rows.
    pub async fn rebuild(&self) -> Result<(), StoreError> {
        each!(self, b => b.rebuild().await)
    }

    /// Counts rows, for tests and the benchmark's check.
    pub async fn count(&self, table: CountTable) -> Result<i64, StoreError> {
        each!(self, b => b.count(table).await)
    }

    /// Applies retention once: by age, then by size. Returns the requests removed.
    pub async fn prune(&self, config: &HistoryConfig) -> Result<u64, StoreError> {
        each!(self, b => b.prune(config).await)
    }

    /// Deletes every request (with its attempts) and event on record.
    pub async fn purge(&self) -> Result<u64, StoreError> {
        each!(self, b => b.purge().await)
    }

    /// Bytes the record takes.
    pub async fn used_bytes(&self) -> Result<i64, StoreError> {
        each!(self, b => b.used_bytes().await)
    }

    pub async fn integrity_check(&self) -> Result<String, StoreError> {
        each!(self, b => b.integrity_check().await)
    }

    /// Every member, by name; only their keys' hashes.
    pub async fn members(&self) -> Result<Vec<crate::members::Member>, StoreError> {
        each!(self, b => b.members().await)
    }

    /// Adds a member, or replaces the one of that name.
    pub async fn put_member(&self, member: &crate::members::Member) -> Result<(), StoreError> {
        each!(self, b => b.put_member(member).await)
    }

    /// Whether there was a member of that name to remove.
    pub async fn remove_member(&self, name: &str) -> Result<bool, StoreError> {
        each!(self, b => b.remove_member(name).await)
    }

    /// Each member's requests and spend since `since` (Unix ms).
    pub async fn member_spend(&self, since: i64) -> Result<Vec<crate::members::MemberSpend>, StoreError> {
        each!(self, b => b.member_spend(since).await)
    }

    /// Sessions with a request in the filter's window (the last week by
    /// default), newest last request first, one page at a time.
    pub async fn sessions(&self, filter: &SessionFilter) -> Result<SessionPage, StoreError> {
        each!(self, b => b.sessions(filter, crate::ground::clock::now_ms()).await)
    }

    /// One session's figures within `window`, with its latest `timeline`
    /// requests; `prices` values what its provider cache saved.
    pub async fn session(
        &self,
        id: &str,
        window: Window,
        timeline: u32,
        prices: Option<&Prices>,
    ) -> Result<Option<SessionDetail>, StoreError> {
        each!(self, b => b.session(id, window, timeline, prices).await)
    }

    /// Requests, tokens and cost per user agent since `since` (Unix ms).
    pub async fn agent_spend(&self, since: i64) -> Result<Vec<AgentSpend>, StoreError> {
        each!(self, b => b.agent_spend(since).await)
    }

    /// A request's captured bodies, compressed, if it has them.
    pub async fn capture(&self, id: &str) -> Result<Option<StoredCapture>, StoreError> {
        each!(self, b => b.capture(id).await)
    }

    /// The requests that replayed `id`, oldest first.
    pub async fn replays(&self, id: &str) -> Result<Vec<String>, StoreError> {
        each!(self, b => b.replays(id).await)
    }

    pub async fn close(&self) {
        each!(self, b => b.close().await)
    }
}

/// The rollups that sum to a spend chart since `since` (to the minute), as
/// (span, from, to): the bucket's own span from its first whole bucket on,
/// and before that the finer spans up to their next boundaries, so that a
/// first bucket that began before `since` counts only what came after.
pub(super) fn spend_pieces(bucket: Bucket, since: i64) -> Vec<(i64, i64, i64)> {
    let ceil = |at: i64, span: i64| at + (span - at.rem_euclid(span)) % span;
    let mut from = since - since.rem_euclid(MINUTE_MS);
    let mut pieces = Vec::with_capacity(SPANS.len());
    for (span, coarser) in SPANS.iter().zip(SPANS.iter().skip(1)) {
        if *span == bucket.span() {
            break;
        }
        let to = ceil(from, *coarser);
        pieces.push((*span, from, to));
        from = to;
    }
    pieces.push((bucket.span(), from, i64::MAX));
    pieces
}

pub(super) fn parse_cursor(cursor: &str) -> Result<(i64, String), StoreError> {
    let bad = || StoreError::Cursor(cursor.to_string());
    let (at, id) = cursor.split_once(':').ok_or_else(bad)?;
    Ok((at.parse().map_err(|_| bad())?, id.to_string()))
}

pub(super) fn from_name<T: serde::de::DeserializeOwned>(column: &str, text: String) -> Result<T, StoreError> {
    serde_json::from_value(serde_json::Value::String(text.clone()))
        .map_err(|_| StoreError::Corrupt(format!("{column} {text:?} is not one this version knows")))
}

pub(super) fn page_size(filter: &RequestFilter) -> u32 {
    filter.limit.unwrap_or(DEFAULT_PAGE).clamp(1, MAX_PAGE)
}

/// The facet entries a filtered list walks, newest first: those of its most
/// selective filter. None for a correlation id, which has its own indexes,
/// and for no filter or only `outcome=ok`, which most requests match: the
/// time index serves those.
pub(super) fn driving_facet(filter: &RequestFilter) -> Option<(Facet, &str)> {
    if filter.correlation_id.is_some() {
        return None;
    }
    match filter.outcome {
        Some(o) if o != RequestOutcome::Ok => return Some((Facet::Outcome, o.as_str())),
        _ => {}
    }
    if filter.fallback {
        return Some((Facet::Fallback, ""));
    }
    if filter.failed {
        return Some((Facet::Failed, ""));
    }
    if let Some(c) = filter.cache {
        return Some((Facet::Cache, c.as_str()));
    }
    if let Some(p) = &filter.provider {
        return Some((Facet::Provider, p));
    }
    filter.model.as_deref().map(|m| (Facet::Model, m))
}
