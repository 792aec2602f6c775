//! Captures the request corpus: what the real clients send, byte for byte
//! but scrubbed, as fixtures for the translation tests
//! (`crates/core/src/protocol/translate/testdata/corpus/<client>/<scenario>[-n].json`).
//!
//! Each scenario points the client (the CLIs pinned in `tests/clis`, the
//! Python SDKs of `.venv`) straight at a simulated provider, with no gateway
//! in between, runs it, and writes every JSON request the provider saw.
//! Usage: `capture-corpus [CLIENT...]` (labels such as `claude-code`; none:
//! all of them). A captured client's old fixtures are replaced.
//! See docs/clients.md.

// A capture tool: failing loudly on a broken setup is the point.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod scenarios;
mod scrub;

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use switchyard_sim::{Recorded, Script, SimProvider};
use switchyard_tests::clis::{installed_version, Run, Sandbox};

use scenarios::{Provider, Scenario, Source, Step};
use scrub::{Scrubber, OMITTED_HEADERS};

/// The credential every client is given.
const CLIENT_KEY: &str = "sk-local-client";

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let wanted: Vec<String> = std::env::args().skip(1).collect();
    let out = corpus_dir();
    let scenarios: Vec<Scenario> = scenarios::all().into_iter().filter(|s| is_wanted(s, &wanted)).collect();
    for scenario in &scenarios {
        clear(&out.join(scenario.source.label()), scenario.name);
    }
    let mut written = 0;
    for scenario in &scenarios {
        let n = capture(scenario, &out).await;
        eprintln!("{}/{}: {n} fixture(s)", scenario.source.label(), scenario.name);
        written += n;
    }
    eprintln!("{written} fixtures in {}", out.display());
}

/// Where the corpus lives in the source tree.
fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../crates/core/src/protocol/translate/testdata/corpus")
}

/// Whether the command line asks for a scenario: by its client's label, or
/// as `label/scenario`; an empty command line asks for all of them.
fn is_wanted(scenario: &Scenario, wanted: &[String]) -> bool {
    let label = scenario.source.label();
    let full = format!("{label}/{}", scenario.name);
    wanted.is_empty() || wanted.iter().any(|w| *w == label || *w == full)
}

/// Removes a scenario's old fixtures (`name.json`, `name-N.json`), so that
/// a request it no longer sends leaves no file behind.
fn clear(dir: &Path, name: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let file = entry.file_name().to_string_lossy().to_string();
        let Some(stem) = file.strip_suffix(".json") else { continue };
        let numbered = stem.strip_prefix(name).and_then(|rest| rest.strip_prefix('-'));
        if stem == name || numbered.is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())) {
            std::fs::remove_file(entry.path()).unwrap();
        }
    }
}

/// Runs one scenario and writes its fixtures; how many.
async fn capture(scenario: &Scenario, out: &Path) -> usize {
    let sandbox = Sandbox::new();
    (scenario.setup)(&sandbox);
    let sim = SimProvider::start(&scenario.source.label(), Script::ok()).await.unwrap();
    let mut before = 0;
    for (i, step) in scenario.steps.iter().enumerate() {
        before = sim.requests().len();
        sim.set_script(script(&step.provider, &sandbox, &sim.root_url()));
        let (ok, said) = run(scenario, step, &sandbox, &sim).await;
        let last = i + 1 == scenario.steps.len();
        if std::env::var_os("CAPTURE_VERBOSE").is_some() {
            eprintln!(
                "{}/{} step {i}: {} request(s) so far\n{said}",
                scenario.source.label(),
                scenario.name,
                sim.requests().len()
            );
        }
        if !ok {
            eprintln!(
                "{}/{} step {i} failed{}:\n{said}",
                scenario.source.label(),
                scenario.name,
                if last { " (kept what it sent)" } else { "" }
            );
        }
    }
    let captured: Vec<Recorded> = sim.requests().into_iter().skip(before).collect();
    write_fixtures(scenario, &sandbox, sim.addr().port(), &captured, out)
}

fn script(provider: &Provider, sandbox: &Sandbox, root: &str) -> Script {
    match provider {
        Provider::Text => Script::ok(),
        Provider::Tools(plan) => Script::agent().tool_plan(plan(sandbox, root)),
    }
}

/// One run of the scenario's client: whether it succeeded, what it printed.
async fn run(scenario: &Scenario, step: &Step, sandbox: &Sandbox, sim: &SimProvider) -> (bool, String) {
    match scenario.source {
        Source::Cli(client) => {
            let mut run = Run::new(client, &sim.addr().to_string()).model(scenario.model);
            run.args = step.args.clone();
            run.envs = step.envs.clone();
            run.try_go(sandbox, &step.prompt).await
        }
        Source::PythonSdk(_) => {
            let (script, root) = (sdk_script(), sim.root_url());
            let args = [script.as_str(), step.prompt.as_str(), root.as_str()];
            sandbox.try_run(&python(), &args, &[("NO_PROXY", "127.0.0.1".to_string())]).await
        }
    }
}

fn sdk_script() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python/corpus_sdks.py").display().to_string()
}

/// The Python with the SDKs: `SWITCHYARD_TEST_PYTHON`, else the workspace's `.venv`.
fn python() -> PathBuf {
    match std::env::var_os("SWITCHYARD_TEST_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/python"),
    }
}

/// The version of the client that sent a scenario's requests.
fn version(source: Source) -> String {
    match source {
        Source::Cli(switchyard_tests::clis::Client::Aider) => switchyard_tests::clis::aider_version(),
        Source::Cli(client) => installed_version(client.package()),
        Source::PythonSdk(package) => {
            let out =
                std::process::Command::new(python()).arg(sdk_script()).args(["version", package]).output().unwrap();
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        }
    }
}

/// Writes the requests of one scenario as fixtures, one side request of a
/// kind only; returns how many.
fn write_fixtures(scenario: &Scenario, sandbox: &Sandbox, port: u16, captured: &[Recorded], out: &Path) -> usize {
    let root = sandbox.root().display().to_string();
    let secrets = [CLIENT_KEY];
    let mut scrubber = Scrubber::new(&root, port, &secrets);
    let version = version(scenario.source);
    let mut seen = HashSet::new();
    let mut fixtures = Vec::new();
    for request in captured {
        let Ok(body) = serde_json::from_slice::<Value>(&request.body) else { continue };
        let fixture = fixture(scenario, &version, request, &scrubber.json(&body), &mut scrubber);
        let kind = kind(&fixture);
        if std::env::var_os("CAPTURE_VERBOSE").is_some() {
            eprintln!(
                "  {} {}",
                request.path,
                kind.chars().rev().take(120).collect::<String>().chars().rev().collect::<String>()
            );
        }
        if seen.insert(kind) {
            fixtures.push(fixture);
        }
    }
    let dir = out.join(scenario.source.label());
    std::fs::create_dir_all(&dir).unwrap();
    let many = fixtures.len() > 1;
    for (i, fixture) in fixtures.iter().enumerate() {
        let name = if many { format!("{}-{}.json", scenario.name, i + 1) } else { format!("{}.json", scenario.name) };
        let text = serde_json::to_string_pretty(fixture).unwrap() + "\n";
        let leaks = scrub::leaks(&text, &root, &secrets);
        assert!(leaks.is_empty(), "{name} still holds {leaks:?}");
        std::fs::write(dir.join(name), text).unwrap();
    }
    fixtures.len()
}

fn fixture(scenario: &Scenario, version: &str, request: &Recorded, body: &Value, scrubber: &mut Scrubber) -> Value {
    let mut headers = BTreeMap::new();
    for name in request.headers.keys() {
        if OMITTED_HEADERS.contains(&name.as_str()) {
            continue;
        }
        let values: Vec<String> = request
            .headers
            .get_all(name)
            .iter()
            .map(|v| scrubber.header(name.as_str(), &String::from_utf8_lossy(v.as_bytes())))
            .collect();
        headers.insert(name.as_str().to_string(), values.join(", "));
    }
    json!({
        "client": scenario.source.label(),
        "version": version,
        "scenario": scenario.name,
        "note": scenario.note,
        "method": request.method.as_str(),
        "path": request.path,
        "query": request.query.as_deref().map(|q| scrubber.query(q)),
        "headers": headers,
        "body": body,
    })
}

/// What makes two requests of one run the same kind, so that a side request
/// sent again (Gemini CLI's classifier before each turn) is kept once: the
/// endpoint, the model, the system prompt, the tools offered, and whether
/// the conversation carries a tool result yet.
fn kind(fixture: &Value) -> String {
    let body = &fixture["body"];
    let system = [&body["system"], &body["instructions"], &body["systemInstruction"]]
        .iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join("|");
    let result = has_tool_result(body);
    let tools = tool_names(body).join(",");
    format!("{} {} {system} {tools} {result}", fixture["path"], body["model"])
}

/// Whether a body carries a tool result, in any format (looked for in its
/// structure: a system prompt may well name the fields).
fn has_tool_result(value: &Value) -> bool {
    const TYPES: [&str; 3] = ["tool_result", "function_call_output", "custom_tool_call_output"];
    match value {
        Value::Object(map) => {
            let typed = map.get("type").and_then(Value::as_str).is_some_and(|t| TYPES.contains(&t));
            typed
                || map.get("role").is_some_and(|r| r == "tool")
                || map.contains_key("functionResponse")
                || map.values().any(has_tool_result)
        }
        Value::Array(items) => items.iter().any(has_tool_result),
        _ => false,
    }
}

/// The names of the tools a body offers, in any format.
fn tool_names(body: &Value) -> Vec<String> {
    let tools = body["tools"].as_array().cloned().unwrap_or_default();
    let mut names = Vec::new();
    for tool in &tools {
        let name = tool["name"].as_str().or_else(|| tool["function"]["name"].as_str());
        names.extend(name.map(str::to_string));
        for declared in tool["functionDeclarations"].as_array().into_iter().flatten() {
            names.extend(declared["name"].as_str().map(str::to_string));
        }
    }
    names
}
