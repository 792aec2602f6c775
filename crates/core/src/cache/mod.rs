//! The exact response cache: a repeated deterministic request is answered
//! from SQLite without an upstream call, and an expired answer is the
//! chain's last resort when every provider has failed.
//!
//! - [`key`]: the canonical request and its SHA-256, and whether a request may be cached.
//! - [`store`]: the entries in SQLite, their size cap and their lifetimes.
//! - [`replay`]: a stored answer in the form the client asked for, with the
//!   cache's headers; [`reframe`] tells a JSON answer as a stream, [`fold`] a
//!   stream as JSON.
//! - [`capture`]: a bounded copy of an answer on its way to the client, to store.
//! - [`fallback`]: a route's static answer, and the gateway's error as a
//!   problem document in the client's protocol, for when nothing else answers.
//! - [`metrics`]: counters for the metrics endpoint and the dashboard.
//! - this file: the settings, the client's `x-switchyard-cache` header, and
//!   [`plan`], which says what the cache does for one request.

pub(crate) mod capture;
pub(crate) mod fallback;
pub(crate) mod fold;
pub(crate) mod key;
pub(crate) mod metrics;
pub(crate) mod reframe;
pub(crate) mod replay;
pub mod shared;
pub(crate) mod store;

pub use crate::config::CachePolicy;
pub use capture::Capture;
pub use fallback::{problem, problem_body, FallbackResponse, PROBLEM_JSON, X_FALLBACK_RESPONSE};
pub use fold::{is_whole, FoldError};
pub use key::{CacheKey, Facts, Hasher, KeyError, Keyed, Refusal, Wire};
pub use metrics::{CacheCounters, CacheStats, CacheStatus};
pub use reframe::ReframeError;
pub use replay::{set_headers, Ask, Replay, ReplayError, X_SWITCHYARD_CACHE};
pub use store::{path_beside, purge_file, CacheError, Entry, Form, Freshness, Hit, Lifetime, Limits, Store};

/// Deletes every answer in the cache beside the history database at `db`
/// (none there: nothing to delete), for [`crate::history::purge`].
pub fn purge_beside(db: &std::path::Path) -> Result<u64, CacheError> {
    purge_file(&path_beside(db))
}

use axum::body::Body;
use axum::http::{HeaderMap, Response};

impl CachePolicy {
    pub fn lifetime(&self) -> Lifetime {
        Lifetime { ttl: self.ttl, stale: self.stale }
    }
}

/// What the client asked with `x-switchyard-cache`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Directive {
    /// No header (or one this gateway does not know): the route decides.
    #[default]
    Default,
    /// Use the cache even where none is configured, for any temperature or
    /// conversation: the client vouches that a repeat may be reused. Never
    /// for answers that depend on the provider's state.
    On,
    /// Neither look up nor store.
    Off,
    /// Do not look up; store the fresh answer in place of the old one.
    Refresh,
}

impl Directive {
    pub fn from_headers(headers: &HeaderMap) -> Directive {
        let value = headers.get(replay::X_SWITCHYARD_CACHE).and_then(|v| v.to_str().ok()).map(str::trim);
        match value.map(str::to_ascii_lowercase).as_deref() {
            Some("on") => Directive::On,
            Some("off") => Directive::Off,
            Some("refresh") => Directive::Refresh,
            _ => Directive::Default,
        }
    }
}

/// What the cache does for one request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Plan {
    /// Nothing: no cache here, and no header (what every request got before the cache).
    Off,
    /// Not looked up nor stored, and said so (`x-switchyard-cache: bypass`).
    Bypass(Bypass),
    /// Look up; a miss stores the chain's answer.
    Lookup { key: CacheKey, lifetime: Lifetime },
    /// Store the chain's answer without looking up (`refresh`); said as `bypass`.
    Refresh { key: CacheKey, lifetime: Lifetime },
}

/// Why a request bypasses the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bypass {
    /// The client said `off`.
    Client,
    /// Not cacheable by default (sampled, a tool turn, stateful).
    Refused(Refusal),
    /// The body cannot be put in canonical form.
    Unkeyable,
}

/// What the cache does for a request to `wire` (`None`: an endpoint the
/// cache does not serve) for `model`, under the route's `policy`. Without a
/// policy or a client's `on`, nothing is computed at all.
pub fn plan(wire: Option<Wire>, policy: Option<&CachePolicy>, directive: Directive, model: &str, body: &[u8]) -> Plan {
    let Some(wire) = wire else { return Plan::Off };
    let policy = match (policy, directive) {
        (None, Directive::Default | Directive::Off) => return Plan::Off,
        (Some(_), Directive::Off) => return Plan::Bypass(Bypass::Client),
        (Some(p), _) => *p,
        (None, _) => CachePolicy::default(),
    };
    let Ok(keyed) = key::key(wire, model, body) else { return Plan::Bypass(Bypass::Unkeyable) };
    let vouched = directive == Directive::On;
    if let Err(refusal) = keyed.facts.admit(wire, policy.sampled || vouched, policy.tools || vouched) {
        return Plan::Bypass(Bypass::Refused(refusal));
    }
    let lifetime = policy.lifetime();
    match directive {
        Directive::Refresh => Plan::Refresh { key: keyed.key, lifetime },
        Directive::Default | Directive::On | Directive::Off => Plan::Lookup { key: keyed.key, lifetime },
    }
}

/// What a lookup found for a request planned [`Plan::Lookup`].
#[derive(Debug)]
pub enum Lookup {
    /// A fresh answer, ready to send (`x-switchyard-cache: hit`), and the
    /// entry it came from (its usage and cost go on record as saved).
    Fresh {
        response: Response<Body>,
        entry: Box<Entry>,
    },
    /// Only an expired answer: the chain goes first, and this is its last
    /// resort ([`serve_stale`]).
    Stale(Box<Hit>),
    Miss,
}

/// Looks `key` up and, if fresh, replays it as `ask` wants. An entry that
/// cannot be replayed this way is a miss. Counts nothing: the caller counts
/// each request once, with the status it ends with.
pub async fn lookup(store: &Store, key: &CacheKey, lifetime: Lifetime, ask: replay::Ask, now_ms: i64) -> Lookup {
    let Some(hit) = store.get(key, now_ms, lifetime).await else { return Lookup::Miss };
    match hit.freshness {
        Freshness::Stale => Lookup::Stale(Box::new(hit)),
        Freshness::Fresh => match replay::replay(&hit.entry, ask) {
            Ok(r) => {
                Lookup::Fresh { response: replay::response(r, CacheStatus::Hit, hit.age), entry: Box::new(hit.entry) }
            }
            Err(e) => {
                tracing::warn!("cached answer not replayable as asked ({e}): a miss");
                Lookup::Miss
            }
        },
    }
}

/// The stale answer kept from [`lookup`], as the chain's last resort
/// (`x-switchyard-cache: stale`, `Warning: 110`); `None` if it cannot be
/// replayed as asked.
pub fn serve_stale(hit: &Hit, ask: replay::Ask) -> Option<Response<Body>> {
    let r = replay::replay(&hit.entry, ask).ok()?;
    Some(replay::response(r, CacheStatus::Stale, hit.age))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use axum::http::HeaderValue;

    use super::*;

    const DETERMINISTIC: &[u8] = br#"{"model":"m","temperature":0,"messages":[{"role":"user","content":"hi"}]}"#;
    const SAMPLED: &[u8] = br#"{"model":"m","temperature":0.7,"messages":[{"role":"user","content":"hi"}]}"#;

    fn plan_for(policy: Option<&CachePolicy>, directive: Directive, body: &[u8]) -> Plan {
        plan(Some(Wire::Chat), policy, directive, "m", body)
    }

    #[test]
    fn without_settings_or_a_header_the_cache_does_nothing() {
        assert_eq!(plan_for(None, Directive::Default, DETERMINISTIC), Plan::Off);
        assert_eq!(plan_for(None, Directive::Off, DETERMINISTIC), Plan::Off);
        assert_eq!(plan(None, Some(&CachePolicy::default()), Directive::On, "m", DETERMINISTIC), Plan::Off);
    }

    #[test]
    fn a_route_with_a_cache_looks_up_what_it_may_store() {
        let policy =
            CachePolicy { ttl: Duration::from_secs(60), stale: Duration::from_secs(3600), ..CachePolicy::default() };
        let key = key::key(Wire::Chat, "m", DETERMINISTIC).unwrap().key;
        let lifetime = Lifetime { ttl: Duration::from_secs(60), stale: Duration::from_secs(3600) };
        assert_eq!(plan_for(Some(&policy), Directive::Default, DETERMINISTIC), Plan::Lookup { key, lifetime });
        assert_eq!(plan_for(Some(&policy), Directive::Refresh, DETERMINISTIC), Plan::Refresh { key, lifetime });
        assert_eq!(plan_for(Some(&policy), Directive::Off, DETERMINISTIC), Plan::Bypass(Bypass::Client));
        assert_eq!(
            plan_for(Some(&policy), Directive::Default, SAMPLED),
            Plan::Bypass(Bypass::Refused(Refusal::Sampled))
        );
        let sampled = CachePolicy { sampled: true, ..policy };
        assert!(matches!(plan_for(Some(&sampled), Directive::Default, SAMPLED), Plan::Lookup { .. }));
        assert_eq!(plan_for(Some(&policy), Directive::Default, b"{\"model\":"), Plan::Bypass(Bypass::Unkeyable));
    }

    #[test]
    fn a_client_can_turn_the_cache_on_for_itself() {
        let on = plan_for(None, Directive::On, SAMPLED);
        assert!(matches!(on, Plan::Lookup { lifetime, .. } if lifetime == CachePolicy::default().lifetime()));
        let stateful = br#"{"model":"m","previous_response_id":"resp_1","input":"more"}"#;
        assert_eq!(
            plan(Some(Wire::Responses), None, Directive::On, "m", stateful),
            Plan::Bypass(Bypass::Refused(Refusal::Stateful))
        );
    }

    #[tokio::test]
    async fn a_lookup_replays_a_fresh_answer_and_keeps_a_stale_one_for_last() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("c.db"), store::Limits::default(), Default::default()).await.unwrap();
        let key = key::key(Wire::Chat, "m", DETERMINISTIC).unwrap().key;
        let ask = replay::Ask { wire: Wire::Chat, stream: false, include_usage: false };
        let lifetime = Lifetime { ttl: Duration::from_secs(60), stale: Duration::from_secs(600) };
        assert!(matches!(lookup(&store, &key, lifetime, ask, 0).await, Lookup::Miss));
        let body = r#"{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[]}"#;
        store.put(key, Entry { cost_usd: Some(0.01), ..replay::tests::entry(Form::Json, body) });
        store.flush().await;
        let Lookup::Fresh { response, entry } = lookup(&store, &key, lifetime, ask, 30_000).await else {
            panic!("fresh")
        };
        assert_eq!((response.headers()["x-switchyard-cache"].to_str().unwrap(), entry.cost_usd), ("hit", Some(0.01)));
        let Lookup::Stale(hit) = lookup(&store, &key, lifetime, ask, 120_000).await else { panic!("stale") };
        let stale = serve_stale(&hit, replay::Ask { stream: true, ..ask }).unwrap();
        assert_eq!(stale.headers()["x-switchyard-cache"], "stale");
        assert_eq!(stale.headers()["age"], "120");
        assert_eq!(stale.headers()["content-type"], "text/event-stream");
        assert!(matches!(lookup(&store, &key, lifetime, ask, 661_000).await, Lookup::Miss));
    }

    /// What a hit costs end to end (lookup, inflate, replay), as a p50 over
    /// many: `cargo test -p switchyard-core --lib hit_cost -- --ignored --nocapture`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore]
    async fn hit_cost() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("c.db"), store::Limits::default(), Default::default()).await.unwrap();
        let text = "The retry policy honours the wait when it fits the deadline. ".repeat(30);
        let body = serde_json::json!({"id": "c", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", "logprobs": null, "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 500, "completion_tokens": 400, "total_tokens": 900}})
        .to_string();
        let key = key::key(Wire::Chat, "m", DETERMINISTIC).unwrap().key;
        store.put(key, replay::tests::entry(Form::Json, &body));
        store.flush().await;
        let lifetime = Lifetime { ttl: Duration::from_secs(60), stale: Duration::ZERO };
        for stream in [false, true] {
            let ask = replay::Ask { wire: Wire::Chat, stream, include_usage: true };
            let mut took = Vec::new();
            for _ in 0..2000 {
                let started = std::time::Instant::now();
                let found = lookup(&store, &key, lifetime, ask, 1000).await;
                took.push(started.elapsed());
                assert!(matches!(found, Lookup::Fresh { .. }));
            }
            took.sort();
            println!(
                "hit of a {} byte answer (stream: {stream}): p50 {:?}, p99 {:?}",
                body.len(),
                took[1000],
                took[1980]
            );
        }
    }

    #[test]
    fn the_header_is_read_without_regard_to_case() {
        let mut h = HeaderMap::new();
        assert_eq!(Directive::from_headers(&h), Directive::Default);
        for (value, directive) in [
            ("on", Directive::On),
            (" OFF ", Directive::Off),
            ("Refresh", Directive::Refresh),
            ("maybe", Directive::Default),
        ] {
            h.insert(replay::X_SWITCHYARD_CACHE, HeaderValue::from_static(value));
            assert_eq!(Directive::from_headers(&h), directive, "{value:?}");
        }
    }
}
