//! The exact response cache: a repeated deterministic request is answered
//! from SQLite without an upstream call, and an expired answer is the
//! chain's last resort when every provider has failed.
//!
//! - [`key`]: the canonical request and its SHA-256, and whether a request may be cached.
//! - [`store`]: the entries in SQLite, their size cap and their lifetimes.
//! - [`replay`]: a stored answer in the form the client asked for, with the
//!   cache's headers; [`reframe`] tells a JSON answer as a stream, [`fold`] a
//!   stream as JSON.
//! - [`fallback`]: a route's static answer, and the gateway's error as a
//!   problem document in the client's protocol, for when nothing else answers.
//! - [`metrics`]: counters for the metrics endpoint and the dashboard.
//! - this file: the settings, the client's `x-switchyard-cache` header, and
//!   [`plan`], which says what the cache does for one request.

pub mod fallback;
pub mod fold;
pub mod key;
pub mod metrics;
pub mod reframe;
pub mod replay;
pub mod store;

use std::time::Duration;

use axum::http::HeaderMap;

pub use key::{CacheKey, Facts, Keyed, Refusal, Wire};
pub use metrics::{CacheCounters, CacheStats, CacheStatus};
pub use store::{Entry, Form, Freshness, Hit, Lifetime, Store};

/// `cache = { ttl = "10m", stale = "1h", tools = false, sampled = false }`,
/// in `[policy]` or a route's policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CachePolicy {
    /// How long an answer is served fresh.
    pub ttl: Duration,
    /// How much longer an expired answer may stand in when the chain fails.
    pub stale: Duration,
    /// Cache conversations that hold tool calls or results too.
    pub tools: bool,
    /// Cache sampled answers too (any temperature): a repeat gets the same answer.
    pub sampled: bool,
}

impl Default for CachePolicy {
    fn default() -> CachePolicy {
        CachePolicy { ttl: Duration::from_secs(600), stale: Duration::ZERO, tools: false, sampled: false }
    }
}

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

#[cfg(test)]
mod tests {
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
