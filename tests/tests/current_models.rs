//! Claude Code with the models users run today, its Anthropic provider
//! down (529), falling back to a provider of each other kind and running a
//! tool there.
//!
//! A current model makes Claude Code send `role: "system"` messages inside
//! `messages` (the list of agent types); an older one does not. So each run
//! first shows, on the Anthropic provider's record of what Claude Code
//! sent, that the run is the case that matters, then that the fallback
//! provider got the instruction in its own format and the tool's result
//! came back, and that the session stayed there once it had fallen back.
//! Also the model Claude Code picks when none is set.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::Value;
use switchyard_sim::{Fault, Recorded, Script, SimProvider};
use switchyard_tests::clis::{Client, Run, Sandbox, Upstream, SECRET};
use switchyard_tests::{keys_for, ConfigText, TestGateway};

/// Whether a Messages body holds a system message among its turns.
fn has_system_turn(body: &Value) -> bool {
    body["messages"].as_array().is_some_and(|m| m.iter().any(|m| m["role"] == "system"))
}

/// Where the instruction the system message carried shows in a provider's
/// own format, if anywhere: a developer item (Responses), or a user turn
/// marked as a reminder (Chat from a strict profile, Gemini).
fn mid_system_in(upstream: Upstream, body: &Value) -> bool {
    let text = body.to_string();
    match upstream {
        Upstream::ResponsesOnly | Upstream::Responses => body["input"]
            .as_array()
            .is_some_and(|items| items.iter().skip(1).any(|i| i["role"] == "developer" || i["role"] == "system")),
        Upstream::Chat | Upstream::Gemini | Upstream::Anthropic => text.contains("<system-reminder>"),
    }
}

async fn falls_back(model: Option<&str>, upstream: Upstream) {
    let case = format!("{} through {upstream:?}", model.unwrap_or("the default model"));
    let sandbox = Sandbox::new();
    let an = SimProvider::start("an", Script::always(Fault::status(529))).await.unwrap();
    let plan = Client::ClaudeCode.read_plan(&sandbox, &["notes.txt"]);
    let up = SimProvider::start("up", Script::agent().tool_plan(plan)).await.unwrap();
    // Any model, unchanged: the Anthropic provider first, then the other.
    let config = upstream.serve(ConfigText::new().provider(&an, "anthropic", &["*"]), &up, &["*"]);
    let gw = TestGateway::start(config.build(), keys_for(&["an", "up"])).await;

    let mut run = Run::new(Client::ClaudeCode, &gw.addr.to_string()).model(model);
    if model.is_none() {
        // Leave every model variable unset, as a new user does.
        run.small_model = None;
    }
    let said = run.go(&sandbox, "Read notes.txt and tell me what it says.").await;

    assert!(said.contains(SECRET), "{case}: Claude Code's answer quotes the file it read:\n{said}");
    let sent: Vec<Value> = an.requests().iter().map(Recorded::json).collect();
    assert!(!sent.is_empty(), "{case}: the Anthropic provider was tried first");
    let models: Vec<&str> = sent.iter().filter_map(|b| b["model"].as_str()).collect();
    if let Some(model) = model {
        assert!(models.contains(&model), "{case}: {models:?}");
    }
    assert!(
        sent.iter().any(has_system_turn),
        "{case}: Claude Code sent a system message among its turns (models {models:?})"
    );
    let seen = up.requests();
    assert!(seen.len() >= 2, "{case}: a tool call and its follow-up reached the fallback provider");
    assert!(seen.iter().all(|r| upstream.speaks(&r.path)), "{case}: only its own format");
    assert!(seen.iter().any(|r| mid_system_in(upstream, &r.json())), "{case}: the instruction kept, in place");
    assert!(seen.iter().any(|r| r.json().to_string().contains(SECRET)), "{case}: the Read result went back");
    let listed = gw.admin("/admin/requests?limit=100").await;
    let requests = listed["requests"].as_array().unwrap();
    let answered: Vec<&Value> = requests.iter().filter(|r| r["endpoint"] == "/v1/messages").collect();
    for r in &answered {
        assert_eq!(r["outcome"], "ok", "{case}: {r}");
        assert_eq!(r["provider"], "up", "{case}: {r}");
    }
    // The session falls back once, then stays on the provider that
    // served it (policy.session_stick): no request of it goes to the
    // Anthropic provider first again.
    assert!(answered.iter().any(|r| r["fallback"] == true), "{case}: {answered:?}");
    for r in answered.iter().filter(|r| r["fallback"] == false) {
        assert_eq!(r["attempt_count"], 1, "{case}: after the fallback, straight to the provider that served it: {r}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_on_a_current_model_falls_back_to_every_other_kind() {
    for upstream in [Upstream::Chat, Upstream::ResponsesOnly, Upstream::Gemini] {
        falls_back(Some("claude-opus-4-8"), upstream).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_on_its_default_model_falls_back_to_every_other_kind() {
    for upstream in [Upstream::Chat, Upstream::ResponsesOnly, Upstream::Gemini] {
        falls_back(None, upstream).await;
    }
}
