//! The one task that writes history. The request path hands records over a
//! bounded channel; the writer batches whatever has queued into one
//! transaction (group commit). A full channel slows the sender
//! (backpressure) rather than dropping; a record is lost only if the writer
//! is gone, and then it is counted and logged.
//!
//! A request's final byte waits for its record's commit ([`Recorder::commit`]),
//! so a request the client saw complete is on record even if the process is
//! killed the next instant. Heads and streamed content never wait; with WAL
//! and `synchronous = NORMAL` a commit is a write to the log, not an fsync.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tracing::{error, warn};

use super::record::Record;
use super::store::{Store, StoreError};

/// Records queued before senders must wait.
const CHANNEL: usize = 8192;
/// Records written in one transaction at most.
const MAX_BATCH: usize = 1024;

/// A record, and who to tell once it is committed.
type Item = (Record, Option<oneshot::Sender<()>>);

/// The sending side, held by the request path.
#[derive(Debug, Clone)]
pub struct Recorder {
    tx: mpsc::Sender<Item>,
    lost: Arc<AtomicU64>,
}

impl Recorder {
    /// Queues a record, waiting if the writer is behind.
    pub async fn record(&self, record: Record) {
        if self.tx.send((record, None)).await.is_err() {
            self.lose(1, "the history writer has stopped");
        }
    }

    /// Queues a record and waits until it is committed (or its write failed,
    /// which the writer logs and counts).
    pub async fn commit(&self, record: Record) {
        let (ack, committed) = oneshot::channel();
        if self.tx.send((record, Some(ack))).await.is_err() {
            return self.lose(1, "the history writer has stopped");
        }
        let _ = committed.await;
    }

    /// Queues a record from a context that cannot wait (a drop handler).
    /// A full queue hands the record to a task that waits in its place.
    pub fn record_now(&self, record: Record) {
        match self.tx.try_send((record, None)) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full((record, _))) => match tokio::runtime::Handle::try_current() {
                Ok(runtime) => {
                    let this = self.clone();
                    runtime.spawn(async move { this.record(record).await });
                }
                Err(_) => self.lose(1, "no runtime to queue it on"),
            },
            Err(mpsc::error::TrySendError::Closed(_)) => self.lose(1, "the history writer has stopped"),
        }
    }

    /// Records that could not be written, ever.
    pub fn lost(&self) -> u64 {
        self.lost.load(Ordering::Relaxed)
    }

    fn lose(&self, n: u64, why: &str) {
        let total = self.lost.fetch_add(n, Ordering::Relaxed) + n;
        error!(lost_total = total, "history record lost: {why}");
    }
}

/// Starts the writer; it ends when every [`Recorder`] is dropped and the
/// queue is drained.
pub fn spawn(store: Store) -> (Recorder, JoinHandle<()>) {
    let (tx, rx) = mpsc::channel(CHANNEL);
    let lost = Arc::new(AtomicU64::new(0));
    let recorder = Recorder { tx, lost: lost.clone() };
    (recorder, tokio::spawn(run(store, rx, lost)))
}

async fn run(store: Store, mut rx: mpsc::Receiver<Item>, lost: Arc<AtomicU64>) {
    let mut items = Vec::with_capacity(MAX_BATCH);
    let mut records = Vec::with_capacity(MAX_BATCH);
    let mut conn = None;
    while rx.recv_many(&mut items, MAX_BATCH).await > 0 {
        let acks: Vec<oneshot::Sender<()>> = items
            .drain(..)
            .filter_map(|(record, ack)| {
                records.push(record);
                ack
            })
            .collect();
        if let Err(first) = write(&store, &mut conn, &records).await {
            warn!("history write failed, retrying once: {first}");
            conn = None;
            tokio::time::sleep(Duration::from_millis(100)).await;
            if let Err(second) = write(&store, &mut conn, &records).await {
                conn = None;
                let total = lost.fetch_add(records.len() as u64, Ordering::Relaxed) + records.len() as u64;
                error!(lost_total = total, "history write failed; {} records lost: {second}", records.len());
            }
        }
        records.clear();
        for ack in acks {
            let _ = ack.send(());
        }
    }
}

/// Writes on the writer's own connection, opening it when needed.
async fn write(store: &Store, conn: &mut Option<sqlx::SqliteConnection>, records: &[Record]) -> Result<(), StoreError> {
    if conn.is_none() {
        *conn = Some(store.writer_connection().await?);
    }
    match conn {
        Some(c) => super::store::write_batch(c, records).await,
        None => Ok(()),
    }
}
