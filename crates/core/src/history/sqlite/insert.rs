//! Writing rows. A plain SQLite connection with its statements prepared
//! once: a batch costs a few b-tree inserts per record and one commit, and
//! no hand-off to another thread per statement. Rows are never replaced: a
//! record seen twice (replayed from the spool after it was committed) is the
//! same record, so the second copy is ignored, which also spares each insert
//! the statement journal a replace would need. The writer thread owns one;
//! [`Store::write`](crate::history::Store::write) opens one for a one-off batch.

use std::path::Path;
use std::time::Duration;

use rusqlite::{params, Connection, OpenFlags, TransactionBehavior};

use crate::history::derived::{Derived, Facts};
use crate::history::record::{
    AttemptDropped, AttemptRecord, AttemptRouting, AttemptTranslation, CaptureRecord, EventRecord, Record,
    RequestRecord,
};

const INSERT_REQUEST: &str = "INSERT OR IGNORE INTO requests (id, correlation_id, started_at, finished_at,
    user_agent, endpoint, model, streamed, outcome, status, provider, provider_model, attempts, fallback,
    duration_ms, ttft_ms, input_tokens, output_tokens, cached_tokens, cost_usd, error_code, error,
    request_body, response_body, cache, saved_usd, instance, member, session, cache_write_tokens, turn, trace_id,
    device)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24,
    ?25, ?26, ?27, ?28, ?29, ?30, ?31, ?32, ?33)";

const INSERT_ATTEMPT: &str = "INSERT OR IGNORE INTO attempts (request_id, seq, provider, key_label, model,
    reason, fallback_from, started_at, offset_ms, timeout_ms, backoff_ms, duration_ms, ttfb_ms, ttft_ms, status,
    outcome, retry_after_ms, breaker_state, error, input_tokens, output_tokens, cached_tokens, translated, dropped,
    routing, cache_write_tokens)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23,
    ?24, ?25, ?26)";

const INSERT_EVENT: &str = "INSERT INTO events (at, kind, provider, detail, request_id) VALUES (?1, ?2, ?3, ?4, ?5)";

const INSERT_CAPTURE: &str =
    "INSERT OR IGNORE INTO captures (request_id, started_at, replay_of, data) VALUES (?1, ?2, ?3, ?4)";

/// The writer thread's SQLite connection, opened on the first write and
/// again after a failure.
#[derive(Debug)]
pub struct SqliteSink {
    path: std::path::PathBuf,
    inserter: Option<Inserter>,
}

impl SqliteSink {
    pub fn new(path: &Path) -> SqliteSink {
        SqliteSink { path: path.to_path_buf(), inserter: None }
    }

    pub fn write(&mut self, records: &[Record]) -> Result<(), crate::history::StoreError> {
        let inserter = match &mut self.inserter {
            Some(inserter) => inserter,
            None => self.inserter.insert(Inserter::open(&self.path)?),
        };
        Ok(inserter.write(records)?)
    }

    pub fn reset(&mut self) {
        self.inserter = None;
    }
}

/// A connection for writing history rows.
#[derive(Debug)]
pub struct Inserter {
    conn: Connection,
}

impl Inserter {
    /// Opens the database, which [`Store::open`](crate::history::Store::open) has
    /// already created, migrated and put in WAL mode.
    pub fn open(path: &Path) -> rusqlite::Result<Inserter> {
        // SQLite's default page cache (2 MiB): 16 MiB gained the writer 3%
        // at a million rows and cost the gateway as much again in peak RSS
        // (docs/benchmarks-notes.md, round seven).
        Ok(Inserter { conn: connect(path)? })
    }

    /// Writes a batch in one transaction.
    pub fn write(&mut self, batch: &[Record]) -> rusqlite::Result<()> {
        // Immediate: take the write lock up front rather than upgrade later,
        // which could fail against a concurrent writer (retention).
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        {
            let mut requests = tx.prepare_cached(INSERT_REQUEST)?;
            let mut attempts = tx.prepare_cached(INSERT_ATTEMPT)?;
            let mut events = tx.prepare_cached(INSERT_EVENT)?;
            let mut derived = Derived::default();
            for record in batch {
                match record {
                    Record::Request(r) => {
                        // A copy already on record adds nothing to the sums.
                        if insert_request(&mut requests, r)? {
                            derived.add(&Facts::of(r));
                        }
                        for a in &r.attempts {
                            let translation = r.translations.iter().find(|t| t.seq == a.seq);
                            let dropped = r.dropped.iter().find(|d| d.seq == a.seq);
                            let routing = r.routing.iter().find(|x| x.seq == a.seq);
                            insert_attempt(&mut attempts, &r.id, a, Sides { translation, dropped, routing })?;
                        }
                    }
                    Record::Event(e) => insert_event(&mut events, e)?,
                    Record::Capture(c) => insert_capture(&tx, c)?,
                }
            }
            derived.write(&tx)?;
        }
        tx.commit()
    }
}

/// A connection for writing: the writer's, retention's and a rebuild's.
/// The database must exist: [`Store::open`](crate::history::Store::open) has
/// created, migrated and put it in WAL mode.
pub fn connect(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
    conn.busy_handler(Some(wait_a_millisecond))?;
    // Per connection, as the pool's are: the log is written, not synced, at each commit.
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    // Attempts are written in the same transaction as their request, so the
    // parent lookup per attempt would only cost; retention deletes a
    // request's attempts itself.
    conn.pragma_update(None, "foreign_keys", "OFF")?;
    Ok(conn)
}

/// While another connection writes (retention between its short batches),
/// retries every millisecond for about five seconds. SQLite's own timeout
/// sleeps longer and longer between tries, up to 100 ms, so a writer that
/// has waited a few times keeps sleeping through the gaps retention leaves.
fn wait_a_millisecond(tries: i32) -> bool {
    std::thread::sleep(Duration::from_millis(1));
    tries < 5000
}

/// Whether the row was new.
fn insert_request(statement: &mut rusqlite::CachedStatement<'_>, r: &RequestRecord) -> rusqlite::Result<bool> {
    let [input, output, cached] = r.usage.columns();
    let inserted = statement.execute(params![
        r.id,
        r.correlation_id,
        r.started_at_ms,
        r.finished_at_ms,
        r.user_agent,
        r.endpoint,
        r.model,
        r.streamed,
        r.outcome.as_str(),
        r.status,
        r.provider,
        r.provider_model,
        r.attempts.len() as i64,
        r.fallback,
        r.duration_ms,
        r.ttft_ms,
        input,
        output,
        cached,
        r.cost_usd,
        r.error_code,
        r.error,
        r.request_body,
        r.response_body,
        r.cache.map(crate::ground::outcome::CacheStatus::as_str),
        r.saved_usd,
        r.instance,
        r.member,
        r.session,
        r.usage.cache_write_column(),
        r.turn,
        r.trace_id,
        r.device,
    ])?;
    Ok(inserted == 1)
}

/// What the record keeps beside an attempt, by its seq.
struct Sides<'a> {
    translation: Option<&'a AttemptTranslation>,
    dropped: Option<&'a AttemptDropped>,
    routing: Option<&'a AttemptRouting>,
}

fn insert_attempt(
    statement: &mut rusqlite::CachedStatement<'_>,
    request_id: &str,
    a: &AttemptRecord,
    sides: Sides<'_>,
) -> rusqlite::Result<()> {
    let Sides { translation, dropped, routing } = sides;
    let [input, output, cached] = a.usage.columns();
    statement.execute(params![
        request_id,
        a.seq,
        a.provider,
        a.key_label,
        a.model,
        a.reason.as_str(),
        a.fallback_from,
        a.started_at_ms,
        a.offset_ms,
        a.timeout_ms,
        a.backoff_ms,
        a.duration_ms,
        a.ttfb_ms,
        a.ttft_ms,
        a.status,
        a.outcome.as_str(),
        a.retry_after_ms,
        a.breaker_state,
        a.error,
        input,
        output,
        cached,
        translation.map(AttemptTranslation::column),
        dropped.and_then(|d| serde_json::to_string(&d.fields).ok()),
        routing.and_then(AttemptRouting::column),
        a.usage.cache_write_column(),
    ])?;
    Ok(())
}

fn insert_event(statement: &mut rusqlite::CachedStatement<'_>, e: &EventRecord) -> rusqlite::Result<()> {
    statement.execute(params![e.at_ms, e.kind, e.provider, e.detail, e.request_id])?;
    Ok(())
}

/// Prepared only when a batch holds a capture: a batch without one pays nothing.
fn insert_capture(tx: &rusqlite::Transaction<'_>, c: &CaptureRecord) -> rusqlite::Result<()> {
    tx.prepare_cached(INSERT_CAPTURE)?.execute(params![c.request_id, c.started_at_ms, c.replay_of, c.data])?;
    Ok(())
}
