//! The bug report: one JSON document with what is needed to understand a
//! request — versions, the OS, the configuration in force, the request's
//! row and attempts, and its captured bodies — searched for every secret
//! the gateway knows, and for common credential shapes, before it leaves.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::base::{store, AdminError};
use crate::gateway::Gateway;
use crate::proxy::scrub::Scrubber;

/// The report for request `id`, secrets removed.
pub async fn build(gw: &Gateway, id: &str) -> Result<Value, AdminError> {
    let store = store(gw).await?;
    let detail = store
        .request(id)
        .await?
        .ok_or_else(|| AdminError::not_found("request_not_found", format!("no request {id:?} on record")))?;
    let inspection = super::inspector::inspect(store, id).await?;
    let report = json!({
        "switchyard_version": env!("CARGO_PKG_VERSION"),
        "os": std::env::consts::OS,
        "arch": std::env::consts::ARCH,
        "config": super::config::view(gw),
        "request": detail,
        "bodies": inspection,
    });
    let text = serde_json::to_string(&report).map_err(|e| AdminError::internal("internal", e.to_string()))?;
    let clean = cleaned(gw, &text);
    serde_json::from_str(&clean).map_err(|e| AdminError::internal("internal", e.to_string()))
}

/// `text` without any secret the gateway knows (every provider key and
/// token) or any credential shape ([`crate::proxy::redact`]).
fn cleaned(gw: &Gateway, text: &str) -> String {
    let live = gw.live();
    let known = Scrubber::for_request(gw, &live.providers, &HeaderMap::new(), None);
    let text = known.text(text).into_owned();
    crate::proxy::redact::shapes_in_json(&text).0
}

/// `GET /admin/requests/{id}/export`: the report as a file to attach.
pub(super) async fn export(State(gw): State<Gateway>, Path(id): Path<String>) -> Result<Response, AdminError> {
    let report = build(&gw, &id).await?;
    let mut headers = HeaderMap::new();
    let disposition = format!("attachment; filename=\"switchyard-{id}.json\"");
    if let Ok(v) = HeaderValue::from_str(&disposition) {
        headers.insert(axum::http::header::CONTENT_DISPOSITION, v);
    }
    Ok((headers, Json(report)).into_response())
}
