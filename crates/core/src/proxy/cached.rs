//! The response cache on the request path: what [`crate::cache::plan`]
//! says for a request, a fresh hit answered before any provider is
//! considered, a stale one kept as the chain's last resort, and the copy of
//! a live answer the relay stores when the body ends.
//!
//! Single flight: of identical requests in flight at once, one goes to the
//! chain and the others wait for its answer ([`crate::cache::shared`]); in
//! a team, the same across instances, and answers are shared.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use axum::body::Body;
use axum::http::{HeaderMap, Response, StatusCode};
use bytes::Bytes;

use crate::cache::shared::{self, FillLock, Flight, Joined};
use crate::cache::{self, Ask, CacheKey, CacheStatus, Capture, Entry, Form, Hit, Lookup, Plan, Store, Wire};
use crate::config::Config;
use crate::ground::clock::now_ms;
use crate::protocol::usage::Usage;
use crate::proxy::body::RequestHead;
use crate::proxy::journal::Journal;
use crate::proxy::Inbound;
use crate::team::{Shared, SharedCache, Team};

/// How long the team's fill lock holds: past it, a waiting instance takes
/// the lock over (its holder died, or its answer runs long).
const FILL_LOCK_TTL: Duration = Duration::from_secs(30);
/// How often an instance waiting for another's answer asks for it again.
const FILL_POLL: Duration = Duration::from_millis(25);
/// Rounds of waiting for this instance's own requests before going alone:
/// each ends when the request filling the key ends.
const LOCAL_ROUNDS: usize = 4;

/// The cache's part in one request.
#[derive(Debug)]
pub(crate) struct Cached {
    store: Store,
    plan: Plan,
    ask: Ask,
    endpoint: &'static str,
    model: String,
    /// An expired answer, served only if the chain fails.
    stale: Option<Box<Hit>>,
    /// The team whose cache this one shares (alone, a team of one).
    team: Arc<dyn SharedCache>,
    /// The key's flight, when this request fills it.
    flight: Option<Arc<Flight>>,
}

impl Cached {
    /// What the cache does for this request; `None` when it does nothing
    /// (no store, no settings, no header): no header is sent either.
    pub fn plan(
        store: Option<&Store>,
        team: &Arc<dyn Team>,
        config: &Config,
        inbound: &Inbound,
        head: &RequestHead,
        body: &[u8],
    ) -> Option<Cached> {
        let store = store?;
        let wire = Wire::of(inbound.endpoint);
        let directive = cache::Directive::from_headers(&inbound.headers);
        let plan = cache::plan(wire, config.cache_policy(&head.model), directive, &head.model, body);
        let wire = match (plan, wire) {
            (Plan::Off, _) | (_, None) => return None,
            (_, Some(wire)) => wire,
        };
        Some(Cached {
            store: store.clone(),
            plan,
            ask: Ask { wire, stream: head.stream, include_usage: head.has_stream_options },
            endpoint: inbound.endpoint.gateway_path(),
            model: head.model.clone(),
            stale: None,
            team: team.clone() as Arc<dyn SharedCache>,
            flight: None,
        })
    }

    /// A fresh answer from the cache, on record as answered with no attempt
    /// and no cost; an expired one is kept for [`Cached::stale`]. The
    /// record says `miss` or `bypass` until an answer from the cache says
    /// otherwise.
    ///
    /// A miss waits (until `wait_until` at most) for an identical request
    /// in flight, here or, in a team, on another instance, and answers
    /// with what it stored; a miss no one is filling makes this request
    /// the one that fills it.
    pub async fn lookup(&mut self, journal: &mut Journal, wait_until: Instant) -> Option<Response<Body>> {
        journal.cache(self.live_status());
        let Plan::Lookup { key, lifetime } = self.plan else { return None };
        for _ in 0..LOCAL_ROUNDS {
            if let Some(hit) = self.local(journal, key, lifetime).await {
                return Some(hit);
            }
            match self.store.flights().join(key) {
                Joined::Leader(flight) => {
                    self.flight = Some(Arc::new(flight));
                    break;
                }
                Joined::Follower(mut filling) => {
                    let left = wait_until.saturating_duration_since(Instant::now());
                    if tokio::time::timeout(left, filling.changed()).await.is_err() {
                        return None;
                    }
                }
            }
        }
        self.flight.as_ref()?;
        let team = self.team.clone();
        let hex = key.hex();
        let wait_until = wait_until.min(Instant::now() + FILL_LOCK_TTL + FILL_POLL);
        // Bounded by the wait: at most one ask per poll interval.
        loop {
            match team.cache_fill(&hex, FILL_LOCK_TTL).await {
                Shared::Found(bytes) => {
                    let entry = shared::decode(&bytes)?;
                    self.store.put(key, entry);
                    let hit = self.local(journal, key, lifetime).await;
                    // Answered: this instance's followers find it too.
                    self.flight = None;
                    return hit;
                }
                Shared::Fill(token) => {
                    if let Some(flight) = &self.flight {
                        flight.hold(FillLock { team: team.clone(), key: hex, token });
                    }
                    return None;
                }
                Shared::Filling if Instant::now() + FILL_POLL < wait_until => tokio::time::sleep(FILL_POLL).await,
                Shared::Filling | Shared::Unreachable => return None,
            }
        }
    }

    /// This instance's own cache: a fresh answer served, a stale one kept.
    async fn local(
        &mut self,
        journal: &mut Journal,
        key: CacheKey,
        lifetime: cache::Lifetime,
    ) -> Option<Response<Body>> {
        match cache::lookup(&self.store, &key, lifetime, self.ask, now_ms()).await {
            Lookup::Fresh { response, entry } => {
                let saved = journal.saved(&entry);
                self.store.counters().count(CacheStatus::Hit, saved);
                journal
                    .take()
                    .finish_cached(response.status(), CacheStatus::Hit, entry.provider.as_deref(), saved)
                    .await;
                Some(response)
            }
            Lookup::Stale(hit) => {
                self.stale = Some(hit);
                None
            }
            Lookup::Miss => None,
        }
    }

    /// The kept expired answer, when the chain has failed. The request goes
    /// on record with its failed attempts.
    pub async fn stale(&mut self, journal: &mut Journal) -> Option<Response<Body>> {
        let hit = self.stale.take()?;
        let response = cache::serve_stale(&hit, self.ask)?;
        let saved = journal.saved(&hit.entry);
        self.store.counters().count(CacheStatus::Stale, saved);
        let provider = hit.entry.provider.as_deref();
        journal.take().finish_cached(response.status(), CacheStatus::Stale, provider, saved).await;
        Some(response)
    }

    /// What the cache did for a request the chain answered, or failed.
    fn live_status(&self) -> CacheStatus {
        match self.plan {
            Plan::Lookup { .. } => CacheStatus::Miss,
            Plan::Off | Plan::Bypass(_) | Plan::Refresh { .. } => CacheStatus::Bypass,
        }
    }

    /// Counts a request the chain answered, and marks its `headers`.
    pub fn mark_live(&self, headers: &mut HeaderMap) {
        self.count_live();
        cache::set_headers(headers, self.live_status(), None);
    }

    /// Counts a request the chain answered or failed.
    pub fn count_live(&self) {
        self.store.counters().count(self.live_status(), None);
    }

    /// Where a live answer goes to be stored: only for a plan that stores.
    pub fn keeper(&self, provider: &str) -> Option<Keeper> {
        let (Plan::Lookup { key, lifetime } | Plan::Refresh { key, lifetime }) = self.plan else { return None };
        Some(Keeper {
            store: self.store.clone(),
            key,
            ttl: lifetime.ttl,
            team: self.team.clone(),
            flight: self.flight.clone(),
            wire: self.ask.wire,
            endpoint: self.endpoint,
            model: self.model.clone(),
            provider: provider.to_string(),
        })
    }
}

/// Stores one live answer, as the client gets it.
#[derive(Debug)]
pub(crate) struct Keeper {
    store: Store,
    key: CacheKey,
    /// How long the team keeps the answer.
    ttl: Duration,
    team: Arc<dyn SharedCache>,
    /// The key's flight, which ends (waking the requests that wait for the
    /// answer) once the answer is stored or will not be.
    flight: Option<Arc<Flight>>,
    wire: Wire,
    endpoint: &'static str,
    model: String,
    provider: String,
}

impl Keeper {
    /// A capture of the answer about to be relayed, if it is a success.
    pub fn capture(self, status: StatusCode, sse: bool, content_type: Option<&str>) -> Option<Keeping> {
        if !status.is_success() {
            return None;
        }
        let form = if sse { Form::Sse } else { Form::Json };
        let capture = Capture::new(form, self.store.limits().max_entry_bytes);
        let content_type = content_type
            .map(str::to_string)
            .unwrap_or_else(|| if sse { "text/event-stream" } else { "application/json" }.to_string());
        Some(Keeping { keeper: self, capture, status: status.as_u16(), form, content_type })
    }
}

/// An answer being copied for the cache.
#[derive(Debug)]
pub(crate) struct Keeping {
    keeper: Keeper,
    capture: Capture,
    status: u16,
    form: Form,
    content_type: String,
}

impl Keeping {
    pub fn push(&mut self, chunk: &Bytes) {
        if !chunk.is_empty() {
            self.capture.push(chunk);
        }
    }

    /// The body ended well: stored if it is whole and fits.
    pub fn store(self, usage: Usage, cost_usd: Option<f64>) {
        let Keeping { keeper, capture, status, form, content_type } = self;
        let Some(body) = capture.finish(keeper.wire) else { return };
        let entry = Entry {
            endpoint: keeper.endpoint.to_string(),
            model: keeper.model,
            provider: Some(keeper.provider),
            status,
            content_type,
            form,
            body,
            usage,
            cost_usd,
            created_at_ms: now_ms(),
        };
        let lock = keeper.flight.as_ref().and_then(|f| f.take_lock());
        let mut encoded = || shared::encode(&entry);
        keeper.team.cache_store(&keeper.key.hex(), &mut encoded, keeper.ttl, lock.map(|l| l.token));
        keeper.store.put(keeper.key, entry);
    }
}
