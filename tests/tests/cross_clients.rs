//! The real coding CLIs, each served by a simulated provider that speaks
//! only another wire format, through a whole agent turn: the provider asks
//! for a tool, the CLI runs it, the provider answers quoting its result.
//!
//! - Claude Code (Messages) with its Anthropic provider down (529), served
//!   by a Chat-only OpenAI-kind provider next in its chain; it runs `Read`.
//! - Codex (Responses) served by a Chat-only provider; it runs its shell
//!   tool, and `apply_patch` (a custom tool, emulated as a function on Chat).
//! - Gemini CLI (generateContent) served by an OpenAI-kind provider; it runs
//!   `read_file`.
//! - Each of the three through each provider kind it does not speak, two
//!   tool calls in one turn.
//!
//! The simulated providers refuse, as real ones do, a conversation whose
//! tool calls and results do not pair up, so a lost or renamed id fails.
//! How the CLIs are installed and driven: [`switchyard_tests::clis`].

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{json, Value};
use switchyard_sim::{Fault, Recorded, Script, SimProvider, ToolPlan};
use switchyard_tests::clis::{Client, Sandbox, Upstream, OTHER, SECRET};
use switchyard_tests::{keys_for, ConfigText, TestGateway};

/// Header names a request carried.
fn header_names(seen: &Recorded) -> Vec<String> {
    seen.headers.keys().map(|k| k.as_str().to_string()).collect()
}

/// The Chat requests that carried a tool result, and those results.
fn chat_tool_results(seen: &[Recorded]) -> Vec<String> {
    seen.iter()
        .filter_map(|r| {
            let body = r.json();
            let messages = body["messages"].as_array()?.clone();
            Some(messages.into_iter().filter(|m| m["role"] == "tool").map(|m| m["content"].to_string()))
        })
        .flatten()
        .collect()
}

/// The tool message in the first Chat follow-up that carries one, once it
/// is shown to answer that request's first call, a call to `tool`.
fn paired_result(seen: &[Recorded], tool: &str) -> Value {
    let follow_up = seen.iter().map(Recorded::json).find(|b| b.to_string().contains("\"role\":\"tool\"")).unwrap();
    let messages = follow_up["messages"].as_array().unwrap();
    let call = messages.iter().find_map(|m| m["tool_calls"].as_array().map(|c| c[0].clone())).unwrap();
    let result = messages.iter().find(|m| m["role"] == "tool").unwrap().clone();
    assert_eq!(call["id"], result["tool_call_id"], "{follow_up}");
    assert_eq!(call["function"]["name"], tool);
    result
}

/// The names of the tools a Chat request offered.
fn chat_tools(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_falls_back_to_a_chat_provider_and_runs_a_tool_it_asks_for() {
    let sandbox = Sandbox::new();
    let an = SimProvider::start("an", Script::always(Fault::status(529))).await.unwrap();
    let plan = Client::ClaudeCode.read_plan(&sandbox, &["notes.txt"]);
    let oa = SimProvider::start("oa", Script::agent().tool_plan(plan)).await.unwrap();
    let config = ConfigText::new()
        .provider(&an, "anthropic", &["claude-sonnet-4-5"])
        .chat_only(&oa, &["claude-sonnet-4-5=gpt-4.1"])
        .route("claude-sonnet-4-5", &["an", "oa"]);
    let gw = TestGateway::start(config.build(), keys_for(&["an", "oa"])).await;

    let said = Client::ClaudeCode.run(&sandbox, &gw, "Read notes.txt and tell me what it says.").await;

    assert!(said.contains(SECRET), "Claude Code's answer quotes the file it read:\n{said}");
    assert!(an.calls() > 0, "the Anthropic provider was tried first");
    let seen = oa.requests();
    for request in &seen {
        assert_eq!(request.path, "/v1/chat/completions", "only Chat reached the OpenAI-kind provider");
        let names = header_names(request);
        assert!(!names.iter().any(|n| n.starts_with("anthropic-") || n == "x-api-key"), "{names:?}");
        assert!(request.query.as_deref().is_none_or(|q| !q.contains("beta")), "{:?}", request.query);
    }
    let offered = seen.iter().map(|r| chat_tools(&r.json())).find(|t| !t.is_empty()).unwrap_or_default();
    assert!(offered.iter().any(|t| t == "Read"), "Claude Code's tools reached the provider: {offered:?}");
    let results = chat_tool_results(&seen);
    assert!(results.iter().any(|r| r.contains(SECRET)), "the Read result went back as a tool message: {results:?}");

    // Claude Code's token counts (its interactive sessions count constantly;
    // `-p` may not) are answered though the only provider that counts is down.
    let counted: Vec<Value> = gw.admin("/admin/requests?limit=100").await["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["endpoint"] == "/v1/messages/count_tokens")
        .cloned()
        .collect();
    assert!(counted.iter().all(|r| r["status"] == 200), "{counted:?}");
    let r = switchyard_tests::http()
        .post(gw.url("/v1/messages/count_tokens?beta=true"))
        .header("anthropic-version", "2023-06-01")
        .header("anthropic-beta", "token-counting-2024-11-01")
        .header("x-api-key", "sk-local-client")
        .json(&json!({ "model": Client::ClaudeCode.model(), "messages": [{ "role": "user", "content": SECRET }], "tools": [] }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["x-switchyard-token-count"], "estimate");
    let n = r.json::<Value>().await.unwrap()["input_tokens"].as_u64().unwrap();
    assert!(n > 0);
}

/// What every request Codex's turn sent to a Chat-only provider shows.
fn only_chat_reached(seen: &[Recorded]) {
    assert!(!seen.is_empty());
    for request in seen {
        assert_eq!(request.path, "/v1/chat/completions", "a Chat-only provider got no Responses request");
        let body = request.json();
        assert_eq!(body["model"], "deepseek-chat");
        assert_eq!(body["stream"], true, "Codex streams");
        for field in ["input", "instructions", "store", "include", "previous_response_id"] {
            assert!(body.get(field).is_none(), "a Responses field `{field}` reached Chat: {body}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_runs_its_shell_tool_for_a_chat_only_provider() {
    let sandbox = Sandbox::new();
    let plan = Client::Codex.read_plan(&sandbox, &["notes.txt"]);
    let oa = SimProvider::start("oa", Script::agent().tool_plan(plan)).await.unwrap();
    let config = ConfigText::new().chat_only(&oa, &["gpt-5.5=deepseek-chat"]);
    let gw = TestGateway::start(config.build(), keys_for(&["oa"])).await;

    let said = Client::Codex.run(&sandbox, &gw, "What does notes.txt say?").await;

    assert!(said.contains("the tool said: "), "Codex printed the provider's final answer:\n{said}");
    assert!(said.contains(SECRET), "the final answer quotes the command's output:\n{said}");
    let seen = oa.requests();
    only_chat_reached(&seen);
    let offered = chat_tools(&seen[0].json());
    assert!(offered.iter().any(|t| t == "exec_command"), "{offered:?}");
    let results = chat_tool_results(&seen);
    assert!(
        results.iter().any(|r| r.contains(SECRET)),
        "the command's output went back as a tool message: {results:?}"
    );
    // The call's id came back with its result.
    paired_result(&seen, "exec_command");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_applies_a_patch_through_a_chat_only_provider() {
    let sandbox = Sandbox::new();
    let patch = "*** Begin Patch\n*** Add File: hello.txt\n+hello from a translated patch\n*** End Patch\n";
    let oa =
        SimProvider::start("oa", Script::agent().tool_plan(ToolPlan::call("apply_patch", json!(patch)))).await.unwrap();
    let config = ConfigText::new().chat_only(&oa, &["gpt-5.5=deepseek-chat"]);
    let gw = TestGateway::start(config.build(), keys_for(&["oa"])).await;

    let said = Client::Codex.run(&sandbox, &gw, "Create hello.txt.").await;

    let written = std::fs::read_to_string(sandbox.project.join("hello.txt"))
        .unwrap_or_else(|e| panic!("Codex applied the patch ({e}):\n{said}"));
    assert_eq!(written, "hello from a translated patch\n");
    assert!(said.contains("the tool said: "), "Codex printed the provider's final answer:\n{said}");
    assert!(said.contains("hello.txt"), "the answer quotes apply_patch's report:\n{said}");
    let seen = oa.requests();
    only_chat_reached(&seen);
    // Codex's freeform tool crossed as a function taking the raw patch.
    let tool = seen[0].json()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "apply_patch")
        .cloned()
        .expect("apply_patch was offered to the Chat provider");
    assert_eq!(tool["type"], "function");
    assert_eq!(tool["function"]["parameters"]["properties"]["input"]["type"], "string", "{tool}");
    let results = chat_tool_results(&seen);
    assert!(
        results.iter().any(|r| r.contains("hello.txt")),
        "apply_patch's report went back as a tool message: {results:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_cli_runs_read_file_for_an_openai_kind_provider() {
    let sandbox = Sandbox::new();
    let plan = Client::GeminiCli.read_plan(&sandbox, &["notes.txt"]);
    let oa = SimProvider::start("oa", Script::agent().tool_plan(plan)).await.unwrap();
    let models = ["gemini-2.5-pro=gpt-4.1", "gemini-2.5-flash=gpt-4.1", "gemini-2.5-flash-lite=gpt-4.1"];
    let config = ConfigText::new().chat_only(&oa, &models);
    let gw = TestGateway::start(config.build(), keys_for(&["oa"])).await;

    let said = Client::GeminiCli.run(&sandbox, &gw, "Read notes.txt and tell me what it says.").await;

    assert!(said.contains(&format!("the tool said: {SECRET}")), "Gemini CLI's answer quotes the file it read:\n{said}");
    let seen = oa.requests();
    assert!(seen.len() >= 2, "a call and its follow-up");
    for request in &seen {
        assert_eq!(request.path, "/v1/chat/completions");
        assert_eq!(request.json()["model"], "gpt-4.1");
        let names = header_names(request);
        assert!(!names.iter().any(|n| n.starts_with("x-goog-")), "{names:?}");
        assert!(request.query.as_deref().is_none_or(|q| !q.contains("key=")), "{:?}", request.query);
    }
    let offered = chat_tools(&seen[0].json());
    assert!(offered.iter().any(|t| t == "read_file"), "{offered:?}");
    // The functionResponse went back as a tool message answering the call,
    // whose id the gateway made up (Gemini's calls have none) and paired.
    let result = paired_result(&seen, "read_file");
    assert!(result["content"].as_str().unwrap().contains(SECRET), "{result}");
    let listed = gw.admin("/admin/requests?limit=100").await;
    let endpoints: Vec<&str> =
        listed["requests"].as_array().unwrap().iter().filter_map(|r| r["endpoint"].as_str()).collect();
    assert!(endpoints.iter().all(|e| e.ends_with(":streamGenerateContent")), "{endpoints:?}");
}

/// Every CLI through every provider kind that does not speak its format,
/// with two tool calls in one turn: both run, both results go back paired
/// with their calls (the provider refuses them otherwise), and the answer
/// quotes both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_cli_finishes_a_two_tool_turn_through_every_other_provider_kind() {
    for client in Client::ALL {
        // Codex's Responses reach a Responses-only provider as they are.
        let native = |u: Upstream| u == client.native() || (client == Client::Codex && u == Upstream::ResponsesOnly);
        for upstream in Upstream::ALL.into_iter().filter(|u| !native(*u)) {
            let sandbox = Sandbox::new();
            let plan = client.read_plan(&sandbox, &["notes.txt", "other.txt"]);
            let sim = SimProvider::start("up", Script::agent().tool_plan(plan)).await.unwrap();
            let alias = format!("{}=up-model", client.model());
            let config = upstream.serve(ConfigText::new(), &sim, &[alias.as_str()]);
            let gw = TestGateway::start(config.build(), keys_for(&["up"])).await;

            let said = client.run(&sandbox, &gw, "Read notes.txt and other.txt, then tell me what they say.").await;

            let case = format!("{client:?} through {upstream:?}");
            assert!(said.contains(SECRET) && said.contains(OTHER), "{case}: the answer quotes both files:\n{said}");
            let paths: Vec<String> = sim.requests().iter().map(|r| r.path.clone()).collect();
            assert!(paths.len() >= 2, "{case}: a call and its follow-up: {paths:?}");
            assert!(paths.iter().all(|p| upstream.speaks(p)), "{case}: only the provider's own format: {paths:?}");
            let listed = gw.admin("/admin/requests?limit=100").await;
            for request in listed["requests"].as_array().unwrap() {
                assert_eq!(request["outcome"], "ok", "{case}: {request}");
            }
        }
    }
}
