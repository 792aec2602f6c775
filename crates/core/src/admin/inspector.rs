//! The request inspector's routes: a captured request's bodies with every
//! change the gateway made and why (`/admin/requests/{id}/bodies`), a
//! replay through the proxy path (`/admin/requests/{id}/replay`), a bug
//! report (`/admin/requests/{id}/export`) and the capture switch
//! (`/admin/capture`). Mounted behind the same admin guard as every other
//! admin route.

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::base::{store, AdminError};
use crate::gateway::capture::SwitchState;
use crate::gateway::Gateway;
use crate::history::store::RequestDetail;
use crate::proxy::capture::{self, Captured};

pub(crate) fn routes() -> Router<Gateway> {
    Router::new()
        .route("/admin/requests/{id}/bodies", get(bodies))
        .route("/admin/requests/{id}/replay", post(replay))
        .route("/admin/capture", get(switch_state).put(set_switch))
}

/// One change the gateway made to what the client sent, and why.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Change {
    /// The JSON path it touched (`model`, `stream_options`), or `` for the whole body.
    pub field: String,
    /// `changed`, `added`, `dropped`, `translated` or `redacted`.
    pub kind: String,
    pub reason: String,
}

/// Every change made for one attempt.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct AttemptChanges {
    pub seq: u32,
    pub changes: Vec<Change>,
}

/// What `GET /admin/requests/{id}/bodies` answers.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Inspection {
    pub request_id: String,
    /// The request this one replayed.
    pub replay_of: Option<String>,
    /// The requests that replayed this one, oldest first.
    pub replays: Vec<String>,
    pub captured: Captured,
    pub changes: Vec<AttemptChanges>,
}

/// A request's inspection, from the store: `None` when it has no capture.
pub async fn inspect(store: &crate::history::Store, id: &str) -> Result<Option<Inspection>, AdminError> {
    let Some(stored) = store.capture(id).await? else { return Ok(None) };
    let captured = capture::decode(&stored.data).map_err(|e| AdminError::internal("capture_unreadable", e))?;
    let detail = store.request(id).await?;
    let changes = detail.as_ref().map(|d| changes(d, &captured)).unwrap_or_default();
    let replays = store.replays(id).await?;
    Ok(Some(Inspection { request_id: id.to_string(), replay_of: stored.replay_of, replays, captured, changes }))
}

async fn bodies(State(gw): State<Gateway>, Path(id): Path<String>) -> Result<Response, AdminError> {
    match inspect(store(&gw).await?, &id).await? {
        Some(inspection) => Ok(Json(inspection).into_response()),
        None => Err(no_capture(&id)),
    }
}

fn no_capture(id: &str) -> AdminError {
    AdminError::not_found(
        "capture_not_found",
        format!("no bodies were captured for {id:?} (turn on history.store_bodies or the capture switch)"),
    )
}

/// The changes for each captured attempt: the translation and what it left
/// out (from the attempt's row), then what differs between the client's
/// body and the upstream one, each with the reason the gateway has for it.
pub fn changes(detail: &RequestDetail, captured: &Captured) -> Vec<AttemptChanges> {
    let client = captured.client.body.as_ref().and_then(|b| serde_json::from_str::<Value>(&b.text).ok());
    captured
        .attempts
        .iter()
        .map(|a| {
            let mut changes = Vec::new();
            if let Some(t) = detail.translations.iter().find(|t| t.seq == a.seq) {
                let reason = format!("translated from {} to {}", t.client, t.provider);
                changes.push(Change { field: String::new(), kind: "translated".into(), reason });
            }
            for field in detail.dropped.iter().filter(|d| d.seq == a.seq).flat_map(|d| &d.fields) {
                let (name, why) = field.split_once(": ").unwrap_or((field.as_str(), field.as_str()));
                changes.push(Change {
                    field: name.trim_matches('`').into(),
                    kind: "dropped".into(),
                    reason: why.into(),
                });
            }
            if a.redacted > 0 {
                let reason = format!("{} secrets taken out of the prompt (server.redact_outgoing)", a.redacted);
                changes.push(Change { field: String::new(), kind: "redacted".into(), reason });
            }
            let upstream = a.request.body.as_ref().and_then(|b| serde_json::from_str::<Value>(&b.text).ok());
            if let (Some(Value::Object(c)), Some(Value::Object(u))) = (&client, &upstream) {
                let translated = detail.translations.iter().any(|t| t.seq == a.seq);
                changes.extend(field_changes(c, u, translated));
            }
            AttemptChanges { seq: a.seq, changes }
        })
        .collect()
}

/// Top-level fields the gateway itself changes, named with why.
fn field_changes(
    client: &serde_json::Map<String, Value>,
    upstream: &serde_json::Map<String, Value>,
    translated: bool,
) -> Vec<Change> {
    let mut out = Vec::new();
    let change = |field: &str, kind: &str, reason: String| Change { field: field.into(), kind: kind.into(), reason };
    if let (Some(a), Some(b)) = (client.get("model"), upstream.get("model")) {
        if a != b {
            out.push(change("model", "changed", format!("model alias: {a} is {b} at this provider")));
        }
    }
    if !client.contains_key("stream_options") && upstream.contains_key("stream_options") {
        out.push(change("stream_options", "added", "asked for usage in the stream, to count tokens".into()));
    }
    for limit in ["max_tokens", "max_completion_tokens", "max_output_tokens"] {
        if let (Some(a), Some(b)) = (client.get(limit), upstream.get(limit)) {
            if a != b {
                out.push(change(limit, "changed", format!("clamped from {a} to {b}: the provider's output limit")));
            }
        }
    }
    if translated {
        return out;
    }
    for (key, _) in client.iter().filter(|(k, _)| !upstream.contains_key(*k)) {
        if !out.iter().any(|c| c.field == *key) {
            out.push(change(key, "dropped", "not sent to this provider".into()));
        }
    }
    out
}

/// What a replay asks for: another provider, another body, or neither.
#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct ReplayAsk {
    /// Send it only to this provider.
    pub provider: Option<String>,
    /// Send this body instead of the captured one.
    #[cfg_attr(test, ts(type = "unknown"))]
    pub body: Option<Value>,
}

/// What a replay answers: the new request's id, the original's, and the answer.
#[derive(Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Replayed {
    pub request_id: String,
    pub replay_of: String,
    pub status: u16,
    /// The answer's body as text (a stream: its events, as sent).
    pub body: String,
}

/// Sends the captured request again, through the proxy path like any client
/// request, as a new request linked to the original.
async fn replay(
    State(gw): State<Gateway>,
    Path(id): Path<String>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    ask: Option<Json<ReplayAsk>>,
) -> Result<Response, AdminError> {
    let ask = ask.map(|Json(a)| a).unwrap_or_default();
    let store = store(&gw).await?;
    let inspection = inspect(store, &id).await?.ok_or_else(|| no_capture(&id))?;
    let (body, path) = replay_body(&inspection.captured, &ask)?;
    let replay = super::replay::Replay {
        original: &id,
        path: &path,
        body,
        captured: &inspection.captured,
        provider: ask.provider.as_deref(),
        peer: peer.map(|Extension(ConnectInfo(addr))| addr.ip()),
    };
    let (status, body, request_id) = super::replay::send(&gw, replay).await?;
    let replayed = Replayed { request_id, replay_of: id, status, body };
    Ok((StatusCode::OK, Json(replayed)).into_response())
}

/// The body to send again (the captured one, or the edited one) and the path.
fn replay_body(captured: &Captured, ask: &ReplayAsk) -> Result<(bytes::Bytes, String), AdminError> {
    let path = captured.client.path.clone();
    let original = captured.client.body.as_ref().filter(|b| !b.truncated).map(|b| b.text.clone());
    let body: Value = match (&ask.body, original) {
        (Some(edited), _) => edited.clone(),
        (None, Some(text)) => serde_json::from_str(&text).map_err(|e| {
            AdminError::unprocessable("capture_not_json", format!("the captured body is not JSON: {e}"))
        })?,
        (None, None) => {
            return Err(AdminError::unprocessable(
                "capture_cut",
                "the captured body was cut at history.body_limit: send the body to replay",
            ))
        }
    };
    let bytes = serde_json::to_vec(&body).map_err(|e| AdminError::internal("internal", e.to_string()))?;
    Ok((bytes.into(), path))
}

async fn switch_state(State(gw): State<Gateway>) -> Json<SwitchState> {
    Json(gw.capture_switch().state())
}

/// Turns capture on for the next `remaining` requests and/or until `until_ms`.
async fn set_switch(State(gw): State<Gateway>, Json(state): Json<SwitchState>) -> Json<SwitchState> {
    gw.capture_switch().set(state);
    Json(gw.capture_switch().state())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(v: Value) -> serde_json::Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    #[test]
    fn the_gateways_own_changes_are_named_with_their_reasons() {
        let client = map(json!({"model": "fast", "stream": true, "max_tokens": 99999, "user": "x"}));
        let upstream = map(json!({"model": "gpt-4o-mini", "stream": true, "max_tokens": 16384, "stream_options": {}}));
        let changes = field_changes(&client, &upstream, false);
        let fields: Vec<(&str, &str)> = changes.iter().map(|c| (c.field.as_str(), c.kind.as_str())).collect();
        assert_eq!(
            fields,
            [("model", "changed"), ("stream_options", "added"), ("max_tokens", "changed"), ("user", "dropped")]
        );
        assert!(changes[0].reason.contains("alias"));
    }
}
