//! Team-wide concurrency: a lease per request in flight, in a sorted set
//! of lease id → expiry per provider (and per capped key).
//!
//! A lease is renewed every third of its TTL while the request (and its
//! stream) runs, and released by id when its guard drops, whatever ended
//! the request: an answer, an error, the client gone. Release is by id and
//! idempotent, so a late one (an instance paused past the TTL) removes
//! nothing but its own expired entry; an instance killed while holding
//! leases frees them when their TTL runs out, since every grant first
//! drops expired entries. A lease lost while a stream runs is logged, never
//! a reason to cut a stream already committed to the client.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionManager;
use switchyard_core::team::{AdmitAsk, Admitted, Held};
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::scripts::Scripts;
use crate::RedisTeam;

/// One held lease; dropping it releases it.
#[derive(Debug)]
pub struct Lease {
    id: String,
    keys: Vec<String>,
    con: ConnectionManager,
    renewing: CancellationToken,
}

impl Held for Lease {}

impl Drop for Lease {
    fn drop(&mut self) {
        self.renewing.cancel();
        let (mut con, keys, id) = (self.con.clone(), std::mem::take(&mut self.keys), std::mem::take(&mut self.id));
        let Ok(handle) = tokio::runtime::Handle::try_current() else { return };
        handle.spawn(async move {
            let mut pipe = redis::pipe();
            for key in &keys {
                pipe.zrem(key, &id).ignore();
            }
            let release = pipe.query_async::<()>(&mut con);
            if tokio::time::timeout(Duration::from_secs(2), release).await.is_err() {
                warn!("team: a lease release took too long; it expires by itself");
            }
        });
    }
}

/// Asks the team for a lease, in one script.
pub async fn take(team: &RedisTeam, ask: AdmitAsk, ttl: Duration, limit: Duration) -> Admitted {
    let scripts = &team.scripts;
    let Some(mut con) = team.connection().filter(|_| team.connected.load(std::sync::atomic::Ordering::Relaxed)) else {
        return Admitted::Unreachable;
    };
    let provider_key = team.keys.leases(&ask.provider);
    let key_key = ask.key.as_ref().map(|(fp, _)| team.keys.key_leases(&ask.provider, fp));
    let id = uuid::Uuid::now_v7().to_string();
    let mut call = scripts.admit.prepare_invoke();
    call.key(&provider_key).key(key_key.as_deref().unwrap_or(&provider_key));
    call.key(team.keys.bucket(&ask.provider, "rpm")).key(team.keys.bucket(&ask.provider, "tpm"));
    call.arg(&id).arg(millis(ttl)).arg(ask.provider_max.unwrap_or(0)).arg(ask.key.as_ref().map_or(0, |(_, m)| *m));
    call.arg(ask.requests_per_minute.unwrap_or(0)).arg(ask.tokens_per_minute.unwrap_or(0)).arg(ask.tokens);
    let (granted, wait) = match tokio::time::timeout(limit, call.invoke_async::<(i64, i64)>(&mut con)).await {
        Ok(Ok(answer)) => answer,
        Ok(Err(e)) => {
            warn!("team: shared limits could not be checked ({e}); this instance's share of them decides");
            return Admitted::Unreachable;
        }
        Err(_) => return Admitted::Unreachable,
    };
    match granted {
        1 => {}
        0 => return Admitted::Wait(Duration::from_millis(u64::try_from(wait).unwrap_or(0).max(1))),
        _ => return Admitted::Full,
    }
    if ask.provider_max.is_none() && ask.key.is_none() {
        // Only buckets applied: nothing is held while the request runs.
        return Admitted::Granted(None);
    }
    let keys: Vec<String> = std::iter::once(provider_key).chain(key_key).collect();
    let renewing = CancellationToken::new();
    tokio::spawn(renew(con.clone(), scripts.clone(), keys.clone(), id.clone(), ttl, renewing.clone()));
    Admitted::Granted(Some(Box::new(Lease { id, keys, con, renewing })))
}

/// Renews a lease every third of its TTL until it is released.
async fn renew(
    mut con: ConnectionManager,
    scripts: Arc<Scripts>,
    keys: Vec<String>,
    id: String,
    ttl: Duration,
    stop: CancellationToken,
) {
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(ttl / 3) => {}
        }
        let mut call = scripts.renew.prepare_invoke();
        call.key(&keys[0]).key(keys.get(1).unwrap_or(&keys[0])).arg(&id).arg(millis(ttl));
        match tokio::time::timeout(ttl / 3, call.invoke_async::<i64>(&mut con)).await {
            Ok(Ok(1)) => {}
            Ok(Ok(_)) => {
                warn!(lease = %id, "team: a lease expired while its request ran (this instance was paused or cut off); the request goes on");
                return;
            }
            // Out of reach for now: the next renewal may still make it.
            _ => {}
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
