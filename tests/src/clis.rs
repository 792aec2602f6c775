//! The real coding CLIs, driven offline: where they are installed, a
//! sandbox (home and project folders) for one run, how each is pointed at a
//! base URL, and the provider kinds a test can serve them from.
//!
//! The CLIs come from npm at the versions in `tests/clis/package.json`:
//! `.ci/run` installs them (`npm ci --prefix tests/clis`);
//! `SWITCHYARD_TEST_CLIS` names another `node_modules/.bin`. Each runs with
//! an environment of its own (a fresh `HOME`, nothing inherited) and under
//! `timeout`, which kills its whole process group, so a hung CLI fails the
//! test instead of hanging the suite.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::json;
use switchyard_sim::{SimProvider, ToolPlan};

use crate::ConfigText;

mod opencode_aider;
pub use opencode_aider::{aider_bin, aider_edit, aider_version};

/// How long one CLI run may take before it is killed.
pub const CLI_LIMIT: Duration = Duration::from_secs(120);

/// What the file the CLIs read says; their final answers must quote it.
pub const SECRET: &str = "the switchyard cross-check word is heliotrope-7421";
/// What a second file says, for turns with two tool calls.
pub const OTHER: &str = "the second file says ultramarine";

/// The folder holding the CLIs' executables.
pub fn bin_dir() -> PathBuf {
    match std::env::var_os("SWITCHYARD_TEST_CLIS") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("clis/node_modules/.bin"),
    }
}

/// An installed CLI's executable.
pub fn cli(name: &str) -> PathBuf {
    let bin = bin_dir();
    assert!(
        bin.join(name).exists(),
        "no {name}: run `npm ci --prefix tests/clis` at the workspace root, or set SWITCHYARD_TEST_CLIS"
    );
    bin.join(name)
}

/// The version of an npm package installed in `tests/clis`.
pub fn installed_version(package: &str) -> String {
    let manifest = bin_dir().join("..").join(package).join("package.json");
    let text = std::fs::read_to_string(&manifest).unwrap_or_else(|e| panic!("{}: {e}", manifest.display()));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["version"].as_str().unwrap_or_default().to_string()
}

/// A home and a project folder for one CLI run, the project holding the files to read.
#[derive(Debug)]
pub struct Sandbox {
    _dir: tempfile::TempDir,
    pub home: PathBuf,
    pub project: PathBuf,
}

impl Default for Sandbox {
    fn default() -> Sandbox {
        Sandbox::new()
    }
}

impl Sandbox {
    pub fn new() -> Sandbox {
        let dir = tempfile::tempdir().unwrap();
        let (home, project) = (dir.path().join("home"), dir.path().join("project"));
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&project).unwrap();
        std::fs::write(project.join("notes.txt"), format!("{SECRET}\n")).unwrap();
        std::fs::write(project.join("other.txt"), format!("{OTHER}\n")).unwrap();
        Sandbox { _dir: dir, home, project }
    }

    /// The folder the sandbox lives in (home and project are under it).
    pub fn root(&self) -> &Path {
        self._dir.path()
    }

    /// The absolute path of a file in the project (the file tools want one).
    pub fn file(&self, name: &str) -> String {
        self.project.join(name).display().to_string()
    }

    /// `program args` in the project folder with only `envs` and a user's
    /// basics in its environment, under `timeout`; panics unless it succeeds.
    pub async fn run(&self, program: &Path, args: &[&str], envs: &[(&str, String)]) -> String {
        let (ok, text) = self.try_run(program, args, envs).await;
        assert!(ok, "{} failed:\n{text}", program.display());
        text
    }

    /// [`Sandbox::run`], returning whether it succeeded and what it printed.
    pub async fn try_run(&self, program: &Path, args: &[&str], envs: &[(&str, String)]) -> (bool, String) {
        let what = program.file_name().unwrap().to_string_lossy().to_string();
        let path = format!("{}:/usr/local/bin:/usr/bin:/bin", program.parent().unwrap().display());
        let mut cmd = tokio::process::Command::new("timeout");
        // `timeout` signals the process group it leads: the CLI and whatever it started.
        cmd.args(["-k", "5", &CLI_LIMIT.as_secs().to_string()]).arg(program).args(args);
        cmd.env_clear().env("PATH", path).env("HOME", &self.home).env("LANG", "C.UTF-8");
        cmd.envs(envs.iter().map(|(k, v)| (k, v)));
        cmd.current_dir(&self.project).stdin(Stdio::null()).kill_on_drop(true);
        let run = cmd.output();
        let out = tokio::time::timeout(CLI_LIMIT + Duration::from_secs(15), run)
            .await
            .unwrap_or_else(|_| panic!("{what} outlived its timeout"))
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert_ne!(out.status.code(), Some(124), "{what} timed out after {CLI_LIMIT:?}:\n{text}");
        (out.status.success(), format!("{what} ({}):\n{text}", out.status))
    }
}

/// A coding CLI, and how a test points it at the gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    ClaudeCode,
    Codex,
    GeminiCli,
    /// opencode: Chat Completions, or Messages for a `claude-*` model.
    Opencode,
    /// aider (PyPI, in `.venv-aider`): Chat Completions, or Messages for an
    /// `anthropic/*` model. Its "tool run" is an edit in the reply's text.
    Aider,
}

impl Client {
    pub const ALL: [Client; 3] = [Client::ClaudeCode, Client::Codex, Client::GeminiCli];
    /// The clients added later, with tests of their own (tests/tests/opencode_aider.rs).
    pub const MORE: [Client; 2] = [Client::Opencode, Client::Aider];

    /// The model the older end-to-end tests ask for: one each CLI knows
    /// (Codex offers `apply_patch` only for models in its own catalogue).
    pub fn model(self) -> &'static str {
        match self {
            Client::ClaudeCode => "claude-sonnet-4-5",
            Client::Codex => "gpt-5.5",
            Client::GeminiCli => "gemini-2.5-pro",
            Client::Opencode | Client::Aider => "gpt-4.1",
        }
    }

    /// Its npm package in `tests/clis` (aider's is a PyPI package, in `.venv-aider`).
    pub fn package(self) -> &'static str {
        match self {
            Client::ClaudeCode => "@anthropic-ai/claude-code",
            Client::Codex => "@openai/codex",
            Client::GeminiCli => "@google/gemini-cli",
            Client::Opencode => "opencode-ai",
            Client::Aider => "aider-chat",
        }
    }

    /// The provider kind that speaks its format (no translation there).
    pub fn native(self) -> Upstream {
        match self {
            Client::ClaudeCode => Upstream::Anthropic,
            Client::Codex => Upstream::Responses,
            Client::GeminiCli => Upstream::Gemini,
            Client::Opencode | Client::Aider => Upstream::Chat,
        }
    }

    /// The calls that read `files`, in this CLI's own tools (none for
    /// aider, which offers no tools: see [`aider_edit`]).
    pub fn read_plan(self, sandbox: &Sandbox, files: &[&str]) -> ToolPlan {
        if self == Client::Aider {
            return ToolPlan::default();
        }
        let call = |file: &str| match self {
            Client::ClaudeCode => ("Read", json!({ "file_path": sandbox.file(file) })),
            Client::Codex => ("exec_command", json!({ "cmd": format!("cat {file}") })),
            Client::GeminiCli => ("read_file", json!({ "file_path": sandbox.file(file) })),
            Client::Opencode => ("read", json!({ "filePath": sandbox.file(file) })),
            Client::Aider => unreachable!("aider offers no tools"),
        };
        files.iter().fold(ToolPlan::default(), |plan, file| {
            let (name, args) = call(file);
            plan.and_call(name, args)
        })
    }

    /// Runs the CLI once, non-interactively, on `prompt` against `gw` with
    /// [`Client::model`]; returns what it printed.
    pub async fn run(self, sandbox: &Sandbox, gw: &crate::TestGateway, prompt: &str) -> String {
        let run = Run::new(self, &gw.addr.to_string()).model(Some(self.model()));
        run.go(sandbox, prompt).await
    }
}

/// One run of a CLI: where it points, which model, which extra arguments.
#[derive(Debug, Clone)]
pub struct Run {
    pub client: Client,
    /// `127.0.0.1:port` of the gateway or provider it talks to.
    pub addr: String,
    /// The model it is told to use; `None` leaves the CLI's own default.
    pub model: Option<String>,
    /// The model for side requests (Claude Code's small model); defaults to `model`.
    pub small_model: Option<String>,
    /// Arguments after the CLI's own non-interactive ones.
    pub args: Vec<String>,
    /// Extra environment.
    pub envs: Vec<(String, String)>,
}

impl Run {
    pub fn new(client: Client, addr: &str) -> Run {
        Run { client, addr: addr.to_string(), model: None, small_model: None, args: Vec::new(), envs: Vec::new() }
    }

    pub fn model(mut self, model: Option<&str>) -> Run {
        self.model = model.map(str::to_string);
        self
    }

    pub fn small_model(mut self, model: &str) -> Run {
        self.small_model = Some(model.to_string());
        self
    }

    pub fn arg(mut self, arg: &str) -> Run {
        self.args.push(arg.to_string());
        self
    }

    pub fn env(mut self, key: &str, value: &str) -> Run {
        self.envs.push((key.to_string(), value.to_string()));
        self
    }

    /// The program, its arguments and environment for `prompt`.
    fn command(&self, sandbox: &Sandbox, prompt: &str) -> (PathBuf, Vec<String>, Vec<(&'static str, String)>) {
        let mut args: Vec<String>;
        let mut envs: Vec<(&'static str, String)>;
        let program = match self.client {
            Client::ClaudeCode => {
                envs = vec![
                    ("ANTHROPIC_BASE_URL", format!("http://{}", self.addr)),
                    ("ANTHROPIC_API_KEY", "sk-local-client".to_string()),
                    ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".to_string()),
                    ("DISABLE_TELEMETRY", "1".to_string()),
                    ("DISABLE_AUTOUPDATER", "1".to_string()),
                ];
                if let Some(model) = &self.model {
                    envs.push(("ANTHROPIC_MODEL", model.clone()));
                }
                // Side requests (titles, summaries) ask for the small model.
                if let Some(small) = self.small_model.as_ref().or(self.model.as_ref()) {
                    envs.push(("ANTHROPIC_SMALL_FAST_MODEL", small.clone()));
                    envs.push(("ANTHROPIC_DEFAULT_HAIKU_MODEL", small.clone()));
                }
                args = vec!["-p".into(), prompt.into(), "--allowedTools".into(), "Read".into()];
                cli("claude")
            }
            Client::Codex => {
                let model = self.model.as_deref().unwrap_or(Client::Codex.model());
                let home = codex_home(sandbox, &format!("http://{}/v1", self.addr), model);
                envs = vec![
                    ("CODEX_HOME", home.display().to_string()),
                    ("SWITCHYARD_TOKEN", "sk-local-client".to_string()),
                ];
                // Its read-only sandbox cannot start with CODEX_HOME under the
                // temp folder, hence full access (in the test's own folder).
                args = ["exec", "--skip-git-repo-check", "-s", "danger-full-access"].map(String::from).to_vec();
                args.extend(self.args.iter().cloned());
                args.push(prompt.into());
                cli("codex")
            }
            Client::GeminiCli => {
                std::fs::create_dir_all(sandbox.home.join(".gemini")).unwrap();
                std::fs::write(sandbox.home.join(".gemini/settings.json"), GEMINI_SETTINGS).unwrap();
                envs = vec![
                    ("GOOGLE_GEMINI_BASE_URL", format!("http://{}", self.addr)),
                    ("GEMINI_API_KEY", "sk-local-client".to_string()),
                    ("GEMINI_CLI_TRUST_WORKSPACE", "true".to_string()),
                ];
                args = vec!["-p".into(), prompt.into()];
                if let Some(model) = &self.model {
                    args.extend(["-m".to_string(), model.clone()]);
                }
                args.push("--skip-trust".into());
                cli("gemini")
            }
            // These two place the extra arguments themselves.
            Client::Opencode => {
                (args, envs) = opencode_aider::opencode(self, sandbox, prompt);
                cli("opencode")
            }
            Client::Aider => {
                (args, envs) = opencode_aider::aider(self, sandbox, prompt);
                aider_bin()
            }
        };
        if !matches!(self.client, Client::Codex | Client::Opencode | Client::Aider) {
            args.extend(self.args.iter().cloned());
        }
        (program, args, envs)
    }

    /// Runs it on `prompt`; panics unless it succeeds. Returns what it printed.
    pub async fn go(&self, sandbox: &Sandbox, prompt: &str) -> String {
        let (ok, text) = self.try_go(sandbox, prompt).await;
        assert!(ok, "{text}");
        text
    }

    /// Runs it on `prompt`: whether it succeeded, and what it printed.
    pub async fn try_go(&self, sandbox: &Sandbox, prompt: &str) -> (bool, String) {
        let (program, args, envs) = self.command(sandbox, prompt);
        let extra: Vec<(&str, String)> = self.envs.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut all: Vec<(&str, String)> = envs;
        all.extend(extra);
        sandbox.try_run(&program, &args, &all).await
    }
}

/// Codex pointed at `base_url` (ending in `/v1`) for `model`, through its config file.
pub fn codex_home(sandbox: &Sandbox, base_url: &str, model: &str) -> PathBuf {
    let home = sandbox.home.join(".codex");
    std::fs::create_dir_all(&home).unwrap();
    let config = format!(
        "model_provider = \"switchyard\"\nmodel = \"{model}\"\napproval_policy = \"never\"\n\n\
         [model_providers.switchyard]\nname = \"Switchyard\"\nbase_url = \"{base_url}\"\nwire_api = \"responses\"\n\
         env_key = \"SWITCHYARD_TOKEN\"\n\n[analytics]\nenabled = false\n"
    );
    std::fs::write(home.join("config.toml"), config).unwrap();
    home
}

/// Gemini CLI's settings: an API key (with only a base URL it picks a
/// gateway auth type, then refuses it), no folder-trust prompt, nothing
/// sent anywhere but the gateway.
pub const GEMINI_SETTINGS: &str = r#"{
  "security": { "auth": { "selectedType": "gemini-api-key" }, "folderTrust": { "enabled": false } },
  "privacy": { "usageStatisticsEnabled": false },
  "telemetry": { "enabled": false },
  "general": { "disableAutoUpdate": true, "disableUpdateNag": true }
}
"#;

/// A simulated provider's kind, as configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upstream {
    /// OpenAI-kind, Chat Completions only.
    Chat,
    /// OpenAI-kind, Chat Completions and Responses.
    Responses,
    /// OpenAI-kind, Responses only (`chat = false`: OpenAI's Codex models).
    ResponsesOnly,
    Anthropic,
    Gemini,
}

impl Upstream {
    pub const ALL: [Upstream; 5] =
        [Upstream::Chat, Upstream::Responses, Upstream::ResponsesOnly, Upstream::Anthropic, Upstream::Gemini];

    pub fn serve(self, config: ConfigText, sim: &SimProvider, models: &[&str]) -> ConfigText {
        match self {
            Upstream::Chat => config.chat_only(sim, models),
            Upstream::Responses => config.provider(sim, "openai", models),
            Upstream::ResponsesOnly => config.responses_only(sim, models),
            Upstream::Anthropic => config.provider(sim, "anthropic", models),
            Upstream::Gemini => config.provider_at(sim.name(), &sim.gemini_base_url(), "gemini", models),
        }
    }

    /// Whether a request to `path` is in a format this provider speaks.
    pub fn speaks(self, path: &str) -> bool {
        match self {
            Upstream::Chat => path == "/v1/chat/completions",
            Upstream::Responses => path == "/v1/chat/completions" || path == "/v1/responses",
            Upstream::ResponsesOnly => path == "/v1/responses",
            Upstream::Anthropic => path == "/v1/messages",
            Upstream::Gemini => path.starts_with("/v1beta/models/") && path.ends_with(":streamGenerateContent"),
        }
    }
}
