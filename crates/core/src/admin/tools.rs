//! `GET /admin/clients`: the clients the gateway has seen, by user agent,
//! each with its last request. The dashboard's Tools view matches them to
//! the coding tools it knows.
//!
//! Only what the gateway itself saw is reported here. Which tools are
//! installed and connected is a question about the user's files (`PATH`,
//! `~/.codex/config.toml`), answered by the process the user runs: the CLI
//! (`switchyard tools`) or the desktop app. The gateway may serve another
//! home or another machine, and an admin route that wrote into dotfiles
//! would let a stolen dashboard session redirect the user's tools.

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;
use sqlx::Row;

use crate::admin::{store, AdminError};
use crate::Gateway;

/// The most user agents listed, most recently seen first.
const MAX_CLIENTS: i64 = 100;

pub fn routes() -> Router<Gateway> {
    Router::new().route("/admin/clients", get(clients))
}

/// One user agent and its last request.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Client {
    pub user_agent: String,
    pub requests: i64,
    pub last_at: i64,
    pub last_id: String,
    pub last_model: Option<String>,
    pub last_outcome: String,
}

#[derive(Debug, Serialize)]
struct Clients {
    clients: Vec<Client>,
}

async fn clients(State(gw): State<Gateway>) -> Result<Json<Clients>, AdminError> {
    let store = store(&gw).await?;
    // Kept by the history writer (migration 0007): a row per client, not a
    // pass over every request on record.
    let rows = sqlx::query(
        "SELECT user_agent, requests, last_at, last_id AS id, last_model AS model, last_outcome AS outcome
         FROM clients ORDER BY last_at DESC LIMIT ?",
    )
    .bind(MAX_CLIENTS)
    .fetch_all(store.pool())
    .await
    .map_err(|e| AdminError::internal("history_error", e.to_string()))?;
    let clients = rows
        .iter()
        .map(|r| {
            Ok(Client {
                user_agent: r.try_get("user_agent")?,
                requests: r.try_get("requests")?,
                last_at: r.try_get("last_at")?,
                last_id: r.try_get("id")?,
                last_model: r.try_get("model")?,
                last_outcome: r.try_get("outcome")?,
            })
        })
        .collect::<Result<Vec<_>, sqlx::Error>>()
        .map_err(|e| AdminError::internal("history_error", e.to_string()))?;
    Ok(Json(Clients { clients }))
}
