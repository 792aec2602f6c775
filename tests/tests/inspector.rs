//! The request inspector end to end: what a client sent, what went
//! upstream (byte for byte what the provider received) and every change
//! named with its reason; a stream's events with their times; replays
//! linked to their original; the bug report free of secrets; and
//! `redact_outgoing` keeping a pasted key from leaving.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use serde_json::{json, Value};
use switchyard_core::secrets::MemoryStore;
use switchyard_sim::{Fault, Script, SimProvider};
use switchyard_tests::{http, request_id, ConfigText, TestGateway, ACCESS_TOKEN, ADMIN_TOKEN};

const STORE: &str = "[history]\nstore_bodies = true\nbody_limit = 65536\n";
const CHAT_KEY: &str = "sk-chat-provider-7d3a9e1f4b2c8a6e";
const OTHER_KEY: &str = "sk-other-provider-2b8e4f7a1d9c3e5b";

fn keys() -> MemoryStore {
    MemoryStore::new().with("chat", "main", CHAT_KEY).with("other", "main", OTHER_KEY)
}

/// A Messages request for `model`, with fields Chat has no place for.
fn messages(model: &str, stream: bool) -> Value {
    json!({
        "model": model,
        "max_tokens": 64,
        "stream": stream,
        "top_k": 5,
        "system": "be brief",
        "messages": [{ "role": "user", "content": "hi" }],
    })
}

async fn send_messages(gw: &TestGateway, body: &Value) -> reqwest::Response {
    http()
        .post(gw.url("/v1/messages"))
        .header("x-api-key", ACCESS_TOKEN)
        .header("anthropic-version", "2023-06-01")
        .json(body)
        .send()
        .await
        .unwrap()
}

async fn bodies(gw: &TestGateway, id: &str) -> Value {
    gw.recorded(1).await;
    gw.admin(&format!("/admin/requests/{id}/bodies")).await
}

#[tokio::test]
async fn a_translated_request_is_captured_as_the_provider_received_it_with_each_change_named() {
    let chat = SimProvider::start("chat", Script::ok()).await.unwrap();
    let config = ConfigText::new().raw(STORE).chat_only(&chat, &["claude-fast=gpt-4o-mini"]);
    let gw = TestGateway::start(config.build(), keys()).await;
    let r = send_messages(&gw, &messages("claude-fast", false)).await;
    let id = request_id(&r);
    assert_eq!(r.status(), 200);
    let answer = r.text().await.unwrap();

    let b = bodies(&gw, &id).await;
    let captured = &b["captured"];
    assert_eq!(captured["client"]["path"], "/v1/messages");
    let client_body: Value = serde_json::from_str(captured["client"]["body"]["text"].as_str().unwrap()).unwrap();
    assert_eq!(client_body, messages("claude-fast", false));
    let upstream = &captured["attempts"][0]["request"];
    let received = &chat.requests()[0];
    assert_eq!(upstream["body"]["text"].as_str().unwrap().as_bytes(), &received.body[..], "byte for byte");
    assert!(upstream["path"].as_str().unwrap().ends_with("/chat/completions"), "{upstream}");
    let headers = upstream["headers"].to_string();
    assert!(!headers.contains(CHAT_KEY) && !b.to_string().contains(ACCESS_TOKEN), "{b}");
    assert_eq!(captured["answer"]["body"]["text"], answer.as_str(), "what the client got");
    assert_eq!(captured["attempts"][0]["response"]["status"], 200);

    let changes = b["changes"][0]["changes"].as_array().unwrap();
    let kinds: Vec<(&str, &str)> =
        changes.iter().map(|c| (c["kind"].as_str().unwrap(), c["field"].as_str().unwrap())).collect();
    assert!(kinds.contains(&("translated", "")), "{kinds:?}");
    assert!(kinds.iter().any(|(k, f)| *k == "dropped" && f.contains("top_k")), "{kinds:?}");
    assert!(kinds.contains(&("changed", "model")), "the alias: {kinds:?}");
    let translated = changes.iter().find(|c| c["kind"] == "translated").unwrap();
    assert!(translated["reason"].as_str().unwrap().contains("to"), "{translated}");
}

#[tokio::test]
async fn a_streams_events_are_captured_as_sent_with_their_times() {
    let chat = SimProvider::start("chat", Script::ok().stream(4, Duration::from_millis(5))).await.unwrap();
    let config = ConfigText::new().raw(STORE).provider(&chat, "openai", &["m"]);
    let gw = TestGateway::start(config.build(), keys()).await;
    let r = http()
        .post(gw.url("/v1/chat/completions"))
        .bearer_auth(ACCESS_TOKEN)
        .json(&json!({ "model": "m", "stream": true, "messages": [{ "role": "user", "content": "hi" }] }))
        .send()
        .await
        .unwrap();
    let id = request_id(&r);
    let got = r.text().await.unwrap();
    let b = bodies(&gw, &id).await;
    let response = &b["captured"]["attempts"][0]["response"];
    let events = response["events"].as_array().unwrap();
    assert!(events.len() >= 4, "{response}");
    let joined: String = events.iter().map(|e| e["text"].as_str().unwrap()).collect();
    assert_eq!(joined, response["body"]["text"].as_str().unwrap());
    assert!(joined.contains("[DONE]"), "{joined}");
    let times: Vec<f64> = events.iter().map(|e| e["at_ms"].as_f64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    assert!(times.last().unwrap() > &times[0], "the scripted gaps show: {times:?}");
    assert!(events.iter().all(|e| e["size"].as_u64().unwrap() == e["text"].as_str().unwrap().len() as u64));
    // No translation and no usage asked for: the client got what the provider sent.
    assert_eq!(b["captured"]["answer"]["body"]["text"], got.as_str());
}

#[tokio::test]
async fn capture_is_off_without_store_bodies_unless_the_request_or_the_switch_asks() {
    let chat = SimProvider::start("chat", Script::ok()).await.unwrap();
    let config = ConfigText::new().provider(&chat, "openai", &["m"]);
    let gw = TestGateway::start(config.build(), keys()).await;
    let body = json!({ "model": "m", "messages": [{ "role": "user", "content": "hi" }] });
    let plain = gw.post("/v1/chat/completions", &body).await;
    let plain_id = request_id(&plain);
    let asked = http()
        .post(gw.url("/v1/chat/completions"))
        .header("x-switchyard-capture", "1")
        .json(&body)
        .send()
        .await
        .unwrap();
    let asked_id = request_id(&asked);
    gw.recorded(2).await;
    let missing = http()
        .get(gw.url(&format!("/admin/requests/{plain_id}/bodies")))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    assert!(bodies(&gw, &asked_id).await["captured"]["client"]["body"].is_object());
    // The switch: the next request only.
    let set = http()
        .put(gw.url("/admin/capture"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({ "remaining": 1, "until_ms": 0 }))
        .send()
        .await
        .unwrap();
    assert_eq!(set.json::<Value>().await.unwrap()["remaining"], 1);
    let first = request_id(&gw.post("/v1/chat/completions", &body).await);
    let second = request_id(&gw.post("/v1/chat/completions", &body).await);
    gw.recorded(4).await;
    assert!(bodies(&gw, &first).await["captured"].is_object());
    let after = http().get(gw.url(&format!("/admin/requests/{second}/bodies"))).bearer_auth(ADMIN_TOKEN);
    assert_eq!(after.send().await.unwrap().status(), 404);
}

#[tokio::test]
async fn the_inspector_routes_refuse_a_caller_without_the_admin_token() {
    let chat = SimProvider::start("chat", Script::ok()).await.unwrap();
    let config = ConfigText::new().raw(STORE).provider(&chat, "openai", &["m"]);
    let gw = TestGateway::start(config.build(), keys()).await;
    let id = request_id(&gw.post("/v1/chat/completions", &json!({ "model": "m", "messages": [] })).await);
    gw.recorded(1).await;
    let client = http();
    let calls = [
        client.get(gw.url(&format!("/admin/requests/{id}/bodies"))),
        client.get(gw.url(&format!("/admin/requests/{id}/export"))),
        client.post(gw.url(&format!("/admin/requests/{id}/replay"))).json(&json!({})),
        client.get(gw.url("/admin/capture")),
        client.put(gw.url("/admin/capture")).json(&json!({ "remaining": 5, "until_ms": 0 })),
        // The proxy's token is not the admin's.
        client.post(gw.url(&format!("/admin/requests/{id}/replay"))).bearer_auth(ACCESS_TOKEN).json(&json!({})),
    ];
    for call in calls {
        let r = call.send().await.unwrap();
        assert_eq!(r.status(), 401, "{}", r.url());
    }
    assert_eq!(chat.calls(), 1, "no replay went out");
    assert_eq!(gw.gateway.capture_switch().state().remaining, 0);
}

#[tokio::test]
async fn a_replay_is_a_new_request_linked_to_its_original_to_a_chosen_provider_or_edited() {
    let chat = SimProvider::start("chat", Script::ok()).await.unwrap();
    let other = SimProvider::start("other", Script::ok()).await.unwrap();
    let config = ConfigText::new()
        .raw(STORE)
        .provider(&chat, "openai", &["m"])
        .provider(&other, "openai", &["m"])
        .route("m", &["chat", "other"]);
    let gw = TestGateway::start(config.build(), keys()).await;
    let body = json!({ "model": "m", "messages": [{ "role": "user", "content": "first" }] });
    let original = request_id(&gw.post("/v1/chat/completions", &body).await);
    gw.recorded(1).await;
    let replay = |ask: Value| {
        http().post(gw.url(&format!("/admin/requests/{original}/replay"))).bearer_auth(ADMIN_TOKEN).json(&ask).send()
    };
    let again: Value = replay(json!({})).await.unwrap().json().await.unwrap();
    assert_eq!(again["status"], 200, "{again}");
    assert_eq!(again["replay_of"], original.as_str());
    assert_eq!(chat.calls(), 2);
    let elsewhere: Value = replay(json!({ "provider": "other" })).await.unwrap().json().await.unwrap();
    assert_eq!(elsewhere["status"], 200, "{elsewhere}");
    assert_eq!((chat.calls(), other.calls()), (2, 1), "only the chosen provider was asked");
    let edited_body = json!({ "model": "m", "messages": [{ "role": "user", "content": "edited" }] });
    let edited: Value = replay(json!({ "body": edited_body })).await.unwrap().json().await.unwrap();
    assert_eq!(chat.requests()[2].json()["messages"][0]["content"], "edited");

    gw.recorded(4).await;
    let list = gw.admin("/admin/requests").await;
    for id in [&again["request_id"], &elsewhere["request_id"], &edited["request_id"]] {
        let id = id.as_str().unwrap();
        assert!(list.to_string().contains(id), "the replay is in the list");
        assert_eq!(bodies(&gw, id).await["replay_of"], original.as_str());
    }
    let linked = bodies(&gw, &original).await;
    assert_eq!(linked["replays"].as_array().unwrap().len(), 3, "{linked}");
    let row = gw.admin(&format!("/admin/requests/{}", elsewhere["request_id"].as_str().unwrap())).await;
    assert_eq!(row["provider"], "other");
}

/// A replay is a proxied request from the address that asked for it, with
/// the captured client's user agent: it spends that client's per-minute
/// rate at the front, and is refused, in the client's protocol and with
/// no provider called, once the rate is spent.
#[tokio::test]
async fn a_replay_counts_against_the_front_limit_of_its_address() {
    let chat = SimProvider::start("chat", Script::ok()).await.unwrap();
    let config =
        ConfigText::new().raw(STORE).raw("[server]\nrate_limit_per_minute = 3\n").provider(&chat, "openai", &["m"]);
    let gw = TestGateway::start(config.build(), keys()).await;
    let body = json!({ "model": "m", "messages": [{ "role": "user", "content": "hi" }] });
    let sent = http()
        .post(gw.url("/v1/chat/completions"))
        .bearer_auth(ACCESS_TOKEN)
        .header("user-agent", "tool/1.0")
        .json(&body)
        .send()
        .await
        .unwrap();
    let original = request_id(&sent);
    gw.recorded(1).await;
    // The dashboard's calls have a bucket of their own (another user agent):
    // what runs out here is the tool's.
    let replay = || {
        http()
            .post(gw.url(&format!("/admin/requests/{original}/replay")))
            .bearer_auth(ADMIN_TOKEN)
            .header("user-agent", "dashboard")
            .json(&json!({}))
            .send()
    };
    for _ in 0..2 {
        let served: Value = replay().await.unwrap().json().await.unwrap();
        assert_eq!(served["status"], 200, "{served}");
    }
    let refused = replay().await.unwrap();
    assert_eq!(refused.status(), 200, "the admin call itself is within its own rate");
    let refused: Value = refused.json().await.unwrap();
    assert_eq!(refused["status"], 429, "the tool's third request of the minute: {refused}");
    let answer: Value = serde_json::from_str(refused["body"].as_str().unwrap()).unwrap();
    assert_eq!(answer["error"]["code"], "rate_limited", "{answer}");
    assert_eq!(chat.calls(), 3, "the refused replay never left");
    // The tool itself meets the same spent rate.
    let direct = http()
        .post(gw.url("/v1/chat/completions"))
        .bearer_auth(ACCESS_TOKEN)
        .header("user-agent", "tool/1.0")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(direct.status(), 429);
}

#[tokio::test]
async fn a_bug_report_holds_the_request_and_no_secret() {
    let echo = SimProvider::start("chat", Script::always(Fault::EchoRequest { status: 500 })).await.unwrap();
    let config = ConfigText::new()
        .raw("[server]\naccess_token = true\n\n[history]\nstore_bodies = true\n\n[policy]\nmax_retries = 0\n")
        .provider_at("chat", &echo.base_url(), "anthropic", &["c"]);
    let gw = TestGateway::start(config.build(), keys()).await;
    let prompt = json!({ "model": "c", "max_tokens": 8, "messages": [{ "role": "user", "content": "hi" }] });
    let r = send_messages(&gw, &prompt).await;
    let id = request_id(&r);
    assert!(r.status().is_server_error());
    assert_eq!(echo.requests()[0].headers["x-api-key"], CHAT_KEY, "the key went out, to be echoed");
    gw.recorded(1).await;
    let export =
        http().get(gw.url(&format!("/admin/requests/{id}/export"))).bearer_auth(ADMIN_TOKEN).send().await.unwrap();
    assert_eq!(export.status(), 200);
    assert!(export.headers()["content-disposition"].to_str().unwrap().contains(&id));
    let text = export.text().await.unwrap();
    for secret in [CHAT_KEY, OTHER_KEY, ACCESS_TOKEN, ADMIN_TOKEN] {
        assert!(!text.contains(secret), "the report holds {secret}: {text}");
        assert!(!text.contains(&secret[..secret.len() - 4]), "the report holds most of {secret}");
    }
    let report: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(report["request"]["id"], id.as_str());
    assert!(report["switchyard_version"].is_string() && report["os"].is_string());
    assert_eq!(report["config"]["providers"][0]["name"], "chat");
    let attempt = &report["bodies"]["captured"]["attempts"][0];
    assert!(attempt["response"]["body"]["text"].as_str().unwrap().contains("[redacted]"), "{attempt}");

    // A client sending a key of its own beside the access token: captured,
    // and in no report.
    let own = "sk-ant-api03-client-own-key-5f9c2e7a1b";
    let second = http()
        .post(gw.url("/v1/messages"))
        .bearer_auth(ACCESS_TOKEN)
        .header("x-api-key", own)
        .header("anthropic-version", "2023-06-01")
        .json(&prompt)
        .send()
        .await
        .unwrap();
    let second_id = request_id(&second);
    assert!(second.status().is_server_error());
    gw.recorded(2).await;
    let export = http().get(gw.url(&format!("/admin/requests/{second_id}/export"))).bearer_auth(ADMIN_TOKEN);
    let text = export.send().await.unwrap().text().await.unwrap();
    for secret in [own, CHAT_KEY, ACCESS_TOKEN] {
        assert!(!text.contains(secret) && !text.contains(&secret[..secret.len() - 4]), "{secret} in {text}");
    }
    let report: Value = serde_json::from_str(&text).unwrap();
    let headers = report["bodies"]["captured"]["client"]["headers"].to_string();
    assert_eq!(headers.matches("[redacted]").count(), 2, "the bearer token and the client's key: {headers}");
}

#[tokio::test]
async fn redact_outgoing_keeps_pasted_keys_from_the_provider() {
    let chat = SimProvider::start("chat", Script::ok()).await.unwrap();
    let config = ConfigText::new().raw(&format!("[server]\nredact_outgoing = true\n\n{STORE}")).provider(
        &chat,
        "openai",
        &["m"],
    );
    let gw = TestGateway::start(config.build(), keys()).await;
    let aws = "AKIAIOSFODNN7EXAMPLE";
    let pem = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----";
    let prompt = format!("my .env:\nOPENAI_KEY={CHAT_KEY}\nAWS_ACCESS_KEY_ID={aws}\n{pem}\nwhat is wrong?");
    let body = json!({ "model": "m", "messages": [{ "role": "user", "content": prompt }] });
    let r = gw.post("/v1/chat/completions", &body).await;
    let id = request_id(&r);
    assert_eq!(r.status(), 200);
    let answer: Value = r.json().await.unwrap();
    assert!(answer["choices"][0]["message"]["content"].is_string(), "{answer}");
    let sent = String::from_utf8_lossy(&chat.requests()[0].body).into_owned();
    for secret in [CHAT_KEY, aws, "b3BlbnNzaC1rZXktdjEAAAAA", "PRIVATE KEY"] {
        assert!(!sent.contains(secret), "{secret} reached the provider: {sent}");
    }
    assert!(sent.contains("what is wrong?") && sent.contains("[redacted]"), "{sent}");
    let b = bodies(&gw, &id).await;
    assert_eq!(b["captured"]["attempts"][0]["redacted"], 3, "{b}");
    let notes = b["changes"][0]["changes"].to_string();
    assert!(notes.contains("redact_outgoing"), "{notes}");
    let row = gw.admin(&format!("/admin/requests/{id}")).await;
    assert!(row["dropped"].to_string().contains("3 secrets redacted"), "{row}");
}
