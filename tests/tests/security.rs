//! The local endpoint lets no one else in: each refusal is protocol-shaped
//! and costs no upstream call.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{Read, Write};
use std::time::Duration;

use serde_json::{json, Value};
use switchyard_sim::{Fault, Script, SimProvider};
use switchyard_tests::{http, keys_for, ConfigText, TestGateway, ACCESS_TOKEN, ADMIN_TOKEN};

async fn one(extra: &str) -> (SimProvider, TestGateway) {
    let p = SimProvider::start("p", Script::ok()).await.unwrap();
    let config = ConfigText::new().raw(extra).both_kinds(&p, &["m"], &["c"]);
    let gw = TestGateway::start(config.build(), keys_for(&["p", "p-an"])).await;
    (p, gw)
}

fn chat() -> Value {
    json!({ "model": "m", "messages": [{ "role": "user", "content": "hi" }] })
}

fn messages() -> Value {
    json!({ "model": "c", "max_tokens": 8, "messages": [{ "role": "user", "content": "hi" }] })
}

async fn error_of(r: reqwest::Response) -> (u16, Value) {
    (r.status().as_u16(), r.json().await.unwrap())
}

#[tokio::test]
async fn a_foreign_host_is_refused_dns_rebinding_gets_nowhere() {
    let (p, gw) = one("[server]\nallowed_hosts = [\"switchyard.test\"]").await;
    let (status, body) = error_of(
        http()
            .post(gw.url("/v1/chat/completions"))
            .header("host", "evil.example:4141")
            .json(&chat())
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 403);
    assert_eq!(body["error"]["code"], "host_not_allowed");
    let (status, body) = error_of(
        http().post(gw.url("/v1/messages")).header("host", "attacker.example").json(&messages()).send().await.unwrap(),
    )
    .await;
    assert_eq!((status, body["error"]["type"].as_str()), (403, Some("permission_error")));
    assert_eq!(p.calls(), 0);
    for host in ["localhost:4141", "127.0.0.1", "[::1]:9", "switchyard.test:4141", "app.localhost"] {
        let r = http().post(gw.url("/v1/chat/completions")).header("host", host).json(&chat()).send().await.unwrap();
        assert_eq!(r.status(), 200, "{host}");
    }
}

#[tokio::test]
async fn browser_origins_are_refused_unless_allowed_and_preflights_follow_suit() {
    let (p, gw) = one("[server]\nallowed_origins = [\"http://localhost:5173\"]").await;
    let (status, body) = error_of(
        http()
            .post(gw.url("/v1/chat/completions"))
            .header("origin", "https://evil.example")
            .json(&chat())
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, body["error"]["code"].as_str()), (403, Some("origin_not_allowed")));
    let pre = http()
        .request(reqwest::Method::OPTIONS, gw.url("/v1/chat/completions"))
        .header("origin", "https://evil.example")
        .header("access-control-request-method", "POST")
        .send()
        .await
        .unwrap();
    assert_eq!(pre.status(), 403);
    assert!(!pre.headers().contains_key("access-control-allow-origin"));
    assert_eq!(p.calls(), 0);

    let pre = http()
        .request(reqwest::Method::OPTIONS, gw.url("/v1/chat/completions"))
        .header("origin", "http://localhost:5173")
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "content-type, authorization")
        .send()
        .await
        .unwrap();
    assert_eq!(pre.status(), 204);
    assert_eq!(pre.headers()["access-control-allow-origin"], "http://localhost:5173");
    assert_eq!(pre.headers()["access-control-allow-headers"], "content-type, authorization");
    assert_eq!(p.calls(), 0, "a preflight never reaches a provider");
    let r = http()
        .post(gw.url("/v1/chat/completions"))
        .header("origin", "http://localhost:5173")
        .json(&chat())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["access-control-allow-origin"], "http://localhost:5173");

    // The gateway's own pages (same origin) may use the admin API; others may not.
    let own = format!("http://{}", gw.addr);
    let r = http().get(gw.url("/admin/requests")).header("origin", &own).bearer_auth(ADMIN_TOKEN).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let r = http()
        .get(gw.url("/admin/requests"))
        .header("origin", "http://localhost:3000")
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
}

#[tokio::test]
async fn the_local_access_token_goes_where_the_api_key_goes() {
    let (p, gw) = one("[server]\naccess_token = true").await;
    let (status, body) = error_of(gw.post("/v1/chat/completions", &chat()).await).await;
    assert_eq!((status, body["error"]["code"].as_str()), (401, Some("invalid_access_token")));
    let (status, body) = error_of(
        http().post(gw.url("/v1/messages")).header("x-api-key", "sk-wrong").json(&messages()).send().await.unwrap(),
    )
    .await;
    assert_eq!((status, body["error"]["type"].as_str()), (401, Some("authentication_error")));
    assert_eq!(p.calls(), 0);

    let r = http().post(gw.url("/v1/chat/completions")).bearer_auth(ACCESS_TOKEN).json(&chat()).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let r =
        http().post(gw.url("/v1/messages")).header("x-api-key", ACCESS_TOKEN).json(&messages()).send().await.unwrap();
    assert_eq!(r.status(), 200);
    for seen in p.requests() {
        let sent = format!("{:?}", seen.headers);
        assert!(!sent.contains(ACCESS_TOKEN), "the access token was forwarded");
    }
    assert_eq!(http().get(gw.url("/healthz")).send().await.unwrap().status(), 200, "health needs no token");

    // Gemini's paths are proxy paths too, and its clients put the key in
    // x-goog-api-key or ?key=: no token, no entry, in Gemini's error shape.
    let gemini = json!({ "contents": [{ "role": "user", "parts": [{ "text": "hi" }] }] });
    let path = "/v1beta/models/m:generateContent";
    let (status, body) = error_of(http().post(gw.url(path)).json(&gemini).send().await.unwrap()).await;
    assert_eq!((status, body["error"]["status"].as_str()), (401, Some("UNAUTHENTICATED")), "{body}");
    let (status, _) =
        error_of(http().post(gw.url(&format!("{path}?key=sk-wrong"))).json(&gemini).send().await.unwrap()).await;
    assert_eq!(status, 401);
    for passed in [
        http().post(gw.url(&format!("{path}?key={ACCESS_TOKEN}"))).json(&gemini),
        http().post(gw.url(path)).header("x-goog-api-key", ACCESS_TOKEN).json(&gemini),
    ] {
        let (status, body) = error_of(passed.send().await.unwrap()).await;
        assert_ne!(status, 401, "the token was accepted: {body}");
    }
    assert_eq!(http().get(gw.url("/v1beta/models")).send().await.unwrap().status(), 401);
}

#[tokio::test]
async fn oversized_headers_and_slow_bodies_are_refused_before_any_upstream_call() {
    let (p, gw) = one("[server]\nmax_header_bytes = 2048\nbody_timeout = \"200ms\"").await;
    let (status, body) = error_of(
        http()
            .post(gw.url("/v1/chat/completions"))
            .header("x-padding", "a".repeat(4000))
            .json(&chat())
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, body["error"]["code"].as_str()), (431, Some("headers_too_large")));

    // A body that starts and then stalls.
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(1);
    tx.send(Ok(b"{\"model\":\"m\",".to_vec())).await.unwrap();
    let stream = tokio_stream_from(rx);
    let r = http().post(gw.url("/v1/chat/completions")).body(reqwest::Body::wrap_stream(stream)).send().await.unwrap();
    let (status, body) = error_of(r).await;
    assert_eq!((status, body["error"]["code"].as_str()), (408, Some("body_timeout")));
    drop(tx);
    assert_eq!(p.calls(), 0);
}

fn tokio_stream_from(
    mut rx: tokio::sync::mpsc::Receiver<Result<Vec<u8>, std::io::Error>>,
) -> impl futures_util::Stream<Item = Result<Vec<u8>, std::io::Error>> {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

#[tokio::test]
async fn a_slow_request_head_is_cut_off() {
    let (p, gw) = one("[server]\nheader_timeout = \"200ms\"").await;
    let addr = gw.addr;
    let outcome = tokio::task::spawn_blocking(move || {
        let mut conn = std::net::TcpStream::connect(addr).unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        conn.write_all(b"POST /v1/chat/completions HTTP/1.1\r\nhost: localhost\r\n").unwrap();
        let started = std::time::Instant::now();
        let mut buf = [0u8; 512];
        let n = conn.read(&mut buf).unwrap_or(0);
        (started.elapsed(), String::from_utf8_lossy(&buf[..n]).to_string())
    })
    .await
    .unwrap();
    assert!(outcome.0 < Duration::from_secs(2), "the half-sent head was held open for {:?}", outcome.0);
    assert!(outcome.1.is_empty() || outcome.1.starts_with("HTTP/1.1 408"), "{}", outcome.1);
    assert_eq!(p.calls(), 0);
}

#[tokio::test]
async fn one_address_gets_its_rate_and_no_more() {
    let (p, gw) = one("[server]\nrate_limit_per_minute = 3").await;
    for _ in 0..3 {
        assert_eq!(gw.post("/v1/chat/completions", &chat()).await.status(), 200);
    }
    let r = gw.post("/v1/chat/completions", &chat()).await;
    assert_eq!(r.headers()["retry-after"], "1");
    let (status, body) = error_of(r).await;
    assert_eq!((status, body["error"]["code"].as_str()), (429, Some("rate_limited")));
    assert_eq!(p.calls(), 3);
}

#[tokio::test]
async fn connections_past_the_cap_are_closed_at_once() {
    let (_p, gw) = one("[server]\nmax_connections = 2").await;
    let addr = gw.addr;
    let closed = tokio::task::spawn_blocking(move || {
        let _a = std::net::TcpStream::connect(addr).unwrap();
        let _b = std::net::TcpStream::connect(addr).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let _ = c.write_all(b"GET /healthz HTTP/1.1\r\nhost: localhost\r\n\r\n");
        let mut buf = [0u8; 64];
        matches!(c.read(&mut buf), Ok(0) | Err(_))
    })
    .await
    .unwrap();
    assert!(closed, "a third connection was served");
    // Once the two are gone, connections are served again.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(http().get(gw.url("/healthz")).send().await.unwrap().status(), 200);
}

#[tokio::test]
async fn a_refused_key_is_revoked_and_the_next_key_serves() {
    let p = SimProvider::start("p", Script::ok().then_once(Fault::status(401))).await.unwrap();
    let config = ConfigText::new().provider(&p, "openai", &["m"]);
    let keys = switchyard_core::secrets::MemoryStore::new().with("p", "first", "sk-first-1111").with(
        "p",
        "second",
        "sk-second-2222",
    );
    let gw = TestGateway::start(config.build(), keys).await;
    let r = gw.post("/v1/chat/completions", &chat()).await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["x-switchyard-attempts"], "2");
    let sent: Vec<String> =
        p.requests().iter().map(|r| r.headers["authorization"].to_str().unwrap().to_string()).collect();
    assert_eq!(sent, ["Bearer sk-first-1111", "Bearer sk-second-2222"]);
    // The pool's next key is no retry: both attempts are the request's first at `p`.
    let id = r.headers()["x-request-id"].to_str().unwrap().to_string();
    gw.recorded(1).await;
    let detail = gw.admin(&format!("/admin/requests/{id}")).await;
    let tries: Vec<(&str, &str)> = detail["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["key_label"].as_str().unwrap(), a["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(tries, [("first", "first"), ("second", "first")]);
    let keys = gw.admin("/admin/keys").await;
    let pool = &keys.as_array().unwrap().iter().find(|k| k["provider"] == "p").unwrap()["keys"];
    assert_eq!(pool[0]["status"], "revoked");
    assert_eq!(pool[0]["last4"], "1111");
    assert_eq!(pool[1]["status"], "ok");
    // Revoked stays revoked: every later request uses the second key.
    gw.post("/v1/chat/completions", &chat()).await;
    assert_eq!(p.requests()[2].headers["authorization"], "Bearer sk-second-2222");
}

#[tokio::test]
async fn a_rate_limited_key_cools_down_while_the_others_serve() {
    let limited = Fault::status_with(429, &[("retry-after", "30")]);
    let p = SimProvider::start("p", Script::ok().then_once(limited)).await.unwrap();
    let config = ConfigText::new().provider(&p, "openai", &["m"]);
    let keys = switchyard_core::secrets::MemoryStore::new().with("p", "a", "sk-aaaa").with("p", "b", "sk-bbbb");
    let gw = TestGateway::start(config.build(), keys).await;
    for _ in 0..3 {
        assert_eq!(gw.post("/v1/chat/completions", &chat()).await.status(), 200);
    }
    let sent: Vec<String> =
        p.requests().iter().map(|r| r.headers["authorization"].to_str().unwrap().to_string()).collect();
    // a → 429 (cooling 30 s); the retry and every later request use b.
    assert_eq!(sent, ["Bearer sk-aaaa", "Bearer sk-bbbb", "Bearer sk-bbbb", "Bearer sk-bbbb"]);
    let keys = gw.admin("/admin/keys").await;
    assert_eq!(keys[0]["keys"][0]["status"], "cooling");
}

#[tokio::test]
async fn keys_set_through_the_admin_api_are_write_only() {
    let p = SimProvider::start("p", Script::ok()).await.unwrap();
    let gw = TestGateway::start(ConfigText::new().provider(&p, "openai", &["m"]).build(), keys_for(&[])).await;
    assert_eq!(gw.post("/v1/chat/completions", &chat()).await.status(), 503);
    let r = http()
        .put(gw.url("/admin/keys/p/work"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({ "key": "sk-admin-set-9876" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(gw.post("/v1/chat/completions", &chat()).await.status(), 200);
    assert_eq!(p.requests()[0].headers["authorization"], "Bearer sk-admin-set-9876");
    let listed = gw.admin("/admin/keys").await.to_string();
    assert!(listed.contains("\"last4\":\"9876\"") && !listed.contains("sk-admin-set"), "{listed}");
    let r = http().delete(gw.url("/admin/keys/p/work")).bearer_auth(ADMIN_TOKEN).send().await.unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(gw.post("/v1/chat/completions", &chat()).await.status(), 503);
    let r = http().put(gw.url("/admin/keys/p/work")).json(&json!({ "key": "x" })).send().await.unwrap();
    assert_eq!(r.status(), 401, "the admin token is required");
}
