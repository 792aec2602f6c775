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

use crate::admin::base::{store, AdminError};
use crate::history::Client;
use crate::Gateway;

/// The most user agents listed, most recently seen first.
const MAX_CLIENTS: i64 = 100;

pub fn routes() -> Router<Gateway> {
    Router::new().route("/admin/clients", get(clients))
}

#[derive(Debug, Serialize)]
struct Clients {
    clients: Vec<Client>,
}

async fn clients(State(gw): State<Gateway>) -> Result<Json<Clients>, AdminError> {
    let clients = store(&gw).await?.clients(MAX_CLIENTS).await?;
    Ok(Json(Clients { clients }))
}
