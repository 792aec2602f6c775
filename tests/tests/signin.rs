//! With `[server] access_token = true` the gateway may answer the network:
//! `/metrics` then takes the access token (as Prometheus sends it), and the
//! dashboard goes only to a signed-in browser, everyone else getting a
//! server-rendered sign-in page with no figures and no app. Also the
//! session header the desktop window signs in with, and what a session may
//! not do.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use reqwest::header;
use serde_json::Value;
use switchyard_sim::{Script, SimProvider};
use switchyard_tests::{cookie_of, http, keys_for, no_redirects, ConfigText, TestGateway, ACCESS_TOKEN, ADMIN_TOKEN};

/// The app's script tag, which only the dashboard's own page carries.
const APP_SCRIPT: &str = "<script type=\"module\"";

async fn gateway(access_token: bool) -> (SimProvider, TestGateway) {
    let sim = SimProvider::start("alpha", Script::ok()).await.unwrap();
    let server = if access_token { "[server]\naccess_token = true" } else { "" };
    let config = ConfigText::new().raw(server).provider(&sim, "openai", &["m"]);
    let gw = TestGateway::start(config.build(), keys_for(&["alpha"])).await;
    (sim, gw)
}

/// A session cookie from a one-time ticket, as `switchyard open` gets one.
async fn ticket_cookie(gw: &TestGateway) -> String {
    let client = no_redirects();
    let ticket: Value =
        client.post(gw.url("/admin/session")).bearer_auth(ADMIN_TOKEN).send().await.unwrap().json().await.unwrap();
    let r = client.get(gw.url(ticket["path"].as_str().unwrap())).send().await.unwrap();
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()[header::LOCATION], "/ui/");
    cookie_of(&r)
}

/// Asserts a response is the sign-in page: a form posting to `/ui/login`,
/// a strict policy, and nothing of the app.
async fn assert_sign_in_page(r: reqwest::Response) -> String {
    assert_eq!(r.status(), 401);
    let csp = r.headers()[header::CONTENT_SECURITY_POLICY].to_str().unwrap().to_string();
    assert!(csp.contains("default-src 'none'") && csp.contains("form-action 'self'"), "{csp}");
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    let page = r.text().await.unwrap();
    assert!(page.contains("<form method=\"post\" action=\"/ui/login\""), "{page}");
    assert!(!page.contains("<script"), "no script on the sign-in page: {page}");
    assert!(!page.contains("assets/"), "no app bundle on the sign-in page: {page}");
    page
}

/// The path of the app's script, from the page a signed-in browser gets.
fn script_path(page: &str) -> String {
    let at = page.find("src=\"./assets/").expect("the app page names its script");
    let rest = &page[at + "src=\"./".len()..];
    format!("/ui/{}", &rest[..rest.find('"').unwrap()])
}

#[tokio::test]
async fn metrics_need_the_access_token_when_it_is_required() {
    let (_sim, gw) = gateway(true).await;
    let bare = http().get(gw.url("/metrics")).send().await.unwrap();
    assert_eq!(bare.status(), 401);
    let body: Value = bare.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_access_token", "{body}");
    assert_eq!(body["error"]["type"], "authentication_error", "{body}");

    let wrong = http().get(gw.url("/metrics")).bearer_auth("sy-guess").send().await.unwrap();
    assert_eq!(wrong.status(), 401);

    let scraped = http().get(gw.url("/metrics")).bearer_auth(ACCESS_TOKEN).send().await.unwrap();
    assert_eq!(scraped.status(), 200);
    assert!(scraped.text().await.unwrap().contains("switchyard_provider_enabled"), "the series are there");

    // The admin token and a dashboard session see more than this already.
    let admin = http().get(gw.url("/metrics")).bearer_auth(ADMIN_TOKEN).send().await.unwrap();
    assert_eq!(admin.status(), 200);
    let cookie = ticket_cookie(&gw).await;
    let session = http().get(gw.url("/metrics")).header(header::COOKIE, &cookie).send().await.unwrap();
    assert_eq!(session.status(), 200);
}

#[tokio::test]
async fn without_the_access_token_metrics_and_the_dashboard_stay_open_on_loopback() {
    let (_sim, gw) = gateway(false).await;
    assert_eq!(http().get(gw.url("/metrics")).send().await.unwrap().status(), 200);
    let page = http().get(gw.url("/ui/")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains(APP_SCRIPT), "the app, whose own login view signs in");
}

#[tokio::test]
async fn the_dashboard_without_a_session_is_the_sign_in_page_and_a_ticket_opens_it() {
    let (_sim, gw) = gateway(true).await;
    assert_sign_in_page(http().get(gw.url("/ui/")).send().await.unwrap()).await;
    let forged = http().get(gw.url("/ui/")).header(header::COOKIE, "switchyard_session_1=nope").send().await.unwrap();
    assert_sign_in_page(forged).await;

    // The link `switchyard open` opens still signs in.
    let cookie = ticket_cookie(&gw).await;
    let app = http().get(gw.url("/ui/")).header(header::COOKIE, &cookie).send().await.unwrap();
    assert_eq!(app.status(), 200);
    let page = app.text().await.unwrap();
    assert!(page.contains(APP_SCRIPT), "{page}");

    // The app's assets are gated the same way.
    let script = script_path(&page);
    assert_sign_in_page(http().get(gw.url(&script)).send().await.unwrap()).await;
    let served = http().get(gw.url(&script)).header(header::COOKIE, &cookie).send().await.unwrap();
    assert_eq!(served.status(), 200);
    assert!(served.headers()[header::CONTENT_TYPE].to_str().unwrap().starts_with("text/javascript"));

    // A spent ticket lands on the sign-in page, which says why.
    let client = no_redirects();
    let ticket: Value =
        client.post(gw.url("/admin/session")).bearer_auth(ADMIN_TOKEN).send().await.unwrap().json().await.unwrap();
    let path = ticket["path"].as_str().unwrap();
    client.get(gw.url(path)).send().await.unwrap();
    let again = client.get(gw.url(path)).send().await.unwrap();
    assert!(again.headers().get(header::SET_COOKIE).is_none());
    let to = again.headers()[header::LOCATION].to_str().unwrap().to_string();
    assert_eq!(to, "/ui/?expired=1");
    let page = assert_sign_in_page(http().get(gw.url(&to)).send().await.unwrap()).await;
    assert!(page.contains("expired"), "{page}");
}

#[tokio::test]
async fn the_sign_in_form_takes_the_admin_token_and_refuses_others() {
    let (_sim, gw) = gateway(true).await;
    let client = no_redirects();
    let origin = format!("http://{}", gw.addr);
    let form =
        |token: &str| client.post(gw.url("/ui/login")).header(header::ORIGIN, &origin).form(&[("token", token)]).send();
    let wrong = form("guess").await.unwrap();
    assert!(wrong.headers().get(header::SET_COOKIE).is_none(), "no session for a wrong token");
    let page = assert_sign_in_page(wrong).await;
    assert!(page.contains("not this gateway"), "{page}");

    let right = form(ADMIN_TOKEN).await.unwrap();
    assert_eq!(right.status(), 303);
    assert_eq!(right.headers()[header::LOCATION], "/ui/");
    let cookie = cookie_of(&right);
    let app = http().get(gw.url("/ui/")).header(header::COOKIE, &cookie).send().await.unwrap();
    assert_eq!(app.status(), 200);
    assert!(app.text().await.unwrap().contains(APP_SCRIPT));

    // The app's own login view still posts JSON.
    let json = client.post(gw.url("/ui/login")).json(&serde_json::json!({ "token": "guess" })).send().await.unwrap();
    assert_eq!(json.status(), 401);
    let body: Value = json.json().await.unwrap();
    assert_eq!(body["error"]["code"], "admin_token_invalid");

    // Another site cannot post the form.
    let foreign = client
        .post(gw.url("/ui/login"))
        .header(header::ORIGIN, "http://evil.example")
        .form(&[("token", ADMIN_TOKEN)])
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), 403);
    assert!(foreign.headers().get(header::SET_COOKIE).is_none());
}

#[tokio::test]
async fn a_session_in_its_header_reaches_the_admin_api_but_mints_no_tickets() {
    let (_sim, gw) = gateway(false).await;
    let id = gw.gateway.sessions().login();
    let with = |r: reqwest::RequestBuilder| r.header("x-switchyard-session", &id);

    let providers = with(http().get(gw.url("/admin/providers"))).send().await.unwrap();
    assert_eq!(providers.status(), 200);
    let guessed = http().get(gw.url("/admin/providers")).header("x-switchyard-session", "0123").send().await.unwrap();
    assert_eq!(guessed.status(), 401);

    // A session may do what the dashboard does; a sign-in link needs the admin token.
    let minted = with(http().post(gw.url("/admin/session"))).send().await.unwrap();
    assert_eq!(minted.status(), 401);
    let body: Value = minted.json().await.unwrap();
    assert_eq!(body["error"]["code"], "admin_token_required");

    // Signing out revokes it.
    assert_eq!(with(http().post(gw.url("/ui/logout"))).send().await.unwrap().status(), 204);
    assert_eq!(with(http().get(gw.url("/admin/providers"))).send().await.unwrap().status(), 401);
}
