//! The dashboard's server side against a real gateway: the embedded pages,
//! sign-in by ticket and by token, and config edits through the admin API.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use reqwest::header;
use serde_json::{json, Value};
use switchyard_sim::{Script, SimProvider};
use switchyard_tests::{cookie_of, http, keys_for, no_redirects, ConfigText, TestGateway, ADMIN_TOKEN};

async fn gateway() -> (SimProvider, TestGateway) {
    let sim = SimProvider::start("alpha", Script::ok()).await.unwrap();
    let config = ConfigText::new().raw("# hand-written: keep me").provider(&sim, "openai", &["m"]);
    let gw = TestGateway::start(config.build(), keys_for(&["alpha"])).await;
    (sim, gw)
}

#[tokio::test]
async fn the_dashboard_page_is_served_with_a_strict_policy() {
    let (_sim, gw) = gateway().await;
    let r = http().get(gw.url("/ui/")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let csp = r.headers()[header::CONTENT_SECURITY_POLICY].to_str().unwrap().to_string();
    assert!(csp.contains("connect-src 'self'") && csp.contains("frame-ancestors 'none'"), "{csp}");
    assert!(r.headers()[header::CONTENT_TYPE].to_str().unwrap().starts_with("text/html"));
    let page = r.text().await.unwrap();
    assert!(page.contains("Switchyard"), "{page}");
    let missing = http().get(gw.url("/ui/assets/nope.js")).send().await.unwrap();
    assert_eq!(missing.status(), 404);
}

#[tokio::test]
async fn a_ticket_signs_in_once_and_leaves_no_secret_in_the_address() {
    let (_sim, gw) = gateway().await;
    let client = no_redirects();
    let refused = client.get(gw.url("/admin/providers")).send().await.unwrap();
    assert_eq!(refused.status(), 401);

    let ticket: Value =
        client.post(gw.url("/admin/session")).bearer_auth(ADMIN_TOKEN).send().await.unwrap().json().await.unwrap();
    let path = ticket["path"].as_str().unwrap();
    let r = client.get(gw.url(path)).send().await.unwrap();
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()[header::LOCATION], "/ui/", "the redirect drops the ticket");
    let cookie = cookie_of(&r);
    assert!(!cookie.contains(ticket["ticket"].as_str().unwrap()), "the session is not the ticket");

    let admitted = client.get(gw.url("/admin/providers")).header(header::COOKIE, &cookie).send().await.unwrap();
    assert_eq!(admitted.status(), 200);

    let again = client.get(gw.url(path)).send().await.unwrap();
    assert_eq!(again.status(), 303);
    assert!(again.headers().get(header::SET_COOKIE).is_none(), "a ticket works once");
    assert!(again.headers()[header::LOCATION].to_str().unwrap().contains("expired"));

    let out = client.post(gw.url("/ui/logout")).header(header::COOKIE, &cookie).send().await.unwrap();
    assert_eq!(out.status(), 204);
    let after = client.get(gw.url("/admin/providers")).header(header::COOKIE, &cookie).send().await.unwrap();
    assert_eq!(after.status(), 401);
}

#[tokio::test]
async fn the_login_form_takes_the_admin_token_and_refuses_others() {
    let (_sim, gw) = gateway().await;
    let client = no_redirects();
    let wrong = client.post(gw.url("/ui/login")).json(&json!({ "token": "guess" })).send().await.unwrap();
    assert_eq!(wrong.status(), 401);
    assert!(wrong.headers().get(header::SET_COOKIE).is_none());
    let body: Value = wrong.json().await.unwrap();
    assert_eq!(body["error"]["code"], "admin_token_invalid");

    let right = client.post(gw.url("/ui/login")).json(&json!({ "token": ADMIN_TOKEN })).send().await.unwrap();
    assert_eq!(right.status(), 204);
    let cookie = cookie_of(&right);
    let admitted = client.get(gw.url("/admin/config")).header(header::COOKIE, &cookie).send().await.unwrap();
    assert_eq!(admitted.status(), 200);

    // A page on another origin cannot ride the session.
    let foreign = client
        .post(gw.url("/admin/providers/alpha/disable"))
        .header(header::COOKIE, &cookie)
        .header(header::ORIGIN, "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), 403);
    assert!(gw.gateway.live().provider("alpha").unwrap().is_enabled());
}

async fn admin_send(gw: &TestGateway, method: reqwest::Method, path: &str, body: Value) -> (u16, Value) {
    let r = http().request(method, gw.url(path)).bearer_auth(ADMIN_TOKEN).json(&body).send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn providers_routes_and_settings_are_edited_in_the_file_and_put_in_force() {
    let (sim, gw) = gateway().await;
    let form = json!({
        "kind": "anthropic", "base_url": sim.base_url(),
        "models": [{ "client": "fast", "upstream": "claude-haiku-4-5" }], "auth": "none",
    });
    let (status, view) = admin_send(&gw, reqwest::Method::PUT, "/admin/config/providers/beta", form).await;
    assert_eq!(status, 200, "{view}");
    assert!(view["providers"].as_array().unwrap().iter().any(|p| p["name"] == "beta" && p["auth"] == "none"));
    assert!(gw.gateway.live().provider("beta").is_some(), "in force without a restart");

    let (status, view) =
        admin_send(&gw, reqwest::Method::PUT, "/admin/config/routes/m", json!({ "chain": ["alpha", "beta"] })).await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["routes"][0]["chain"], json!(["alpha", "beta"]));

    let settings = json!({ "policy": { "deadline": "45s", "max_retries": 2 }, "history": { "retention": "7days" } });
    let (status, view) = admin_send(&gw, reqwest::Method::PATCH, "/admin/config/settings", settings).await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["settings"]["policy"]["deadline"], "45s");
    assert_eq!(view["settings"]["policy"]["max_retries"], 2);

    let text = std::fs::read_to_string(gw.config_file()).unwrap();
    assert!(text.contains("# hand-written: keep me"), "comments survive:\n{text}");
    assert!(text.contains("fast = \"claude-haiku-4-5\""), "{text}");

    // A route naming an unknown provider is refused and the file is untouched.
    let (status, err) =
        admin_send(&gw, reqwest::Method::PUT, "/admin/config/routes/m", json!({ "chain": ["nobody"] })).await;
    assert_eq!(status, 422);
    assert_eq!(err["error"]["code"], "config_invalid");
    assert!(err["error"]["message"].as_str().unwrap().contains("nobody"), "{err}");
    assert_eq!(std::fs::read_to_string(gw.config_file()).unwrap(), text);

    let (status, err) =
        admin_send(&gw, reqwest::Method::PATCH, "/admin/config/settings", json!({ "policy": { "deadline": "soon" } }))
            .await;
    assert_eq!(status, 422);
    assert!(err["error"]["message"].as_str().unwrap().contains("policy.deadline"), "{err}");

    let (status, _) = admin_send(&gw, reqwest::Method::DELETE, "/admin/config/routes/m", Value::Null).await;
    assert_eq!(status, 200);
    let (status, _) = admin_send(&gw, reqwest::Method::DELETE, "/admin/config/providers/beta", Value::Null).await;
    assert_eq!(status, 200);
    assert!(gw.gateway.live().provider("beta").is_none());
    let (status, err) = admin_send(&gw, reqwest::Method::DELETE, "/admin/config/providers/beta", Value::Null).await;
    assert_eq!((status, err["error"]["code"].as_str()), (404, Some("provider_not_found")));
}

#[tokio::test]
async fn spend_has_minute_buckets_for_sparklines() {
    let (_sim, gw) = gateway().await;
    let body = json!({ "model": "m", "messages": [{ "role": "user", "content": "hi" }] });
    assert_eq!(gw.post("/v1/chat/completions", &body).await.status(), 200);
    gw.recorded(1).await;
    let spend = gw.admin("/admin/spend?bucket=minute&since=1h").await;
    let bucket = spend["rows"][0]["bucket"].as_str().unwrap();
    assert_eq!(bucket.len(), "2026-01-01T00:00Z".len(), "{bucket}");
    assert_eq!(spend["rows"][0]["requests"], 1);
}

#[tokio::test]
async fn a_test_request_from_the_dashboard_goes_through_the_gateway_and_needs_the_admin_token() {
    let (sim, gw) = gateway().await;
    let refused = http().post(gw.url("/admin/try")).json(&json!({})).send().await.unwrap();
    assert_eq!(refused.status(), 401, "no token, no session: refused");
    assert_eq!(sim.calls(), 0, "a refused test request reaches no provider");

    let (status, tried) = admin_send(&gw, reqwest::Method::POST, "/admin/try", json!({})).await;
    assert_eq!(status, 200, "{tried}");
    assert_eq!((tried["model"].as_str(), tried["status"].as_u64()), (Some("m"), Some(200)), "{tried}");
    assert!(tried["answer"].as_str().is_some_and(|a| !a.is_empty()), "{tried}");
    // On record like any request: its attempts are the timeline the dashboard shows.
    let id = tried["request_id"].as_str().unwrap();
    let detail = gw.admin(&format!("/admin/requests/{id}")).await;
    let attempts = detail["attempts"].as_array().unwrap();
    assert_eq!((attempts.len(), attempts[0]["provider"].as_str()), (1, Some("alpha")), "{detail}");
    assert_eq!(sim.calls(), 1);
}
