//! Cached answers in SQLite: a file of their own beside the history
//! (`switchyard.cache.db` next to `switchyard.db`), owner-only like it.
//!
//! Why not a table in the history database: history's retention keeps that
//! file under its size cap by deleting the oldest requests, so cached
//! answers there would push the record out (and the cache's own cap could
//! not be told apart from it); SQLite has one writer per file, so cache
//! writes (an answer stored, a hit's last-use time) would queue behind the
//! history writer's batches and retention's deletes; and a cache can be
//! thrown away whole: a damaged file, or one of another schema version, is
//! deleted and made again without touching the record, so the cache needs
//! no migrations. The file is created owner-only before SQLite opens it
//! (its `-wal` and `-shm` take its mode), as [`crate::private`] does for
//! the history, and `secure_delete` is on, so an evicted or purged answer
//! is overwritten, not left in free pages.
//!
//! Reads run on the blocking pool, on a few pooled connections (WAL lets
//! them read while the writer writes). Writes go to one thread of their own
//! over a bounded queue, batched into one transaction per [`LINGER`]: at
//! c=1 each miss was otherwise a commit (a log write) and a wake-up of the
//! thread of its own, and nothing waits on a store but a later hit. Bodies of [`RAW_BELOW`] bytes and more
//! are compressed there (zlib, whose checksum catches a damaged body, with
//! one compressor kept for the thread's life); smaller ones are stored as
//! they are with a CRC-32, because deflate must clear some 160 KiB of
//! tables for each body, which costs more than a short answer saves. The size
//! cap is kept there by evicting the least recently used entries, and hits'
//! last-use times are applied there. A full queue drops the write (it is
//! counted): unlike the history, a cache entry not written costs only a
//! later miss.
//!
//! An in-memory index maps each key's first eight bytes to its newest
//! entry's creation time, row id, last use and size: it answers most
//! misses without touching SQLite at all, a hit reads its row by id, and
//! eviction takes its order from it. SQLite keeps no index but the row
//! ids: a key is a uniformly random 32 bytes, so each new entry in an index
//! of keys lands on a page of its own, and every store paid for that
//! page's write to the log (most of a store's cost once the cache holds a
//! few thousand answers); an index of last-use times was another B-tree
//! entry per store. Rows are appended in id order instead.
//! The row's `key` column is checked on every read, so an index entry that
//! has gone stale (a purge from outside, a row id used again, two keys
//! sharing a prefix) is a miss, never another question's answer.
//!
//! A row that cannot be read back (its body does not inflate, or not to
//! its recorded size, or its form is unknown) is skipped and deleted; it is
//! a miss, never an error.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use rusqlite::{params, Connection, OpenFlags, OptionalExtension, Transaction, TransactionBehavior};
use tokio::sync::{mpsc, oneshot};
use tracing::{debug, warn};

use super::key::CacheKey;
use super::metrics::CacheCounters;
use crate::protocol::Usage;

/// The schema this code reads and writes; a file of another is made again.
const SCHEMA_VERSION: i64 = 3;

const SCHEMA: &str = "
CREATE TABLE entries (
    id            INTEGER PRIMARY KEY,
    key           BLOB NOT NULL,
    created_at    INTEGER NOT NULL,
    last_used_at  INTEGER NOT NULL,
    endpoint      TEXT NOT NULL,
    model         TEXT NOT NULL,
    provider      TEXT,
    status        INTEGER NOT NULL,
    content_type  TEXT NOT NULL,
    form          TEXT NOT NULL,
    encoding      TEXT NOT NULL,
    checksum      INTEGER,
    body          BLOB NOT NULL,
    raw_size      INTEGER NOT NULL,
    size          INTEGER NOT NULL,
    input_tokens  INTEGER,
    output_tokens INTEGER,
    cached_tokens INTEGER,
    cost_usd      REAL
);
";

/// Bytes a row costs besides its compressed body (key, columns, index entries).
const ROW_OVERHEAD: u64 = 160;
/// Bodies shorter than this are stored uncompressed (with a CRC-32 in
/// `checksum`): deflating a few hundred bytes saves less than a kilobyte
/// and costs a clear of the compressor's tables, the largest part of a miss.
const RAW_BELOW: usize = 2048;
/// Jobs queued for the writer before writes are dropped.
const QUEUE: usize = 1024;
/// Jobs written in one transaction at most.
const MAX_BATCH: usize = 256;
/// How long the writer lets jobs gather before a transaction. A flush or a
/// purge cuts it short; an answer lingering here is found in the index's
/// waiting copies meanwhile.
pub const LINGER: Duration = Duration::from_millis(20);
/// Idle read connections kept.
const READERS: usize = 4;
/// Evicting stops this far under the cap, so that a full cache does not
/// evict on every store.
const EVICT_TO: f64 = 0.9;

#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("response cache {path}: {source}")]
    Open { path: String, source: rusqlite::Error },
    #[error("cannot make the response cache file {path} owner-only: {source}")]
    Private { path: String, source: std::io::Error },
    #[error("response cache: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("cannot start the response cache writer: {0}")]
    Writer(std::io::Error),
    #[error("the response cache has stopped")]
    Stopped,
}

/// How an answer was stored: as the provider sent it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// A whole JSON body.
    Json,
    /// An event stream, byte for byte.
    Sse,
}

impl Form {
    pub fn as_str(self) -> &'static str {
        match self {
            Form::Json => "json",
            Form::Sse => "sse",
        }
    }

    fn parse(s: &str) -> Option<Form> {
        match s {
            "json" => Some(Form::Json),
            "sse" => Some(Form::Sse),
            _ => None,
        }
    }
}

/// How a body is kept in its row (`entries.encoding`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoding {
    /// A zlib stream, whose own checksum catches damage.
    Zlib,
    /// As it is, with a CRC-32 in `checksum`.
    Raw,
}

impl Encoding {
    fn as_str(self) -> &'static str {
        match self {
            Encoding::Zlib => "zlib",
            Encoding::Raw => "raw",
        }
    }

    fn parse(s: &str) -> Option<Encoding> {
        match s {
            "zlib" => Some(Encoding::Zlib),
            "raw" => Some(Encoding::Raw),
            _ => None,
        }
    }
}

/// A stored answer. Its `Debug` shows the body's length, never the body:
/// the answer is as sensitive as the prompt.
#[derive(Clone, PartialEq)]
pub struct Entry {
    /// The gateway path it answered (`/v1/chat/completions`...).
    pub endpoint: String,
    /// The model the client asked for.
    pub model: String,
    /// The provider that answered it first.
    pub provider: Option<String>,
    pub status: u16,
    pub content_type: String,
    pub form: Form,
    /// Uncompressed.
    pub body: Bytes,
    pub usage: Usage,
    /// What the first answer cost: what each hit saves.
    pub cost_usd: Option<f64>,
    /// Unix milliseconds.
    pub created_at_ms: i64,
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("endpoint", &self.endpoint)
            .field("model", &self.model)
            .field("provider", &self.provider)
            .field("status", &self.status)
            .field("form", &self.form)
            .field("body_bytes", &self.body.len())
            .field("usage", &self.usage)
            .field("created_at_ms", &self.created_at_ms)
            .finish_non_exhaustive()
    }
}

/// How long entries are served: fresh for `ttl`, then as a last resort
/// (stale) for `stale` more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lifetime {
    pub ttl: Duration,
    pub stale: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    Fresh,
    /// Past its `ttl`, within `ttl + stale`: served only when the chain fails.
    Stale,
}

/// An entry found, with how old it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub entry: Entry,
    pub age: Duration,
    pub freshness: Freshness,
}

/// The store's size settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Stored bytes (compressed bodies and a per-row overhead) kept under this.
    pub max_bytes: u64,
    /// A larger answer (uncompressed) is not stored.
    pub max_entry_bytes: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { max_bytes: 64 * 1024 * 1024, max_entry_bytes: 4 * 1024 * 1024 }
    }
}

/// The cache file that goes with the history database at `history`.
pub fn path_beside(history: &Path) -> PathBuf {
    history.with_extension("cache.db")
}

enum Job {
    Put(CacheKey, Box<Entry>),
    /// A hit on the row with this id (and key) at this time.
    Touch(i64, CacheKey, i64),
    /// A damaged row.
    Delete(i64, CacheKey),
    Purge(oneshot::Sender<Result<u64, CacheError>>),
    Flush(oneshot::Sender<()>),
}

/// What the in-memory index knows of the newest entry under a key prefix.
/// Ordered by creation time, then row: of two, the newer is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Slot {
    /// Unix milliseconds: a lookup for anything older misses at once.
    created_at: i64,
    /// Its row, once written; `None` while its write is still queued.
    row: Option<i64>,
    /// Unix milliseconds of its last hit (its creation before one): the
    /// order eviction follows. Kept here rather than in an index of the
    /// table, which every store would pay for; the row's `last_used_at`
    /// keeps it across restarts.
    last_used_at: i64,
    /// The row's `size`.
    size: i64,
}

impl Slot {
    fn queued(created_at: i64) -> Slot {
        Slot { created_at, row: None, last_used_at: created_at, size: 0 }
    }
}

/// Key prefixes to their newest entries: shared by the store's handles
/// and its writer, which keeps the row ids. Answers stored but not yet
/// written wait in `pending`, where a lookup finds them at once: a repeat
/// right after an answer is a hit, not a miss for the writer's [`LINGER`].
#[derive(Debug, Default)]
struct Index {
    slots: Mutex<HashMap<u64, Slot>>,
    /// Bounded by the writer's queue ([`QUEUE`] answers of at most
    /// [`Limits::max_entry_bytes`] each).
    pending: Mutex<HashMap<CacheKey, Entry>>,
}

impl Index {
    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Slot>> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn pending(&self) -> MutexGuard<'_, HashMap<CacheKey, Entry>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Lets go of the waiting copy of `key`'s answer once the answer of
    /// `created_at` (or a newer one) is written, or will never be.
    fn settle_pending(&self, key: &CacheKey, created_at: i64) {
        let mut pending = self.pending();
        if pending.get(key).is_some_and(|e| e.created_at_ms <= created_at) {
            pending.remove(key);
        }
    }

    /// Forgets the slots of `prefixes` whose answer was never written (its
    /// write dropped or failed), which nothing would look at again.
    fn forget_unwritten(&self, prefixes: impl IntoIterator<Item = u64>) {
        let mut index = self.lock();
        for prefix in prefixes {
            if index.get(&prefix).is_some_and(|s| s.row.is_none()) {
                index.remove(&prefix);
            }
        }
    }
}

/// The response cache's database; cheap to clone.
#[derive(Debug, Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    limits: Limits,
    index: Arc<Index>,
    readers: Mutex<Vec<Connection>>,
    jobs: mpsc::Sender<Job>,
    /// The writer thread, unparked to cut its linger short.
    writer: OnceLock<std::thread::Thread>,
    counters: Arc<CacheCounters>,
    /// Keys being filled by a request now: one upstream call for each.
    flights: super::shared::Flights,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).field("limits", &self.limits).finish_non_exhaustive()
    }
}

impl Store {
    /// Opens (creating, or making again if unreadable or of another
    /// version) the cache at `path` and starts its writer.
    pub async fn open(path: &Path, limits: Limits, counters: Arc<CacheCounters>) -> Result<Store, CacheError> {
        let owned = path.to_path_buf();
        let (conn, index, stored) = tokio::task::spawn_blocking(move || prepare(&owned))
            .await
            .map_err(|e| CacheError::Writer(std::io::Error::other(e.to_string())))??;
        counters.entries.store(index.len() as u64, Ordering::Relaxed);
        counters.bytes.store(stored, Ordering::Relaxed);
        let (jobs, queue) = mpsc::channel(QUEUE);
        let index = Arc::new(Index { slots: Mutex::new(index), pending: Mutex::default() });
        let inner = Arc::new(Inner {
            path: path.to_path_buf(),
            limits,
            index: index.clone(),
            readers: Mutex::new(Vec::new()),
            jobs,
            writer: OnceLock::new(),
            counters: counters.clone(),
            flights: Default::default(),
        });
        let writer = Writer {
            conn,
            stored,
            limits,
            counters,
            index,
            deflate: flate2::Compress::new(flate2::Compression::default(), true),
        };
        let thread = std::thread::Builder::new()
            .name("switchyard-cache".into())
            .spawn(move || writer.run(queue))
            .map_err(CacheError::Writer)?;
        let _ = inner.writer.set(thread.thread().clone());
        Ok(Store { inner })
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    pub fn limits(&self) -> Limits {
        self.inner.limits
    }

    pub fn counters(&self) -> &Arc<CacheCounters> {
        &self.inner.counters
    }

    /// The keys requests are filling now (single flight).
    pub fn flights(&self) -> &super::shared::Flights {
        &self.inner.flights
    }

    fn index(&self) -> MutexGuard<'_, HashMap<u64, Slot>> {
        self.inner.index.lock()
    }

    /// The entry for `key` if it is younger than `ttl + stale` at `now_ms`
    /// (Unix milliseconds). A hit's last-use time is updated, later.
    /// Counts nothing: what a lookup means (hit, stale, miss) is the
    /// caller's to say, since a stale entry is served only if the chain fails.
    pub async fn get(&self, key: &CacheKey, now_ms: i64, lifetime: Lifetime) -> Option<Hit> {
        let oldest = now_ms.saturating_sub(millis(lifetime.ttl.saturating_add(lifetime.stale)));
        let waiting = self.inner.index.pending().get(key).cloned();
        if let Some(entry) = waiting.filter(|e| e.created_at_ms >= oldest) {
            return Some(hit(entry, now_ms, lifetime));
        }
        // The index holds the newest creation time of any key with this
        // prefix: absent or too old here is absent or too old in SQLite.
        // An entry not written yet is not found either.
        let row = match self.index().get(&key.prefix()) {
            Some(Slot { created_at, row: Some(row), .. }) if *created_at >= oldest => *row,
            _ => return None,
        };
        let this = self.clone();
        let k = *key;
        let read = tokio::task::spawn_blocking(move || this.read(row, &k)).await;
        let entry = match read {
            Ok(Ok(Lookup::Found(entry))) => entry,
            // Another key's answer: one that shares the prefix (its slot),
            // or one whose row took the id after a purge from outside.
            Ok(Ok(Lookup::Other)) => return None,
            Ok(Ok(Lookup::Gone)) => {
                // Gone from SQLite (purged from outside, damaged): forget
                // it, unless a newer write has taken the slot since.
                let mut index = self.index();
                if index.get(&key.prefix()).is_some_and(|s| s.row == Some(row)) {
                    index.remove(&key.prefix());
                }
                return None;
            }
            Ok(Err(e)) => {
                warn!("response cache read failed: {e}");
                return None;
            }
            Err(e) => {
                warn!("response cache read stopped: {e}");
                return None;
            }
        };
        if entry.created_at_ms < oldest {
            return None;
        }
        if let Some(slot) = self.index().get_mut(&key.prefix()).filter(|s| s.row == Some(row)) {
            slot.last_used_at = slot.last_used_at.max(now_ms);
        }
        self.send(Job::Touch(row, *key, now_ms));
        Some(hit(entry, now_ms, lifetime))
    }

    /// Stores an answer (replacing any under the same key), later and off
    /// the runtime. One larger than [`Limits::max_entry_bytes`] is not stored.
    pub fn put(&self, key: CacheKey, entry: Entry) {
        if entry.body.len() > self.inner.limits.max_entry_bytes {
            debug!(size = entry.body.len(), "answer too large to cache");
            return;
        }
        // The row (an older answer's, if any) stays found until the writer
        // has written this one in its place.
        self.index()
            .entry(key.prefix())
            .and_modify(|s| s.created_at = s.created_at.max(entry.created_at_ms))
            .or_insert(Slot::queued(entry.created_at_ms));
        let created_at = entry.created_at_ms;
        self.inner.index.pending().insert(key, entry.clone());
        if !self.send(Job::Put(key, Box::new(entry))) {
            self.inner.index.forget_unwritten([key.prefix()]);
            self.inner.index.settle_pending(&key, created_at);
        }
    }

    /// Deletes every entry, overwriting their pages. Returns how many.
    pub async fn purge(&self) -> Result<u64, CacheError> {
        let (tx, rx) = oneshot::channel();
        if self.inner.jobs.send(Job::Purge(tx)).await.is_err() {
            return Err(CacheError::Stopped);
        }
        self.wake_writer();
        rx.await.map_err(|_| CacheError::Stopped)?
    }

    /// Waits until every write queued so far is done.
    pub async fn flush(&self) {
        let (tx, rx) = oneshot::channel();
        if self.inner.jobs.send(Job::Flush(tx)).await.is_ok() {
            self.wake_writer();
            let _ = rx.await;
        }
    }

    fn wake_writer(&self) {
        if let Some(writer) = self.inner.writer.get() {
            writer.unpark();
        }
    }

    /// Waits for queued writes; the writer ends once every handle is gone.
    pub async fn close(self) {
        self.flush().await;
    }

    /// Queues `job` for the writer; whether it was (a full queue drops it).
    fn send(&self, job: Job) -> bool {
        let sent = self.inner.jobs.try_send(job).is_ok();
        if !sent {
            self.inner.counters.dropped_writes.fetch_add(1, Ordering::Relaxed);
        }
        sent
    }

    /// Reads and inflates the entry for `key` in row `id`; a damaged one is
    /// deleted and missed.
    fn read(&self, id: i64, key: &CacheKey) -> Result<Lookup, CacheError> {
        let conn = self.reader()?;
        let row = select(&conn, id);
        self.give_back(conn);
        let Some(row) = row? else {
            return Ok(Lookup::Gone);
        };
        if row.key != key.0 {
            return Ok(Lookup::Other);
        }
        match row.inflate() {
            Ok(entry) => Ok(Lookup::Found(entry)),
            Err(why) => {
                warn!(key = ?key, "response cache entry unreadable ({why}): deleted");
                self.inner.counters.corrupt.fetch_add(1, Ordering::Relaxed);
                self.send(Job::Delete(id, *key));
                Ok(Lookup::Gone)
            }
        }
    }

    fn reader(&self) -> Result<Connection, CacheError> {
        let pooled = self.inner.readers.lock().unwrap_or_else(|p| p.into_inner()).pop();
        match pooled {
            Some(conn) => Ok(conn),
            None => Ok(connect(&self.inner.path)?),
        }
    }

    fn give_back(&self, conn: Connection) {
        let mut readers = self.inner.readers.lock().unwrap_or_else(|p| p.into_inner());
        if readers.len() < READERS {
            readers.push(conn);
        }
    }
}

/// `entry` as found at `now_ms`: fresh within the `ttl`, stale after.
fn hit(entry: Entry, now_ms: i64, lifetime: Lifetime) -> Hit {
    let age_ms = now_ms.saturating_sub(entry.created_at_ms).max(0);
    let freshness = if age_ms <= millis(lifetime.ttl) { Freshness::Fresh } else { Freshness::Stale };
    Hit { entry, age: Duration::from_millis(age_ms as u64), freshness }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Deletes every entry of the cache file at `path`, if there is one, from
/// outside the gateway (`switchyard history purge`). A gateway running on
/// the same file misses what was deleted from then on.
pub fn purge_file(path: &Path) -> Result<u64, CacheError> {
    if !path.exists() {
        return Ok(0);
    }
    let conn = connect(path)?;
    let has_table: bool = conn
        .query_row("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'entries'", [], |_| Ok(true))
        .optional()?
        .unwrap_or(false);
    if !has_table {
        return Ok(0);
    }
    purge_all(&conn)
}

fn purge_all(conn: &Connection) -> Result<u64, CacheError> {
    let n = conn.execute("DELETE FROM entries", [])? as u64;
    // The deleted pages are zeroed (secure_delete); a checkpoint takes the
    // log's copies out too, and the free pages go back to the file system.
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
    conn.execute_batch("PRAGMA incremental_vacuum")?;
    Ok(n)
}

/// A connection with the cache's settings. The file must exist.
fn connect(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
    conn.busy_timeout(Duration::from_secs(5))?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "secure_delete", "ON")?;
    Ok(conn)
}

/// Opens the file (making it again if it cannot be used), and reads the
/// index and the bytes stored.
fn prepare(path: &Path) -> Result<(Connection, HashMap<u64, Slot>, u64), CacheError> {
    match open_file(path) {
        Ok(opened) => Ok(opened),
        Err(e) => {
            warn!("response cache {} cannot be used ({e}); starting it afresh", path.display());
            for file in crate::private::database_files(path) {
                let _ = std::fs::remove_file(file);
            }
            open_file(path)
        }
    }
}

fn open_file(path: &Path) -> Result<(Connection, HashMap<u64, Slot>, u64), CacheError> {
    let open_err = |source| CacheError::Open { path: path.display().to_string(), source };
    crate::private::database(path)
        .map_err(|(file, source)| CacheError::Private { path: file.display().to_string(), source })?;
    let conn = connect(path).map_err(open_err)?;
    // Before any table exists, or it has no effect.
    conn.pragma_update(None, "auto_vacuum", "INCREMENTAL").map_err(open_err)?;
    conn.pragma_update(None, "journal_mode", "WAL").map_err(open_err)?;
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0)).map_err(open_err)?;
    if version != SCHEMA_VERSION {
        conn.execute_batch("DROP TABLE IF EXISTS entries").map_err(open_err)?;
        conn.execute_batch(SCHEMA).map_err(open_err)?;
        conn.pragma_update(None, "user_version", SCHEMA_VERSION).map_err(open_err)?;
    }
    let mut index = HashMap::new();
    let mut stored = 0u64;
    {
        let mut rows = conn.prepare("SELECT id, key, created_at, last_used_at, size FROM entries").map_err(open_err)?;
        let mut rows = rows.query([]).map_err(open_err)?;
        while let Some(row) = rows.next().map_err(open_err)? {
            let id: i64 = row.get(0).map_err(open_err)?;
            let key: Vec<u8> = row.get(1).map_err(open_err)?;
            let created: i64 = row.get(2).map_err(open_err)?;
            let last_used_at: i64 = row.get(3).map_err(open_err)?;
            let size: i64 = row.get(4).map_err(open_err)?;
            if let Ok(k) = <[u8; 32]>::try_from(key.as_slice()) {
                // Of two rows under one prefix, the newer is the one found.
                let slot = Slot { created_at: created, row: Some(id), last_used_at, size };
                index.entry(CacheKey(k).prefix()).and_modify(|s: &mut Slot| *s = (*s).max(slot)).or_insert(slot);
            }
            stored += size.max(0) as u64;
        }
    }
    Ok((conn, index, stored))
}

/// What a row id held for a key. Returned once and matched at once, so
/// the entry is not boxed (that would be an allocation per hit).
#[allow(clippy::large_enum_variant)]
enum Lookup {
    Found(Entry),
    /// No such row, or a damaged one (deleted).
    Gone,
    /// Another key's row.
    Other,
}

/// A row as stored, body still compressed.
struct Row {
    key: Vec<u8>,
    endpoint: String,
    model: String,
    provider: Option<String>,
    status: i64,
    content_type: String,
    form: String,
    encoding: String,
    checksum: Option<i64>,
    body: Vec<u8>,
    raw_size: i64,
    usage: [Option<i64>; 3],
    cost_usd: Option<f64>,
    created_at: i64,
}

fn select(conn: &Connection, id: i64) -> rusqlite::Result<Option<Row>> {
    let mut statement = conn.prepare_cached(
        "SELECT endpoint, model, provider, status, content_type, form, body, raw_size,
                input_tokens, output_tokens, cached_tokens, cost_usd, created_at, encoding, checksum, key
         FROM entries WHERE id = ?1",
    )?;
    statement
        .query_row([id], |r| {
            Ok(Row {
                endpoint: r.get(0)?,
                model: r.get(1)?,
                provider: r.get(2)?,
                status: r.get(3)?,
                content_type: r.get(4)?,
                form: r.get(5)?,
                body: r.get(6)?,
                raw_size: r.get(7)?,
                usage: [r.get(8)?, r.get(9)?, r.get(10)?],
                cost_usd: r.get(11)?,
                created_at: r.get(12)?,
                encoding: r.get(13)?,
                checksum: r.get(14)?,
                key: r.get(15)?,
            })
        })
        .optional()
}

impl Row {
    fn inflate(self) -> Result<Entry, &'static str> {
        let form = Form::parse(&self.form).ok_or("unknown form")?;
        let status = u16::try_from(self.status).map_err(|_| "bad status")?;
        let raw_size = usize::try_from(self.raw_size).map_err(|_| "bad size")?;
        let body = match Encoding::parse(&self.encoding).ok_or("unknown encoding")? {
            Encoding::Zlib => inflate(&self.body, raw_size)?,
            Encoding::Raw if self.body.len() != raw_size => return Err("body of the wrong size"),
            Encoding::Raw if self.checksum != Some(checksum(&self.body)) => {
                return Err("body does not match its checksum")
            }
            Encoding::Raw => self.body,
        };
        Ok(Entry {
            endpoint: self.endpoint,
            model: self.model,
            provider: self.provider,
            status,
            content_type: self.content_type,
            form,
            body: Bytes::from(body),
            usage: Usage::from_columns(self.usage),
            cost_usd: self.cost_usd,
            created_at_ms: self.created_at,
        })
    }
}

fn inflate(stored: &[u8], raw_size: usize) -> Result<Vec<u8>, &'static str> {
    let mut body = Vec::with_capacity(raw_size.min(64 * 1024 * 1024));
    // One byte more than recorded: a longer body is damage too.
    match flate2::read::ZlibDecoder::new(stored).take(raw_size as u64 + 1).read_to_end(&mut body) {
        Ok(n) if n == raw_size => Ok(body),
        Ok(_) => Err("body of the wrong size"),
        Err(_) => Err("body does not inflate"),
    }
}

/// A body as stored, and how.
fn encode(deflate: &mut flate2::Compress, body: &[u8]) -> Result<(Vec<u8>, Encoding), flate2::CompressError> {
    if body.len() < RAW_BELOW {
        return Ok((body.to_vec(), Encoding::Raw));
    }
    Ok((compress(deflate, body)?, Encoding::Zlib))
}

/// A raw body's `checksum` column.
fn checksum(body: &[u8]) -> i64 {
    i64::from(crc32fast::hash(body))
}

/// The thread that writes.
struct Writer {
    conn: Connection,
    /// Bytes stored, as the size column sums them.
    stored: u64,
    limits: Limits,
    counters: Arc<CacheCounters>,
    /// Where written rows are found, and evicted ones forgotten.
    index: Arc<Index>,
    /// Reset for each body.
    deflate: flate2::Compress,
}

impl Writer {
    fn run(mut self, mut queue: mpsc::Receiver<Job>) {
        let mut jobs = Vec::with_capacity(MAX_BATCH);
        let urgent = |job: &Job| matches!(job, Job::Flush(_) | Job::Purge(_));
        while crate::ground::batch::gather(&mut queue, &mut jobs, MAX_BATCH, LINGER, urgent, || false) {
            self.batch(&mut jobs);
        }
    }

    fn batch(&mut self, jobs: &mut Vec<Job>) {
        let mut acks = Vec::new();
        let mut writes = Vec::new();
        for job in jobs.drain(..) {
            match job {
                Job::Flush(ack) => acks.push(ack),
                Job::Purge(reply) => {
                    // Writes queued before the purge are written, then deleted with the rest.
                    self.write(std::mem::take(&mut writes));
                    let _ = reply.send(self.purge());
                }
                other => writes.push(other),
            }
        }
        self.write(writes);
        for ack in acks {
            let _ = ack.send(());
        }
    }

    fn purge(&mut self) -> Result<u64, CacheError> {
        let n = purge_all(&self.conn)?;
        self.stored = 0;
        self.index.lock().clear();
        self.index.pending().clear();
        self.counters.entries.store(0, Ordering::Relaxed);
        self.counters.bytes.store(0, Ordering::Relaxed);
        Ok(n)
    }

    fn write(&mut self, jobs: Vec<Job>) {
        if jobs.is_empty() {
            return;
        }
        let puts: Vec<(CacheKey, i64)> = jobs
            .iter()
            .filter_map(|j| if let Job::Put(key, entry) = j { Some((*key, entry.created_at_ms)) } else { None })
            .collect();
        let result = self.try_write(jobs);
        // Written (found in SQLite from now on) or not written at all: the
        // waiting copies of this batch's answers go either way.
        for (key, created_at) in &puts {
            self.index.settle_pending(key, *created_at);
        }
        if let Err(e) = result {
            warn!("response cache write failed: {e}");
            // This batch's new answers are not stored. Every unwritten slot
            // goes, not only theirs: one still queued is made again when
            // its answer is written, and it found nothing until then anyway.
            self.index.lock().retain(|_, s| s.row.is_some());
        }
        if self.stored > self.limits.max_bytes {
            if let Err(e) = self.evict() {
                warn!("response cache eviction failed: {e}");
            }
        }
    }

    fn try_write(&mut self, jobs: Vec<Job>) -> Result<(), CacheError> {
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        // Bytes and entries added, and answers stored, counted once committed.
        let (mut delta, mut entries, mut stores): (i64, i64, u64) = (0, 0, 0);
        // Rows written, for the index once they are committed.
        let mut written: Vec<(CacheKey, Slot)> = Vec::new();
        let mut unencoded = Vec::new();
        {
            let mut insert = tx.prepare_cached(
                "INSERT INTO entries (key, created_at, last_used_at, endpoint, model, provider, status,
                    content_type, form, body, raw_size, size, input_tokens, output_tokens, cached_tokens, cost_usd,
                    encoding, checksum)
                 VALUES (?1, ?2, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
            )?;
            let mut touch = tx
                .prepare_cached("UPDATE entries SET last_used_at = max(last_used_at, ?3) WHERE id = ?1 AND key = ?2")?;
            let mut delete = tx.prepare_cached("DELETE FROM entries WHERE id = ?1 AND key = ?2 RETURNING size")?;
            for job in jobs {
                match job {
                    Job::Put(key, entry) => {
                        let Ok((body, encoding)) = encode(&mut self.deflate, &entry.body) else {
                            unencoded.push(key.prefix());
                            continue;
                        };
                        // The answer stored before under this key, if the
                        // index still finds it (a refresh, or two misses of
                        // one question), goes: one row per key.
                        let before = written
                            .iter()
                            .rev()
                            .find(|(k, _)| k.prefix() == key.prefix())
                            .and_then(|(_, slot)| slot.row)
                            .or_else(|| self.index.lock().get(&key.prefix()).and_then(|s| s.row));
                        if let Some(id) = before {
                            if let Some(old) =
                                delete.query_row(params![id, &key.0[..]], |r| r.get::<_, i64>(0)).optional()?
                            {
                                delta -= old;
                                entries -= 1;
                            }
                        }
                        let size = body.len() as i64 + ROW_OVERHEAD as i64;
                        let [input, output, cached] = entry.usage.columns();
                        let crc = (encoding == Encoding::Raw).then(|| checksum(&body));
                        insert.execute(params![
                            &key.0[..],
                            entry.created_at_ms,
                            entry.endpoint,
                            entry.model,
                            entry.provider,
                            i64::from(entry.status),
                            entry.content_type,
                            entry.form.as_str(),
                            body,
                            entry.body.len() as i64,
                            size,
                            input,
                            output,
                            cached,
                            entry.cost_usd,
                            encoding.as_str(),
                            crc,
                        ])?;
                        let row = Some(tx.last_insert_rowid());
                        let at = entry.created_at_ms;
                        written.push((key, Slot { created_at: at, row, last_used_at: at, size }));
                        delta += size;
                        entries += 1;
                        stores += 1;
                    }
                    Job::Touch(id, key, at) => {
                        touch.execute(params![id, &key.0[..], at])?;
                    }
                    Job::Delete(id, key) => {
                        if let Some(old) =
                            delete.query_row(params![id, &key.0[..]], |r| r.get::<_, i64>(0)).optional()?
                        {
                            delta -= old;
                            entries -= 1;
                        }
                    }
                    Job::Purge(_) | Job::Flush(_) => {}
                }
            }
        }
        tx.commit()?;
        self.stored = (self.stored as i64 + delta).max(0) as u64;
        self.counters.bytes.store(self.stored, Ordering::Relaxed);
        self.counters.stores.fetch_add(stores, Ordering::Relaxed);
        let counted = self.counters.entries.load(Ordering::Relaxed) as i64;
        self.counters.entries.store((counted + entries).max(0) as u64, Ordering::Relaxed);
        self.index.forget_unwritten(unencoded);
        // Found from now on: committed, so a reader sees the row.
        let mut index = self.index.lock();
        for (key, slot) in written {
            index
                .entry(key.prefix())
                .and_modify(|s| {
                    s.row = slot.row;
                    s.size = slot.size;
                    s.last_used_at = s.last_used_at.max(slot.last_used_at);
                })
                .or_insert(slot);
        }
        Ok(())
    }

    /// Deletes the least recently used entries until the store is under
    /// [`EVICT_TO`] of its cap, in the order the index keeps.
    fn evict(&mut self) -> Result<(), CacheError> {
        let target = (self.limits.max_bytes as f64 * EVICT_TO) as u64;
        // Copied out, so lookups wait only for the copy, not the sort.
        let mut order: Vec<(i64, i64, i64, u64)> = self
            .index
            .lock()
            .iter()
            .filter_map(|(prefix, s)| s.row.map(|row| (s.last_used_at, s.created_at, row, *prefix)))
            .collect();
        order.sort_unstable();
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut eviction =
            Eviction { left: self.stored, target, recounted: false, evicted: Vec::new(), stale: Vec::new() };
        eviction.in_order(&tx, order.into_iter().map(|(_, _, row, prefix)| (row, prefix)))?;
        eviction.oldest_rows(&tx)?;
        tx.commit()?;
        self.stored = eviction.left;
        // Committed: what follows is bookkeeping, done whether or not the
        // free pages go back to the file system.
        if let Err(e) = self.conn.execute_batch("PRAGMA incremental_vacuum") {
            warn!("response cache: freeing evicted pages failed: {e}");
        }
        let mut index = self.index.lock();
        for (row, prefix) in eviction.evicted.iter().chain(&eviction.stale) {
            // Unless a newer answer under the prefix has the slot.
            if index.get(prefix).is_some_and(|s| s.row == Some(*row)) {
                index.remove(prefix);
            }
        }
        drop(index);
        let n = eviction.evicted.len() as u64;
        self.counters.evictions.fetch_add(n, Ordering::Relaxed);
        self.counters.entries.fetch_sub(n.min(self.counters.entries.load(Ordering::Relaxed)), Ordering::Relaxed);
        self.counters.bytes.store(self.stored, Ordering::Relaxed);
        debug!(evicted = n, "response cache kept under its cap");
        Ok(())
    }
}

/// One eviction's progress: bytes left, and the rows (id, key prefix) it
/// deleted or found gone.
struct Eviction {
    left: u64,
    target: u64,
    /// Whether `left` has been taken again from the rows.
    recounted: bool,
    evicted: Vec<(i64, u64)>,
    stale: Vec<(i64, u64)>,
}

impl Eviction {
    /// Deletes the index's entries in `order` until under the target. A
    /// row is deleted by its id and its key's first bytes: a slot gone
    /// stale (its row purged from outside, the id another key's since)
    /// deletes nothing, and then the count is suspect too (those rows'
    /// bytes are in it), so it is taken again from the rows before going on.
    fn in_order(&mut self, tx: &Transaction<'_>, order: impl Iterator<Item = (i64, u64)>) -> Result<(), CacheError> {
        let mut delete =
            tx.prepare_cached("DELETE FROM entries WHERE id = ?1 AND substr(key, 1, 8) = ?2 RETURNING size")?;
        for (row, prefix) in order {
            if self.left <= self.target {
                break;
            }
            let deleted = delete.query_row(params![row, &prefix.to_le_bytes()[..]], |r| r.get::<_, i64>(0));
            match deleted.optional()? {
                Some(size) => {
                    self.left = self.left.saturating_sub(size.max(0) as u64);
                    self.evicted.push((row, prefix));
                }
                None => {
                    self.stale.push((row, prefix));
                    self.recount(tx)?;
                }
            }
        }
        Ok(())
    }

    /// Still over: rows the index does not find (a key whose prefix
    /// another has taken) count too, so the oldest rows go, whoever they are.
    fn oldest_rows(&mut self, tx: &Transaction<'_>) -> Result<(), CacheError> {
        if self.left > self.target {
            self.recount(tx)?;
        }
        if self.left <= self.target {
            return Ok(());
        }
        let mut oldest = tx.prepare_cached("SELECT id, key, size FROM entries ORDER BY id")?;
        let mut delete = tx.prepare_cached("DELETE FROM entries WHERE id = ?1")?;
        let rows: Vec<(i64, Vec<u8>, i64)> =
            oldest.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?.collect::<Result<_, _>>()?;
        for (row, key, size) in rows {
            if self.left <= self.target {
                break;
            }
            delete.execute([row])?;
            self.left = self.left.saturating_sub(size.max(0) as u64);
            let prefix = <[u8; 32]>::try_from(key.as_slice()).map(|k| CacheKey(k).prefix()).unwrap_or_default();
            self.evicted.push((row, prefix));
        }
        Ok(())
    }

    /// `left` from the rows themselves, once.
    fn recount(&mut self, tx: &Transaction<'_>) -> Result<(), CacheError> {
        if !self.recounted {
            let sum: i64 = tx.query_row("SELECT COALESCE(SUM(size), 0) FROM entries", [], |r| r.get(0))?;
            self.left = sum.max(0) as u64;
            self.recounted = true;
        }
        Ok(())
    }
}

/// A zlib stream of `body`, from a compressor reused across bodies.
fn compress(deflate: &mut flate2::Compress, body: &[u8]) -> Result<Vec<u8>, flate2::CompressError> {
    deflate.reset();
    let mut out = Vec::with_capacity(body.len() / 2 + 64);
    loop {
        let read = usize::try_from(deflate.total_in()).unwrap_or(body.len()).min(body.len());
        match deflate.compress_vec(&body[read..], &mut out, flate2::FlushCompress::Finish)? {
            flate2::Status::StreamEnd => return Ok(out),
            // Out of room: the rest goes into more.
            flate2::Status::Ok | flate2::Status::BufError => out.reserve(out.capacity().max(64)),
        }
    }
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
