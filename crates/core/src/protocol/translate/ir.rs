//! The intermediate form every wire format decodes into and encodes from.
//!
//! It is a superset of the four formats: what only one of them can carry
//! (Anthropic thinking signatures, Responses `encrypted_content`, Gemini
//! `thoughtSignature`) travels as [`Opaque`] and is re-emitted only toward
//! the family it came from.

use serde::{Deserialize, Serialize};

/// A wire format a client speaks or a provider accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// OpenAI Chat Completions, `POST /v1/chat/completions`.
    Chat,
    /// OpenAI Responses, `POST /v1/responses`.
    Responses,
    /// Anthropic Messages, `POST /v1/messages`.
    Messages,
    /// Google Gemini, `models/{model}:generateContent`.
    Gemini,
}

impl Format {
    pub const ALL: [Format; 4] = [Format::Chat, Format::Responses, Format::Messages, Format::Gemini];

    pub fn as_str(self) -> &'static str {
        match self {
            Format::Chat => "chat",
            Format::Responses => "responses",
            Format::Messages => "messages",
            Format::Gemini => "gemini",
        }
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The provider family that produced an opaque value; it is sent back only
/// to the same family, never to another (a foreign signature is a 400).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    Anthropic,
    OpenAi,
    Gemini,
}

/// Provider state the gateway cannot interpret but must hand back verbatim.
///
/// `value` is the provider's own: an Anthropic thinking block's `signature`
/// (or a `redacted_thinking` block's `data`), a Responses reasoning item's
/// `encrypted_content` (its item id travels beside it), a Gemini
/// `thoughtSignature`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Opaque {
    pub origin: Family,
    /// The original value, as the provider sent it.
    pub value: String,
}

/// Why a reply ended, in the union of every format's reasons.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model finished its turn.
    EndTurn,
    /// A stop sequence matched.
    StopSequence,
    /// The output token limit (or the context window) was reached.
    MaxTokens,
    /// The turn ends with one or more tool calls to run.
    ToolUse,
    /// A safety filter or the model refused.
    Refusal,
    /// A long-running turn paused; the client may continue it.
    PauseTurn,
}

impl StopReason {
    /// How a turn that made tool calls ends: a plain end, or a matched stop
    /// sequence, becomes `ToolUse`, which every client reads as "run them".
    pub fn with_calls(self, called: bool) -> StopReason {
        match self {
            StopReason::EndTurn | StopReason::StopSequence if called => StopReason::ToolUse,
            r => r,
        }
    }
}

/// Token counts in one normalised shape: `input` includes cached tokens
/// (as OpenAI and Gemini count), unlike Anthropic's `input_tokens`; each
/// encoder converts to its format's convention.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tokens {
    pub input: Option<u64>,
    pub output: Option<u64>,
    /// Input tokens read from the provider's prompt cache.
    pub cache_read: Option<u64>,
    /// Input tokens written to the provider's prompt cache.
    pub cache_write: Option<u64>,
    /// Output tokens spent on reasoning (included in `output`).
    pub reasoning: Option<u64>,
}

/// The class of an upstream error, which every format can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    InvalidRequest,
    ContextTooLong,
    Authentication,
    PermissionDenied,
    NotFound,
    RequestTooLarge,
    RateLimited,
    Overloaded,
    Timeout,
    Server,
}

impl ErrorClass {
    pub const ALL: [ErrorClass; 10] = [
        ErrorClass::InvalidRequest,
        ErrorClass::ContextTooLong,
        ErrorClass::Authentication,
        ErrorClass::PermissionDenied,
        ErrorClass::NotFound,
        ErrorClass::RequestTooLarge,
        ErrorClass::RateLimited,
        ErrorClass::Overloaded,
        ErrorClass::Timeout,
        ErrorClass::Server,
    ];
}

/// One event of a reply stream, in the intermediate form. Blocks are
/// numbered in the order they open, whatever the source format numbered.
///
/// Every decoder's output keeps these rules, and every encoder relies on them:
/// - `Start` comes first and once (only an `Error` may come before it);
/// - blocks are numbered 0, 1, 2… as they open; a `Delta` or `BlockStop`
///   names an open block; several blocks may be open at once (parallel tool
///   calls whose arguments interleave);
/// - a delta matches its block: `Text` in text, `Reasoning` and `Opaque` in
///   reasoning (opaque state never rides on a text or tool block), `ToolArgs`
///   in a tool call;
/// - exactly one terminal, `Finish` or `Error`, and nothing after it; every
///   block is stopped before `Finish`, while `Error` may leave blocks open.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum StreamEvent {
    /// The reply began. `origin` is the family of the provider producing
    /// it, named in the envelope of reasoning that comes without state.
    Start { id: String, model: String, tokens: Tokens, origin: Family },
    /// A content block opened.
    BlockStart { index: usize, block: BlockKind },
    /// More of an open block.
    Delta { index: usize, delta: Delta },
    /// A block is complete.
    BlockStop { index: usize },
    /// The reply ended normally.
    Finish { reason: StopReason, tokens: Tokens },
    /// The reply failed after it started; no success terminal follows.
    /// `quota` marks a rate limit that is an exhausted quota or credit
    /// balance, which the client must not be told to retry.
    Error { class: ErrorClass, message: String, quota: bool },
}

/// What an opened block holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum BlockKind {
    Text,
    /// Reasoning; `id` is the provider's id for it, when it has one (a
    /// Responses `rs_…` item), which must go back with its state.
    Reasoning {
        id: Option<String>,
    },
    /// Reasoning the provider sent only in encrypted form (an Anthropic
    /// `redacted_thinking` block): no text, the opaque state whole.
    RedactedReasoning {
        opaque: Opaque,
    },
    /// A tool call; `custom` marks a freeform (grammar) tool such as Codex's
    /// `apply_patch`, whose input is raw text, not JSON.
    ToolCall {
        id: String,
        name: String,
        custom: bool,
    },
}

/// An increment of an open block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Delta {
    Text(String),
    Reasoning(String),
    /// Opaque reasoning state (a signature, encrypted content).
    Opaque(Opaque),
    /// A fragment of a tool call's arguments (JSON text, or raw input for a
    /// custom tool), to be concatenated.
    ToolArgs(String),
}

/// What translating a request learnt that translating its reply needs:
/// the reply must speak of the client's model and the client's tool names,
/// not the ones the provider was sent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Context {
    /// The model the client asked for, echoed in the reply.
    pub client_model: String,
    /// Tool names that had to change for the provider: sent name → the
    /// client's name.
    pub renamed_tools: std::collections::HashMap<String, String>,
    /// The client's freeform (custom) tools, by the client's name; a call to
    /// one is sent back as a custom tool call with raw input.
    pub custom_tools: std::collections::HashSet<String>,
}
