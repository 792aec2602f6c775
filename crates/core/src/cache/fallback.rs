//! What the client gets when every provider in the chain has failed and no
//! stale entry can stand in: the route's static answer if it names one, or
//! else the gateway's own error as an RFC 9457 problem document that is
//! also the client protocol's error shape, so that SDKs parse it as they
//! parse any provider error. Both carry `x-fallback-response: true`.
//!
//! The problem document's members are `type`, `title`, `status`, `detail`
//! and the extensions `code` (the gateway's stable error code) and
//! `request_id`; the protocol's envelope rides along as its own members:
//!
//! - OpenAI (chat, completions, responses, embeddings): the `error` object
//!   (`message`, `type`, `param`, `code`). The problem `type` is the
//!   relative reference `/problems/<code>`.
//! - Anthropic (messages): the `error` object (`type`, `message`) and a
//!   top-level `type` of `"error"`, which Anthropic's SDKs look for; so
//!   here the problem `type` is `"error"` (a relative reference too, as
//!   RFC 9457 allows) and the problem's identity is its `code`.
//! - Gemini: the `error` object (`code`, `message`, `status`, `details`);
//!   the problem `type` is `/problems/<code>`, as for OpenAI.

use axum::body::Body;
use axum::http::{header, HeaderValue, Response};
use axum::response::IntoResponse;
use serde_json::{Map, Value};

use crate::protocol::error::ApiError;
use crate::protocol::Protocol;

pub const X_FALLBACK_RESPONSE: &str = "x-fallback-response";
pub const PROBLEM_JSON: &str = "application/problem+json";

pub use crate::config::FallbackResponse;

impl FallbackResponse {
    /// The answer, marked as a fallback; `attempts` as the gateway's errors count them.
    pub fn response(&self, attempts: u32) -> Response<Body> {
        let mut response = Response::new(Body::from(self.body.clone()));
        *response.status_mut() = self.status;
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, self.content_type.clone());
        headers.insert(X_FALLBACK_RESPONSE, HeaderValue::from_static("true"));
        headers.insert(crate::ground::headers::name::X_SWITCHYARD_ATTEMPTS, HeaderValue::from(attempts));
        headers.insert("x-should-retry", HeaderValue::from_static("false"));
        response
    }
}

/// `error` as a problem document in its protocol's error shape.
pub fn problem_body(error: &ApiError, request_id: Option<&str>) -> Value {
    let mut body = match error.body() {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    let code = error.code.as_str();
    let problem_type = match error.protocol {
        Protocol::OpenAi | Protocol::Gemini => format!("/problems/{code}"),
        Protocol::Anthropic => "error".to_string(),
    };
    body.insert("type".into(), Value::from(problem_type));
    body.insert("title".into(), Value::from(title(code)));
    body.insert("status".into(), Value::from(error.code.status().as_u16()));
    body.insert("detail".into(), Value::from(error.message.clone()));
    body.insert("code".into(), Value::from(code));
    if let Some(id) = request_id {
        body.insert("request_id".into(), Value::from(id));
    }
    Value::Object(body)
}

/// `no_provider_available` as "No provider available".
fn title(code: &str) -> String {
    let words = code.replace('_', " ");
    let mut chars = words.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => words,
    }
}

/// The gateway's error as a problem document, with the headers its plain
/// form carries (`x-switchyard-error`, and for an exhausted chain
/// `x-switchyard-attempts` and `x-should-retry: false`) and `x-fallback-response`.
pub fn problem(error: &ApiError, request_id: Option<&str>) -> Response<Body> {
    let body = problem_body(error, request_id).to_string();
    let (mut parts, _) = error.clone().into_response().into_parts();
    parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(X_FALLBACK_RESPONSE, HeaderValue::from_static("true"));
    Response::from_parts(parts, Body::from(body))
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;
    use bytes::Bytes;
    use http_body_util::BodyExt;
    use serde_json::json;

    use super::*;
    use crate::protocol::error::ErrorCode;

    async fn body_of(r: Response<Body>) -> Value {
        serde_json::from_slice(&r.into_body().collect().await.unwrap().to_bytes()).unwrap()
    }

    #[tokio::test]
    async fn the_openai_shape_is_a_problem_document_with_its_error_object() {
        let error =
            ApiError::new(Protocol::OpenAi, ErrorCode::AllProvidersFailed, "all providers failed for `m`: a: HTTP 503")
                .with_attempts(3);
        let response = problem(&error, Some("req-1"));
        assert_eq!(response.status(), StatusCode::BAD_GATEWAY);
        let h = response.headers();
        assert_eq!(h["content-type"], PROBLEM_JSON);
        assert_eq!(h["x-fallback-response"], "true");
        assert_eq!(h["x-switchyard-attempts"], "3");
        assert_eq!(h["x-should-retry"], "false");
        let body = body_of(response).await;
        assert_eq!(
            body,
            json!({
                "type": "/problems/all_providers_failed", "title": "All providers failed", "status": 502,
                "detail": "all providers failed for `m`: a: HTTP 503", "code": "all_providers_failed", "request_id": "req-1",
                "error": {"message": "all providers failed for `m`: a: HTTP 503", "type": "api_error", "param": null, "code": "all_providers_failed"}
            })
        );
    }

    #[tokio::test]
    async fn the_anthropic_shape_keeps_its_type_and_error_object() {
        let error = ApiError::new(
            Protocol::Anthropic,
            ErrorCode::NoProviderAvailable,
            "no provider can take `claude` right now",
        );
        let body = body_of(problem(&error, None)).await;
        // What Anthropic's SDKs read: the top-level type, error.type, error.message.
        assert_eq!(body["type"], "error");
        assert_eq!(body["error"]["type"], "overloaded_error");
        assert_eq!(body["error"]["message"], "no provider can take `claude` right now");
        // What a problem+json reader reads.
        assert_eq!((body["title"].as_str(), body["status"].as_u64()), (Some("No provider available"), Some(503)));
        assert_eq!(body["detail"], body["error"]["message"]);
        assert!(body.get("request_id").is_none());
    }

    #[tokio::test]
    async fn the_gemini_shape_keeps_its_error_object() {
        let error = ApiError::new(Protocol::Gemini, ErrorCode::DeadlineExceeded, "the 5s deadline ran out");
        let body = body_of(problem(&error, None)).await;
        assert_eq!(body["type"], "/problems/deadline_exceeded");
        assert_eq!(body["error"]["code"], 504);
        assert_eq!(body["error"]["message"], "the 5s deadline ran out");
        assert!(body["error"]["status"].is_string());
    }

    #[tokio::test]
    async fn a_static_fallback_is_sent_as_configured_and_marked() {
        let fallback = FallbackResponse {
            status: StatusCode::SERVICE_UNAVAILABLE,
            body: Bytes::from_static(br#"{"error":{"message":"try later"}}"#),
            content_type: HeaderValue::from_static("application/json"),
        };
        let response = fallback.response(2);
        assert_eq!(response.status(), 503);
        assert_eq!(response.headers()["x-fallback-response"], "true");
        assert_eq!(response.headers()["content-type"], "application/json");
        assert_eq!(body_of(response).await, json!({"error": {"message": "try later"}}));
    }
}
