//! `GET /admin/sessions` and `/admin/sessions/{id}`: coding agents'
//! conversations, summed from their requests, for the dashboard's Sessions
//! view, `switchyard sessions` and Claude Code's status line. Behind the
//! admin token as every admin route.

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};

use crate::admin::base::{store, time_param, AdminError};
use crate::gateway::Gateway;
use crate::ground::clock::now_ms;
use crate::history::sessions::{client_of, SessionFilter, SessionSummary, DETAIL_WINDOW_MS, MAX_TIMELINE};

pub fn routes() -> Router<Gateway> {
    Router::new().route("/admin/sessions", get(list)).route("/admin/sessions/{id}", get(show))
}

#[derive(Debug, Deserialize)]
struct ListQuery {
    client: Option<String>,
    model: Option<String>,
    provider: Option<String>,
    member: Option<String>,
    since: Option<String>,
    until: Option<String>,
    cursor: Option<String>,
    limit: Option<u32>,
}

async fn list(State(gw): State<Gateway>, Query(q): Query<ListQuery>) -> Result<Response, AdminError> {
    let filter = SessionFilter {
        since: time_param("since", q.since.as_deref())?,
        until: time_param("until", q.until.as_deref())?,
        client: q.client,
        model: q.model,
        provider: q.provider,
        member: q.member,
        cursor: q.cursor,
        limit: q.limit,
    };
    Ok(Json(store(&gw).await?.sessions(&filter).await?).into_response())
}

#[derive(Debug, Deserialize)]
struct ShowQuery {
    since: Option<String>,
    until: Option<String>,
    /// How many of its latest requests to list (0: only the figures).
    limit: Option<u32>,
}

async fn show(
    State(gw): State<Gateway>,
    Path(id): Path<String>,
    Query(q): Query<ShowQuery>,
) -> Result<Response, AdminError> {
    let since = time_param("since", q.since.as_deref())?.unwrap_or(now_ms() - DETAIL_WINDOW_MS);
    let until = time_param("until", q.until.as_deref())?;
    let timeline = q.limit.unwrap_or(MAX_TIMELINE).min(MAX_TIMELINE);
    let prices = gw.sink().map(|s| &*s.prices);
    match store(&gw).await?.session(&id, (since, until), timeline, prices).await? {
        Some(detail) => Ok(Json(detail).into_response()),
        None => Err(AdminError::not_found("session_not_found", format!("no session {id:?} on record"))),
    }
}

/// One client's requests and spend over some time, for `/admin/spend?by=client`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct ClientSpend {
    /// The client's name ([`client_of`]); null for requests without a user agent.
    pub client: Option<String>,
    pub requests: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cost_usd: f64,
}

/// Spend per client since `since`, the costliest first.
pub(crate) async fn by_client(store: &crate::history::Store, since: i64) -> Result<Vec<ClientSpend>, AdminError> {
    let mut out: Vec<ClientSpend> = Vec::new();
    for (agent, requests, input, output, cost) in store.agent_spend(since).await? {
        let client = agent.as_deref().and_then(|a| client_of(a).0);
        let row = match out.iter_mut().find(|c| c.client == client) {
            Some(row) => row,
            None => {
                out.push(ClientSpend { client, requests: 0, input_tokens: 0, output_tokens: 0, cost_usd: 0.0 });
                let last = out.len() - 1;
                &mut out[last]
            }
        };
        row.requests += requests;
        row.input_tokens += input;
        row.output_tokens += output;
        row.cost_usd += cost.unwrap_or(0.0);
    }
    out.sort_by(|a, b| b.cost_usd.total_cmp(&a.cost_usd).then_with(|| b.requests.cmp(&a.requests)));
    Ok(out)
}

/// The sessions with a request since `since`, the costliest first (at most a page).
pub(crate) async fn by_session(store: &crate::history::Store, since: i64) -> Result<Vec<SessionSummary>, AdminError> {
    let filter =
        SessionFilter { since: Some(since), limit: Some(crate::history::sessions::MAX_PAGE), ..Default::default() };
    let mut sessions = store.sessions(&filter).await?.sessions;
    sessions.sort_by(|a, b| b.cost_usd.unwrap_or(0.0).total_cmp(&a.cost_usd.unwrap_or(0.0)));
    Ok(sessions)
}
