//! Errors the gateway itself returns to clients, rendered in the client's own
//! protocol so that SDKs parse them like any provider error.

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::protocol::Protocol;

/// A stable, machine-readable error code. Clients and the UI may match on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    InvalidJson,
    InvalidRequest,
    ModelNotFound,
    NotFound,
    MethodNotAllowed,
    BodyTooLarge,
    NoProviderAvailable,
    AllProvidersFailed,
    DeadlineExceeded,
    /// A stream that broke after content was sent: the protocol's error event ends it.
    UpstreamError,
    HostNotAllowed,
    OriginNotAllowed,
    CrossSiteRequest,
    InvalidAccessToken,
    RateLimited,
    HeadersTooLarge,
    BodyTimeout,
    /// A `block` budget past its limit covers every provider left to try.
    BudgetExceeded,
    /// A member's key that was revoked.
    KeyRevoked,
    /// A member's key past its expiry.
    KeyExpired,
    /// A member asked for a model outside the ones they may use.
    ModelNotAllowed,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidJson => "invalid_json",
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::ModelNotFound => "model_not_found",
            ErrorCode::NotFound => "not_found",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::BodyTooLarge => "body_too_large",
            ErrorCode::NoProviderAvailable => "no_provider_available",
            ErrorCode::AllProvidersFailed => "all_providers_failed",
            ErrorCode::DeadlineExceeded => "deadline_exceeded",
            ErrorCode::HostNotAllowed => "host_not_allowed",
            ErrorCode::OriginNotAllowed => "origin_not_allowed",
            ErrorCode::CrossSiteRequest => "cross_site_request",
            ErrorCode::InvalidAccessToken => "invalid_access_token",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::HeadersTooLarge => "headers_too_large",
            ErrorCode::BodyTimeout => "body_timeout",
            ErrorCode::UpstreamError => "upstream_error",
            ErrorCode::BudgetExceeded => "budget_exceeded",
            ErrorCode::KeyRevoked => "key_revoked",
            ErrorCode::KeyExpired => "key_expired",
            ErrorCode::ModelNotAllowed => "model_not_allowed",
        }
    }

    pub fn status(self) -> StatusCode {
        match self {
            ErrorCode::InvalidJson | ErrorCode::InvalidRequest => StatusCode::BAD_REQUEST,
            ErrorCode::ModelNotFound | ErrorCode::NotFound => StatusCode::NOT_FOUND,
            ErrorCode::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ErrorCode::BodyTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::NoProviderAvailable => StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::AllProvidersFailed | ErrorCode::UpstreamError => StatusCode::BAD_GATEWAY,
            ErrorCode::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
            ErrorCode::HostNotAllowed
            | ErrorCode::OriginNotAllowed
            | ErrorCode::CrossSiteRequest
            | ErrorCode::ModelNotAllowed => StatusCode::FORBIDDEN,
            ErrorCode::InvalidAccessToken | ErrorCode::KeyRevoked | ErrorCode::KeyExpired => StatusCode::UNAUTHORIZED,
            ErrorCode::RateLimited | ErrorCode::BudgetExceeded => StatusCode::TOO_MANY_REQUESTS,
            ErrorCode::HeadersTooLarge => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            ErrorCode::BodyTimeout => StatusCode::REQUEST_TIMEOUT,
        }
    }

    /// The gateway tried everything it could; a client retry only adds load.
    pub fn is_exhausted(self) -> bool {
        matches!(self, ErrorCode::NoProviderAvailable | ErrorCode::AllProvidersFailed | ErrorCode::DeadlineExceeded)
    }

    /// A refusal that the same request cannot overcome by being sent again:
    /// SDKs retry some 4xx (and every 429) unless told not to.
    fn retry_cannot_help(self) -> bool {
        matches!(
            self,
            ErrorCode::BudgetExceeded
                | ErrorCode::KeyRevoked
                | ErrorCode::KeyExpired
                | ErrorCode::ModelNotAllowed
                | ErrorCode::InvalidAccessToken
        )
    }

    /// OpenAI's `error.type`.
    fn openai_type(self) -> &'static str {
        match self.status().as_u16() {
            404 => "not_found_error",
            401 => "authentication_error",
            403 => "permission_error",
            429 => "rate_limit_error",
            400..=499 => "invalid_request_error",
            _ => "api_error",
        }
    }

    /// Anthropic's `error.type` (one of its documented values).
    fn anthropic_type(self) -> &'static str {
        match self {
            ErrorCode::ModelNotFound | ErrorCode::NotFound => "not_found_error",
            ErrorCode::BodyTooLarge => "request_too_large",
            ErrorCode::NoProviderAvailable => "overloaded_error",
            ErrorCode::InvalidJson
            | ErrorCode::InvalidRequest
            | ErrorCode::MethodNotAllowed
            | ErrorCode::HeadersTooLarge
            | ErrorCode::BodyTimeout => "invalid_request_error",
            ErrorCode::HostNotAllowed
            | ErrorCode::OriginNotAllowed
            | ErrorCode::CrossSiteRequest
            | ErrorCode::ModelNotAllowed => "permission_error",
            ErrorCode::InvalidAccessToken | ErrorCode::KeyRevoked | ErrorCode::KeyExpired => "authentication_error",
            ErrorCode::RateLimited | ErrorCode::BudgetExceeded => "rate_limit_error",
            ErrorCode::AllProvidersFailed | ErrorCode::UpstreamError | ErrorCode::DeadlineExceeded => "api_error",
        }
    }
}

impl ErrorCode {
    /// Gemini's `error.status`: the google.rpc code name for the HTTP status.
    fn gemini_status(self) -> &'static str {
        match self.status().as_u16() {
            400 | 405 | 408 | 413 | 431 => "INVALID_ARGUMENT",
            401 => "UNAUTHENTICATED",
            403 => "PERMISSION_DENIED",
            404 => "NOT_FOUND",
            429 => "RESOURCE_EXHAUSTED",
            503 => "UNAVAILABLE",
            504 => "DEADLINE_EXCEEDED",
            _ => "INTERNAL",
        }
    }
}

/// An error produced by the gateway (not relayed from a provider).
#[derive(Debug, Clone)]
pub struct ApiError {
    pub protocol: Protocol,
    pub code: ErrorCode,
    pub message: String,
    /// Upstream attempts made before giving up; sent as `x-switchyard-attempts`.
    pub attempts: u32,
    /// When a refusal ends (a budget's next period), Unix ms: sent as
    /// `retry-after` seconds and an RFC 3339 `x-switchyard-budget-reset`.
    pub resets_at_ms: Option<i64>,
    /// A rate refusal's wait, sent as `retry-after` (whole seconds, at least 1).
    pub retry_after: Option<std::time::Duration>,
}

impl ApiError {
    pub fn new(protocol: Protocol, code: ErrorCode, message: impl Into<String>) -> ApiError {
        ApiError { protocol, code, message: message.into(), attempts: 0, resets_at_ms: None, retry_after: None }
    }

    pub fn with_attempts(mut self, attempts: u32) -> ApiError {
        self.attempts = attempts;
        self
    }

    /// Refused until `at_ms` (Unix ms).
    pub fn until(mut self, at_ms: i64) -> ApiError {
        self.resets_at_ms = Some(at_ms);
        self
    }

    pub fn body(&self) -> serde_json::Value {
        match self.protocol {
            Protocol::OpenAi => json!({
                "error": {
                    "message": self.message,
                    "type": self.code.openai_type(),
                    "param": null,
                    "code": self.code.as_str(),
                }
            }),
            Protocol::Anthropic => json!({
                "type": "error",
                "error": {
                    "type": self.code.anthropic_type(),
                    "message": self.message,
                    "code": self.code.as_str(),
                }
            }),
            // google.rpc.Status, as Gemini's own errors: the code is the HTTP status.
            Protocol::Gemini => json!({
                "error": {
                    "code": self.code.status().as_u16(),
                    "message": self.message,
                    "status": self.code.gemini_status(),
                    "details": [{
                        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                        "reason": self.code.as_str(),
                        "domain": "switchyard",
                    }],
                }
            }),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.code.status(), axum::Json(self.body())).into_response();
        let headers = response.headers_mut();
        headers.insert(crate::ground::headers::name::X_SWITCHYARD_ERROR, HeaderValue::from_static(self.code.as_str()));
        if self.code.is_exhausted() {
            headers.insert("x-switchyard-attempts", HeaderValue::from(self.attempts));
            // The gateway already tried every option; an SDK retry only multiplies load.
            headers.insert("x-should-retry", HeaderValue::from_static("false"));
        }
        if self.code.retry_cannot_help() {
            // A budget's 429 only the next period lifts; a key or model
            // refusal holds whatever the timing.
            headers.insert("x-should-retry", HeaderValue::from_static("false"));
        }
        if let Some(at_ms) = self.resets_at_ms {
            reset_headers(headers, at_ms);
        }
        if let Some(wait) = self.retry_after {
            headers.insert(axum::http::header::RETRY_AFTER, HeaderValue::from(wait.as_secs().max(1)));
        }
        response
    }
}

/// `retry-after` (whole seconds, rounded up) and `x-switchyard-budget-reset`
/// (RFC 3339) for a refusal that ends at `at_ms`.
fn reset_headers(headers: &mut axum::http::HeaderMap, at_ms: i64) {
    let left_ms = (at_ms - crate::ground::clock::now_ms()).max(0);
    headers.insert(axum::http::header::RETRY_AFTER, HeaderValue::from((left_ms + 999) / 1000));
    if let Ok(at) = jiff::Timestamp::from_millisecond(at_ms) {
        if let Ok(value) = HeaderValue::from_str(&at.to_string()) {
            headers.insert("x-switchyard-budget-reset", value);
        }
    }
}
