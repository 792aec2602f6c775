//! Deleting old history in small batches. Each batch is its own short
//! transaction (its rows, their attempts, their facet entries and what they
//! added to the rollups), and the connection pauses between batches, so the
//! writer never waits long for the write lock; readers, in WAL mode, never
//! wait at all. One large delete would hold the lock for as long as it
//! takes to delete a month of rows.

use std::path::Path;
use std::time::Duration;

use rusqlite::{params, Connection, TransactionBehavior};

use super::insert::connect;
use crate::history::derived::{Derived, Facts};

/// Requests deleted per transaction: a few milliseconds of work, bodies
/// and all, on this class of machine.
pub const BATCH: usize = 200;
/// Free pages returned to the file system per transaction.
const VACUUM_PAGES: i64 = 256;
/// Between batches, time for the writer (which retries every millisecond)
/// to take the lock.
const PAUSE: Duration = Duration::from_millis(5);

/// A request row as retention needs it: enough to take it out of the
/// derived tables.
struct Row {
    id: String,
    started_at: i64,
    user_agent: Option<String>,
    provider: Option<String>,
    model: Option<String>,
    provider_model: Option<String>,
    outcome: String,
    fallback: bool,
    tokens: [Option<i64>; 3],
    cost_usd: Option<f64>,
    cache: Option<String>,
    saved_usd: Option<f64>,
    tried: Vec<String>,
}

impl Row {
    fn facts(&self) -> Facts<'_> {
        Facts {
            id: &self.id,
            started_at: self.started_at,
            user_agent: self.user_agent.as_deref(),
            provider: self.provider.as_deref(),
            model: self.model.as_deref(),
            provider_model: self.provider_model.as_deref(),
            outcome: &self.outcome,
            fallback: self.fallback,
            input_tokens: self.tokens[0],
            output_tokens: self.tokens[1],
            cached_tokens: self.tokens[2],
            cost_usd: self.cost_usd,
            cache: self.cache.as_deref(),
            saved_usd: self.saved_usd,
            tried: self.tried.iter().map(String::as_str).collect(),
        }
    }
}

/// Deletes requests started before `before` (all of them if `None`),
/// oldest first, at most `limit` of them, in batches. Returns how many.
pub fn requests(path: &Path, before: Option<i64>, limit: u64) -> rusqlite::Result<u64> {
    let mut conn = connect(path)?;
    in_batches(limit, |size| batch(&mut conn, before.unwrap_or(i64::MAX), size))
}

/// Runs `delete` on batches of up to [`BATCH`] rows, pausing between them,
/// until one deletes less than a full batch or `limit` rows are gone.
/// Returns how many were.
fn in_batches(limit: u64, mut delete: impl FnMut(u64) -> rusqlite::Result<u64>) -> rusqlite::Result<u64> {
    let mut removed = 0;
    while removed < limit {
        let n = delete((limit - removed).min(BATCH as u64))?;
        removed += n;
        if n < BATCH as u64 {
            break;
        }
        std::thread::sleep(PAUSE);
    }
    Ok(removed)
}

/// Deletes up to `limit` of the oldest requests started before `before`.
fn batch(conn: &mut Connection, before: i64, limit: u64) -> rusqlite::Result<u64> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let rows = oldest(&tx, before, limit)?;
    {
        let mut derived = Derived::default();
        let facts: Vec<Facts<'_>> = rows.iter().map(Row::facts).collect();
        for f in &facts {
            derived.remove(f);
        }
        derived.write(&tx)?;
        let mut attempts = tx.prepare_cached("DELETE FROM attempts WHERE request_id = ?1")?;
        let mut requests = tx.prepare_cached("DELETE FROM requests WHERE id = ?1")?;
        let mut captures = tx.prepare_cached("DELETE FROM captures WHERE request_id = ?1")?;
        for row in &rows {
            attempts.execute([&row.id])?;
            captures.execute([&row.id])?;
            requests.execute([&row.id])?;
        }
    }
    tx.commit()?;
    Ok(rows.len() as u64)
}

fn oldest(conn: &Connection, before: i64, limit: u64) -> rusqlite::Result<Vec<Row>> {
    let mut select = conn.prepare_cached(
        "SELECT id, started_at, provider, model, provider_model, outcome, fallback,
                input_tokens, output_tokens, cached_tokens, cost_usd, cache, saved_usd, user_agent
         FROM requests WHERE started_at < ?1 ORDER BY started_at, id LIMIT ?2",
    )?;
    let mut tried = conn.prepare_cached("SELECT provider FROM attempts WHERE request_id = ?1 ORDER BY seq")?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut rows = select
        .query_map(params![before, limit], |r| {
            Ok(Row {
                id: r.get(0)?,
                started_at: r.get(1)?,
                provider: r.get(2)?,
                model: r.get(3)?,
                provider_model: r.get(4)?,
                outcome: r.get(5)?,
                fallback: r.get(6)?,
                tokens: [r.get(7)?, r.get(8)?, r.get(9)?],
                cost_usd: r.get(10)?,
                cache: r.get(11)?,
                saved_usd: r.get(12)?,
                user_agent: r.get(13)?,
                tried: Vec::new(),
            })
        })?
        .collect::<rusqlite::Result<Vec<Row>>>()?;
    for row in &mut rows {
        row.tried = tried.query_map([&row.id], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?;
    }
    Ok(rows)
}

/// Deletes events older than `before`, in batches.
pub fn events(path: &Path, before: i64) -> rusqlite::Result<u64> {
    let conn = connect(path)?;
    in_batches(u64::MAX, |size| {
        let deleted = conn.execute(
            "DELETE FROM events WHERE id IN (SELECT id FROM events WHERE at < ?1 ORDER BY at LIMIT ?2)",
            params![before, i64::try_from(size).unwrap_or(i64::MAX)],
        )?;
        Ok(deleted as u64)
    })
}

/// Returns free pages to the file system, a few at a time.
pub fn vacuum(path: &Path) -> rusqlite::Result<()> {
    let conn = connect(path)?;
    let mut before = i64::MAX;
    loop {
        let free: i64 = conn.query_row("PRAGMA freelist_count", [], |r| r.get(0))?;
        // Done, or a database made without incremental auto-vacuum.
        if free == 0 || free >= before {
            return Ok(());
        }
        before = free;
        // A pragma that returns no rows; run as a batch so none is expected.
        conn.execute_batch(&format!("PRAGMA incremental_vacuum({})", free.min(VACUUM_PAGES)))?;
        std::thread::sleep(PAUSE);
    }
}
