//! The server loop itself: what happens to open connections when whoever
//! runs it stops waiting.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use switchyard_core::secrets::MemoryStore;
use switchyard_core::{Config, Gateway};
use switchyard_tests::{http, ADMIN_TOKEN};

#[tokio::test]
async fn dropping_the_server_cuts_connections_still_open() {
    let config = Config::parse("", std::path::Path::new("t.toml")).unwrap();
    let gateway = Gateway::builder(config, Arc::new(MemoryStore::new()))
        .admin_token(secrecy::SecretString::from(ADMIN_TOKEN.to_string()))
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(switchyard_core::serve(listener, gateway, std::future::pending()));

    // An event stream never ends by itself: only the server can end it.
    let events = http().get(format!("http://{addr}/admin/events")).bearer_auth(ADMIN_TOKEN).send().await.unwrap();
    assert_eq!(events.status(), 200);
    let mut body = events.bytes_stream();
    assert!(body.next().await.is_some(), "the snapshot arrives");

    server.abort();
    let ended =
        tokio::time::timeout(Duration::from_secs(5), async { while let Some(Ok(_)) = body.next().await {} }).await;
    assert!(ended.is_ok(), "the stream ended when the server was dropped");
    assert!(tokio::net::TcpStream::connect(addr).await.is_err(), "nothing listens any more");
}
