//! Taking work off a channel in batches, on a thread of its own.

use std::time::Duration;

use tokio::sync::mpsc;

/// A group commit's batch, for a writer thread: waits for one item, then,
/// unless `urgent` says someone waits on it (or `hurry`, that someone waits
/// on an item further back), lets more gather for `linger`
/// without reading the queue (so senders do not wake the thread per item;
/// whoever sends an urgent item unparks it), then takes what is queued, up
/// to `max` in all. False once the queue is closed and drained.
pub fn gather<T>(
    rx: &mut mpsc::Receiver<T>,
    into: &mut Vec<T>,
    max: usize,
    linger: Duration,
    urgent: impl Fn(&T) -> bool,
    hurry: impl Fn() -> bool,
) -> bool {
    let Some(first) = rx.blocking_recv() else { return false };
    let wait = !urgent(&first) && !hurry();
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
