//! Sending a captured request again: built as the client's request was
//! (its headers, credentials left out), it goes through the proxy path like
//! any other, every limit, budget and policy applied, as a new request on
//! record linked to the original (`replay_of`).

use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Uri};
use bytes::Bytes;
use http_body_util::BodyExt;
use secrecy::ExposeSecret;

use super::AdminError;
use crate::gateway::Gateway;
use crate::http::correlation::RequestIds;
use crate::proxy::capture::{Captured, CAPTURE_HEADER};
use crate::proxy::{self, Inbound};

/// Sends `body` to `path` as a replay of `original`, to `provider` alone if
/// one is named; returns the status, the answer's text and the new request's id.
pub async fn send(
    gw: &Gateway,
    original: &str,
    path: &str,
    body: Bytes,
    captured: &Captured,
    provider: Option<&str>,
) -> Result<(u16, String, String), AdminError> {
    let uri: Uri =
        path.parse().map_err(|_| AdminError::unprocessable("bad_path", format!("cannot replay {path:?}")))?;
    let (endpoint, path_model) = crate::protocol::Endpoint::of_path(uri.path())
        .ok_or_else(|| AdminError::unprocessable("bad_path", format!("{path:?} is not a proxied endpoint")))?;
    let headers = headers(gw, captured);
    let ids = RequestIds::from_headers(&HeaderMap::new());
    let request_id = ids.request_id.clone();
    gw.capture_switch().expect_replay(&request_id, original, provider);
    let inbound = Inbound { endpoint, path_model: path_model.map(str::to_string), ids, headers, uri, peer: None };
    let response = proxy::handle(gw, inbound, Body::from(body)).await;
    let status = response.status().as_u16();
    let answer =
        response.into_body().collect().await.map_err(|e| AdminError::internal("replay_failed", e.to_string()))?;
    Ok((status, String::from_utf8_lossy(&answer.to_bytes()).into_owned(), request_id))
}

/// The client's headers as captured, without the credentials (stored as
/// `[redacted]`) or a length that no longer holds; the gateway's own access
/// token stands in for the client's, and the replay is always captured.
fn headers(gw: &Gateway, captured: &Captured) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in &captured.client.headers {
        let Ok(name) = HeaderName::from_bytes(name.as_bytes()) else { continue };
        if proxy::headers::CREDENTIALS.contains(&name) || name == header::CONTENT_LENGTH || name == header::HOST {
            continue;
        }
        if let Ok(value) = HeaderValue::from_str(value) {
            map.append(name, value);
        }
    }
    if let Some(token) = gw.access_token() {
        if let Ok(v) = HeaderValue::from_str(&format!("Bearer {}", token.expose_secret())) {
            map.insert(header::AUTHORIZATION, v);
        }
    }
    map.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    map.insert(CAPTURE_HEADER, HeaderValue::from_static("1"));
    map
}
