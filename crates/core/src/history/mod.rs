//! Every request and attempt on record.
//!
//! - [`record`]: what is kept.
//! - [`store`]: [`Store`], the one interface every reader and writer of
//!   the record goes through, whichever backend holds it.
//! - [`sqlite`] and [`pg`]: the two backends, SQLite (the default, a file
//!   beside the gateway) and PostgreSQL (a team's shared history), each a
//!   folder with its queries, its writer's connection and its retention.
//! - [`members`], [`sessions`], [`rows`]: the SQL both backends speak,
//!   expanded in each.
//! - [`writer`]: the batching writer and the [`Recorder`] that feeds it.
//! - [`derived`]: the rollups and facets kept with the rows.
//! - [`spend`]: the spend chart, summed from the rollups.
//! - [`spool`]: the append-only file that keeps completed requests across a crash.
//! - [`pricing`]: what tokens cost.
//! - [`copy`]: one history's requests into another.
//! - this file: [`History`], which owns the writer and prunes by age and
//!   size, and [`purge`], which deletes everything on record and what it is
//!   given to delete beside it.

pub mod copy;
pub(crate) mod derived;
mod members;
pub(crate) mod pg;
pub(crate) mod pricing;
pub(crate) mod record;
mod rows;
pub mod sessions;
pub(crate) mod spend;
pub(crate) mod spool;
pub(crate) mod sqlite;
pub(crate) mod store;
pub(crate) mod writer;

use std::path::Path;
use std::time::Duration;

use tokio::task::JoinHandle;
use tracing::{info, warn};

pub use crate::ground::clock::now_ms;
pub use crate::ground::outcome::{AttemptOutcome, Reason, RequestOutcome};
pub use record::{AttemptRecord, Record, RequestRecord};
pub use sessions::{SessionDetail, SessionFilter, SessionPage, SessionProvider, SessionSummary};
pub use store::{Client, CountTable, RequestDetail, RequestFilter, RequestSummary, Store, StoreError};
pub use writer::{HistoryStatus, Recorder};

use crate::config::HistoryConfig;

/// Records written per transaction when the spool is replayed at the start.
const REPLAY_BATCH: usize = 1024;
/// How often retention runs.
const PRUNE_EVERY: Duration = Duration::from_secs(600);

/// The history with its writer and pruner running.
#[derive(Debug)]
pub struct History {
    store: Store,
    recorder: Recorder,
    /// Resolves when the writer thread has drained the queue and ended.
    writer: tokio::sync::oneshot::Receiver<()>,
    pruner: JoinHandle<()>,
}

impl History {
    /// Opens the history `config` asks for (the PostgreSQL database its
    /// `url` names, else `<data dir>/switchyard.db` or any path; the spool
    /// lives beside `path` either way), puts in it what the spool kept from
    /// the last run, and starts the writer.
    pub async fn open(path: &Path, config: &HistoryConfig) -> Result<History, StoreError> {
        let store = Store::open_configured(path, config).await?;
        let spool_error = |source| StoreError::Spool { path: path.display().to_string(), source };
        let spool = match spool::Spool::open(path, config.spool_max_bytes).map_err(spool_error)? {
            Some(spool) => {
                replay(&store, &spool).await?;
                Some(spool)
            }
            None => {
                warn!(
                    "another Switchyard is recording to {}; this one records too, but without the spool: \
                     requests it completes in the last moments before a crash may be missing",
                    path.display()
                );
                None
            }
        };
        let (recorder, writer) = writer::spawn(store.clone(), spool, writer::LINGER)?;
        let pruner = tokio::spawn(prune_forever(store.clone(), config.clone()));
        Ok(History { store, recorder, writer, pruner })
    }

    pub fn recorder(&self) -> Recorder {
        self.recorder.clone()
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Waits (up to `grace`) for queued records to be written. Every other
    /// recorder (the gateway's) must have been dropped first.
    pub async fn close(self, grace: Duration) {
        let History { store, recorder, writer, pruner } = self;
        pruner.abort();
        drop(recorder);
        if tokio::time::timeout(grace, writer).await.is_err() {
            warn!("history writer did not finish within {}", humantime::format_duration(grace));
        }
        store.close().await;
    }
}

/// Puts what the spool kept from the last run into the database, a file at
/// a time and in batches, so a spool grown through an outage is never in
/// memory whole.
async fn replay(store: &Store, spool: &spool::Spool) -> Result<(), StoreError> {
    let spool_error = |source| StoreError::Spool { path: spool.path().display().to_string(), source };
    let (mut count, mut unreadable) = (0, 0);
    for segment in spool.backlog() {
        // A batch at a time: a file is never in memory whole.
        let mut reader = segment.reader().map_err(spool_error)?;
        while let Some(batch) = reader.batch(REPLAY_BATCH).map_err(spool_error)? {
            store.write(&batch).await?;
        }
        unreadable += reader.unreadable();
        count += reader.requests();
        spool.replayed(&segment).map_err(spool_error)?;
    }
    if unreadable > 0 {
        warn!("history spool: {unreadable} records cut short or damaged by a crash were skipped");
    }
    if count > 0 {
        info!("history: {count} requests recovered from the spool");
    }
    Ok(())
}

/// Applies retention once: by age, then by size.
pub async fn prune(store: &Store, config: &HistoryConfig) -> Result<u64, StoreError> {
    store.prune(config).await
}

/// What [`purge`] deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Purged {
    pub requests: u64,
    /// Answers deleted from the response cache beside the database.
    pub cached_answers: u64,
}

/// Deletes every request (with its attempts) and event on record, and
/// what `beside` deletes beside the database given its path (the response
/// cache's answers, [`crate::cache::purge_beside`], as sensitive as the
/// record): `switchyard history purge`. Safe while a gateway runs on the
/// same files: it finds nothing of what was deleted.
pub async fn purge<E>(store: &Store, beside: fn(&Path) -> Result<u64, E>) -> Result<Purged, StoreError>
where
    E: std::fmt::Display + Send + 'static,
{
    let requests = store.purge().await?;
    let db = store.path().to_path_buf();
    let cached_answers = tokio::task::spawn_blocking(move || beside(&db))
        .await
        .map_err(|e| StoreError::WriteTask(e.to_string()))?
        .map_err(|e| StoreError::Beside(e.to_string()))?;
    Ok(Purged { requests, cached_answers })
}

async fn prune_forever(store: Store, config: HistoryConfig) {
    let mut tick = tokio::time::interval(PRUNE_EVERY);
    loop {
        tick.tick().await;
        match prune(&store, &config).await {
            Ok(0) => {}
            Ok(n) => info!("history retention removed {n} requests"),
            Err(e) => warn!("history retention failed: {e}"),
        }
    }
}

/// Where history goes, shared by every request.
#[derive(Debug, Clone)]
pub struct Sink {
    pub recorder: Recorder,
    pub prices: std::sync::Arc<pricing::Prices>,
    /// Body bytes to keep per request, when bodies are stored.
    pub keep_bodies: Option<usize>,
}

#[cfg(test)]
pub(crate) mod tests {
    use super::record::RequestRecord;
    use super::*;
    use crate::ground::clock::now_ms;

    fn request(id: &str, started_at_ms: i64, body: Option<String>) -> Record {
        let r = record::sample_request(id);
        Record::Request(Box::new(RequestRecord {
            started_at_ms,
            finished_at_ms: started_at_ms,
            request_body: body,
            ..r
        }))
    }

    #[tokio::test]
    async fn retention_by_age_removes_old_requests_only() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("h.db")).await.unwrap();
        let day = 86_400_000;
        let now = now_ms();
        store.write(&[request("old", now - 40 * day, None), request("recent", now - day, None)]).await.unwrap();
        let config = HistoryConfig { retention: Duration::from_secs(30 * 86_400), ..HistoryConfig::default() };
        assert_eq!(prune(&store, &config).await.unwrap(), 1);
        assert!(store.request("old").await.unwrap().is_none());
        assert!(store.request("recent").await.unwrap().is_some());
        assert_eq!(store.integrity_check().await.unwrap(), "ok");
    }

    fn capture(id: &str, started_at_ms: i64) -> Record {
        Record::Capture(Box::new(record::CaptureRecord {
            request_id: id.to_string(),
            started_at_ms,
            replay_of: None,
            data: vec![1, 2, 3],
        }))
    }

    #[tokio::test]
    async fn retention_and_purge_take_captures_with_their_requests() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("h.db")).await.unwrap();
        let day = 86_400_000;
        let now = now_ms();
        let batch = [
            request("old", now - 40 * day, None),
            capture("old", now - 40 * day),
            request("recent", now - day, None),
            capture("recent", now - day),
        ];
        store.write(&batch).await.unwrap();
        assert_eq!(store.capture("old").await.unwrap().unwrap().data, [1, 2, 3]);
        let config = HistoryConfig { retention: Duration::from_secs(30 * 86_400), ..HistoryConfig::default() };
        assert_eq!(prune(&store, &config).await.unwrap(), 1);
        assert!(store.capture("old").await.unwrap().is_none(), "retention took the old request's capture");
        assert!(store.capture("recent").await.unwrap().is_some());
        purge(&store, crate::cache::purge_beside).await.unwrap();
        assert!(store.capture("recent").await.unwrap().is_none(), "a purge takes every capture");
    }

    /// A capture goes in the spool with its request: the process dies
    /// before the writer commits either, and the next start puts both in
    /// the store, once each even when the spool holds them twice (a replay
    /// cut short and run again).
    #[tokio::test]
    async fn a_spooled_capture_is_in_the_store_after_a_restart_once() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("h.db");
        let store = Store::open(&db).await.unwrap();
        let spool = spool::Spool::open(&db, crate::ground::limits::SPOOL_BYTES).unwrap().unwrap();
        // A linger no test waits out: nothing is committed.
        let (recorder, _) = writer::spawn(store.clone(), Some(spool), Duration::from_secs(600)).unwrap();
        let now = now_ms();
        recorder.complete_with(request("r", now, None), Some(capture("r", now))).await;
        assert!(store.capture("r").await.unwrap().is_none(), "not committed");
        // What a kill -9 now leaves beside the database, twice over.
        let spooled = std::fs::read(dir.path().join("h.db.spool")).unwrap();
        std::fs::write(dir.path().join("again.db.spool"), [spooled.clone(), spooled].concat()).unwrap();
        let history = History::open(&dir.path().join("again.db"), &HistoryConfig::default()).await.unwrap();
        let store = history.store();
        assert_eq!(store.capture("r").await.unwrap().unwrap().data, [1, 2, 3]);
        assert_eq!(store.count(CountTable::Captures).await.unwrap(), 1);
        assert_eq!(store.count(CountTable::Requests).await.unwrap(), 1);
        history.close(Duration::from_secs(5)).await;
    }

    /// A trace id as `traceparent` carries it.
    pub(crate) const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

    /// A request `traced` with [`TRACE_ID`], and `untraced` without one.
    pub(crate) fn traced_and_untraced(now: i64) -> [Record; 2] {
        let Record::Request(mut traced) = request("traced", now - 1000, None) else { unreachable!() };
        traced.trace_id = Some(TRACE_ID.to_string());
        [Record::Request(traced), request("untraced", now, None)]
    }

    /// What every reader gives back of [`traced_and_untraced`] in `store`:
    /// the detail shows the trace id, or null; the list's search finds the
    /// traced request by it, pasted in either case; a copy keeps it.
    pub(crate) async fn assert_trace_ids_read_back(store: &Store) {
        let traced = store.request("traced").await.unwrap().expect("the traced request is on record");
        assert_eq!(traced.trace_id.as_deref(), Some(TRACE_ID), "{}", store.backend());
        assert_eq!(serde_json::to_value(&traced).unwrap()["trace_id"], TRACE_ID, "the admin API's detail shows it");
        let untraced = store.request("untraced").await.unwrap().expect("the untraced request is on record");
        assert_eq!(untraced.trace_id, None);
        assert!(serde_json::to_value(&untraced).unwrap()["trace_id"].is_null());
        for pasted in [TRACE_ID.to_string(), TRACE_ID.to_uppercase(), format!(" {TRACE_ID}\n")] {
            let filter = RequestFilter { search: Some(pasted.clone()), ..RequestFilter::default() };
            let found: Vec<String> =
                store.requests(&filter).await.unwrap().requests.into_iter().map(|r| r.id).collect();
            assert_eq!(found, ["traced"], "search {pasted:?} on {}", store.backend());
        }
        assert_eq!(RequestRecord::from(traced).trace_id.as_deref(), Some(TRACE_ID), "a copy keeps it");
    }

    /// A trace id reaches the record as every request does: spooled, lost
    /// with the process before the writer committed it, and replayed at
    /// the next start; then read back by every reader.
    #[tokio::test]
    async fn a_trace_id_survives_the_spool_and_reads_back_from_sqlite() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("h.db");
        let store = Store::open(&db).await.unwrap();
        let spool = spool::Spool::open(&db, crate::ground::limits::SPOOL_BYTES).unwrap().unwrap();
        let (recorder, _) = writer::spawn(store.clone(), Some(spool), Duration::from_secs(600)).unwrap();
        let [traced, untraced] = traced_and_untraced(now_ms());
        recorder.complete(traced).await;
        let spooled = std::fs::read(dir.path().join("h.db.spool")).unwrap();
        std::fs::write(dir.path().join("again.db.spool"), spooled).unwrap();
        let history = History::open(&dir.path().join("again.db"), &HistoryConfig::default()).await.unwrap();
        let store = history.store();
        store.write(&[untraced]).await.unwrap();
        assert_trace_ids_read_back(store).await;
        history.close(Duration::from_secs(5)).await;
    }

    #[tokio::test]
    async fn a_purge_deletes_the_record_and_the_cached_answers_beside_it() {
        use crate::cache::store::{self as cache, Entry, Form, Lifetime};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("switchyard.db");
        let store = Store::open(&path).await.unwrap();
        let now = now_ms();
        store.write(&[request("a", now - 1000, None), request("b", now, None)]).await.unwrap();
        let answers =
            cache::Store::open(&cache::path_beside(&path), cache::Limits::default(), Default::default()).await.unwrap();
        let key = crate::cache::CacheKey([7; 32]);
        let entry = Entry {
            endpoint: "/v1/messages".into(),
            model: "m".into(),
            provider: None,
            status: 200,
            content_type: "application/json".into(),
            form: Form::Json,
            body: bytes::Bytes::from_static(b"{\"content\":\"private\"}"),
            usage: crate::protocol::Usage::default(),
            cost_usd: None,
            created_at_ms: now,
        };
        answers.put(key, entry);
        answers.flush().await;
        assert_eq!(purge(&store, crate::cache::purge_beside).await.unwrap(), Purged { requests: 2, cached_answers: 1 });
        assert_eq!(store.count(store::CountTable::Requests).await.unwrap(), 0);
        assert_eq!(store.requests_on_record().await.unwrap(), 0, "the rollups went with the rows");
        let forever = Lifetime { ttl: Duration::from_secs(3600), stale: Duration::ZERO };
        assert!(answers.get(&key, now, forever).await.is_none(), "the running cache misses it");
        // Without a cache file beside it, a purge still purges.
        let alone = Store::open(&dir.path().join("other.db")).await.unwrap();
        assert_eq!(purge(&alone, crate::cache::purge_beside).await.unwrap(), Purged { requests: 0, cached_answers: 0 });
    }

    #[tokio::test]
    async fn retention_by_size_removes_the_oldest_until_under_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("h.db")).await.unwrap();
        let now = now_ms();
        let big = "x".repeat(4096);
        let batch: Vec<Record> =
            (0..600).map(|i| request(&format!("r{i:04}"), now - 600 + i, Some(big.clone()))).collect();
        store.write(&batch).await.unwrap();
        assert!(store.used_bytes().await.unwrap() > 2 * 1024 * 1024);
        let config = HistoryConfig { max_size_bytes: 1024 * 1024, ..HistoryConfig::default() };
        let removed = prune(&store, &config).await.unwrap();
        assert!(removed > 0);
        assert!(store.used_bytes().await.unwrap() <= 1024 * 1024);
        assert!(store.request("r0000").await.unwrap().is_none(), "oldest went first");
        assert!(store.request("r0599").await.unwrap().is_some(), "newest stayed");
    }
}
