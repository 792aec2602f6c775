//! The response cache on the request path: what [`crate::cache::plan`]
//! says for a request, a fresh hit answered before any provider is
//! considered, a stale one kept as the chain's last resort, and the copy of
//! a live answer the relay stores when the body ends.

use axum::body::Body;
use axum::http::{HeaderMap, Response, StatusCode};
use bytes::Bytes;

use crate::cache::{self, Ask, CacheKey, CacheStatus, Capture, Entry, Form, Hit, Lookup, Plan, Store, Wire};
use crate::config::Config;
use crate::history::record::now_ms;
use crate::protocol::usage::Usage;
use crate::proxy::body::RequestHead;
use crate::proxy::journal::Journal;
use crate::proxy::Inbound;

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
}

impl Cached {
    /// What the cache does for this request; `None` when it does nothing
    /// (no store, no settings, no header): no header is sent either.
    pub fn plan(
        store: Option<&Store>,
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
        })
    }

    /// A fresh answer from the cache, on record as answered with no attempt
    /// and no cost; an expired one is kept for [`Cached::stale`]. The
    /// record says `miss` or `bypass` until an answer from the cache says
    /// otherwise.
    pub async fn lookup(&mut self, journal: &mut Journal) -> Option<Response<Body>> {
        journal.cache(self.live_status());
        let Plan::Lookup { key, lifetime } = self.plan else { return None };
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
        let (Plan::Lookup { key, .. } | Plan::Refresh { key, .. }) = self.plan else { return None };
        Some(Keeper {
            store: self.store.clone(),
            key,
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
        keeper.store.put(keeper.key, entry);
    }
}
