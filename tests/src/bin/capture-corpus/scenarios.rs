//! The scenarios the corpus holds, client by client. A scenario is some
//! setup in the sandbox, then one or more runs of the client against the
//! simulated provider; only the last run's requests become fixtures (the
//! earlier ones make the state it continues: a session to resume, a
//! conversation to compact).
//!
//! Adding a client: a [`Source`] variant (its label, version and how it is
//! run) and a function listing its scenarios, named in [`all`].

use serde_json::json;
use switchyard_sim::ToolPlan;
use switchyard_tests::clis::{Client, Sandbox};

/// Who sends the requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Cli(Client),
    /// A scenario of `tests/python/corpus_sdks.py`, with the SDK's
    /// distribution name (for its version).
    PythonSdk(&'static str),
}

impl Source {
    /// The folder its fixtures go in, and the `client` they name.
    pub fn label(self) -> String {
        match self {
            Source::Cli(Client::ClaudeCode) => "claude-code".to_string(),
            Source::Cli(Client::GeminiCli) => "gemini-cli".to_string(),
            // The others by name: `codex`, `opencode`, `aider`.
            Source::Cli(other) => format!("{other:?}").to_lowercase(),
            Source::PythonSdk(package) => format!("{package}-python"),
        }
    }
}

/// What the provider does during a run.
#[derive(Debug, Clone)]
pub enum Provider {
    /// Answers every request with text.
    Text,
    /// Plays an agent: calls these tools when offered, then answers with their results.
    /// Given the sandbox and the provider's root URL.
    Tools(fn(&Sandbox, &str) -> ToolPlan),
}

/// One run of the client.
#[derive(Debug, Clone)]
pub struct Step {
    pub prompt: String,
    pub args: Vec<String>,
    pub envs: Vec<(String, String)>,
    pub provider: Provider,
}

impl Step {
    pub fn new(prompt: &str) -> Step {
        Step { prompt: prompt.to_string(), args: Vec::new(), envs: Vec::new(), provider: Provider::Text }
    }

    pub fn args(mut self, args: &[&str]) -> Step {
        self.args.extend(args.iter().map(|a| a.to_string()));
        self
    }

    pub fn env(mut self, key: &str, value: &str) -> Step {
        self.envs.push((key.to_string(), value.to_string()));
        self
    }

    pub fn tools(mut self, plan: fn(&Sandbox, &str) -> ToolPlan) -> Step {
        self.provider = Provider::Tools(plan);
        self
    }
}

/// One scenario: its name (the fixture's file name), what it shows, and how it is made.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub source: Source,
    pub name: &'static str,
    pub note: &'static str,
    /// The model the client is told to use; `None` keeps its own default.
    pub model: Option<&'static str>,
    /// Files and settings the run needs, written into the sandbox first.
    pub setup: fn(&Sandbox),
    /// Runs in order; the last one's requests are captured.
    pub steps: Vec<Step>,
}

impl Scenario {
    fn new(source: Source, name: &'static str, note: &'static str, model: Option<&'static str>) -> Scenario {
        Scenario { source, name, note, model, setup: |_| {}, steps: Vec::new() }
    }

    fn setup(mut self, setup: fn(&Sandbox)) -> Scenario {
        self.setup = setup;
        self
    }

    fn step(mut self, step: Step) -> Scenario {
        self.steps.push(step);
        self
    }
}

/// Every scenario of every client.
pub fn all() -> Vec<Scenario> {
    let mut all = claude_code();
    all.extend(codex());
    all.extend(gemini_cli());
    all.extend(opencode());
    all.extend(aider());
    all.extend(python_sdks());
    all
}

const CLAUDE: Source = Source::Cli(Client::ClaudeCode);
const SONNET: Option<&str> = Some("claude-sonnet-4-5");
const OPUS: Option<&str> = Some("claude-opus-4-8");

fn read_notes(sandbox: &Sandbox, _: &str) -> ToolPlan {
    Client::ClaudeCode.read_plan(sandbox, &["notes.txt"])
}

fn claude_code() -> Vec<Scenario> {
    let hello = || Step::new("Say hello in five words.");
    let read = || Step::new("Read notes.txt and tell me what it says.").tools(read_notes);
    let mut list = vec![
        Scenario::new(CLAUDE, "first-turn", "a one-line prompt, claude-sonnet-4-5", SONNET).step(hello()),
        Scenario::new(CLAUDE, "model-opus-4-8", "a one-line prompt, claude-opus-4-8 (a current model)", OPUS)
            .step(hello()),
        Scenario::new(CLAUDE, "model-haiku-4-5", "a one-line prompt, claude-haiku-4-5", Some("claude-haiku-4-5"))
            .step(hello()),
        Scenario::new(CLAUDE, "model-default", "a one-line prompt, no model set (the CLI's own default)", None)
            .step(hello()),
        Scenario::new(
            CLAUDE,
            "read-tool",
            "the provider calls Read; the call, then the follow-up with its result",
            SONNET,
        )
        .step(read()),
        Scenario::new(CLAUDE, "read-tool-opus-4-8", "a Read tool turn with claude-opus-4-8", OPUS).step(read()),
        Scenario::new(CLAUDE, "continue", "`-c`: a second prompt continuing a first one's session", SONNET)
            .step(hello())
            .step(Step::new("And now in three words.").args(&["-c"])),
        Scenario::new(CLAUDE, "compact", "`-c -p /compact` after a Read tool turn: the summary request", SONNET)
            .step(read())
            .step(Step::new("/compact").args(&["-c"])),
        Scenario::new(CLAUDE, "compacted-continue", "a prompt continuing a compacted conversation", SONNET)
            .step(read())
            .step(Step::new("/compact").args(&["-c"]))
            .step(Step::new("What did the file say?").args(&["-c"])),
        Scenario::new(CLAUDE, "thinking", "extended thinking on: MAX_THINKING_TOKENS=4096, claude-sonnet-4-5", SONNET)
            .step(hello().env("MAX_THINKING_TOKENS", "4096")),
        Scenario::new(
            CLAUDE,
            "effort-low",
            "effort low (CLAUDE_CODE_EFFORT_LEVEL=low; high is the default), claude-opus-4-8",
            OPUS,
        )
        .step(hello().env("CLAUDE_CODE_EFFORT_LEVEL", "low")),
    ];
    list.extend(claude_code_tools());
    list
}

/// Claude Code's scenarios around its other tools: an image, a subagent, the web.
fn claude_code_tools() -> Vec<Scenario> {
    let allow = |tools: &str| vec!["--allowedTools".to_string(), tools.to_string()];
    let image = Step::new("Look at pixel.png and tell me its colour.")
        .tools(|sandbox, _| ToolPlan::call("Read", json!({ "file_path": sandbox.file("pixel.png") })));
    let agent = Step::new("Use a subagent to read notes.txt.").tools(|sandbox, _| {
        let prompt = format!("Read {} and report what it says.", sandbox.file("notes.txt"));
        ToolPlan::call(
            "Agent",
            json!({ "description": "Read the notes", "prompt": prompt, "subagent_type": "general-purpose" }),
        )
    });
    let search = Step::new("Search the web for the Switchyard gateway.")
        .tools(|_, _| ToolPlan::call("WebSearch", json!({ "query": "switchyard llm gateway" })));
    let fetch = Step::new("Fetch the page and summarise it.").tools(|_, root| {
        ToolPlan::call("WebFetch", json!({ "url": format!("{root}/v1/models"), "prompt": "List the model names." }))
    });
    let mut agent_step = agent;
    agent_step.args = allow("Read,Agent,Task");
    let mut search_step = search;
    search_step.args = allow("WebSearch");
    let mut fetch_step = fetch;
    fetch_step.args = allow("WebFetch");
    vec![
        Scenario::new(CLAUDE, "image", "Read of a 1x1 PNG: the tool result carries an image block", SONNET)
            .setup(|sandbox| std::fs::write(sandbox.project.join("pixel.png"), PIXEL_PNG).unwrap())
            .step(image),
        Scenario::new(CLAUDE, "subagent", "the provider calls Agent (Task): the subagent's own requests too", SONNET)
            .step(agent_step),
        Scenario::new(
            CLAUDE,
            "web-search",
            "the provider calls WebSearch; Claude Code runs it as a request offering the server tool web_search",
            SONNET,
        )
        .step(search_step),
        Scenario::new(
            CLAUDE,
            "web-fetch",
            "the provider calls WebFetch on a page of the provider itself (127.0.0.1); Claude Code fetches it and asks the small model about it",
            SONNET,
        )
        .setup(|sandbox| {
            std::fs::create_dir_all(sandbox.home.join(".claude")).unwrap();
            std::fs::write(sandbox.home.join(".claude/settings.json"), "{ \"skipWebFetchPreflight\": true }\n").unwrap();
        })
        .step(fetch_step),
    ]
}

/// A 1x1 red PNG.
const PIXEL_PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x90, 0x77, 0x53, 0xde, 0x00, 0x00, 0x00, 0x0c, 0x49,
    0x44, 0x41, 0x54, 0x08, 0xd7, 0x63, 0xf8, 0xcf, 0xc0, 0x00, 0x00, 0x03, 0x01, 0x01, 0x00, 0x18, 0xdd, 0x8d, 0xb0,
    0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

const CODEX: Source = Source::Cli(Client::Codex);
const GPT: Option<&str> = Some("gpt-5.5");

fn codex() -> Vec<Scenario> {
    let hello = || Step::new("Say hello in five words.");
    vec![
        Scenario::new(CODEX, "first-turn", "a one-line prompt", GPT).step(hello()),
        Scenario::new(
            CODEX,
            "exec-command",
            "the provider calls exec_command (cat notes.txt); the call, then its output",
            GPT,
        )
        .step(
            Step::new("What does notes.txt say?").tools(|sandbox, _| Client::Codex.read_plan(sandbox, &["notes.txt"])),
        ),
        Scenario::new(
            CODEX,
            "apply-patch",
            "the provider calls the custom tool apply_patch; the follow-up carries its report",
            GPT,
        )
        .step(Step::new("Create hello.txt.").tools(|_, _| {
            let patch = "*** Begin Patch\n*** Add File: hello.txt\n+hello from the corpus\n*** End Patch\n";
            ToolPlan::call("apply_patch", json!(patch))
        })),
        Scenario::new(CODEX, "resume", "`codex exec resume --last`: a second prompt in the first one's session", GPT)
            .step(hello())
            .step(Step::new("And now in three words.").args(&["resume", "--last"])),
        Scenario::new(CODEX, "reasoning-effort", "`-c model_reasoning_effort=\"high\"`", GPT)
            .step(hello().args(&["-c", "model_reasoning_effort=\"high\""])),
    ]
}

const OPENCODE: Source = Source::Cli(Client::Opencode);
const AIDER: Source = Source::Cli(Client::Aider);

fn opencode() -> Vec<Scenario> {
    let hello = || Step::new("Say hello in five words.");
    vec![
        Scenario::new(
            OPENCODE,
            "first-turn",
            "a one-line prompt over Chat (its title request included)",
            Some("gpt-4.1"),
        )
        .step(hello()),
        Scenario::new(OPENCODE, "read-tool", "the provider calls read; the call, then its result", Some("gpt-4.1"))
            .step(
                Step::new("Read notes.txt and tell me what it says.")
                    .tools(|sandbox, _| Client::Opencode.read_plan(sandbox, &["notes.txt"])),
            ),
        Scenario::new(
            OPENCODE,
            "messages-first-turn",
            "a one-line prompt over Anthropic Messages (a claude model)",
            Some("claude-sonnet-4-5"),
        )
        .step(hello()),
    ]
}

fn aider() -> Vec<Scenario> {
    vec![
        Scenario::new(AIDER, "first-turn", "a one-line prompt over Chat", Some("gpt-4.1"))
            .step(Step::new("Say hello in five words.")),
        Scenario::new(
            AIDER,
            "edit-turn",
            "notes.txt added with --file and an edit asked for: the file's text in the request",
            Some("gpt-4.1"),
        )
        .step(Step::new("Replace heliotrope with marigold in notes.txt.").args(&["--file", "notes.txt"])),
    ]
}

const GEMINI: Source = Source::Cli(Client::GeminiCli);

fn gemini_cli() -> Vec<Scenario> {
    let read = |sandbox: &Sandbox, _: &str| Client::GeminiCli.read_plan(sandbox, &["notes.txt"]);
    vec![
        Scenario::new(GEMINI, "first-turn", "a one-line prompt, gemini-2.5-pro", Some("gemini-2.5-pro"))
            .step(Step::new("Say hello in five words.")),
        Scenario::new(
            GEMINI,
            "auto-model",
            "a one-line prompt with no model set: the CLI's own routing (classifier) calls, then the turn",
            None,
        )
        .step(Step::new("Say hello in five words.")),
        Scenario::new(
            GEMINI,
            "read-file",
            "the provider calls read_file; the call, then the follow-up with its result",
            Some("gemini-2.5-pro"),
        )
        .step(Step::new("Read notes.txt and tell me what it says.").tools(read)),
        Scenario::new(
            GEMINI,
            "read-file-auto",
            "a read_file tool turn with no model set (routing calls included)",
            None,
        )
        .step(Step::new("Read notes.txt and tell me what it says.").tools(read)),
    ]
}

fn python_sdks() -> Vec<Scenario> {
    let sdk = |package: &'static str, name: &'static str, note: &'static str, tools: bool| {
        let step = Step::new(name);
        let step = if tools { step.tools(|_, _| ToolPlan::first()) } else { step };
        Scenario::new(Source::PythonSdk(package), name, note, None).step(step)
    };
    vec![
        sdk("openai", "openai-chat", "chat.completions.create with a system message and sampling", false),
        sdk("openai", "openai-chat-stream", "chat.completions.create, streamed with usage", false),
        sdk("openai", "openai-chat-tools", "a function tool, its call and the tool message answering it", true),
        sdk("openai", "openai-responses", "responses.create with instructions and reasoning effort", false),
        sdk("openai", "openai-responses-stream", "responses.stream", false),
        sdk("openai", "openai-responses-tools", "a function tool, its call and the function_call_output", true),
        sdk("anthropic", "anthropic-messages", "messages.create with a system prompt and a stop sequence", false),
        sdk("anthropic", "anthropic-messages-stream", "messages.stream", false),
        sdk("anthropic", "anthropic-messages-tools", "a tool, its tool_use and the tool_result answering it", true),
        sdk("google-genai", "genai-generate", "models.generate_content with a system instruction", false),
        sdk("google-genai", "genai-stream", "models.generate_content_stream", false),
        sdk("google-genai", "genai-tools", "a function declaration, its call and the functionResponse", true),
    ]
}
