//! A provider as the gateway runs it: configuration, keys, and the live
//! policy state that protects it (breaker, rate-limit cool-down, buckets,
//! concurrency cap, fallback share).

use std::borrow::Cow;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::http::Uri;
use tokio::time::Instant;
use tracing::warn;

use crate::config::ProviderConfig;
use crate::ground::clock::now_ms;
use crate::ground::outcome::Verdict;
use crate::policy::breaker::{Admission, Breaker, State};
use crate::policy::deadline::Deadline;
use crate::policy::limiter::Rates;
use crate::policy::queue::{Capacity, KeyLease, Permit, Ready};
use crate::policy::reach::{Probed, Reach};
use crate::policy::share::{self, WindowCounter};
use crate::protocol::translate::profile::{Profile, StreamOptions};
use crate::protocol::Endpoint;
use crate::secrets::{ProviderKey, SecretStore};
use crate::team::{AdmitAsk, Admitted, Asking, Change, Held, Line, Roll, Solo, SpendAsk, Team, Used};
use crate::telemetry::events::GatewayEvent;
use crate::telemetry::Telemetry;
use crate::upstream::keys::{KeyPool, NoKey};
use crate::upstream::recent::Recent;

/// Live policy state, behind one short-held lock.
#[derive(Debug)]
struct Health {
    breaker: Breaker,
    rates: Rates,
    /// Rate-limited by the provider (429) until then.
    cooling_until: Option<Instant>,
    /// Requests whose plan included this provider, and fallbacks it took.
    seen: WindowCounter,
    fallbacks: WindowCounter,
    /// The last failure the provider itself answered or caused (not one of
    /// connecting to it): a trip without one in the breaker's window is
    /// this instance's own trouble, which the team is told as such.
    upstream_failed_at: Option<Instant>,
    /// Whether its server answers, as the active probes found.
    reach: Reach,
    /// Its share of a team's rate limits is nothing (the team out of
    /// reach, this instance's part of a small limit 0): passed over.
    no_share: bool,
}

#[derive(Debug)]
pub struct Provider {
    pub config: ProviderConfig,
    /// The upstream URL of each endpoint, parsed once.
    /// Each endpoint's upstream URI, parsed once.
    urls: Vec<(Endpoint, Uri)>,
    pub keys: KeyPool,
    enabled: AtomicBool,
    /// The concurrency cap, key leases and the queue in front of them.
    capacity: Arc<Capacity>,
    health: Mutex<Health>,
    telemetry: Arc<Telemetry>,
    /// The provider rejected `stream_options` under a profile that probes
    /// for it: it is not sent again while the gateway runs.
    stream_options_refused: AtomicBool,
    /// The team this instance shares verdicts with: alone, a team of one.
    team: Arc<dyn Team>,
    /// Its recent speed, as routing strategies weigh it.
    recent: Recent,
    /// A joined team's gateway: its word on the member as last heard
    /// ([`TeamWord`]); kept while it cannot be asked.
    word: Mutex<Option<Arc<TeamWord>>>,
}

/// What a joined team's gateway last said it offers the member (its
/// `GET /v1/models` for the member's key, asked at every probe): the
/// models, and whether this gateway's own providers may take over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeamWord {
    pub models: Vec<String>,
    pub allow_local_fallback: bool,
}

impl TeamWord {
    pub fn offers(&self, model: &str) -> bool {
        self.models.iter().any(|m| m == model)
    }
}

/// Why a provider was passed over for an attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pass {
    BreakerOpen {
        until: Option<Instant>,
    },
    CoolingDown {
        until: Instant,
    },
    /// Every key is cooling down after a rate limit.
    KeysCooling {
        until: Instant,
    },
    NoUsableKey(String),
    Full,
    /// Others wait in its queue, and go first.
    Queued,
    /// Every usable key serves as many requests as it may at once.
    KeysBusy,
    Throttled {
        wait: Duration,
    },
    FallbackShare,
    /// The team's shared state is out of reach, and this instance's share
    /// of the provider's rate limits is nothing.
    NoShare,
    /// The last active probe got no answer, so no request waits on a dead
    /// socket until a probe gets one again.
    Unreachable {
        error: String,
        probed_at_ms: i64,
    },
}

impl fmt::Display for Pass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let now = Instant::now();
        let left = |t: &Instant| {
            humantime::format_duration(Duration::from_secs(t.saturating_duration_since(now).as_secs())).to_string()
        };
        match self {
            Pass::BreakerOpen { until: Some(t) } => write!(f, "circuit open for {} more", left(t)),
            Pass::BreakerOpen { until: None } => f.write_str("circuit open (probe in progress or opened by hand)"),
            Pass::CoolingDown { until } => write!(f, "rate-limited for {} more", left(until)),
            Pass::KeysCooling { until } => write!(f, "every key is rate-limited for {} more", left(until)),
            Pass::NoUsableKey(reason) => f.write_str(reason),
            Pass::Full => f.write_str("at its concurrency cap"),
            Pass::Queued => f.write_str("others are waiting in its queue"),
            Pass::KeysBusy => f.write_str("every key is serving as many requests as it may"),
            Pass::Throttled { wait } => write!(f, "throttled (next slot in {})", humantime::format_duration(*wait)),
            Pass::FallbackShare => f.write_str("took its share of fallback traffic"),
            Pass::NoShare => {
                f.write_str("this instance's share of its rate limits is none while the team is out of reach")
            }
            Pass::Unreachable { error, probed_at_ms } => {
                let ago = Duration::from_secs(u64::try_from((now_ms() - probed_at_ms) / 1000).unwrap_or(0));
                write!(f, "unreachable: the probe {} ago got no answer ({error})", humantime::format_duration(ago))
            }
        }
    }
}

/// What the gate says about an attempt on this provider now.
#[derive(Debug)]
pub enum Gate {
    Go(Ticket),
    /// Wait this long (the client-side throttle), then ask again.
    Wait(Duration),
    Pass(Pass),
}

/// An admitted attempt: its breaker admission and concurrency permit.
/// Dropping it unrecorded (the client left) frees its breaker probe slot
/// without counting an outcome.
#[derive(Debug)]
pub struct Ticket {
    provider: Arc<Provider>,
    /// The key this attempt uses (`None`: the provider takes none).
    pub key: Option<ProviderKey>,
    admission: Option<Admission>,
    /// The request this attempt belongs to, named in the events it causes.
    cause: Option<String>,
    // Held for their Drop: the concurrency slot and the key's lease free
    // when the ticket goes, whatever ended the request.
    permit: Option<Permit>,
    _lease: Option<KeyLease>,
    /// What the team's admission holds (a lease, reserved tokens and
    /// spend), in team mode: released and settled when the ticket goes.
    team_hold: Option<Box<dyn Held>>,
}

/// What an attempt asks of a provider's gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Need {
    /// The request's rough token count, for the rate buckets.
    pub tokens: u64,
    /// Its session's point for choosing a key
    /// ([`crate::session::Session::affinity`]); `None`: round-robin.
    pub affinity: Option<u64>,
}

impl Ticket {
    pub fn admission(&self) -> Option<Admission> {
        self.admission
    }

    /// The slot a wait in the queue won.
    pub fn hold(&mut self, permit: Permit) {
        self.permit = Some(permit);
    }

    /// Takes what this attempt needs of the team's shared limits (a place
    /// under the caps, room in the rate buckets), when the provider has
    /// any and a team counts them. One script, one round trip.
    ///
    /// `tokens` is the attempt's estimate (prompt and output limit).
    /// `shared` gives, when the team asks for them, the team-wide spend
    /// counters that cover the attempt (reserved here and settled when the
    /// ticket goes, [`Ticket::settle`]) and the request's place in the
    /// provider's line across the team, when it may wait there for a place
    /// under the cap.
    pub async fn team_admit(
        &mut self,
        tokens: u64,
        shared: impl FnOnce() -> (Vec<SpendAsk>, Option<Line>) + Send,
    ) -> TeamGate {
        let answer = {
            let (provider, key) = (&self.provider, self.key.as_ref());
            let ask: Asking<'_> = Box::new(move || {
                let (budgets, line) = shared();
                provider.team_admit_ask(key, tokens, budgets, line)
            });
            provider.team.admit(ask).await
        };
        match answer {
            Admitted::Granted(held) => {
                self.team_hold = held;
                TeamGate::Go
            }
            Admitted::Wait(wait) => TeamGate::Wait(wait),
            Admitted::Full => TeamGate::Full,
            Admitted::Queued { ahead } => TeamGate::Queued { ahead },
            Admitted::LineFull { waiting } => TeamGate::LineFull { waiting },
            Admitted::OverBudget { budget, spent_micros } => TeamGate::OverBudget { budget, spent_micros },
            Admitted::Unseeded(missing) => TeamGate::Unseeded(missing),
            Admitted::Alone => TeamGate::Go,
            // This instance's share of the caps decides, from this request
            // on: one admitted under the whole cap while the team was in
            // reach does not keep this instance over its share.
            Admitted::Unreachable(held) => {
                self.team_hold = held;
                let (capacity, roll) = (&self.provider.capacity, self.provider.team.roll());
                if capacity.over_share(roll, self.key.as_ref().map(|k| k.label.as_str())) {
                    TeamGate::Full
                } else {
                    TeamGate::Go
                }
            }
        }
    }

    /// What the attempt really used, to settle the team's reservations
    /// with when the ticket goes. A ticket dropped unsettled (the attempt
    /// failed, the client left) returns them whole.
    pub fn settle(&mut self, used: Used) {
        if let Some(hold) = &mut self.team_hold {
            hold.settle(used);
        }
    }

    /// Names the request in the breaker and cool-down events this attempt causes.
    pub fn caused_by(&mut self, request_id: &str) {
        self.cause = Some(request_id.to_string());
    }

    /// Records the outcome; the concurrency permit stays held until the
    /// ticket is dropped (a relayed body keeps it while it streams).
    pub fn record(&mut self, verdict: Verdict) {
        if let Some(admission) = self.admission.take() {
            let key = self.key.as_ref().map(|k| k.label.as_str());
            self.provider.record(admission, key, verdict, self.cause.as_deref());
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.record(Verdict::Neutral);
    }
}

/// What the team's shared limits say to an admitted attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TeamGate {
    Go,
    /// A rate bucket across the team has room after this long.
    Wait(Duration),
    /// At a concurrency cap across the team.
    Full,
    /// In the provider's line across the team, behind this many.
    Queued {
        ahead: u32,
    },
    /// The provider's line across the team is full.
    LineFull {
        waiting: u32,
    },
    /// Waited this long in the provider's line across the team, and its
    /// turn did not come in the time the request had.
    Waited(Duration),
    /// A budget's spend across the team reached its limit: the index of
    /// the budget among those asked about, and what it has spent.
    OverBudget {
        budget: usize,
        spent_micros: i64,
    },
    /// These budgets' shared counters need seeding from the history first.
    Unseeded(Vec<usize>),
}

/// Cool-down after a 429 that named no reset time.
const DEFAULT_RATE_LIMIT_COOLDOWN: Duration = Duration::from_secs(1);

impl Provider {
    pub fn load(config: ProviderConfig, store: &dyn SecretStore, telemetry: Arc<Telemetry>) -> Provider {
        let keys = KeyPool::load(&config.name, config.auth, store);
        let now = Instant::now();
        let p = &config.policy;
        let health = Health {
            breaker: Breaker::new(p.breaker.clone()),
            rates: Rates::new(p.requests_per_minute, p.tokens_per_minute, now),
            cooling_until: None,
            seen: WindowCounter::new(p.fallback_window, now),
            fallbacks: WindowCounter::new(p.fallback_window, now),
            upstream_failed_at: None,
            reach: Reach::default(),
            no_share: false,
        };
        let urls = Endpoint::FIXED
            .iter()
            .filter_map(|e| {
                let url = format!("{}/{}", config.base_url.as_str().trim_end_matches('/'), config.path(*e, ""));
                url.parse::<Uri>().ok().map(|u| (*e, u))
            })
            .collect();
        Provider {
            urls,
            enabled: AtomicBool::new(config.enabled),
            capacity: Capacity::new(p.max_concurrency, config.key_max_concurrency, config.queue),
            health: Mutex::new(health),
            telemetry,
            config,
            keys,
            stream_options_refused: AtomicBool::new(false),
            team: Arc::new(Solo::new(String::new())),
            recent: Recent::default(),
            word: Mutex::new(None),
        }
    }

    /// The provider as one instance of `team`: its verdicts shared.
    pub fn with_team(mut self, team: Arc<dyn Team>) -> Provider {
        self.team = team;
        self
    }

    /// Who can verify the reasoning this provider makes: one kind of API
    /// at one address signs alike, whatever the provider is called or
    /// which key it used ([`crate::proxy`]'s thinking).
    pub(crate) fn signer(&self) -> String {
        format!("{}@{}", self.config.kind_name(), self.config.base_url)
    }

    /// What a team-wide lease for an attempt with `key` asks, when the
    /// provider (or a budget) has a limit to share.
    fn team_admit_ask(
        &self,
        key: Option<&ProviderKey>,
        tokens: u64,
        budgets: Vec<SpendAsk>,
        line: Option<Line>,
    ) -> Option<AdmitAsk> {
        let provider_max = self.capacity.limit();
        let key = match (self.capacity.key_limit(), key) {
            (Some(max), Some(k)) => self.keys.fingerprint_of(&k.label).map(|fp| (fp, max)),
            _ => None,
        };
        let p = &self.config.policy;
        let (requests_per_minute, tokens_per_minute) = (p.requests_per_minute, p.tokens_per_minute);
        let limited = provider_max.is_some()
            || key.is_some()
            || requests_per_minute.is_some()
            || tokens_per_minute.is_some()
            || !budgets.is_empty();
        if !limited {
            return None;
        }
        let capped = provider_max.is_some() || key.is_some();
        let ask = AdmitAsk {
            provider: self.name().to_string(),
            provider_max,
            key,
            requests_per_minute,
            tokens_per_minute,
            tokens,
            budgets,
            line: line.filter(|_| capped),
        };
        Some(ask)
    }

    /// Takes `share` of the concurrency caps, the queue and the rate
    /// limits (see [`Capacity::set_share`]) while the team's shared ones
    /// are out of reach; [`Roll::WHOLE`] gives them back whole. A rate
    /// limit whose share is nothing passes the provider over.
    pub(crate) fn share_caps(&self, share: Roll) {
        self.capacity.set_share(share);
        let p = &self.config.policy;
        let (rpm, tpm) = (share.share_of(p.requests_per_minute), share.share_of(p.tokens_per_minute));
        let mut h = self.health();
        h.no_share = rpm == Some(0) || tpm == Some(0);
        // What the buckets hold carries over: an outage that comes and goes
        // never refills them.
        h.rates = h.rates.resized(rpm, tpm, Instant::now());
    }

    /// Whether the team took the decision (see [`Team::share`]).
    fn share(&self, change: Change) -> bool {
        self.team.share(change)
    }

    /// The profile requests are written under: the configured one, less
    /// what the provider has been seen to reject.
    pub fn profile(&self) -> Cow<'_, Profile> {
        if self.stream_options_refused.load(Ordering::Relaxed) {
            Cow::Owned(Profile { stream_options: StreamOptions::No, ..self.config.profile.clone() })
        } else {
            Cow::Borrowed(&self.config.profile)
        }
    }

    /// Whether Chat streams to this provider ask for usage.
    pub fn sends_stream_options(&self) -> bool {
        self.config.profile.stream_options.sends() && !self.stream_options_refused.load(Ordering::Relaxed)
    }

    /// Whether a rejected `stream_options` may be learned from (the profile
    /// probes, and nothing was learned yet).
    pub fn probes_stream_options(&self) -> bool {
        self.config.profile.stream_options == StreamOptions::Probe
            && !self.stream_options_refused.load(Ordering::Relaxed)
    }

    /// The provider rejected `stream_options`: it is not sent again.
    pub fn refuse_stream_options(&self) {
        if !self.stream_options_refused.swap(true, Ordering::Relaxed) {
            warn!(provider = %self.config.name, "rejects stream_options: streams to it go without, and carry no usage");
        }
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// The upstream URI for `endpoint` (naming `model` in the path, for
    /// Gemini's), with the client's query string less any credential in it.
    pub fn url(&self, endpoint: Endpoint, model: &str, query: Option<&str>) -> Uri {
        // Every fixed endpoint's URI parses: base_url is a valid URL and the paths are fixed.
        let uri = match self.urls.iter().find(|(e, _)| *e == endpoint) {
            Some((_, u)) => Some(u.clone()),
            None => {
                let base = self.config.base_url.as_str().trim_end_matches('/');
                format!("{base}/{}", self.config.path(endpoint, model)).parse::<Uri>().ok()
            }
        };
        let uri = uri.unwrap_or_else(|| Uri::try_from(self.config.base_url.as_str()).unwrap_or_default());
        let query = query.map(crate::ground::headers::forwarded_query);
        match query.as_deref().filter(|q| !q.is_empty()) {
            // A query the client sent came in a valid URI, so it fits in this one too.
            Some(q) => format!("{uri}?{q}").parse().unwrap_or(uri),
            None => uri,
        }
    }

    pub fn is_enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    pub fn set_enabled(&self, enabled: bool) {
        self.enabled.store(enabled, Ordering::Relaxed);
    }

    fn health(&self) -> MutexGuard<'_, Health> {
        self.health.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn breaker_state(&self) -> State {
        self.health().breaker.state(Instant::now())
    }

    pub fn cooling_until(&self) -> Option<Instant> {
        self.health().cooling_until.filter(|t| *t > Instant::now())
    }

    /// Counts a request whose plan includes this provider (the fallback share's denominator).
    pub fn note_planned(&self) {
        self.health().seen.add(Instant::now());
    }

    /// Whether this provider may take one more request as a fallback.
    pub fn allows_fallback(&self) -> bool {
        let now = Instant::now();
        let mut h = self.health();
        let (seen, taken) = (h.seen.total(now), h.fallbacks.total(now));
        share::allows(taken, seen, self.config.policy.fallback_share, self.config.policy.fallback_min)
    }

    pub fn note_fallback(&self) {
        self.health().fallbacks.add(Instant::now());
    }

    pub fn capacity(&self) -> &Arc<Capacity> {
        &self.capacity
    }

    /// Its recent time to first token and latency (see [`Recent`]).
    pub fn recent(&self) -> &Recent {
        &self.recent
    }

    /// Decides whether an attempt may start now, and reserves what it needs.
    pub fn gate(self: &Arc<Self>, need: Need, deadline: &Deadline, max_wait: Duration, min_budget: Duration) -> Gate {
        self.admit(need, deadline, max_wait, min_budget, true)
    }

    /// What the head of this provider's queue is told, holding a slot
    /// already: go (with a ticket that still needs the slot, [`Ticket::hold`]),
    /// or when to look again.
    pub fn ready(self: &Arc<Self>, need: Need, deadline: &Deadline, min_budget: Duration) -> Ready<Ticket> {
        // No throttle wait here: the queue itself waits for the bucket.
        match self.admit(need, deadline, Duration::ZERO, min_budget, false) {
            Gate::Go(ticket) => Ready::Now(ticket),
            Gate::Wait(wait) => Ready::At(Instant::now() + wait),
            Gate::Pass(Pass::CoolingDown { until } | Pass::KeysCooling { until }) => Ready::At(until),
            Gate::Pass(Pass::Throttled { wait }) => Ready::At(Instant::now() + wait),
            Gate::Pass(Pass::KeysBusy | Pass::Full | Pass::Queued) => Ready::Released,
            Gate::Pass(pass) => Ready::Never(pass.to_string()),
        }
    }

    /// Whether a pass is one that capacity freeing up or time can end, so
    /// that waiting in the queue may be worth it.
    pub fn queueable(pass: &Pass) -> bool {
        matches!(pass, Pass::Full | Pass::Queued | Pass::KeysBusy)
    }

    fn admit(
        self: &Arc<Self>,
        Need { tokens, affinity }: Need,
        deadline: &Deadline,
        max_wait: Duration,
        min_budget: Duration,
        take_slot: bool,
    ) -> Gate {
        let now = Instant::now();
        let mut h = self.health();
        drop_expired_cooldown(&mut h, now);
        if let Some(p) = h.reach.unreachable() {
            let error = p.error.clone().unwrap_or_default();
            return Gate::Pass(Pass::Unreachable { error, probed_at_ms: p.at_ms });
        }
        if let Some(until) = h.cooling_until.filter(|t| *t > now) {
            return Gate::Pass(Pass::CoolingDown { until });
        }
        if h.no_share {
            return Gate::Pass(Pass::NoShare);
        }
        let wait = h.rates.wait_for(tokens, now);
        if !wait.is_zero() {
            return if crate::policy::step::may_wait(wait, deadline, max_wait, min_budget, now) {
                Gate::Wait(wait)
            } else {
                Gate::Pass(Pass::Throttled { wait })
            };
        }
        let mut lease = None;
        let affinity = affinity.filter(|_| self.config.policy.session_affinity);
        let key = match self.keys.pick_where(now, affinity, |k| {
            lease = self.capacity.try_lease(&k.label);
            lease.is_some()
        }) {
            Ok(key) => key,
            Err(NoKey::Cooling(until)) => return Gate::Pass(Pass::KeysCooling { until }),
            Err(NoKey::Unusable(reason)) => return Gate::Pass(Pass::NoUsableKey(reason)),
            Err(NoKey::Busy) => return Gate::Pass(Pass::KeysBusy),
        };
        let permit = match take_slot.then(|| self.capacity.try_enter()) {
            None => None,
            Some(Ok(permit)) => Some(permit),
            Some(Err(crate::policy::queue::Busy::Full)) => return Gate::Pass(Pass::Full),
            Some(Err(crate::policy::queue::Busy::Queued)) => return Gate::Pass(Pass::Queued),
        };
        let admission = match h.breaker.admit(now) {
            Ok(a) => a,
            Err(rejected) => {
                self.log_transitions(&mut h, None);
                return Gate::Pass(Pass::BreakerOpen { until: rejected.until });
            }
        };
        self.log_transitions(&mut h, None);
        h.rates.take(tokens, now);
        Gate::Go(Ticket {
            provider: Arc::clone(self),
            key,
            admission: Some(admission),
            cause: None,
            permit,
            _lease: lease,
            team_hold: None,
        })
    }

    /// Records what an admitted attempt showed about the provider.
    fn record(&self, admission: Admission, key: Option<&str>, verdict: Verdict, cause: Option<&str>) {
        let now = Instant::now();
        let mut h = self.health();
        if verdict != Verdict::Neutral {
            h.reach.note_used();
        }
        match verdict {
            Verdict::Healthy => h.breaker.record(admission, false, now),
            Verdict::Failed => {
                h.upstream_failed_at = Some(now);
                h.breaker.record(admission, true, now);
            }
            Verdict::Unreachable => h.breaker.record(admission, true, now),
            Verdict::RateLimited(wait) => {
                h.breaker.release(admission);
                let wait = if wait.is_zero() { DEFAULT_RATE_LIMIT_COOLDOWN } else { wait };
                let pretty = humantime::format_duration(wait);
                match key {
                    // A key pool cools the key; the provider's other keys go on.
                    Some(label) => {
                        self.keys.cool(label, now + wait);
                        if let Some(fp) = self.keys.fingerprint_of(label) {
                            let for_ms = millis(wait);
                            self.share(Change::Cooling { provider: self.name().into(), key: Some(fp), for_ms });
                        }
                        self.telemetry.publish(GatewayEvent::KeyCooling {
                            provider: self.name().to_string(),
                            label: Some(label.to_string()),
                            until_ms: now_ms() + wait.as_millis() as i64,
                            request_id: cause.map(str::to_string),
                        });
                        warn!(provider = %self.config.name, key = label, request_id = cause, "rate-limited: key cooling down for {pretty}");
                    }
                    None => {
                        h.cooling_until = Some(now + wait);
                        self.share(Change::Cooling { provider: self.name().into(), key: None, for_ms: millis(wait) });
                        self.telemetry.publish(GatewayEvent::KeyCooling {
                            provider: self.name().to_string(),
                            label: None,
                            until_ms: now_ms() + wait.as_millis() as i64,
                            request_id: cause.map(str::to_string),
                        });
                        warn!(provider = %self.config.name, request_id = cause, "rate-limited: cooling down for {pretty}");
                    }
                }
            }
            Verdict::Neutral => h.breaker.release(admission),
        }
        self.log_transitions(&mut h, cause);
    }

    /// The provider refused a key (401/403): it is not used again until the
    /// keys are reloaded. Returns whether another key is left.
    pub fn revoke_key(&self, label: &str, reason: &str, request_id: &str) -> bool {
        warn!(provider = %self.config.name, key = label, request_id, "key refused by the provider: {reason}; not used again until keys change");
        self.telemetry.publish(GatewayEvent::KeyRevoked {
            provider: self.name().to_string(),
            label: label.to_string(),
            reason: reason.to_string(),
            request_id: Some(request_id.to_string()),
        });
        if let Some(key) = self.keys.fingerprint_of(label) {
            self.share(Change::Revoked { provider: self.name().into(), key, reason: reason.into() });
        }
        self.keys.revoke(label, reason)
    }

    /// Applies the provider's remaining-quota headers to the buckets.
    pub fn observe_quota(&self, requests_left: Option<u64>, tokens_left: Option<u64>) {
        if requests_left.is_some() || tokens_left.is_some() {
            self.health().rates.observe(requests_left, tokens_left, Instant::now());
        }
    }

    /// Feeds an active probe's outcome to the breaker: only when the breaker
    /// is waiting for probes, so a probe never trips a closed breaker. A
    /// probe that got no answer makes the provider unreachable, one that got
    /// any answer reachable again (see [`Reach`]).
    pub fn record_probe(&self, ok: bool, probed: Probed) {
        let now = Instant::now();
        let mut h = self.health();
        // A change either way: it was unreachable and answers, or the reverse.
        let was_unreachable = h.reach.unreachable().is_some();
        if was_unreachable == probed.answered {
            let what = if probed.answered { "reachable again" } else { "unreachable" };
            warn!(provider = %self.config.name, "{what}: {}", probed.error.as_deref().unwrap_or("the probe succeeded"));
        }
        h.reach.probed(probed);
        if matches!(h.breaker.state(now), State::HalfOpen) {
            if let Ok(admission) = h.breaker.admit(now) {
                h.breaker.record(admission, !ok, now);
            }
        }
        self.log_transitions(&mut h, None);
    }

    /// One probe period passed: whether this provider is probed now, or
    /// backs off because it stays unreachable.
    /// A joined team's gateway's word on the member, as last heard; `None`
    /// until a probe has heard it (the config's, written at joining, holds).
    pub fn team_word(&self) -> Option<Arc<TeamWord>> {
        self.word.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    /// The team's gateway answered a probe with its word on the member.
    pub fn heard_from_team(&self, word: TeamWord) {
        let mut kept = self.word.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if kept.as_deref() != Some(&word) {
            tracing::debug!(provider = %self.config.name, models = word.models.len(), allow = word.allow_local_fallback, "the team's word");
            *kept = Some(Arc::new(word));
        }
    }

    pub fn probe_due(&self) -> bool {
        self.health().reach.tick()
    }

    /// The last probe, and when the next one is due for a probe period of `period`.
    pub fn reach(&self, period: Duration) -> (Option<Probed>, Instant, bool) {
        let h = self.health();
        (h.reach.last().cloned(), h.reach.next_probe(period, Instant::now()), h.reach.unknown())
    }

    /// Opens the breaker by hand (until reset), for the whole team.
    pub fn open_breaker(&self) {
        self.force_breaker(true);
        self.share(Change::BreakerForced { provider: self.name().into(), open: true });
    }

    /// Closes the breaker by hand and ends any rate-limit cool-down, for
    /// the whole team.
    pub fn reset_breaker(&self) {
        self.force_breaker(false);
        self.share(Change::BreakerForced { provider: self.name().into(), open: false });
    }

    /// Opens or resets the breaker by hand, here only.
    pub(crate) fn force_breaker(&self, open: bool) {
        let mut h = self.health();
        if open {
            h.breaker.force_open();
        } else {
            h.breaker.reset();
            h.cooling_until = None;
        }
        self.note_transitions(&mut h, None);
    }

    /// Follows the team: another instance's trip opens the breaker here
    /// for as long as it said, held open until the team grants a probe.
    pub(crate) fn team_open(&self, for_ms: u64, reason: &str, by: &str) {
        let mut h = self.health();
        if for_ms == 0 && h.breaker.state(Instant::now()) == State::HalfOpen {
            // The team's cool-down is over and this instance is probing.
            return;
        }
        let until = Instant::now() + Duration::from_millis(for_ms);
        h.breaker.open_until(until, format!("opened by {by}: {reason}"));
        self.note_transitions(&mut h, None);
    }

    /// Follows the team: another instance's probes closed the breaker.
    pub(crate) fn team_close(&self, reason: &str, by: &str) {
        let mut h = self.health();
        if h.breaker.state(Instant::now()) != State::Closed {
            h.breaker.close(format!("closed by {by}: {reason}"));
        }
        self.note_transitions(&mut h, None);
    }

    /// The team's one probe after a trip is this instance's.
    pub(crate) fn team_probe(&self) {
        let mut h = self.health();
        h.breaker.grant_probe();
        self.note_transitions(&mut h, None);
    }

    /// The team is out of reach (`false`): an open breaker follows its own
    /// timer again. Back in reach (`true`): nothing to do here, the team
    /// sends its verdicts again.
    pub(crate) fn team_reachable(&self, reachable: bool) {
        if !reachable {
            self.health().breaker.unhold();
        }
    }

    /// The team holds no verdict this held breaker waits for (a local trip
    /// no other instance confirmed): its own timer leads again.
    pub(crate) fn team_release(&self) {
        self.health().breaker.unhold();
    }

    /// Follows the team: a rate limit seen by another instance.
    pub(crate) fn team_cooling(&self, key: Option<&str>, for_ms: u64) {
        let until = Instant::now() + Duration::from_millis(for_ms);
        match key {
            Some(fp) => {
                if let Some(label) = self.keys.label_of(fp) {
                    self.keys.cool_at_least(&label, until);
                }
            }
            None => {
                let mut h = self.health();
                h.cooling_until = Some(h.cooling_until.map_or(until, |t| t.max(until)));
            }
        }
    }

    /// Follows the team: a key another instance saw refused.
    pub(crate) fn team_revoked(&self, key: &str, reason: &str, by: &str) {
        if let Some(label) = self.keys.label_of(key).filter(|l| !self.keys.is_revoked(l)) {
            warn!(provider = %self.config.name, key = %label, "key refused by the provider on {by}: {reason}; not used again until keys change");
            self.keys.revoke(&label, reason);
        }
    }

    /// Logs and publishes the breaker's transitions, and shares with the
    /// team the ones this instance's own traffic caused.
    fn log_transitions(&self, h: &mut Health, cause: Option<&str>) {
        let transitions = h.breaker.take_transitions();
        for t in &transitions {
            match (t.from, t.to) {
                (_, State::Open { until: Some(until) }) => {
                    let window = self.config.policy.breaker.window;
                    let local = h.upstream_failed_at.is_none_or(|at| at.elapsed() > window);
                    let for_ms = millis(until.saturating_duration_since(Instant::now()));
                    let reason = t.reason.clone();
                    // A team that took the trip decides who probes when the
                    // cool-down ends.
                    if self.share(Change::BreakerTripped { provider: self.name().into(), for_ms, reason, local }) {
                        h.breaker.hold();
                    }
                }
                (State::HalfOpen, State::Closed) => {
                    self.share(Change::BreakerClosed { provider: self.name().into(), reason: t.reason.clone() });
                }
                _ => {}
            }
        }
        self.publish_transitions(transitions, cause);
    }

    /// Logs and publishes transitions that the team caused or that stay here.
    fn note_transitions(&self, h: &mut Health, cause: Option<&str>) {
        let transitions = h.breaker.take_transitions();
        self.publish_transitions(transitions, cause);
    }

    fn publish_transitions(&self, transitions: Vec<crate::policy::breaker::Transition>, cause: Option<&str>) {
        // Transitions become events on the live bus; until a subscriber
        // exists they are logged, with their reasons.
        for t in transitions {
            self.telemetry.publish(GatewayEvent::Breaker {
                provider: self.name().to_string(),
                from: t.from.kind(),
                to: t.to.kind(),
                reason: t.reason.clone(),
                request_id: cause.map(str::to_string),
            });
            warn!(provider = %self.config.name, from = t.from.name(), to = t.to.name(), request_id = cause, "circuit breaker: {}", t.reason);
        }
    }
}

fn drop_expired_cooldown(h: &mut Health, now: Instant) {
    if h.cooling_until.is_some_and(|t| t <= now) {
        h.cooling_until = None;
    }
}

/// Whole milliseconds, saturating.
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
