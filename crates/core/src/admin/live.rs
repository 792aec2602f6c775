//! The admin API's live half: providers with their health and statistics,
//! toggles and breaker operations, probes, config reload, and the event
//! stream (`GET /admin/events`, server-sent events: a snapshot first, then
//! events; `Last-Event-ID` resumes, a lagging client gets a fresh snapshot).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::Stream;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::broadcast::Receiver;

use crate::admin::base::AdminError;
use crate::config::Config;
use crate::gateway::{Gateway, ToggleError};
use crate::protocol::error::{ApiError, ErrorCode};
use crate::protocol::Protocol;
use crate::telemetry::events::Envelope;
use crate::telemetry::health::{self, ProviderStateName, ProviderView};
use crate::telemetry::stats::Today;

pub fn routes() -> Router<Gateway> {
    Router::new()
        .route("/admin/providers", get(providers))
        .route("/admin/providers/{name}/enable", post(enable))
        .route("/admin/providers/{name}/disable", post(disable))
        .route("/admin/providers/{name}/breaker/reset", post(breaker_reset))
        .route("/admin/providers/{name}/breaker/open", post(breaker_open))
        .route("/admin/providers/{name}/probe", post(probe))
        .route("/admin/team", get(team))
        .route("/admin/stats", get(stats))
        .route("/admin/events", get(events))
        .route("/admin/reload", post(reload))
}

async fn providers(State(gw): State<Gateway>) -> Json<Vec<health::ProviderView>> {
    Json(health::views(&gw))
}

fn provider(gw: &Gateway, name: &str) -> Result<Arc<crate::upstream::provider::Provider>, AdminError> {
    gw.live().provider(name).cloned().ok_or_else(|| AdminError::provider_not_found(name))
}

fn toggle(gw: &Gateway, name: &str, enabled: bool) -> Result<Response, AdminError> {
    match gw.set_enabled(name, enabled) {
        Ok(()) => Ok(Json(health::view(gw, &provider(gw, name)?)).into_response()),
        Err(ToggleError::UnknownProvider(n)) => Err(AdminError::provider_not_found(&n)),
        Err(e @ ToggleError::Persist { .. }) => Err(AdminError::internal("state_not_saved", e.to_string())),
    }
}

async fn enable(State(gw): State<Gateway>, Path(name): Path<String>) -> Result<Response, AdminError> {
    toggle(&gw, &name, true)
}

async fn disable(State(gw): State<Gateway>, Path(name): Path<String>) -> Result<Response, AdminError> {
    toggle(&gw, &name, false)
}

async fn breaker_reset(State(gw): State<Gateway>, Path(name): Path<String>) -> Result<Response, AdminError> {
    let p = provider(&gw, &name)?;
    p.reset_breaker();
    Ok(Json(health::view(&gw, &p)).into_response())
}

async fn breaker_open(State(gw): State<Gateway>, Path(name): Path<String>) -> Result<Response, AdminError> {
    let p = provider(&gw, &name)?;
    p.open_breaker();
    Ok(Json(health::view(&gw, &p)).into_response())
}

async fn probe(State(gw): State<Gateway>, Path(name): Path<String>) -> Result<Response, AdminError> {
    let p = provider(&gw, &name)?;
    Ok(Json(health::probe(&gw, &p).await).into_response())
}

/// `GET /admin/stats`: every provider's statistics.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct StatsView {
    pub providers: Vec<ProviderStats>,
    pub cost_today_usd: f64,
    pub last_event_id: u64,
    /// History records dropped because the writer fell behind.
    pub history_records_lost: u64,
    /// Whether the history keeps up; absent when history is off.
    pub history: Option<crate::history::HistoryStatus>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct ProviderStats {
    pub name: String,
    pub state: ProviderStateName,
    pub stats: health::Windows,
    pub models: Vec<health::ModelView>,
    pub today: Today,
    pub queue: health::QueueView,
}

async fn stats(State(gw): State<Gateway>) -> Json<StatsView> {
    let views = health::views(&gw);
    let cost_today_usd: f64 = views.iter().map(|v| v.today.cost_usd).sum();
    let providers = views
        .into_iter()
        .map(|v| ProviderStats {
            name: v.name,
            state: v.state.state,
            stats: v.stats,
            models: v.models,
            today: v.today,
            queue: v.queue,
        })
        .collect();
    Json(StatsView {
        providers,
        cost_today_usd,
        last_event_id: gw.telemetry().events.last_id(),
        history_records_lost: gw.sink().map_or(0, |s| s.recorder.lost()),
        history: gw.sink().map(|s| s.recorder.status()),
    })
}

/// Reads the config file again. A bad file is refused with its error and
/// the configuration in force keeps serving.
pub async fn reload(State(gw): State<Gateway>) -> Result<Response, AdminError> {
    let Some(path) = gw.config_path().map(|p| p.to_path_buf()) else {
        return Err(AdminError::conflict(
            "no_config_file",
            "this gateway runs on the embedded default: there is no file to reload",
        ));
    };
    if !path.exists() {
        return Err(AdminError::conflict(
            "no_config_file",
            format!("{} does not exist yet: the embedded default is in force", path.display()),
        ));
    }
    // Reading the file (and, for new providers, the keychain) blocks.
    let g = gw.clone();
    let loaded = crate::admin::base::blocking(move || Config::load(&path).map(|config| g.reload(config))).await?;
    match loaded {
        Ok(()) => Ok(Json(json!({ "reloaded": true })).into_response()),
        Err(e) => {
            gw.reload_refused(e.to_string());
            Err(AdminError::unprocessable("config_invalid", e.to_string()))
        }
    }
}

/// The event stream's first message, and the one after a lag: the state
/// as it is now. Its `type` tells it from an [`Envelope`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Snapshot {
    #[serde(rename = "type")]
    pub kind: SnapshotKind,
    pub last_event_id: u64,
    pub providers: Vec<ProviderView>,
    /// The latest state changes, oldest first.
    pub recent: Vec<Envelope>,
}

/// The one value of a snapshot's `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum SnapshotKind {
    Snapshot,
}

/// What the event stream carries, as its reader takes it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(untagged)]
pub enum StreamMessage {
    Snapshot(Snapshot),
    /// Boxed: an event is several times a snapshot's head.
    Event(Box<Envelope>),
}

fn snapshot(gw: &Gateway) -> Event {
    let events = &gw.telemetry().events;
    let data = Snapshot {
        kind: SnapshotKind::Snapshot,
        last_event_id: events.last_id(),
        providers: health::views(gw),
        recent: events.recent_changes(100).iter().map(|e| Envelope::clone(e)).collect(),
    };
    Event::default()
        .event("snapshot")
        .id(events.last_id().to_string())
        .data(serde_json::to_string(&data).unwrap_or_default())
}

fn event(e: &Envelope) -> Event {
    Event::default()
        .event(e.event.kind().as_str())
        .id(e.id.to_string())
        .data(serde_json::to_string(e).unwrap_or_default())
}

struct Feed {
    gw: Gateway,
    rx: Receiver<Arc<Envelope>>,
    queued: VecDeque<Event>,
    last_sent: u64,
}

/// The team this gateway is part of: every live instance, and the state of
/// the Redis it shares through; a lone gateway says so.
async fn team(State(gw): State<Gateway>) -> Json<crate::team::TeamView> {
    let history = gw.store().map_or("none", crate::history::Store::backend);
    let mut view = gw.team().view().await;
    view.history = history.into();
    Json(crate::team::TeamView { history_status: gw.sink().map(|s| s.recorder.status()), ..view })
}

async fn events(State(gw): State<Gateway>, headers: HeaderMap) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    // Subscribe first, so nothing published during the snapshot is missed.
    let rx = gw.telemetry().events.subscribe();
    let resume = headers.get("last-event-id").and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse::<u64>().ok());
    let mut queued = VecDeque::new();
    let last_sent = match resume.and_then(|id| gw.telemetry().events.since(id).map(|missed| (id, missed))) {
        Some((id, missed)) => {
            queued.extend(missed.iter().map(|e| event(e)));
            missed.last().map_or(id, |e| e.id)
        }
        None => {
            queued.push_back(snapshot(&gw));
            gw.telemetry().events.last_id()
        }
    };
    let feed = Feed { gw, rx, queued, last_sent };
    let stream = futures_util::stream::unfold(feed, |mut feed| async move {
        loop {
            if let Some(e) = feed.queued.pop_front() {
                return Some((Ok(e), feed));
            }
            match feed.rx.recv().await {
                Ok(e) if e.id <= feed.last_sent => continue,
                Ok(e) => {
                    feed.last_sent = e.id;
                    return Some((Ok(event(&e)), feed));
                }
                // Fell behind: start again from the state as it is now.
                Err(RecvError::Lagged(_)) => {
                    feed.last_sent = feed.gw.telemetry().events.last_id();
                    feed.queued.push_back(snapshot(&feed.gw));
                }
                Err(RecvError::Closed) => return None,
            }
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}

/// Whether `/metrics` may answer this request. Its series name models and
/// count tokens and spend, so with `[server] access_token = true` (the
/// gateway may answer the network) it takes the access token as a bearer
/// credential, as Prometheus sends one; the admin token and a dashboard
/// session, which see more than this already, do too.
fn metrics_allowed(gw: &Gateway, headers: &HeaderMap) -> bool {
    gw.access_token().is_none()
        || crate::admin::base::access_token_sent(gw, headers)
        || crate::admin::base::admin_token_sent(gw, headers)
        || crate::admin::ui::has_session(gw, headers)
}

/// `GET /metrics`: Prometheus text.
pub async fn metrics(State(gw): State<Gateway>, headers: HeaderMap) -> Response {
    if !metrics_allowed(&gw, &headers) {
        return ApiError::new(
            Protocol::OpenAi,
            ErrorCode::InvalidAccessToken,
            "this gateway requires its local access token for /metrics (Authorization: Bearer)",
        )
        .into_response();
    }
    let m = &gw.telemetry().metrics;
    for p in &gw.live().providers {
        let label = crate::telemetry::metrics::ProviderLabel { provider: p.name().to_string() };
        let breaker = match p.breaker_state() {
            crate::policy::breaker::State::Closed => 0,
            crate::policy::breaker::State::HalfOpen => 1,
            crate::policy::breaker::State::Open { .. } => 2,
        };
        m.breaker.get_or_create(&label).set(breaker);
        m.enabled.get_or_create(&label).set(i64::from(p.is_enabled()));
        m.set_queue(p.name(), &p.capacity().counters().snapshot());
    }
    if let Some(cache) = gw.cache() {
        m.set_cache(&cache.counters().snapshot());
    }
    if let Some(sink) = gw.sink() {
        m.set_history(&sink.recorder.status());
    }
    m.set_budgets(&gw.budget_rows(crate::ground::clock::now_ms()).await);
    m.team_degraded.set(i64::from(gw.team().degraded()));
    (
        StatusCode::OK,
        [(axum::http::header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")],
        m.encode(),
    )
        .into_response()
}
