//! The spool: an append-only file in front of the database.
//!
//! A finished request's record is appended here, one `write` into the page
//! cache, before the client's final byte goes out. A request the client saw
//! complete therefore survives a `kill -9` (not a power cut: there is no
//! fsync, as with SQLite's own log under `synchronous = NORMAL`), while the
//! response never waits for SQLite. The writer moves records into the
//! database in batches and reports what it committed; whatever the spool
//! still holds when history opens again is replayed into the database.
//!
//! Under steady load the spool stays small: records go to `<db>.spool`;
//! once it has grown, it is retired as `<db>.spool.<generation>` and a
//! fresh one is started, and a retired file is removed as soon as every
//! record in it is committed. Each record carries the generation of the
//! file it went to, so the count per file is exact whatever order records
//! reach the writer in.
//!
//! When the database is out of reach (PostgreSQL restarting, a full disk)
//! the spool is the backlog: files retire one after another, up to a bound
//! (`[history] spool_max_size_mb`), and the writer [seals](Spool::seal)
//! them and replays them once the database answers again. What the last
//! run left is sealed the same way when the spool opens.
//!
//! A record is a frame: a format byte, the payload's length and CRC-32
//! (little-endian), then the record in postcard, a compact binary encoding
//! of the same serde types (a tenth of the instructions JSON took, which
//! mattered: the append is on every response's path). The length finds a
//! write cut short by a crash, the checksum a torn or zeroed page. Spools
//! from before the frames, JSON lines, are still read.
//!
//! A captured request's bodies (the inspector's [`CaptureRecord`]) go in
//! the same write as the request, in a frame of their own kind: what the
//! client saw complete is on record whole, capture included, across a
//! `kill -9`. They count towards the bound like any frame, and when a write
//! would pass it the captures are left out first: a request is worth more
//! than its bodies.
//!
//! One process owns a spool at a time, by a lock on `<db>.spool.lock` held
//! while it runs: a second process on the same database (a desktop app that
//! finds a gateway already serving its data directory) must neither replay
//! nor empty a spool whose records another writer has yet to commit.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use tracing::warn;

use super::record::{CaptureRecord, Record, RequestRecord};

/// The current file is retired once it holds this much.
const ROTATE_BYTES: u64 = 4 * 1024 * 1024;

/// The first byte of each frame: which encoding follows. postcard writes
/// fields by position, not by name, so a record whose shape changes (a field
/// added, removed, reordered or retyped) needs a new format byte, and the
/// reader keeps decoding frames of the old shape: a spool left by a crash is
/// replayed by whatever version starts next. `the_frame_format_is_pinned`
/// fails when the shape changes. An enum variant appended last is no
/// change of shape: variants are written by index, so every earlier frame
/// reads as before (`AttemptOutcome::Skipped`, index 9, came so; a binary
/// from before it counts a frame holding one as unreadable).
const FRAME_V1: u8 = 1;
/// Version 2 added [`RequestRecord::translations`], as its last field: a
/// version 1 payload reads as version 2 with an empty list appended.
const FRAME_V2: u8 = 2;
/// Version 3 added [`RequestRecord::cache`] and [`RequestRecord::saved_usd`],
/// last: an older payload reads with both `None` appended.
const FRAME_V3: u8 = 3;
/// Version 4 added [`RequestRecord::dropped`], last.
const FRAME_V4: u8 = 4;
/// Version 5 added [`RequestRecord::instance`], last.
const FRAME_V5: u8 = 5;
/// Version 6 added [`RequestRecord::routing`], last.
const FRAME_V6: u8 = 6;
/// Version 7 added [`RequestRecord::member`], last.
const FRAME_V7: u8 = 7;
/// Version 8 added [`RequestRecord::session`], last.
const FRAME_V8: u8 = 8;
/// Version 9 added [`RequestRecord::turn`], last, and after the record its
/// cache writes ([`CacheWrites`]): a [`Usage`](crate::protocol::Usage) is
/// written in the compact form as the three counts it always had, so the
/// `usage` inside a record of every version reads alike, and what usage
/// gained since travels behind the record. An older payload reads with no
/// turn and no cache writes.
const FRAME_V9: u8 = 9;
/// Version 10 added [`RequestRecord::trace_id`], last in the record, its
/// cache writes behind it as in version 9. A version 9 record is read one
/// field short ([`Older`]): the cache writes behind it leave no room to
/// append the missing `None`, as the older versions' are.
const FRAME_V10: u8 = 10;
/// Version 11 added [`RequestRecord::device`], last in the record, its
/// cache writes behind it; version 10 and 9 records are read one and two
/// fields short ([`Older`]).
const FRAME_V11: u8 = 11;
/// A request's capture ([`CaptureRecord`]), not a request: a kind of frame
/// of its own, numbered well away from the requests' versions so that
/// those can go on counting up without meeting it. Its payload is pinned
/// by `the_capture_frame_is_pinned`; a change of [`CaptureRecord`]'s shape
/// takes `0x41` and keeps reading this one.
const FRAME_CAPTURE_V1: u8 = 0x40;
/// postcard's encoding of an empty sequence.
const EMPTY_SEQ: u8 = 0;
/// postcard's encoding of `None`.
const NONE: u8 = 0;
/// What each older version's payload lacks, in postcard: the fields added
/// since, each empty.
const UPGRADE_V1: &[u8] = &[EMPTY_SEQ, NONE, NONE, EMPTY_SEQ, NONE, EMPTY_SEQ, NONE, NONE, NONE, NONE, NONE];
const UPGRADE_V2: &[u8] = &[NONE, NONE, EMPTY_SEQ, NONE, EMPTY_SEQ, NONE, NONE, NONE, NONE, NONE];
const UPGRADE_V3: &[u8] = &[EMPTY_SEQ, NONE, EMPTY_SEQ, NONE, NONE, NONE, NONE, NONE];
const UPGRADE_V4: &[u8] = &[NONE, EMPTY_SEQ, NONE, NONE, NONE, NONE, NONE];
const UPGRADE_V5: &[u8] = &[EMPTY_SEQ, NONE, NONE, NONE, NONE, NONE];
const UPGRADE_V6: &[u8] = &[NONE, NONE, NONE, NONE, NONE];
const UPGRADE_V7: &[u8] = &[NONE, NONE, NONE, NONE];
const UPGRADE_V8: &[u8] = &[NONE, NONE, NONE];
/// Format byte, payload length, payload CRC-32.
const FRAME_HEADER: usize = 9;
/// The largest write buffer kept between appends.
const KEEP_BUFFER: usize = 256 * 1024;
/// How much of a file a [`Reader`] reads at a time.
const READ_CHUNK: usize = 64 * 1024;
/// The most of a file a [`Reader`]'s batch takes (one record may pass it):
/// a batch of captures, which can be large, holds about this much rather
/// than its count of them.
const BATCH_BYTES: u64 = 1024 * 1024;

/// Which file a record went to.
pub type Generation = u64;

#[derive(Debug)]
pub struct Spool {
    /// Held locked for as long as the spool is open.
    _lock: File,
    current_path: PathBuf,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    file: File,
    generation: Generation,
    /// Records in the current file not yet committed to the database.
    outstanding: u64,
    /// Records appended to the current file.
    appended: u64,
    bytes: u64,
    /// Files no longer appended to, by generation, oldest first.
    retired: BTreeMap<Generation, Retired>,
    /// The most the files may hold together.
    limit: u64,
    /// The last append failed (logged once until one succeeds again).
    failing: bool,
    /// The last append was refused for the bound (logged once until one fits).
    full: bool,
    /// The frames being written, reused so an append does not allocate.
    frames: Vec<u8>,
}

/// A file no longer appended to.
#[derive(Debug, Clone, Copy)]
struct Retired {
    /// Records in it not yet committed, when they are counted: a file
    /// sealed for a [replay](Spool::seal) is removed by the replay, not by
    /// its count.
    outstanding: Option<u64>,
    /// Records appended to it (0 for a file the last run left).
    appended: u64,
    bytes: u64,
}

/// A sealed file of the spool, to be replayed into the database and then
/// removed ([`Spool::replayed`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    generation: Generation,
    path: PathBuf,
}

impl Segment {
    /// Its records, read back whole (what the tests look at; a replay
    /// reads a batch at a time, [`Segment::reader`]).
    #[cfg(test)]
    pub fn read(&self) -> std::io::Result<Leftovers> {
        let mut reader = self.reader()?;
        let mut leftovers = Leftovers::default();
        while let Some(frame) = reader.next_frame()? {
            match frame {
                Frame::Request(record) => leftovers.records.push(*record),
                Frame::Capture(capture) => leftovers.captures.push(*capture),
            }
        }
        leftovers.unreadable = reader.unreadable;
        Ok(leftovers)
    }

    /// Its records, to be read back a batch at a time: a replay holds a
    /// batch, not the file.
    pub fn reader(&self) -> std::io::Result<Reader> {
        Reader::open(&self.path)
    }
}

/// What the spool holds, for health.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Depth {
    /// Records not yet committed, of those this process appended.
    pub records: u64,
    /// Bytes in every file, the bound included.
    pub bytes: u64,
    pub limit: u64,
}

/// What a spool file held: requests that completed but may not have
/// reached the database, and their captures.
#[cfg(test)]
#[derive(Debug, Default)]
pub struct Leftovers {
    pub records: Vec<RequestRecord>,
    pub captures: Vec<CaptureRecord>,
    /// Records that could not be read back: a write cut short by a crash,
    /// or damaged (a run of damaged bytes counts as one).
    pub unreadable: usize,
}

/// What can go in the spool: a request's record or its capture. An event
/// cannot ([`Entry::Unspooled`]): it is lost with the process.
pub trait Spooled {
    fn entry(&self) -> Entry<'_>;
}

/// What a [`Spooled`] value is, as the spool writes it.
pub enum Entry<'a> {
    Request(&'a RequestRecord),
    Capture(&'a CaptureRecord),
    Unspooled,
}

impl Spooled for RequestRecord {
    fn entry(&self) -> Entry<'_> {
        Entry::Request(self)
    }
}

impl Spooled for CaptureRecord {
    fn entry(&self) -> Entry<'_> {
        Entry::Capture(self)
    }
}

impl Spooled for Record {
    fn entry(&self) -> Entry<'_> {
        match self {
            Record::Request(r) => Entry::Request(r),
            Record::Capture(c) => Entry::Capture(c),
            Record::Event(_) => Entry::Unspooled,
        }
    }
}

impl<T: Spooled> Spooled for Box<T> {
    fn entry(&self) -> Entry<'_> {
        (**self).entry()
    }
}

impl Spool {
    /// Opens the spool beside `db_path`, holding at most `limit` bytes;
    /// `None` when another process has it open. What the last run left is
    /// sealed: [`Spool::backlog`] lists it for the caller to replay.
    pub fn open(db_path: &Path, limit: u64) -> std::io::Result<Option<Spool>> {
        let lock = crate::private::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(crate::private::with_suffix(db_path, ".spool.lock"))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => return Ok(None),
            Err(std::fs::TryLockError::Error(e)) => return Err(e),
        }
        let current_path = crate::private::with_suffix(db_path, ".spool");
        let mut retired = BTreeMap::new();
        for (generation, path) in numbered_files(&current_path)? {
            let bytes = std::fs::metadata(&path)?.len();
            retired.insert(generation, Retired { outstanding: None, appended: 0, bytes });
        }
        let mut generation = retired.keys().next_back().map_or(1, |g| g + 1);
        // The last run's current file is sealed under the next number, so
        // that what is appended from now on never mixes with it.
        if std::fs::metadata(&current_path).is_ok_and(|m| m.len() > 0) {
            let bytes = std::fs::metadata(&current_path)?.len();
            std::fs::rename(&current_path, numbered(&current_path, generation))?;
            retired.insert(generation, Retired { outstanding: None, appended: 0, bytes });
            generation += 1;
        }
        let file = crate::private::options().create(true).append(true).open(&current_path)?;
        let state = State {
            file,
            generation,
            outstanding: 0,
            appended: 0,
            bytes: 0,
            retired,
            limit,
            failing: false,
            full: false,
            frames: Vec::new(),
        };
        Ok(Some(Spool { _lock: lock, current_path, state: Mutex::new(state) }))
    }

    /// Appends records in one write. Returns, for each, the generation to
    /// report once it is committed, or `None` if it is not in the spool
    /// (then it is only in the queue, and a failure is logged).
    pub fn append<R: Spooled>(&self, records: &[R]) -> Vec<Option<Generation>> {
        let mut guard = self.lock();
        let state = &mut *guard;
        let mut frames = std::mem::take(&mut state.frames);
        frames.clear();
        let mut encoded: Vec<Encoded> = records.iter().map(|r| push_frame(&mut frames, r.entry())).collect();
        if state.total() + frames.len() as u64 > state.limit && encoded.contains(&Encoded::Capture) {
            leave_out_captures(&mut frames, &mut encoded);
        }
        let written = if state.total() + frames.len() as u64 > state.limit {
            if !state.full {
                warn!(
                    "history spool {}: full ({} MiB, the bound `history.spool_max_size_mb`): completed requests wait in memory for the database",
                    self.current_path.display(),
                    state.limit / (1024 * 1024)
                );
            }
            state.full = true;
            None
        } else {
            state.full = false;
            // One write call: every frame is whole in the file or, after a
            // crash mid-call, the last one written is cut short.
            match state.file.write_all(&frames) {
                Ok(()) => {
                    state.failing = false;
                    let added = encoded.iter().filter(|e| e.is_in()).count() as u64;
                    state.outstanding += added;
                    state.appended += added;
                    state.bytes += frames.len() as u64;
                    let generation = state.generation;
                    // A grown file is retired here too, not only once its
                    // records are committed: while the database is out of
                    // reach nothing is, and a replay removes a file only
                    // once all of it is written.
                    if state.bytes >= ROTATE_BYTES {
                        if let Err(e) = self.retire(state) {
                            warn!("history spool {}: {e}", self.current_path.display());
                        }
                    }
                    Some(generation)
                }
                Err(e) => {
                    if !state.failing {
                        warn!(
                            "history spool {}: cannot append ({e}); completed requests are recorded, but a crash before their commit would lose them",
                            self.current_path.display()
                        );
                    }
                    state.failing = true;
                    None
                }
            }
        };
        // Kept for the next append, unless a burst made it large.
        if frames.capacity() <= KEEP_BUFFER {
            state.frames = frames;
        }
        encoded.into_iter().map(|e| written.filter(|_| e.is_in())).collect()
    }

    /// The writer committed records that went to these generations.
    pub fn committed(&self, generations: &[Generation]) {
        if generations.is_empty() {
            return;
        }
        let mut guard = self.lock();
        let state = &mut *guard;
        for generation in generations {
            if *generation == state.generation {
                state.outstanding = state.outstanding.saturating_sub(1);
            } else if let Some(Retired { outstanding: Some(n), .. }) = state.retired.get_mut(generation) {
                *n = n.saturating_sub(1);
            }
        }
        if let Err(e) = self.tidy(state) {
            warn!("history spool {}: {e}", self.current_path.display());
        }
    }

    /// Seals every file, the current one included when it holds anything:
    /// their records are then the replay's to write, whatever reaches the
    /// writer later (a second write of a record changes nothing).
    pub fn seal(&self) -> std::io::Result<()> {
        let mut guard = self.lock();
        let state = &mut *guard;
        for retired in state.retired.values_mut() {
            retired.outstanding = None;
        }
        if state.bytes > 0 {
            self.retire(state)?;
            if let Some(last) = state.retired.values_mut().next_back() {
                last.outstanding = None;
            }
        }
        Ok(())
    }

    /// The sealed files, oldest first.
    pub fn backlog(&self) -> Vec<Segment> {
        let state = self.lock();
        state
            .retired
            .iter()
            .filter(|(_, r)| r.outstanding.is_none())
            .map(|(&generation, _)| Segment { generation, path: numbered(&self.current_path, generation) })
            .collect()
    }

    /// Every generation below this one is sealed, or gone (replayed, or
    /// removed once every record in it was committed): a record that went
    /// to one is in the database already, or the replay's to write.
    pub fn sealed_below(&self) -> Generation {
        let state = self.lock();
        state.retired.iter().find(|(_, r)| r.outstanding.is_some()).map_or(state.generation, |(&g, _)| g)
    }

    /// A sealed file's records are in the database: it goes.
    pub fn replayed(&self, segment: &Segment) -> std::io::Result<()> {
        let mut state = self.lock();
        state.retired.remove(&segment.generation);
        remove_if_there(&segment.path)
    }

    /// The file appended to now.
    pub fn path(&self) -> &Path {
        &self.current_path
    }

    /// What the spool holds now.
    pub fn depth(&self) -> Depth {
        let state = self.lock();
        // A sealed file counts whole: none of its records is known to be in.
        let records =
            state.outstanding + state.retired.values().map(|r| r.outstanding.unwrap_or(r.appended)).sum::<u64>();
        Depth { records, bytes: state.total(), limit: state.limit }
    }

    /// Drops what is fully committed and rotates a file that has grown.
    fn tidy(&self, state: &mut State) -> std::io::Result<()> {
        let done: Vec<Generation> =
            state.retired.iter().filter(|(_, r)| r.outstanding == Some(0)).map(|(&g, _)| g).collect();
        for generation in done {
            state.retired.remove(&generation);
            remove_if_there(&numbered(&self.current_path, generation))?;
        }
        if state.outstanding == 0 && state.bytes > 0 {
            state.file.set_len(0)?;
            state.bytes = 0;
            state.appended = 0;
        } else if state.bytes >= ROTATE_BYTES {
            self.retire(state)?;
        }
        Ok(())
    }

    /// Moves the current file aside under its generation's number and
    /// starts a new one.
    fn retire(&self, state: &mut State) -> std::io::Result<()> {
        std::fs::rename(&self.current_path, numbered(&self.current_path, state.generation))?;
        let retired = Retired { outstanding: Some(state.outstanding), appended: state.appended, bytes: state.bytes };
        state.retired.insert(state.generation, retired);
        state.file = crate::private::options().create(true).append(true).open(&self.current_path)?;
        state.generation += 1;
        state.outstanding = 0;
        state.appended = 0;
        state.bytes = 0;
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl State {
    fn total(&self) -> u64 {
        self.bytes + self.retired.values().map(|r| r.bytes).sum::<u64>()
    }
}

/// A retired file's name: the spool's, then its generation.
fn numbered(current: &Path, generation: Generation) -> PathBuf {
    crate::private::with_suffix(current, &format!(".{generation}"))
}

/// The retired files beside `current`, by generation.
fn numbered_files(current: &Path) -> std::io::Result<Vec<(Generation, PathBuf)>> {
    let (Some(dir), Some(name)) = (current.parent(), current.file_name().and_then(|n| n.to_str())) else {
        return Ok(Vec::new());
    };
    let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let file_name = entry.file_name();
        let Some(number) = file_name.to_str().and_then(|f| f.strip_prefix(name)).and_then(|f| f.strip_prefix('.'))
        else {
            continue;
        };
        if let Ok(generation) = number.parse::<Generation>() {
            found.push((generation, entry.path()));
        }
    }
    found.sort();
    Ok(found)
}

fn remove_if_there(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// What became of one record in an append's frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoded {
    Request,
    Capture,
    /// Not in the frames: unspoolable, or left out.
    Out,
}

impl Encoded {
    fn is_in(self) -> bool {
        self != Encoded::Out
    }
}

/// Encodes a record as a frame at the end of `frames`; [`Encoded::Out`]
/// (and nothing added) if it cannot be.
fn push_frame(frames: &mut Vec<u8>, entry: Entry<'_>) -> Encoded {
    let start = frames.len();
    // The format byte, then room for the length and checksum, filled in below.
    let (encoded, written) = match entry {
        Entry::Request(record) => {
            frames.push(FRAME_V11);
            frames.extend_from_slice(&[0; FRAME_HEADER - 1]);
            let written = postcard::to_extend(&(record, CacheWrites::of(record)), Tail(frames));
            (Encoded::Request, written.map(drop))
        }
        Entry::Capture(capture) => {
            frames.push(FRAME_CAPTURE_V1);
            frames.extend_from_slice(&[0; FRAME_HEADER - 1]);
            (Encoded::Capture, postcard::to_extend(capture, Tail(frames)).map(drop))
        }
        Entry::Unspooled => return Encoded::Out,
    };
    if let Err(e) = written {
        warn!("history spool: cannot encode a record: {e}");
        frames.truncate(start);
        return Encoded::Out;
    }
    let Ok(len) = u32::try_from(frames.len() - start - FRAME_HEADER) else {
        warn!("history spool: a record of {} bytes is too large to spool", frames.len() - start);
        frames.truncate(start);
        return Encoded::Out;
    };
    let crc = crc32fast::hash(&frames[start + FRAME_HEADER..]);
    frames[start + 1..start + 5].copy_from_slice(&len.to_le_bytes());
    frames[start + 5..start + 9].copy_from_slice(&crc.to_le_bytes());
    encoded
}

/// Takes the captures' frames out of `frames`, keeping the requests': what
/// an append does when everything would not fit under the bound. A
/// capture left out goes to the database by the queue alone.
fn leave_out_captures(frames: &mut Vec<u8>, encoded: &mut [Encoded]) {
    let (mut read, mut kept) = (0, 0);
    for e in encoded.iter_mut().filter(|e| e.is_in()) {
        let len = FRAME_HEADER + frame_len(&frames[read..]);
        if *e == Encoded::Capture {
            *e = Encoded::Out;
        } else {
            frames.copy_within(read..read + len, kept);
            kept += len;
        }
        read += len;
    }
    frames.truncate(kept);
}

/// The payload length a frame's header gives.
fn frame_len(frame: &[u8]) -> usize {
    frame.get(1..5).and_then(|b| b.try_into().ok()).map_or(0, |b| u32::from_le_bytes(b) as usize)
}

/// What a version 9 or 10 frame carries after its record: the cache writes of the
/// request and of each of its attempts, in order. (The compact form of a
/// [`Usage`](crate::protocol::Usage) leaves them out.)
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct CacheWrites {
    request: Option<u64>,
    attempts: Vec<Option<u64>>,
}

impl CacheWrites {
    fn of(record: &RequestRecord) -> CacheWrites {
        CacheWrites {
            request: record.usage.cache_write_tokens,
            attempts: record.attempts.iter().map(|a| a.usage.cache_write_tokens).collect(),
        }
    }

    fn apply(self, record: &mut RequestRecord) {
        record.usage.cache_write_tokens = self.request;
        for (a, written) in record.attempts.iter_mut().zip(self.attempts) {
            a.usage.cache_write_tokens = written;
        }
    }
}

/// Lets postcard add to the end of a buffer it does not own, so a record
/// that fails to encode leaves the frames before it in place.
struct Tail<'a>(&'a mut Vec<u8>);

impl Extend<u8> for Tail<'_> {
    fn extend<I: IntoIterator<Item = u8>>(&mut self, bytes: I) {
        self.0.extend(bytes);
    }
}

/// A spool file read from start to end a window at a time, so that a
/// replay holds a batch of its records, never the whole file.
pub struct Reader {
    window: Window,
    /// A file of JSON lines, from before frames.
    json: bool,
    requests: usize,
    unreadable: usize,
}

/// What the next bytes of a file hold.
enum Next {
    Frame(Frame),
    /// A record that could not be read back.
    Unreadable,
    End,
}

impl Reader {
    fn open(path: &Path) -> std::io::Result<Reader> {
        let mut window = Window::open(path)?;
        // A file is written in one format throughout: the one a run finds is
        // sealed at the start, and nothing new is appended to it.
        let json = window.fill(1)?.first() == Some(&b'{');
        Ok(Reader { window, json, requests: 0, unreadable: 0 })
    }

    /// The next records, in the order they were written: at most `max`,
    /// and none past the first that brings the batch to [`BATCH_BYTES`] of
    /// the file; `None` at its end.
    pub fn batch(&mut self, max: usize) -> std::io::Result<Option<Vec<Record>>> {
        let (mut batch, start) = (Vec::new(), self.window.consumed);
        while batch.len() < max.max(1) && (batch.is_empty() || self.window.consumed - start < BATCH_BYTES) {
            match self.next_frame()? {
                Some(Frame::Request(record)) => batch.push(Record::Request(record)),
                Some(Frame::Capture(capture)) => batch.push(Record::Capture(capture)),
                None => break,
            }
        }
        Ok((!batch.is_empty()).then_some(batch))
    }

    /// Requests read so far.
    pub fn requests(&self) -> usize {
        self.requests
    }

    /// Records that could not be read back so far: a write cut short by a
    /// crash, or damaged (a run of damaged bytes counts as one).
    pub fn unreadable(&self) -> usize {
        self.unreadable
    }

    /// The next record that reads, counting those that do not; `None` at
    /// the end of the file.
    fn next_frame(&mut self) -> std::io::Result<Option<Frame>> {
        loop {
            let next = if self.json { self.window.line()? } else { self.window.frame()? };
            match next {
                Next::Frame(frame) => {
                    if let Frame::Request(_) = frame {
                        self.requests += 1;
                    }
                    return Ok(Some(frame));
                }
                Next::Unreadable => self.unreadable += 1,
                Next::End => return Ok(None),
            }
        }
    }
}

/// A file read a window at a time: its bytes not yet consumed, as many as
/// asked for unless the file ends first.
struct Window {
    file: Box<dyn Read + Send>,
    /// What is left of the file beyond `buf`.
    unread: u64,
    buf: Vec<u8>,
    /// Where the bytes not yet consumed start in `buf`.
    start: usize,
    /// Bytes consumed since the start of the file.
    consumed: u64,
}

impl Window {
    /// A file that is not there reads as empty.
    fn open(path: &Path) -> std::io::Result<Window> {
        let (file, unread): (Box<dyn Read + Send>, u64) = match File::open(path) {
            Ok(file) => {
                let len = file.metadata()?.len();
                (Box::new(file), len)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Box::new(std::io::empty()), 0),
            Err(e) => return Err(e),
        };
        Ok(Window { file, unread, buf: Vec::new(), start: 0, consumed: 0 })
    }

    /// The bytes not yet consumed: at least `n` of them, unless the file
    /// ends first.
    fn fill(&mut self, n: usize) -> std::io::Result<&[u8]> {
        let have = self.buf.len() - self.start;
        if have < n && self.unread > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
            let want = ((n.max(READ_CHUNK) - have) as u64).min(self.unread);
            self.buf.reserve(want as usize);
            let got = (&mut self.file).take(want).read_to_end(&mut self.buf)? as u64;
            // A file found shorter than it was when opened ends here.
            self.unread = if got < want { 0 } else { self.unread - got };
            if self.unread == 0 {
                // Closed once read, as a replay removes it next.
                self.file = Box::new(std::io::empty());
            }
        }
        Ok(&self.buf[self.start..])
    }

    /// Bytes not yet consumed, in the window and in the file beyond it.
    fn left(&self) -> u64 {
        (self.buf.len() - self.start) as u64 + self.unread
    }

    fn consume(&mut self, n: usize) {
        self.start += n;
        self.consumed += n as u64;
    }

    /// The frame the window starts with, consumed.
    fn frame(&mut self) -> std::io::Result<Next> {
        if self.left() == 0 {
            return Ok(Next::End);
        }
        if let Some((read, len)) = self.whole_frame()? {
            self.consume(len);
            return Ok(read.map_or(Next::Unreadable, Next::Frame));
        }
        // Cut short or damaged (a failed append leaves part of a frame
        // before the next one): counted once, and reading resumes at the
        // next whole frame.
        self.consume(1);
        while self.left() > 0 && self.whole_frame()?.is_none() {
            self.consume(1);
        }
        Ok(Next::Unreadable)
    }

    /// The whole frame the window starts with, as [`read_frame`] reads it,
    /// and its length, not consumed; `None` if it is cut short or damaged.
    fn whole_frame(&mut self) -> std::io::Result<Option<(Option<Frame>, usize)>> {
        let len = FRAME_HEADER + frame_len(self.fill(FRAME_HEADER)?);
        // Longer than the rest of the file: cut short, and not read.
        if len as u64 > self.left() {
            return Ok(None);
        }
        Ok(read_frame(self.fill(len)?).map(|(read, _)| (read, len)))
    }

    /// The next line that is not blank, of a file of JSON lines (one
    /// request each), consumed.
    fn line(&mut self) -> std::io::Result<Next> {
        loop {
            let len = self.line_len()?;
            if len == 0 {
                return Ok(Next::End);
            }
            let line = self.fill(len)?[..len].trim_ascii();
            let next = (!line.is_empty()).then(|| match serde_json::from_slice(line) {
                Ok(record) => Next::Frame(Frame::Request(Box::new(record))),
                Err(_) => Next::Unreadable,
            });
            self.consume(len);
            if let Some(next) = next {
                return Ok(next);
            }
        }
    }

    /// The length of the line the window starts with, its newline
    /// included (the file's last line may have none); 0 at the end.
    fn line_len(&mut self) -> std::io::Result<usize> {
        let mut want = READ_CHUNK;
        loop {
            let bytes = self.fill(want)?;
            if let Some(i) = bytes.iter().position(|b| *b == b'\n') {
                return Ok(i + 1);
            }
            if bytes.len() < want {
                return Ok(bytes.len());
            }
            want = 2 * bytes.len();
        }
    }
}

/// A frame read back.
enum Frame {
    Request(Box<RequestRecord>),
    Capture(Box<CaptureRecord>),
}

/// One frame: its record (`None` if it does not decode) and what follows;
/// `None` if the frame is cut short or damaged.
fn read_frame(bytes: &[u8]) -> Option<(Option<Frame>, &[u8])> {
    let (header, rest) = bytes.split_at_checked(FRAME_HEADER)?;
    let upgrade: &[u8] = match header[0] {
        FRAME_V1 => UPGRADE_V1,
        FRAME_V2 => UPGRADE_V2,
        FRAME_V3 => UPGRADE_V3,
        FRAME_V4 => UPGRADE_V4,
        FRAME_V5 => UPGRADE_V5,
        FRAME_V6 => UPGRADE_V6,
        FRAME_V7 => UPGRADE_V7,
        FRAME_V8 => UPGRADE_V8,
        FRAME_V9 | FRAME_V10 | FRAME_V11 | FRAME_CAPTURE_V1 => &[],
        _ => return None,
    };
    let len = u32::from_le_bytes(header[1..5].try_into().ok()?) as usize;
    let crc = u32::from_le_bytes(header[5..9].try_into().ok()?);
    let (payload, after) = rest.split_at_checked(len)?;
    if crc32fast::hash(payload) != crc {
        return None;
    }
    if header[0] == FRAME_CAPTURE_V1 {
        let capture = postcard::from_bytes(payload).ok().map(|c| Frame::Capture(Box::new(c)));
        return Some((capture, after));
    }
    let with_writes = |(mut record, writes): (RequestRecord, CacheWrites)| {
        writes.apply(&mut record);
        record
    };
    let record = match header[0] {
        FRAME_V11 => postcard::from_bytes::<(RequestRecord, CacheWrites)>(payload).ok().map(with_writes),
        FRAME_V10 => postcard::from_bytes::<(Older<1>, CacheWrites)>(payload).ok().map(|(r, w)| with_writes((r.0, w))),
        FRAME_V9 => postcard::from_bytes::<(Older<2>, CacheWrites)>(payload).ok().map(|(r, w)| with_writes((r.0, w))),
        _ => {
            let mut upgraded = payload.to_vec();
            upgraded.extend_from_slice(upgrade);
            postcard::from_bytes(&upgraded).ok()
        }
    };
    Some((record.map(|r| Frame::Request(Box::new(r))), after))
}

/// A record as a version that lacked its last `MISSING` fields wrote it:
/// postcard writes a struct as its fields in order, with no count, so such
/// a record is the current one cut short. Each field it lacks reads as its
/// `#[serde(default)]`, which every field added since version 4 has.
struct Older<const MISSING: usize>(RequestRecord);

impl<'de, const MISSING: usize> serde::Deserialize<'de> for Older<MISSING> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        RequestRecord::deserialize(Shorter { inner: d, missing: MISSING }).map(Older)
    }
}

/// A deserializer that hands a struct's reader all but its last `missing`
/// fields to read; the reader then fills those in with their defaults.
/// Everything else goes to `inner` as it is.
struct Shorter<D> {
    inner: D,
    missing: usize,
}

impl<'de, D: serde::Deserializer<'de>> serde::Deserializer<'de> for Shorter<D> {
    type Error = D::Error;

    fn deserialize_struct<V: serde::de::Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        let (kept, _) = fields.split_at(fields.len().saturating_sub(self.missing));
        self.inner.deserialize_struct(name, kept, visitor)
    }

    fn deserialize_any<V: serde::de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_any(visitor)
    }

    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option unit
        unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::record::sample_request;
    use crate::protocol::usage::Usage;

    /// A directory for a database `h.db`: its path, and its spool file's.
    fn paths() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let (db, file) = (dir.path().join("h.db"), dir.path().join("h.db.spool"));
        (dir, db, file)
    }

    /// Appends one record on its own.
    fn append(spool: &Spool, record: &RequestRecord) -> Option<Generation> {
        spool.append(std::slice::from_ref(record)).pop().flatten()
    }

    fn open(db: &Path) -> Spool {
        Spool::open(db, crate::ground::limits::SPOOL_BYTES).unwrap().unwrap()
    }

    /// Everything sealed in `spool`, read back in order.
    fn backlog(spool: &Spool) -> Leftovers {
        let mut all = Leftovers::default();
        for segment in spool.backlog() {
            let read = segment.read().unwrap();
            all.records.extend(read.records);
            all.captures.extend(read.captures);
            all.unreadable += read.unreadable;
        }
        all
    }

    /// What the next start finds: the ids it replays, and the records it
    /// could not read.
    fn replayed(db: &Path) -> (Vec<String>, usize) {
        let leftovers = backlog(&open(db));
        (leftovers.records.into_iter().map(|r| r.id).collect(), leftovers.unreadable)
    }

    /// Opens the spool and replays (here: reads and removes) what it holds.
    fn open_replayed(db: &Path) -> (Spool, Leftovers) {
        let spool = open(db);
        let leftovers = backlog(&spool);
        for segment in spool.backlog() {
            spool.replayed(&segment).unwrap();
        }
        (spool, leftovers)
    }

    fn record(id: &str) -> RequestRecord {
        RequestRecord {
            usage: Usage {
                input_tokens: Some(3),
                output_tokens: Some(4),
                cached_tokens: None,
                cache_write_tokens: None,
            },
            cost_usd: Some(0.5),
            error: Some("line\nbreak \"quoted\"".into()),
            ..sample_request(id)
        }
    }

    /// Every field spelled out, so that a field added to a record stops this
    /// from compiling, and the bytes, so that a reordered or retyped one fails
    /// it: either way the frame format needs a new byte (see [`FRAME_V2`]).
    #[test]
    fn the_frame_format_is_pinned() {
        use crate::ground::outcome::AttemptOutcome;
        use crate::ground::outcome::Reason;
        use crate::ground::outcome::RequestOutcome;
        use crate::history::record::AttemptRecord;
        let attempt = AttemptRecord {
            seq: 0,
            provider: "p".into(),
            key_label: Some("k".into()),
            model: "m".into(),
            reason: Reason::Fallback,
            fallback_from: Some("q".into()),
            started_at_ms: 1,
            offset_ms: 0.5,
            timeout_ms: Some(2.0),
            backoff_ms: 0.0,
            duration_ms: Some(3.0),
            ttfb_ms: None,
            ttft_ms: Some(4.0),
            status: Some(200),
            outcome: AttemptOutcome::Ok,
            retry_after_ms: None,
            breaker_state: Some("closed".into()),
            error: None,
            usage: Usage {
                input_tokens: Some(5),
                output_tokens: Some(6),
                cached_tokens: None,
                cache_write_tokens: Some(2),
            },
        };
        let request = RequestRecord {
            id: "i".into(),
            correlation_id: "c".into(),
            started_at_ms: 1,
            finished_at_ms: 2,
            user_agent: Some("u".into()),
            endpoint: "/e".into(),
            model: Some("m".into()),
            streamed: true,
            outcome: RequestOutcome::Ok,
            status: Some(200),
            provider: Some("p".into()),
            provider_model: Some("m".into()),
            fallback: true,
            duration_ms: 7.0,
            ttft_ms: None,
            usage: Usage {
                input_tokens: Some(5),
                output_tokens: Some(6),
                cached_tokens: Some(1),
                cache_write_tokens: Some(3),
            },
            cost_usd: Some(0.25),
            error_code: None,
            error: None,
            request_body: None,
            response_body: Some("b".into()),
            attempts: vec![attempt],
            translations: vec![crate::history::record::AttemptTranslation {
                seq: 0,
                client: crate::protocol::Format::Messages,
                provider: crate::protocol::Format::Chat,
            }],
            cache: Some(crate::ground::outcome::CacheStatus::Stale),
            saved_usd: Some(0.5),
            dropped: vec![crate::history::record::AttemptDropped { seq: 0, fields: vec!["f".into()] }],
            instance: Some("gw".into()),
            routing: vec![crate::history::record::AttemptRouting {
                seq: 0,
                routing: crate::policy::order::Routing {
                    latency_ms: Some(12.5),
                    weight: Some(9),
                    ..crate::policy::order::Routing::by(crate::policy::order::Strategy::Latency)
                },
            }],
            member: Some("al".into()),
            session: Some("s".into()),
            turn: Some(true),
            trace_id: Some("0af7651916cd43dd8448eb211c80319c".into()),
            device: Some("d".into()),
        };
        let hex: String = postcard::to_allocvec(&request).unwrap().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            format!("{PINNED_V1}{PINNED_V2_TAIL}{PINNED_V3_TAIL}{PINNED_V4_TAIL}{PINNED_V5_TAIL}{PINNED_V6_TAIL}{PINNED_V7_TAIL}{PINNED_V8_TAIL}{PINNED_V9_TAIL}{PINNED_V10_TAIL}{PINNED_V11_TAIL}"),
            "the record's shape changed: give frames a new format byte and keep reading the old"
        );
        assert_eq!(postcard::from_bytes::<RequestRecord>(&postcard::to_allocvec(&request).unwrap()).unwrap().id, "i");
        // What a version 9 or 10 frame carries behind the record: the request's
        // cache writes (`01 03`), one attempt's (`01`, `01 02`).
        let writes: String =
            postcard::to_allocvec(&CacheWrites::of(&request)).unwrap().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(writes, PINNED_V9_WRITES);
        let mut frames = Vec::new();
        assert_eq!(push_frame(&mut frames, Entry::Request(&request)), Encoded::Request);
        let (read, rest) = read_request(&frames).unwrap();
        let read = read.expect("a version 11 frame decodes");
        assert!(rest.is_empty());
        assert_eq!(
            (read.usage, read.attempts[0].usage, read.turn),
            (request.usage, request.attempts[0].usage, Some(true))
        );
        assert_eq!((read.trace_id, read.device), (request.trace_id, request.device));
    }

    /// A request's frame read back, as [`read_frame`] gives it.
    fn read_request(bytes: &[u8]) -> Option<(Option<RequestRecord>, &[u8])> {
        let (read, rest) = read_frame(bytes)?;
        let record = read.map(|r| match r {
            Frame::Request(r) => *r,
            Frame::Capture(_) => panic!("a capture where a request was expected"),
        });
        Some((record, rest))
    }

    /// A frame of `version` whose payload is the hex `payload`.
    fn old_frame(version: u8, payload: &str) -> Vec<u8> {
        let payload: Vec<u8> =
            (0..payload.len()).step_by(2).map(|i| u8::from_str_radix(&payload[i..i + 2], 16).unwrap()).collect();
        let mut frame = vec![version];
        frame.extend_from_slice(&u32::try_from(payload.len()).unwrap().to_le_bytes());
        frame.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
        frame.extend_from_slice(&payload);
        frame
    }

    /// A frame version 1 wrote, before `translations`, still reads: as the
    /// same record with none, and no cache status.
    #[test]
    fn a_version_1_frame_reads_with_no_translations() {
        let frame = old_frame(FRAME_V1, PINNED_V1);
        let (record, rest) = read_request(&frame).unwrap();
        let record = record.expect("a version 1 payload decodes");
        assert!(rest.is_empty());
        assert_eq!((record.id.as_str(), record.attempts.len(), record.translations.len()), ("i", 1, 0));
        assert_eq!(record.attempts[0].breaker_state.as_deref(), Some("closed"));
        assert_eq!((record.cache, record.saved_usd), (None, None));
    }

    /// A frame version 2 wrote, before the cache's fields, reads with them empty.
    #[test]
    fn a_version_2_frame_reads_with_no_cache_status() {
        let frame = old_frame(FRAME_V2, &format!("{PINNED_V1}{PINNED_V2_TAIL}"));
        let (record, rest) = read_request(&frame).unwrap();
        let record = record.expect("a version 2 payload decodes");
        assert!(rest.is_empty());
        assert_eq!((record.id.as_str(), record.translations.len()), ("i", 1));
        assert_eq!((record.cache, record.saved_usd), (None, None));
    }

    /// A skipped attempt is written as the variant appended last: the
    /// indexes before it, which older frames hold, mean what they did, and
    /// a record with one goes through the spool whole.
    #[test]
    fn a_skipped_attempt_takes_the_next_index_and_reads_back() {
        use crate::ground::outcome::AttemptOutcome;
        assert_eq!(postcard::to_allocvec(&AttemptOutcome::Canceled).unwrap(), [8]);
        assert_eq!(postcard::to_allocvec(&AttemptOutcome::Skipped).unwrap(), [9]);
        let (_dir, db, _file) = paths();
        let spool = open(&db);
        let mut r = record("s");
        // As the admin API shows a skip: no call, no time, a reason.
        r.attempts.push(
            serde_json::from_value(serde_json::json!({
                "seq": 1, "provider": "p", "key_label": null, "model": "m", "reason": "first",
                "fallback_from": null, "started_at": 1, "offset_ms": 0.0, "timeout_ms": null, "backoff_ms": 0.0,
                "duration_ms": 0.0, "ttfb_ms": null, "ttft_ms": null, "status": null, "outcome": "skipped",
                "retry_after_ms": null, "breaker_state": null, "error": "`tools`: none",
                "usage": { "input_tokens": null, "output_tokens": null, "cached_tokens": null },
            }))
            .unwrap(),
        );
        append(&spool, &r).unwrap();
        drop(spool);
        let (_spool, leftovers) = open_replayed(&db);
        let a = &leftovers.records[0].attempts[0];
        assert_eq!((a.outcome, a.error.as_deref()), (AttemptOutcome::Skipped, Some("`tools`: none")));
    }

    /// What version 2 appends to the sample: one translation (`01`), seq 0,
    /// messages (`02`) to chat (`00`).
    const PINNED_V2_TAIL: &str = "01000200";

    /// What version 3 appends: a cache status (`01` for some, then `02`:
    /// stale, the third variant), then a saved cost (`01`, then 0.5 as a
    /// little-endian f64).
    const PINNED_V3_TAIL: &str = concat!("0102", "01000000000000e03f");

    /// What version 4 appends: one attempt's drops (`01`), seq 0, one
    /// field (`01`), `f` (`01 66`).
    const PINNED_V4_TAIL: &str = "0100010166";
    /// What version 5 appended: `instance`.
    const PINNED_V5_TAIL: &str = "01026777";
    /// What version 6 appended: one attempt's routing (`01`), seq 0,
    /// latency (`01`), rank 0, not explored, 12.5 ms (`01` and the f64),
    /// no load, no price, weight 9 (`01 09`).
    const PINNED_V6_TAIL: &str = concat!("0100", "01", "00", "00", "010000000000002940", "00", "00", "0109");

    /// What version 7 appended: `member` (`01`, two bytes, `al`).
    const PINNED_V7_TAIL: &str = "0102616c";

    /// What version 8 appended: `session` (`01`, one byte, `s`).
    const PINNED_V8_TAIL: &str = "010173";

    /// What version 9 appended to the record: `turn` (`01`, true `01`).
    const PINNED_V9_TAIL: &str = "0101";
    /// And put behind it: [`CacheWrites`].
    const PINNED_V9_WRITES: &str = "0103010102";

    /// What version 10 appended to the record: `trace_id` (`01`, 32 bytes
    /// `20`, the id's digits as text).
    const PINNED_V10_TAIL: &str = "01203061663736353139313663643433646438343438656232313163383033313963";

    /// What version 11 appended to the record: `device` (`01`, one byte, `d`).
    const PINNED_V11_TAIL: &str = "010164";

    /// A frame version 10 wrote reads with no device, its trace id and
    /// cache writes as they were.
    #[test]
    fn a_version_10_frame_reads_with_no_device() {
        let payload = format!(
            "{PINNED_V1}{PINNED_V2_TAIL}{PINNED_V3_TAIL}{PINNED_V4_TAIL}{PINNED_V5_TAIL}{PINNED_V6_TAIL}{PINNED_V7_TAIL}{PINNED_V8_TAIL}{PINNED_V9_TAIL}{PINNED_V10_TAIL}{PINNED_V9_WRITES}"
        );
        let frame = old_frame(FRAME_V10, &payload);
        let (record, rest) = read_request(&frame).unwrap();
        let record = record.expect("a version 10 payload decodes");
        assert!(rest.is_empty());
        assert_eq!(record.trace_id.as_deref(), Some("0af7651916cd43dd8448eb211c80319c"));
        assert_eq!(record.device, None);
        assert_eq!((record.usage.cache_write_tokens, record.attempts[0].usage.cache_write_tokens), (Some(3), Some(2)));
    }

    /// A frame version 9 wrote reads with no trace id, its turn and cache
    /// writes as they were: the writes behind the record are not taken for
    /// its missing field.
    #[test]
    fn a_version_9_frame_reads_with_no_trace_id() {
        let payload = format!(
            "{PINNED_V1}{PINNED_V2_TAIL}{PINNED_V3_TAIL}{PINNED_V4_TAIL}{PINNED_V5_TAIL}{PINNED_V6_TAIL}{PINNED_V7_TAIL}{PINNED_V8_TAIL}{PINNED_V9_TAIL}{PINNED_V9_WRITES}"
        );
        let frame = old_frame(FRAME_V9, &payload);
        let (record, rest) = read_request(&frame).unwrap();
        let record = record.expect("a version 9 payload decodes");
        assert!(rest.is_empty());
        assert_eq!((record.session.as_deref(), record.turn, record.trace_id), (Some("s"), Some(true), None));
        assert_eq!((record.usage.cache_write_tokens, record.attempts[0].usage.cache_write_tokens), (Some(3), Some(2)));
    }

    /// A frame version 8 wrote reads with no turn, and no cache writes.
    #[test]
    fn a_version_8_frame_reads_with_no_turn_and_no_cache_writes() {
        let payload = format!(
            "{PINNED_V1}{PINNED_V2_TAIL}{PINNED_V3_TAIL}{PINNED_V4_TAIL}{PINNED_V5_TAIL}{PINNED_V6_TAIL}{PINNED_V7_TAIL}{PINNED_V8_TAIL}"
        );
        let frame = old_frame(FRAME_V8, &payload);
        let (record, rest) = read_request(&frame).unwrap();
        let record = record.expect("a version 8 payload decodes");
        assert!(rest.is_empty());
        assert_eq!((record.session.as_deref(), record.turn), (Some("s"), None));
        assert_eq!((record.usage.cached_tokens, record.usage.cache_write_tokens), (Some(1), None));
    }

    #[test]
    fn a_version_7_frame_reads_with_no_session() {
        let payload = format!(
            "{PINNED_V1}{PINNED_V2_TAIL}{PINNED_V3_TAIL}{PINNED_V4_TAIL}{PINNED_V5_TAIL}{PINNED_V6_TAIL}{PINNED_V7_TAIL}"
        );
        let frame = old_frame(FRAME_V7, &payload);
        let (record, rest) = read_request(&frame).unwrap();
        let record = record.expect("a version 7 payload decodes");
        assert!(rest.is_empty());
        assert_eq!((record.member.as_deref(), record.session), (Some("al"), None));
    }

    #[test]
    fn a_version_6_frame_reads_with_no_member() {
        let payload =
            format!("{PINNED_V1}{PINNED_V2_TAIL}{PINNED_V3_TAIL}{PINNED_V4_TAIL}{PINNED_V5_TAIL}{PINNED_V6_TAIL}");
        let frame = old_frame(FRAME_V6, &payload);
        let (record, rest) = read_request(&frame).unwrap();
        let record = record.expect("a version 6 payload decodes");
        assert!(rest.is_empty());
        assert_eq!((record.routing.len(), record.member), (1, None));
    }

    #[test]
    fn a_version_5_frame_reads_with_no_routing() {
        let payload = format!("{PINNED_V1}{PINNED_V2_TAIL}{PINNED_V3_TAIL}{PINNED_V4_TAIL}{PINNED_V5_TAIL}");
        let frame = old_frame(FRAME_V5, &payload);
        let (record, rest) = read_request(&frame).unwrap();
        let record = record.expect("a version 5 payload decodes");
        assert!(rest.is_empty());
        assert_eq!((record.instance.as_deref(), record.routing.len()), (Some("gw"), 0));
    }

    #[test]
    fn a_version_4_frame_reads_with_no_instance() {
        let payload = format!("{PINNED_V1}{PINNED_V2_TAIL}{PINNED_V3_TAIL}{PINNED_V4_TAIL}");
        let frame = old_frame(FRAME_V4, &payload);
        let (record, rest) = read_request(&frame).unwrap();
        let record = record.expect("a version 4 payload decodes");
        assert!(rest.is_empty());
        assert_eq!((record.id.as_str(), record.dropped.len(), record.instance), ("i", 1, None));
    }

    /// A frame version 3 wrote, before the drops, reads with none.
    #[test]
    fn a_version_3_frame_reads_with_no_drops() {
        let frame = old_frame(FRAME_V3, &format!("{PINNED_V1}{PINNED_V2_TAIL}{PINNED_V3_TAIL}"));
        let (record, rest) = read_request(&frame).unwrap();
        let record = record.expect("a version 3 payload decodes");
        assert!(rest.is_empty());
        assert_eq!((record.id.as_str(), record.saved_usd, record.dropped.len()), ("i", Some(0.5), 0));
    }

    /// Version 1 of the frame payload: the sample record above, without
    /// its `translations`.
    const PINNED_V1: &str = concat!(
        "016901630204010175022f6501016d010001c80101017001016d010000000000001c4000010501060101010000000000",
        "00d03f0000000101620100017001016b016d0201017102000000000000e03f0100000000000000400000000000000000",
        "0100000000000008400001000000000000104001c80100000106636c6f736564000105010600",
    );

    fn capture(id: &str, size: usize) -> CaptureRecord {
        CaptureRecord {
            request_id: id.into(),
            started_at_ms: 1,
            replay_of: Some("o".into()),
            data: (0..size).map(|i| (i % 251) as u8).collect(),
        }
    }

    /// A capture's frame: its own format byte, and the record's bytes
    /// pinned (id, start as a zigzag varint, replay_of, then the data as
    /// length and bytes), so a change of its shape fails here.
    #[test]
    fn the_capture_frame_is_pinned() {
        let c = capture("r", 3);
        let hex: String = postcard::to_allocvec(&c).unwrap().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "01720201016f03000102", "a capture's shape changed: give it a new format byte");
        let frame = old_frame(FRAME_CAPTURE_V1, &hex);
        let Some((Some(Frame::Capture(read)), rest)) = read_frame(&frame) else { panic!("a capture frame reads") };
        assert!(rest.is_empty());
        assert_eq!(*read, c);
        const { assert!(FRAME_CAPTURE_V1 > FRAME_V11 && FRAME_CAPTURE_V1 != b'{', "away from requests' versions and JSON") };
    }

    /// A request and its capture go in one append and both read back on
    /// the next open; committed, they leave nothing.
    #[test]
    fn a_capture_is_spooled_with_its_request() {
        let (_dir, db, file) = paths();
        let spool = open(&db);
        let batch = [Record::Request(Box::new(record("a"))), Record::Capture(Box::new(capture("a", 5000)))];
        let gens = spool.append(&batch);
        assert_eq!(gens, [Some(1), Some(1)]);
        assert_eq!(spool.depth().records, 2, "each frame counted until committed");
        drop(spool);
        let (spool, leftovers) = open_replayed(&db);
        assert_eq!(leftovers.records.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["a"]);
        assert!(leftovers.captures == [capture("a", 5000)], "the capture reads back whole");
        assert_eq!(leftovers.unreadable, 0);
        let gens: Vec<_> = spool.append(&batch).into_iter().flatten().collect();
        spool.committed(&gens);
        assert_eq!(std::fs::metadata(&file).unwrap().len(), 0);
    }

    /// A capture is counted in bytes towards the bound; when a write would
    /// pass it, the captures stay out and the requests go in.
    #[test]
    fn at_the_bound_captures_give_way_to_requests() {
        let (_dir, db, _file) = paths();
        let spool = Spool::open(&db, 8 * 1024).unwrap().unwrap();
        let small = [Record::Request(Box::new(record("a"))), Record::Capture(Box::new(capture("a", 1024)))];
        assert_eq!(spool.append(&small), [Some(1), Some(1)]);
        assert!(spool.depth().bytes > 1024, "the capture's bytes count");
        let big = [Record::Request(Box::new(record("b"))), Record::Capture(Box::new(capture("b", 16 * 1024)))];
        assert_eq!(spool.append(&big), [Some(1), None], "the capture would pass the bound");
        drop(spool);
        let leftovers = backlog(&open(&db));
        let ids: Vec<_> = leftovers.records.iter().map(|r| r.id.as_str()).collect();
        assert_eq!((ids.as_slice(), leftovers.captures.len(), leftovers.unreadable), (["a", "b"].as_slice(), 1, 0));
    }

    /// A file is read back a batch at a time, each record once and in the
    /// order written: a batch holds at most the count asked for, and ends
    /// at the record that brings it to [`BATCH_BYTES`] of the file.
    #[test]
    fn a_file_is_read_back_in_bounded_batches_in_order() {
        let (_dir, db, _file) = paths();
        let spool = open(&db);
        let big = BATCH_BYTES as usize * 6 / 10;
        let mut written = Vec::new();
        for i in 0..7 {
            written.push(Record::Request(Box::new(record(&format!("r{i}")))));
            if i < 2 {
                written.push(Record::Capture(Box::new(capture(&format!("r{i}"), big))));
            }
        }
        assert!(spool.append(&written).iter().all(Option::is_some));
        spool.seal().unwrap();
        let [segment] = spool.backlog().try_into().unwrap();
        let name = |r: &Record| match r {
            Record::Request(r) => format!("request {}", r.id),
            Record::Capture(c) => format!("capture {} of {}", c.request_id, c.data.len()),
            Record::Event(_) => "event".into(),
        };
        for (max, sizes) in [(100, vec![4, 5]), (2, vec![2, 2, 2, 2, 1])] {
            let mut reader = segment.reader().unwrap();
            let (mut read, mut batches) = (Vec::new(), Vec::new());
            while let Some(batch) = reader.batch(max).unwrap() {
                batches.push(batch.len());
                read.extend(batch.iter().map(name));
            }
            assert_eq!(read, written.iter().map(name).collect::<Vec<_>>(), "max {max}");
            assert_eq!(batches, sizes, "max {max}: two large captures end the first batch");
            assert_eq!((reader.requests(), reader.unreadable()), (7, 0));
        }
    }

    #[test]
    fn what_was_not_committed_is_there_on_the_next_open() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("h.db");
        let (spool, leftovers) = open_replayed(&db);
        assert!(leftovers.records.is_empty());
        let a = append(&spool, &record("a")).unwrap();
        append(&spool, &record("b")).unwrap();
        spool.committed(&[a]);
        drop(spool);
        let (_spool, leftovers) = open_replayed(&db);
        let ids: Vec<_> = leftovers.records.iter().map(|r| r.id.as_str()).collect();
        // Both stay until the file is fully committed; replay is idempotent.
        assert_eq!(ids, ["a", "b"]);
        assert_eq!(leftovers.records[0].error.as_deref(), Some("line\nbreak \"quoted\""));
        assert_eq!(leftovers.records[0].usage.output_tokens, Some(4));
    }

    #[test]
    fn records_appended_together_are_each_kept_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("h.db");
        let spool = open(&db);
        let gens = spool.append(&[record("a"), record("b"), record("c")]);
        assert_eq!(gens, [Some(1), Some(1), Some(1)]);
        // Two of three committed: the file stays, and holds all three.
        spool.committed(&[1, 1]);
        drop(spool);
        let (spool, leftovers) = open_replayed(&db);
        let ids: Vec<_> = leftovers.records.iter().map(|r| r.id.as_str()).collect();
        assert_eq!((ids.as_slice(), leftovers.unreadable), (["a", "b", "c"].as_slice(), 0));
        // All three committed: the file is emptied.
        let gens: Vec<_> = spool.append(&[record("a"), record("b"), record("c")]).into_iter().flatten().collect();
        spool.committed(&gens);
        assert_eq!(std::fs::metadata(dir.path().join("h.db.spool")).unwrap().len(), 0);
    }

    #[test]
    fn a_fully_committed_spool_is_emptied() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("h.db");
        let spool = open(&db);
        let gens: Vec<_> = ["a", "b"].iter().filter_map(|id| append(&spool, &record(id))).collect();
        spool.committed(&gens);
        assert_eq!(std::fs::metadata(dir.path().join("h.db.spool")).unwrap().len(), 0);
        drop(spool);
        assert!(open_replayed(&db).1.records.is_empty());
    }

    #[test]
    fn a_record_cut_short_by_a_crash_is_skipped_and_counted() {
        let (_dir, db, file) = paths();
        let spool = open(&db);
        append(&spool, &record("whole")).unwrap();
        append(&spool, &record("torn")).unwrap();
        drop(spool);
        let len = std::fs::metadata(&file).unwrap().len();
        std::fs::OpenOptions::new().write(true).open(&file).unwrap().set_len(len - 10).unwrap();
        let (ids, unreadable) = replayed(&db);
        assert_eq!(ids, ["whole"]);
        assert_eq!(unreadable, 1);
    }

    #[test]
    fn a_damaged_record_is_caught_by_its_checksum_and_skipped() {
        let (_dir, db, file) = paths();
        let spool = open(&db);
        append(&spool, &record("good")).unwrap();
        let first = std::fs::metadata(&file).unwrap().len();
        append(&spool, &record("damaged")).unwrap();
        append(&spool, &record("after")).unwrap();
        drop(spool);
        let mut bytes = std::fs::read(&file).unwrap();
        bytes[first as usize + FRAME_HEADER + 3] ^= 0x55;
        std::fs::write(&file, &bytes).unwrap();
        let (ids, unreadable) = replayed(&db);
        assert_eq!(ids, ["good", "after"], "reading resumes at the next whole frame");
        assert_eq!(unreadable, 1);
    }

    #[test]
    fn records_after_a_partly_written_frame_are_read() {
        let (_dir, db, file) = paths();
        let spool = open(&db);
        append(&spool, &record("before")).unwrap();
        let whole = std::fs::metadata(&file).unwrap().len();
        append(&spool, &record("partial")).unwrap();
        drop(spool);
        // What a failed append (a full disk) leaves: the start of a frame.
        let bytes = std::fs::read(&file).unwrap();
        std::fs::write(&file, &bytes[..whole as usize + 20]).unwrap();
        let spool = open(&db);
        // Not cleared: the next appends follow the partial frame.
        append(&spool, &record("later")).unwrap();
        drop(spool);
        let (ids, unreadable) = replayed(&db);
        assert_eq!(ids, ["before", "later"]);
        assert_eq!(unreadable, 1);
    }

    #[test]
    fn a_spool_of_json_lines_from_before_frames_is_read() {
        let (_dir, db, file) = paths();
        let mut old = serde_json::to_vec(&record("old")).unwrap();
        old.extend_from_slice(b"\n{\"id\":\"torn\",\"corr");
        std::fs::write(&file, &old).unwrap();
        let (spool, leftovers) = open_replayed(&db);
        assert_eq!(leftovers.records.len(), 1);
        assert_eq!(leftovers.records[0].error.as_deref(), Some("line\nbreak \"quoted\""));
        assert_eq!(leftovers.unreadable, 1);
        // Once replayed, new records go in frames, in a file of their own.
        append(&spool, &record("new")).unwrap();
        drop(spool);
        assert_eq!(replayed(&db).0, ["new"]);
    }

    #[test]
    fn a_second_process_leaves_an_open_spool_alone() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("h.db");
        let spool = open(&db);
        append(&spool, &record("pending")).unwrap();
        assert!(Spool::open(&db, crate::ground::limits::SPOOL_BYTES).unwrap().is_none(), "the owner holds the lock");
        drop(spool);
        let (_spool, leftovers) = open_replayed(&db);
        assert_eq!(leftovers.records.len(), 1, "released with the owner, untouched");
    }

    #[test]
    fn a_grown_file_is_retired_and_removed_once_committed() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("h.db");
        let spool = open(&db);
        let big = RequestRecord { request_body: Some("x".repeat(ROTATE_BYTES as usize)), ..record("big") };
        let first = append(&spool, &big).unwrap();
        assert!(dir.path().join("h.db.spool.1").exists(), "retired as it grew");
        let pending = append(&spool, &record("pending")).unwrap();
        assert_ne!(first, pending, "new records go to the new file");
        spool.committed(&[first]);
        assert!(!dir.path().join("h.db.spool.1").exists(), "retired file removed once committed");
        drop(spool);
        let (_spool, leftovers) = open_replayed(&db);
        let ids: Vec<_> = leftovers.records.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["pending"]);
    }

    #[test]
    fn while_nothing_is_committed_files_retire_one_after_another_up_to_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("h.db");
        let half = RequestRecord { request_body: Some("x".repeat(ROTATE_BYTES as usize / 2)), ..record("half") };
        let spool = Spool::open(&db, 3 * ROTATE_BYTES).unwrap().unwrap();
        // The database is out of reach: the writer commits nothing, and the
        // files pile up, each retired as it grows.
        let mut spooled = 0;
        for i in 0..7 {
            let r = RequestRecord { id: format!("r{i}"), ..half.clone() };
            if append(&spool, &r).is_some() {
                spooled += 1;
            }
        }
        let depth = spool.depth();
        assert!(depth.bytes <= 3 * ROTATE_BYTES, "{depth:?}");
        assert_eq!((spooled, depth.records), (5, 5), "the bound refused the last two");
        assert!(numbered_files(&dir.path().join("h.db.spool")).unwrap().len() >= 2);
        // The database is back: sealed, replayed in order, removed.
        spool.seal().unwrap();
        let segments = spool.backlog();
        let ids: Vec<String> = segments.iter().flat_map(|s| s.read().unwrap().records).map(|r| r.id).collect();
        assert_eq!(ids, ["r0", "r1", "r2", "r3", "r4"]);
        for segment in &segments {
            spool.replayed(segment).unwrap();
        }
        assert_eq!(spool.depth(), Depth { records: 0, bytes: 0, limit: 3 * ROTATE_BYTES });
        assert!(numbered_files(&dir.path().join("h.db.spool")).unwrap().is_empty());
        // Appends go on in the current file; a late commit of a replayed
        // generation changes nothing.
        let next = append(&spool, &record("next")).unwrap();
        spool.committed(&[1, 2]);
        assert_eq!(spool.depth().records, 1);
        spool.committed(&[next]);
        assert_eq!(spool.depth().records, 0);
    }
}
