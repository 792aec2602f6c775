//! The PostgreSQL backend: one record for every gateway of a team.
//!
//! Each gateway keeps its own spool beside its data directory and its own
//! writer thread, which drains batches here ([`write`]). Rollups and
//! clients are keyed by the writing instance and summed at read time, so
//! instances never update one row. Requests, attempts and facet entries
//! are partitioned by UTC day; age retention drops whole days, under an
//! advisory lock so that one instance at a time does it. Migrations live in
//! `migrations-pg`; sqlx applies them under PostgreSQL's advisory lock, so
//! instances starting together apply them once.
//!
//! It lives in the core, beside SQLite, rather than in a crate of its own:
//! it shares the writer, the spool, the derived-table arithmetic and the
//! request list's SQL with the SQLite backend, which would otherwise have
//! to become public API; and sqlx, already a dependency, brings the driver
//! (pure Rust, TLS by rustls).

mod write;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, PgRow};
use sqlx::{Postgres, QueryBuilder, Row};

use super::derived::{Facet, DAY_MS};
use super::record::{AttemptDropped, AttemptRecord, AttemptRouting, AttemptTranslation, Record};
use super::spend::Tally;
use super::store::{
    driving_facet, from_name, page_size, parse_cursor, spend_pieces, Backend, Bucket, Client, CountTable, Page,
    RequestDetail, RequestFilter, RequestSummary, Sink, SpendRow, StoreError,
};
use crate::config::{HistoryConfig, HistoryUrl};
use crate::protocol::usage::Usage;

/// Bytes the history's tables take on disk, indexes and TOAST included:
/// the partitions and the tables beside them.
const HISTORY_BYTES: &str = "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0)::int8 FROM pg_class c
    WHERE c.relkind = 'r' AND (c.relname IN ('clients', 'events', 'facet_days', 'member_days')
        OR c.oid IN (SELECT i.inhrelid FROM pg_inherits i JOIN pg_class p ON p.oid = i.inhparent
                     WHERE p.relname IN ('requests', 'attempts', 'request_facets', 'rollups')))
        AND c.relnamespace = current_schema()::regnamespace";

/// Advisory lock keys (any constants, the same in every instance).
const PARTITION_LOCK: i64 = 0x5359_4849_5354_0001;
const RETENTION_LOCK: i64 = 0x5359_4849_5354_0002;
/// Connections per instance: the writer's two lanes and a few readers'.
/// Instances × this must stay under the server's `max_connections`.
const POOL_SIZE: u32 = 5;
/// The longest a batch write may take before the writer gives it up.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// The PostgreSQL history; cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct PgStore {
    pool: PgPool,
    /// Where the spool and the response cache sit: the data directory's database path.
    path: PathBuf,
    /// The keys of this process's rollup and client rows, one per write
    /// lane ([`write::LANES`]): the instance's own, then `{instance}/1`.
    /// Readers sum over every key, so no reader tells lanes apart.
    lanes: Arc<[String; write::LANES]>,
    /// Day partitions known to exist.
    days: Arc<Mutex<HashSet<i64>>>,
}

impl PgStore {
    /// Connects and migrates. Errors name the setting and show the URL
    /// redacted; nothing is written unless the database is reachable, the
    /// credentials good and its schema one this binary knows.
    pub async fn open(url: &HistoryUrl, path: &Path) -> Result<PgStore, StoreError> {
        let fail = |e: &dyn std::fmt::Display| StoreError::Server { url: url.redacted(), message: scrub(e, url) };
        // Custom plans only: a generic plan of a query on the partitioned
        // tables cannot prune at planning and sets up every day's partition
        // on each run, where a plan for the values at hand reads the few
        // days a time-bounded query names (see `windows`).
        let options = PgConnectOptions::from_str(url.expose())
            .map_err(|e| fail(&e))?
            .options([("plan_cache_mode", "force_custom_plan")]);
        let pool = PgPoolOptions::new()
            .max_connections(POOL_SIZE)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options)
            .await
            .map_err(|e| fail(&e))?;
        sqlx::migrate!("./migrations-pg").run(&pool).await.map_err(|e| match e {
            sqlx::migrate::MigrateError::VersionMissing(v) => StoreError::Server {
                url: url.redacted(),
                message: format!(
                    "the database was set up by a newer Switchyard (its migration {v} is unknown to this one): \
                     upgrade this gateway"
                ),
            },
            other => fail(&other),
        })?;
        let instance = uuid::Uuid::now_v7().to_string();
        let lanes = Arc::new([instance.clone(), format!("{instance}/1")]);
        Ok(PgStore { pool, path: path.to_path_buf(), lanes, days: Arc::default() })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    #[cfg(test)]
    pub(crate) fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Retention: drops the day partitions wholly before `before_ms`, then,
    /// while the history's tables take more than `max_bytes`, the oldest
    /// day left, never the newest; deletes older events. Returns the
    /// requests dropped. One instance at a time (an advisory lock): the
    /// others skip the round.
    async fn retire(&self, before_ms: i64, max_bytes: u64) -> Result<u64, StoreError> {
        let mut conn = self.pool.acquire().await?;
        let locked: bool =
            sqlx::query_scalar("SELECT pg_try_advisory_lock($1)").bind(RETENTION_LOCK).fetch_one(&mut *conn).await?;
        if !locked {
            return Ok(0);
        }
        let mut result = self.drop_days(&mut conn, before_ms).await;
        if let Ok(removed) = &mut result {
            match self.drop_days_over(&mut conn, max_bytes).await {
                Ok(more) => *removed += more,
                Err(e) => result = Err(e),
            }
        }
        if result.is_ok() {
            let today = crate::ground::clock::now_ms().div_euclid(DAY_MS);
            if let Err(e) = write::fold_rollups(&mut conn, today).await {
                result = Err(e);
            }
        }
        sqlx::query("SELECT pg_advisory_unlock($1)").bind(RETENTION_LOCK).execute(&mut *conn).await?;
        result
    }

    /// The day partitions of `requests`, oldest first.
    async fn days(&self, conn: &mut sqlx::PgConnection) -> Result<Vec<i64>, StoreError> {
        let names: Vec<String> = sqlx::query_scalar(
            "SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
             JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = 'requests'",
        )
        .fetch_all(&mut *conn)
        .await?;
        let mut days: Vec<i64> =
            names.iter().filter_map(|n| n.strip_prefix("requests_d").and_then(|d| d.parse().ok())).collect();
        days.sort_unstable();
        Ok(days)
    }

    async fn drop_days(&self, conn: &mut sqlx::PgConnection, before_ms: i64) -> Result<u64, StoreError> {
        let mut removed = 0;
        for day in self.days(conn).await? {
            if (day + 1) * DAY_MS > before_ms {
                break;
            }
            removed += self.drop_day(conn, day).await?;
        }
        sqlx::query("DELETE FROM events WHERE at < $1").bind(before_ms).execute(&mut *conn).await?;
        sqlx::query("DELETE FROM captures WHERE started_at < $1").bind(before_ms).execute(&mut *conn).await?;
        Ok(removed)
    }

    /// The size cap, a whole day at a time: what a dropped partition held
    /// is given back to the system at once, where deleted rows would wait
    /// for a vacuum.
    async fn drop_days_over(&self, conn: &mut sqlx::PgConnection, max_bytes: u64) -> Result<u64, StoreError> {
        let mut removed = 0;
        loop {
            let used: i64 = sqlx::query_scalar(HISTORY_BYTES).fetch_one(&mut *conn).await?;
            if u64::try_from(used).unwrap_or(0) <= max_bytes {
                return Ok(removed);
            }
            let days = self.days(conn).await?;
            let [oldest, _, ..] = days.as_slice() else {
                tracing::warn!(
                    "the history holds {} MiB, over history.max_size_mb, in its newest day alone: it is kept",
                    used / (1024 * 1024)
                );
                return Ok(removed);
            };
            removed += self.drop_day(conn, *oldest).await?;
        }
    }

    /// One day: its rollups (every span lies within the day) and its
    /// clients' counts, then its partitions, in one transaction.
    async fn drop_day(&self, conn: &mut sqlx::PgConnection, day: i64) -> Result<u64, StoreError> {
        let (from, to) = (day * DAY_MS, (day + 1) * DAY_MS);
        let mut tx = sqlx::Connection::begin(&mut *conn).await?;
        let count: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM requests_d{day}")))
            .fetch_one(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM rollups WHERE start >= $1 AND start < $2")
            .bind(from)
            .bind(to)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM facet_days WHERE day = $1").bind(day).execute(&mut *tx).await?;
        sqlx::query("DELETE FROM member_days WHERE day = $1").bind(day).execute(&mut *tx).await?;
        sqlx::query("DELETE FROM captures WHERE started_at >= $1 AND started_at < $2")
            .bind(from)
            .bind(to)
            .execute(&mut *tx)
            .await?;
        // Counts go down under retention's own instance; the newest request
        // shown stays, as SQLite's retention leaves it.
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO clients (instance, user_agent, requests, last_at, last_id, last_model, last_outcome)
             SELECT 'retention', user_agent, -COUNT(*), 0, '', NULL, '' FROM requests_d{day}
             WHERE user_agent IS NOT NULL AND user_agent <> '' GROUP BY user_agent
             ON CONFLICT (instance, user_agent) DO UPDATE SET requests = clients.requests + excluded.requests"
        )))
        .execute(&mut *tx)
        .await?;
        for table in ["requests", "attempts", "request_facets"] {
            sqlx::query(sqlx::AssertSqlSafe(format!("DROP TABLE IF EXISTS {table}_d{day}"))).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        self.days.lock().unwrap_or_else(|p| p.into_inner()).remove(&day);
        Ok(u64::try_from(count).unwrap_or(0))
    }
}

impl PgStore {
    /// A request's row. The id alone would probe every day's partition; a
    /// gateway's ids are UUIDv7, stamped with the millisecond the request
    /// started, so the day is known and one partition (two near midnight)
    /// is read. Ids of another form, and a miss in that window, are looked
    /// for everywhere.
    async fn request_row(&self, id: &str) -> Result<Option<PgRow>, StoreError> {
        let columns = format!(
            "SELECT {SUMMARY_COLUMNS}, r.trace_id, r.request_body, r.response_body FROM requests r WHERE r.id = $1"
        );
        if let Some(at) = stamped_at(id) {
            let sql = format!("{columns} AND r.started_at >= $2 AND r.started_at < $3");
            let row = sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(id)
                .bind(at - ID_CLOCK_SLACK_MS)
                .bind(at + ID_CLOCK_SLACK_MS)
                .fetch_optional(&self.pool)
                .await?;
            if row.is_some() {
                return Ok(row);
            }
        }
        Ok(sqlx::query(sqlx::AssertSqlSafe(columns)).bind(id).fetch_optional(&self.pool).await?)
    }

    /// The windows a list walks ([`windows`]), each narrowed to the days in
    /// it that hold the filter's driving facet or its correlation id (by
    /// `facet_days`); a window without one is not asked at all.
    async fn list_windows(&self, filter: &RequestFilter, now: i64) -> Result<Vec<Window>, StoreError> {
        let windows = windows(filter, now)?;
        let Some((facet, value, also)) = indexed(filter) else { return Ok(windows) };
        let mut days: Vec<i64> = sqlx::query_scalar("SELECT day FROM facet_days WHERE facet = $1 AND value = $2")
            .bind(facet)
            .bind(value)
            .fetch_all(&self.pool)
            .await?;
        days.extend(also);
        Ok(narrowed(&windows, &days))
    }
}

/// A span of time a list asks for at once: from (inclusive), until (exclusive).
type Window = (Option<i64>, Option<i64>);

/// The windows a list walks, newest first: the day of the newest request
/// it can show, then the 3 days before, then 12, 48 and 192, then the rest,
/// each within the filter's own `since` and `until`. A query bounded in
/// time is planned over its days' partitions alone, so a page found in the
/// newest days (nearly every page) never plans or opens the others. A
/// filter that picks requests out by correlation id or search asks once:
/// its index finds them wherever they are (a correlation id's days are then
/// narrowed, [`PgStore::list_windows`]).
fn windows(filter: &RequestFilter, now: i64) -> Result<Vec<Window>, StoreError> {
    if filter.correlation_id.is_some() || filter.search.as_deref().is_some_and(|s| !s.trim().is_empty()) {
        return Ok(vec![(filter.since, filter.until)]);
    }
    let cursor = filter.cursor.as_deref().map(parse_cursor).transpose()?.map(|(at, _)| at);
    let newest = [Some(now), filter.until.map(|u| u - 1), cursor].into_iter().flatten().min().unwrap_or(now);
    let mut windows = Vec::new();
    let mut until = filter.until;
    let mut from = newest.div_euclid(DAY_MS) * DAY_MS;
    for days in [3, 12, 48, 192, 0] {
        if filter.since.is_some_and(|s| s >= from) || days == 0 {
            windows.push((filter.since, until));
            return Ok(windows);
        }
        windows.push((Some(from), until));
        until = Some(from);
        from -= days * DAY_MS;
    }
    Ok(windows)
}

/// What picks a list's days out in `facet_days`: the driving facet's entry
/// ([`driving_facet`]) or the correlation id, and any day to look at
/// besides (the days a correlation id that is a UUIDv7 names).
/// `None`: no such filter; every day may hold the rows.
fn indexed(filter: &RequestFilter) -> Option<(i64, String, Vec<i64>)> {
    let Some(c) = &filter.correlation_id else {
        return driving_facet(filter).map(|(facet, value)| (facet.code(), value.to_string(), Vec::new()));
    };
    // The request whose own id it is has an entry only when that id is not a
    // UUIDv7 (the gateway's ids), which names its day by itself.
    let own = stamped_at(c)
        .map(|at| [at - ID_CLOCK_SLACK_MS, at + ID_CLOCK_SLACK_MS].map(|t| t.div_euclid(DAY_MS)).to_vec())
        .unwrap_or_default();
    Some((write::CORRELATION, c.clone(), own))
}

/// Each window narrowed to the span of `days` (day numbers) within it,
/// newest first; a window holding none of them is left out.
fn narrowed(windows: &[Window], days: &[i64]) -> Vec<Window> {
    windows
        .iter()
        .filter_map(|&(from, until)| {
            let inside = days
                .iter()
                .map(|d| (d * DAY_MS, (d + 1) * DAY_MS))
                .filter(|&(start, end)| from.is_none_or(|f| end > f) && until.is_none_or(|u| start < u));
            let (first, last) = inside.fold(None, |span: Option<(i64, i64)>, (start, end)| {
                Some(span.map_or((start, end), |(s, e)| (s.min(start), e.max(end))))
            })?;
            Some((Some(from.map_or(first, |f| f.max(first))), Some(until.map_or(last, |u| u.min(last)))))
        })
        .collect()
}

/// How far a request's start may lie from its id's timestamp: both are read
/// from the same clock microseconds apart, so this is only a margin.
const ID_CLOCK_SLACK_MS: i64 = 10 * 60 * 1000;

/// The Unix milliseconds a UUIDv7 id was stamped with.
fn stamped_at(id: &str) -> Option<i64> {
    let uuid = uuid::Uuid::parse_str(id).ok()?;
    if uuid.get_version_num() != 7 {
        return None;
    }
    let (seconds, nanos) = uuid.get_timestamp()?.to_unix();
    i64::try_from(seconds).ok()?.checked_mul(1000)?.checked_add(i64::from(nanos / 1_000_000))
}

/// The statements that create day `day`'s partitions (day number since the
/// Unix epoch, UTC).
fn partition_ddl(day: i64) -> Vec<String> {
    let (from, to) = (day * DAY_MS, (day + 1) * DAY_MS);
    ["requests", "attempts", "request_facets"]
        .iter()
        .map(|t| format!("CREATE TABLE IF NOT EXISTS {t}_d{day} PARTITION OF {t} FOR VALUES FROM ({from}) TO ({to})"))
        .collect()
}

/// An error's text with the URL's password, should the driver quote it, cut out.
fn scrub(e: &dyn std::fmt::Display, url: &HistoryUrl) -> String {
    let text = e.to_string();
    match url::Url::parse(url.expose()).ok().and_then(|u| u.password().map(str::to_owned)) {
        Some(password) if !password.is_empty() => text.replace(&password, "***"),
        _ => text,
    }
}

/// One step of a write, given up after [`WRITE_TIMEOUT`].
async fn within_write_timeout<T>(
    step: impl std::future::Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    tokio::time::timeout(WRITE_TIMEOUT, step).await.unwrap_or_else(|_| {
        Err(StoreError::WriteTask(format!(
            "PostgreSQL did not finish a write within {}",
            humantime::format_duration(WRITE_TIMEOUT)
        )))
    })
}

/// The writer thread's side: it blocks on the runtime the history was
/// opened on, since the driver is async and the writer a thread of its own.
#[derive(Debug)]
pub(crate) struct PgSink {
    store: PgStore,
    runtime: Option<tokio::runtime::Handle>,
}

impl PgSink {
    /// Writes a batch in one transaction, or gives up after
    /// [`WRITE_TIMEOUT`]: a server that stopped answering (paused, its
    /// network gone) must not hold the writer, which then falls behind and
    /// keeps the records in the spool. Dropped mid-way, the transaction is
    /// rolled back with its connection.
    pub(crate) fn write(&mut self, records: &[Record]) -> Result<(), StoreError> {
        let Some(runtime) = &self.runtime else {
            return Err(StoreError::WriteTask("no runtime to write to PostgreSQL on".into()));
        };
        runtime.block_on(async {
            // New days' partitions first, each few days in their own time:
            // a batch that spans many new days (a replayed spool) goes
            // through in one call however many there are.
            for days in self.store.missing_days(records).chunks(write::DAYS_PER_TRANSACTION) {
                within_write_timeout(self.store.create_days(days)).await?;
            }
            within_write_timeout(self.store.write_batch(records)).await
        })
    }

    /// The pool replaces broken connections by itself.
    pub(crate) fn reset(&mut self) {}
}

impl Backend for PgStore {
    super::store::pooled_backend!();

    async fn capture(&self, id: &str) -> Result<Option<crate::history::store::StoredCapture>, StoreError> {
        let row = sqlx::query("SELECT replay_of, data FROM captures WHERE request_id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        let Some(row) = row else { return Ok(None) };
        Ok(Some(crate::history::store::StoredCapture {
            replay_of: row.try_get("replay_of")?,
            data: row.try_get("data")?,
        }))
    }

    async fn replays(&self, id: &str) -> Result<Vec<String>, StoreError> {
        Ok(sqlx::query_scalar("SELECT request_id FROM captures WHERE replay_of = $1 ORDER BY started_at, request_id")
            .bind(id)
            .fetch_all(&self.pool)
            .await?)
    }

    async fn write(&self, batch: &[Record]) -> Result<(), StoreError> {
        for days in self.missing_days(batch).chunks(write::DAYS_PER_TRANSACTION) {
            self.create_days(days).await?;
        }
        self.write_batch(batch).await
    }

    fn sink(&self) -> Sink {
        Sink::Postgres(PgSink { store: self.clone(), runtime: tokio::runtime::Handle::try_current().ok() })
    }

    /// Newest first, a window of days at a time (see [`windows`]).
    async fn requests(&self, filter: &RequestFilter) -> Result<Page, StoreError> {
        let limit = page_size(filter);
        let wanted = limit as usize + 1;
        let mut requests: Vec<RequestSummary> = Vec::with_capacity(wanted);
        for (since, until) in self.list_windows(filter, crate::ground::clock::now_ms()).await? {
            let window =
                RequestFilter { since, until, limit: Some((wanted - requests.len()) as u32 - 1), ..filter.clone() };
            let rows = list_query(&format!("SELECT {SUMMARY_COLUMNS}"), &window)?.build().fetch_all(&self.pool).await?;
            for row in &rows {
                requests.push(summary(row)?);
            }
            if requests.len() >= wanted {
                break;
            }
        }
        requests.truncate(wanted);
        Ok(Page::of(requests, limit))
    }

    async fn request(&self, id: &str) -> Result<Option<RequestDetail>, StoreError> {
        let Some(row) = self.request_row(id).await? else { return Ok(None) };
        let attempts = sqlx::query(
            "SELECT seq, provider, key_label, model, reason, fallback_from, started_at, offset_ms, timeout_ms, backoff_ms,
                    duration_ms, ttfb_ms, ttft_ms, status, outcome, retry_after_ms, breaker_state, error,
                    input_tokens, output_tokens, cached_tokens, cache_write_tokens, translated, dropped, routing
             FROM attempts WHERE request_id = $1 AND request_started_at = $2 ORDER BY seq",
        )
        .bind(id)
        .bind(row.try_get::<i64, _>("started_at")?)
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

    async fn spend(&self, bucket: Bucket, since: i64) -> Result<Vec<SpendRow>, StoreError> {
        let mut tally = Tally::new(bucket);
        // Each writer's rows as they are, summed here: the tally adds up
        // a bucket's rows anyway, and PostgreSQL grouping them first (its
        // sums of BIGINT are NUMERIC) cost more than the reading.
        for (span, from, to) in spend_pieces(bucket, since) {
            let rows = sqlx::query(
                "SELECT start, provider, model, outcome <> 'ok' AS failed, requests, fallbacks, input_tokens,
                        output_tokens, cached_tokens, cost_usd, priced, saved_usd
                 FROM rollups WHERE span = $1 AND start >= $2 AND start < $3 AND provider <> ''",
            )
            .bind(span)
            .bind(from)
            .bind(to)
            .fetch_all(&self.pool)
            .await?;
            // By position: a year is tens of thousands of rows, and a
            // column looked up by name is a search of the row's columns.
            for r in &rows {
                let sums = super::derived::Sums {
                    requests: r.try_get(4)?,
                    fallbacks: r.try_get(5)?,
                    input_tokens: r.try_get(6)?,
                    output_tokens: r.try_get(7)?,
                    cached_tokens: r.try_get(8)?,
                    cost_usd: r.try_get(9)?,
                    priced: r.try_get(10)?,
                    saved_usd: r.try_get(11)?,
                };
                let (provider, model): (&str, &str) = (r.try_get(1)?, r.try_get(2)?);
                tally.add(r.try_get(0)?, provider, model, r.try_get(3)?, &sums);
            }
        }
        Ok(tally.finish())
    }

    async fn cost_since(&self, since: i64) -> Result<Vec<(String, String, f64)>, StoreError> {
        let mut q = QueryBuilder::<Postgres>::new("SELECT provider, model, COALESCE(SUM(cost_usd), 0) AS cost FROM (");
        push_pieces(&mut q, "provider, model, cost_usd", Bucket::Hour, since);
        q.push(") AS pieces WHERE provider <> '' GROUP BY 1, 2");
        let rows = q.build().fetch_all(&self.pool).await?;
        rows.iter().map(|r| Ok((r.try_get("provider")?, r.try_get("model")?, r.try_get("cost")?))).collect()
    }

    /// Summed over the instances; the newest request is the newest any saw.
    async fn clients(&self, limit: i64) -> Result<Vec<Client>, StoreError> {
        let rows = sqlx::query(
            "SELECT user_agent, SUM(requests)::int8 AS requests, MAX(last_at) AS last_at,
                    (array_agg(last_id ORDER BY last_at DESC))[1] AS last_id,
                    (array_agg(last_model ORDER BY last_at DESC))[1] AS last_model,
                    (array_agg(last_outcome ORDER BY last_at DESC))[1] AS last_outcome
             FROM clients GROUP BY user_agent HAVING SUM(requests) > 0 ORDER BY last_at DESC LIMIT $1",
        )
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(client).collect()
    }

    async fn requests_on_record(&self) -> Result<i64, StoreError> {
        Ok(sqlx::query_scalar("SELECT COALESCE(SUM(requests), 0)::int8 FROM rollups WHERE span = $1")
            .bind(DAY_MS)
            .fetch_one(&self.pool)
            .await?)
    }

    async fn count(&self, table: CountTable) -> Result<i64, StoreError> {
        Ok(sqlx::query_scalar(table.count_sql()).fetch_one(&self.pool).await?)
    }

    /// Computes the derived tables again from the rows, in one transaction,
    /// under one instance key of its own.
    async fn rebuild(&self) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        sqlx::raw_sql(include_str!("rebuild.sql")).execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(())
    }

    /// By age: whole days dropped. The size cap is not applied here yet.
    async fn prune(&self, config: &HistoryConfig) -> Result<u64, StoreError> {
        let cutoff = crate::ground::clock::now_ms() - i64::try_from(config.retention.as_millis()).unwrap_or(i64::MAX);
        self.retire(cutoff, config.max_size_bytes).await
    }

    async fn purge(&self) -> Result<u64, StoreError> {
        let requests = self.count(CountTable::Requests).await?;
        sqlx::raw_sql(
            "TRUNCATE requests, attempts, request_facets, facet_days, member_days, rollups, clients, events, captures",
        )
        .execute(&self.pool)
        .await?;
        Ok(u64::try_from(requests).unwrap_or(0))
    }

    async fn used_bytes(&self) -> Result<i64, StoreError> {
        Ok(sqlx::query_scalar(HISTORY_BYTES).fetch_one(&self.pool).await?)
    }

    async fn integrity_check(&self) -> Result<String, StoreError> {
        let one: i32 = sqlx::query_scalar("SELECT 1").fetch_one(&self.pool).await?;
        Ok(if one == 1 { "ok" } else { "unexpected answer" }.to_string())
    }

    async fn close(&self) {
        self.pool.close().await;
    }
}

// The start too, so that each entry reaches one day's partition.
super::rows::sql_common!(Postgres, PgRow, "JOIN requests r ON r.id = f.id AND r.started_at = f.started_at");

#[cfg(test)]
pub(crate) mod tests;

super::members::member_sql!(sqlx::Postgres);

/// Each member's requests, tokens and spend since `since` (Unix ms): the
/// whole days from `member_days`, the rows of the partial day before them
/// (one partition) from the requests themselves.
async fn member_spend(pool: &PgPool, since: i64) -> Result<Vec<crate::members::MemberSpend>, StoreError> {
    let first_whole_day = since.div_euclid(DAY_MS) + i64::from(since.rem_euclid(DAY_MS) != 0);
    // The partial day's requests are read only when its day has a member's:
    // even pruned to one partition, the query on `requests` is planned
    // against the parent and its hundreds of partitions (some 3 ms).
    let partial = since < first_whole_day * DAY_MS
        && sqlx::query_scalar::<_, bool>("SELECT EXISTS (SELECT 1 FROM member_days WHERE day = $1)")
            .bind(first_whole_day - 1)
            .fetch_one(pool)
            .await?;
    let mut q = QueryBuilder::<Postgres>::new(
        "SELECT member, SUM(requests)::int8 AS requests, COALESCE(SUM(cost_usd), 0.0) AS cost_usd,
                COALESCE(SUM(input_tokens), 0)::int8 AS input_tokens,
                COALESCE(SUM(output_tokens), 0)::int8 AS output_tokens
         FROM (SELECT member, requests, cost_usd, input_tokens, output_tokens FROM member_days WHERE day >= ",
    );
    q.push_bind(first_whole_day);
    if partial {
        q.push(
            " UNION ALL SELECT member, 1, cost_usd, input_tokens, output_tokens FROM requests
             WHERE member IS NOT NULL AND started_at >= ",
        );
        q.push_bind(since).push(" AND started_at < ").push_bind(first_whole_day * DAY_MS);
    }
    q.push(") AS pieces GROUP BY member ORDER BY member");
    let rows = q.build().fetch_all(pool).await?;
    rows.iter().map(member_spend_row).collect()
}
super::sessions::session_sql!(sqlx::Postgres, "", "STRING_AGG(DISTINCT r.member, ',')");
