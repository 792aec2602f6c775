//! The per-client request rate: a token bucket per local tool, so one
//! runaway script cannot spend the gateway's capacity for the others.

use std::net::IpAddr;
use std::sync::Mutex;

use foldhash::HashMap;
use tokio::time::Instant;

use crate::policy::limiter::Bucket;

/// Client addresses tracked at most before the table is reset.
const MAX_TRACKED_CLIENTS: usize = 10_000;

/// A client as the rate limit tells them apart: its address and its user
/// agent. Every local tool comes from 127.0.0.1, so the address alone would
/// let one runaway script (or a web page's requests) starve the editor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct ClientKey {
    ip: IpAddr,
    agent: u64,
}

impl ClientKey {
    fn of(ip: IpAddr, user_agent: Option<&[u8]>) -> ClientKey {
        use std::hash::BuildHasher;
        let agent = user_agent.map_or(0, |ua| foldhash::fast::FixedState::with_seed(0x5157_6172_6431).hash_one(ua));
        ClientKey { ip, agent }
    }
}

/// Per-client request buckets.
#[derive(Debug, Default)]
pub struct ClientRates {
    /// Looked up on every request; bounded by [`MAX_TRACKED_CLIENTS`], so a
    /// fast hash rather than a DoS-resistant one.
    buckets: Mutex<HashMap<ClientKey, Bucket>>,
}

impl ClientRates {
    /// Takes one request from the bucket of the client at `ip` with this
    /// user agent; `false` when it is empty.
    pub fn admit(&self, ip: IpAddr, user_agent: Option<&[u8]>, per_minute: u32) -> bool {
        let client = ClientKey::of(ip, user_agent);
        let now = Instant::now();
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if buckets.len() >= MAX_TRACKED_CLIENTS && !buckets.contains_key(&client) {
            buckets.clear();
        }
        let bucket = buckets.entry(client).or_insert_with(|| Bucket::per_minute(per_minute, now));
        if bucket.wait_for(1.0, now).is_zero() {
            bucket.take(1.0, now);
            true
        } else {
            false
        }
    }
}
