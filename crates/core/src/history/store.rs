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

use super::insert::Inserter;
use super::record::Record;

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
    pub outcome: Option<String>,
    /// Only requests that did not end `ok`.
    #[serde(default)]
    pub failed: bool,
    /// Only requests that involved a fallback.
    #[serde(default)]
    pub fallback: bool,
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
pub struct RequestSummary {
    pub id: String,
    pub correlation_id: String,
    pub started_at: i64,
    pub finished_at: i64,
    pub user_agent: Option<String>,
    pub endpoint: String,
    pub model: Option<String>,
    pub streamed: bool,
    pub outcome: String,
    pub status: Option<i64>,
    pub provider: Option<String>,
    pub provider_model: Option<String>,
    /// Attempts made (the detail view lists them as `attempts`).
    #[serde(rename = "attempt_count")]
    pub attempts: i64,
    pub fallback: bool,
    pub duration_ms: f64,
    pub ttft_ms: Option<f64>,
    pub usage: UsageRow,
    pub cost_usd: Option<f64>,
    pub error_code: Option<String>,
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct UsageRow {
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub cached_tokens: Option<i64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct AttemptRow {
    pub seq: i64,
    pub provider: String,
    pub key_label: Option<String>,
    pub model: String,
    pub reason: String,
    pub fallback_from: Option<String>,
    pub started_at: i64,
    pub offset_ms: f64,
    pub timeout_ms: Option<f64>,
    pub backoff_ms: f64,
    pub duration_ms: Option<f64>,
    pub ttfb_ms: Option<f64>,
    pub ttft_ms: Option<f64>,
    pub status: Option<i64>,
    pub outcome: String,
    pub retry_after_ms: Option<f64>,
    pub breaker_state: Option<String>,
    pub error: Option<String>,
    pub usage: UsageRow,
}

/// A request with its attempts in order.
#[derive(Debug, Clone, Serialize)]
pub struct RequestDetail {
    #[serde(flatten)]
    pub request: RequestSummary,
    pub request_body: Option<String>,
    pub response_body: Option<String>,
    #[serde(rename = "attempts")]
    pub attempt_list: Vec<AttemptRow>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Page {
    pub requests: Vec<RequestSummary>,
    pub next_cursor: Option<String>,
}

/// Tokens and cost for one provider/model in one time bucket.
#[derive(Debug, Clone, Serialize)]
pub struct SpendRow {
    pub bucket: String,
    pub provider: String,
    pub model: String,
    pub requests: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cached_tokens: i64,
    /// Null when no request in the bucket had a known price.
    pub cost_usd: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Bucket {
    #[default]
    Day,
    Hour,
    /// For sparklines over the last hour.
    Minute,
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
        for file in [path.to_path_buf(), with_suffix(path, "-wal"), with_suffix(path, "-shm")] {
            if file == path || file.exists() {
                crate::private::file(&file)
                    .map_err(|source| StoreError::Private { path: file.display().to_string(), source })?;
            }
        }
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
        let (path, batch) = (self.path.clone(), batch.to_vec());
        let written = tokio::task::spawn_blocking(move || Inserter::open(&path)?.write(&batch)).await;
        match written {
            Ok(result) => Ok(result?),
            Err(e) => Err(StoreError::WriteTask(e.to_string())),
        }
    }

    /// Requests, newest first, one page at a time.
    pub async fn requests(&self, filter: &RequestFilter) -> Result<Page, StoreError> {
        let limit = page_size(filter);
        let mut q = list_query(&format!("SELECT {SUMMARY_COLUMNS} FROM requests"), filter)?;
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
        let sql = format!("SELECT {SUMMARY_COLUMNS}, request_body, response_body FROM requests WHERE id = ?");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(id).fetch_optional(&self.pool).await?;
        let Some(row) = row else { return Ok(None) };
        let attempts = sqlx::query(
            "SELECT seq, provider, key_label, model, reason, fallback_from, started_at, offset_ms, timeout_ms, backoff_ms,
                    duration_ms, ttfb_ms, ttft_ms, status, outcome, retry_after_ms, breaker_state, error,
                    input_tokens, output_tokens, cached_tokens
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
        }))
    }

    /// Tokens and cost per provider and model per day or hour since `since`.
    pub async fn spend(&self, bucket: Bucket, since: i64) -> Result<Vec<SpendRow>, StoreError> {
        let format = match bucket {
            Bucket::Day => "%Y-%m-%d",
            Bucket::Hour => "%Y-%m-%dT%H:00Z",
            Bucket::Minute => "%Y-%m-%dT%H:%MZ",
        };
        let rows = sqlx::query(
            "SELECT strftime(?, started_at / 1000, 'unixepoch') AS bucket, provider, COALESCE(provider_model, model) AS model,
                    COUNT(*) AS requests, COALESCE(SUM(input_tokens), 0) AS input_tokens,
                    COALESCE(SUM(output_tokens), 0) AS output_tokens, COALESCE(SUM(cached_tokens), 0) AS cached_tokens,
                    SUM(cost_usd) AS cost_usd
             FROM requests WHERE started_at >= ? AND provider IS NOT NULL
             GROUP BY 1, 2, 3 ORDER BY 1 DESC, 8 DESC",
        )
        .bind(format)
        .bind(since)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(SpendRow {
                    bucket: r.try_get("bucket")?,
                    provider: r.try_get("provider")?,
                    model: r.try_get("model")?,
                    requests: r.try_get("requests")?,
                    input_tokens: r.try_get("input_tokens")?,
                    output_tokens: r.try_get("output_tokens")?,
                    cached_tokens: r.try_get("cached_tokens")?,
                    cost_usd: r.try_get("cost_usd")?,
                })
            })
            .collect()
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

    /// Deletes requests started before `before_ms` (their attempts go with them).
    pub async fn prune_older_than(&self, before_ms: i64) -> Result<u64, StoreError> {
        let n = sqlx::query("DELETE FROM requests WHERE started_at < ?")
            .bind(before_ms)
            .execute(&self.pool)
            .await?
            .rows_affected();
        sqlx::query("DELETE FROM events WHERE at < ?").bind(before_ms).execute(&self.pool).await?;
        Ok(n)
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

    /// Deletes the oldest `n` requests and events of the same age.
    pub async fn prune_oldest(&self, n: i64) -> Result<u64, StoreError> {
        let cutoff: Option<i64> =
            sqlx::query_scalar("SELECT started_at FROM requests ORDER BY started_at LIMIT 1 OFFSET ?")
                .bind(n.max(1) - 1)
                .fetch_optional(&self.pool)
                .await?;
        match cutoff {
            Some(at) => self.prune_older_than(at + 1).await,
            None => Ok(0),
        }
    }

    /// Returns freed pages to the file system.
    pub async fn vacuum(&self) -> Result<(), StoreError> {
        sqlx::query("PRAGMA incremental_vacuum").execute(&self.pool).await?;
        Ok(())
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

const SUMMARY_COLUMNS: &str =
    "id, correlation_id, started_at, finished_at, user_agent, endpoint, model, streamed, outcome, status,
    provider, provider_model, attempts, fallback, duration_ms, ttft_ms, input_tokens, output_tokens, cached_tokens,
    cost_usd, error_code, error";

fn parse_cursor(cursor: &str) -> Result<(i64, String), StoreError> {
    let bad = || StoreError::Cursor(cursor.to_string());
    let (at, id) = cursor.split_once(':').ok_or_else(bad)?;
    Ok((at.parse().map_err(|_| bad())?, id.to_string()))
}

fn usage_row(r: &SqliteRow) -> Result<UsageRow, sqlx::Error> {
    Ok(UsageRow {
        input_tokens: r.try_get("input_tokens")?,
        output_tokens: r.try_get("output_tokens")?,
        cached_tokens: r.try_get("cached_tokens")?,
    })
}

fn page_size(filter: &RequestFilter) -> u32 {
    filter.limit.unwrap_or(DEFAULT_PAGE).clamp(1, MAX_PAGE)
}

/// `select` with the filter's conditions, newest first, one row more than
/// a page (to tell whether another follows).
fn list_query(select: &str, filter: &RequestFilter) -> Result<QueryBuilder<Sqlite>, StoreError> {
    let mut q = QueryBuilder::<Sqlite>::new(format!("{select} WHERE 1 = 1"));
    if let Some(p) = &filter.provider {
        q.push(" AND (provider = ")
            .push_bind(p.clone())
            .push(" OR id IN (SELECT request_id FROM attempts WHERE provider = ")
            .push_bind(p.clone())
            .push("))");
    }
    if let Some(m) = &filter.model {
        q.push(" AND (model = ").push_bind(m.clone()).push(" OR provider_model = ").push_bind(m.clone()).push(")");
    }
    if let Some(o) = &filter.outcome {
        q.push(" AND outcome = ").push_bind(o.clone());
    }
    if filter.failed {
        q.push(" AND outcome <> 'ok'");
    }
    if filter.fallback {
        q.push(" AND fallback = 1");
    }
    if let Some(text) = filter.search.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
        q.push(" AND (correlation_id = ").push_bind(text.to_string());
        q.push(" OR substr(id, 1, ").push_bind(text.chars().count() as i64);
        q.push(") = ").push_bind(text.to_string()).push(")");
    }
    if let Some(c) = &filter.correlation_id {
        // The same as `correlation_id = c`, spelled so that each half has
        // its index: the partial one on correlation ids that differ from
        // the request's own, and the primary key for the one that does not.
        q.push(" AND (correlation_id = ").push_bind(c.clone()).push(" AND correlation_id <> id");
        q.push(" OR id = ").push_bind(c.clone()).push(" AND correlation_id = ").push_bind(c.clone()).push(")");
    }
    if let Some(s) = filter.since {
        q.push(" AND started_at >= ").push_bind(s);
    }
    if let Some(u) = filter.until {
        q.push(" AND started_at < ").push_bind(u);
    }
    if let Some(cursor) = &filter.cursor {
        let (at, id) = parse_cursor(cursor)?;
        q.push(" AND (started_at, id) < (").push_bind(at).push(", ").push_bind(id).push(")");
    }
    q.push(" ORDER BY started_at DESC, id DESC LIMIT ").push_bind(i64::from(page_size(filter)) + 1);
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
        outcome: r.try_get("outcome")?,
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
    })
}

fn attempt(r: &SqliteRow) -> Result<AttemptRow, StoreError> {
    Ok(AttemptRow {
        seq: r.try_get("seq")?,
        provider: r.try_get("provider")?,
        key_label: r.try_get("key_label")?,
        model: r.try_get("model")?,
        reason: r.try_get("reason")?,
        fallback_from: r.try_get("fallback_from")?,
        started_at: r.try_get("started_at")?,
        offset_ms: r.try_get("offset_ms")?,
        timeout_ms: r.try_get("timeout_ms")?,
        backoff_ms: r.try_get("backoff_ms")?,
        duration_ms: r.try_get("duration_ms")?,
        ttfb_ms: r.try_get("ttfb_ms")?,
        ttft_ms: r.try_get("ttft_ms")?,
        status: r.try_get("status")?,
        outcome: r.try_get("outcome")?,
        retry_after_ms: r.try_get("retry_after_ms")?,
        breaker_state: r.try_get("breaker_state")?,
        error: r.try_get("error")?,
        usage: usage_row(r)?,
    })
}

/// `path` with `suffix` added to its file name (SQLite's `-wal`, `-shm`).
fn with_suffix(path: &Path, suffix: &str) -> std::path::PathBuf {
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(suffix);
    path.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn plan(store: &Store, filter: &RequestFilter) -> Vec<String> {
        let mut q = list_query("EXPLAIN QUERY PLAN SELECT id FROM requests", filter).unwrap();
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

    #[tokio::test]
    async fn newest_first_walks_the_time_index() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("h.db")).await.unwrap();
        let plan = plan(&store, &RequestFilter::default()).await;
        assert!(plan.iter().any(|d| d.contains("INDEX requests_by_time")), "{plan:?}");
        assert!(!plan.iter().any(|d| d.contains("TEMP B-TREE")), "{plan:?}");
    }
}
