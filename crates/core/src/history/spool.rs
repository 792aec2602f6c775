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
//! Two files keep the spool bounded under steady load: records go to
//! `<db>.spool`; once it has grown, it is retired to `<db>.spool.1` and a
//! fresh one is started, and the retired one is removed as soon as every
//! record in it is committed. Each record carries the generation of the file
//! it went to, so the count per file is exact whatever order records
//! reach the writer in.
//!
//! One process owns a spool at a time, by a lock on `<db>.spool.lock` held
//! while it runs: a second process on the same database (a desktop app that
//! finds a gateway already serving its data directory) must neither replay
//! nor empty a spool whose records another writer has yet to commit.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use tracing::warn;

use super::record::RequestRecord;

/// The current file is retired once it holds this much.
const ROTATE_BYTES: u64 = 4 * 1024 * 1024;

/// Which file a record went to.
pub type Generation = u64;

#[derive(Debug)]
pub struct Spool {
    /// Held locked for as long as the spool is open.
    _lock: File,
    current_path: PathBuf,
    retired_path: PathBuf,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    file: File,
    generation: Generation,
    /// Records in the current file not yet committed to the database.
    outstanding: u64,
    bytes: u64,
    /// The retired file's generation and its records not yet committed.
    retired: Option<(Generation, u64)>,
    /// The last append failed (logged once until one succeeds again).
    failing: bool,
    /// The line being written, reused so an append does not allocate.
    line: Vec<u8>,
}

/// What a spool held when it was opened: requests that completed but may
/// not have reached the database.
#[derive(Debug, Default)]
pub struct Leftovers {
    pub records: Vec<RequestRecord>,
    /// Lines that could not be read back (a write cut short by a crash).
    pub unreadable: usize,
}

impl Spool {
    /// Opens the spool beside `db_path`, returning what the last run left;
    /// `None` when another process has it open. The caller replays the
    /// leftovers, then calls [`Spool::clear`].
    pub fn open(db_path: &Path) -> std::io::Result<Option<(Spool, Leftovers)>> {
        let lock = OpenOptions::new().create(true).truncate(false).write(true).open(sibling(db_path, "spool.lock"))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => return Ok(None),
            Err(std::fs::TryLockError::Error(e)) => return Err(e),
        }
        let current_path = sibling(db_path, "spool");
        let retired_path = sibling(db_path, "spool.1");
        let mut leftovers = Leftovers::default();
        for path in [&retired_path, &current_path] {
            read_into(path, &mut leftovers)?;
        }
        let file = OpenOptions::new().create(true).append(true).open(&current_path)?;
        let bytes = file.metadata()?.len();
        let state =
            State { file, generation: 0, outstanding: 0, bytes, retired: None, failing: false, line: Vec::new() };
        Ok(Some((Spool { _lock: lock, current_path, retired_path, state: Mutex::new(state) }, leftovers)))
    }

    /// Empties the spool once its leftovers are in the database.
    pub fn clear(&self) -> std::io::Result<()> {
        let state = self.lock();
        state.file.set_len(0)?;
        drop(state);
        match std::fs::remove_file(&self.retired_path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Appends a record; returns the generation to report back once it is
    /// committed, or `None` if it could not be written (then it is only in
    /// the queue, and a failure is logged).
    pub fn append(&self, record: &RequestRecord) -> Option<Generation> {
        let mut guard = self.lock();
        let state = &mut *guard;
        state.line.clear();
        if let Err(e) = serde_json::to_writer(&mut state.line, record) {
            warn!("history spool: cannot encode a record: {e}");
            return None;
        }
        state.line.push(b'\n');
        // One write call: a line is whole in the file or, after a crash mid-call, cut short.
        match state.file.write_all(&state.line) {
            Ok(()) => {
                state.failing = false;
                state.outstanding += 1;
                state.bytes += state.line.len() as u64;
                Some(state.generation)
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
    }

    /// The writer committed records that went to these generations.
    pub fn committed(&self, generations: &[Generation]) {
        if generations.is_empty() {
            return;
        }
        let mut guard = self.lock();
        let state = &mut *guard;
        for generation in generations {
            match &mut state.retired {
                Some((g, n)) if g == generation => *n = n.saturating_sub(1),
                _ if *generation == state.generation => state.outstanding = state.outstanding.saturating_sub(1),
                _ => {}
            }
        }
        if let Err(e) = self.tidy(state) {
            warn!("history spool {}: {e}", self.current_path.display());
        }
    }

    /// Drops what is fully committed and rotates a file that has grown.
    fn tidy(&self, state: &mut State) -> std::io::Result<()> {
        if state.retired.is_some_and(|(_, n)| n == 0) {
            state.retired = None;
            std::fs::remove_file(&self.retired_path)?;
        }
        if state.outstanding == 0 && state.bytes > 0 {
            state.file.set_len(0)?;
            state.bytes = 0;
        } else if state.bytes >= ROTATE_BYTES && state.retired.is_none() {
            std::fs::rename(&self.current_path, &self.retired_path)?;
            state.retired = Some((state.generation, state.outstanding));
            state.file = OpenOptions::new().create(true).append(true).open(&self.current_path)?;
            state.generation += 1;
            state.outstanding = 0;
            state.bytes = 0;
        }
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn sibling(db_path: &Path, suffix: &str) -> PathBuf {
    let mut name = db_path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".");
    name.push(suffix);
    db_path.with_file_name(name)
}

fn read_into(path: &Path, leftovers: &mut Leftovers) -> std::io::Result<()> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for line in BufReader::new(file).split(b'\n') {
        let line = line?;
        if line.is_empty() {
            continue;
        }
        match serde_json::from_slice(&line) {
            Ok(record) => leftovers.records.push(record),
            Err(_) => leftovers.unreadable += 1,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::record::sample_request;
    use crate::usage::Usage;

    fn record(id: &str) -> RequestRecord {
        RequestRecord {
            usage: Usage { input_tokens: Some(3), output_tokens: Some(4), cached_tokens: None },
            cost_usd: Some(0.5),
            error: Some("line\nbreak \"quoted\"".into()),
            ..sample_request(id)
        }
    }

    #[test]
    fn what_was_not_committed_is_there_on_the_next_open() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("h.db");
        let (spool, leftovers) = Spool::open(&db).unwrap().unwrap();
        assert!(leftovers.records.is_empty());
        let a = spool.append(&record("a")).unwrap();
        spool.append(&record("b")).unwrap();
        spool.committed(&[a]);
        drop(spool);
        let (_spool, leftovers) = Spool::open(&db).unwrap().unwrap();
        let ids: Vec<_> = leftovers.records.iter().map(|r| r.id.as_str()).collect();
        // Both stay until the file is fully committed; replay is idempotent.
        assert_eq!(ids, ["a", "b"]);
        assert_eq!(leftovers.records[0].error.as_deref(), Some("line\nbreak \"quoted\""));
        assert_eq!(leftovers.records[0].usage.output_tokens, Some(4));
    }

    #[test]
    fn a_fully_committed_spool_is_emptied() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("h.db");
        let (spool, _) = Spool::open(&db).unwrap().unwrap();
        let gens: Vec<_> = ["a", "b"].iter().filter_map(|id| spool.append(&record(id))).collect();
        spool.committed(&gens);
        assert_eq!(std::fs::metadata(dir.path().join("h.db.spool")).unwrap().len(), 0);
        drop(spool);
        assert!(Spool::open(&db).unwrap().unwrap().1.records.is_empty());
    }

    #[test]
    fn a_line_cut_short_by_a_crash_is_skipped_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("h.db");
        let (spool, _) = Spool::open(&db).unwrap().unwrap();
        spool.append(&record("whole")).unwrap();
        drop(spool);
        let mut f = OpenOptions::new().append(true).open(dir.path().join("h.db.spool")).unwrap();
        f.write_all(br#"{"id":"torn","correl"#).unwrap();
        let (_spool, leftovers) = Spool::open(&db).unwrap().unwrap();
        assert_eq!(leftovers.records.len(), 1);
        assert_eq!(leftovers.unreadable, 1);
    }

    #[test]
    fn a_second_process_leaves_an_open_spool_alone() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("h.db");
        let (spool, _) = Spool::open(&db).unwrap().unwrap();
        spool.append(&record("pending")).unwrap();
        assert!(Spool::open(&db).unwrap().is_none(), "the owner holds the lock");
        drop(spool);
        let (_spool, leftovers) = Spool::open(&db).unwrap().unwrap();
        assert_eq!(leftovers.records.len(), 1, "released with the owner, untouched");
    }

    #[test]
    fn a_grown_file_is_retired_and_removed_once_committed() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("h.db");
        let (spool, _) = Spool::open(&db).unwrap().unwrap();
        let big = RequestRecord { request_body: Some("x".repeat(ROTATE_BYTES as usize)), ..record("big") };
        let first = spool.append(&big).unwrap();
        let pending = spool.append(&record("pending")).unwrap();
        // Committing the first leaves one outstanding: the grown file is retired.
        spool.committed(&[first]);
        assert!(dir.path().join("h.db.spool.1").exists());
        let later = spool.append(&record("later")).unwrap();
        assert_ne!(later, pending, "new records go to the new file");
        spool.committed(&[pending]);
        assert!(!dir.path().join("h.db.spool.1").exists(), "retired file removed once committed");
        drop(spool);
        let (_spool, leftovers) = Spool::open(&db).unwrap().unwrap();
        let ids: Vec<_> = leftovers.records.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["later"]);
    }
}
