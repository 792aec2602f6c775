//! What every admin route uses: the admin API's error, the tokens a
//! request may carry, the history store, blocking work, time parameters.

use std::time::{SystemTime, UNIX_EPOCH};

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use secrecy::ExposeSecret;
use serde_json::json;

use crate::gateway::Gateway;
use crate::ground::compare::constant_time_eq;
use crate::history::store::StoreError;

/// An admin API error: `{"error":{"code","message"}}`.
#[derive(Debug)]
pub struct AdminError {
    pub(super) status: StatusCode,
    pub(super) code: &'static str,
    pub(super) message: String,
}

impl AdminError {
    pub fn not_found(code: &'static str, message: impl Into<String>) -> AdminError {
        AdminError::new(StatusCode::NOT_FOUND, code, message)
    }

    pub fn internal(code: &'static str, message: impl Into<String>) -> AdminError {
        AdminError::new(StatusCode::INTERNAL_SERVER_ERROR, code, message)
    }

    pub fn conflict(code: &'static str, message: impl Into<String>) -> AdminError {
        AdminError::new(StatusCode::CONFLICT, code, message)
    }

    pub fn unauthorized(code: &'static str, message: impl Into<String>) -> AdminError {
        AdminError::new(StatusCode::UNAUTHORIZED, code, message)
    }

    /// The gateway was started without an admin token.
    pub fn admin_disabled() -> AdminError {
        AdminError::not_found("admin_disabled", "the admin API is not enabled on this gateway")
    }

    pub fn bad_request(code: &'static str, message: impl Into<String>) -> AdminError {
        AdminError::new(StatusCode::BAD_REQUEST, code, message)
    }

    pub fn unprocessable(code: &'static str, message: impl Into<String>) -> AdminError {
        AdminError::new(StatusCode::UNPROCESSABLE_ENTITY, code, message)
    }

    /// No provider of that name (in the running gateway, or in its config file).
    pub fn provider_not_found(name: &str) -> AdminError {
        AdminError::not_found("provider_not_found", format!("no provider named {name:?}"))
    }

    pub(super) fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> AdminError {
        AdminError { status, code, message: message.into() }
    }
}

impl IntoResponse for AdminError {
    fn into_response(self) -> Response {
        (self.status, Json(json!({ "error": { "code": self.code, "message": self.message } }))).into_response()
    }
}

impl From<StoreError> for AdminError {
    fn from(e: StoreError) -> AdminError {
        match e {
            StoreError::Cursor(_) => AdminError::new(StatusCode::BAD_REQUEST, "bad_cursor", e.to_string()),
            other => AdminError::new(StatusCode::INTERNAL_SERVER_ERROR, "history_unavailable", other.to_string()),
        }
    }
}

/// Runs blocking work (files, the keychain) off the runtime. A task that
/// panicked answers as the gateway's internal error.
pub(crate) async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Result<T, AdminError> {
    tokio::task::spawn_blocking(work).await.map_err(|e| AdminError::internal("internal", e.to_string()))
}

/// The `Authorization: Bearer` credential a request carries.
pub(crate) fn bearer(headers: &axum::http::HeaderMap) -> Option<&str> {
    headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "))
}

/// Whether the request carries the admin token as its bearer credential.
pub(crate) fn admin_token_sent(gw: &Gateway, headers: &axum::http::HeaderMap) -> bool {
    bearer_is(gw.admin_token(), headers)
}

/// Whether `Authorization: Bearer` carries the local access token.
pub(crate) fn access_token_sent(gw: &Gateway, headers: &axum::http::HeaderMap) -> bool {
    bearer_is(gw.access_token(), headers)
}

fn bearer_is(expected: Option<&secrecy::SecretString>, headers: &axum::http::HeaderMap) -> bool {
    let (Some(expected), Some(given)) = (expected, bearer(headers)) else { return false };
    constant_time_eq(given.trim().as_bytes(), expected.expose_secret().as_bytes())
}

/// The history database, with every record queued so far written to it.
pub(crate) async fn store(gw: &Gateway) -> Result<&crate::history::Store, AdminError> {
    let store = gw.store().ok_or_else(|| {
        AdminError::new(StatusCode::NOT_FOUND, "history_disabled", "history is not recorded on this gateway")
    })?;
    if let Some(sink) = gw.sink() {
        sink.recorder.flush().await;
    }
    Ok(store)
}

/// The time a query parameter `name` gives, or a 400 naming it.
pub(crate) fn time_param(name: &str, value: Option<&str>) -> Result<Option<i64>, AdminError> {
    value
        .map(|v| {
            parse_time(v).ok_or_else(|| {
                AdminError::new(StatusCode::BAD_REQUEST, "bad_time", format!("{name}={v:?} is not a time"))
            })
        })
        .transpose()
}

/// A point in time: Unix milliseconds, RFC 3339, or a duration ago (`90m`, `7d`).
pub fn parse_time(text: &str) -> Option<i64> {
    let text = text.trim();
    if let Ok(ms) = text.parse::<i64>() {
        return Some(ms);
    }
    if let Ok(at) = humantime::parse_rfc3339_weak(text) {
        return at.duration_since(UNIX_EPOCH).ok().and_then(|d| i64::try_from(d.as_millis()).ok());
    }
    let ago = humantime::parse_duration(text).ok()?;
    let at = SystemTime::now().checked_sub(ago)?;
    at.duration_since(UNIX_EPOCH).ok().and_then(|d| i64::try_from(d.as_millis()).ok())
}
