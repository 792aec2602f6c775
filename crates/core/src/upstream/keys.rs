//! A provider's key pool: several keys, used round-robin. A key the
//! provider refuses (401/403) is revoked and the next one is used; a key
//! that hit a rate limit (429) cools down until its reset time.
//!
//! A request of a session ([`crate::session`]) uses the same key every
//! time instead, while that key is usable: providers cache a prompt's
//! prefix per key (per account), so a conversation that hops keys pays for
//! its whole prefix again at each hop. The key is chosen by rendezvous
//! hashing, so sessions still spread over the keys, a key that goes out of
//! use moves only its own sessions, and every instance of a team picks the
//! same key for a session (the score is made from the key's fingerprint).

use std::sync::{Mutex, MutexGuard};

use secrecy::ExposeSecret;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::config::Auth;
use crate::secrets::{ProviderKey, SecretStore};

/// What instances of a team call a key: a keyed hash of the secret, the
/// same wherever the key is loaded, from which the key cannot be found.
/// Labels are local names; the secret never leaves the instance.
pub fn fingerprint(secret: &str) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, b"switchyard key fingerprint v1");
    let tag = ring::hmac::sign(&key, secret.as_bytes());
    tag.as_ref()[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// A hash of a key's secret, the same on every instance: a point for
/// rendezvous hashing ([`KeyPool::pick_where`]).
fn key_point(secret: &str) -> u64 {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, b"switchyard key affinity v1");
    let tag = ring::hmac::sign(&key, secret.as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&tag.as_ref()[..8]);
    u64::from_le_bytes(bytes)
}

/// The rendezvous score of a key for a session: the highest usable wins.
/// SplitMix64's finaliser, so that nearby inputs score independently.
fn score(session: u64, point: u64) -> u64 {
    let mut z = session ^ point;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[derive(Debug)]
struct Slot {
    key: ProviderKey,
    /// [`key_point`] of the secret, made once.
    point: u64,
    revoked: Option<String>,
    cooling_until: Option<Instant>,
}

impl Slot {
    fn new(key: ProviderKey) -> Slot {
        let point = key_point(key.secret.expose_secret());
        Slot { key, point, revoked: None, cooling_until: None }
    }
}

impl Slot {
    /// Not refused by the provider, and not cooling down at `now`.
    fn usable(&self, now: Instant) -> bool {
        self.revoked.is_none() && self.cooling_until.is_none_or(|t| t <= now)
    }
}

#[derive(Debug)]
enum Source {
    /// The provider takes no key (a local server).
    NotNeeded,
    Loaded(Vec<Slot>),
    /// No store holds a key for this provider.
    Missing,
    /// The stores could not be read.
    Unavailable(String),
}

#[derive(Debug)]
struct State {
    source: Source,
    next: usize,
}

/// What can be shown about a key: never the key itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct KeySummary {
    pub label: String,
    /// The last four characters, to tell keys apart.
    pub last4: String,
    pub status: KeyStatus,
    pub detail: Option<String>,
}

/// Whether a key is in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum KeyStatus {
    Ok,
    /// Refused by the provider: not used until the keys are reloaded.
    Revoked,
    /// Rate-limited for a while.
    Cooling,
}

/// Why no key can be used now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoKey {
    /// Every usable key is cooling down; the first is free again then.
    Cooling(Instant),
    /// Missing, unreadable, or every key revoked.
    Unusable(String),
    /// Every usable key serves as many requests as it may at once.
    Busy,
}

#[derive(Debug)]
pub struct KeyPool {
    provider: String,
    auth: Auth,
    state: Mutex<State>,
}

impl KeyPool {
    pub fn load(provider: &str, auth: Auth, store: &dyn SecretStore) -> KeyPool {
        let pool = KeyPool {
            provider: provider.to_string(),
            auth,
            state: Mutex::new(State { source: Source::Missing, next: 0 }),
        };
        pool.reload(store);
        pool
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Reads the keys again (after `switchyard keys set`, say). Revocations
    /// and cool-downs of keys that are still there are kept.
    pub fn reload(&self, store: &dyn SecretStore) {
        let source = match self.auth {
            Auth::None => Source::NotNeeded,
            Auth::Key => match store.keys(&self.provider) {
                Ok(keys) if keys.is_empty() => Source::Missing,
                Ok(keys) => Source::Loaded(keys.into_iter().map(Slot::new).collect()),
                Err(e) => Source::Unavailable(e.to_string()),
            },
        };
        let mut state = self.state();
        if let (Source::Loaded(old), Source::Loaded(new)) = (&state.source, &source) {
            let kept: Vec<(String, Option<String>, Option<Instant>)> = old
                .iter()
                .filter(|o| {
                    new.iter().any(|n| {
                        n.key.label == o.key.label && n.key.secret.expose_secret() == o.key.secret.expose_secret()
                    })
                })
                .map(|o| (o.key.label.clone(), o.revoked.clone(), o.cooling_until))
                .collect();
            let mut source = source;
            if let Source::Loaded(slots) = &mut source {
                for slot in slots.iter_mut() {
                    if let Some((_, revoked, cooling)) = kept.iter().find(|(l, _, _)| *l == slot.key.label) {
                        slot.revoked = revoked.clone();
                        slot.cooling_until = *cooling;
                    }
                }
            }
            state.source = source;
        } else {
            state.source = source;
        }
    }

    pub fn needs_key(&self) -> bool {
        self.auth == Auth::Key
    }

    /// Why the provider cannot be used at all, whatever the time.
    pub fn problem(&self) -> Option<String> {
        let name = &self.provider;
        match &self.state().source {
            Source::NotNeeded => None,
            Source::Loaded(slots) if slots.iter().any(|s| s.revoked.is_none()) => None,
            Source::Loaded(_) => Some(format!("every key for {name} was refused by the provider (revoked)")),
            Source::Missing => Some(format!(
                "no key for {name} (set one with `switchyard keys set {name}` or {})",
                crate::secrets::EnvStore::variable_for(name)
            )),
            Source::Unavailable(reason) => Some(format!("keys for {name} cannot be read: {reason}")),
        }
    }

    /// The next usable key, round-robin; `Ok(None)` when none is needed.
    pub fn pick(&self, now: Instant) -> Result<Option<ProviderKey>, NoKey> {
        self.pick_where(now, None, |_| true)
    }

    /// A usable key that `accept` takes (a lease on it): for a request of a
    /// session (`affinity`, [`crate::session::Session::affinity`]) the one
    /// with the highest rendezvous score, else the next round-robin.
    pub fn pick_where(
        &self,
        now: Instant,
        affinity: Option<u64>,
        mut accept: impl FnMut(&ProviderKey) -> bool,
    ) -> Result<Option<ProviderKey>, NoKey> {
        let mut state = self.state();
        let start = state.next;
        let slots = match &mut state.source {
            Source::NotNeeded => return Ok(None),
            Source::Loaded(slots) => slots,
            Source::Missing | Source::Unavailable(_) => return Err(NoKey::Unusable(self.problem_unlocked())),
        };
        let n = slots.len();
        for slot in slots.iter_mut() {
            if slot.cooling_until.is_some_and(|t| t <= now) {
                slot.cooling_until = None;
            }
        }
        let usable = |s: &Slot| s.revoked.is_none() && s.cooling_until.is_none();
        let busy = slots.iter().any(usable);
        if let Some(session) = affinity {
            // Highest score first; a pool holds a handful of keys, so
            // sorting their indices costs less than a hash would.
            let mut order: Vec<usize> = (0..n).filter(|&i| usable(&slots[i])).collect();
            order.sort_unstable_by_key(|&i| std::cmp::Reverse(score(session, slots[i].point)));
            if let Some(i) = order.into_iter().find(|&i| accept(&slots[i].key)) {
                return Ok(Some(slots[i].key.clone()));
            }
        } else {
            for i in 0..n {
                let slot = &slots[(start + i) % n];
                if usable(slot) && accept(&slot.key) {
                    let key = slot.key.clone();
                    state.next = (start + i + 1) % n;
                    return Ok(Some(key));
                }
            }
        }
        if busy {
            return Err(NoKey::Busy);
        }
        match slots.iter().filter(|s| s.revoked.is_none()).filter_map(|s| s.cooling_until).min() {
            Some(until) => Err(NoKey::Cooling(until)),
            None => {
                Err(NoKey::Unusable(format!("every key for {} was refused by the provider (revoked)", self.provider)))
            }
        }
    }

    /// A usable key without moving the round-robin on (for probes).
    pub fn peek(&self, now: Instant) -> Option<ProviderKey> {
        match &self.state().source {
            Source::Loaded(slots) => slots.iter().find(|s| s.usable(now)).map(|s| s.key.clone()),
            Source::NotNeeded | Source::Missing | Source::Unavailable(_) => None,
        }
    }

    /// Whether a key could be used right now.
    pub fn has_ready(&self, now: Instant) -> bool {
        match &self.state().source {
            Source::NotNeeded => true,
            Source::Loaded(slots) => slots.iter().any(|s| s.usable(now)),
            Source::Missing | Source::Unavailable(_) => false,
        }
    }

    /// When the first cooling key is ready again, if every usable key is cooling.
    pub fn ready_at(&self, now: Instant) -> Option<Instant> {
        match &self.state().source {
            Source::Loaded(slots) if !slots.iter().any(|s| s.usable(now)) => {
                slots.iter().filter(|s| s.revoked.is_none()).filter_map(|s| s.cooling_until).min()
            }
            _ => None,
        }
    }

    fn problem_unlocked(&self) -> String {
        format!("no usable key for {}", self.provider)
    }

    /// Marks a key refused by the provider. Returns whether another key is left.
    pub fn revoke(&self, label: &str, reason: &str) -> bool {
        let mut state = self.state();
        let Source::Loaded(slots) = &mut state.source else { return false };
        for slot in slots.iter_mut().filter(|s| s.key.label == label) {
            slot.revoked = Some(reason.to_string());
        }
        slots.iter().any(|s| s.revoked.is_none())
    }

    /// Whether the provider refused the key labelled `label`.
    pub fn is_revoked(&self, label: &str) -> bool {
        match &self.state().source {
            Source::Loaded(slots) => slots.iter().any(|s| s.key.label == label && s.revoked.is_some()),
            _ => false,
        }
    }

    /// Whether a key other than `label` is left that the provider has not refused.
    pub fn usable_besides(&self, label: &str) -> bool {
        match &self.state().source {
            Source::Loaded(slots) => slots.iter().any(|s| s.revoked.is_none() && s.key.label != label),
            _ => false,
        }
    }

    /// The label of the key whose [`fingerprint`] is `fp`, if this pool holds it.
    pub fn label_of(&self, fp: &str) -> Option<String> {
        match &self.state().source {
            Source::Loaded(slots) => {
                slots.iter().find(|s| fingerprint(s.key.secret.expose_secret()) == fp).map(|s| s.key.label.clone())
            }
            _ => None,
        }
    }

    /// The [`fingerprint`] of the key labelled `label`.
    pub fn fingerprint_of(&self, label: &str) -> Option<String> {
        match &self.state().source {
            Source::Loaded(slots) => {
                slots.iter().find(|s| s.key.label == label).map(|s| fingerprint(s.key.secret.expose_secret()))
            }
            _ => None,
        }
    }

    /// Cools a key down until `until`, unless it already cools longer: a
    /// later reset wins, an earlier one never shortens it.
    pub fn cool_at_least(&self, label: &str, until: Instant) {
        let mut state = self.state();
        if let Source::Loaded(slots) = &mut state.source {
            for slot in slots.iter_mut().filter(|s| s.key.label == label) {
                slot.cooling_until = Some(slot.cooling_until.map_or(until, |t| t.max(until)));
            }
        }
    }

    /// Cools a key down until `until`.
    pub fn cool(&self, label: &str, until: Instant) {
        let mut state = self.state();
        if let Source::Loaded(slots) = &mut state.source {
            for slot in slots.iter_mut().filter(|s| s.key.label == label) {
                slot.cooling_until = Some(until);
            }
        }
    }

    /// Shows `f` every key held, usable or not: for scrubbing them out of
    /// upstream text ([`crate::proxy::scrub`]), never for showing.
    pub(crate) fn each_secret(&self, mut f: impl FnMut(&str)) {
        if let Source::Loaded(slots) = &self.state().source {
            for slot in slots {
                f(slot.key.secret.expose_secret());
            }
        }
    }

    /// Labels, last four characters and status of each key.
    pub fn summary(&self, now: Instant) -> Vec<KeySummary> {
        let state = self.state();
        let Source::Loaded(slots) = &state.source else { return Vec::new() };
        slots
            .iter()
            .map(|s| {
                let secret = s.key.secret.expose_secret();
                let last4: String = secret.chars().rev().take(4).collect::<Vec<_>>().into_iter().rev().collect();
                let (status, detail) = match (&s.revoked, s.cooling_until.filter(|t| *t > now)) {
                    (Some(reason), _) => (KeyStatus::Revoked, Some(reason.clone())),
                    (None, Some(until)) => {
                        (KeyStatus::Cooling, Some(format!("rate-limited for {} ms more", (until - now).as_millis())))
                    }
                    (None, None) => (KeyStatus::Ok, None),
                };
                KeySummary { label: s.key.label.clone(), last4, status, detail }
            })
            .collect()
    }

    /// A one-line description for start-up logs.
    pub fn describe(&self) -> String {
        match &self.state().source {
            Source::NotNeeded => "no key needed".into(),
            Source::Loaded(slots) => format!("{} key{}", slots.len(), if slots.len() == 1 { "" } else { "s" }),
            Source::Missing => format!("no key (set one with `switchyard keys set {}`)", self.provider),
            Source::Unavailable(reason) => format!("keys unavailable: {reason}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secrets::MemoryStore;
    use std::time::Duration;

    fn pool(keys: &[(&str, &str)]) -> KeyPool {
        let store = keys.iter().fold(MemoryStore::new(), |s, (label, secret)| s.with("p", label, secret));
        KeyPool::load("p", Auth::Key, &store)
    }

    fn label(k: Result<Option<ProviderKey>, NoKey>) -> String {
        k.unwrap().unwrap().label
    }

    #[tokio::test(start_paused = true)]
    async fn round_robin_skips_revoked_and_cooling_keys() {
        let p = pool(&[("a", "sk-aaaa1111"), ("b", "sk-bbbb2222"), ("c", "sk-cccc3333")]);
        let now = Instant::now();
        assert_eq!(
            [label(p.pick(now)), label(p.pick(now)), label(p.pick(now)), label(p.pick(now))],
            ["a", "b", "c", "a"]
        );
        assert!(p.revoke("b", "401 from provider"));
        p.cool("c", now + Duration::from_secs(5));
        assert_eq!([label(p.pick(now)), label(p.pick(now))], ["a", "a"]);
        tokio::time::advance(Duration::from_secs(5)).await;
        let later = Instant::now();
        assert_eq!([label(p.pick(later)), label(p.pick(later))], ["c", "a"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_session_keeps_its_key_while_it_is_usable_and_sessions_spread() {
        let p = pool(&[("a", "sk-aaaa1111"), ("b", "sk-bbbb2222"), ("c", "sk-cccc3333")]);
        let now = Instant::now();
        let pick = |session: u64, at: Instant| label(p.pick_where(at, Some(session), |_| true));
        let first = pick(7, now);
        assert!((0..20).all(|_| pick(7, now) == first), "a session hops keys");
        // Many sessions use every key, none much more than a third.
        let mut counts = std::collections::HashMap::new();
        for session in 0..3_000u64 {
            *counts.entry(pick(session.wrapping_mul(0x9e37_79b9_7f4a_7c15), now)).or_insert(0) += 1;
        }
        assert_eq!(counts.len(), 3);
        assert!(counts.values().all(|&c| (800..1_200).contains(&c)), "{counts:?}");
        // Its key cooling, the session moves to one other key, and back
        // once the key is usable again; round-robin is not moved by it.
        p.cool(&first, now + Duration::from_secs(5));
        let second = pick(7, now);
        assert_ne!(second, first);
        assert!((0..5).all(|_| pick(7, now) == second));
        tokio::time::advance(Duration::from_secs(5)).await;
        assert_eq!(pick(7, Instant::now()), first);
        assert_eq!(label(p.pick(Instant::now())), "a");
        // A key another request holds (the accept test refuses it) is passed over.
        let other = label(p.pick_where(Instant::now(), Some(7), |k| k.label != first));
        assert_ne!(other, first);
    }

    #[tokio::test(start_paused = true)]
    async fn all_cooling_says_until_when_and_all_revoked_is_a_problem() {
        let p = pool(&[("a", "k1"), ("b", "k2")]);
        let now = Instant::now();
        p.cool("a", now + Duration::from_secs(3));
        p.cool("b", now + Duration::from_secs(2));
        assert!(matches!(p.pick(now), Err(NoKey::Cooling(t)) if t == now + Duration::from_secs(2)));
        assert!(p.revoke("a", "401"));
        assert!(!p.revoke("b", "403"));
        assert!(matches!(p.pick(now), Err(NoKey::Unusable(_))));
        assert!(p.problem().unwrap().contains("revoked"));
    }

    #[test]
    fn summaries_show_label_last_four_and_status_only() {
        let p = pool(&[("main", "sk-secret-value-wxyz")]);
        p.revoke("main", "401 Unauthorized");
        let s = p.summary(Instant::now());
        assert_eq!(s[0].last4, "wxyz");
        assert_eq!(s[0].status, KeyStatus::Revoked);
        assert!(!format!("{s:?}").contains("secret-value"));
    }

    #[test]
    fn keyless_and_missing() {
        let none = KeyPool::load("local", Auth::None, &MemoryStore::new());
        assert!(matches!(none.pick(Instant::now()), Ok(None)));
        assert!(none.problem().is_none());
        let missing = KeyPool::load("p", Auth::Key, &MemoryStore::new());
        assert!(missing.problem().unwrap().contains("no key for p"));
    }
}
