//! The dashboard at `/ui/`: the built `ui/` app, embedded at compile time,
//! and the login that turns a ticket or the admin token into a session cookie.

use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use secrecy::ExposeSecret;
use serde::Deserialize;

use crate::admin::AdminError;
use crate::gateway::Gateway;
use crate::guard::constant_time_eq;
use crate::session::{cookie, cookie_name, SESSION_IDLE_SECS};

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
    (
        [
            (header::CONTENT_TYPE, content_type(path)),
            (header::CACHE_CONTROL, cache),
            (header::CONTENT_SECURITY_POLICY, CSP),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
            (header::X_FRAME_OPTIONS, "DENY"),
        ],
        bytes,
    )
        .into_response()
}

async fn index() -> Response {
    match find("index.html") {
        Some(bytes) => page("index.html", bytes),
        None => page("index.html", NOT_BUILT.as_bytes()),
    }
}

async fn asset(axum::extract::Path(path): axum::extract::Path<String>) -> Response {
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
        return Redirect::to("/ui/#/login?expired=1").into_response();
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

/// `POST /ui/login` with `{"token": "<admin token>"}`: the login form.
async fn login(State(gw): State<Gateway>, headers: HeaderMap, Json(body): Json<Login>) -> Result<Response, AdminError> {
    let Some(expected) = gw.admin_token() else {
        return Err(AdminError::not_found("admin_disabled", "the admin API is not enabled on this gateway"));
    };
    if !constant_time_eq(body.token.trim().as_bytes(), expected.expose_secret().as_bytes()) {
        return Err(AdminError::unauthorized(
            "admin_token_invalid",
            "that is not this gateway's admin token (it is in <data-dir>/admin-token)",
        ));
    }
    let session = gw.sessions().login();
    let mut response = StatusCode::NO_CONTENT.into_response();
    let cookie = set_cookie(&cookie_name(port(&gw, &headers)), &session, SESSION_IDLE_SECS);
    response.headers_mut().insert(header::SET_COOKIE, cookie);
    Ok(response)
}

async fn logout(State(gw): State<Gateway>, headers: HeaderMap) -> Response {
    let name = cookie_name(port(&gw, &headers));
    if let Some(id) = session_cookie(&headers, &name) {
        gw.sessions().logout(id);
    }
    let mut response = StatusCode::NO_CONTENT.into_response();
    response.headers_mut().insert(header::SET_COOKIE, set_cookie(&name, "", 0));
    response
}

fn session_cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get_all(header::COOKIE).iter().filter_map(|v| v.to_str().ok()).find_map(|h| cookie(h, name))
}

/// Whether the request carries a live dashboard session.
pub fn has_session(gw: &Gateway, headers: &HeaderMap) -> bool {
    session_cookie(headers, &cookie_name(port(gw, headers))).is_some_and(|id| gw.sessions().check(id))
}

/// `POST /admin/session` (admin token): a one-time login link for a browser.
pub async fn new_ticket(State(gw): State<Gateway>) -> Json<serde_json::Value> {
    let ticket = gw.sessions().ticket();
    Json(serde_json::json!({ "ticket": ticket, "path": format!("/ui/login?ticket={ticket}") }))
}
