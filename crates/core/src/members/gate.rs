//! The request path's check of members: who is asking (a member's key, the
//! owner's access token), whether that key still holds, and whether the
//! member may make this request now (models, budget, requests and tokens a
//! minute). Every refusal happens before any provider is called.
//!
//! The members are read from the store at most once a second, on the
//! request that finds the copy older than that: a key revoked or expired
//! on any instance of a team (they share one database) is refused within a
//! second everywhere, with no message to lose. The members' budgets are
//! the budget engine's ([`crate::policy::budget`], scope `member:NAME`):
//! each read hands them over ([`Members::budgets`]), and [`super::spend`]
//! reserves against them.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use tokio::time::Instant;
use tracing::warn;

use super::{glob_match, hash_text, Member, MemberState, KEY_PREFIX};
use crate::ground::compare::constant_time_eq;
use crate::ground::share::Roll;
use crate::history::Store;
use crate::policy::budget::{Blocked, BudgetPeriod, Covering};
use crate::protocol::error::{ApiError, ErrorCode};
use crate::protocol::Protocol;
use crate::team::{AdmitAsk, Admitted, Asking, Held, Team};

/// How often the gateway reads the members again, in the background: a
/// revocation or a change made anywhere (the CLI, another instance) is in
/// force within it.
pub(crate) const REFRESH: Duration = Duration::from_secs(1);
/// The same with no member defined: the first member added elsewhere (the
/// CLI, another instance) makes key-less requests refused within this.
pub(crate) const REFRESH_WITHOUT_MEMBERS: Duration = Duration::from_secs(30);
/// A member-shaped key the copy does not know waits for a read that began
/// after it arrived, and such reads begin at most this often: a member added
/// a moment ago elsewhere is let in on its first request, and a run of wrong
/// keys costs the database at most ten reads a second (and is throttled per
/// address).
const RECHECK: Duration = Duration::from_millis(100);
/// A copy this old is kept by no background read.
const UNKEPT: Duration = Duration::from_secs(60);
/// Requests with a wrong key one address may make a minute; past it the
/// address is refused without a look at its keys until the minute ends.
pub const WRONG_KEYS_PER_MINUTE: u32 = 20;
/// Addresses remembered for wrong keys; past it the oldest minute is forgotten.
const MAX_ADDRESSES: usize = 10_000;
const MINUTE: Duration = Duration::from_secs(60);

/// Why a request was refused; each has its error code and status.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// No key, or one no member has (and not the owner's token).
    InvalidKey,
    Revoked(String),
    Expired(String),
    /// Too many wrong keys from this address this minute.
    Throttled {
        retry_after: Duration,
    },
    ModelNotAllowed {
        member: String,
        model: String,
    },
    OverBudget {
        member: String,
        spent_usd: f64,
        limit_usd: f64,
        period: BudgetPeriod,
        resets_at_ms: i64,
    },
    /// Past the member's requests (`what` = "requests") or tokens a minute.
    RateLimited {
        member: String,
        what: &'static str,
        limit: u64,
        retry_after: Duration,
    },
}

impl Refusal {
    /// The refusal in the client's protocol; the messages name members
    /// and models, never a key.
    pub fn in_protocol(&self, protocol: Protocol) -> ApiError {
        let error = |code, message: String| ApiError::new(protocol, code, message);
        match self {
            Refusal::InvalidKey => error(
                ErrorCode::InvalidAccessToken,
                "this gateway has members: send a member's key (or the local access token) as the API key".into(),
            ),
            Refusal::Revoked(name) => error(ErrorCode::KeyRevoked, format!("the key of member {name:?} was revoked")),
            Refusal::Expired(name) => error(ErrorCode::KeyExpired, format!("the key of member {name:?} has expired")),
            Refusal::Throttled { retry_after } => ApiError {
                retry_after: Some(*retry_after),
                ..error(
                    ErrorCode::RateLimited,
                    format!("too many wrong keys from this address: try again in {}s", retry_after.as_secs().max(1)),
                )
            },
            Refusal::ModelNotAllowed { member, model } => {
                error(ErrorCode::ModelNotAllowed, format!("member {member:?} may not use the model `{model}`"))
            }
            Refusal::OverBudget { member, spent_usd, limit_usd, period, resets_at_ms } => error(
                ErrorCode::BudgetExceeded,
                format!(
                    "budget {:?} has spent ${spent_usd:.2} of ${limit_usd:.2} this {}",
                    super::Budget::scope(member),
                    period.as_str()
                ),
            )
            .until(*resets_at_ms),
            Refusal::RateLimited { member, what, limit, retry_after } => ApiError {
                retry_after: Some(*retry_after),
                ..error(
                    ErrorCode::RateLimited,
                    format!(
                        "member {member:?} is limited to {limit} {what} a minute: try again in {}s",
                        retry_after.as_secs().max(1)
                    ),
                )
            },
        }
    }

    /// A member's budget that refuses: `blocked` is the budget engine's word.
    pub fn over_budget(member: &str, blocked: &Blocked) -> Refusal {
        Refusal::OverBudget {
            member: member.to_string(),
            spent_usd: blocked.spent_usd,
            limit_usd: blocked.limit_usd,
            period: blocked.period,
            resets_at_ms: blocked.resets_at_ms,
        }
    }

    /// The member refused, when the key was a member's.
    pub fn member(&self) -> Option<&str> {
        match self {
            Refusal::Revoked(name) | Refusal::Expired(name) => Some(name),
            Refusal::ModelNotAllowed { member, .. }
            | Refusal::OverBudget { member, .. }
            | Refusal::RateLimited { member, .. } => Some(member),
            Refusal::InvalidKey | Refusal::Throttled { .. } => None,
        }
    }
}

/// The members as last read, and how many reads made them.
#[derive(Debug, Default)]
struct Snapshot {
    read_at: Option<Instant>,
    /// When the read behind this copy began: what was written before it is in.
    began_at: Option<Instant>,
    members: Arc<Vec<Member>>,
    reads: u64,
}

/// Counts in a fixed minute.
#[derive(Debug, Clone, Copy)]
struct Window {
    started: Instant,
    requests: u64,
    tokens: u64,
}

impl Window {
    fn current(slot: &mut Option<Window>, now: Instant) -> &mut Window {
        let fresh = slot.is_none_or(|w| now.duration_since(w.started) >= MINUTE);
        if fresh {
            *slot = Some(Window { started: now, requests: 0, tokens: 0 });
        }
        slot.get_or_insert(Window { started: now, requests: 0, tokens: 0 })
    }

    fn left(&self, now: Instant) -> Duration {
        MINUTE.saturating_sub(now.duration_since(self.started))
    }
}

/// The members in force and their counters; one per gateway.
#[derive(Debug)]
pub struct Members {
    snapshot: Mutex<Snapshot>,
    /// One read of the store at a time.
    reading: tokio::sync::Mutex<()>,
    per_member: Mutex<HashMap<String, Option<Window>>>,
    wrong_keys: Mutex<HashMap<IpAddr, Option<Window>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Default for Members {
    fn default() -> Members {
        Members::new()
    }
}

impl Members {
    pub fn new() -> Members {
        Members {
            snapshot: Mutex::new(Snapshot::default()),
            reading: tokio::sync::Mutex::new(()),
            per_member: Mutex::new(HashMap::new()),
            wrong_keys: Mutex::new(HashMap::new()),
        }
    }

    /// Each active member's budget, for the budget engine, and which read
    /// of the members it comes from (a new number: they may have changed).
    pub fn budgets(&self, now_ms: i64) -> (u64, Vec<crate::policy::Budget>) {
        let snapshot = lock(&self.snapshot);
        let budgets = snapshot
            .members
            .iter()
            .filter(|m| m.state(now_ms) == MemberState::Active)
            .filter_map(|m| {
                let b = m.budget?;
                Some(crate::policy::Budget {
                    name: super::Budget::scope(&m.name),
                    scope: crate::policy::BudgetScope::Member(m.name.clone()),
                    period: b.period,
                    limit_usd: b.limit_usd,
                    action: crate::policy::BudgetAction::Block,
                })
            })
            .collect();
        (snapshot.reads, budgets)
    }

    /// Reads the members again now (after a change through this gateway).
    pub async fn reload(&self, store: &Store) {
        let _one = self.reading.lock().await;
        self.read(store).await;
    }

    /// Reads the members again if the copy is older than [`REFRESH`].
    pub(crate) async fn refresh(&self, store: &Store) {
        if !self.stale() {
            return;
        }
        let _one = self.reading.lock().await;
        if self.stale() {
            self.read(store).await;
        }
    }

    fn stale(&self) -> bool {
        self.older_than(REFRESH)
    }

    pub(crate) fn older_than(&self, age: Duration) -> bool {
        lock(&self.snapshot).read_at.is_none_or(|at| at.elapsed() >= age)
    }

    /// Makes sure the copy comes from a read that began after `asked`:
    /// one already under way or done is taken; else one more, no sooner
    /// than [`RECHECK`] after the last began.
    async fn recheck(&self, store: &Store, asked: Instant) {
        let _one = self.reading.lock().await;
        let last = lock(&self.snapshot).began_at;
        if last.is_some_and(|began| began >= asked) {
            return;
        }
        if let Some(began) = last {
            tokio::time::sleep_until(began + RECHECK).await;
        }
        self.read(store).await;
    }

    fn unread(&self) -> bool {
        lock(&self.snapshot).read_at.is_none()
    }

    /// A failed read keeps the last copy: members are not dropped (nor
    /// revoked keys let in) because the database hiccuped once.
    async fn read(&self, store: &Store) {
        let began = Instant::now();
        let members = match store.members().await {
            Ok(m) => m,
            Err(e) => {
                warn!("members: cannot read them from the history: {e}");
                let mut snapshot = lock(&self.snapshot);
                snapshot.read_at = Some(Instant::now());
                snapshot.began_at = Some(began);
                return;
            }
        };
        let mut snapshot = lock(&self.snapshot);
        let reads = snapshot.reads + 1;
        *snapshot =
            Snapshot { read_at: Some(Instant::now()), began_at: Some(began), members: Arc::new(members), reads };
    }

    /// How many reads the copy has had.
    pub(crate) fn reads(&self) -> u64 {
        lock(&self.snapshot).reads
    }

    /// The members as last read.
    pub fn list(&self) -> Arc<Vec<Member>> {
        lock(&self.snapshot).members.clone()
    }

    /// Who is asking: `Ok(None)` for the owner (or anyone, with no members
    /// defined: the guard has applied the access token already), the member
    /// whose key `token` is, or why the request is refused.
    pub async fn identify(
        &self,
        store: Option<&Store>,
        token: Option<&str>,
        access_token: Option<&SecretString>,
        peer: Option<IpAddr>,
        now_ms: i64,
    ) -> Result<Option<Member>, Refusal> {
        let owner =
            |t: &str| access_token.is_some_and(|a| constant_time_eq(t.as_bytes(), a.expose_secret().as_bytes()));
        if token.is_some_and(owner) {
            return Ok(None);
        }
        let Some(store) = store else {
            // No database, so no members: a member-shaped key is no key.
            return if token.is_some_and(|t| t.starts_with(KEY_PREFIX)) { Err(Refusal::InvalidKey) } else { Ok(None) };
        };
        let asked = Instant::now();
        // The first request reads them; after that the background keeps
        // the copy (`Gateway::keep_members_fresh`). A copy far older than
        // its period means nothing does: the request reads it then.
        if self.unread() || self.older_than(UNKEPT) {
            self.refresh(store).await;
        }
        let mut members = self.list();
        let member_key = token.filter(|t| t.starts_with(KEY_PREFIX));
        if members.is_empty() && member_key.is_none() {
            return Ok(None);
        }
        if let Some(retry_after) = peer.and_then(|p| self.throttled(p)) {
            return Err(Refusal::Throttled { retry_after });
        }
        if member_key.is_some_and(|key| find(&members, key).is_none()) {
            // Maybe added a moment ago elsewhere: look again before refusing.
            self.recheck(store, asked).await;
            members = self.list();
        }
        let found = member_key.and_then(|key| find(&members, key));
        let Some(member) = found else {
            if let Some(p) = peer {
                self.count_wrong(p);
            }
            return Err(Refusal::InvalidKey);
        };
        match member.state(now_ms) {
            MemberState::Active => Ok(Some(member.clone())),
            MemberState::Revoked => Err(Refusal::Revoked(member.name.clone())),
            MemberState::Expired => Err(Refusal::Expired(member.name.clone())),
        }
    }

    fn throttled(&self, peer: IpAddr) -> Option<Duration> {
        let now = Instant::now();
        let mut wrong = lock(&self.wrong_keys);
        let w = wrong.get(&peer).copied().flatten()?;
        let current = now.duration_since(w.started) < MINUTE;
        (current && w.requests >= u64::from(WRONG_KEYS_PER_MINUTE)).then(|| w.left(now)).or_else(|| {
            if !current {
                wrong.remove(&peer);
            }
            None
        })
    }

    fn count_wrong(&self, peer: IpAddr) {
        let now = Instant::now();
        let mut wrong = lock(&self.wrong_keys);
        if wrong.len() >= MAX_ADDRESSES && !wrong.contains_key(&peer) {
            wrong.retain(|_, w| w.is_some_and(|w| now.duration_since(w.started) < MINUTE));
        }
        Window::current(wrong.entry(peer).or_default(), now).requests += 1;
    }

    /// Whether `member` may ask for `model` now, with about `tokens` tokens;
    /// counts the request against its per-minute limits when it may, or
    /// against `share` of them while its team's shared state is out of
    /// reach ([`Roll::WHOLE`]: alone, or in reach). (Its budget is the
    /// budget engine's: [`super::spend`].)
    pub fn check(&self, member: &Member, model: &str, tokens: u64, share: Roll) -> Result<(), Refusal> {
        if !member.models.is_empty() && !member.models.iter().any(|p| glob_match(p, model)) {
            return Err(Refusal::ModelNotAllowed { member: member.name.clone(), model: model.to_string() });
        }
        self.per_minute(member, tokens, share)
    }

    fn per_minute(&self, member: &Member, tokens: u64, share: Roll) -> Result<(), Refusal> {
        if member.rpm.is_none() && member.tpm.is_none() {
            return Ok(());
        }
        let rpm = share.share_of(member.rpm);
        let tpm = member.tpm.map(|t| share.share_u64(t));
        let now = Instant::now();
        let mut all = lock(&self.per_member);
        let w = Window::current(all.entry(member.name.clone()).or_default(), now);
        let limited = |what, limit: u64| Refusal::RateLimited {
            member: member.name.clone(),
            what,
            limit,
            retry_after: w.left(now),
        };
        if let Some(rpm) = rpm.map(u64::from).filter(|rpm| w.requests >= *rpm) {
            return Err(limited("requests", rpm));
        }
        // One request larger than the whole limit still goes alone, but not
        // on a share of nothing.
        if let Some(tpm) = tpm.filter(|tpm| (w.tokens > 0 || *tpm == 0) && w.tokens.saturating_add(tokens) > *tpm) {
            return Err(limited("tokens", tpm));
        }
        w.requests += 1;
        w.tokens = w.tokens.saturating_add(tokens);
        Ok(())
    }
}

/// What the team said to a member's request.
#[derive(Debug)]
pub enum AcrossTeam {
    /// Taken: the hold settles the member's reserved spend when it goes.
    Granted(Option<Box<dyn Held>>),
    /// The member's budget counter is missing: seed it and ask again.
    Unseeded(Vec<usize>),
    /// Redis is out of reach (or the member has no limit to share): this
    /// instance's own counts decide, with what its share of the member's
    /// budget holds while Redis is out of reach.
    Alone(Option<Box<dyn Held>>),
}

/// A member's requests and tokens a minute, and its budget, across a team:
/// one Redis bucket per member (named `member:NAME` beside the providers'
/// own) and the budget's spend counter (reserving the request's estimated
/// cost), taken in the same atomic step as a provider's. `count` gives the
/// budget's counter when the team asks for it; what it gave is left in
/// `budget`, to seed or to name.
pub async fn across_team(
    team: &dyn Team,
    member: &Member,
    tokens: u64,
    budget: &mut Vec<Covering>,
    count: impl FnOnce() -> Vec<Covering> + Send,
) -> Result<AcrossTeam, Refusal> {
    let answer = {
        let slot = &mut *budget;
        let ask: Asking<'_> = Box::new(move || {
            *slot = count();
            if member.rpm.is_none() && member.tpm.is_none() && slot.is_empty() {
                return None;
            }
            Some(AdmitAsk {
                provider: format!("member:{}", member.name),
                provider_max: None,
                key: None,
                requests_per_minute: member.rpm,
                tokens_per_minute: member.tpm.map(|t| u32::try_from(t).unwrap_or(u32::MAX)),
                tokens,
                budgets: slot.iter().map(|c| c.ask.clone()).collect(),
                line: None,
            })
        });
        team.admit(ask).await
    };
    match answer {
        Admitted::Granted(held) => Ok(AcrossTeam::Granted(held)),
        Admitted::Wait(retry_after) => {
            let (what, limit) = match (member.rpm, member.tpm) {
                (Some(rpm), _) => ("requests (or tokens)", u64::from(rpm)),
                (None, tpm) => ("tokens", tpm.unwrap_or(0)),
            };
            Err(Refusal::RateLimited { member: member.name.clone(), what, limit, retry_after })
        }
        Admitted::OverBudget { budget: at, spent_micros } => match budget.get(at) {
            Some(c) => Err(Refusal::over_budget(&member.name, &c.blocked(spent_micros))),
            None => Ok(AcrossTeam::Alone(None)),
        },
        Admitted::Unseeded(missing) => Ok(AcrossTeam::Unseeded(missing)),
        Admitted::Unreachable(held) => Ok(AcrossTeam::Alone(held)),
        Admitted::Full | Admitted::Queued { .. } | Admitted::LineFull { .. } | Admitted::Alone => {
            Ok(AcrossTeam::Alone(None))
        }
    }
}

/// The member whose key `key` is: every hash compared, in constant time.
fn find<'m>(members: &'m [Member], key: &str) -> Option<&'m Member> {
    let hash = hash_text(key);
    let mut found = None;
    for m in members {
        if constant_time_eq(m.key_hash.as_bytes(), hash.as_bytes()) {
            found = Some(m);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::members::{new_key, Budget, NewMember};

    fn member(name: &str, key: &SecretString, rpm: Option<u32>) -> Member {
        NewMember { name: name.into(), rpm, ..NewMember::default() }.build(key, 0).unwrap()
    }

    async fn store_with(members: &[Member]) -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("h.db")).await.unwrap();
        for m in members {
            store.put_member(m).await.unwrap();
        }
        (dir, store)
    }

    #[tokio::test]
    async fn a_key_names_its_member_and_the_owner_is_nobody() {
        let (key, owner) = (new_key(), SecretString::from("sy-owner-token".to_string()));
        let (_dir, store) = store_with(&[member("al", &key, None)]).await;
        let gate = Members::new();
        let who = |t: &'static str| gate.identify(Some(&store), Some(t), Some(&owner), None, 1);
        assert_eq!(who("sy-owner-token").await, Ok(None));
        assert_eq!(who("sy-m-nope").await, Err(Refusal::InvalidKey));
        assert_eq!(who("anything").await, Err(Refusal::InvalidKey));
        let al = gate.identify(Some(&store), Some(key.expose_secret()), Some(&owner), None, 1).await;
        assert_eq!(al.unwrap().unwrap().name, "al");
    }

    #[tokio::test]
    async fn without_members_only_member_shaped_keys_are_refused() {
        let (_dir, store) = store_with(&[]).await;
        let gate = Members::new();
        assert_eq!(gate.identify(Some(&store), Some("x"), None, None, 1).await, Ok(None));
        assert_eq!(gate.identify(Some(&store), None, None, None, 1).await, Ok(None));
        assert_eq!(gate.identify(Some(&store), Some("sy-m-1"), None, None, 1).await, Err(Refusal::InvalidKey));
    }

    /// The copy read at `read_at`, made `age` older (the store's pool
    /// does not run on a paused clock).
    fn age_by(gate: &Members, age: Duration) {
        let mut snapshot = lock(&gate.snapshot);
        snapshot.read_at = snapshot.read_at.and_then(|at| at.checked_sub(age));
    }

    #[tokio::test]
    async fn a_revocation_is_read_within_a_second() {
        let key = new_key();
        let mut al = member("al", &key, None);
        let (_dir, store) = store_with(&[al.clone()]).await;
        let gate = Members::new();
        let who = || gate.identify(Some(&store), Some(key.expose_secret()), None, None, 1);
        assert!(who().await.is_ok());
        al.revoked_at_ms = Some(1);
        store.put_member(&al).await.unwrap();
        assert!(who().await.is_ok(), "the copy read under a second ago still holds");
        age_by(&gate, REFRESH);
        assert!(who().await.is_ok(), "a request leaves a second-old copy to the gateway's background read");
        gate.refresh(&store).await;
        assert_eq!(who().await, Err(Refusal::Revoked("al".into())));
        // A copy nothing keeps fresh (no background read) is read by the request.
        al.revoked_at_ms = None;
        store.put_member(&al).await.unwrap();
        age_by(&gate, UNKEPT);
        assert!(who().await.is_ok(), "read again by the request");
    }

    #[tokio::test]
    async fn a_key_added_after_the_copy_was_read_is_let_in_on_its_first_request() {
        let (al_key, bo_key) = (new_key(), new_key());
        let (_dir, store) = store_with(&[member("al", &al_key, None)]).await;
        let gate = Members::new();
        assert!(gate.identify(Some(&store), Some(al_key.expose_secret()), None, None, 1).await.is_ok());
        store.put_member(&member("bo", &bo_key, None)).await.unwrap();
        let bo = gate.identify(Some(&store), Some(bo_key.expose_secret()), None, None, 1).await;
        assert_eq!(bo.map(|m| m.map(|m| m.name)), Ok(Some("bo".to_string())));
        let wrong = gate.identify(Some(&store), Some("sy-m-0"), None, None, 1).await;
        assert_eq!(wrong.map(|m| m.map(|m| m.name)), Err(Refusal::InvalidKey));
    }

    #[tokio::test]
    async fn wrong_keys_from_one_address_are_throttled() {
        let key = new_key();
        let (_dir, store) = store_with(&[member("al", &key, None)]).await;
        let gate = Members::new();
        let (bad, good): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        for _ in 0..WRONG_KEYS_PER_MINUTE {
            assert_eq!(gate.identify(Some(&store), Some("sy-m-x"), None, Some(bad), 1).await, Err(Refusal::InvalidKey));
        }
        let throttled = gate.identify(Some(&store), Some(key.expose_secret()), None, Some(bad), 1).await;
        assert!(matches!(throttled, Err(Refusal::Throttled { .. })), "{throttled:?}");
        assert!(gate.identify(Some(&store), Some(key.expose_secret()), None, Some(good), 1).await.is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn an_address_is_throttled_until_its_minute_ends() {
        let gate = Members::new();
        let bad: IpAddr = "10.0.0.1".parse().unwrap();
        for _ in 0..WRONG_KEYS_PER_MINUTE {
            assert_eq!(gate.throttled(bad), None);
            gate.count_wrong(bad);
        }
        tokio::time::advance(MINUTE - Duration::from_millis(1)).await;
        assert_eq!(gate.throttled(bad), Some(Duration::from_millis(1)));
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(gate.throttled(bad), None);
    }

    #[tokio::test(start_paused = true)]
    async fn requests_a_minute_hold_until_the_minute_ends() {
        let gate = Members::new();
        let al = member("al", &new_key(), Some(2));
        assert!(gate.check(&al, "m", 1, Roll::WHOLE).is_ok());
        assert!(gate.check(&al, "m", 1, Roll::WHOLE).is_ok());
        assert!(matches!(gate.check(&al, "m", 1, Roll::WHOLE), Err(Refusal::RateLimited { what: "requests", .. })));
        tokio::time::advance(MINUTE).await;
        assert!(gate.check(&al, "m", 1, Roll::WHOLE).is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn out_of_reach_each_instance_takes_its_share_of_a_member_s_minute() {
        let admitted = |rpm: u32, tpm: Option<u64>, roll: Roll, tokens: u64| {
            let gate = Members::new();
            let mut al = member("al", &new_key(), Some(rpm));
            al.tpm = tpm;
            (0..20).take_while(|_| gate.check(&al, "m", tokens, roll).is_ok()).count()
        };
        let shares: Vec<usize> = (0..3).map(|rank| admitted(5, None, Roll::new(3, rank), 1)).collect();
        assert_eq!(shares, vec![2, 2, 1], "5 requests a minute over three instances");
        assert_eq!(admitted(1, None, Roll::new(2, 1), 1), 0, "a share of nothing admits nothing");
        let tokens: Vec<usize> = (0..2).map(|rank| admitted(100, Some(30), Roll::new(2, rank), 5)).collect();
        assert_eq!(tokens, vec![3, 3], "30 tokens a minute over two: 15 each, 5 a request");
        assert_eq!(admitted(100, Some(1), Roll::new(2, 1), 5), 0, "nor a share of no tokens");
    }

    #[test]
    fn a_model_outside_the_globs_is_refused() {
        let gate = Members::new();
        let mut al = member("al", &new_key(), None);
        al.models = vec!["claude-*".into()];
        assert!(matches!(gate.check(&al, "gpt-4.1", 1, Roll::WHOLE), Err(Refusal::ModelNotAllowed { .. })));
        assert!(gate.check(&al, "claude-x", 1, Roll::WHOLE).is_ok());
    }

    #[tokio::test]
    async fn each_read_hands_the_active_members_budgets_over() {
        let mut al = member("al", &new_key(), None);
        al.budget = Some(Budget { limit_usd: 2.0, period: BudgetPeriod::Week });
        let mut bo = member("bo", &new_key(), None);
        bo.budget = Some(Budget { limit_usd: 1.0, period: BudgetPeriod::Day });
        bo.revoked_at_ms = Some(1);
        let (_dir, store) = store_with(&[al, bo, member("cy", &new_key(), None)]).await;
        let gate = Members::new();
        assert_eq!(gate.budgets(1), (0, Vec::new()));
        gate.reload(&store).await;
        let (reads, budgets) = gate.budgets(1);
        assert_eq!(reads, 1);
        let named: Vec<(String, String, f64)> =
            budgets.iter().map(|b| (b.name.clone(), b.scope.to_string(), b.limit_usd)).collect();
        assert_eq!(
            named,
            [("member:al".to_string(), "member:al".to_string(), 2.0)],
            "revoked and unbudgeted members have none"
        );
        gate.reload(&store).await;
        assert_eq!(gate.budgets(1).0, 2, "every read is a new one");
    }
}
