//! `GET /admin/clients`: the clients the gateway saw, by user agent, each
//! with its last request (the dashboard's Tools view reads it).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::json;
use switchyard_sim::{Script, SimProvider};
use switchyard_tests::{http, keys_for, ConfigText, TestGateway};

async fn ask(gw: &TestGateway, user_agent: &str, model: &str) {
    let body = json!({ "model": model, "messages": [{ "role": "user", "content": "hi" }] });
    let r =
        http().post(gw.url("/v1/chat/completions")).header("user-agent", user_agent).json(&body).send().await.unwrap();
    r.bytes().await.unwrap();
}

#[tokio::test]
async fn each_user_agent_is_listed_once_with_its_last_request() {
    let sim = SimProvider::start("sim", Script::ok()).await.unwrap();
    let config = ConfigText::new().provider(&sim, "openai", &["m1", "m2"]);
    let gw = TestGateway::start(config.build(), keys_for(&["sim"])).await;
    ask(&gw, "codex_exec/0.171.0 (Debian 12; x86_64)", "m1").await;
    ask(&gw, "claude-cli/2.1.197 (external, cli)", "m1").await;
    ask(&gw, "codex_exec/0.171.0 (Debian 12; x86_64)", "m2").await;
    ask(&gw, "codex_exec/0.171.0 (Debian 12; x86_64)", "nope").await;
    assert_eq!(gw.recorded(4).await, 4);

    let clients = gw.admin("/admin/clients").await["clients"].as_array().unwrap().clone();
    assert_eq!(clients.len(), 2, "{clients:?}");
    let codex = &clients[0];
    assert_eq!(codex["user_agent"], "codex_exec/0.171.0 (Debian 12; x86_64)", "most recent first: {clients:?}");
    assert_eq!(codex["requests"], 3);
    assert_eq!(codex["last_model"], "nope");
    assert_ne!(codex["last_outcome"], "ok", "the last request's outcome, not the best: {codex}");
    assert_eq!(clients[1]["user_agent"], "claude-cli/2.1.197 (external, cli)");
    assert_eq!(clients[1]["last_outcome"], "ok");
    assert!(clients[1]["last_at"].as_i64().unwrap() <= codex["last_at"].as_i64().unwrap());

    let anonymous = http().get(gw.url("/admin/clients")).send().await.unwrap();
    assert_eq!(anonymous.status(), 401, "behind the admin token like every admin route");
}
