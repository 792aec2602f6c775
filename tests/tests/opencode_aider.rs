//! opencode and aider, the real clients, through the gateway: a plain
//! answer and a tool run each, natively (a Chat provider: both speak Chat
//! Completions) and across formats (an Anthropic, a Gemini and a
//! Responses-only provider), plus each in its other format (Messages)
//! through a Chat provider.
//!
//! - opencode's tool run: its `read` tool on notes.txt; the answer quotes
//!   the file.
//! - aider's tool run: an edit. aider offers no tools; the provider answers
//!   with a SEARCH/REPLACE block for the file given with `--file`, and aider
//!   writes it to disk.
//!
//! Every case checks the answer, that only the provider's own format
//! reached it, and that the gateway recorded every request as `ok`. The
//! cases run one at a time (each CLI start costs a few seconds of both
//! cores). How the CLIs are installed and driven: [`switchyard_tests::clis`].

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::Value;
use switchyard_sim::{Recorded, Script, SimProvider};
use switchyard_tests::clis::{aider_edit, Client, Run, Sandbox, Upstream, SECRET};
use switchyard_tests::{keys_for, ConfigText, TestGateway};

/// The provider kinds each client is served from: its own format first.
const KINDS: [Upstream; 4] = [Upstream::Chat, Upstream::Anthropic, Upstream::Gemini, Upstream::ResponsesOnly];

/// What aider writes over notes.txt's line.
const EDITED: &str = "the switchyard cross-check word was changed by aider";

/// One CLI run at a time across this file's tests.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A gateway serving `model` from `sim` as a provider of kind `upstream`.
async fn gateway(upstream: Upstream, sim: &SimProvider, model: &str) -> TestGateway {
    let alias = format!("{model}=up-model");
    let config = upstream.serve(ConfigText::new(), sim, &[alias.as_str()]);
    TestGateway::start(config.build(), keys_for(&[sim.name()])).await
}

/// The checks every case makes once the CLI is done: at least `min`
/// requests reached the provider, all in its own format, and the gateway
/// recorded every request as `ok`.
async fn only_its_format_and_all_ok(case: &str, gw: &TestGateway, upstream: Upstream, sim: &SimProvider, min: usize) {
    let paths: Vec<String> = sim.requests().iter().map(|r| r.path.clone()).collect();
    assert!(paths.len() >= min, "{case}: at least {min} requests reached the provider: {paths:?}");
    assert!(paths.iter().all(|p| upstream.speaks(p)), "{case}: only the provider's own format: {paths:?}");
    let listed = gw.admin("/admin/requests?limit=100").await;
    let requests = listed["requests"].as_array().unwrap();
    assert!(!requests.is_empty(), "{case}: the gateway recorded the requests");
    for request in requests {
        assert_eq!(request["outcome"], "ok", "{case}: {request}");
    }
}

/// Whether any request to the provider carried `text` anywhere in its body.
fn carried(seen: &[Recorded], text: &str) -> bool {
    seen.iter().any(|r| String::from_utf8_lossy(&r.body).contains(text))
}

/// A plain answer: a provider that answers with text, whatever it is offered.
async fn plain_answer(run: impl Fn(&TestGateway) -> Run, client_model: &str, upstream: Upstream, case: &str) {
    let sandbox = Sandbox::new();
    let sim = SimProvider::start("up", Script::ok()).await.unwrap();
    let gw = gateway(upstream, &sim, client_model).await;

    let said = run(&gw).go(&sandbox, "Say hello.").await;

    assert!(said.contains("Hello from up."), "{case}: the answer is the provider's:\n{said}");
    only_its_format_and_all_ok(case, &gw, upstream, &sim, 1).await;
}

/// opencode reads notes.txt with its `read` tool, and answers quoting it.
async fn opencode_reads(model: &str, upstream: Upstream) {
    let case = format!("opencode ({model}) through {upstream:?}");
    let sandbox = Sandbox::new();
    let plan = Client::Opencode.read_plan(&sandbox, &["notes.txt"]);
    let sim = SimProvider::start("up", Script::agent().tool_plan(plan)).await.unwrap();
    let gw = gateway(upstream, &sim, model).await;

    let run = Run::new(Client::Opencode, &gw.addr.to_string()).model(Some(model));
    let said = run.go(&sandbox, "Read notes.txt and tell me what it says.").await;

    assert!(said.contains("the tool said: "), "{case}: opencode printed the provider's final answer:\n{said}");
    assert!(said.contains(SECRET), "{case}: the answer quotes the file it read:\n{said}");
    let seen = sim.requests();
    assert!(carried(&seen, SECRET), "{case}: the read tool's result went back to the provider");
    only_its_format_and_all_ok(&case, &gw, upstream, &sim, 2).await;
}

/// aider, given notes.txt, applies the provider's SEARCH/REPLACE edit to it.
async fn aider_edits(model: &str, upstream: Upstream) {
    let case = format!("aider ({model}) through {upstream:?}");
    let sandbox = Sandbox::new();
    let edit = aider_edit("notes.txt", SECRET, EDITED);
    let sim = SimProvider::start("up", Script::ok().reply(&edit)).await.unwrap();
    let bare = model.rsplit('/').next().unwrap();
    let gw = gateway(upstream, &sim, bare).await;

    let run = Run::new(Client::Aider, &gw.addr.to_string()).model(Some(model)).arg("--file").arg("notes.txt");
    let said = run.go(&sandbox, "Change the cross-check word in notes.txt.").await;

    let written = std::fs::read_to_string(sandbox.project.join("notes.txt")).unwrap();
    assert_eq!(written, format!("{EDITED}\n"), "{case}: aider applied the edit:\n{said}");
    assert!(said.contains("Applied edit to notes.txt"), "{case}: aider said it applied the edit:\n{said}");
    // The file went to the provider inside the prompt, translated or not.
    assert!(carried(&sim.requests(), SECRET), "{case}: the file's text reached the provider");
    only_its_format_and_all_ok(&case, &gw, upstream, &sim, 1).await;
}

fn run_with(client: Client, model: &str) -> impl Fn(&TestGateway) -> Run + '_ {
    move |gw| Run::new(client, &gw.addr.to_string()).model(Some(model))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencode_answers_through_every_provider_kind() {
    let _turn = ONE_AT_A_TIME.lock().await;
    for upstream in KINDS {
        let case = format!("opencode through {upstream:?}");
        plain_answer(run_with(Client::Opencode, "gpt-4.1"), "gpt-4.1", upstream, &case).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencode_reads_a_file_through_every_provider_kind() {
    let _turn = ONE_AT_A_TIME.lock().await;
    for upstream in KINDS {
        opencode_reads("gpt-4.1", upstream).await;
    }
}

/// opencode's Anthropic provider (Messages), served by a Chat provider.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencode_over_messages_reads_a_file_through_a_chat_provider() {
    let _turn = ONE_AT_A_TIME.lock().await;
    opencode_reads("claude-sonnet-4-5", Upstream::Chat).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aider_answers_through_every_provider_kind() {
    let _turn = ONE_AT_A_TIME.lock().await;
    for upstream in KINDS {
        let case = format!("aider through {upstream:?}");
        plain_answer(run_with(Client::Aider, "gpt-4.1"), "gpt-4.1", upstream, &case).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aider_applies_an_edit_through_every_provider_kind() {
    let _turn = ONE_AT_A_TIME.lock().await;
    for upstream in KINDS {
        aider_edits("gpt-4.1", upstream).await;
    }
}

/// aider through litellm's Anthropic client (Messages), served by a Chat provider.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aider_over_messages_applies_an_edit_through_a_chat_provider() {
    let _turn = ONE_AT_A_TIME.lock().await;
    aider_edits("anthropic/claude-sonnet-4-5", Upstream::Chat).await;
}

/// What each client sends, straight to a simulated provider (no gateway):
/// `cargo test -p switchyard-tests --test opencode_aider -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "prints what the clients send; not a check"]
async fn show_what_each_client_sends() {
    let _turn = ONE_AT_A_TIME.lock().await;
    for (client, model) in [
        (Client::Opencode, "gpt-4.1"),
        (Client::Opencode, "claude-sonnet-4-5"),
        (Client::Aider, "gpt-4.1"),
        (Client::Aider, "anthropic/claude-sonnet-4-5"),
    ] {
        let sandbox = Sandbox::new();
        let plan = client.read_plan(&sandbox, &["notes.txt"]);
        let script = Script::agent().tool_plan(plan).reply(&aider_edit("notes.txt", SECRET, EDITED));
        let sim = SimProvider::start("up", script).await.unwrap();
        let mut run = Run::new(client, &sim.addr().to_string()).model(Some(model));
        if client == Client::Aider {
            run = run.arg("--file").arg("notes.txt");
        }
        let said = run.go(&sandbox, "Read notes.txt and tell me what it says.").await;
        println!("==== {client:?} {model}\n{said}");
        for request in sim.requests() {
            show(&request);
        }
    }
}

fn show(request: &Recorded) {
    let body = request.json();
    let headers: Vec<String> =
        request.headers.iter().map(|(k, v)| format!("{k}: {}", v.to_str().unwrap_or("?"))).collect();
    let fields: Vec<&String> = body.as_object().map(|o| o.keys().collect()).unwrap_or_default();
    let tools: Vec<Value> = body["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| if t["name"].is_null() { t["function"]["name"].clone() } else { t["name"].clone() })
                .collect()
        })
        .unwrap_or_default();
    println!(
        "{} {}{}",
        request.method,
        request.path,
        request.query.as_deref().map(|q| format!("?{q}")).unwrap_or_default()
    );
    println!("  headers: {headers:?}\n  fields: {fields:?}\n  tools: {tools:?}");
}
