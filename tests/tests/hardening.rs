//! The local endpoint under attack: odd hosts, foreign browser fetches,
//! silent and slow clients, and origins that ask for more than the proxy.
//! Every refusal here costs no upstream call.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Empty};
use serde_json::Value;
use switchyard_sim::{Script, SimProvider};
use switchyard_tests::{http, keys_for, ConfigText, TestGateway, ADMIN_TOKEN};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn gateway(server: &str) -> (SimProvider, TestGateway) {
    let p = SimProvider::start("p", Script::ok()).await.unwrap();
    let config = ConfigText::new().raw(server).provider(&p, "openai", &["m"]);
    let gw = TestGateway::start(config.build(), keys_for(&["p"])).await;
    (p, gw)
}

/// Sends raw bytes and returns what came back, up to the connection's close.
async fn raw(gw: &TestGateway, request: &[u8]) -> String {
    let mut s = TcpStream::connect(gw.addr).await.unwrap();
    s.write_all(request).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).to_string()
}

fn status_of(response: &str) -> u16 {
    response.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
}

const CHAT: &str = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;

fn chat_with_headers(headers: &[&[u8]]) -> Vec<u8> {
    let mut r = b"POST /v1/chat/completions HTTP/1.1\r\n".to_vec();
    for h in headers {
        r.extend_from_slice(h);
        r.extend_from_slice(b"\r\n");
    }
    r.extend_from_slice(
        format!("content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{CHAT}", CHAT.len())
            .as_bytes(),
    );
    r
}

#[tokio::test]
async fn odd_hosts_fail_closed() {
    let (p, gw) = gateway("").await;
    let cases: [(&str, Vec<&[u8]>); 5] = [
        ("no Host at all", vec![]),
        ("two Host headers", vec![b"host: 127.0.0.1", b"host: evil.example"]),
        ("a Host that is not text", vec![b"host: \xffevil"]),
        ("a bracketed loopback followed by a name", vec![b"host: [::1].evil.com"]),
        ("an absolute target naming another host", vec![]),
    ];
    for (what, headers) in cases {
        let request = if what.starts_with("an absolute") {
            let mut r = chat_with_headers(&[b"host: 127.0.0.1"]);
            let at = r.iter().position(|b| *b == b'/').unwrap();
            r.splice(at..at, b"http://evil.example".iter().copied());
            r
        } else {
            chat_with_headers(&headers)
        };
        let response = raw(&gw, &request).await;
        assert!(matches!(status_of(&response), 400 | 403), "{what}: {response}");
        if status_of(&response) == 403 {
            assert!(response.contains("host_not_allowed"), "{what}: {response}");
        }
    }
    let ok = raw(&gw, &chat_with_headers(&[b"host: [::1]:4141"])).await;
    assert_eq!(status_of(&ok), 200, "{ok}");
    assert_eq!(p.calls(), 1, "no refused request reached the provider");
}

/// An HTTP/2 request (prior knowledge) whose `:authority` is `authority`.
async fn h2_status(gw: &TestGateway, authority: &str) -> u16 {
    let stream = TcpStream::connect(gw.addr).await.unwrap();
    let io = hyper_util::rt::TokioIo::new(stream);
    let (mut send, conn) =
        hyper::client::conn::http2::handshake(hyper_util::rt::TokioExecutor::new(), io).await.unwrap();
    tokio::spawn(conn);
    let request =
        hyper::Request::get(format!("http://{authority}/v1/models")).body(Empty::<bytes::Bytes>::new()).unwrap();
    let response = send.send_request(request).await.unwrap();
    let status = response.status().as_u16();
    let _ = response.into_body().collect().await;
    status
}

#[tokio::test]
async fn http2_authority_is_checked_like_host() {
    let (_p, gw) = gateway("").await;
    assert_eq!(h2_status(&gw, "evil.example").await, 403);
    assert_eq!(h2_status(&gw, "[::1].evil.com:80").await, 403);
    assert_eq!(h2_status(&gw, &gw.addr.to_string()).await, 200);
}

#[tokio::test]
async fn a_foreign_page_cannot_spend_the_rate_limit() {
    let (p, gw) = gateway("[server]\nrate_limit_per_minute = 2").await;
    // An <img> or <script> tag on another site: no Origin, Sec-Fetch-Site: cross-site.
    for site in ["cross-site", "same-site", "cross-site"] {
        let r = http()
            .post(gw.url("/v1/chat/completions"))
            .header("sec-fetch-site", site)
            .header("content-type", "application/json")
            .body(CHAT)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 403, "{site}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["error"]["code"], "cross_site_request");
        let models = http().get(gw.url("/v1/models")).header("sec-fetch-site", site).send().await.unwrap();
        assert_eq!(models.status(), 403, "every route, {site}");
    }
    // The refusals spent none of the budget: a tool still has both requests.
    for _ in 0..2 {
        assert_eq!(gw.post("/v1/chat/completions", &serde_json::from_str(CHAT).unwrap()).await.status(), 200);
    }
    // A user's own navigation (Sec-Fetch-Site: none) and same-origin calls pass.
    let own = http().get(gw.url("/healthz")).header("sec-fetch-site", "none").header("user-agent", "browser").send();
    assert_eq!(own.await.unwrap().status(), 200);
    assert_eq!(p.calls(), 2);
}

#[tokio::test]
async fn one_runaway_tool_does_not_starve_another() {
    let (_p, gw) = gateway("[server]\nrate_limit_per_minute = 3").await;
    let get = |agent: &'static str| http().get(gw.url("/v1/models")).header("user-agent", agent).send();
    for _ in 0..3 {
        assert_eq!(get("runaway-script/1.0").await.unwrap().status(), 200);
    }
    assert_eq!(get("runaway-script/1.0").await.unwrap().status(), 429, "the script spent its own bucket");
    assert_eq!(get("editor/2.0").await.unwrap().status(), 200, "the editor has its own");
}

#[tokio::test]
async fn allowed_origins_open_the_proxy_only() {
    let (_p, gw) = gateway("[server]\nallowed_origins = [\"http://localhost:5173\"]").await;
    let origin = "http://localhost:5173";
    let proxy = http().get(gw.url("/v1/models")).header("origin", origin).send().await.unwrap();
    assert_eq!(proxy.status(), 200);
    for path in ["/admin/providers", "/admin/requests", "/metrics", "/ui/"] {
        let r = http().get(gw.url(path)).header("origin", origin).bearer_auth(ADMIN_TOKEN).send().await.unwrap();
        assert_eq!(r.status(), 403, "{path}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["error"]["code"], "origin_not_allowed", "{path}");
    }
    let preflight = http()
        .request(reqwest::Method::OPTIONS, gw.url("/admin/config/settings"))
        .header("origin", origin)
        .header("access-control-request-method", "PATCH")
        .send()
        .await
        .unwrap();
    assert_eq!(preflight.status(), 403, "no preflight grants the admin API either");
}

/// Whether the gateway closes a connection that sent `bytes` and then
/// nothing, within `within`.
async fn closed_within(gw: &TestGateway, bytes: &[u8], within: Duration) -> bool {
    let mut s = TcpStream::connect(gw.addr).await.unwrap();
    s.write_all(bytes).await.unwrap();
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout(within, s.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0) | Err(_)) => return true,
            // An HTTP/2 server's SETTINGS frame, or a 408: keep reading until the close.
            Ok(Ok(_)) => continue,
        }
    }
}

#[tokio::test]
async fn silent_connections_are_closed_and_free_their_slots() {
    let (_p, gw) = gateway("[server]\nmax_connections = 2\nheader_timeout = \"300ms\"").await;
    let started = Instant::now();
    let (silent, preface) = tokio::join!(
        closed_within(&gw, b"", Duration::from_secs(5)),
        closed_within(&gw, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", Duration::from_secs(5)),
    );
    assert!(silent, "a socket that sends nothing is closed");
    assert!(preface, "an HTTP/2 preface and then nothing is closed");
    assert!(started.elapsed() < Duration::from_secs(3), "closed after header_timeout, not later");
    // Both slots are free again: a real client is served.
    let r = http().get(gw.url("/healthz")).send().await.unwrap();
    assert_eq!(r.status(), 200);
}

#[tokio::test]
async fn slow_bodies_time_out_on_every_route_that_reads_one() {
    let (_p, gw) = gateway("[server]\nbody_timeout = \"300ms\"").await;
    let token = format!("authorization: Bearer {ADMIN_TOKEN}");
    let routes: [(&str, &str, Option<&str>); 4] = [
        ("POST", "/ui/login", None),
        ("PUT", "/admin/config/providers/p", Some(&token)),
        ("PATCH", "/admin/config/settings", Some(&token)),
        ("PUT", "/admin/keys/p/main", Some(&token)),
    ];
    for (method, path, auth) in routes {
        let mut s = TcpStream::connect(gw.addr).await.unwrap();
        let auth = auth.map(|a| format!("{a}\r\n")).unwrap_or_default();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nhost: 127.0.0.1\r\n{auth}content-type: application/json\r\ncontent-length: 100\r\n\r\n{{\"tok"
        );
        s.write_all(head.as_bytes()).await.unwrap();
        let mut out = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), async {
            let mut buf = [0u8; 4096];
            while !String::from_utf8_lossy(&out).contains("\r\n\r\n") {
                match s.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => out.extend_from_slice(&buf[..n]),
                }
            }
        })
        .await;
        assert!(read.is_ok(), "{method} {path}: no answer while the body stalls");
        let text = String::from_utf8_lossy(&out);
        assert_eq!(status_of(&text), 408, "{method} {path}: {text}");
    }
}
