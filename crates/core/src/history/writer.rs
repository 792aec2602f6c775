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
//!
//! The spool is also what keeps the request path moving when the database
//! is slow or gone (PostgreSQL restarting, a full disk). A spooled record
//! that finds the queue full is not waited for: it is in the spool, and the
//! writer will [replay](Spool::seal) it from there. When a write fails the
//! writer falls behind: it keeps taking records off the queue (they are in
//! the spool), holds in memory only what could not be spooled (events, and
//! requests and captures once the spool is full, up to [`MAX_PENDING`]), and
//! tries the database again after a growing pause; once a write goes through it
//! replays the spool, file by file, and is caught up. [`Recorder::status`]
//! tells health and the dashboard which of these it is doing.

use crate::ground::batch::gather;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot, watch};
use tracing::{error, info, warn};

use super::record::Record;
use super::spool::{Generation, Segment, Spool};
use super::store::{Sink, Store, StoreError};
use crate::ground::clock::now_ms;

/// Records queued at most: two full batches. The writer yields the CPU to
/// requests, so under a load that leaves it no idle time the queue does
/// fill. Then a record in the spool is left out, to be replayed from there,
/// and one that is not (an event; a request the spool could not take) waits
/// for room. What the writer holds is bounded by the queue (a couple of
/// kilobytes a record), one batch it writes, which a replay reads from the
/// spool file as it goes ([`Reader`](super::spool::Reader)), and, while the
/// database is out of reach, up to [`MAX_PENDING`] records that could not
/// be spooled.
const CHANNEL: usize = 2 * MAX_BATCH;
/// Records written in one transaction at most.
const MAX_BATCH: usize = 1024;
/// How long the writer lets records gather before a commit. Nothing waits
/// on it but readers, who can ask for a flush: longer means fewer commits.
pub const LINGER: Duration = Duration::from_millis(20);
/// Records held in memory, at most, while the database is out of reach and
/// they cannot be spooled (events; requests once the spool is full).
const MAX_PENDING: usize = 16 * 1024;
/// The first pause before the database is tried again after a failed
/// write, doubled after each failure up to [`MAX_RETRY`].
const FIRST_RETRY: Duration = Duration::from_millis(100);
const MAX_RETRY: Duration = Duration::from_secs(2);

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
    shared: Arc<Shared>,
}

/// What the writer and the recorders share.
#[derive(Debug)]
struct Shared {
    backend: &'static str,
    lost: AtomicU64,
    /// A spooled record was left out of a full queue: the writer must
    /// replay the spool.
    overflowed: AtomicBool,
    /// When the writer fell behind (Unix ms), 0 while it keeps up.
    behind_since_ms: AtomicI64,
    /// The last commit (Unix ms), 0 before the first.
    last_commit_ms: AtomicI64,
    /// Records held in memory while behind.
    pending: AtomicU64,
    /// Flushes sent and not yet answered: the writer does not linger while
    /// one waits behind other records.
    flushing: AtomicUsize,
    /// Why the last write failed, while behind.
    error: Mutex<Option<String>>,
}

/// Whether the history keeps up: for health, `/admin/stats`, the metrics
/// and the dashboard.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct HistoryStatus {
    /// `sqlite` or `postgres`.
    pub backend: String,
    /// `keeping_up`, `catching_up` (replaying the spool after a burst) or
    /// `behind` (the database is out of reach; records wait in the spool).
    pub state: String,
    /// Completed requests in the spool not yet in the database.
    pub spooled: u64,
    pub spool_bytes: u64,
    /// The spool's bound (`[history] spool_max_size_mb`).
    pub spool_limit_bytes: u64,
    /// Records that could not be spooled, held in memory.
    pub pending: u64,
    /// How long the writer has been behind, in milliseconds (0 while it keeps up).
    pub lag_ms: u64,
    /// The last commit, in Unix milliseconds.
    pub last_commit_ms: Option<i64>,
    /// Records that could not be written, ever.
    pub lost: u64,
    /// Why the last write failed, while behind.
    pub error: Option<String>,
}

impl Recorder {
    /// Records a request the client saw complete. Returns once the record
    /// is spooled (or the spool has failed, which is logged) and queued.
    pub async fn complete(&self, record: Record) {
        self.complete_with(record, None).await;
    }

    /// Records a request with its capture, if it has one: both go in the
    /// same spool write, so the capture is as durable as the request.
    pub async fn complete_with(&self, record: Record, capture: Option<Record>) {
        match (record, &self.spool) {
            (Record::Event(event), _) => self.send(Item::Record(Record::Event(event), None)).await,
            (record, Some(spool)) => self.spool_then_queue(spool, record, capture).await,
            (record, None) => {
                self.send(Item::Record(record, None)).await;
                if let Some(capture) = capture {
                    self.send(Item::Record(capture, None)).await;
                }
            }
        }
    }

    /// Adds a request (and its capture) to the open batch, opening one if
    /// there is none, and waits for the batch to be delivered.
    async fn spool_then_queue(&self, spool: &Arc<Spool>, record: Record, capture: Option<Record>) {
        let (mut delivered, opened) = {
            let mut outbox = self.outbox.lock().unwrap_or_else(|p| p.into_inner());
            outbox.records.push(record);
            outbox.records.extend(capture);
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
        let records = {
            let mut outbox = self.outbox.lock().unwrap_or_else(|p| p.into_inner());
            outbox.batch = None;
            std::mem::take(&mut outbox.records)
        };
        let generations = spool.append(&records);
        for (record, generation) in records.into_iter().zip(generations) {
            let item = Item::Record(record, generation);
            match (generation, self.tx.try_send(item)) {
                (_, Ok(())) => {}
                // In the spool already: the writer replays it from there,
                // and the request does not wait on a database that is slow.
                (Some(_), Err(mpsc::error::TrySendError::Full(_))) => {
                    self.shared.overflowed.store(true, Ordering::Release);
                }
                (None, Err(mpsc::error::TrySendError::Full(item))) => self.send(item).await,
                (_, Err(mpsc::error::TrySendError::Closed(_))) => self.lose(1, "the history writer has stopped"),
            }
        }
        drop(done);
    }

    /// Waits until everything queued so far is in the database.
    pub async fn flush(&self) {
        let (ack, committed) = oneshot::channel();
        // Counted and woken first: behind a full queue the flush is not the
        // first item the writer takes, and must not wait out its linger.
        let counted = Counted::new(&self.shared.flushing);
        self.writer.unpark();
        if self.tx.send(Item::Flush(ack)).await.is_ok() {
            // The writer takes it off the count when it answers.
            counted.handed_over();
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
        self.shared.lost.load(Ordering::Relaxed)
    }

    /// Whether the history keeps up, and what waits in the spool.
    pub fn status(&self) -> HistoryStatus {
        let shared = &self.shared;
        let depth = self.spool.as_ref().map(|s| s.depth()).unwrap_or_default();
        let since = shared.behind_since_ms.load(Ordering::Acquire);
        let state = if since != 0 {
            "behind"
        } else if shared.overflowed.load(Ordering::Acquire) {
            "catching_up"
        } else {
            "keeping_up"
        };
        let last = shared.last_commit_ms.load(Ordering::Relaxed);
        HistoryStatus {
            backend: shared.backend.to_owned(),
            state: state.to_owned(),
            spooled: depth.records,
            spool_bytes: depth.bytes,
            spool_limit_bytes: depth.limit,
            pending: shared.pending.load(Ordering::Relaxed),
            lag_ms: if since == 0 { 0 } else { u64::try_from(now_ms() - since).unwrap_or(0) },
            last_commit_ms: (last != 0).then_some(last),
            lost: self.lost(),
            error: if since == 0 { None } else { shared.error.lock().unwrap_or_else(|p| p.into_inner()).clone() },
        }
    }

    fn lose(&self, n: u64, why: &str) {
        self.shared.lose(n, why);
    }
}

impl Shared {
    fn new(backend: &'static str) -> Shared {
        Shared {
            backend,
            lost: AtomicU64::new(0),
            overflowed: AtomicBool::new(false),
            behind_since_ms: AtomicI64::new(0),
            last_commit_ms: AtomicI64::new(0),
            pending: AtomicU64::new(0),
            flushing: AtomicUsize::new(0),
            error: Mutex::new(None),
        }
    }

    fn lose(&self, n: u64, why: &str) {
        let total = self.lost.fetch_add(n, Ordering::Relaxed) + n;
        error!(lost_total = total, "history record lost: {why}");
    }
}

/// One waiting flush on the count until the writer has it, whether the
/// send goes through, fails, or is dropped (its caller gone).
struct Counted<'a>(Option<&'a AtomicUsize>);

impl<'a> Counted<'a> {
    fn new(count: &'a AtomicUsize) -> Counted<'a> {
        count.fetch_add(1, Ordering::AcqRel);
        Counted(Some(count))
    }

    fn handed_over(mut self) {
        self.0 = None;
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        if let Some(count) = self.0 {
            count.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Finished requests (and their captures) on their way to the spool.
#[derive(Debug, Default)]
struct Outbox {
    /// Requests and captures, as they arrive and leave: each boxed inside,
    /// so none is copied whole on the way.
    records: Vec<Record>,
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
    let shared = Arc::new(Shared::new(store.backend()));
    let spool = spool.map(Arc::new);
    let writer = Writer::new(&store, spool.clone(), shared.clone(), linger);
    let thread = std::thread::Builder::new()
        .name("switchyard-history".into())
        .spawn(move || {
            yield_to_requests();
            writer.run(rx);
            let _ = done.send(());
        })
        .map_err(StoreError::Writer)?;
    let outbox = Arc::default();
    let recorder = Recorder { tx, spool, outbox, writer: thread.thread().clone(), shared };
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

/// While the writer waits out the database: records as they come in,
/// without blocking for one, so the queue keeps draining.
fn gather_now<T>(
    rx: &mut mpsc::Receiver<T>,
    into: &mut Vec<T>,
    max: usize,
    linger: Duration,
    hurry: impl Fn() -> bool,
) -> bool {
    if !hurry() {
        std::thread::park_timeout(linger);
    }
    while into.len() < max {
        match rx.try_recv() {
            Ok(item) => into.push(item),
            Err(mpsc::error::TryRecvError::Empty) => break,
            Err(mpsc::error::TryRecvError::Disconnected) => return false,
        }
    }
    true
}

struct Writer {
    /// The backend's connection for writing.
    sink: Sink,
    spool: Option<Arc<Spool>>,
    shared: Arc<Shared>,
    linger: Duration,
    /// Records that are in no spool, held while the database is out of reach.
    pending: VecDeque<Record>,
    /// Set while the database is out of reach.
    behind: Option<Behind>,
}

/// The database failed a write: when to try again.
#[derive(Debug)]
struct Behind {
    since: Instant,
    retry_at: Instant,
    pause: Duration,
}

impl Writer {
    fn new(store: &Store, spool: Option<Arc<Spool>>, shared: Arc<Shared>, linger: Duration) -> Writer {
        Writer { sink: store.sink(), spool, shared, linger, pending: VecDeque::new(), behind: None }
    }

    fn run(mut self, mut rx: mpsc::Receiver<Item>) {
        let mut items = Vec::with_capacity(MAX_BATCH);
        loop {
            let shared = self.shared.clone();
            let hurry = || shared.flushing.load(Ordering::Acquire) > 0;
            let open = if self.behind.is_some() || self.shared.overflowed.load(Ordering::Acquire) {
                gather_now(&mut rx, &mut items, MAX_BATCH, self.linger, hurry)
            } else {
                gather(&mut rx, &mut items, MAX_BATCH, self.linger, |item| matches!(item, Item::Flush(_)), hurry)
            };
            let flushes = self.take(&mut items);
            self.catch_up(!flushes.is_empty());
            self.shared.flushing.fetch_sub(flushes.len(), Ordering::AcqRel);
            for ack in flushes {
                let _ = ack.send(());
            }
            if !open {
                break;
            }
        }
        // Last words: one more try; what the spool holds waits for the next start.
        self.catch_up(true);
        if !self.pending.is_empty() {
            self.shared.lose(self.pending.len() as u64, "the database was out of reach when the gateway stopped");
        }
    }

    /// Writes the batch, or holds it while behind; returns the flushes in it.
    fn take(&mut self, items: &mut Vec<Item>) -> Vec<oneshot::Sender<()>> {
        let mut records = Vec::with_capacity(items.len());
        let mut generations = Vec::with_capacity(items.len());
        let mut flushes = Vec::new();
        // A record in a sealed file is the replay's to write, and has been
        // written by it unless the database is out of reach (then it waits
        // in the file, as `hold` leaves it): not written a second time.
        let sealed_below = self.spool.as_ref().map_or(0, |spool| spool.sealed_below());
        for item in items.drain(..) {
            match item {
                Item::Record(_, Some(generation)) if generation < sealed_below => {}
                Item::Record(record, generation) => {
                    records.push(record);
                    generations.push(generation);
                }
                Item::Flush(ack) => flushes.push(ack),
            }
        }
        if records.is_empty() {
            return flushes;
        }
        if self.behind.is_none() {
            match self.sink.write(&records) {
                Ok(()) => {
                    self.committed();
                    if let Some(spool) = &self.spool {
                        let spooled: Vec<Generation> = generations.into_iter().flatten().collect();
                        spool.committed(&spooled);
                    }
                    return flushes;
                }
                Err(e) => self.fall_behind(&e),
            }
        }
        for (record, generation) in records.into_iter().zip(generations) {
            self.hold(record, generation);
        }
        flushes
    }

    /// Keeps a record the database cannot take now: a spooled one is
    /// replayed from the spool; another goes to the spool if it can (an
    /// event cannot), else waits in memory.
    fn hold(&mut self, record: Record, generation: Option<Generation>) {
        if generation.is_some() {
            return;
        }
        let spoolable = !matches!(record, Record::Event(_));
        if let (true, Some(spool)) = (spoolable, &self.spool) {
            if spool.append(std::slice::from_ref(&record)).first().is_some_and(Option::is_some) {
                return;
            }
        }
        self.pending.push_back(record);
        if self.pending.len() > MAX_PENDING {
            self.pending.pop_front();
            self.shared.lose(1, "the database is out of reach and the spool is full");
        }
        self.shared.pending.store(self.pending.len() as u64, Ordering::Relaxed);
    }

    fn fall_behind(&mut self, e: &StoreError) {
        self.sink.reset();
        *self.shared.error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
        match &mut self.behind {
            Some(behind) => {
                behind.pause = (behind.pause * 2).min(MAX_RETRY);
                behind.retry_at = Instant::now() + behind.pause;
            }
            None => {
                warn!("history write failed ({e}); completed requests wait in the spool until the database answers");
                let now = Instant::now();
                self.behind = Some(Behind { since: now, retry_at: now + FIRST_RETRY, pause: FIRST_RETRY });
                self.shared.behind_since_ms.store(now_ms(), Ordering::Release);
            }
        }
    }

    fn committed(&self) {
        self.shared.last_commit_ms.store(now_ms(), Ordering::Relaxed);
    }

    /// When behind and the pause is over, or when records were left in the
    /// spool by a full queue: writes what waits in memory, then replays the
    /// spool file by file. `now`: someone waits on it (a flush), so a pause
    /// is not waited out.
    fn catch_up(&mut self, now: bool) {
        let due = match &self.behind {
            Some(behind) => now || Instant::now() >= behind.retry_at,
            None => self.shared.overflowed.load(Ordering::Acquire),
        };
        if !due {
            return;
        }
        // Cleared first: a record left out after this is sealed below or
        // sets it again.
        self.shared.overflowed.store(false, Ordering::Release);
        match self.replay() {
            Ok(replayed) => {
                if let Some(behind) = self.behind.take() {
                    info!(
                        "history caught up: {replayed} requests replayed from the spool after {}",
                        humantime::format_duration(Duration::from_millis(behind.since.elapsed().as_millis() as u64))
                    );
                }
                self.shared.behind_since_ms.store(0, Ordering::Release);
            }
            Err(e) => {
                self.shared.overflowed.store(true, Ordering::Release);
                self.fall_behind(&e);
            }
        }
    }

    /// Writes what waits in memory, then every sealed spool file; the count
    /// of requests replayed.
    fn replay(&mut self) -> Result<usize, StoreError> {
        while !self.pending.is_empty() {
            let n = self.pending.len().min(MAX_BATCH);
            let batch: Vec<Record> = self.pending.drain(..n).collect();
            if let Err(e) = self.sink.write(&batch) {
                for record in batch.into_iter().rev() {
                    self.pending.push_front(record);
                }
                return Err(e);
            }
            self.shared.pending.store(self.pending.len() as u64, Ordering::Relaxed);
            self.committed();
        }
        let Some(spool) = self.spool.clone() else {
            // Nothing spooled to replay: an empty write tells whether the database is back.
            return self.sink.write(&[]).map(|()| 0);
        };
        spool.seal().map_err(|e| spool_error(&spool, e))?;
        let mut replayed = 0;
        let segments = spool.backlog();
        if segments.is_empty() && self.behind.is_some() {
            self.sink.write(&[])?;
        }
        for segment in segments {
            replayed += self.replay_segment(&spool, &segment)?;
        }
        Ok(replayed)
    }

    /// Writes a sealed file's records a batch at a time, reading each as it
    /// goes, then removes the file; the count of requests in it.
    fn replay_segment(&mut self, spool: &Spool, segment: &Segment) -> Result<usize, StoreError> {
        let io = |e| spool_error(spool, e);
        let mut reader = segment.reader().map_err(io)?;
        while let Some(batch) = reader.batch(MAX_BATCH).map_err(io)? {
            self.sink.write(&batch)?;
            self.committed();
        }
        if reader.unreadable() > 0 {
            warn!("history spool: {} records cut short or damaged were skipped", reader.unreadable());
        }
        spool.replayed(segment).map_err(io)?;
        Ok(reader.requests())
    }
}

fn spool_error(spool: &Spool, source: std::io::Error) -> StoreError {
    StoreError::Spool { path: spool.path().display().to_string(), source }
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
        let spool = Spool::open(&db, crate::ground::limits::SPOOL_BYTES).unwrap().unwrap();
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
        let copy = Spool::open(&dir.path().join("copy.db"), crate::ground::limits::SPOOL_BYTES).unwrap().unwrap();
        let leftovers: Vec<crate::history::RequestRecord> =
            copy.backlog().iter().flat_map(|s| s.read().unwrap().records).collect();
        let mut found: Vec<_> = leftovers.iter().map(|r| r.id.as_str()).collect();
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

    #[tokio::test]
    async fn records_a_full_queue_leaves_in_the_spool_are_replayed_from_it() {
        let (dir, store, recorder, _) = gathering().await;
        let n = CHANNEL + MAX_BATCH / 2;
        // The writer lingers: the queue fills, and what does not fit is
        // only in the spool. No request waited for the writer.
        for i in 0..n {
            recorder.complete(request(&format!("r{i:05}"))).await;
        }
        assert_eq!(recorder.status().state, "catching_up");
        assert_eq!(recorder.status().spooled, n as u64);
        recorder.flush().await;
        assert_eq!(store.count(CountTable::Requests).await.unwrap(), n as i64);
        let status = recorder.status();
        assert_eq!((status.state.as_str(), status.spooled, status.lost), ("keeping_up", 0, 0), "{status:?}");
        // The next record goes on as usual, and the spool empties.
        recorder.complete(request("after")).await;
        recorder.flush().await;
        assert_eq!(store.count(CountTable::Requests).await.unwrap(), n as i64 + 1);
        assert_eq!(std::fs::metadata(dir.path().join("h.db.spool")).unwrap().len(), 0);
    }

    /// A store in a fresh directory (its database `h.db`) that logs every
    /// insert into `requests`, in order, one that is ignored (a copy of a
    /// row on record) included; and a writer on it, with a spool.
    async fn logging() -> (tempfile::TempDir, Arc<Spool>, Writer) {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("h.db");
        let store = Store::open(&db).await.unwrap();
        rusqlite::Connection::open(&db)
            .unwrap()
            .execute_batch(
                "CREATE TABLE written (id TEXT);
                 CREATE TRIGGER log_written BEFORE INSERT ON requests BEGIN INSERT INTO written VALUES (NEW.id); END;",
            )
            .unwrap();
        let spool = Arc::new(Spool::open(&db, crate::ground::limits::SPOOL_BYTES).unwrap().unwrap());
        let writer = Writer::new(&store, Some(spool.clone()), Arc::new(Shared::new(store.backend())), LINGER);
        (dir, spool, writer)
    }

    /// The ids of the requests written in `dir`'s `h.db`, as [`logging`] logged them.
    fn written(dir: &tempfile::TempDir) -> Vec<String> {
        let db = rusqlite::Connection::open(dir.path().join("h.db")).unwrap();
        let mut statement = db.prepare("SELECT id FROM written ORDER BY rowid").unwrap();
        statement.query_map([], |row| row.get(0)).unwrap().collect::<Result<_, _>>().unwrap()
    }

    /// A spool file of more than one batch is replayed a batch at a time:
    /// every record in it written once, in the order it was spooled, and
    /// then the file removed.
    #[tokio::test]
    async fn a_spool_file_of_several_batches_is_replayed_once_and_in_order() {
        let (dir, spool, mut writer) = logging().await;
        let ids: Vec<String> = (0..2 * MAX_BATCH + 7).map(|i| format!("r{i:05}")).collect();
        for chunk in ids.chunks(100) {
            let records: Vec<Record> = chunk.iter().map(|id| request(id)).collect();
            assert!(spool.append(&records).iter().all(Option::is_some));
        }
        spool.seal().unwrap();
        let [segment] = spool.backlog().try_into().unwrap();
        assert_eq!(writer.replay_segment(&spool, &segment).unwrap(), ids.len());
        assert_eq!(written(&dir), ids);
        assert!(spool.backlog().is_empty());
        assert!(!dir.path().join("h.db.spool.1").exists(), "the file is gone");
    }

    /// A queued record whose spool file was sealed is the replay's to write:
    /// taken off the queue after the replay, it is not written again; one
    /// in the current file is, and counted.
    #[tokio::test]
    async fn a_queued_record_of_a_sealed_file_is_left_to_the_replay() {
        let (dir, spool, mut writer) = logging().await;
        let [sealed] = spool.append(&[request("sealed")]).try_into().unwrap();
        // A full queue left a record out: the writer seals and replays.
        writer.shared.overflowed.store(true, Ordering::Release);
        writer.catch_up(false);
        let [current] = spool.append(&[request("current")]).try_into().unwrap();
        assert!(sealed < current);
        let mut items = vec![Item::Record(request("sealed"), sealed), Item::Record(request("current"), current)];
        assert!(writer.take(&mut items).is_empty());
        assert_eq!(written(&dir), ["sealed", "current"]);
        assert_eq!(spool.depth().records, 0, "the current file's record is counted in");
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
