//! The local endpoint's guard: a port on localhost that spends provider keys
//! is a target for every web page the developer opens. Requests must name a
//! loopback host (no DNS rebinding; a missing, duplicated or malformed host
//! is refused, for HTTP/1 and HTTP/2 alike), come from no browser origin
//! unless one is allowed, not be a browser's cross-site request without an
//! allowed origin (`Sec-Fetch-Site`: an `<img>` or `<script>` tag), stay
//! under the per-client rate, and carry the local access token when one is
//! required. Refusals are in the client's protocol and cost no upstream call.

use std::net::{IpAddr, SocketAddr};

use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use secrecy::ExposeSecret;

use crate::config::ServerConfig;
use crate::gateway::Gateway;
use crate::ground::compare::constant_time_eq;
use crate::ground::headers::name;
use crate::protocol::error::{ApiError, ErrorCode};
use crate::protocol::Protocol;

/// Fetch Metadata: which site a browser request was made for.
const SEC_FETCH_SITE: HeaderName = HeaderName::from_static("sec-fetch-site");

/// The protocol a refusal speaks, from the path the client called.
pub(crate) fn protocol_of(path: &str) -> Protocol {
    if path.starts_with("/v1/messages") {
        Protocol::Anthropic
    } else if path.starts_with("/v1beta/") {
        Protocol::Gemini
    } else {
        Protocol::OpenAi
    }
}

/// The host part of an authority (`Host` or HTTP/2 `:authority`),
/// lower-cased, without port or brackets; `None` when it is not a plain
/// `name[:port]` or `[v6][:port]` (user info, a bracketed name followed by
/// more text, stray characters): such a host is refused, not guessed at.
fn host_name(authority: &str) -> Option<String> {
    let host = authority.trim().to_ascii_lowercase();
    let port_ok = |port: &str| port.is_empty() || port.bytes().all(|b| b.is_ascii_digit());
    if let Some(rest) = host.strip_prefix('[') {
        let (inside, after) = rest.split_once(']')?;
        let tail_ok = after.is_empty() || after.strip_prefix(':').is_some_and(port_ok);
        return (tail_ok && inside.parse::<std::net::Ipv6Addr>().is_ok()).then(|| inside.to_string());
    }
    let name = match host.rsplit_once(':') {
        Some((name, port)) if port_ok(port) => name,
        Some(_) => return None,
        None => host.as_str(),
    };
    let plain = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
    plain.then(|| name.to_string())
}

fn host_allowed(server: &ServerConfig, authority: &str) -> bool {
    let Some(name) = host_name(authority) else { return false };
    let listen = server.listen.ip();
    name == "localhost"
        || name.ends_with(".localhost")
        || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback() || ip == listen)
        || server.allowed_hosts.contains(&name)
}

/// The authority a request names, checked whole: exactly one `Host`
/// header, readable as text, and the request target's authority (HTTP/2's
/// `:authority`, or an absolute-form HTTP/1 target) when there is one; both
/// must be allowed. Anything else is refused: a check that is skipped when
/// the header is odd is no check.
fn checked_host<B>(server: &ServerConfig, request: &axum::http::Request<B>) -> Result<Option<String>, String> {
    let mut hosts = request.headers().get_all(header::HOST).iter();
    let header = match (hosts.next(), hosts.next()) {
        (Some(_), Some(_)) => return Err("the request has more than one Host header".into()),
        (Some(v), None) => Some(v.to_str().map_err(|_| "the Host header is not readable text".to_string())?),
        (None, _) => None,
    };
    let target = request.uri().authority().map(|a| a.as_str());
    if header.is_none() && target.is_none() {
        return Err("the request names no host (Host header or :authority)".into());
    }
    for authority in [header, target].into_iter().flatten() {
        if !host_allowed(server, authority) {
            return Err(format!(
                "Host {authority:?} is not a loopback name: add it to [server] allowed_hosts if it is yours"
            ));
        }
    }
    Ok(header.or(target).map(str::to_string))
}

/// Whether a request goes to a proxy endpoint, the only ones
/// `allowed_origins` opens to other browser origins.
fn is_proxy_path(path: &str) -> bool {
    path.starts_with("/v1/") || path.starts_with("/v1beta/")
}

/// Whether a browser origin may call `path`: the gateway's own pages (same
/// origin) and the host application's (the desktop window) anywhere; the
/// configured `allowed_origins` only on the proxy endpoints, never the admin
/// API or the dashboard.
fn origin_allowed(server: &ServerConfig, trusted: &[String], origin: &str, host: Option<&str>, path: &str) -> bool {
    let same = host.is_some_and(|h| origin.eq_ignore_ascii_case(&format!("http://{h}")));
    let configured: &[String] = if is_proxy_path(path) { &server.allowed_origins } else { &[] };
    same || configured.iter().chain(trusted).any(|o| o.eq_ignore_ascii_case(origin))
}

/// A browser's request made on behalf of another site (`Sec-Fetch-Site:
/// cross-site` or `same-site`) that carries no `Origin`: an `<img>`,
/// `<script>` or link from a page the user opened. Requests that carry an
/// origin were judged by it already.
fn is_foreign_fetch(headers: &HeaderMap) -> bool {
    headers.get(SEC_FETCH_SITE).is_some_and(|v| {
        v.as_bytes().eq_ignore_ascii_case(b"cross-site") || v.as_bytes().eq_ignore_ascii_case(b"same-site")
    })
}

fn header_bytes(headers: &HeaderMap) -> usize {
    headers.iter().map(|(k, v)| k.as_str().len() + v.len() + 4).sum()
}

/// The token a client sent where it puts its API key: a bearer token,
/// `x-api-key` (Anthropic), `x-goog-api-key` or `?key=` (Gemini).
pub(crate) fn client_token<'a>(headers: &'a HeaderMap, query: Option<&'a str>) -> Option<std::borrow::Cow<'a, str>> {
    let header = |n: HeaderName| headers.get(n).and_then(|v| v.to_str().ok());
    let bearer = header(header::AUTHORIZATION).and_then(|v| v.strip_prefix("Bearer "));
    let named = bearer.or_else(|| header(name::X_API_KEY)).or_else(|| header(name::X_GOOG_API_KEY));
    if let Some(token) = named {
        return Some(std::borrow::Cow::Borrowed(token.trim()));
    }
    url::form_urlencoded::parse(query?.as_bytes()).find(|(k, _)| k == "key").map(|(_, v)| v)
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

/// Takes one request from the per-client rate (the client at `peer` with
/// the user agent in `headers`); the refusal, in `protocol`, when it is
/// spent. Every request the front admits passes here, and so does a
/// replay sent from the admin API (`admin::replay`), on behalf of the
/// address that asked for it: a replay is a proxied request like any other.
pub(crate) fn within_rate(
    gw: &Gateway,
    server: &ServerConfig,
    peer: IpAddr,
    headers: &HeaderMap,
    protocol: Protocol,
) -> Result<(), Box<Response>> {
    let agent = headers.get(header::USER_AGENT).map(HeaderValue::as_bytes);
    if gw.client_rates().admit(peer, agent, server.rate_limit_per_minute) {
        return Ok(());
    }
    let message = format!(
        "more than {} requests a minute from this client ({peer} and its user agent)",
        server.rate_limit_per_minute
    );
    let mut r = ApiError::new(protocol, ErrorCode::RateLimited, message).into_response();
    r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    Err(Box::new(r))
}

/// Checks a request (`peer`: the client's address, for the per-address
/// rate). A refusal, or a preflight's answer, is the response to send.
pub fn admit<B>(
    gw: &Gateway,
    request: &mut axum::http::Request<B>,
    peer: Option<SocketAddr>,
) -> Result<Admitted, Box<Response>> {
    // Credentials never reach a log or a trace.
    for name in crate::ground::headers::CREDENTIALS {
        if let Some(v) = request.headers_mut().get_mut(name) {
            v.set_sensitive(true);
        }
    }
    let path = request.uri().path();
    let protocol = protocol_of(path);
    let refuse = |code: ErrorCode, message: String| ApiError::new(protocol, code, message).into_response();
    let live = gw.live();
    let server = &live.config.server;

    let host = checked_host(server, request).map_err(|why| Box::new(refuse(ErrorCode::HostNotAllowed, why)))?;
    if header_bytes(request.headers()) > server.max_header_bytes {
        return Err(Box::new(refuse(
            ErrorCode::HeadersTooLarge,
            format!("request headers exceed {} bytes", server.max_header_bytes),
        )));
    }
    let origin = request.headers().get(header::ORIGIN).cloned();
    if let Some(o) = &origin {
        let text = o.to_str().unwrap_or("");
        if !origin_allowed(server, gw.trusted_origins(), text, host.as_deref(), path) {
            let hint = if is_proxy_path(path) {
                "add it to [server] allowed_origins if you trust it"
            } else {
                "only the gateway's own dashboard may call the admin API"
            };
            return Err(Box::new(refuse(
                ErrorCode::OriginNotAllowed,
                format!("browser origin {text:?} may not call {path}: {hint}"),
            )));
        }
        if request.method() == Method::OPTIONS {
            return Err(Box::new(preflight(request.headers(), o)));
        }
    } else if is_foreign_fetch(request.headers()) {
        return Err(Box::new(refuse(
            ErrorCode::CrossSiteRequest,
            "a browser request on behalf of another site (Sec-Fetch-Site, no Origin) may not call this gateway".into(),
        )));
    }
    if let Some(peer) = peer {
        within_rate(gw, server, peer.ip(), request.headers(), protocol)?;
    }
    if is_proxy_path(path) {
        if let Some(expected) = gw.access_token() {
            // A member's key is checked by the proxy, against the members
            // it reads from the history (see crate::members::gate).
            let ok = client_token(request.headers(), request.uri().query()).is_some_and(|t| {
                constant_time_eq(t.as_bytes(), expected.expose_secret().as_bytes())
                    || t.starts_with(crate::members::KEY_PREFIX)
            });
            if !ok {
                return Err(Box::new(refuse(
                    ErrorCode::InvalidAccessToken,
                    "this gateway requires its local access token as the API key (Authorization: Bearer, x-api-key, x-goog-api-key or ?key=)"
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
        let name = |h: &str| host_name(h).unwrap();
        assert_eq!(name("LOCALHOST:4141"), "localhost");
        assert_eq!(name("127.0.0.1"), "127.0.0.1");
        assert_eq!(name("[::1]:4141"), "::1");
        assert_eq!(name("[::1]"), "::1");
        assert_eq!(name("evil.example:80"), "evil.example");
    }

    #[test]
    fn odd_hosts_have_no_name() {
        for odd in ["[::1].evil.com", "[::1]evil", "[::1]:x", "[evil.com]", "user@localhost", "::1", "", ":4141", "a b"]
        {
            assert_eq!(host_name(odd), None, "{odd:?}");
        }
    }

    #[test]
    fn tokens_from_every_place_a_client_puts_its_key() {
        let token = |h: &HeaderMap, q: Option<&str>| client_token(h, q).map(|t| t.into_owned());
        let mut h = HeaderMap::new();
        assert_eq!(token(&h, Some("alt=sse&key=sy-0")).as_deref(), Some("sy-0"));
        h.insert("x-goog-api-key", HeaderValue::from_static("sy-g"));
        assert_eq!(token(&h, Some("key=sy-0")).as_deref(), Some("sy-g"));
        h.insert("x-api-key", HeaderValue::from_static("sy-1"));
        assert_eq!(token(&h, None).as_deref(), Some("sy-1"));
        h.insert("authorization", HeaderValue::from_static("Bearer sy-2"));
        assert_eq!(token(&h, None).as_deref(), Some("sy-2"));
    }
}
