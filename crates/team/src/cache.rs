//! The response cache across the team: answers shared under their cache
//! key, and the fill lock that makes identical requests on different
//! instances one upstream call. One round trip for a lookup; stores and
//! releases are sent off the request path. Redis out of reach is a miss
//! (and no lock): the local cache answers alone.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use redis::Value;
use switchyard_core::team::Shared;
use switchyard_core::team::Team;
use tracing::debug;

use crate::decode;
use crate::scripts::Scripts;
use crate::RedisTeam;

/// The longest a fill lock is kept renewed: a request that has not
/// stored or let go of its answer by then has long passed any deadline.
const LONGEST_FILL: Duration = Duration::from_secs(600);

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// An entry, or the fill lock, or a wait: one script, one round trip.
pub(crate) async fn fill(team: &RedisTeam, key: &str, lock_ttl: Duration, limit: Duration) -> Shared {
    let Some(mut con) = team.connection().filter(|_| team.connected()) else { return Shared::Unreachable };
    let token = format!("{}:{}", team.id(), team.locks.fetch_add(1, Ordering::Relaxed));
    let mut call = team.scripts.cache_fill.prepare_invoke();
    call.key(team.keys.cache_entry(key)).key(team.keys.cache_lock(key)).arg(&token).arg(ms(lock_ttl));
    match tokio::time::timeout(limit, call.invoke_async::<Value>(&mut con)).await {
        Ok(Ok(answer)) => {
            // An entry that does not read back as an answer is a miss: this
            // instance answers and stores its own in its place.
            let shared = decode::cache_fill(&answer, token, switchyard_core::history::now_ms()).unwrap_or_else(|d| {
                decode::report(&d);
                Shared::Unreachable
            });
            if let Shared::Fill(token) = &shared {
                let lock = team.keys.cache_lock(key);
                tokio::spawn(keep(con, team.scripts.clone(), lock, token.clone(), lock_ttl, limit));
            }
            shared
        }
        Ok(Err(e)) => {
            debug!("team: the shared cache did not answer: {e}");
            Shared::Unreachable
        }
        Err(_) => {
            debug!("team: the shared cache did not answer within {limit:?}");
            Shared::Unreachable
        }
    }
}

/// Keeps a fill lock this instance holds from lapsing while its answer
/// is on its way (an answer slower than the lock's TTL would otherwise let
/// another instance call upstream too): renewed every third of the TTL
/// for as long as it is still this instance's. Storing the answer or
/// letting go of the lock deletes it, which ends the renewals.
async fn keep(
    mut con: redis::aio::ConnectionManager,
    scripts: Arc<Scripts>,
    lock: String,
    token: String,
    ttl: Duration,
    limit: Duration,
) {
    let start = tokio::time::Instant::now();
    while start.elapsed() < LONGEST_FILL {
        tokio::time::sleep(ttl / 3).await;
        let mut call = scripts.cache_renew.prepare_invoke();
        call.key(&lock).arg(&token).arg(ms(ttl));
        match tokio::time::timeout(limit, call.invoke_async::<i64>(&mut con)).await {
            Ok(Ok(1)) => {}
            Ok(Ok(_)) => return,
            // Out of reach for now: the lock lapses by itself if it stays so.
            _ => {}
        }
    }
}

/// Stores `entry` (and lets go of `lock`), or lets go of `lock` alone,
/// on a task of its own: the request never waits for it.
pub(crate) fn store(
    team: &RedisTeam,
    key: &str,
    entry: Option<Vec<u8>>,
    ttl: Duration,
    lock: Option<String>,
    limit: Duration,
) {
    let Some(mut con) = team.connection().filter(|_| team.connected()) else { return };
    let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
    let scripts: Arc<Scripts> = team.scripts.clone();
    let (entry_key, lock_key) = (team.keys.cache_entry(key), team.keys.cache_lock(key));
    runtime.spawn(async move {
        let call = match &entry {
            Some(bytes) => {
                let mut call = scripts.cache_store.prepare_invoke();
                call.key(&entry_key).key(&lock_key).arg(bytes.as_slice()).arg(ms(ttl));
                call.arg(lock.as_deref().unwrap_or(""));
                call
            }
            None => {
                let Some(token) = &lock else { return };
                let mut call = scripts.cache_release.prepare_invoke();
                call.key(&lock_key).arg(token);
                call
            }
        };
        match tokio::time::timeout(limit, call.invoke_async::<Value>(&mut con)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => debug!("team: a cached answer was not shared: {e}"),
            Err(_) => debug!("team: sharing a cached answer took over {limit:?}"),
        }
    });
}
