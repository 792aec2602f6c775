//! opencode and aider, driven offline against a base URL.
//!
//! - opencode (npm `opencode-ai`, a compiled binary shipped in a platform
//!   package) reads `~/.config/opencode/opencode.json`: one provider,
//!   `switchyard`, served by its bundled AI SDK packages (nothing is
//!   downloaded): `@ai-sdk/openai-compatible` (Chat Completions) or, for a
//!   `claude-*` model, `@ai-sdk/anthropic` (Messages). Its tools run without
//!   asking under `"permission": {"*": "allow"}`.
//! - aider (PyPI `aider-chat`, in `.venv-aider`) talks through litellm:
//!   `openai/<model>` to `OPENAI_API_BASE` (Chat Completions), or
//!   `anthropic/<model>` to `ANTHROPIC_API_BASE` (Messages). It offers no
//!   tools: its tool run is an edit the reply carries as text
//!   ([`aider_edit`]), which it applies to the file on disk.

use std::path::PathBuf;

use serde_json::json;

use super::{Run, Sandbox};

/// The opencode version the config stubs name (`tests/clis/package.json`).
const OPENCODE_VERSION: &str = "1.18.33";

/// A registry address nothing listens on: a download either CLI tries
/// despite its configuration fails at once instead of reaching the network.
const NO_REGISTRY: &str = "http://127.0.0.1:9/";

/// The arguments and environment of an opencode run on `prompt`.
pub(super) fn opencode(run: &Run, sandbox: &Sandbox, prompt: &str) -> (Vec<String>, Vec<(&'static str, String)>) {
    let model = run.model.as_deref().unwrap_or(super::Client::Opencode.model());
    write_opencode_config(sandbox, &run.addr, model);
    let envs = vec![
        ("OPENCODE_DISABLE_AUTOUPDATE", "1".to_string()),
        // The model catalogue comes from the binary, not from the web.
        ("OPENCODE_DISABLE_MODELS_FETCH", "1".to_string()),
        ("OPENCODE_DISABLE_DEFAULT_PLUGINS", "1".to_string()),
        ("OPENCODE_DISABLE_LSP_DOWNLOAD", "1".to_string()),
        ("OPENCODE_DISABLE_SHARE", "1".to_string()),
        // Not the user's Claude Code prompts or skills (there are none in the sandbox anyway).
        ("OPENCODE_DISABLE_CLAUDE_CODE", "1".to_string()),
        ("npm_config_registry", NO_REGISTRY.to_string()),
    ];
    let mut args = vec!["run".to_string()];
    args.extend(run.args.iter().cloned());
    args.push(prompt.to_string());
    (args, envs)
}

/// opencode's config in the sandbox's home, pointing its one provider at
/// `addr`, and the stub that keeps it from installing its plugin package.
fn write_opencode_config(sandbox: &Sandbox, addr: &str, model: &str) {
    let dir = sandbox.home.join(".config/opencode");
    // Each config folder gets `@opencode-ai/plugin` installed from npm in
    // the background unless it has a node_modules and a lockfile naming it.
    std::fs::create_dir_all(dir.join("node_modules")).unwrap();
    let lock = json!({ "packages": { "": { "dependencies": { "@opencode-ai/plugin": OPENCODE_VERSION } } } });
    std::fs::write(dir.join("package-lock.json"), lock.to_string()).unwrap();
    let npm = if model.starts_with("claude") { "@ai-sdk/anthropic" } else { "@ai-sdk/openai-compatible" };
    let config = json!({
        "autoupdate": false,
        "share": "disabled",
        "model": format!("switchyard/{model}"),
        "small_model": format!("switchyard/{model}"),
        "provider": { "switchyard": {
            "npm": npm,
            "name": "Switchyard",
            "options": { "baseURL": format!("http://{addr}/v1"), "apiKey": "sk-local-client" },
            "models": { model: { "name": model, "tool_call": true } },
        } },
        "permission": { "*": "allow" },
    });
    std::fs::write(dir.join("opencode.json"), serde_json::to_string_pretty(&config).unwrap()).unwrap();
}

/// The installed aider's version.
pub fn aider_version() -> String {
    let out = std::process::Command::new(aider_bin()).arg("--version").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace().last().unwrap_or_default().to_string()
}

/// The aider executable: `.venv-aider` at the workspace root (made by
/// `.ci/run`), or `SWITCHYARD_TEST_AIDER`.
pub fn aider_bin() -> PathBuf {
    let bin = match std::env::var_os("SWITCHYARD_TEST_AIDER") {
        Some(path) => PathBuf::from(path),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.venv-aider/bin/aider"),
    };
    assert!(
        bin.exists(),
        "no aider at {}: run `python3 -m venv .venv-aider && .venv-aider/bin/pip install -r tests/python/aider-requirements.txt`, or set SWITCHYARD_TEST_AIDER",
        bin.display()
    );
    bin
}

/// The arguments and environment of an aider run on `prompt`.
pub(super) fn aider(run: &Run, sandbox: &Sandbox, prompt: &str) -> (Vec<String>, Vec<(&'static str, String)>) {
    let model = run.model.as_deref().unwrap_or(super::Client::Aider.model());
    // litellm's provider prefix picks the format: Messages for anthropic/, else Chat.
    let model = if model.contains('/') { model.to_string() } else { format!("openai/{model}") };
    write_aider_model_info(sandbox, &model);
    let mut envs = vec![
        // litellm reads its price map from the package, not the web.
        ("LITELLM_LOCAL_MODEL_COST_MAP", "True".to_string()),
        ("AIDER_ANALYTICS_DISABLE", "true".to_string()),
        ("PIP_INDEX_URL", NO_REGISTRY.to_string()),
    ];
    if model.starts_with("anthropic/") {
        envs.push(("ANTHROPIC_API_BASE", format!("http://{}", run.addr)));
        envs.push(("ANTHROPIC_API_KEY", "sk-local-client".to_string()));
    } else {
        envs.push(("OPENAI_API_BASE", format!("http://{}/v1", run.addr)));
        envs.push(("OPENAI_API_KEY", "sk-local-client".to_string()));
    }
    let mut args: Vec<String> =
        ["--model", &model, "--weak-model", &model, "--message", prompt].map(String::from).to_vec();
    args.extend(
        [
            "--yes-always",
            "--no-git",
            "--no-check-update",
            "--no-show-model-warnings",
            "--analytics-disable",
            "--no-show-release-notes",
            "--no-pretty",
            "--no-fancy-input",
        ]
        .map(String::from),
    );
    args.extend(run.args.iter().cloned());
    (args, envs)
}

/// aider's copy of litellm's model list, fresh and naming `model`: with
/// none (or an empty one) it downloads the list on every start.
fn write_aider_model_info(sandbox: &Sandbox, model: &str) {
    let dir = sandbox.home.join(".aider/caches");
    std::fs::create_dir_all(&dir).unwrap();
    let (provider, bare) = model.split_once('/').unwrap_or(("openai", model));
    let info = json!({
        "max_input_tokens": 128000,
        "max_output_tokens": 8192,
        "input_cost_per_token": 0.0,
        "output_cost_per_token": 0.0,
        "litellm_provider": provider,
        "mode": "chat",
    });
    let list = json!({ model: info, bare: info });
    std::fs::write(dir.join("model_prices_and_context_window.json"), list.to_string()).unwrap();
}

/// A reply that edits `file` in aider's SEARCH/REPLACE format (its `diff`
/// edit format, the default for the GPT and Claude models it knows).
pub fn aider_edit(file: &str, search: &str, replace: &str) -> String {
    format!(
        "I will change {file}.\n\n{file}\n```\n<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n```\n"
    )
}
