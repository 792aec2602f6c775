//! The local endpoint's guard: a port on localhost that spends provider keys
//! is a target for every web page the developer opens. Requests must name a
//! loopback host (no DNS rebinding), come from no browser origin unless one is
//! allowed, stay under the per-address rate, and carry the local access token
//! when one is required. Refusals are in the client's protocol and cost no
//! upstream call.

use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use foldhash::HashMap;
use secrecy::ExposeSecret;
use tokio::time::Instant;

use crate::config::ServerConfig;
use crate::error::{ApiError, ErrorCode};
use crate::gateway::Gateway;
use crate::headers::name;
use crate::policy::limiter::Bucket;
use crate::protocol::Protocol;

/// Headers whose values must never reach a log or a trace.
pub const SENSITIVE: [HeaderName; 4] =
    [header::AUTHORIZATION, name::X_API_KEY, header::COOKIE, header::PROXY_AUTHORIZATION];

/// Client addresses tracked at most before the table is reset.
const MAX_TRACKED_CLIENTS: usize = 10_000;

/// Per-address request buckets.
#[derive(Debug, Default)]
pub struct ClientRates {
    /// Looked up on every request; bounded by [`MAX_TRACKED_CLIENTS`], so a
    /// fast hash rather than a DoS-resistant one.
    buckets: Mutex<HashMap<IpAddr, Bucket>>,
}

impl ClientRates {
    /// Takes one request from `ip`'s bucket; `false` when it is empty.
    fn admit(&self, ip: IpAddr, per_minute: u32) -> bool {
        let now = Instant::now();
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if buckets.len() >= MAX_TRACKED_CLIENTS && !buckets.contains_key(&ip) {
            buckets.clear();
        }
        let bucket = buckets.entry(ip).or_insert_with(|| Bucket::per_minute(per_minute, now));
        if bucket.wait_for(1.0, now).is_zero() {
            bucket.take(1.0, now);
            true
        } else {
            false
        }
    }
}

fn protocol_of(path: &str) -> Protocol {
    if path.starts_with("/v1/messages") {
        Protocol::Anthropic
    } else {
        Protocol::OpenAi
    }
}

/// The host part of a `Host` header, lower-cased, without port or brackets.
fn host_name(host: &str) -> String {
    let host = host.trim().to_ascii_lowercase();
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or("").to_string();
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) => name.to_string(),
        _ => host,
    }
}

fn host_allowed(server: &ServerConfig, host: &str) -> bool {
    let name = host_name(host);
    let listen = server.listen.ip();
    name == "localhost"
        || name.ends_with(".localhost")
        || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback() || ip == listen)
        || server.allowed_hosts.contains(&name)
}

/// Whether a browser origin may call: the gateway's own pages (same origin)
/// and the configured ones.
fn origin_allowed(server: &ServerConfig, trusted: &[String], origin: &str, host: Option<&str>) -> bool {
    let same = host.is_some_and(|h| origin.eq_ignore_ascii_case(&format!("http://{h}")));
    same || server.allowed_origins.iter().chain(trusted).any(|o| o.eq_ignore_ascii_case(origin))
}

fn header_bytes(headers: &HeaderMap) -> usize {
    headers.iter().map(|(k, v)| k.as_str().len() + v.len() + 4).sum()
}

/// The token a client sent where it puts its API key.
fn client_token(headers: &HeaderMap) -> Option<&str> {
    let bearer =
        headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
    bearer.or_else(|| headers.get(name::X_API_KEY).and_then(|v| v.to_str().ok())).map(str::trim)
}

/// Compares without an early exit, so timing does not reveal a token.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn cors(response: &mut Response, origin: &HeaderValue) {
    let h = response.headers_mut();
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
    h.insert(header::ACCESS_CONTROL_ALLOW_CREDENTIALS, HeaderValue::from_static("true"));
    h.append(header::VARY, HeaderValue::from_static("origin"));
}

fn preflight(headers: &HeaderMap, origin: &HeaderValue) -> Response {
    let mut response = StatusCode::NO_CONTENT.into_response();
    cors(&mut response, origin);
    let h = response.headers_mut();
    h.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static("GET, POST, PUT, DELETE, OPTIONS"));
    let asked = headers.get(header::ACCESS_CONTROL_REQUEST_HEADERS).cloned();
    h.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        asked.unwrap_or_else(|| HeaderValue::from_static("authorization, content-type, x-api-key")),
    );
    h.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("600"));
    response
}

/// The guard as router middleware.
pub async fn guard(State(gw): State<Gateway>, mut request: Request, next: Next) -> Response {
    let peer = request.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0);
    match admit(&gw, &mut request, peer) {
        Ok(admitted) => admitted.finish(next.run(request).await),
        Err(refusal) => *refusal,
    }
}

/// A request the guard let through; its response still needs CORS headers
/// when it came from an allowed browser origin.
#[derive(Debug)]
#[must_use]
pub struct Admitted {
    origin: Option<HeaderValue>,
}

impl Admitted {
    pub fn finish(self, mut response: Response) -> Response {
        if let Some(o) = &self.origin {
            cors(&mut response, o);
        }
        response
    }
}

/// Checks a request (`peer`: the client's address, for the per-address
/// rate). A refusal, or a preflight's answer, is the response to send.
pub fn admit<B>(
    gw: &Gateway,
    request: &mut axum::http::Request<B>,
    peer: Option<SocketAddr>,
) -> Result<Admitted, Box<Response>> {
    for name in SENSITIVE {
        if let Some(v) = request.headers_mut().get_mut(name) {
            v.set_sensitive(true);
        }
    }
    let path = request.uri().path();
    let protocol = protocol_of(path);
    let refuse = |code: ErrorCode, message: String| ApiError::new(protocol, code, message).into_response();
    let live = gw.live();
    let server = &live.config.server;

    let host = request.headers().get(header::HOST).and_then(|v| v.to_str().ok()).map(str::to_string);
    if let Some(h) = &host {
        if !host_allowed(server, h) {
            return Err(Box::new(refuse(
                ErrorCode::HostNotAllowed,
                format!("Host {h:?} is not a loopback name: add it to [server] allowed_hosts if it is yours"),
            )));
        }
    }
    if header_bytes(request.headers()) > server.max_header_bytes {
        return Err(Box::new(refuse(
            ErrorCode::HeadersTooLarge,
            format!("request headers exceed {} bytes", server.max_header_bytes),
        )));
    }
    let origin = request.headers().get(header::ORIGIN).cloned();
    if let Some(o) = &origin {
        let text = o.to_str().unwrap_or("");
        if !origin_allowed(server, gw.trusted_origins(), text, host.as_deref()) {
            return Err(Box::new(refuse(
                ErrorCode::OriginNotAllowed,
                format!("browser origin {text:?} may not call this gateway: add it to [server] allowed_origins if you trust it"),
            )));
        }
        if request.method() == Method::OPTIONS {
            return Err(Box::new(preflight(request.headers(), o)));
        }
    }
    if let Some(peer) = peer {
        if !gw.client_rates().admit(peer.ip(), server.rate_limit_per_minute) {
            let mut r = refuse(
                ErrorCode::RateLimited,
                format!("more than {} requests a minute from {}", server.rate_limit_per_minute, peer.ip()),
            );
            r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            return Err(Box::new(r));
        }
    }
    if path.starts_with("/v1/") {
        if let Some(expected) = gw.access_token() {
            let ok = client_token(request.headers())
                .is_some_and(|t| constant_time_eq(t.as_bytes(), expected.expose_secret().as_bytes()));
            if !ok {
                return Err(Box::new(refuse(
                    ErrorCode::InvalidAccessToken,
                    "this gateway requires its local access token as the API key (Authorization: Bearer or x-api-key)"
                        .into(),
                )));
            }
        }
    }
    Ok(Admitted { origin })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_without_ports() {
        assert_eq!(host_name("LOCALHOST:4141"), "localhost");
        assert_eq!(host_name("127.0.0.1"), "127.0.0.1");
        assert_eq!(host_name("[::1]:4141"), "::1");
        assert_eq!(host_name("evil.example:80"), "evil.example");
    }

    #[test]
    fn tokens_from_either_header() {
        let mut h = HeaderMap::new();
        h.insert("x-api-key", HeaderValue::from_static("sy-1"));
        assert_eq!(client_token(&h), Some("sy-1"));
        h.insert("authorization", HeaderValue::from_static("Bearer sy-2"));
        assert_eq!(client_token(&h), Some("sy-2"));
    }
}
