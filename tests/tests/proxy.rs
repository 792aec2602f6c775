//! The gateway end to end: every endpoint, streamed and not, against
//! simulated providers on real sockets.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::{json, Value};
use switchyard_sim::{Fault, Script, SimProvider};
use switchyard_tests::{http, keys_for, ConfigText, TestGateway};

async fn sim(name: &str, script: Script) -> SimProvider {
    SimProvider::start(name, script).await.unwrap()
}

/// One OpenAI-kind and one Anthropic-kind provider, keys for both.
async fn pair() -> (SimProvider, SimProvider, TestGateway) {
    let oa = sim("oa", Script::ok()).await;
    let an = sim("an", Script::ok()).await;
    let config = ConfigText::new().provider(&oa, "openai", &["gpt-test", "embed-test", "alias=real-model"]).provider(
        &an,
        "anthropic",
        &["claude-test"],
    );
    let gw = TestGateway::start(config.build(), keys_for(&["oa", "an"])).await;
    (oa, an, gw)
}

fn body_for(path: &str, model: &str, stream: bool) -> Value {
    match path {
        "/v1/chat/completions" => {
            json!({ "model": model, "stream": stream, "messages": [{ "role": "user", "content": "hi" }] })
        }
        "/v1/completions" => json!({ "model": model, "stream": stream, "prompt": "hi" }),
        "/v1/embeddings" => json!({ "model": model, "input": ["a", "b"] }),
        "/v1/responses" => json!({ "model": model, "stream": stream, "input": "hi" }),
        "/v1/messages" => {
            json!({ "model": model, "stream": stream, "max_tokens": 16, "messages": [{ "role": "user", "content": "hi" }] })
        }
        "/v1/messages/count_tokens" => {
            json!({ "model": model, "messages": [{ "role": "user", "content": "hi" }] })
        }
        other => panic!("no body for {other}"),
    }
}

#[tokio::test]
async fn every_endpoint_streamed_and_not_is_byte_identical_to_the_provider() {
    let cases = [
        ("/v1/chat/completions", "gpt-test", "openai", true),
        ("/v1/completions", "gpt-test", "openai", true),
        ("/v1/embeddings", "embed-test", "openai", false),
        ("/v1/responses", "gpt-test", "openai", true),
        ("/v1/messages", "claude-test", "anthropic", true),
        ("/v1/messages/count_tokens", "claude-test", "anthropic", false),
    ];
    for (path, model, kind, streams) in cases {
        for stream in [false, true].into_iter().filter(|s| !s | streams) {
            // Two providers of the same name answer the same call identically:
            // one behind the gateway, one called directly.
            let behind = sim("p", Script::ok()).await;
            let direct = sim("p", Script::ok()).await;
            let config = ConfigText::new().provider(&behind, kind, &[model]);
            let gw = TestGateway::start(config.build(), keys_for(&["p"])).await;
            let body = body_for(path, model, stream);

            let via = http().post(gw.url(path)).json(&body).send().await.unwrap();
            assert_eq!(via.status(), 200, "{path} stream={stream}");
            assert_eq!(via.headers()["x-switchyard-provider"], "p");
            if stream {
                assert!(via.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
                assert_eq!(via.headers()["cache-control"], "no-cache");
                assert_eq!(via.headers()["x-accel-buffering"], "no");
            }
            // An answer that has arrived whole goes out whole, with its length.
            let length = via.headers().get("content-length").map(|v| v.to_str().unwrap().parse::<usize>().unwrap());
            let via = via.bytes().await.unwrap();
            if !stream {
                assert_eq!(length, Some(via.len()), "{path}");
            }
            let straight =
                http().post(format!("{}{}", direct.base_url(), &path[3..])).json(&body).send().await.unwrap();
            let straight = straight.bytes().await.unwrap();
            assert_eq!(via, straight, "{path} stream={stream}");
            assert_eq!(behind.calls(), 1);
        }
    }
}

#[tokio::test]
async fn provider_key_replaces_client_credentials_in_each_protocol() {
    let (oa, an, gw) = pair().await;
    let r = http()
        .post(gw.url("/v1/chat/completions"))
        .bearer_auth("sk-client-openai")
        .header("x-stainless-lang", "python")
        .header("connection", "keep-alive")
        .json(&body_for("/v1/chat/completions", "gpt-test", false))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let seen = &oa.requests()[0];
    assert_eq!(seen.headers["authorization"], "Bearer sk-oa");
    assert!(!seen.headers.contains_key("x-api-key"));
    assert_eq!(seen.headers["x-stainless-lang"], "python");

    // Claude Code style: x-api-key; the anthropic SDK 2.x style: Bearer.
    for (name, value) in [("x-api-key", "sk-client"), ("authorization", "Bearer sk-client")] {
        let r = http()
            .post(gw.url("/v1/messages?beta=true"))
            .header(name, value)
            .header("anthropic-version", "2023-06-01")
            .header("anthropic-beta", "prompt-caching-2024-07-31")
            .json(&body_for("/v1/messages", "claude-test", false))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    for seen in an.requests() {
        assert_eq!(seen.headers["x-api-key"], "sk-an");
        assert!(!seen.headers.contains_key("authorization"));
        assert_eq!(seen.headers["anthropic-version"], "2023-06-01");
        assert_eq!(seen.headers["anthropic-beta"], "prompt-caching-2024-07-31");
        assert_eq!(seen.query.as_deref(), Some("beta=true"));
    }
}

#[tokio::test]
async fn bodies_pass_untouched_except_an_aliased_model() {
    let (oa, _an, gw) = pair().await;
    let raw = "{\"model\":  \"alias\", \"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,iVBORw0KGgo=\"}}]}],\n \"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{}}}], \"x_unknown\": 1.50e2 }";
    let r = http()
        .post(gw.url("/v1/chat/completions"))
        .header("content-type", "application/json")
        .body(raw)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let sent = String::from_utf8(oa.requests()[0].body.to_vec()).unwrap();
    assert_eq!(sent, raw.replace("\"alias\"", "\"real-model\""));
}

#[tokio::test]
async fn ids_are_returned_and_correlation_is_forwarded() {
    let (oa, _an, gw) = pair().await;
    let body = body_for("/v1/chat/completions", "gpt-test", false);
    let first = gw.post("/v1/chat/completions", &body).await;
    let second = gw.post("/v1/chat/completions", &body).await;
    let id = |r: &reqwest::Response, h: &str| r.headers()[h].to_str().unwrap().to_string();
    let (a, b) = (id(&first, "x-request-id"), id(&second, "x-request-id"));
    assert_eq!(a.len(), 36);
    assert!(a < b, "ids are time-ordered");
    assert_eq!(id(&first, "x-correlation-id"), a);
    assert_eq!(oa.requests()[0].headers["x-correlation-id"].to_str().unwrap(), a);

    let third =
        http().post(gw.url("/v1/chat/completions")).header("x-request-id", "trace-7").json(&body).send().await.unwrap();
    assert_eq!(id(&third, "x-correlation-id"), "trace-7");
    assert_ne!(id(&third, "x-request-id"), "trace-7");
    assert_eq!(oa.requests()[2].headers["x-correlation-id"], "trace-7");
}

#[tokio::test]
async fn server_error_and_refused_connection_fall_through_the_chain() {
    let down = sim("down", Script::always(Fault::status(503))).await;
    let backup = sim("backup", Script::ok()).await;
    let gone = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/v1", listener.local_addr().unwrap())
    };
    let config = ConfigText::new()
        .raw("[policy]\nmax_retries = 0")
        .provider_at("gone", &gone, "openai", &["m"])
        // Not probed: a probe could find it unreachable first, and the
        // chain would pass over it without the refused connection.
        .raw("probe = false")
        .provider(&down, "openai", &["m"])
        .provider(&backup, "openai", &["m"]);
    let gw = TestGateway::start(config.build(), keys_for(&["gone", "down", "backup"])).await;
    let r = gw.post("/v1/chat/completions", &body_for("/v1/chat/completions", "m", false)).await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["x-switchyard-provider"], "backup");
    assert_eq!(r.headers()["x-switchyard-attempts"], "3");
    assert_eq!((down.calls(), backup.calls()), (1, 1));
}

#[tokio::test]
async fn client_errors_from_a_provider_are_relayed_not_retried() {
    let picky = sim("picky", Script::always(Fault::status(422))).await;
    let backup = sim("backup", Script::ok()).await;
    let config = ConfigText::new().provider(&picky, "openai", &["m"]).provider(&backup, "openai", &["m"]);
    let gw = TestGateway::start(config.build(), keys_for(&["picky", "backup"])).await;
    let r = gw.post("/v1/chat/completions", &body_for("/v1/chat/completions", "m", false)).await;
    assert_eq!(r.status(), 422);
    assert_eq!(r.headers()["x-switchyard-provider"], "picky");
    assert_eq!(backup.calls(), 0);
}

#[tokio::test]
async fn exhausted_chain_is_a_protocol_error_that_says_do_not_retry() {
    let a = sim("a", Script::always(Fault::status(500))).await;
    let b = sim("b", Script::always(Fault::status(529))).await;
    let config = ConfigText::new().raw("[policy]\nmax_retries = 0").provider(&a, "anthropic", &["c"]).provider(
        &b,
        "anthropic",
        &["c"],
    );
    let gw = TestGateway::start(config.build(), keys_for(&["a", "b"])).await;
    let r = gw.post("/v1/messages", &body_for("/v1/messages", "c", true)).await;
    assert_eq!(r.status(), 502);
    assert_eq!(r.headers()["x-should-retry"], "false");
    assert_eq!(r.headers()["x-switchyard-attempts"], "2");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["code"], "all_providers_failed");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("a: HTTP 500") && message.contains("b: HTTP 529"), "{message}");
}

#[tokio::test]
async fn bad_input_gets_protocol_shaped_errors_and_no_upstream_call() {
    let oa = sim("oa", Script::ok()).await;
    let an = sim("an", Script::ok()).await;
    let config = ConfigText::new()
        .provider(&oa, "openai", &["gpt-test"])
        .provider(&an, "anthropic", &["claude-test"])
        .raw("[server]\nmax_body_bytes = 4096");
    let gw = TestGateway::start(config.build(), keys_for(&["oa", "an"])).await;
    let post = |path: &str, body: String| {
        http().post(gw.url(path)).header("content-type", "application/json").body(body).send()
    };

    let r = post("/v1/chat/completions", "{\"model\": \"gpt-test\",".into()).await.unwrap();
    assert_eq!(r.status(), 400);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "invalid_json");
    assert_eq!(v["error"]["type"], "invalid_request_error");

    let r = post("/v1/messages", "not json".into()).await.unwrap();
    assert_eq!(r.status(), 400);
    let v: Value = r.json().await.unwrap();
    assert_eq!((v["type"].as_str(), v["error"]["type"].as_str()), (Some("error"), Some("invalid_request_error")));

    let r = post("/v1/chat/completions", json!({ "model": "nope-model", "messages": [] }).to_string()).await.unwrap();
    assert_eq!(r.status(), 404);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "model_not_found");
    assert!(v["error"]["message"].as_str().unwrap().contains("nope-model"));

    let big = json!({ "model": "gpt-test", "messages": [{ "role": "user", "content": "x".repeat(5000) }] }).to_string();
    let r = post("/v1/chat/completions", big.clone()).await.unwrap();
    assert_eq!(r.status(), 413);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "body_too_large");
    // Chunked, so the limit is enforced while reading, not from Content-Length.
    let chunks = futures_util::stream::iter(
        big.into_bytes().chunks(512).map(|c| Ok::<_, std::io::Error>(c.to_vec())).collect::<Vec<_>>(),
    );
    let r = http().post(gw.url("/v1/messages")).body(reqwest::Body::wrap_stream(chunks)).send().await.unwrap();
    assert_eq!(r.status(), 413);
    assert_eq!(r.json::<Value>().await.unwrap()["error"]["type"], "request_too_large");

    let r = http().get(gw.url("/v2/whatever")).send().await.unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(r.json::<Value>().await.unwrap()["error"]["code"], "not_found");

    let r = http().get(gw.url("/v1/chat/completions")).send().await.unwrap();
    assert_eq!(r.status(), 405);

    assert_eq!(oa.calls() + an.calls(), 0);
}

#[tokio::test]
async fn provider_without_a_key_is_skipped_with_the_reason() {
    let keyed = sim("keyed", Script::ok()).await;
    let bare = sim("bare", Script::ok()).await;
    let config = ConfigText::new().provider(&bare, "openai", &["m", "only-bare"]).provider(&keyed, "openai", &["m"]);
    let gw = TestGateway::start(config.build(), keys_for(&["keyed"])).await;
    let r = gw.post("/v1/chat/completions", &body_for("/v1/chat/completions", "m", false)).await;
    assert_eq!(r.headers()["x-switchyard-provider"], "keyed");
    let r = gw.post("/v1/chat/completions", &body_for("/v1/chat/completions", "only-bare", false)).await;
    assert_eq!(r.status(), 503);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "no_provider_available");
    assert!(v["error"]["message"].as_str().unwrap().contains("no key for bare"), "{v}");
    assert_eq!(bare.calls(), 0);
}

#[tokio::test]
async fn models_health_and_root() {
    let (_oa, _an, gw) = pair().await;
    let v: Value = http().get(gw.url("/v1/models")).send().await.unwrap().json().await.unwrap();
    assert_eq!(v["object"], "list");
    let ids: Vec<&str> = v["data"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    // Every model of every enabled provider: the Anthropic one is served to
    // an OpenAI client too, translated.
    assert_eq!(ids, ["gpt-test", "embed-test", "alias", "claude-test"]);

    let v: Value = http()
        .get(gw.url("/v1/models"))
        .header("anthropic-version", "2023-06-01")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> = v["data"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["gpt-test", "embed-test", "alias", "claude-test"]);
    assert_eq!(v["data"][0]["type"], "model");
    assert_eq!((v["has_more"].as_bool(), v["first_id"].as_str()), (Some(false), Some("gpt-test")));

    let r = http().get(gw.url("/v1/models/gpt-test")).send().await.unwrap();
    assert_eq!(r.json::<Value>().await.unwrap()["owned_by"], "oa");
    assert_eq!(http().get(gw.url("/v1/models/none")).send().await.unwrap().status(), 404);

    assert_eq!(http().get(gw.url("/healthz")).send().await.unwrap().status(), 200);
    assert_eq!(http().head(gw.url("/")).send().await.unwrap().status(), 200);
}

#[tokio::test]
async fn client_leaving_mid_stream_drops_the_upstream_at_once() {
    let slow = sim("slow", Script::ok().stream(10_000, Duration::from_millis(5))).await;
    let config = ConfigText::new().provider(&slow, "openai", &["m"]);
    let gw = TestGateway::start(config.build(), keys_for(&["slow"])).await;
    let r = gw.post("/v1/chat/completions", &body_for("/v1/chat/completions", "m", true)).await;
    let mut stream = r.bytes_stream();
    for _ in 0..3 {
        stream.next().await.unwrap().unwrap();
    }
    drop(stream);
    let left = Instant::now();
    assert!(
        slow.wait_for_disconnects(1, Duration::from_millis(100)).await,
        "provider kept streaming after the client left"
    );
    assert!(left.elapsed() < Duration::from_millis(100));
}

#[tokio::test]
async fn client_leaving_before_the_answer_drops_the_upstream() {
    let hung = sim("hung", Script::always(Fault::Hang)).await;
    let config = ConfigText::new().provider(&hung, "anthropic", &["c"]);
    let gw = TestGateway::start(config.build(), keys_for(&["hung"])).await;
    let request = http().post(gw.url("/v1/messages")).json(&body_for("/v1/messages", "c", false)).send();
    // The client gives up after 50 ms.
    assert!(tokio::time::timeout(Duration::from_millis(50), request).await.is_err());
    assert!(hung.wait_for_disconnects(1, Duration::from_millis(500)).await, "upstream request outlived the client");
}
