//! Which provider each session ([`crate::session`]) was last served by.
//!
//! Two policies read it. *Stickiness*: after a fallback, a session keeps
//! going to the provider that served it while it stays active (each request
//! within `policy.session_stick` of the last), unless that provider fails;
//! then the chain's order is back. Without it, a primary that fails now and
//! then moves the conversation back and forth, and each move pays for the
//! whole cached prefix again. *Ownership of thinking*: a provider can only
//! verify the reasoning signatures it made. A signature the session sends
//! that the gateway has not seen before was made by the provider that
//! served the session's last turn (every earlier one was seen in an earlier
//! request), so once a session has met a second signer, each signature is
//! put down to its maker the first time it comes back ([`Reasoning`]).
//!
//! Held in memory, per instance: a restarted gateway (or another instance
//! of a team) starts in chain order, which costs one cache fill, nothing
//! more. Bounded: beyond [`MAX_SESSIONS`], sessions idle longest go first.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

/// Sessions remembered at most.
pub const MAX_SESSIONS: usize = 50_000;

/// How long a session's last provider is remembered for its thinking
/// blocks, after its last request.
pub const REMEMBER: Duration = Duration::from_secs(24 * 3600);

/// Signatures put down to their makers, per session, at most.
pub const MAX_SIGNATURES: usize = 4_096;

#[derive(Debug, Clone)]
struct Last {
    provider: String,
    /// Who can verify the reasoning it made: providers of one kind at one
    /// address are one signer.
    signer: String,
    at: Instant,
    /// Every signer that has served the session, in order.
    signers: Vec<String>,
    /// Who made each signature, once the session has met a second signer.
    ledger: Option<Arc<Ledger>>,
}

/// A session's signatures and their makers, by a hash of the signature.
#[derive(Debug, Default)]
struct Ledger(Mutex<HashMap<u64, String>>);

/// What is known of a session's reasoning when a request of it is sent.
#[derive(Debug, Clone)]
pub struct Reasoning {
    /// The signer of the session's last turn: the maker of any signature
    /// not seen before.
    pub last: String,
    /// Every signer that has served the session.
    pub signers: Vec<String>,
    ledger: Arc<Ledger>,
}

impl Reasoning {
    /// Who made the signature `raw`, put down to the last signer the
    /// first time it is seen.
    pub fn maker(&self, raw: &str) -> String {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        raw.hash(&mut hasher);
        let key = hasher.finish();
        let mut makers = self.ledger.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(maker) = makers.get(&key) {
            return maker.clone();
        }
        if makers.len() < MAX_SIGNATURES {
            makers.insert(key, self.last.clone());
        }
        self.last.clone()
    }
}

/// Every session's last provider.
#[derive(Debug, Default)]
pub struct Sessions {
    last: Mutex<HashMap<String, Last>>,
}

impl Sessions {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Last>> {
        self.last.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The provider `session` sticks to now, if it was served within
    /// `stick` of `now`.
    pub fn stuck_to(&self, session: &str, stick: Duration, now: Instant) -> Option<String> {
        if stick.is_zero() {
            return None;
        }
        let last = self.lock();
        let l = last.get(session)?;
        let active = now.saturating_duration_since(l.at) <= stick && !l.provider.is_empty();
        active.then(|| l.provider.clone())
    }

    /// What is known of the reasoning `session` sends back to a provider
    /// signing as `target`, when some of it may be another's: the session
    /// was served within [`REMEMBER`] by a signer other than `target`. A
    /// session only ever served by `target` (most) gets `None`, with
    /// nothing copied or made.
    pub fn reasoning(&self, session: &str, target: &str, now: Instant) -> Option<Reasoning> {
        let mut last = self.lock();
        let l = last.get_mut(session).filter(|l| now.saturating_duration_since(l.at) <= REMEMBER)?;
        if l.signers.iter().all(|s| s == target) {
            return None;
        }
        let ledger = Arc::clone(l.ledger.get_or_insert_with(Arc::default));
        Some(Reasoning { last: l.signer.clone(), signers: l.signers.clone(), ledger })
    }

    /// `provider` (signing as `signer`) answered a request of `session`.
    pub fn served(&self, session: &str, provider: &str, signer: &str, now: Instant) {
        let mut last = self.lock();
        if let Some(l) = last.get_mut(session) {
            if l.provider != provider {
                l.provider = provider.to_string();
            }
            if l.signer != signer {
                l.signer = signer.to_string();
            }
            if !l.signers.iter().any(|s| s == signer) {
                l.signers.push(signer.to_string());
            }
            l.at = now;
            return;
        }
        if last.len() >= MAX_SESSIONS {
            evict(&mut last, now);
        }
        let entry = Last {
            provider: provider.to_string(),
            signer: signer.to_string(),
            at: now,
            signers: vec![signer.to_string()],
            ledger: None,
        };
        last.insert(session.to_string(), entry);
    }

    /// `provider` failed a request of `session`: the session no longer
    /// sticks to it (its reasoning is still that provider's).
    pub fn failed(&self, session: &str, provider: &str) {
        // No provider to stick to ([`Sessions::stuck_to`]); its signers stay.
        if let Some(l) = self.lock().get_mut(session).filter(|l| l.provider == provider) {
            l.provider.clear();
        }
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Makes room: the forgotten first, then the idlest half.
fn evict(last: &mut HashMap<String, Last>, now: Instant) {
    last.retain(|_, l| now.saturating_duration_since(l.at) <= REMEMBER);
    if last.len() >= MAX_SESSIONS {
        let mut ages: Vec<Instant> = last.values().map(|l| l.at).collect();
        let (_, median, _) = ages.select_nth_unstable(last.len() / 2);
        let cut = *median;
        last.retain(|_, l| l.at > cut);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STICK: Duration = Duration::from_secs(120);

    #[tokio::test(start_paused = true)]
    async fn a_session_sticks_while_active_and_not_after_a_failure() {
        let s = Sessions::default();
        let now = Instant::now();
        assert_eq!(s.stuck_to("a", STICK, now), None);
        s.served("a", "backup", "anthropic@b", now);
        assert_eq!(s.stuck_to("a", STICK, now).as_deref(), Some("backup"));
        assert_eq!(s.stuck_to("a", Duration::ZERO, now), None, "zero turns it off");
        // Activity keeps it; two minutes of silence ends it.
        tokio::time::advance(Duration::from_secs(100)).await;
        s.served("a", "backup", "anthropic@b", Instant::now());
        tokio::time::advance(Duration::from_secs(100)).await;
        assert_eq!(s.stuck_to("a", STICK, Instant::now()).as_deref(), Some("backup"));
        tokio::time::advance(Duration::from_secs(21)).await;
        assert_eq!(s.stuck_to("a", STICK, Instant::now()), None);
        assert_eq!(
            s.reasoning("a", "elsewhere", Instant::now()).unwrap().last,
            "anthropic@b",
            "reasoning is remembered longer"
        );
        // A failure of the provider it sticks to ends the stick at once.
        s.served("a", "backup", "anthropic@b", Instant::now());
        s.failed("a", "primary");
        assert!(s.stuck_to("a", STICK, Instant::now()).is_some(), "another provider's failure changes nothing");
        s.failed("a", "backup");
        assert_eq!(s.stuck_to("a", STICK, Instant::now()), None);
        assert_eq!(s.reasoning("a", "elsewhere", Instant::now()).unwrap().last, "anthropic@b");
    }

    #[tokio::test(start_paused = true)]
    async fn each_signature_is_its_maker_s() {
        let s = Sessions::default();
        let now = Instant::now();
        s.served("a", "one", "x@1", now);
        let r = s.reasoning("a", "elsewhere", now).unwrap();
        assert_eq!(r.signers, ["x@1"]);
        assert_eq!(r.maker("sig-1"), "x@1");
        // Another signer serves the next turn: what was seen stays the
        // first's, what is new is the second's.
        s.served("a", "two", "x@2", now);
        let r = s.reasoning("a", "elsewhere", now).unwrap();
        assert_eq!(r.signers, ["x@1", "x@2"]);
        assert_eq!(r.maker("sig-1"), "x@1");
        assert_eq!(r.maker("sig-2"), "x@2");
        s.served("a", "one", "x@1", now);
        let r = s.reasoning("a", "elsewhere", now).unwrap();
        assert_eq!((r.maker("sig-1"), r.maker("sig-2"), r.maker("sig-3")), ("x@1".into(), "x@2".into(), "x@1".into()));
    }

    #[tokio::test(start_paused = true)]
    async fn memory_is_bounded() {
        let s = Sessions::default();
        for i in 0..MAX_SESSIONS + 10 {
            if i % 1000 == 0 {
                tokio::time::advance(Duration::from_millis(1)).await;
            }
            s.served(&i.to_string(), "p", "p", Instant::now());
        }
        assert!(s.len() <= MAX_SESSIONS);
        assert!(s.stuck_to(&(MAX_SESSIONS + 9).to_string(), STICK, Instant::now()).is_some(), "the newest stays");
    }
}
