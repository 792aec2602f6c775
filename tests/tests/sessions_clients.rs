//! The real coding CLIs, each through a gateway in front of a simulated
//! provider of its own kind, land in exactly one session named for the
//! right client; `claude -c` (continue) lands in the session of the run it
//! continues; a tool round trip is one turn of several requests. How the CLIs are installed and driven: [`switchyard_tests::clis`].

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::Value;
use switchyard_sim::{Script, SimProvider};
use switchyard_tests::clis::{Client, Run, Sandbox};
use switchyard_tests::{keys_for, ConfigText, TestGateway};

/// A gateway serving `client`'s model (and Gemini CLI's side models) from
/// a simulated provider of the kind it speaks.
async fn gateway_for(client: Client) -> (SimProvider, TestGateway) {
    gateway_with(client, Script::agent()).await
}

async fn gateway_with(client: Client, script: Script) -> (SimProvider, TestGateway) {
    let sim = SimProvider::start("up", script).await.unwrap();
    let models: Vec<String> = match client {
        Client::GeminiCli => {
            ["gemini-2.5-pro", "gemini-2.5-flash", "gemini-2.5-flash-lite"].map(|m| format!("{m}=up-model")).to_vec()
        }
        _ => vec![format!("{}=up-model", client.model())],
    };
    let models: Vec<&str> = models.iter().map(String::as_str).collect();
    let config = client.native().serve(ConfigText::new(), &sim, &models);
    let gw = TestGateway::start(config.build(), keys_for(&["up"])).await;
    (sim, gw)
}

async fn sessions(gw: &TestGateway) -> Vec<Value> {
    gw.admin("/admin/sessions").await["sessions"].as_array().unwrap().clone()
}

/// Every request on record, as (endpoint, session).
async fn requests(gw: &TestGateway) -> Vec<(String, String)> {
    let listed = gw.admin("/admin/requests?limit=500").await;
    listed["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["endpoint"].as_str().unwrap_or("").to_string(), r["session"].as_str().unwrap_or("-").to_string()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_cli_run_is_one_session_of_its_client() {
    for (client, name) in
        [(Client::ClaudeCode, "claude-code"), (Client::Codex, "codex"), (Client::GeminiCli, "gemini-cli")]
    {
        let sandbox = Sandbox::new();
        let (_sim, gw) = gateway_for(client).await;
        client.run(&sandbox, &gw, "Say hello.").await;
        let found = sessions(&gw).await;
        assert_eq!(found.len(), 1, "{client:?}: one session, of requests {:?}: {found:?}", requests(&gw).await);
        assert_eq!(found[0]["client"], name, "{client:?}: {}", found[0]);
        assert!(found[0]["requests"].as_i64().unwrap() >= 1);
        let on_record = requests(&gw).await;
        assert!(on_record.iter().all(|(_, s)| *s == found[0]["id"]), "{client:?}: {on_record:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_continue_lands_in_the_session_it_continues() {
    let sandbox = Sandbox::new();
    let (_sim, gw) = gateway_for(Client::ClaudeCode).await;
    let model = Some(Client::ClaudeCode.model());
    Run::new(Client::ClaudeCode, &gw.addr.to_string()).model(model).go(&sandbox, "Say hello.").await;
    let first = sessions(&gw).await;
    assert_eq!(first.len(), 1, "{first:?}");
    let before = first[0]["requests"].as_i64().unwrap();
    println!("first run: session {} ({before} requests)", first[0]["id"]);

    // Claude Code 2.1.197 sends the session id it continues on every
    // request of a `-c` run: the header alone joins them.
    Run::new(Client::ClaudeCode, &gw.addr.to_string()).model(model).arg("-c").go(&sandbox, "And again.").await;

    let after = sessions(&gw).await;
    assert_eq!(after.len(), 1, "the continued run joins its session: {after:?}\n{:?}", requests(&gw).await);
    assert_eq!(after[0]["id"], first[0]["id"]);
    assert!(after[0]["requests"].as_i64().unwrap() > before, "{after:?}");
}

/// A CLI asked to read a file: its prompt, the provider's call to its read
/// tool, the tool's result sent back, the answer. Two requests or more,
/// one turn: the result is the agent's follow-up, not the user's input.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_round_trip_is_one_turn_of_several_requests() {
    for client in [Client::ClaudeCode, Client::Codex, Client::GeminiCli] {
        let sandbox = Sandbox::new();
        let plan = client.read_plan(&sandbox, &["notes.txt"]);
        let (sim, gw) = gateway_with(client, Script::agent().tool_plan(plan)).await;
        client.run(&sandbox, &gw, "Read notes.txt and tell me what it says.").await;
        assert!(sim.calls() >= 2, "{client:?}: the tool's result went back");
        let found = sessions(&gw).await;
        assert_eq!(found.len(), 1, "{client:?}: {found:?}");
        let (requests, turns) = (found[0]["requests"].as_i64().unwrap(), found[0]["turns"].as_i64().unwrap());
        let rows = gw.admin("/admin/requests?limit=500").await;
        let said: Vec<&Value> = rows["requests"].as_array().unwrap().iter().map(|r| &r["turn"]).collect();
        println!("{client:?}: {requests} requests, {turns} turns ({said:?})");
        assert!(requests >= 2, "{client:?}: {requests} requests");
        assert_eq!(turns, 1, "{client:?}: the prompt is the turn, the tool's result is not: {said:?}");
    }
}
