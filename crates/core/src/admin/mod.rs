//! The admin API: JSON over HTTP for the dashboard and the CLI, behind the
//! admin token. Nothing here ever returns a key.

pub(crate) mod base;
pub(crate) mod config;
pub(crate) mod inspector;
pub(crate) mod live;
pub(crate) mod members;
pub(crate) mod replay;
pub(crate) mod report;
pub mod routes;
pub(crate) mod sessions;
pub(crate) mod tools;
pub mod try_it;
pub(crate) mod ui;
pub mod whoami;

pub(crate) use base::{admin_token_sent, blocking, store, time_param};
pub use base::{parse_time, AdminError};
pub use inspector::Inspection;
pub use live::StreamMessage;

/// A request's captured bodies with the changes made to them (what
/// `GET /admin/requests/{id}/bodies` answers), read from `store`: for
/// `switchyard history show ID --bodies`. `None`: nothing was captured.
pub async fn inspection(store: &crate::history::Store, id: &str) -> Result<Option<Inspection>, String> {
    inspector::inspect(store, id).await.map_err(|e| e.message)
}

use std::time::{Duration, UNIX_EPOCH};

use axum::extract::{Path, Query, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;

use crate::gateway::Gateway;
use crate::ground::clock::now_ms;
use crate::ground::outcome::RequestOutcome;
use crate::history::store::{Bucket, RequestFilter};

/// The admin routes; the caller supplies the state.
pub fn router(gateway: Gateway) -> Router<Gateway> {
    Router::new()
        .route("/admin/requests", get(list_requests))
        .route("/admin/requests/{id}", get(get_request))
        .route("/admin/spend", get(spend))
        .route("/admin/budgets", get(budgets))
        .route("/admin/keys", get(list_keys))
        .route("/admin/keys/reload", axum::routing::post(reload_keys))
        .route("/admin/keys/{provider}/{label}", axum::routing::put(set_key).delete(remove_key))
        .route("/admin/session", axum::routing::post(crate::admin::ui::new_ticket))
        .merge(crate::admin::live::routes())
        .merge(crate::admin::config::routes())
        .merge(crate::admin::routes::routes())
        .merge(crate::admin::tools::routes())
        .merge(crate::admin::try_it::routes())
        .merge(crate::admin::members::routes())
        .merge(crate::admin::sessions::routes())
        .merge(crate::admin::inspector::routes())
        .route("/admin/requests/{id}/export", get(report::export))
        .route_layer(middleware::from_fn_with_state(gateway, require_token))
}

async fn require_token(State(gw): State<Gateway>, request: Request, next: Next) -> Result<Response, AdminError> {
    if gw.admin_token().is_none() {
        return Err(AdminError::admin_disabled());
    }
    if !admin_token_sent(&gw, request.headers()) && !crate::admin::ui::has_session(&gw, request.headers()) {
        return Err(AdminError::new(
            StatusCode::UNAUTHORIZED,
            "admin_token_required",
            "send the admin token as `Authorization: Bearer <token>`, or sign in to the dashboard",
        ));
    }
    Ok(next.run(request).await)
}

#[derive(Debug, Deserialize)]
struct ListQuery {
    provider: Option<String>,
    model: Option<String>,
    /// Only requests made with this member's key.
    member: Option<String>,
    /// Only requests a member's joined gateway sent from this device.
    device: Option<String>,
    /// Only requests of this session.
    session: Option<String>,
    outcome: Option<String>,
    #[serde(default)]
    failed: bool,
    #[serde(default)]
    fallback: bool,
    /// What the response cache did: hit, stale, miss or bypass.
    cache: Option<String>,
    correlation_id: Option<String>,
    /// A request id, a prefix of one, a correlation id or a trace id.
    q: Option<String>,
    since: Option<String>,
    until: Option<String>,
    cursor: Option<String>,
    limit: Option<u32>,
}

/// `outcome=`, one of the outcomes history records.
fn outcome_param(value: &str) -> Result<RequestOutcome, AdminError> {
    serde_json::from_value(serde_json::Value::String(value.into())).map_err(|_| {
        AdminError::new(
            StatusCode::BAD_REQUEST,
            "bad_outcome",
            format!("outcome={value:?} is not an outcome: ok, provider_error, error, rejected, failed or canceled"),
        )
    })
}

/// `cache=`, one of the statuses history records.
fn cache_param(value: &str) -> Result<crate::ground::outcome::CacheStatus, AdminError> {
    serde_json::from_value(serde_json::Value::String(value.into())).map_err(|_| {
        AdminError::new(
            StatusCode::BAD_REQUEST,
            "bad_cache",
            format!("cache={value:?} is not a cache status: hit, stale, miss or bypass"),
        )
    })
}

async fn list_requests(State(gw): State<Gateway>, Query(q): Query<ListQuery>) -> Result<Response, AdminError> {
    let filter = RequestFilter {
        since: time_param("since", q.since.as_deref())?,
        until: time_param("until", q.until.as_deref())?,
        provider: q.provider,
        model: q.model,
        member: q.member,
        device: q.device,
        session: q.session,
        outcome: q.outcome.as_deref().map(outcome_param).transpose()?,
        failed: q.failed,
        fallback: q.fallback,
        cache: q.cache.as_deref().map(cache_param).transpose()?,
        correlation_id: q.correlation_id,
        search: q.q,
        cursor: q.cursor,
        limit: q.limit,
    };
    Ok(Json(store(&gw).await?.requests(&filter).await?).into_response())
}

async fn get_request(State(gw): State<Gateway>, Path(id): Path<String>) -> Result<Response, AdminError> {
    match store(&gw).await?.request(&id).await? {
        Some(detail) => Ok(Json(detail).into_response()),
        None => {
            Err(AdminError::new(StatusCode::NOT_FOUND, "request_not_found", format!("no request {id:?} on record")))
        }
    }
}

#[derive(Debug, Deserialize)]
struct SpendQuery {
    #[serde(default)]
    bucket: Bucket,
    since: Option<String>,
    member: Option<String>,
    /// `session` or `client`: adds that breakdown since `since`.
    by: Option<String>,
}

async fn spend(State(gw): State<Gateway>, Query(q): Query<SpendQuery>) -> Result<Response, AdminError> {
    if let Some(other) = q.by.as_deref().filter(|b| !["session", "client", "member"].contains(b)) {
        return Err(AdminError::bad_request("bad_by", format!("by={other:?} is not one of session, client, member")));
    }
    let store = store(&gw).await?;
    let now = now_ms();
    let day = i64::try_from(Duration::from_secs(86_400).as_millis()).unwrap_or(86_400_000);
    let since = time_param("since", q.since.as_deref())?.unwrap_or(now - 30 * day);
    let rows = store.spend(q.bucket, since).await?;
    let today_start = now - now.rem_euclid(day);
    // The totals need the last 30 days by day, which a day chart reaching
    // that far back (the default) already holds: no second query for it.
    let month = if q.bucket == Bucket::Day && since <= today_start - 29 * day {
        None
    } else {
        Some(store.spend(Bucket::Day, now - 30 * day).await?)
    };
    let month = month.as_deref().unwrap_or(&rows);
    let since_day = |from: i64| {
        let from_bucket = humantime::format_rfc3339(UNIX_EPOCH + Duration::from_millis(from.max(0) as u64)).to_string();
        let from_day = from_bucket[..10].to_string();
        month.iter().filter(move |r| r.bucket.as_str() >= from_day.as_str())
    };
    let spent = |from: i64| since_day(from).filter_map(|r| r.cost_usd).sum::<f64>();
    let saved = |from: i64| since_day(from).map(|r| r.saved_usd).sum::<f64>();
    let totals = SpendTotals {
        today_usd: spent(today_start),
        last_7_days_usd: spent(today_start - 6 * day),
        last_30_days_usd: spent(today_start - 29 * day),
        saved_today_usd: saved(today_start),
        saved_last_7_days_usd: saved(today_start - 6 * day),
        saved_last_30_days_usd: saved(today_start - 29 * day),
    };
    let mut by_member = store.member_spend(since).await?;
    by_member.retain(|m| q.member.as_ref().is_none_or(|only| *only == m.member));
    let by_session = match q.by.as_deref() {
        Some("session") => crate::admin::sessions::by_session(store, since).await?,
        _ => Vec::new(),
    };
    let by_client = match q.by.as_deref() {
        Some("client") => crate::admin::sessions::by_client(store, since).await?,
        _ => Vec::new(),
    };
    Ok(Json(Spend { bucket: q.bucket, rows, totals, by_member, by_session, by_client }).into_response())
}

/// `GET /admin/budgets`: each budget's spend in its current period, in
/// config order; in a team, the team's spend.
async fn budgets(State(gw): State<Gateway>) -> Json<Vec<crate::policy::BudgetRow>> {
    Json(gw.budget_rows(now_ms()).await)
}

/// `GET /admin/spend`: tokens and cost per bucket, provider and model.
#[derive(Debug, serde::Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub(crate) struct Spend {
    bucket: Bucket,
    rows: Vec<crate::history::store::SpendRow>,
    totals: SpendTotals,
    /// Each member's requests and spend since `since` (`member=` keeps one);
    /// the owner's requests are in `rows` and in no member's.
    by_member: Vec<crate::members::MemberSpend>,
    /// With `by=session`: the sessions with a request since `since`, the
    /// costliest first; otherwise empty.
    by_session: Vec<crate::history::SessionSummary>,
    /// With `by=client`: each client's requests and spend since `since`;
    /// otherwise empty.
    by_client: Vec<crate::admin::sessions::ClientSpend>,
}

/// Spend over the last calendar days, today included, and what answers
/// from the response cache saved over the same days.
#[derive(Debug, serde::Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub(crate) struct SpendTotals {
    today_usd: f64,
    last_7_days_usd: f64,
    last_30_days_usd: f64,
    saved_today_usd: f64,
    saved_last_7_days_usd: f64,
    saved_last_30_days_usd: f64,
}

#[derive(Debug, serde::Serialize)]
struct ProviderKeys {
    provider: String,
    needs_key: bool,
    problem: Option<String>,
    keys: Vec<crate::upstream::keys::KeySummary>,
}

/// Labels, last four characters and status of every provider's keys.
async fn list_keys(State(gw): State<Gateway>) -> Json<Vec<ProviderKeys>> {
    let now = tokio::time::Instant::now();
    Json(
        gw.live()
            .providers
            .iter()
            .map(|p| ProviderKeys {
                provider: p.name().to_string(),
                needs_key: p.keys.needs_key(),
                problem: p.keys.problem(),
                keys: p.keys.summary(now),
            })
            .collect(),
    )
}

#[derive(Debug, Deserialize)]
struct NewKey {
    key: String,
}

fn known_provider(gw: &Gateway, provider: &str) -> Result<(), AdminError> {
    match gw.live().provider(provider) {
        Some(_) => Ok(()),
        None => Err(AdminError::provider_not_found(provider)),
    }
}

fn secret_error(e: crate::secrets::SecretError) -> AdminError {
    AdminError::new(StatusCode::SERVICE_UNAVAILABLE, "keychain_unavailable", e.to_string())
}

/// Stores a key (write-only: the key never comes back) and reloads keys.
async fn set_key(
    State(gw): State<Gateway>,
    Path((provider, label)): Path<(String, String)>,
    Json(body): Json<NewKey>,
) -> Result<Response, AdminError> {
    known_provider(&gw, &provider)?;
    if body.key.trim().is_empty() {
        return Err(AdminError::new(StatusCode::BAD_REQUEST, "empty_key", "the key is empty"));
    }
    let secret = secrecy::SecretString::from(body.key.trim().to_string());
    let g = gw.clone();
    blocking(move || {
        g.secrets().set(&provider, &label, &secret)?;
        g.reload_keys();
        Ok::<_, crate::secrets::SecretError>(())
    })
    .await?
    .map_err(secret_error)?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn remove_key(
    State(gw): State<Gateway>,
    Path((provider, label)): Path<(String, String)>,
) -> Result<Response, AdminError> {
    known_provider(&gw, &provider)?;
    let g = gw.clone();
    let removed = blocking(move || {
        let removed = g.secrets().remove(&provider, &label)?;
        g.reload_keys();
        Ok::<_, crate::secrets::SecretError>(removed)
    })
    .await?
    .map_err(secret_error)?;
    if removed {
        Ok(StatusCode::NO_CONTENT.into_response())
    } else {
        Err(AdminError::new(StatusCode::NOT_FOUND, "key_not_found", "no such key"))
    }
}

/// Reads every key again (after `switchyard keys set` in another process).
async fn reload_keys(State(gw): State<Gateway>) -> Result<Response, AdminError> {
    let g = gw.clone();
    blocking(move || g.reload_keys()).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
