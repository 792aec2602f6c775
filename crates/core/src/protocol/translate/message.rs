//! The intermediate form of a request and of a non-streamed reply.
//!
//! It is a superset of the four formats, so a decoder loses nothing it read:
//! what the target cannot express is dropped by the target's encoder, through
//! the table in [`super::dropped`], never here. Opaque provider state
//! (signatures, encrypted reasoning) rides in [`Opaque`] and is re-emitted
//! only toward the family it came from.

use serde_json::{Map, Value};

use super::dropped::{Drops, Stage};
use super::ir::{Family, Format, Opaque, StopReason, Tokens};

/// A request in no particular wire format.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Request {
    /// The model the client named (empty for Gemini, whose model is in the path).
    pub model: String,
    /// Leading system content: Chat's leading system/developer messages,
    /// Responses `instructions`, Messages `system`, Gemini `systemInstruction`.
    pub system: Vec<Part>,
    pub turns: Vec<Turn>,
    pub tools: Vec<Tool>,
    pub tool_choice: Option<ToolChoice>,
    pub parallel_tools: Option<bool>,
    pub max_output: Option<u32>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub top_k: Option<u32>,
    pub stop: Vec<String>,
    pub seed: Option<i64>,
    pub presence_penalty: Option<f64>,
    pub frequency_penalty: Option<f64>,
    pub reasoning: Option<Reasoning>,
    pub output_format: Option<OutputFormat>,
    /// Output verbosity (OpenAI `verbosity` / `text.verbosity`).
    pub verbosity: Option<String>,
    /// End-user id: `user`, `safety_identifier`, Messages `metadata.user_id`.
    pub user: Option<String>,
    /// OpenAI `metadata` (string values).
    pub metadata: Option<Map<String, Value>>,
    pub stream: bool,
    pub service_tier: Option<String>,
    pub n: Option<u32>,
    pub logprobs: Option<Logprobs>,
    pub prompt_cache_key: Option<String>,
    /// Responses: the stored response this one continues.
    pub previous_response_id: Option<String>,
    /// Responses/Chat `store`.
    pub store: Option<bool>,
    /// Top-level fields the decoder did not map and the drop table does not
    /// list; passed on only to a target of the same family.
    pub extras: Map<String, Value>,
    /// Source fields the decoder dropped through the drop table.
    pub drops: Drops,
    /// The format the request was decoded from.
    pub source: Option<Format>,
}

impl Request {
    /// A request decoded from `source`, holding so far the top-level fields
    /// of `body` that its decoder does not map (those not in `mapped`).
    pub(crate) fn unmapped(source: Format, body: &Map<String, Value>, mapped: &[&str]) -> Request {
        let mut req = Request { source: Some(source), ..Request::default() };
        for (k, v) in body.iter().filter(|(k, _)| !mapped.contains(&k.as_str())) {
            req.keep_unmapped(k, k, v);
        }
        req
    }

    /// Keeps a source field the decoder does not map: noted as dropped when
    /// the drop table lists `key` for the source format, otherwise carried
    /// as an extra under `name`, to pass only within its own family.
    pub(crate) fn keep_unmapped(&mut self, key: &str, name: &str, v: &Value) {
        let listed = self.source.is_some_and(|f| self.drops.note_listed(Stage::Decode, f, key));
        if !listed {
            self.extras.insert(name.to_owned(), v.clone());
        }
    }

    /// A content block (or part, or item) of a type the translator has
    /// never seen: carried as text when it has a `text` string, the one
    /// slot every format has, else left out; listed as unmapped either way.
    pub(crate) fn new_block(&mut self, b: &Map<String, Value>, kind: &str, path: &str) -> Option<Part> {
        match b.get("text").and_then(Value::as_str) {
            Some(text) => {
                self.drops.note_unmapped(path, format!("a block of type `{kind}`, carried as its text"));
                Some(Part::text(text))
            }
            None => {
                self.drops.note_unmapped(path, format!("a block of type `{kind}`, left out"));
                None
            }
        }
    }

    /// How many things have been listed as unmapped so far.
    pub(crate) fn unmapped_count(&self) -> usize {
        self.drops.unmapped.len()
    }

    /// Refuses a message every one of whose `blocks` was left out as
    /// unmapped since `before`: leaving them all out would leave the
    /// message out, which changes the conversation.
    pub(crate) fn refuse_emptied(
        &self,
        blocks: usize,
        kept: usize,
        before: usize,
        path: &str,
    ) -> Result<(), super::Untranslatable> {
        if blocks > 0 && kept == 0 && self.unmapped_count() - before >= blocks {
            return Err(super::Untranslatable::new(
                path,
                "every block of this message is of a type new to the gateway; leaving them out would leave out the message",
            ));
        }
        Ok(())
    }

    /// Removes every reasoning part: the retry after a provider rejected a
    /// signature. Encoders then switch thinking off where it is required.
    pub fn strip_reasoning(&mut self) {
        for turn in &mut self.turns {
            turn.parts.retain(|p| !matches!(p, Part::Reasoning { .. }));
        }
        self.turns.retain(|t| !t.parts.is_empty());
    }
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    pub role: Role,
    pub parts: Vec<Part>,
}

impl Turn {
    pub fn new(role: Role, parts: Vec<Part>) -> Turn {
        Turn { role, parts }
    }
}

/// Why a message of a role the translator has never seen is refused:
/// leaving it out would change the conversation.
pub(crate) fn new_role(path: &str, role: Option<&str>) -> super::Untranslatable {
    super::Untranslatable::new(
        format!("{path}.role"),
        format!(
            "role `{}` is new to the gateway, and leaving the message out would change the conversation",
            role.unwrap_or("")
        ),
    )
}

/// Who speaks a turn. `System` is a system or developer message in the middle
/// of the conversation (Codex emits these); leading ones are in
/// [`Request::system`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
    System,
}

/// A prompt-cache breakpoint (Anthropic `cache_control`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheMark {
    /// `"5m"` or `"1h"`; `None` is the provider's default.
    pub ttl: Option<String>,
}

/// Where a medium's bytes are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Media {
    Base64 {
        media_type: String,
        data: String,
    },
    Url(String),
    /// A provider-side file id; meaningful only to the provider that issued it.
    FileId(String),
    /// A plain-text document (Messages `source:{type:text}`).
    Text(String),
}

/// A piece of content, in the order the conversation has it.
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    Text {
        text: String,
        cache: Option<CacheMark>,
    },
    Image {
        source: Media,
        /// OpenAI `detail` (auto/low/high).
        detail: Option<String>,
        cache: Option<CacheMark>,
    },
    Document {
        source: Media,
        title: Option<String>,
        /// File name (OpenAI `filename`).
        filename: Option<String>,
        cache: Option<CacheMark>,
    },
    Audio {
        /// `wav`, `mp3`, …
        format: String,
        data: String,
    },
    /// A refusal in assistant output or history.
    Refusal {
        text: String,
    },
    /// Reasoning ("thinking"). `opaque` is the provider's state for it (a
    /// signature, encrypted content, a thought signature); `None` is
    /// reasoning with no state (DeepSeek `reasoning_content`).
    Reasoning {
        text: String,
        opaque: Option<Opaque>,
        /// Anthropic `redacted_thinking`: no text, only the opaque data.
        redacted: bool,
        /// Responses reasoning item id (`rs_…`).
        id: Option<String>,
    },
    ToolCall {
        id: String,
        name: String,
        /// The arguments as the source had them: JSON text for a function,
        /// raw input for a custom tool.
        args: String,
        kind: CallKind,
    },
    ToolResult {
        call_id: String,
        /// The called tool's name, when the source says (Gemini needs it).
        name: Option<String>,
        content: Vec<Part>,
        is_error: bool,
        kind: CallKind,
        cache: Option<CacheMark>,
    },
}

impl Part {
    pub fn text(text: impl Into<String>) -> Part {
        Part::Text { text: text.into(), cache: None }
    }

    /// The cache mark of a part that can carry one.
    pub fn cache_mut(&mut self) -> Option<&mut Option<CacheMark>> {
        match self {
            Part::Text { cache, .. }
            | Part::Image { cache, .. }
            | Part::Document { cache, .. }
            | Part::ToolResult { cache, .. } => Some(cache),
            _ => None,
        }
    }
}

/// Whether a call is to a function (JSON arguments) or a freeform tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CallKind {
    #[default]
    Function,
    Custom,
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    pub name: String,
    pub description: Option<String>,
    pub kind: ToolKind,
    pub cache: Option<CacheMark>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ToolKind {
    Function {
        /// JSON schema of the arguments, as the source sent it.
        schema: Value,
        strict: Option<bool>,
    },
    /// A freeform tool (Responses `custom`), e.g. Codex's `apply_patch`:
    /// its input is raw text, optionally constrained by `format`.
    Custom { format: Option<Value> },
    /// A tool the provider runs or defines itself (web search, code
    /// execution, Anthropic's bash tool); meaningful only in its format.
    Hosted { origin: Format, raw: Value },
}

/// Which tool the model must (or must not) call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    Auto,
    None,
    Required,
    Named(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Effort {
    Minimal,
    Low,
    Medium,
    High,
    XHigh,
    Max,
}

impl Effort {
    pub fn parse(s: &str) -> Option<Effort> {
        Some(match s {
            "minimal" => Effort::Minimal,
            "low" => Effort::Low,
            "medium" => Effort::Medium,
            "high" => Effort::High,
            "xhigh" => Effort::XHigh,
            "max" => Effort::Max,
            _ => return None,
        })
    }

    /// The OpenAI spelling (`max` has none; it is `xhigh`).
    pub fn openai(self) -> &'static str {
        match self {
            Effort::Minimal => "minimal",
            Effort::Low => "low",
            Effort::Medium => "medium",
            Effort::High => "high",
            Effort::XHigh | Effort::Max => "xhigh",
        }
    }

    /// A thinking budget for this effort (translation.md §B.7).
    pub fn budget(self) -> u32 {
        match self {
            Effort::Minimal | Effort::Low => 2048,
            Effort::Medium => 8192,
            Effort::High => 16384,
            Effort::XHigh | Effort::Max => 24576,
        }
    }

    /// The effort a thinking budget stands for (translation.md §B.7).
    pub fn from_budget(budget: u32) -> Effort {
        match budget {
            0..4000 => Effort::Low,
            4000..16000 => Effort::Medium,
            _ => Effort::High,
        }
    }
}

/// The reasoning the client asked for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Reasoning {
    pub effort: Option<Effort>,
    /// A token budget (Messages `budget_tokens`, Gemini `thinkingBudget`).
    pub budget: Option<u32>,
    /// Responses `summary` (auto/concise/detailed).
    pub summary: Option<String>,
    /// Reasoning explicitly off.
    pub disabled: bool,
}

/// A structured-output request.
#[derive(Debug, Clone, PartialEq)]
pub enum OutputFormat {
    /// Any JSON object.
    JsonObject,
    JsonSchema {
        name: Option<String>,
        schema: Value,
        strict: Option<bool>,
        description: Option<String>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Logprobs {
    /// How many alternatives per token, when asked.
    pub top: Option<u32>,
}

/// A non-streamed reply in no particular wire format.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The provider's id for the reply (may be empty).
    pub id: String,
    pub model: String,
    /// Text, refusal, reasoning and tool-call parts, in generation order.
    pub parts: Vec<Part>,
    pub stop: StopReason,
    /// The stop sequence that matched, when the provider says.
    pub stop_sequence: Option<String>,
    pub tokens: Tokens,
    /// Unix seconds, when the provider says.
    pub created: Option<u64>,
    /// The family of the provider that produced it, for envelopes of
    /// reasoning that came without state.
    pub origin: Family,
}

impl Reply {
    /// Whether the reply asks for at least one tool call.
    pub fn has_tool_calls(&self) -> bool {
        self.parts.iter().any(|p| matches!(p, Part::ToolCall { .. }))
    }
}

/// The provider family a format belongs to.
pub fn family(format: Format) -> Family {
    match format {
        Format::Chat | Format::Responses => Family::OpenAi,
        Format::Messages => Family::Anthropic,
        Format::Gemini => Family::Gemini,
    }
}
