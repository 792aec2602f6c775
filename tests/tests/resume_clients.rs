//! Resumed streams under the real coding CLIs: Claude Code and Codex run a
//! tool round trip through a provider whose stream breaks off mid-text —
//! once in the answer after the round trip, once in the words before the
//! tool call, which the chain's next provider goes on from with the call
//! itself — and finish the turn (`resume = true`). How the CLIs are
//! installed and driven: [`switchyard_tests::clis`].

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::Value;
use switchyard_sim::{Fault, Script, SimProvider};
use switchyard_tests::clis::{Client, Sandbox, SECRET};
use switchyard_tests::{keys_for, ConfigText, TestGateway};

/// `a` is an agent that reads the client's file and answers, its streams
/// broken by `fault`; `b` is the same agent, whole.
async fn gateway(client: Client, sandbox: &Sandbox, fault: Fault) -> (SimProvider, SimProvider, TestGateway) {
    let plan = client.read_plan(sandbox, &["notes.txt"]);
    let a = SimProvider::start("a", Script::always(fault).tool_plan(plan.clone())).await.unwrap();
    let b = SimProvider::start("b", Script::agent().tool_plan(plan)).await.unwrap();
    let models = [format!("{}=up-model", client.model())];
    let models: Vec<&str> = models.iter().map(String::as_str).collect();
    let config = ConfigText::new().raw("[policy]\nresume = true\nmin_fallback_budget = \"100ms\"");
    let config = client.native().serve(client.native().serve(config, &a, &models), &b, &models);
    let config = config.route(client.model(), &["a", "b"]);
    let gw = TestGateway::start(config.build(), keys_for(&["a", "b"])).await;
    (a, b, gw)
}

/// Each request's attempts on record, as (provider, reason, outcome).
async fn attempts(gw: &TestGateway) -> Vec<Vec<(String, String, String)>> {
    let listed = gw.admin("/admin/requests?limit=100").await;
    let mut all = Vec::new();
    for r in listed["requests"].as_array().unwrap() {
        let d = gw.admin(&format!("/admin/requests/{}", r["id"].as_str().unwrap())).await;
        let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
        let rows = d["attempts"].as_array().cloned().unwrap_or_default();
        all.push(rows.iter().map(|a| (s(&a["provider"]), s(&a["reason"]), s(&a["outcome"]))).collect());
    }
    all
}

/// Whether a request on record broke off at `a` and was finished by `b`.
fn resumed_at_b(rows: &[(String, String, String)]) -> bool {
    rows.len() == 2
        && rows[0] == ("a".into(), "first".into(), "mid_stream_failure".into())
        && rows[1] == ("b".into(), "resume".into(), "ok".into())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_and_codex_finish_a_turn_whose_stream_broke_off() {
    for client in [Client::ClaudeCode, Client::Codex] {
        let sandbox = Sandbox::new();
        let (a, b, gw) = gateway(client, &sandbox, Fault::DropTextAfter(2)).await;
        let said = client.run(&sandbox, &gw, "Read notes.txt and tell me what it says.").await;
        assert!(said.contains(SECRET), "{client:?}: the answer quotes the file it read, whole:\n{said}");
        assert!(a.calls() >= 2, "{client:?}: the tool call and the answer went to a first");
        assert!(b.calls() >= 1, "{client:?}: b finished the answer");
        gw.recorded(2).await;
        let on_record = attempts(&gw).await;
        assert!(on_record.iter().any(|r| resumed_at_b(r)), "{client:?}: a request resumed at b: {on_record:?}");
        // What b was asked ended with what a had written.
        let asked = b.requests().last().unwrap().json();
        assert!(asked.to_string().contains("the tool said"), "{client:?}: {asked}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_and_codex_run_the_tool_call_a_resumed_stream_went_on_with() {
    for client in [Client::ClaudeCode, Client::Codex] {
        let sandbox = Sandbox::new();
        // `a` begins to say what it will do and breaks off; `b`, asked to
        // go on from "Hello from", makes the tool call; the client runs it
        // and `a` answers with its result.
        let (a, b, gw) = gateway(client, &sandbox, Fault::DropBeforeTools(2)).await;
        let said = client.run(&sandbox, &gw, "Read notes.txt and tell me what it says.").await;
        assert!(said.contains(SECRET), "{client:?}: the answer quotes the file it read, whole:\n{said}");
        gw.recorded(2).await;
        let on_record = attempts(&gw).await;
        assert!(on_record.iter().any(|r| resumed_at_b(r)), "{client:?}: the call came from b: {on_record:?}");
        let went_on = b.requests().iter().any(|r| r.json().to_string().contains("Hello from"));
        assert!(went_on, "{client:?}: b was asked to go on from what a had written");
        // The round trip after the resume: a read the tool's result.
        let last = a.requests().last().unwrap().json().to_string();
        assert!(last.contains(SECRET) && last.contains("Hello from"), "{client:?}: {last}");
    }
}
