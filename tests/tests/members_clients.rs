//! A real coding tool with a member's key as its API key: Claude Code is
//! answered, every request it makes is on record as the member's, and a
//! tool pointed at a model the member may not use is refused in its own
//! protocol. Needs the CLIs (`npm ci --prefix tests/clis`, or
//! `SWITCHYARD_TEST_CLIS`), as the other real-client tests do.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{json, Value};
use switchyard_sim::{Script, SimProvider};
use switchyard_tests::clis::{Client, Run, Sandbox};
use switchyard_tests::{http, keys_for, ConfigText, TestGateway, ADMIN_TOKEN};

async fn add(gw: &TestGateway, member: Value) -> String {
    let r = http().post(gw.url("/admin/members")).bearer_auth(ADMIN_TOKEN).json(&member).send().await.unwrap();
    assert_eq!(r.status(), 201);
    r.json::<Value>().await.unwrap()["key"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn claude_code_with_a_members_key_is_answered_and_attributed() {
    let sandbox = Sandbox::new();
    let an = SimProvider::start("an", Script::ok()).await.unwrap();
    let model = Client::ClaudeCode.model();
    let config = ConfigText::new().provider(&an, "anthropic", &[model, "gpt-4.1"]);
    let gw = TestGateway::start(config.build(), keys_for(&["an"])).await;
    let al = add(&gw, json!({ "name": "al", "models": "claude-*" })).await;

    let run = Run::new(Client::ClaudeCode, &gw.addr.to_string()).model(Some(model)).env("ANTHROPIC_API_KEY", &al);
    let (ok, said) = run.try_go(&sandbox, "Say hello.").await;
    assert!(ok, "{said}");
    let rows = gw.admin("/admin/requests?limit=100").await;
    let rows = rows["requests"].as_array().unwrap();
    assert!(!rows.is_empty() && rows.iter().all(|r| r["member"] == "al"), "every request is al's: {rows:?}");
    assert!(rows.iter().any(|r| r["endpoint"] == "/v1/messages" && r["status"] == 200), "{rows:?}");

    // Pointed at a model al may not use: refused, and no call made for it.
    let calls = an.calls();
    let run = Run::new(Client::ClaudeCode, &gw.addr.to_string()).model(Some("gpt-4.1")).env("ANTHROPIC_API_KEY", &al);
    let (ok, said) = run.try_go(&sandbox, "Say hello.").await;
    assert!(!ok || said.contains("gpt-4.1"), "{said}");
    assert_eq!(an.calls(), calls, "no upstream call for a model al may not use");
}
