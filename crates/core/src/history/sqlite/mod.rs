//! The SQLite backend: a file in the data directory, WAL mode, migrations
//! embedded, runtime-checked queries. Filters are always bound parameters,
//! never spliced into SQL. Writes go through rusqlite on connections of
//! their own ([`insert`], [`retire`], [`super::spend`]); reads
//! through the sqlx pool.

pub(crate) mod insert;
pub(crate) mod retire;

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{
    SqliteAutoVacuum, SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteRow, SqliteSynchronous,
};
use sqlx::{QueryBuilder, Row, Sqlite, SqlitePool};

use super::derived::{Facet, DAY_MS};
use super::record::{AttemptDropped, AttemptRecord, AttemptRouting, AttemptTranslation, Record};
use super::store::{
    driving_facet, from_name, page_size, parse_cursor, spend_pieces, Backend, Bucket, Client, CountTable, Page,
    RequestDetail, RequestFilter, RequestSummary, Sink, SpendRow, StoreError,
};
use crate::config::HistoryConfig;
use crate::protocol::usage::Usage;
use insert::{Inserter, SqliteSink};

/// The SQLite history; cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct SqliteStore {
    pool: SqlitePool,
    path: PathBuf,
}

impl SqliteStore {
    /// Opens (creating if needed) and migrates the database at `path`.
    pub async fn open(path: &Path) -> Result<SqliteStore, StoreError> {
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
        Ok(SqliteStore { pool, path: path.to_path_buf() })
    }

    #[cfg(test)]
    pub(crate) fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Deletes requests started before `before_ms` (their attempts go with
    /// them), and events as old, in small batches.
    pub(crate) async fn prune_older_than(&self, before_ms: i64) -> Result<u64, StoreError> {
        self.blocking(move |path| {
            let n = retire::requests(path, Some(before_ms), u64::MAX)?;
            retire::events(path, before_ms)?;
            Ok(n)
        })
        .await
    }

    /// Deletes the oldest `n` requests, in small batches, and the events
    /// older than every request left.
    pub(crate) async fn prune_oldest(&self, n: i64) -> Result<u64, StoreError> {
        let removed = self.blocking(move |path| retire::requests(path, None, n.max(0) as u64)).await?;
        let oldest: Option<i64> =
            sqlx::query_scalar("SELECT MIN(started_at) FROM requests").fetch_one(&self.pool).await?;
        let before = oldest.unwrap_or(i64::MAX);
        self.blocking(move |path| retire::events(path, before)).await?;
        Ok(removed)
    }

    /// Returns freed pages to the file system.
    async fn vacuum(&self) -> Result<(), StoreError> {
        self.blocking(retire::vacuum).await
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
}

impl Backend for SqliteStore {
    super::store::pooled_backend!();

    async fn capture(&self, id: &str) -> Result<Option<super::store::StoredCapture>, StoreError> {
        let row = sqlx::query("SELECT replay_of, data FROM captures WHERE request_id = ?")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        let Some(row) = row else { return Ok(None) };
        Ok(Some(super::store::StoredCapture { replay_of: row.try_get("replay_of")?, data: row.try_get("data")? }))
    }

    async fn replays(&self, id: &str) -> Result<Vec<String>, StoreError> {
        Ok(sqlx::query_scalar("SELECT request_id FROM captures WHERE replay_of = ? ORDER BY started_at, request_id")
            .bind(id)
            .fetch_all(&self.pool)
            .await?)
    }

    async fn write(&self, batch: &[Record]) -> Result<(), StoreError> {
        let batch = batch.to_vec();
        self.blocking(move |path| Inserter::open(path)?.write(&batch)).await
    }

    fn sink(&self) -> Sink {
        Sink::Sqlite(SqliteSink::new(&self.path))
    }

    async fn requests(&self, filter: &RequestFilter) -> Result<Page, StoreError> {
        let limit = page_size(filter);
        let mut q = list_query(&format!("SELECT {SUMMARY_COLUMNS}"), filter)?;
        let rows = q.build().fetch_all(&self.pool).await?;
        let requests: Vec<RequestSummary> = rows.iter().map(summary).collect::<Result<_, _>>()?;
        Ok(Page::of(requests, limit))
    }

    async fn request(&self, id: &str) -> Result<Option<RequestDetail>, StoreError> {
        // Only constant column lists are formatted in; the id is bound.
        let sql = format!(
            "SELECT {SUMMARY_COLUMNS}, r.trace_id, r.request_body, r.response_body FROM requests r WHERE r.id = ?"
        );
        let row = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(id).fetch_optional(&self.pool).await?;
        let Some(row) = row else { return Ok(None) };
        let attempts = sqlx::query(
            "SELECT seq, provider, key_label, model, reason, fallback_from, started_at, offset_ms, timeout_ms, backoff_ms,
                    duration_ms, ttfb_ms, ttft_ms, status, outcome, retry_after_ms, breaker_state, error,
                    input_tokens, output_tokens, cached_tokens, cache_write_tokens, translated, dropped, routing
             FROM attempts WHERE request_id = ? ORDER BY seq",
        )
        .bind(id)
        .fetch_all(&self.pool)
        .await?;
        Ok(Some(RequestDetail {
            request: summary(&row)?,
            trace_id: row.try_get("trace_id")?,
            request_body: row.try_get("request_body")?,
            response_body: row.try_get("response_body")?,
            attempt_list: attempts.iter().map(attempt).collect::<Result<_, _>>()?,
            translations: attempts.iter().filter_map(translation).collect(),
            dropped: attempts.iter().filter_map(dropped).collect(),
            routing: attempts.iter().filter_map(routing).collect(),
        }))
    }

    /// Read from the rollups, a row per key and bucket, however many
    /// requests the buckets hold (see [`super::spend`]).
    async fn spend(&self, bucket: Bucket, since: i64) -> Result<Vec<SpendRow>, StoreError> {
        self.blocking(move |path| super::spend::read(path, bucket, since)).await
    }

    /// From the rollups: the minutes up to the next whole hour, then hours,
    /// so that a period starting at any local midnight is counted exactly.
    async fn cost_since(&self, since: i64) -> Result<Vec<(String, String, f64)>, StoreError> {
        let mut q = QueryBuilder::<Sqlite>::new("SELECT provider, model, TOTAL(cost_usd) AS cost FROM (");
        push_pieces(&mut q, "provider, model, cost_usd", Bucket::Hour, since);
        q.push(") WHERE provider <> '' GROUP BY 1, 2");
        let rows = q.build().fetch_all(&self.pool).await?;
        rows.iter().map(|r| Ok((r.try_get("provider")?, r.try_get("model")?, r.try_get("cost")?))).collect()
    }

    /// Kept by the writer (migration 0007): a row per client, not a pass
    /// over every request on record.
    async fn clients(&self, limit: i64) -> Result<Vec<Client>, StoreError> {
        let rows = sqlx::query(
            "SELECT user_agent, requests, last_at, last_id, last_model, last_outcome
             FROM clients ORDER BY last_at DESC LIMIT ?",
        )
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(client).collect()
    }

    async fn requests_on_record(&self) -> Result<i64, StoreError> {
        Ok(sqlx::query_scalar("SELECT COALESCE(SUM(requests), 0) FROM rollups WHERE span = ?")
            .bind(DAY_MS)
            .fetch_one(&self.pool)
            .await?)
    }

    async fn count(&self, table: CountTable) -> Result<i64, StoreError> {
        Ok(sqlx::query_scalar(table.count_sql()).fetch_one(&self.pool).await?)
    }

    async fn rebuild(&self) -> Result<(), StoreError> {
        self.blocking(|path| super::derived::rebuild(&mut insert::connect(path)?)).await
    }

    /// By age, then the oldest tenth at a time until under the size cap,
    /// then returns the freed pages to the file system.
    async fn prune(&self, config: &HistoryConfig) -> Result<u64, StoreError> {
        let cutoff = crate::ground::clock::now_ms() - i64::try_from(config.retention.as_millis()).unwrap_or(i64::MAX);
        let mut removed = self.prune_older_than(cutoff).await?;
        let max = i64::try_from(config.max_size_bytes).unwrap_or(i64::MAX);
        while self.used_bytes().await? > max {
            let total = self.requests_on_record().await?;
            if total == 0 {
                break;
            }
            removed += self.prune_oldest((total / 10).max(100)).await?;
        }
        if removed > 0 {
            self.vacuum().await?;
        }
        Ok(removed)
    }

    async fn purge(&self) -> Result<u64, StoreError> {
        let requests = self.prune_older_than(i64::MAX).await?;
        self.vacuum().await?;
        Ok(requests)
    }

    /// Bytes in use by live pages.
    async fn used_bytes(&self) -> Result<i64, StoreError> {
        let pages: i64 =
            sqlx::query_scalar("SELECT page_count - freelist_count FROM pragma_page_count(), pragma_freelist_count()")
                .fetch_one(&self.pool)
                .await?;
        let size: i64 = sqlx::query_scalar("SELECT page_size FROM pragma_page_size()").fetch_one(&self.pool).await?;
        Ok(pages * size)
    }

    async fn integrity_check(&self) -> Result<String, StoreError> {
        Ok(sqlx::query_scalar("PRAGMA integrity_check").fetch_one(&self.pool).await?)
    }

    async fn close(&self) {
        self.pool.close().await;
    }
}

// CROSS JOIN: SQLite's way to keep the facet entries the outer loop.
super::rows::sql_common!(Sqlite, SqliteRow, "CROSS JOIN requests r ON r.id = f.id");

#[cfg(test)]
mod tests {
    use super::super::derived::{HOUR_MS, MINUTE_MS};
    use super::*;
    use crate::ground::outcome::CacheStatus;
    use crate::ground::outcome::RequestOutcome;

    async fn plan(store: &SqliteStore, filter: &RequestFilter) -> Vec<String> {
        let mut q = list_query("EXPLAIN QUERY PLAN SELECT r.id", filter).unwrap();
        let rows = q.build().fetch_all(&store.pool).await.unwrap();
        rows.iter().map(|r| r.get::<String, _>("detail")).collect()
    }

    #[tokio::test]
    async fn a_correlation_lookup_reads_its_two_indexes_not_the_table() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("h.db")).await.unwrap();
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
        let store = SqliteStore::open(&dir.path().join("h.db")).await.unwrap();
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
        let store = SqliteStore::open(&dir.path().join("h.db")).await.unwrap();
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

    /// The sessions list reads the window's rows by the time index and
    /// sorts its groups, rather than walking every session on record.
    #[tokio::test]
    async fn the_sessions_list_walks_the_time_index() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("h.db")).await.unwrap();
        let filter = crate::history::sessions::SessionFilter::default();
        let mut q =
            sessions_query("EXPLAIN QUERY PLAN SELECT r.session, MAX(r.started_at) AS last_at", &filter, 1).unwrap();
        let plan: Vec<String> =
            q.build().fetch_all(&store.pool).await.unwrap().iter().map(|r| r.get::<String, _>("detail")).collect();
        assert!(plan[0].starts_with("SEARCH r USING INDEX requests_by_time (started_at>?"), "{plan:?}");
        assert!(!plan.iter().any(|d| d.contains("requests_session")), "{plan:?}");
    }

    #[tokio::test]
    async fn newest_first_walks_the_time_index() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("h.db")).await.unwrap();
        let plan = plan(&store, &RequestFilter::default()).await;
        assert!(plan.iter().any(|d| d.contains("INDEX requests_by_time")), "{plan:?}");
        assert!(!plan.iter().any(|d| d.contains("TEMP B-TREE")), "{plan:?}");
    }
}

super::members::member_sql!(sqlx::Sqlite);

/// Each member's requests, tokens and spend since `since` (Unix ms): the
/// requests' partial index on (member, started_at) finds them.
async fn member_spend(pool: &SqlitePool, since: i64) -> Result<Vec<crate::members::MemberSpend>, StoreError> {
    let rows = sqlx::query(
        "SELECT member, COUNT(*) AS requests, COALESCE(SUM(cost_usd), 0.0) AS cost_usd,
         CAST(COALESCE(SUM(input_tokens), 0) AS BIGINT) AS input_tokens,
         CAST(COALESCE(SUM(output_tokens), 0) AS BIGINT) AS output_tokens
         FROM requests WHERE member IS NOT NULL AND started_at >= ? GROUP BY member ORDER BY member",
    )
    .bind(since)
    .fetch_all(pool)
    .await?;
    rows.iter().map(member_spend_row).collect()
}
// SQLite would otherwise walk the session index for the GROUP BY's order.
super::sessions::session_sql!(sqlx::Sqlite, "INDEXED BY requests_by_time", "GROUP_CONCAT(DISTINCT r.member)");
