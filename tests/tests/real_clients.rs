//! The official OpenAI, Anthropic and Google Gen AI Python SDKs against the gateway.
//!
//! Needs a Python with `openai`, `anthropic`, `google-genai` and `pytest`: `.ci/run` makes
//! `.venv` at the workspace root; `SWITCHYARD_TEST_PYTHON` points elsewhere.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use serde_json::{json, Value};
use switchyard_sim::{Fault, Script, SimProvider, ToolPlan};
use switchyard_tests::{keys_for, python, ConfigText, TestGateway};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_python_sdks_work_through_the_gateway() {
    let oa = SimProvider::start("oa", Script::ok()).await.unwrap();
    let an = SimProvider::start("an", Script::ok()).await.unwrap();
    let bad = SimProvider::start("bad", Script::always(Fault::status(503))).await.unwrap();
    // Agents that speak only the other family's format: the Anthropic SDK's
    // `claude-agent` is served by a Chat-only OpenAI-kind provider, the
    // OpenAI SDK's `gpt-agent` (Chat and Responses) and the Google SDK's
    // `gemini-agent` by Anthropic ones.
    let weather = || Script::agent().tool_plan(ToolPlan::call("get_weather", json!({ "city": "Paris" })));
    let chat_agent = SimProvider::start("chat-agent", weather()).await.unwrap();
    let claude_agent = SimProvider::start("claude-agent", weather()).await.unwrap();
    let gemini_agent = SimProvider::start("gemini-agent", weather()).await.unwrap();
    // Providers whose context the prompt overflows, each saying so in its own words.
    let openai_words = "This model's maximum context length is 128000 tokens. However, your messages resulted in \
                        130532 tokens. Please reduce the length of the messages.";
    let long_oa = SimProvider::start("long-oa", Script::always(Fault::saying(400, openai_words))).await.unwrap();
    let anthropic_words = "prompt is too long: 210000 tokens > 200000 maximum";
    let long_an = SimProvider::start("long-an", Script::always(Fault::saying(400, anthropic_words))).await.unwrap();
    let config = ConfigText::new()
        .provider(&oa, "openai", &["gpt-test", "embed-test", "over-budget"])
        .provider(&an, "anthropic", &["claude-test"])
        .provider(&bad, "anthropic", &["doomed"])
        .chat_only(&chat_agent, &["claude-agent=gpt-4.1"])
        .provider(&claude_agent, "anthropic", &["gpt-agent=claude-sonnet-4-5"])
        .provider(&gemini_agent, "anthropic", &["gemini-agent=claude-haiku-4-5"])
        .chat_only(&long_oa, &["too-long=gpt-4.1"])
        .provider(&long_an, "anthropic", &["too-long-an=claude-sonnet-4-5"])
        // A dollar a token and a budget of fifty cents: spent by the request below.
        .raw("[[prices]]\nprovider = \"oa\"\nmodel = \"over-budget\"\ninput = 1000000\noutput = 1000000")
        .raw("[[budgets]]\nscope = \"model:over-budget\"\nperiod = \"day\"\nlimit_usd = 0.5\naction = \"block\"");
    let names = ["oa", "an", "bad", "chat-agent", "claude-agent", "gemini-agent", "long-oa", "long-an"];
    let gw = TestGateway::start(config.build(), keys_for(&names)).await;

    let spent = gw
        .post(
            "/v1/chat/completions",
            &json!({ "model": "over-budget", "messages": [{ "role": "user", "content": "hi" }] }),
        )
        .await;
    assert_eq!(spent.status(), 200);
    spent.bytes().await.unwrap();
    gw.recorded(1).await;

    let tests = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python");
    let out = tokio::process::Command::new(python())
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=5"])
        .arg(&tests)
        .env("SWITCHYARD_URL", format!("http://{}", gw.addr))
        .env("NO_PROXY", "127.0.0.1")
        .output()
        .await
        .expect("python runs");
    let report = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "SDK tests failed:\n{report}");
    eprintln!("{report}");
    assert!(!report.contains("skipped"), "no SDK test may be skipped:\n{report}");
    // One gateway request: the first attempt and the gateway's one retry.
    // An SDK retry would have doubled it.
    assert_eq!(bad.calls(), 2, "the SDK retried although the gateway said x-should-retry: false");
    // The budget's refusals: the Python test runs once per Anthropic way of
    // authenticating, each run one OpenAI and one Anthropic call. A retry
    // would be another refusal on record.
    let refused = gw.admin("/admin/requests?model=over-budget&outcome=rejected").await;
    assert_eq!(refused["requests"].as_array().unwrap().len(), 4, "an SDK retried a budget_exceeded: {refused}");
    // Every SDK request reached a provider with the provider's key, never the client's.
    let agents = chat_agent.requests().into_iter().chain(claude_agent.requests()).chain(gemini_agent.requests());
    for seen in oa.requests().iter().chain(an.requests().iter()).chain(agents.collect::<Vec<_>>().iter()) {
        let auth = seen.headers.get("authorization").or_else(|| seen.headers.get("x-api-key")).unwrap();
        assert!(!auth.to_str().unwrap().contains("sk-local-client"));
    }
    translated_round_trips_reached_each_provider_in_its_own_format(&chat_agent, &claude_agent);
    gemini_round_trips_reached_anthropic_as_messages(&gemini_agent);
}

/// What the Google SDK's tests sent: Messages, with no Gemini credential,
/// each follow-up a tool_result for the call (the agent refuses unpaired ones).
fn gemini_round_trips_reached_anthropic_as_messages(sim: &SimProvider) {
    let seen = sim.requests();
    assert_eq!(seen.len(), 4, "two tests, a call and a follow-up each");
    for request in &seen {
        assert_eq!(request.path, "/v1/messages");
        assert!(!request.headers.contains_key("x-goog-api-key") && request.query.is_none(), "{:?}", request.headers);
        let body = request.json();
        assert_eq!(body["model"], "claude-haiku-4-5");
        assert_eq!(body["tools"][0]["name"], "get_weather", "{body}");
    }
    let results: Vec<String> =
        seen.iter().map(|r| r.json().to_string()).filter(|b| b.contains("tool_result")).collect();
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(results.iter().all(|b| b.contains("18C and sunny in Paris")), "{results:?}");
}

/// What the cross-format SDK tests sent: each agent saw only its own format,
/// the tool declared in it, and the tool's result in its own shape.
fn translated_round_trips_reached_each_provider_in_its_own_format(chat: &SimProvider, claude: &SimProvider) {
    let chat_seen = chat.requests();
    // Two Anthropic SDK tests (two auth styles each), a first call and a follow-up each.
    assert_eq!(chat_seen.len(), 8, "{:?}", chat_seen.iter().map(|r| &r.path).collect::<Vec<_>>());
    for seen in &chat_seen {
        assert_eq!(seen.path, "/v1/chat/completions");
        let names: Vec<&str> = seen.headers.keys().map(|k| k.as_str()).collect();
        assert!(!names.iter().any(|n| n.starts_with("anthropic-") || *n == "x-api-key"), "{names:?}");
        let body = seen.json();
        assert_eq!(body["model"], "gpt-4.1");
        assert_eq!(body["tools"][0]["function"]["name"], "get_weather", "{body}");
    }
    let results: Vec<Value> = chat_seen
        .iter()
        .filter_map(|r| r.json()["messages"].as_array().and_then(|m| m.iter().find(|m| m["role"] == "tool").cloned()))
        .collect();
    assert_eq!(results.len(), 4, "each follow-up carried the result as a tool message");
    assert!(results.iter().all(|m| m["content"] == "18C and sunny in Paris"), "{results:?}");

    let claude_seen = claude.requests();
    assert_eq!(claude_seen.len(), 8, "chat and Responses, streamed and not, a first call and a follow-up each");
    for seen in &claude_seen {
        assert_eq!(seen.path, "/v1/messages");
        let body = seen.json();
        assert_eq!(body["model"], "claude-sonnet-4-5");
        assert_eq!(body["tools"][0]["name"], "get_weather", "{body}");
        assert!(body["max_tokens"].as_u64().is_some(), "Messages requires max_tokens: {body}");
    }
    let mut follow_ups = 0;
    for body in claude_seen.iter().map(|r| r.json()) {
        let blocks: Vec<Value> = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
            .collect();
        let Some(result) = blocks.iter().find(|b| b["type"] == "tool_result") else { continue };
        follow_ups += 1;
        let call = blocks.iter().find(|b| b["type"] == "tool_use").expect("the call precedes its result");
        assert_eq!(result["tool_use_id"], call["id"], "{body}");
        assert_eq!(call["input"], json!({ "city": "Paris" }), "{body}");
        assert!(result.to_string().contains("18C and sunny in Paris"), "{body}");
    }
    assert_eq!(follow_ups, 4, "each follow-up carried a tool_result");
}
