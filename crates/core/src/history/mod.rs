//! Every request and attempt on record, in SQLite.
//!
//! - [`record`]: what is kept.
//! - [`store`]: the database and its queries.
//! - [`writer`]: the batching writer and the [`Recorder`] that feeds it.
//! - [`pricing`]: what tokens cost.
//! - this file: [`History`], which owns the writer and prunes by age and size.

pub mod pricing;
pub mod record;
pub mod store;
pub mod writer;

use std::path::Path;
use std::time::Duration;

use tokio::task::JoinHandle;
use tracing::{info, warn};

pub use record::{AttemptRecord, Record, RequestRecord};
pub use store::{Store, StoreError};
pub use writer::Recorder;

use crate::config::HistoryConfig;

/// How often retention runs.
const PRUNE_EVERY: Duration = Duration::from_secs(600);

/// The history database with its writer and pruner running.
#[derive(Debug)]
pub struct History {
    store: Store,
    recorder: Recorder,
    writer: JoinHandle<()>,
    pruner: JoinHandle<()>,
}

impl History {
    /// Opens `<data dir>/switchyard.db` (or any path) and starts the writer.
    pub async fn open(path: &Path, config: &HistoryConfig) -> Result<History, StoreError> {
        let store = Store::open(path).await?;
        let (recorder, writer) = writer::spawn(store.clone());
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

/// Applies retention once: by age, then by size.
pub async fn prune(store: &Store, config: &HistoryConfig) -> Result<u64, StoreError> {
    let cutoff = record::now_ms() - i64::try_from(config.retention.as_millis()).unwrap_or(i64::MAX);
    let mut removed = store.prune_older_than(cutoff).await?;
    let max = i64::try_from(config.max_size_bytes).unwrap_or(i64::MAX);
    while store.used_bytes().await? > max {
        let total = store.count(store::CountTable::Requests).await?;
        if total == 0 {
            break;
        }
        removed += store.prune_oldest((total / 10).max(100)).await?;
    }
    if removed > 0 {
        store.vacuum().await?;
    }
    Ok(removed)
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
