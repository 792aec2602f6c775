//! What each provider looks like right now, in one view for the UI, the
//! tray, the CLI and the admin API; and active probes, which test a provider
//! (`GET /models`) without risking user traffic and can close a half-open
//! breaker.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::gateway::Gateway;
use crate::ground::clock::now_ms;
use crate::policy::breaker::{BreakerState, State};
use crate::policy::reach::Probed;
use crate::proxy::headers;
use crate::telemetry::stats::{Today, Window};
use crate::upstream::keys::KeySummary;
use crate::upstream::provider::Provider;

/// Degraded when fewer than this share of recent attempts succeeded.
const DEGRADED_SUCCESS_RATE: f64 = 0.9;
/// ... counted only once there were this many.
const DEGRADED_MIN_ATTEMPTS: u64 = 5;
/// Degraded when the 5-minute p95 latency passes this.
const DEGRADED_P95_MS: u64 = 30_000;
/// How long a probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// The state users see, with words.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct ProviderState {
    pub state: ProviderStateName,
    /// When a rate limit or an open breaker ends (Unix ms), if known.
    pub until_ms: Option<i64>,
    pub detail: Option<String>,
}

/// Whether a provider can take traffic now, in one word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum ProviderStateName {
    Healthy,
    /// Never probed and never used: nothing is known yet.
    Unknown,
    /// Serving, but recent attempts failed or were slow.
    Degraded,
    /// The provider (or every key) is cooling down after a 429.
    RateLimited,
    /// The breaker is open or half-open.
    Open,
    Disabled,
    /// No key is stored, or every key was refused.
    NoKey,
    /// The last active probe got no answer (the detail says why): requests
    /// pass over it until a probe gets one.
    Unreachable,
}

impl ProviderStateName {
    /// Whether traffic may go to the provider in this state.
    pub fn serving(self) -> bool {
        matches!(self, ProviderStateName::Healthy | ProviderStateName::Degraded | ProviderStateName::Unknown)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Windows {
    pub m1: Window,
    pub m5: Window,
    pub m60: Window,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct ProviderView {
    pub name: String,
    pub kind: String,
    pub base_url: String,
    pub enabled: bool,
    #[serde(flatten)]
    pub state: ProviderState,
    pub breaker: BreakerState,
    pub passive_healthy: bool,
    pub stats: Windows,
    pub models: Vec<ModelView>,
    pub today: Today,
    pub keys: Vec<KeySummary>,
    pub probe: bool,
    /// The last active probe, if any (absent from a gateway older than it).
    #[serde(default)]
    pub last_probe: Option<LastProbe>,
    /// Absent from a gateway older than the queue: read as empty.
    #[serde(default)]
    pub queue: QueueView,
}

/// The last active probe of a provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct LastProbe {
    /// When it was sent (Unix ms).
    pub at_ms: i64,
    /// Whether it succeeded.
    pub ok: bool,
    /// Why it failed: no answer (then the provider is unreachable), or the
    /// status it got.
    pub error: Option<String>,
    /// When the next one is due (Unix ms); later while the provider stays down.
    pub next_ms: Option<i64>,
}

/// A provider's capacity now: its queue, its requests in flight, its key leases.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct QueueView {
    /// Requests waiting in line now.
    pub depth: u64,
    /// Places in line (`max_queue`); 0: no queue, a full provider is passed over.
    pub max_queue: u32,
    pub in_flight: u64,
    /// `max_concurrency`; null: no cap.
    pub max_concurrency: Option<u32>,
    /// Key leases held now (for keys that allow only so many requests at once).
    pub leases: u64,
    /// A moving average of recent waits in line; null when nobody was
    /// served from the queue in the last few minutes.
    pub recent_wait_ms: Option<f64>,
    /// Served from the queue, and refused (full, or not in time), since start.
    pub served: u64,
    pub refused: u64,
}

/// How long a queue's recent wait stays worth showing.
const RECENT_WAIT_MS: i64 = 5 * 60_000;

fn queue(p: &Provider) -> QueueView {
    let capacity = p.capacity();
    let s = capacity.counters().snapshot();
    let recent = s.served_at_ms > 0 && now_ms() - s.served_at_ms < RECENT_WAIT_MS;
    QueueView {
        depth: s.depth,
        max_queue: capacity.policy().max_queue,
        in_flight: s.in_use,
        max_concurrency: capacity.limit(),
        leases: s.leases,
        recent_wait_ms: recent.then_some(s.wait_recent_ms),
        served: s.served,
        refused: s.refused_full + s.refused_time,
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct ModelView {
    pub model: String,
    pub stats: Windows,
}

fn unix_ms(at: Instant) -> i64 {
    now_ms() + i64::try_from(at.saturating_duration_since(Instant::now()).as_millis()).unwrap_or(0)
}

fn minute_now() -> i64 {
    now_ms().div_euclid(60_000)
}

fn state(p: &Provider, m5: &Window, passive_healthy: bool, reach: &Reach) -> ProviderState {
    use ProviderStateName::{Degraded, Disabled, Healthy, NoKey, Open, RateLimited, Unknown, Unreachable};
    let s = |state, until_ms, detail: Option<String>| ProviderState { state, until_ms, detail };
    if !p.is_enabled() {
        return s(Disabled, None, None);
    }
    if let Some(problem) = p.keys.problem() {
        return s(NoKey, None, Some(problem));
    }
    if let Some(last) = reach.last.as_ref().filter(|l| !l.answered) {
        let error = last.error.as_deref().unwrap_or("no answer");
        return s(Unreachable, Some(reach.next_ms), Some(format!("the probe got no answer: {error}")));
    }
    match p.breaker_state() {
        State::Open { until } => return s(Open, until.map(unix_ms), Some("circuit breaker open".into())),
        State::HalfOpen => return s(Open, None, Some("half-open: probing".into())),
        State::Closed => {}
    }
    if let Some(until) = p.cooling_until() {
        return s(RateLimited, Some(unix_ms(until)), None);
    }
    // Keys are usable (no problem above), so none ready means all are cooling.
    if !p.keys.has_ready(Instant::now()) {
        let until = p.keys.ready_at(Instant::now()).map(unix_ms);
        return s(RateLimited, until, Some("every key is cooling down".into()));
    }
    if !passive_healthy {
        return s(Degraded, None, Some("recent attempts failed in a row".into()));
    }
    if m5.requests >= DEGRADED_MIN_ATTEMPTS && m5.success_rate.is_some_and(|r| r < DEGRADED_SUCCESS_RATE) {
        let rate = m5.success_rate.unwrap_or(0.0) * 100.0;
        return s(Degraded, None, Some(format!("{rate:.0}% of attempts succeeded in 5 minutes")));
    }
    if m5.latency_p95_ms.is_some_and(|p95| p95 > DEGRADED_P95_MS) {
        return s(Degraded, None, Some("slow: p95 latency over 30 s".into()));
    }
    if reach.unknown {
        return s(Unknown, None, None);
    }
    s(Healthy, None, None)
}

/// What the probes found, as [`state`] and the view read it.
struct Reach {
    last: Option<Probed>,
    /// When the next probe is due (Unix ms).
    next_ms: i64,
    unknown: bool,
}

fn reach(gw: &Gateway, p: &Provider) -> Reach {
    let period = gw.live().config.server.probe_every;
    let (last, next, unknown) = p.reach(period);
    Reach { last, next_ms: unix_ms(next), unknown }
}

fn last_probe(p: &Provider, reach: &Reach) -> Option<LastProbe> {
    reach.last.as_ref().map(|l| LastProbe {
        at_ms: l.at_ms,
        ok: l.error.is_none(),
        error: l.error.clone(),
        next_ms: (p.config.probe && p.is_enabled()).then_some(reach.next_ms),
    })
}

/// The view of one provider.
pub fn view(gw: &Gateway, p: &Arc<Provider>) -> ProviderView {
    let minute = minute_now();
    let day = now_ms().div_euclid(86_400_000);
    let (stats, models, today, passive) = gw.telemetry().stats.with(p.name(), |s| {
        let windows = |r: &crate::telemetry::stats::Rolling| Windows {
            m1: r.window(minute, 1),
            m5: r.window(minute, 5),
            m60: r.window(minute, 60),
        };
        let mut models: Vec<ModelView> =
            s.models().map(|(m, r)| ModelView { model: m.to_string(), stats: windows(r) }).collect();
        models.sort_by(|a, b| a.model.cmp(&b.model));
        (windows(&s.all), models, s.today.current(day), s.passive.healthy)
    });
    let reach = reach(gw, p);
    ProviderView {
        name: p.name().to_string(),
        kind: p.config.kind.to_string(),
        base_url: p.config.base_url.to_string(),
        enabled: p.is_enabled(),
        state: state(p, &stats.m5, passive, &reach),
        breaker: p.breaker_state().kind(),
        passive_healthy: passive,
        stats,
        models,
        today,
        keys: p.keys.summary(Instant::now()),
        probe: p.config.probe,
        last_probe: last_probe(p, &reach),
        queue: queue(p),
    }
}

pub fn views(gw: &Gateway) -> Vec<ProviderView> {
    gw.live().providers.iter().map(|p| view(gw, p)).collect()
}

/// The result of one active probe.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct ProbeResult {
    pub provider: String,
    pub ok: bool,
    pub status: Option<u16>,
    pub duration_ms: f64,
    pub error: Option<String>,
    pub breaker: BreakerState,
}

/// Probes a provider with `GET <base>/models`. A success closes a half-open
/// breaker (through its probe slots); a failure reopens it.
pub async fn probe(gw: &Gateway, p: &Arc<Provider>) -> ProbeResult {
    let started = Instant::now();
    let key = p.keys.peek(started);
    let base = p.config.base_url.as_str().trim_end_matches('/');
    // A joined team's gateway is asked what it offers the member.
    let url = if p.config.joined.is_some() { format!("{base}/v1/models") } else { format!("{base}/models") };
    let headers = headers::upstream_request(
        &axum::http::HeaderMap::new(),
        p.config.kind,
        &p.config.profile,
        key.as_ref(),
        "probe",
    );
    let sent = match axum::http::Uri::try_from(url) {
        Ok(uri) => {
            let request = crate::upstream::request(axum::http::Method::GET, uri, headers, bytes::Bytes::new());
            tokio::time::timeout(PROBE_TIMEOUT, gw.client().send(request))
                .await
                .map_err(|_| format!("no answer within {}", humantime::format_duration(PROBE_TIMEOUT)))
        }
        Err(e) => Err(format!("bad probe URL: {e}")),
    };
    let (ok, status, error) = match sent {
        Ok(Ok(r)) => {
            let status = r.status();
            if p.config.joined.is_some() && status.is_success() {
                if let Some(word) = team_word(r).await {
                    p.heard_from_team(word);
                }
            }
            (status.is_success(), Some(status.as_u16()), (!status.is_success()).then(|| status.to_string()))
        }
        Ok(Err(e)) => (false, None, Some(crate::proxy::attempt::error_chain(&e))),
        Err(message) => (false, None, Some(message)),
    };
    // Any HTTP answer means the server is up: a 404 for `/models` or a
    // refused key is the breaker's and the keys' business, not reach's.
    let at_ms = now_ms() - i64::try_from(started.elapsed().as_millis()).unwrap_or(0);
    p.record_probe(ok, Probed { at_ms, error: error.clone(), answered: status.is_some() });
    ProbeResult {
        provider: p.name().to_string(),
        ok,
        status,
        duration_ms: started.elapsed().as_secs_f64() * 1000.0,
        error,
        breaker: p.breaker_state().kind(),
    }
}

/// The largest models list read from a team's gateway.
const TEAM_WORD_MAX: usize = 1024 * 1024;

/// A joined team's gateway's word on the member, from its models answer:
/// the models it lists, and `x-switchyard-allow-local-fallback`. `None`
/// for an answer that is not a team's gateway's.
async fn team_word(
    response: axum::http::Response<crate::upstream::Body>,
) -> Option<crate::upstream::provider::TeamWord> {
    let allow = response.headers().get(crate::ground::headers::name::X_SWITCHYARD_ALLOW_LOCAL_FALLBACK)?;
    let allow_local_fallback = allow.as_bytes() != b"false";
    let body = http_body_util::Limited::new(response.into_body(), TEAM_WORD_MAX);
    let bytes = http_body_util::BodyExt::collect(body).await.ok()?.to_bytes();
    let list: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    let models = list["data"].as_array()?.iter().filter_map(|m| m["id"].as_str().map(str::to_string)).collect();
    Some(crate::upstream::provider::TeamWord { models, allow_local_fallback })
}

/// Probes every provider that has probing on, every `interval` (less often
/// while one stays unreachable), until the task is dropped.
pub async fn probe_forever(gw: Gateway, interval: Duration) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let live = gw.live();
        for p in live.providers.iter().filter(|p| p.config.probe && p.is_enabled() && p.probe_due()) {
            let result = probe(&gw, p).await;
            if !result.ok {
                tracing::debug!(provider = p.name(), "probe failed: {}", result.error.unwrap_or_default());
            }
        }
    }
}
