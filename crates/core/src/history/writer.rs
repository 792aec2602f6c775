//! The one thread that writes history. The request path hands records over
//! a bounded channel; the writer waits a moment for more to queue, then
//! writes them in one transaction (group commit). It is a thread of its own,
//! not a task, because SQLite's calls block: on the runtime they would stall
//! requests, and through an async driver every statement would be a
//! hand-off between threads. A full channel slows the sender
//! (backpressure) rather than dropping; a record is lost only if the writer
//! is gone, and then it is counted and logged.
//!
//! A finished request never waits for SQLite: [`Recorder::complete`] puts
//! its record in the [spool](super::spool) first, which is what keeps a
//! request the client saw complete on record across a crash. Readers that
//! want everything recorded so far call [`Recorder::flush`].
//!
//! Requests that finish together share one spool write. Under load several
//! finish in each turn of the runtime, and a `write` call costs more kernel
//! time than everything else the record costs. The first to finish opens a
//! batch and spawns the task that delivers it; spawned, that task runs
//! behind the tasks already ready, so requests finishing in the same turn
//! join the batch. It writes the batch to the spool in one call, queues the
//! records for the writer, then lets the requests go on. The records belong
//! to that task, not to the requests waiting on it: a client that leaves
//! mid-wait loses nothing.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tracing::{error, warn};

use super::record::{Record, RequestRecord};
use super::spool::{Generation, Spool};
use super::store::{Sink, Store, StoreError};

/// Records queued before senders must wait: two full batches. The bound is
/// also the memory a writer that has fallen behind can hold (a couple of
/// kilobytes a record); the writer yields the CPU to requests, so under a
/// load that leaves it no idle time the queue does fill, and then slows
/// requests to the pace at which their records are written.
const CHANNEL: usize = 2 * MAX_BATCH;
/// Records written in one transaction at most.
const MAX_BATCH: usize = 1024;
/// How long the writer lets records gather before a commit. Nothing waits
/// on it but readers, who can ask for a flush: longer means fewer commits.
pub const LINGER: Duration = Duration::from_millis(20);

enum Item {
    /// A record, and the spool file it is in, if it is in one.
    Record(Record, Option<Generation>),
    /// Told once everything queued before it is committed.
    Flush(oneshot::Sender<()>),
}

/// The sending side, held by the request path.
#[derive(Debug, Clone)]
pub struct Recorder {
    tx: mpsc::Sender<Item>,
    /// Absent when another process owns this database's spool.
    spool: Option<Arc<Spool>>,
    /// Finished requests gathering for the next spool write.
    outbox: Arc<Mutex<Outbox>>,
    /// The writer thread, unparked to cut its wait short for a flush.
    writer: std::thread::Thread,
    lost: Arc<AtomicU64>,
}

impl Recorder {
    /// Records a request the client saw complete. Returns once the record
    /// is spooled (or the spool has failed, which is logged) and queued.
    pub async fn complete(&self, record: Record) {
        match (record, &self.spool) {
            (Record::Request(request), Some(spool)) => self.spool_then_queue(spool, request).await,
            (record, _) => self.send(Item::Record(record, None)).await,
        }
    }

    /// Adds a request to the open batch, opening one if there is none, and
    /// waits for the batch to be delivered.
    async fn spool_then_queue(&self, spool: &Arc<Spool>, request: Box<RequestRecord>) {
        let (mut delivered, opened) = {
            let mut outbox = self.outbox.lock().unwrap_or_else(|p| p.into_inner());
            outbox.requests.push(request);
            match &outbox.batch {
                // A batch whose delivery is gone (dropped unrun as the
                // runtime shut down) is not joined: a new one takes its requests.
                Some(batch) if batch.has_changed().is_ok() => (batch.clone(), None),
                _ => {
                    let (done, batch) = watch::channel(());
                    outbox.batch = Some(batch.clone());
                    (batch, Some(done))
                }
            }
        };
        if let Some(done) = opened {
            let delivery = self.clone().deliver(spool.clone(), done);
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => drop(runtime.spawn(delivery)),
                // Off a runtime nothing else finishes meanwhile: deliver now.
                Err(_) => Box::pin(delivery).await,
            }
        }
        // Nothing is ever sent: this returns once the delivery has dropped
        // its sender, done or not.
        let _ = delivered.changed().await;
    }

    /// Writes the open batch to the spool in one call, queues its records,
    /// and lets its requests go on by dropping `done`, which happens too if
    /// this task is dropped before it is done.
    async fn deliver(self, spool: Arc<Spool>, done: watch::Sender<()>) {
        let requests = {
            let mut outbox = self.outbox.lock().unwrap_or_else(|p| p.into_inner());
            outbox.batch = None;
            std::mem::take(&mut outbox.requests)
        };
        let generations = spool.append(&requests);
        for (request, generation) in requests.into_iter().zip(generations) {
            self.send(Item::Record(Record::Request(request), generation)).await;
        }
        drop(done);
    }

    /// Waits until everything queued so far is in the database.
    pub async fn flush(&self) {
        let (ack, committed) = oneshot::channel();
        if self.tx.send(Item::Flush(ack)).await.is_ok() {
            self.writer.unpark();
            let _ = committed.await;
        }
    }

    /// Queues a record, waiting if the writer is behind.
    async fn send(&self, item: Item) {
        if self.tx.send(item).await.is_err() {
            self.lose(1, "the history writer has stopped");
        }
    }

    /// Queues a record from a context that cannot wait (a drop handler).
    /// A full queue hands the record to a task that waits in its place.
    pub fn record_now(&self, record: Record) {
        match self.tx.try_send(Item::Record(record, None)) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(item)) => match tokio::runtime::Handle::try_current() {
                Ok(runtime) => {
                    let this = self.clone();
                    runtime.spawn(async move { this.send(item).await });
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

/// Finished requests on their way to the spool.
#[derive(Debug, Default)]
struct Outbox {
    // Boxed as they arrive and leave (`Record::Request`): unboxed, each
    // would be copied in and allocated again on the way out.
    #[allow(clippy::vec_box)]
    requests: Vec<Box<RequestRecord>>,
    /// While a delivery is on its way, the batch later requests join.
    batch: Option<watch::Receiver<()>>,
}

/// Starts the writer thread. It ends when every [`Recorder`] is dropped
/// and the queue is drained; the returned receiver resolves then.
/// `linger`: how long records gather before a commit ([`LINGER`]).
pub fn spawn(
    store: Store,
    spool: Option<Spool>,
    linger: Duration,
) -> Result<(Recorder, oneshot::Receiver<()>), StoreError> {
    let (tx, rx) = mpsc::channel(CHANNEL);
    let (done, finished) = oneshot::channel();
    let lost = Arc::new(AtomicU64::new(0));
    let spool = spool.map(Arc::new);
    let writer = Writer { sink: store.sink(), spool: spool.clone(), lost: lost.clone(), linger };
    let thread = std::thread::Builder::new()
        .name("switchyard-history".into())
        .spawn(move || {
            yield_to_requests();
            writer.run(rx);
            let _ = done.send(());
        })
        .map_err(StoreError::Writer)?;
    let outbox = Arc::default();
    let recorder = Recorder { tx, spool, outbox, writer: thread.thread().clone(), lost };
    Ok((recorder, finished))
}

/// Puts the writer behind the request path. A commit takes a millisecond
/// or more of CPU; at normal priority, or merely at the lowest nice value, a
/// request that wakes while the writer holds a CPU can wait out its time
/// slice, which showed as the gateway's c=1 p99. On Linux the writer is a
/// `SCHED_IDLE` thread: the scheduler places a waking request on a CPU that
/// runs only such threads as if it were idle, and the writer has every
/// cycle that requests leave. If that is too few, the queue fills and slows
/// requests down instead of losing records. Elsewhere the writer takes its
/// platform's lowest thread priority.
fn yield_to_requests() {
    #[cfg(target_os = "linux")]
    let lowered = thread_priority::set_thread_priority_and_policy(
        thread_priority::thread_native_id(),
        thread_priority::ThreadPriority::Min,
        thread_priority::ThreadSchedulePolicy::Normal(thread_priority::NormalThreadSchedulePolicy::Idle),
    );
    #[cfg(not(target_os = "linux"))]
    let lowered = thread_priority::set_current_thread_priority(thread_priority::ThreadPriority::Min);
    if let Err(e) = lowered {
        tracing::debug!("history writer keeps its priority: {e:?}");
    }
}

/// A group commit's batch, for a writer thread: waits for one item, then,
/// unless `urgent` says someone waits on it, lets more gather for `linger`
/// without reading the queue (so senders do not wake the thread per item;
/// whoever sends an urgent item unparks it), then takes what is queued, up
/// to `max` in all. False once the queue is closed and drained.
pub(crate) fn gather<T>(
    rx: &mut mpsc::Receiver<T>,
    into: &mut Vec<T>,
    max: usize,
    linger: Duration,
    urgent: impl Fn(&T) -> bool,
) -> bool {
    let Some(first) = rx.blocking_recv() else { return false };
    let wait = !urgent(&first);
    into.push(first);
    if wait {
        std::thread::park_timeout(linger);
    }
    while into.len() < max {
        match rx.try_recv() {
            Ok(item) => into.push(item),
            Err(_) => break,
        }
    }
    true
}

struct Writer {
    /// The backend's connection for writing.
    sink: Sink,
    spool: Option<Arc<Spool>>,
    lost: Arc<AtomicU64>,
    linger: Duration,
}

impl Writer {
    fn run(mut self, mut rx: mpsc::Receiver<Item>) {
        let mut items = Vec::with_capacity(MAX_BATCH);
        while gather(&mut rx, &mut items, MAX_BATCH, self.linger, |item| matches!(item, Item::Flush(_))) {
            self.commit(&mut items);
        }
    }

    /// Writes the batch, then tells the spool and anyone waiting for a flush.
    fn commit(&mut self, items: &mut Vec<Item>) {
        let mut records = Vec::with_capacity(items.len());
        let mut spooled = Vec::new();
        let mut flushes = Vec::new();
        for item in items.drain(..) {
            match item {
                Item::Record(record, generation) => {
                    records.push(record);
                    spooled.extend(generation);
                }
                Item::Flush(ack) => flushes.push(ack),
            }
        }
        if !records.is_empty() && self.write(&records) {
            if let Some(spool) = &self.spool {
                spool.committed(&spooled);
            }
        }
        for ack in flushes {
            let _ = ack.send(());
        }
    }

    /// Whether the batch was committed. One retry after a failure; then the
    /// batch is counted lost for this run (what is in the spool stays there
    /// and is replayed at the next start).
    fn write(&mut self, records: &[Record]) -> bool {
        let Err(first) = self.sink.write(records) else { return true };
        warn!("history write failed, retrying once: {first}");
        self.sink.reset();
        std::thread::sleep(Duration::from_millis(100));
        let Err(second) = self.sink.write(records) else { return true };
        self.sink.reset();
        let total = self.lost.fetch_add(records.len() as u64, Ordering::Relaxed) + records.len() as u64;
        error!(lost_total = total, "history write failed; {} records lost: {second}", records.len());
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::record::sample_request;
    use crate::history::store::CountTable;

    fn request(id: &str) -> Record {
        Record::Request(Box::new(sample_request(id)))
    }

    /// A recorder with a spool, in a fresh directory (its database `h.db`),
    /// with a linger no test waits out: only a flush writes its records.
    async fn gathering() -> (tempfile::TempDir, Store, Recorder, oneshot::Receiver<()>) {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("h.db");
        let store = Store::open(&db).await.unwrap();
        let (spool, _) = Spool::open(&db).unwrap().unwrap();
        let (recorder, finished) = spawn(store.clone(), Some(spool), Duration::from_secs(600)).unwrap();
        (dir, store, recorder, finished)
    }

    #[tokio::test]
    async fn records_wait_for_the_linger_and_a_flush_cuts_it_short() {
        let (dir, store, recorder, finished) = gathering().await;
        recorder.complete(request("r1")).await;
        assert_eq!(store.count(CountTable::Requests).await.unwrap(), 0, "still gathering");
        recorder.flush().await;
        assert_eq!(store.count(CountTable::Requests).await.unwrap(), 1);
        // The spool is emptied once its records are committed.
        assert_eq!(std::fs::metadata(dir.path().join("h.db.spool")).unwrap().len(), 0);
        // With every recorder gone and nothing queued, the writer ends.
        drop(recorder);
        tokio::time::timeout(Duration::from_secs(5), finished).await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn requests_finishing_together_are_all_spooled_and_written() {
        let (dir, store, recorder, _) = gathering().await;
        let ids = ["r1", "r2", "r3"];
        futures_util::future::join_all(ids.map(|id| recorder.complete(request(id)))).await;
        // Each returned with its record in the spool, before any commit:
        // a copy of the file replays all three.
        let spooled = std::fs::read(dir.path().join("h.db.spool")).unwrap();
        std::fs::write(dir.path().join("copy.db.spool"), spooled).unwrap();
        let (_, leftovers) = Spool::open(&dir.path().join("copy.db")).unwrap().unwrap();
        let mut found: Vec<_> = leftovers.records.iter().map(|r| r.id.as_str()).collect();
        found.sort();
        assert_eq!(found, ids);
        recorder.flush().await;
        assert_eq!(store.count(CountTable::Requests).await.unwrap(), 3);
        assert_eq!(std::fs::metadata(dir.path().join("h.db.spool")).unwrap().len(), 0);
    }

    #[tokio::test]
    async fn a_request_dropped_while_its_record_is_on_the_way_loses_nothing() {
        let (_dir, store, recorder, _) = gathering().await;
        // Polled once, so waiting on the delivery, then dropped: the client left.
        let returned = tokio::select! {
            biased;
            () = recorder.complete(request("r1")) => true,
            () = std::future::ready(()) => false,
        };
        assert!(!returned, "returned before its delivery ran");
        // The delivery runs at the runtime's next turn all the same.
        tokio::task::yield_now().await;
        recorder.flush().await;
        assert_eq!(store.count(CountTable::Requests).await.unwrap(), 1);
    }

    /// The scheduling policy of every history writer thread in this
    /// process (`/proc`'s `stat`, field 41: 5 is `SCHED_IDLE`).
    #[cfg(target_os = "linux")]
    fn writer_policies() -> Vec<u32> {
        let mut values = Vec::new();
        for task in std::fs::read_dir("/proc/self/task").unwrap() {
            let path = task.unwrap().path();
            let Ok(stat) = std::fs::read_to_string(path.join("stat")) else { continue };
            if std::fs::read_to_string(path.join("comm")).is_ok_and(|c| c.trim() == "switchyard-hist") {
                // After the parenthesised name the state is field 3.
                let fields: Vec<&str> = stat.rsplit_once(") ").unwrap().1.split(' ').collect();
                values.push(fields[41 - 3].parse().unwrap());
            }
        }
        values
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn the_writer_gives_way_to_requests() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("h.db")).await.unwrap();
        let (recorder, _) = spawn(store, None, LINGER).unwrap();
        // Answered by the writer's loop, so its thread is past its start.
        recorder.flush().await;
        let policies = writer_policies();
        assert!(!policies.is_empty());
        assert!(policies.iter().all(|&p| p == 5), "{policies:?}");
    }
}
