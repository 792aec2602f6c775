//! The dashboard at `/ui/`: the built `ui/` app, embedded at compile time,
//! and the login that turns a ticket or the admin token into a session cookie.
//!
//! With `[server] access_token = true` the gateway may answer the network,
//! and the app shows models, tokens and spend: its pages and assets then go
//! only to a request with a live session, and anyone else gets the
//! server-rendered sign-in page ([`signin`]). On loopback without the access
//! token the app is served to all and signs in with its own login view.

mod signin;

use axum::extract::{FromRequest, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Form, Json, Router};
use secrecy::ExposeSecret;
use serde::Deserialize;

use crate::admin::base::{admin_token_sent, AdminError};
use crate::gateway::sessions::{cookie, cookie_name, SESSION_HEADER, SESSION_IDLE_SECS};
use crate::gateway::Gateway;
use crate::ground::compare::constant_time_eq;
use signin::Notice;

mod assets {
    include!(concat!(env!("OUT_DIR"), "/ui_assets.rs"));
}

/// Pages may load only their own scripts and styles and talk only to this gateway.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; \
                   connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/// Served when the binary was built before the dashboard was.
const NOT_BUILT: &str = "<!doctype html><meta charset=utf-8><title>Switchyard</title>\
<p>This build of Switchyard has no dashboard: build it with <code>npm --prefix ui ci &amp;&amp; npm --prefix ui run build</code>, \
then rebuild the binary. The admin API at <code>/admin/</code> works without it.</p>";

pub fn routes() -> Router<Gateway> {
    Router::new()
        .route("/ui", get(|| async { Redirect::permanent("/ui/") }))
        .route("/ui/", get(index))
        .route("/ui/login", get(redeem_ticket).post(login))
        .route("/ui/logout", post(logout))
        .route("/ui/{*path}", get(asset))
}

fn find(path: &str) -> Option<&'static [u8]> {
    assets::ASSETS.iter().find(|(name, _)| *name == path).map(|(_, bytes)| *bytes)
}

fn content_type(path: &str) -> &'static str {
    match path.rsplit('.').next().unwrap_or("") {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "json" | "map" => "application/json",
        "woff2" => "font/woff2",
        _ => "application/octet-stream",
    }
}

fn page(path: &str, bytes: &'static [u8]) -> Response {
    // Hashed asset names never change content; the page itself always revalidates.
    let cache = if path.starts_with("assets/") { "public, max-age=31536000, immutable" } else { "no-cache" };
    guarded(StatusCode::OK, (content_type(path), cache), CSP, bytes)
}

/// A dashboard response of this type and caching under `csp`, with the
/// headers that keep a browser from sniffing it, framing it or sending it
/// as a referrer.
fn guarded(status: StatusCode, (kind, cache): (&str, &str), csp: &str, body: impl IntoResponse) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, kind),
            (header::CACHE_CONTROL, cache),
            (header::CONTENT_SECURITY_POLICY, csp),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
            (header::X_FRAME_OPTIONS, "DENY"),
        ],
        body,
    )
        .into_response()
}

/// Whether the dashboard is closed to this request: the access token is
/// required and the request has no session.
fn closed(gw: &Gateway, headers: &HeaderMap) -> bool {
    gw.access_token().is_some() && !has_session(gw, headers)
}

async fn index(State(gw): State<Gateway>, headers: HeaderMap, uri: Uri) -> Response {
    if closed(&gw, &headers) {
        let expired = uri.query().is_some_and(|q| q.split('&').any(|pair| pair == "expired=1"));
        return signin::page(if expired { Notice::Expired } else { Notice::None });
    }
    match find("index.html") {
        Some(bytes) => page("index.html", bytes),
        None => page("index.html", NOT_BUILT.as_bytes()),
    }
}

async fn asset(
    State(gw): State<Gateway>,
    headers: HeaderMap,
    axum::extract::Path(path): axum::extract::Path<String>,
) -> Response {
    if closed(&gw, &headers) {
        return signin::page(Notice::None);
    }
    match find(&path) {
        Some(bytes) => page(&path, bytes),
        None => (StatusCode::NOT_FOUND, "no such dashboard file").into_response(),
    }
}

/// The port the browser used, which names the session cookie.
fn port(gw: &Gateway, headers: &HeaderMap) -> u16 {
    headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .and_then(|h| h.rsplit_once(':'))
        .and_then(|(_, p)| p.parse().ok())
        .unwrap_or_else(|| gw.live().config.server.listen.port())
}

fn set_cookie(name: &str, value: &str, max_age: u64) -> HeaderValue {
    let text = format!("{name}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}");
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

#[derive(Debug, Deserialize)]
struct Ticket {
    ticket: String,
}

/// `GET /ui/login?ticket=…`: the link `switchyard open` opens. The ticket
/// is spent here and the redirect leaves no secret in the address bar.
async fn redeem_ticket(State(gw): State<Gateway>, headers: HeaderMap, Query(q): Query<Ticket>) -> Response {
    let Some(session) = gw.sessions().redeem(&q.ticket) else {
        // The sign-in page reads the query; the app's own login view, the fragment.
        let to = if gw.access_token().is_some() { "/ui/?expired=1" } else { "/ui/#/login?expired=1" };
        return Redirect::to(to).into_response();
    };
    let mut response = Redirect::to("/ui/").into_response();
    let cookie = set_cookie(&cookie_name(port(&gw, &headers)), &session, SESSION_IDLE_SECS);
    response.headers_mut().insert(header::SET_COOKIE, cookie);
    response
}

#[derive(Debug, Deserialize)]
struct Login {
    token: String,
}

/// Whether a login came from the server-rendered sign-in form (a
/// urlencoded body) rather than the app (JSON).
fn from_form(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().to_ascii_lowercase().starts_with("application/x-www-form-urlencoded"))
}

/// `POST /ui/login` with the admin token: `{"token": "…"}` from the app's
/// login view (204 with the cookie), or `token=…` from the sign-in page
/// (a redirect to `/ui/` with the cookie, or the page again).
async fn login(State(gw): State<Gateway>, request: Request) -> Response {
    let form = from_form(request.headers());
    let name = cookie_name(port(&gw, request.headers()));
    let token = if form {
        Form::<Login>::from_request(request, &()).await.map(|f| f.0.token).map_err(IntoResponse::into_response)
    } else {
        Json::<Login>::from_request(request, &()).await.map(|j| j.0.token).map_err(IntoResponse::into_response)
    };
    let token = match token {
        Ok(t) => t,
        Err(rejection) => return rejection,
    };
    let Some(expected) = gw.admin_token() else {
        if form {
            return signin::page(Notice::AdminDisabled);
        }
        return AdminError::admin_disabled().into_response();
    };
    if !constant_time_eq(token.trim().as_bytes(), expected.expose_secret().as_bytes()) {
        if form {
            return signin::page(Notice::WrongToken);
        }
        return AdminError::unauthorized(
            "admin_token_invalid",
            "that is not this gateway's admin token (it is in <data-dir>/admin-token)",
        )
        .into_response();
    }
    let session = gw.sessions().login();
    let mut response = if form { Redirect::to("/ui/").into_response() } else { StatusCode::NO_CONTENT.into_response() };
    response.headers_mut().insert(header::SET_COOKIE, set_cookie(&name, &session, SESSION_IDLE_SECS));
    response
}

/// `POST /ui/logout`: ends the session the request carries, by cookie or header.
async fn logout(State(gw): State<Gateway>, headers: HeaderMap) -> Response {
    let name = cookie_name(port(&gw, &headers));
    for id in session_cookie(&headers, &name).into_iter().chain(session_header(&headers)) {
        gw.sessions().logout(id);
    }
    let mut response = StatusCode::NO_CONTENT.into_response();
    response.headers_mut().insert(header::SET_COOKIE, set_cookie(&name, "", 0));
    response
}

fn session_cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get_all(header::COOKIE).iter().filter_map(|v| v.to_str().ok()).find_map(|h| cookie(h, name))
}

/// The session id sent in [`SESSION_HEADER`] (the desktop window's way).
fn session_header(headers: &HeaderMap) -> Option<&str> {
    headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()).map(str::trim).filter(|id| !id.is_empty())
}

/// Whether the request carries a live dashboard session, as the cookie or
/// in the session header.
pub fn has_session(gw: &Gateway, headers: &HeaderMap) -> bool {
    let cookie = session_cookie(headers, &cookie_name(port(gw, headers)));
    cookie.into_iter().chain(session_header(headers)).any(|id| gw.sessions().check(id))
}

/// `POST /admin/session` (admin token): a one-time login link for a browser.
/// A session may do what the dashboard does, which is not this: it takes
/// the admin token itself, so a session cannot outlive its own revocation
/// by minting others.
pub async fn new_ticket(State(gw): State<Gateway>, headers: HeaderMap) -> Result<Json<serde_json::Value>, AdminError> {
    if !admin_token_sent(&gw, &headers) {
        return Err(AdminError::unauthorized(
            "admin_token_required",
            "a sign-in link needs the admin token as `Authorization: Bearer <token>`, not a dashboard session",
        ));
    }
    let ticket = gw.sessions().ticket();
    Ok(Json(serde_json::json!({ "ticket": ticket, "path": format!("/ui/login?ticket={ticket}") })))
}
