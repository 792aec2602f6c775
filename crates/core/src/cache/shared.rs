//! The response cache across a team: an entry as the team keeps it, and
//! single flight, so identical requests in flight at once make one
//! upstream call.
//!
//! Within one instance, the first request for a key leads a [`Flight`];
//! the others wait for it to end ([`Flights::join`]) and look the key up
//! again, finding the answer it stored (found the moment it is stored).
//! Across the team, the leader of each instance asks Redis once
//! ([`crate::team::Team::cache_fill`]): an entry another instance stored,
//! or the team's fill lock, or a wait for the instance that holds it.
//!
//! What Redis holds is the answer as the client got it, with its usage
//! and cost: never the request, its headers or its keys.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use super::key::CacheKey;
use super::store::{Entry, Form};
use crate::protocol::Usage;
use crate::team::SharedCache;

/// An answer larger than this is not shared (it is still kept locally).
pub const MAX_SHARED_BYTES: usize = 1024 * 1024;

/// What precedes the body in a shared entry, as one JSON line.
#[derive(Debug, Serialize, Deserialize)]
struct Head {
    /// The format's version: another is not read.
    v: u8,
    endpoint: String,
    model: String,
    provider: Option<String>,
    status: u16,
    content_type: String,
    form: String,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cached_tokens: Option<u64>,
    cost_usd: Option<f64>,
    created_at_ms: i64,
}

const VERSION: u8 = 1;

/// `entry` as the team keeps it: a JSON line of its particulars, then its
/// body as it is. `None` when it is too large to share.
pub fn encode(entry: &Entry) -> Option<Vec<u8>> {
    if entry.body.len() > MAX_SHARED_BYTES {
        return None;
    }
    let head = Head {
        v: VERSION,
        endpoint: entry.endpoint.clone(),
        model: entry.model.clone(),
        provider: entry.provider.clone(),
        status: entry.status,
        content_type: entry.content_type.clone(),
        form: entry.form.as_str().to_string(),
        input_tokens: entry.usage.input_tokens,
        output_tokens: entry.usage.output_tokens,
        cached_tokens: entry.usage.cached_tokens,
        cost_usd: entry.cost_usd,
        created_at_ms: entry.created_at_ms,
    };
    let mut out = serde_json::to_vec(&head).ok()?;
    out.push(b'\n');
    out.extend_from_slice(&entry.body);
    Some(out)
}

/// A shared entry read back; `None` for one of another version, damaged,
/// or too large.
pub fn decode(bytes: &[u8]) -> Option<Entry> {
    let split = bytes.iter().position(|b| *b == b'\n')?;
    let head: Head = serde_json::from_slice(&bytes[..split]).ok()?;
    let body = &bytes[split + 1..];
    if head.v != VERSION || body.len() > MAX_SHARED_BYTES {
        return None;
    }
    let form = match head.form.as_str() {
        "json" => Form::Json,
        "sse" => Form::Sse,
        _ => return None,
    };
    Some(Entry {
        endpoint: head.endpoint,
        model: head.model,
        provider: head.provider,
        status: head.status,
        content_type: head.content_type,
        form,
        body: Bytes::copy_from_slice(body),
        usage: Usage {
            input_tokens: head.input_tokens,
            output_tokens: head.output_tokens,
            cached_tokens: head.cached_tokens,
            cache_write_tokens: None,
        },
        cost_usd: head.cost_usd,
        created_at_ms: head.created_at_ms,
    })
}

/// The keys being filled on this instance, each by one request.
#[derive(Debug, Default, Clone)]
pub struct Flights {
    inner: Arc<Mutex<HashMap<CacheKey, watch::Receiver<()>>>>,
}

/// What joining a key's flight gave.
#[derive(Debug)]
pub enum Joined {
    /// No request here fills the key: this one does, until the flight drops.
    Leader(Flight),
    /// Another request here fills it: this ends (with an error) when it is done.
    Follower(watch::Receiver<()>),
}

impl Flights {
    fn lock(&self) -> MutexGuard<'_, HashMap<CacheKey, watch::Receiver<()>>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Leads the flight of `key`, or follows the request that does.
    pub fn join(&self, key: CacheKey) -> Joined {
        let mut map = self.lock();
        if let Some(rx) = map.get(&key) {
            return Joined::Follower(rx.clone());
        }
        let (done, rx) = watch::channel(());
        map.insert(key, rx.clone());
        Joined::Leader(Flight { flights: self.clone(), key, done, lock: Mutex::new(None), mine: rx })
    }

    /// Keys being filled now.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One request filling a key; its followers go on when it drops, as does
/// the team's fill lock it holds, when it stored nothing.
#[derive(Debug)]
pub struct Flight {
    flights: Flights,
    key: CacheKey,
    /// Dropped with the flight: wakes the followers.
    #[allow(dead_code)]
    done: watch::Sender<()>,
    mine: watch::Receiver<()>,
    lock: Mutex<Option<FillLock>>,
}

/// The team's fill lock on a key, held by this instance.
#[derive(Debug)]
pub struct FillLock {
    pub team: Arc<dyn SharedCache>,
    /// The key's hex, as the team knows it.
    pub key: String,
    pub token: String,
}

impl Flight {
    /// Holds the team's fill lock until the answer is stored or the flight ends.
    pub fn hold(&self, lock: FillLock) {
        *self.lock.lock().unwrap_or_else(|p| p.into_inner()) = Some(lock);
    }

    /// The team's fill lock, taken to be let go of with the answer stored.
    pub fn take_lock(&self) -> Option<FillLock> {
        self.lock.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

impl Drop for Flight {
    fn drop(&mut self) {
        {
            let mut map = self.flights.lock();
            if map.get(&self.key).is_some_and(|rx| rx.same_channel(&self.mine)) {
                map.remove(&self.key);
            }
        }
        if let Some(lock) = self.take_lock() {
            lock.team.cache_release(&lock.key, lock.token);
        }
        // `done` drops after this: the followers wake to a key no longer
        // in flight, and look it up again.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(body: &'static [u8]) -> Entry {
        Entry {
            endpoint: "/v1/chat/completions".into(),
            model: "m".into(),
            provider: Some("p".into()),
            status: 200,
            content_type: "application/json".into(),
            form: Form::Sse,
            body: Bytes::from_static(body),
            usage: Usage {
                input_tokens: Some(12),
                output_tokens: Some(3),
                cached_tokens: None,
                cache_write_tokens: None,
            },
            cost_usd: Some(0.25),
            created_at_ms: 1_750_000_000_000,
        }
    }

    #[test]
    fn an_entry_crosses_the_team_whole_and_a_damaged_one_does_not() {
        let e = entry(b"data: {\"a\":\n\n1}\n\n");
        let bytes = encode(&e).unwrap();
        assert_eq!(decode(&bytes), Some(e));
        assert_eq!(decode(b"not json\nbody"), None);
        assert_eq!(decode(b"no line at all"), None);
        let other = String::from_utf8(bytes).unwrap().replacen("\"v\":1", "\"v\":9", 1);
        assert_eq!(decode(other.as_bytes()), None, "another version is not read");
        let big = Entry { body: Bytes::from(vec![b'x'; MAX_SHARED_BYTES + 1]), ..entry(b"") };
        assert_eq!(encode(&big), None, "too large to share");
    }

    #[tokio::test]
    async fn one_request_per_key_leads_and_the_others_wake_when_it_ends() {
        let flights = Flights::default();
        let (k1, k2) = (CacheKey([1; 32]), CacheKey([2; 32]));
        let Joined::Leader(lead) = flights.join(k1) else { panic!("first leads") };
        let Joined::Follower(mut follower) = flights.join(k1) else { panic!("second follows") };
        assert!(matches!(flights.join(k2), Joined::Leader(_)), "another key is its own flight");
        assert_eq!(flights.len(), 1, "the other key's flight ended when dropped");
        assert!(follower.has_changed().is_ok(), "still in flight");
        drop(lead);
        assert!(follower.changed().await.is_err(), "woken when the leader ends");
        assert!(flights.is_empty());
        assert!(matches!(flights.join(k1), Joined::Leader(_)), "the next one leads again");
    }
}
