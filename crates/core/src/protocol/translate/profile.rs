//! What a provider accepts beyond its wire format: the quirks the encoders
//! consult instead of checking vendor names.
//!
//! A profile is data, so the embedded config can describe each well-known
//! provider and a user can correct one in TOML. Every field has a default;
//! [`Profile::default`] fits a generic OpenAI-compatible server (vLLM,
//! llama.cpp, LM Studio, most hosted compat APIs): it sends nothing a strict
//! server could reject and asks for streamed usage.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use super::quirks::{self, ModelRule};

/// The capability profile of one provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "snake_case", deny_unknown_fields)]
pub struct Profile {
    /// An OpenAI-kind provider that also speaks the Responses API.
    pub responses: bool,
    /// An OpenAI-kind provider that speaks Chat Completions. `false` with
    /// `responses` is a Responses-only provider (OpenAI serves its Codex
    /// models only there): every other format is translated to Responses.
    pub chat: bool,
    /// Chat: takes a system message in the middle of the conversation, in
    /// place (OpenAI does). Strict chat templates (Qwen, MiniMax) reject one
    /// after the first message; without this the instruction goes in place
    /// as user text marked `<system-reminder>`.
    pub mid_system: bool,
    /// Chat: whether streams ask for usage with `stream_options:
    /// {include_usage: true}` (old Ollama and some gateways reject it;
    /// without it a stream carries no usage). Applies to a Chat client's own
    /// requests too, where the gateway adds it.
    pub stream_options: StreamOptions,
    /// Chat: the assistant-message field that carries reasoning, when the
    /// provider reads one back.
    pub reasoning_field: ReasoningField,
    /// Chat: assistant turns with tool calls must carry reasoning (DeepSeek
    /// thinking mode); a placeholder is sent when the history has none.
    pub reasoning_replay_required: bool,
    /// Chat: system content as one string rather than an array of parts
    /// (Groq rejects arrays).
    pub system_as_string: bool,
    /// Chat: send the system message with role `developer` (OpenAI's
    /// reasoning models prefer it; most compat servers do not know it).
    pub developer_role: bool,
    /// Chat: the name of the output-token limit.
    pub max_tokens_field: MaxTokensField,
    /// Accepts tool definitions at all (some local models do not).
    pub tools: bool,
    /// Accepts `parallel_tool_calls` / `disable_parallel_tool_use`.
    pub parallel_tools: bool,
    /// Chat: accepts `custom` (freeform) tools; otherwise they are emulated
    /// as a function with one string argument `input`.
    pub custom_tools: bool,
    /// Chat: accepts `reasoning_effort` (Groq rejects it for most models).
    pub reasoning_effort: bool,
    /// Accepts `temperature` and `top_p` (OpenAI reasoning models reject
    /// values other than the default).
    pub sampling: bool,
    /// Messages: how thinking is switched on.
    pub thinking_style: ThinkingStyle,
    /// Gemini: the schema dialect of tool parameters and output schemas.
    pub schema_dialect: SchemaDialect,
    /// Longest tool name the provider takes; longer names are shortened with
    /// a hash and restored in the reply.
    pub tool_name_max: usize,
    /// Longest tool-call id the provider takes.
    pub tool_id_max: usize,
    /// Messages: the `anthropic-beta` values (by prefix) an
    /// Anthropic-compatible provider accepts. Unset, every value goes
    /// (Anthropic itself); `[]` forwards none. No `anthropic-*` header ever
    /// reaches a provider of another kind.
    pub anthropic_beta: Option<Vec<String>>,
    /// Messages: `max_tokens` when the client sent no limit (it is required).
    pub default_max_tokens: u32,
    /// Messages: add prompt-cache breakpoints (system, last tool, last two
    /// user turns) to a request that came from a format without them.
    pub cache_breakpoints: bool,
    /// The most output tokens the model may be asked for: a larger limit
    /// from the client is lowered to it. Unset, the built-in table's
    /// ([`quirks::OUTPUT_LIMITS`]); set per model in `models` rules.
    pub max_output_tokens: Option<u32>,
    /// Chat/Responses: forward `prompt_cache_key` (derived from Claude
    /// Code's `metadata.user_id` when the client sent none).
    pub prompt_cache_key: bool,
    /// Gemini: mark tool calls in history without a thought signature with
    /// Google's documented `skip_thought_signature_validator` (Gemini 3
    /// rejects them otherwise).
    pub thought_signature_sentinel: bool,
    /// Chat: continues an assistant message marked `prefix: true` as its
    /// own (Mistral; DeepSeek at its `/beta` base URL), so a reply that
    /// broke off is resumed by handing it what was sent; otherwise a
    /// continuation is asked for in words.
    pub prefix_completion: bool,
    /// Per-model corrections, applied over the built-in ones
    /// ([`quirks::BUILTIN`]) for the models they match.
    pub models: Vec<ModelRule>,
}

impl Default for Profile {
    fn default() -> Profile {
        Profile {
            responses: false,
            chat: true,
            mid_system: false,
            stream_options: StreamOptions::Probe,
            reasoning_field: ReasoningField::None,
            reasoning_replay_required: false,
            system_as_string: true,
            developer_role: false,
            max_tokens_field: MaxTokensField::MaxTokens,
            tools: true,
            parallel_tools: true,
            custom_tools: false,
            reasoning_effort: true,
            sampling: true,
            thinking_style: ThinkingStyle::Enabled,
            schema_dialect: SchemaDialect::OpenApi,
            tool_name_max: 64,
            tool_id_max: 64,
            anthropic_beta: None,
            default_max_tokens: 8192,
            cache_breakpoints: true,
            prefix_completion: false,
            prompt_cache_key: false,
            max_output_tokens: None,
            thought_signature_sentinel: true,
            models: Vec::new(),
        }
    }
}

impl Profile {
    /// Whether an `anthropic-beta` value may be forwarded to this provider.
    pub fn beta_allowed(&self, value: &str) -> bool {
        match &self.anthropic_beta {
            None => true,
            Some(allowed) => allowed.iter().any(|prefix| !prefix.is_empty() && value.starts_with(prefix.as_str())),
        }
    }

    /// What of an `anthropic-beta` header (comma-separated) may be sent:
    /// all of it (borrowed) without an allowlist, the allowed values
    /// otherwise, `None` when nothing is left.
    pub fn filter_anthropic_beta<'a>(&self, header: &'a str) -> Option<Cow<'a, str>> {
        if self.anthropic_beta.is_none() {
            return Some(Cow::Borrowed(header));
        }
        let kept: Vec<&str> =
            header.split(',').map(str::trim).filter(|v| !v.is_empty() && self.beta_allowed(v)).collect();
        (!kept.is_empty()).then(|| Cow::Owned(kept.join(",")))
    }

    /// The profile for `model`: this one, corrected by the built-in model
    /// rules and then the profile's own (later rules win). Borrowed when no
    /// rule matches.
    pub fn for_model(&self, model: &str) -> Cow<'_, Profile> {
        quirks::apply(self, model)
    }
}

/// Whether Chat streams ask for usage (`stream_options`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StreamOptions {
    /// Always sent: the provider is known to take it.
    Yes,
    /// Never sent: the provider rejects it (its streams then carry no usage).
    No,
    /// Sent until the provider rejects it (a 400 or 422 naming
    /// `stream_options`); the request is then retried once without it, and
    /// the provider is not sent it again while the gateway runs.
    #[default]
    Probe,
}

impl StreamOptions {
    /// Whether a request asks for usage, before anything was learned.
    pub fn sends(self) -> bool {
        matches!(self, StreamOptions::Yes | StreamOptions::Probe)
    }

    fn as_str(self) -> &'static str {
        match self {
            StreamOptions::Yes => "yes",
            StreamOptions::No => "no",
            StreamOptions::Probe => "probe",
        }
    }
}

impl Serialize for StreamOptions {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// `"yes"`, `"no"` or `"probe"`; `true` and `false`, the flag's earlier
/// form, still mean yes and no.
impl<'de> Deserialize<'de> for StreamOptions {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<StreamOptions, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = StreamOptions;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(r#""yes", "no" or "probe""#)
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<StreamOptions, E> {
                Ok(if v { StreamOptions::Yes } else { StreamOptions::No })
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<StreamOptions, E> {
                match v {
                    "yes" => Ok(StreamOptions::Yes),
                    "no" => Ok(StreamOptions::No),
                    "probe" => Ok(StreamOptions::Probe),
                    other => Err(E::invalid_value(serde::de::Unexpected::Str(other), &self)),
                }
            }
        }
        d.deserialize_any(Visitor)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningField {
    /// Reasoning is not sent back.
    #[default]
    None,
    /// `reasoning_content` (DeepSeek, Kimi, Qwen).
    ReasoningContent,
    /// `reasoning` (OpenRouter, vLLM's newer servers).
    Reasoning,
    /// OpenRouter's `reasoning_details`: the entries it sent, handed back
    /// as they came (signatures and encrypted state included), which its
    /// upstreams need to continue a reasoning model's tool loop.
    ReasoningDetails,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum MaxTokensField {
    /// `max_tokens`, understood by nearly every compat server.
    #[default]
    MaxTokens,
    /// `max_completion_tokens`, which OpenAI's reasoning models require.
    MaxCompletionTokens,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ThinkingStyle {
    /// `thinking: {type: enabled, budget_tokens}`.
    #[default]
    Enabled,
    /// `thinking: {type: adaptive}` plus `output_config.effort` (newer
    /// Claude models reject `enabled`).
    Adaptive,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum SchemaDialect {
    /// Gemini's OpenAPI-3 subset (`parameters`, `responseSchema`): schemas
    /// are sanitised to it. Every Gemini model takes it.
    #[default]
    OpenApi,
    /// Full JSON Schema (`parametersJsonSchema`, `responseJsonSchema`),
    /// Gemini 2.5 and later; a schema already inside the subset is still
    /// sent as `parameters`.
    JsonSchema,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn an_empty_table_is_the_default_and_fields_are_snake_case() {
        let p: Profile = toml::from_str("").unwrap();
        assert_eq!(p, Profile::default());
        let p: Profile = toml::from_str(
            "reasoning_field = \"reasoning_content\"\nreasoning_replay_required = true\n\
             max_tokens_field = \"max_completion_tokens\"\nschema_dialect = \"json_schema\"\n\
             thinking_style = \"adaptive\"\nanthropic_beta = [\"interleaved-thinking-\"]\n\
             stream_options = \"no\"\n",
        )
        .unwrap();
        assert_eq!(p.reasoning_field, ReasoningField::ReasoningContent);
        assert!(p.reasoning_replay_required);
        assert_eq!(p.max_tokens_field, MaxTokensField::MaxCompletionTokens);
        assert_eq!(p.schema_dialect, SchemaDialect::JsonSchema);
        assert_eq!(p.thinking_style, ThinkingStyle::Adaptive);
        assert_eq!(p.stream_options, StreamOptions::No);
        assert!(toml::from_str::<Profile>("no_such_field = 1").is_err());
    }

    #[test]
    fn stream_options_is_yes_no_or_probe_and_still_takes_a_bool() {
        let read = |text: &str| toml::from_str::<Profile>(text).map(|p| p.stream_options);
        assert_eq!(read("").unwrap(), StreamOptions::Probe);
        assert_eq!(read("stream_options = \"yes\"").unwrap(), StreamOptions::Yes);
        assert_eq!(read("stream_options = \"probe\"").unwrap(), StreamOptions::Probe);
        assert_eq!(read("stream_options = true").unwrap(), StreamOptions::Yes);
        assert_eq!(read("stream_options = false").unwrap(), StreamOptions::No);
        let err = read("stream_options = \"maybe\"").unwrap_err().to_string();
        assert!(err.contains(r#""yes", "no" or "probe""#), "{err}");
        assert!(!StreamOptions::No.sends() && StreamOptions::Probe.sends());
    }

    #[test]
    fn betas_are_allowed_by_prefix() {
        let p = Profile { anthropic_beta: Some(vec!["interleaved-thinking-".into()]), ..Profile::default() };
        assert!(p.beta_allowed("interleaved-thinking-2025-05-14"));
        assert!(!p.beta_allowed("context-1m-2025-08-07"));
        assert_eq!(
            p.filter_anthropic_beta("context-1m-2025-08-07, interleaved-thinking-2025-05-14").as_deref(),
            Some("interleaved-thinking-2025-05-14")
        );
        assert_eq!(p.filter_anthropic_beta("context-1m-2025-08-07"), None);
        let none = Profile { anthropic_beta: Some(Vec::new()), ..Profile::default() };
        assert_eq!(none.filter_anthropic_beta("interleaved-thinking-2025-05-14"), None);
        let all = "context-1m-2025-08-07,interleaved-thinking-2025-05-14";
        assert!(matches!(Profile::default().filter_anthropic_beta(all), Some(Cow::Borrowed(v)) if v == all));
    }
}
