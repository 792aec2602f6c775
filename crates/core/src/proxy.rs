//! The proxied request path: read and inspect the body, plan the provider
//! chain, try each candidate, relay the first acceptable answer as a stream.

use std::fmt::Write as _;
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderValue, Response, StatusCode, Uri};
use bytes::Bytes;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use tracing::{info, warn};

use crate::body::{self, BodyError, RequestHead};
use crate::classify::{self, Decision, Outcome};
use crate::correlation::RequestIds;
use crate::error::{ApiError, ErrorCode};
use crate::gateway::Gateway;
use crate::headers;
use crate::protocol::Endpoint;
use crate::routing::{self, Candidate, RouteError};

/// How much of a failed provider's error body goes into the gateway's message.
const ERROR_SNIPPET_CHARS: usize = 300;
/// How long to wait for a failed provider's error body before giving up on it.
const ERROR_BODY_WAIT: Duration = Duration::from_secs(2);

/// One proxied request, as the handler received it.
#[derive(Debug)]
pub struct Inbound {
    pub endpoint: Endpoint,
    pub ids: RequestIds,
    pub headers: HeaderMap,
    pub uri: Uri,
}

pub async fn handle(gateway: &Gateway, inbound: Inbound, body: Body) -> Result<Response<Body>, ApiError> {
    let protocol = inbound.endpoint.protocol();
    let limit = gateway.config().server.max_body_bytes;
    let bytes = read_body(body, &inbound.headers, limit).await.map_err(|e| e.in_protocol(protocol))?;
    let head = body::inspect(&bytes).map_err(|e| {
        let code = match e {
            BodyError::Malformed(_) => ErrorCode::InvalidJson,
            BodyError::MissingModel => ErrorCode::InvalidRequest,
        };
        ApiError::new(protocol, code, e.to_string())
    })?;
    let plan = routing::plan(gateway.providers(), &gateway.config().routes, protocol, &head.model).map_err(|e| {
        let code = match e {
            RouteError::UnknownModel(_) => ErrorCode::ModelNotFound,
            RouteError::NoneAvailable { .. } => ErrorCode::NoProviderAvailable,
        };
        ApiError::new(protocol, code, e.to_string())
    })?;
    let request = Prepared { gateway, inbound: &inbound, head: &head, body: &bytes };
    let mut failures = String::new();
    let mut attempts = 0u32;
    for candidate in &plan.candidates {
        attempts += 1;
        let (outcome, response, detail) = match request.attempt(candidate).await {
            Ok(response) => (Outcome::Status(response.status()), Some(response), String::new()),
            Err(error) => (classify::of_error(&error), None, format!("({error})")),
        };
        match (classify::decide(outcome), response) {
            (Decision::Relay, Some(response)) => return Ok(relay(response, candidate, attempts, head.stream)),
            (_, response) => {
                let snippet = match response {
                    Some(response) => error_snippet(response).await,
                    None => detail,
                };
                note_failure(&mut failures, candidate, &format!("{} {snippet}", outcome_text(outcome)));
            }
        }
    }
    Err(ApiError::new(protocol, ErrorCode::AllProvidersFailed, format!("all providers failed for `{}`: {failures}", head.model))
        .with_attempts(attempts))
}

fn note_failure(failures: &mut String, candidate: &Candidate<'_>, what: &str) {
    let name = candidate.provider.name();
    warn!(provider = name, "attempt failed: {what}");
    if !failures.is_empty() {
        failures.push_str("; ");
    }
    let _ = write!(failures, "{name}: {}", what.trim());
}

fn outcome_text(outcome: Outcome) -> String {
    match outcome {
        Outcome::Status(s) => s.to_string(),
        Outcome::Connect => "connection failed".into(),
        Outcome::Transport => "transport error".into(),
        Outcome::Timeout => "timed out".into(),
    }
}

struct Prepared<'a> {
    gateway: &'a Gateway,
    inbound: &'a Inbound,
    head: &'a RequestHead,
    body: &'a Bytes,
}

impl Prepared<'_> {
    async fn attempt(&self, candidate: &Candidate<'_>) -> Result<reqwest::Response, reqwest::Error> {
        let provider = candidate.provider;
        // The plan only holds providers whose key could be picked.
        let key = provider.pick_key().ok().flatten();
        let url = upstream_url(&provider.config.base_url, self.inbound.endpoint, self.inbound.uri.query());
        let headers = headers::upstream_request(&self.inbound.headers, provider.config.kind, key, &self.inbound.ids.correlation_id);
        let body = self.head.with_model(self.body, candidate.upstream_model);
        info!(provider = provider.name(), model = candidate.upstream_model, "attempt");
        self.gateway.client().post(url).headers(headers).body(body).send().await
    }
}

fn upstream_url(base: &reqwest::Url, endpoint: Endpoint, query: Option<&str>) -> String {
    let mut url = format!("{}/{}", base.as_str().trim_end_matches('/'), endpoint.upstream_path());
    if let Some(q) = query.filter(|q| !q.is_empty()) {
        url.push('?');
        url.push_str(q);
    }
    url
}

/// Turns the provider's response into the client's, streaming the body through.
fn relay(upstream: reqwest::Response, candidate: &Candidate<'_>, attempts: u32, streamed: bool) -> Response<Body> {
    let status = upstream.status();
    let mut headers = headers::client_response(upstream.headers());
    let is_sse = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if is_sse || streamed && status == StatusCode::OK {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    }
    if let Ok(name) = HeaderValue::from_str(candidate.provider.name()) {
        headers.insert("x-switchyard-provider", name);
    }
    headers.insert("x-switchyard-attempts", HeaderValue::from(attempts));
    // Dropping this body (client gone) drops the upstream response and its connection.
    let mut response = Response::new(Body::from_stream(upstream.bytes_stream()));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}

/// A short, single-line excerpt of a failed provider's error body.
async fn error_snippet(response: reqwest::Response) -> String {
    let Ok(Ok(bytes)) = tokio::time::timeout(ERROR_BODY_WAIT, response.bytes()).await else {
        return String::new();
    };
    let text = String::from_utf8_lossy(&bytes);
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    one_line.chars().take(ERROR_SNIPPET_CHARS).collect()
}

#[derive(Debug)]
enum ReadError {
    TooLarge(usize),
    Broken(String),
}

impl ReadError {
    fn in_protocol(self, protocol: crate::protocol::Protocol) -> ApiError {
        match self {
            ReadError::TooLarge(limit) => ApiError::new(
                protocol,
                ErrorCode::BodyTooLarge,
                format!("request body exceeds the gateway's limit of {limit} bytes (server.max_body_bytes)"),
            ),
            ReadError::Broken(reason) => {
                ApiError::new(protocol, ErrorCode::InvalidRequest, format!("could not read the request body: {reason}"))
            }
        }
    }
}

async fn read_body(body: Body, headers: &HeaderMap, limit: usize) -> Result<Bytes, ReadError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(ReadError::TooLarge(limit));
    }
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => Err(ReadError::TooLarge(limit)),
        Err(e) => Err(ReadError::Broken(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_url_joins_base_path_and_query() {
        let base = reqwest::Url::parse("http://127.0.0.1:9/v1").unwrap();
        assert_eq!(upstream_url(&base, Endpoint::ChatCompletions, None), "http://127.0.0.1:9/v1/chat/completions");
        let base = reqwest::Url::parse("https://api.groq.com/openai/v1/").unwrap();
        assert_eq!(
            upstream_url(&base, Endpoint::Messages, Some("beta=true")),
            "https://api.groq.com/openai/v1/messages?beta=true"
        );
        assert_eq!(upstream_url(&base, Endpoint::CountTokens, Some("")), "https://api.groq.com/openai/v1/messages/count_tokens");
    }
}
