//! Sending a captured request again: built as the client's request was
//! (its headers, credentials left out), it goes through the proxy path like
//! any other, every limit, budget and policy applied, as a new request on
//! record linked to the original (`replay_of`). The front's per-client
//! rate applies too, to the address that asked for the replay with the
//! captured client's user agent: replays cannot go around the limit a
//! tool sending the same request from there would meet.

use std::net::IpAddr;

use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Uri};
use axum::response::Response;

use bytes::Bytes;
use http_body_util::BodyExt;
use secrecy::ExposeSecret;

use super::base::AdminError;
use crate::gateway::Gateway;
use crate::http::correlation::RequestIds;
use crate::proxy::capture::{Captured, CAPTURE_HEADER};
use crate::proxy::{self, Inbound};

/// What to send again, and for whom.
pub struct Replay<'a> {
    /// The request replayed.
    pub original: &'a str,
    pub path: &'a str,
    pub body: Bytes,
    pub captured: &'a Captured,
    /// Send it to this provider alone.
    pub provider: Option<&'a str>,
    /// The address that asked for it (none when the admin API is called
    /// in-process, with no connection).
    pub peer: Option<IpAddr>,
}

/// Sends a replay; returns the status, the answer's text and the new
/// request's id.
pub async fn send(gw: &Gateway, replay: Replay<'_>) -> Result<(u16, String, String), AdminError> {
    let Replay { original, path, body, captured, provider, peer } = replay;
    let uri: Uri =
        path.parse().map_err(|_| AdminError::unprocessable("bad_path", format!("cannot replay {path:?}")))?;
    let (endpoint, path_model) = crate::protocol::Endpoint::of_path(uri.path())
        .ok_or_else(|| AdminError::unprocessable("bad_path", format!("{path:?} is not a proxied endpoint")))?;
    let headers = headers(gw, captured);
    let ids = RequestIds::from_headers(&HeaderMap::new());
    let request_id = ids.request_id.clone();
    let response = match within_rate(gw, peer, &headers, uri.path()) {
        Ok(()) => {
            gw.capture_switch().expect_replay(&request_id, original, provider);
            let inbound = Inbound { endpoint, path_model: path_model.map(str::to_string), ids, headers, uri, peer };
            proxy::handle(gw, inbound, Body::from(body)).await
        }
        // Refused before the proxy, as the front refuses: nothing on record.
        Err(refused) => *refused,
    };
    let status = response.status().as_u16();
    let answer =
        response.into_body().collect().await.map_err(|e| AdminError::internal("replay_failed", e.to_string()))?;
    Ok((status, String::from_utf8_lossy(&answer.to_bytes()).into_owned(), request_id))
}

/// The front's per-client rate, for the address that asked for the replay
/// and the captured client's user agent.
fn within_rate(gw: &Gateway, peer: Option<IpAddr>, headers: &HeaderMap, path: &str) -> Result<(), Box<Response>> {
    let Some(peer) = peer else { return Ok(()) };
    let protocol = crate::http::guard::protocol_of(path);
    crate::http::guard::within_rate(gw, &gw.live().config.server, peer, headers, protocol)
}

/// The client's headers as captured, without the credentials (stored as
/// `[redacted]`) or a length that no longer holds; the gateway's own access
/// token stands in for the client's, and the replay is always captured.
fn headers(gw: &Gateway, captured: &Captured) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in &captured.client.headers {
        let Ok(name) = HeaderName::from_bytes(name.as_bytes()) else { continue };
        // A replay is a request of its own: not a child of the original's trace.
        let trace =
            name == crate::ground::headers::name::TRACEPARENT || name == crate::ground::headers::name::TRACESTATE;
        if crate::ground::headers::CREDENTIALS.contains(&name)
            || name == header::CONTENT_LENGTH
            || name == header::HOST
            || trace
        {
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
