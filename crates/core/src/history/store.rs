//! The SQLite database: WAL mode, migrations embedded, runtime-checked
//! queries. Filters are always bound parameters, never spliced into SQL.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use serde::Serialize;
use sqlx::sqlite::{
    SqliteAutoVacuum, SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteRow, SqliteSynchronous,
};
use sqlx::{QueryBuilder, Row, Sqlite, SqlitePool};

use super::derived::{Facet, DAY_MS, HOUR_MS, MINUTE_MS, SPANS};
use super::insert::Inserter;
use super::record::{AttemptDropped, AttemptRecord, AttemptTranslation, Record, RequestOutcome};
use super::retire;
use crate::cache::CacheStatus;
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
    #[error(transparent)]
    Cache(#[from] crate::cache::store::CacheError),
}

/// A handle on the history database; cheap to clone.
#[derive(Debug, Clone)]
pub struct Store {
    pool: SqlitePool,
    path: PathBuf,
}

/// Filters for listing requests. All optional; text is matched exactly.
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct RequestFilter {
    pub provider: Option<String>,
    pub model: Option<String>,
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
    /// A request id, a prefix of one, or a correlation id.
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
}

/// A request with its attempts in order.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct RequestDetail {
    #[serde(flatten)]
    pub request: RequestSummary,
    pub request_body: Option<String>,
    pub response_body: Option<String>,
    #[serde(rename = "attempts")]
    pub attempt_list: Vec<AttemptRecord>,
    /// The attempts sent in another format than the client's.
    pub translations: Vec<AttemptTranslation>,
    /// What each translated attempt left out or could not map.
    pub dropped: Vec<AttemptDropped>,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Page {
    pub requests: Vec<RequestSummary>,
    pub next_cursor: Option<String>,
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

const DEFAULT_PAGE: u32 = 100;
const MAX_PAGE: u32 = 1000;

impl Store {
    /// Opens (creating if needed) and migrates the database at `path`.
    pub async fn open(path: &Path) -> Result<Store, StoreError> {
        let url = format!("sqlite://{}", path.display());
        let open_err = |source| StoreError::Open { path: path.display().to_string(), source };
        // Created owner-only before SQLite sees it: its -wal and -shm files
        // take the database file's permissions.
        crate::private::database(path)
            .map_err(|(file, source)| StoreError::Private { path: file.display().to_string(), source })?;
        let options = SqliteConnectOptions::from_str(&url)
            .map_err(open_err)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .auto_vacuum(SqliteAutoVacuum::Incremental)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(5));
        let pool = SqlitePoolOptions::new().max_connections(4).connect_with(options).await.map_err(open_err)?;
        sqlx::migrate!("./migrations").run(&pool).await?;
        Ok(Store { pool, path: path.to_path_buf() })
    }

    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes a batch in one transaction, on a connection of its own.
    pub async fn write(&self, batch: &[Record]) -> Result<(), StoreError> {
        let batch = batch.to_vec();
        self.blocking(move |path| Inserter::open(path)?.write(&batch)).await
    }

    /// Requests, newest first, one page at a time.
    pub async fn requests(&self, filter: &RequestFilter) -> Result<Page, StoreError> {
        let limit = page_size(filter);
        let mut q = list_query(&format!("SELECT {SUMMARY_COLUMNS}"), filter)?;
        let rows = q.build().fetch_all(&self.pool).await?;
        let mut requests: Vec<RequestSummary> = rows.iter().map(summary).collect::<Result<_, _>>()?;
        let next_cursor = if requests.len() > limit as usize {
            requests.truncate(limit as usize);
            requests.last().map(|r| format!("{}:{}", r.started_at, r.id))
        } else {
            None
        };
        Ok(Page { requests, next_cursor })
    }

    /// One request with its attempts, in order.
    pub async fn request(&self, id: &str) -> Result<Option<RequestDetail>, StoreError> {
        // Only constant column lists are formatted in; the id is bound.
        let sql = format!("SELECT {SUMMARY_COLUMNS}, r.request_body, r.response_body FROM requests r WHERE r.id = ?");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(id).fetch_optional(&self.pool).await?;
        let Some(row) = row else { return Ok(None) };
        let attempts = sqlx::query(
            "SELECT seq, provider, key_label, model, reason, fallback_from, started_at, offset_ms, timeout_ms, backoff_ms,
                    duration_ms, ttfb_ms, ttft_ms, status, outcome, retry_after_ms, breaker_state, error,
                    input_tokens, output_tokens, cached_tokens, translated, dropped
             FROM attempts WHERE request_id = ? ORDER BY seq",
        )
        .bind(id)
        .fetch_all(&self.pool)
        .await?;
        Ok(Some(RequestDetail {
            request: summary(&row)?,
            request_body: row.try_get("request_body")?,
            response_body: row.try_get("response_body")?,
            attempt_list: attempts.iter().map(attempt).collect::<Result<_, _>>()?,
            translations: attempts.iter().filter_map(translation).collect(),
            dropped: attempts.iter().filter_map(dropped).collect(),
        }))
    }

    /// Tokens and cost per provider and model per day, hour or minute since
    /// `since`, taken to the minute: read from the rollups, a row per key and
    /// bucket, however many requests the buckets hold.
    pub async fn spend(&self, bucket: Bucket, since: i64) -> Result<Vec<SpendRow>, StoreError> {
        self.blocking(move |path| super::spend::read(path, bucket, since)).await
    }

    /// Cost per provider and provider model since `since` (to the minute),
    /// from the rollups: the minutes up to the next whole hour, then hours,
    /// so that a period starting at any local midnight is counted exactly.
    /// Requests no provider answered, or without a known price, cost nothing.
    pub async fn cost_since(&self, since: i64) -> Result<Vec<(String, String, f64)>, StoreError> {
        let mut q = QueryBuilder::<Sqlite>::new("SELECT provider, model, TOTAL(cost_usd) AS cost FROM (");
        push_pieces(&mut q, "provider, model, cost_usd", Bucket::Hour, since);
        q.push(") WHERE provider <> '' GROUP BY 1, 2");
        let rows = q.build().fetch_all(&self.pool).await?;
        rows.iter().map(|r| Ok((r.try_get("provider")?, r.try_get("model")?, r.try_get("cost")?))).collect()
    }

    /// Requests on record, from the rollups.
    pub async fn requests_on_record(&self) -> Result<i64, StoreError> {
        Ok(sqlx::query_scalar("SELECT COALESCE(SUM(requests), 0) FROM rollups WHERE span = ?")
            .bind(DAY_MS)
            .fetch_one(&self.pool)
            .await?)
    }

    /// Computes the rollups and facets again from the rows.
    pub async fn rebuild(&self) -> Result<(), StoreError> {
        self.blocking(|path| super::derived::rebuild(&mut super::insert::connect(path)?)).await
    }

    /// Counts rows, for tests and the benchmark's check.
    pub async fn count(&self, table: CountTable) -> Result<i64, StoreError> {
        let sql = match table {
            CountTable::Requests => "SELECT COUNT(*) FROM requests",
            CountTable::Attempts => "SELECT COUNT(*) FROM attempts",
            CountTable::Events => "SELECT COUNT(*) FROM events",
        };
        Ok(sqlx::query_scalar(sql).fetch_one(&self.pool).await?)
    }

    /// Deletes requests started before `before_ms` (their attempts go with
    /// them), and events as old, in small batches.
    pub async fn prune_older_than(&self, before_ms: i64) -> Result<u64, StoreError> {
        self.blocking(move |path| {
            let n = retire::requests(path, Some(before_ms), u64::MAX)?;
            retire::events(path, before_ms)?;
            Ok(n)
        })
        .await
    }

    /// Runs `f` with the database's path on a blocking thread.
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Path) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, StoreError> {
        let path = self.path.clone();
        match tokio::task::spawn_blocking(move || f(&path)).await {
            Ok(result) => Ok(result?),
            Err(e) => Err(StoreError::WriteTask(e.to_string())),
        }
    }

    /// Bytes in use by live pages.
    pub async fn used_bytes(&self) -> Result<i64, StoreError> {
        let pages: i64 =
            sqlx::query_scalar("SELECT page_count - freelist_count FROM pragma_page_count(), pragma_freelist_count()")
                .fetch_one(&self.pool)
                .await?;
        let size: i64 = sqlx::query_scalar("SELECT page_size FROM pragma_page_size()").fetch_one(&self.pool).await?;
        Ok(pages * size)
    }

    /// Deletes the oldest `n` requests, in small batches, and the events
    /// older than every request left.
    pub async fn prune_oldest(&self, n: i64) -> Result<u64, StoreError> {
        let removed = self.blocking(move |path| retire::requests(path, None, n.max(0) as u64)).await?;
        let oldest: Option<i64> =
            sqlx::query_scalar("SELECT MIN(started_at) FROM requests").fetch_one(&self.pool).await?;
        let before = oldest.unwrap_or(i64::MAX);
        self.blocking(move |path| retire::events(path, before)).await?;
        Ok(removed)
    }

    /// Returns freed pages to the file system.
    pub async fn vacuum(&self) -> Result<(), StoreError> {
        self.blocking(retire::vacuum).await
    }

    pub async fn integrity_check(&self) -> Result<String, StoreError> {
        Ok(sqlx::query_scalar("PRAGMA integrity_check").fetch_one(&self.pool).await?)
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }
}

#[derive(Debug, Clone, Copy)]
pub enum CountTable {
    Requests,
    Attempts,
    Events,
}

const SUMMARY_COLUMNS: &str = "r.id, r.correlation_id, r.started_at, r.finished_at, r.user_agent, r.endpoint,
    r.model, r.streamed, r.outcome, r.status, r.provider, r.provider_model, r.attempts, r.fallback, r.duration_ms,
    r.ttft_ms, r.input_tokens, r.output_tokens, r.cached_tokens, r.cost_usd, r.error_code, r.error, r.cache,
    r.saved_usd";

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

/// `SELECT columns FROM rollups` over [`spend_pieces`], joined by `UNION ALL`.
fn push_pieces(q: &mut QueryBuilder<Sqlite>, columns: &str, bucket: Bucket, since: i64) {
    for (i, (span, from, to)) in spend_pieces(bucket, since).into_iter().enumerate() {
        if i > 0 {
            q.push(" UNION ALL ");
        }
        q.push(format!("SELECT {columns} FROM rollups WHERE span = ")).push_bind(span);
        q.push(" AND start >= ").push_bind(from).push(" AND start < ").push_bind(to);
    }
}

fn parse_cursor(cursor: &str) -> Result<(i64, String), StoreError> {
    let bad = || StoreError::Cursor(cursor.to_string());
    let (at, id) = cursor.split_once(':').ok_or_else(bad)?;
    Ok((at.parse().map_err(|_| bad())?, id.to_string()))
}

fn usage_row(r: &SqliteRow) -> Result<Usage, sqlx::Error> {
    Ok(Usage::from_columns([r.try_get("input_tokens")?, r.try_get("output_tokens")?, r.try_get("cached_tokens")?]))
}

/// A column that holds one of the values of a serde enum (`outcome`, `reason`).
fn named<T: serde::de::DeserializeOwned>(r: &SqliteRow, column: &str) -> Result<T, StoreError> {
    let text: String = r.try_get(column)?;
    from_name(column, text)
}

/// A nullable column of a serde enum's values (`cache`).
fn maybe_named<T: serde::de::DeserializeOwned>(r: &SqliteRow, column: &str) -> Result<Option<T>, StoreError> {
    r.try_get::<Option<String>, _>(column)?.map(|text| from_name(column, text)).transpose()
}

fn from_name<T: serde::de::DeserializeOwned>(column: &str, text: String) -> Result<T, StoreError> {
    serde_json::from_value(serde_json::Value::String(text.clone()))
        .map_err(|_| StoreError::Corrupt(format!("{column} {text:?} is not one this version knows")))
}

fn page_size(filter: &RequestFilter) -> u32 {
    filter.limit.unwrap_or(DEFAULT_PAGE).clamp(1, MAX_PAGE)
}

/// The facet entries a filtered list walks, newest first: those of its most
/// selective filter. None for a correlation id, which has its own indexes,
/// and for no filter or only `outcome=ok`, which most requests match: the
/// time index serves those.
fn driving_facet(filter: &RequestFilter) -> Option<(Facet, &str)> {
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

/// `select` (columns of `requests r`) with the filter's conditions, newest
/// first, one row more than a page (to tell whether another follows). A
/// filter that selects few rows walks its facet entries (`f`), and every
/// other filter is checked on the rows it reaches; otherwise the rows are
/// walked by the time index.
fn list_query(select: &str, filter: &RequestFilter) -> Result<QueryBuilder<Sqlite>, StoreError> {
    let driving = driving_facet(filter);
    let mut q = QueryBuilder::<Sqlite>::new(select);
    // Time and order are the facet entry's when it drives: its key.
    let t = match driving {
        Some((facet, value)) => {
            q.push(" FROM request_facets f CROSS JOIN requests r ON r.id = f.id WHERE f.facet = ")
                .push_bind(facet.code())
                .push(" AND f.value = ")
                .push_bind(value.to_string());
            "f"
        }
        None => {
            q.push(" FROM requests r WHERE 1 = 1");
            "r"
        }
    };
    let others = |facet: Facet| driving.map(|(f, _)| f) != Some(facet);
    // Facets that do not drive are looked up per row, by their key.
    let has_facet = |q: &mut QueryBuilder<Sqlite>, facet: Facet, value: &str| {
        q.push(" AND EXISTS (SELECT 1 FROM request_facets g WHERE g.facet = ")
            .push_bind(facet.code())
            .push(" AND g.value = ")
            .push_bind(value.to_string())
            .push(" AND g.started_at = r.started_at AND g.id = r.id)");
    };
    if let Some(p) = filter.provider.as_deref().filter(|_| others(Facet::Provider)) {
        has_facet(&mut q, Facet::Provider, p);
    }
    if let Some(m) = filter.model.as_deref().filter(|_| others(Facet::Model)) {
        has_facet(&mut q, Facet::Model, m);
    }
    if let Some(o) = filter.outcome {
        q.push(" AND r.outcome = ").push_bind(o.as_str());
    }
    if filter.failed {
        q.push(" AND r.outcome <> 'ok'");
    }
    if filter.fallback {
        q.push(" AND r.fallback = 1");
    }
    if let Some(c) = filter.cache.filter(|_| others(Facet::Cache)) {
        q.push(" AND r.cache = ").push_bind(c.as_str());
    }
    if let Some(text) = filter.search.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
        q.push(" AND (r.correlation_id = ").push_bind(text.to_string());
        q.push(" OR substr(r.id, 1, ").push_bind(text.chars().count() as i64);
        q.push(") = ").push_bind(text.to_string()).push(")");
    }
    if let Some(c) = &filter.correlation_id {
        // The same as `correlation_id = c`, spelled so that each half has
        // its index: the partial one on correlation ids that differ from
        // the request's own, and the primary key for the one that does not.
        q.push(" AND (r.correlation_id = ").push_bind(c.clone()).push(" AND r.correlation_id <> r.id");
        q.push(" OR r.id = ").push_bind(c.clone()).push(" AND r.correlation_id = ").push_bind(c.clone()).push(")");
    }
    if let Some(s) = filter.since {
        q.push(format!(" AND {t}.started_at >= ")).push_bind(s);
    }
    if let Some(u) = filter.until {
        q.push(format!(" AND {t}.started_at < ")).push_bind(u);
    }
    if let Some(cursor) = &filter.cursor {
        let (at, id) = parse_cursor(cursor)?;
        q.push(format!(" AND ({t}.started_at, {t}.id) < (")).push_bind(at).push(", ").push_bind(id).push(")");
    }
    q.push(format!(" ORDER BY {t}.started_at DESC, {t}.id DESC LIMIT ")).push_bind(i64::from(page_size(filter)) + 1);
    Ok(q)
}

fn summary(r: &SqliteRow) -> Result<RequestSummary, StoreError> {
    Ok(RequestSummary {
        id: r.try_get("id")?,
        correlation_id: r.try_get("correlation_id")?,
        started_at: r.try_get("started_at")?,
        finished_at: r.try_get("finished_at")?,
        user_agent: r.try_get("user_agent")?,
        endpoint: r.try_get("endpoint")?,
        model: r.try_get("model")?,
        streamed: r.try_get("streamed")?,
        outcome: named(r, "outcome")?,
        status: r.try_get("status")?,
        provider: r.try_get("provider")?,
        provider_model: r.try_get("provider_model")?,
        attempts: r.try_get("attempts")?,
        fallback: r.try_get("fallback")?,
        duration_ms: r.try_get("duration_ms")?,
        ttft_ms: r.try_get("ttft_ms")?,
        usage: usage_row(r)?,
        cost_usd: r.try_get("cost_usd")?,
        error_code: r.try_get("error_code")?,
        error: r.try_get("error")?,
        cache: maybe_named(r, "cache")?,
        saved_usd: r.try_get("saved_usd")?,
    })
}

fn translation(r: &SqliteRow) -> Option<AttemptTranslation> {
    let text: String = r.try_get::<Option<String>, _>("translated").ok()??;
    let seq = u32::try_from(r.try_get::<i64, _>("seq").ok()?).ok()?;
    AttemptTranslation::from_column(seq, &text)
}

fn dropped(r: &SqliteRow) -> Option<AttemptDropped> {
    let text: String = r.try_get::<Option<String>, _>("dropped").ok()??;
    let seq = u32::try_from(r.try_get::<i64, _>("seq").ok()?).ok()?;
    Some(AttemptDropped { seq, fields: serde_json::from_str(&text).ok()? })
}

fn attempt(r: &SqliteRow) -> Result<AttemptRecord, StoreError> {
    let small = |column: &str| -> Result<Option<u16>, StoreError> {
        Ok(r.try_get::<Option<i64>, _>(column)?.and_then(|n| u16::try_from(n).ok()))
    };
    Ok(AttemptRecord {
        seq: u32::try_from(r.try_get::<i64, _>("seq")?).unwrap_or(u32::MAX),
        provider: r.try_get("provider")?,
        key_label: r.try_get("key_label")?,
        model: r.try_get("model")?,
        reason: named(r, "reason")?,
        fallback_from: r.try_get("fallback_from")?,
        started_at_ms: r.try_get("started_at")?,
        offset_ms: r.try_get("offset_ms")?,
        timeout_ms: r.try_get("timeout_ms")?,
        backoff_ms: r.try_get("backoff_ms")?,
        duration_ms: r.try_get("duration_ms")?,
        ttfb_ms: r.try_get("ttfb_ms")?,
        ttft_ms: r.try_get("ttft_ms")?,
        status: small("status")?,
        outcome: named(r, "outcome")?,
        retry_after_ms: r.try_get("retry_after_ms")?,
        breaker_state: r.try_get("breaker_state")?,
        error: r.try_get("error")?,
        usage: usage_row(r)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn plan(store: &Store, filter: &RequestFilter) -> Vec<String> {
        let mut q = list_query("EXPLAIN QUERY PLAN SELECT r.id", filter).unwrap();
        let rows = q.build().fetch_all(&store.pool).await.unwrap();
        rows.iter().map(|r| r.get::<String, _>("detail")).collect()
    }

    #[tokio::test]
    async fn a_correlation_lookup_reads_its_two_indexes_not_the_table() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("h.db")).await.unwrap();
        let filter = RequestFilter { correlation_id: Some("trace-1".into()), ..RequestFilter::default() };
        let plan = plan(&store, &filter).await;
        assert!(plan.iter().any(|d| d.contains("USING INDEX requests_by_correlation")), "{plan:?}");
        assert!(plan.iter().any(|d| d.contains("USING PRIMARY KEY (id=?)")), "{plan:?}");
        assert!(!plan.iter().any(|d| d.starts_with("SCAN")), "{plan:?}");
    }

    /// Each filter that selects few rows walks its facet entries in order:
    /// no scan of the requests, no sort, each row reached by its key.
    #[tokio::test]
    async fn selective_filters_walk_their_facet_entries_newest_first() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("h.db")).await.unwrap();
        let filters = [
            RequestFilter { failed: true, ..RequestFilter::default() },
            RequestFilter { fallback: true, ..RequestFilter::default() },
            RequestFilter { outcome: Some(RequestOutcome::Error), ..RequestFilter::default() },
            RequestFilter { provider: Some("p".into()), ..RequestFilter::default() },
            RequestFilter { model: Some("m".into()), ..RequestFilter::default() },
            RequestFilter { cache: Some(CacheStatus::Hit), ..RequestFilter::default() },
            RequestFilter {
                failed: true,
                provider: Some("p".into()),
                cursor: Some("5:x".into()),
                ..RequestFilter::default()
            },
        ];
        for filter in &filters {
            let plan = plan(&store, filter).await;
            println!("{filter:?}\n  {}", plan.join("\n  "));
            assert!(plan[0].starts_with("SEARCH f USING PRIMARY KEY (facet=? AND value=?"), "{plan:?}");
            assert!(plan.iter().any(|d| d.starts_with("SEARCH r USING PRIMARY KEY (id=?)")), "{plan:?}");
            assert!(!plan.iter().any(|d| d.contains("TEMP B-TREE") || d.starts_with("SCAN")), "{plan:?}");
        }
    }

    #[tokio::test]
    async fn spend_reads_rollup_ranges_only() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("h.db")).await.unwrap();
        let plan: Vec<String> =
            sqlx::query("EXPLAIN QUERY PLAN SELECT * FROM rollups WHERE span = 60000 AND start >= 5 AND start < 7")
                .fetch_all(&store.pool)
                .await
                .unwrap()
                .iter()
                .map(|r| r.get::<String, _>("detail"))
                .collect();
        assert_eq!(plan, ["SEARCH rollups USING PRIMARY KEY (span=? AND start>? AND start<?)"]);
        // A day chart from mid-afternoon: minutes to the hour, hours to
        // midnight, then days.
        let since = 1_700_000_000_000 + 90_000 + 1234;
        let pieces = spend_pieces(Bucket::Day, since);
        let m0 = since - since % MINUTE_MS;
        let h1 = m0 + (HOUR_MS - m0 % HOUR_MS);
        let d1 = m0 + (DAY_MS - m0 % DAY_MS);
        assert_eq!(pieces, [(MINUTE_MS, m0, h1), (HOUR_MS, h1, d1), (DAY_MS, d1, i64::MAX)]);
        assert_eq!(spend_pieces(Bucket::Minute, since), [(MINUTE_MS, m0, i64::MAX)]);
        assert_eq!(spend_pieces(Bucket::Hour, h1), [(MINUTE_MS, h1, h1), (HOUR_MS, h1, i64::MAX)]);
    }

    #[tokio::test]
    async fn newest_first_walks_the_time_index() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("h.db")).await.unwrap();
        let plan = plan(&store, &RequestFilter::default()).await;
        assert!(plan.iter().any(|d| d.contains("INDEX requests_by_time")), "{plan:?}");
        assert!(!plan.iter().any(|d| d.contains("TEMP B-TREE")), "{plan:?}");
    }
}
