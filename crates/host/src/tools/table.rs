//! Every tool `connect` knows, in one table: where it keeps its settings,
//! what it is told, how to recognise its requests, what to say about it.

use serde_json::{json, Value};

use super::formats::Format;
use super::{Env, Target};

/// One tool Switchyard can point at itself.
#[derive(Debug)]
pub struct Tool {
    /// The name on the command line: `switchyard connect <id>`.
    pub id: &'static str,
    pub name: &'static str,
    /// The program looked for on `PATH`.
    pub program: &'static str,
    /// Its requests' `user-agent` starts with one of these.
    pub user_agents: &'static [&'static str],
    pub files: &'static [ToolFile],
    /// Which file and key hold the base URL the tool will use.
    pub base_url_at: (usize, &'static [&'static str]),
    /// Said whenever the tool is connected.
    pub note: Option<&'static str>,
}

/// One settings file of a tool and what `connect` sets in it.
#[derive(Debug)]
pub struct ToolFile {
    pub place: Place,
    pub format: Format,
    pub edits: fn(&Target) -> Vec<Edit>,
}

/// One value set by `connect`: a key path and its value.
#[derive(Debug, Clone, PartialEq)]
pub struct Edit {
    pub path: &'static [&'static str],
    pub value: Value,
}

fn edit(path: &'static [&'static str], value: impl Into<Value>) -> Edit {
    Edit { path, value: value.into() }
}

/// Where a settings file lives: under a folder a variable may move
/// (`CODEX_HOME`), else under the home folder.
#[derive(Debug)]
pub struct Place {
    /// The variable naming a folder, and the subfolder of it the file is in.
    pub dir_var: Option<(&'static str, &'static str)>,
    /// The folder under home without that variable.
    pub home_dir: &'static str,
    pub file: &'static str,
}

impl Place {
    pub fn path(&self, env: &Env) -> std::path::PathBuf {
        match self.dir_var.and_then(|(var, sub)| Some((env.var(var)?, sub))) {
            Some((dir, sub)) => std::path::PathBuf::from(dir).join(sub).join(self.file),
            None => env.home.join(self.home_dir).join(self.file),
        }
    }
}

pub const TOOLS: &[Tool] = &[
    Tool {
        id: "claude",
        name: "Claude Code",
        program: "claude",
        user_agents: &["claude-cli/", "claude-code/"],
        // Documented: `~/.claude/settings.json`, key `env` (CLAUDE_CONFIG_DIR moves the folder).
        files: &[ToolFile {
            place: Place { dir_var: Some(("CLAUDE_CONFIG_DIR", "")), home_dir: ".claude", file: "settings.json" },
            format: Format::Json,
            edits: claude,
        }],
        base_url_at: (0, &["env", "ANTHROPIC_BASE_URL"]),
        note: None,
    },
    Tool {
        id: "codex",
        name: "Codex",
        program: "codex",
        user_agents: &["codex_exec/", "codex_cli_rs/", "codex-"],
        // Documented: `$CODEX_HOME/config.toml`, a `[model_providers.<id>]` and `model_provider`.
        files: &[ToolFile {
            place: Place { dir_var: Some(("CODEX_HOME", "")), home_dir: ".codex", file: "config.toml" },
            format: Format::Toml,
            edits: codex,
        }],
        base_url_at: (0, &["model_providers", "switchyard", "base_url"]),
        note: None,
    },
    Tool {
        id: "gemini",
        name: "Gemini CLI",
        program: "gemini",
        // Gemini CLI names itself `GeminiCLI-tui/…` in its interactive mode.
        user_agents: &["GeminiCLI/", "GeminiCLI-"],
        // The base URL and key are variables, which the CLI also reads from
        // `~/.gemini/.env`; with a base URL alone it picks an auth type it then
        // refuses, so settings.json names the API-key one.
        files: &[
            ToolFile {
                place: Place { dir_var: None, home_dir: ".gemini", file: "settings.json" },
                format: Format::Json,
                edits: gemini_settings,
            },
            ToolFile {
                place: Place { dir_var: None, home_dir: ".gemini", file: ".env" },
                format: Format::Dotenv,
                edits: gemini_env,
            },
        ],
        base_url_at: (1, &["GOOGLE_GEMINI_BASE_URL"]),
        note: None,
    },
    Tool {
        id: "aider",
        name: "aider",
        program: "aider",
        user_agents: &["aider/"],
        // Documented: `.aider.conf.yml` in the home folder, the options' long names as keys.
        files: &[ToolFile {
            place: Place { dir_var: None, home_dir: "", file: ".aider.conf.yml" },
            format: Format::FlatYaml,
            edits: aider,
        }],
        base_url_at: (0, &["openai-api-base"]),
        note: Some("aider reaches the gateway as an OpenAI-compatible API: name models `openai/<model>`"),
    },
    Tool {
        id: "opencode",
        name: "opencode",
        program: "opencode",
        user_agents: &["opencode/"],
        // Documented: the global config `~/.config/opencode/opencode.json`, custom
        // providers under `provider` with the OpenAI-compatible AI SDK package.
        files: &[ToolFile {
            place: Place {
                dir_var: Some(("XDG_CONFIG_HOME", "opencode")),
                home_dir: ".config/opencode",
                file: "opencode.json",
            },
            format: Format::Json,
            edits: opencode,
        }],
        base_url_at: (0, &["provider", "switchyard", "options", "baseURL"]),
        note: None,
    },
];

/// The tool named `id` on the command line.
pub fn find(id: &str) -> Option<&'static Tool> {
    TOOLS.iter().find(|t| t.id == id)
}

fn claude(t: &Target) -> Vec<Edit> {
    let mut edits = vec![edit(&["env", "ANTHROPIC_BASE_URL"], t.base.clone())];
    // A bearer token, not ANTHROPIC_API_KEY: Claude Code asks before using an API key it did not see before.
    edits.push(edit(&["env", "ANTHROPIC_AUTH_TOKEN"], t.key()));
    if let Some(model) = &t.model {
        for var in [
            &["env", "ANTHROPIC_MODEL"],
            &["env", "ANTHROPIC_SMALL_FAST_MODEL"],
            &["env", "ANTHROPIC_DEFAULT_HAIKU_MODEL"],
        ] {
            edits.push(edit(var, model.clone()));
        }
    }
    // The user's own status line is in the backup; `disconnect` restores it.
    if let Some(command) = &t.status_line {
        edits.push(edit(&["statusLine"], json!({ "type": "command", "command": command })));
    }
    edits
}

fn codex(t: &Target) -> Vec<Edit> {
    let mut provider = json!({ "name": "Switchyard", "base_url": t.openai_base(), "wire_api": "responses" });
    // Without the access token Codex needs no key at all: none is written.
    if t.token.is_some() {
        provider["experimental_bearer_token"] = json!(t.key());
    }
    let mut edits = vec![edit(&["model_provider"], "switchyard"), edit(&["model_providers", "switchyard"], provider)];
    if let Some(model) = &t.model {
        edits.push(edit(&["model"], model.clone()));
    }
    edits
}

fn gemini_settings(_: &Target) -> Vec<Edit> {
    vec![edit(&["security", "auth", "selectedType"], "gemini-api-key")]
}

fn gemini_env(t: &Target) -> Vec<Edit> {
    let mut edits = vec![edit(&["GOOGLE_GEMINI_BASE_URL"], t.base.clone()), edit(&["GEMINI_API_KEY"], t.key())];
    if let Some(model) = &t.model {
        edits.push(edit(&["GEMINI_MODEL"], model.clone()));
    }
    edits
}

fn aider(t: &Target) -> Vec<Edit> {
    let mut edits = vec![edit(&["openai-api-base"], t.openai_base()), edit(&["openai-api-key"], t.key())];
    if let Some(model) = &t.model {
        edits.push(edit(&["model"], format!("openai/{model}")));
    }
    edits
}

fn opencode(t: &Target) -> Vec<Edit> {
    let models = t.model.iter().map(|m| (m.clone(), json!({ "name": m }))).collect::<serde_json::Map<_, _>>();
    let provider = json!({
        "npm": "@ai-sdk/openai-compatible",
        "name": "Switchyard",
        "options": { "baseURL": t.openai_base(), "apiKey": t.key() },
        "models": models,
    });
    let mut edits = vec![edit(&["provider", "switchyard"], provider)];
    if let Some(model) = &t.model {
        edits.push(edit(&["model"], format!("switchyard/{model}")));
    }
    edits
}
