//! Every field translation drops, in one table, each with its reason.
//!
//! A codec drops something only by naming it here: decoders for source
//! fields that mean nothing outside their format, encoders for what the
//! target cannot express. Each drop is recorded in [`Drops`], so a
//! translation can say what it left out, and a name missing from the table
//! shows up as unlisted (the tests require none, and every row to be hit).

use super::ir::Format;

/// When a field is dropped: reading the client's body, or writing the
/// provider's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stage {
    Decode,
    Encode,
}

/// One deliberate drop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Row {
    pub stage: Stage,
    /// The source format (decode) or the target format (encode).
    pub format: Format,
    /// The field, as a path in the source (decode) or a name of the concept
    /// in the intermediate form (encode).
    pub field: &'static str,
    pub reason: &'static str,
}

const fn d(format: Format, field: &'static str, reason: &'static str) -> Row {
    Row { stage: Stage::Decode, format, field, reason }
}

const fn e(format: Format, field: &'static str, reason: &'static str) -> Row {
    Row { stage: Stage::Encode, format, field, reason }
}

use Format::{Chat, Gemini, Messages, Responses};

const HOSTED: &str = "a tool the provider runs itself exists only in its own API";
const NO_STATE: &str = "the provider keeps no state between requests";
const NOT_IN_FORMAT: &str = "the format has no such parameter";
const FOREIGN_REASONING: &str =
    "reasoning state is only valid for the provider family that produced it; a foreign or unsigned block is a 400";
const NO_TOOLS: &str = "tool_choice and parallel_tool_calls without tools (or naming a dropped tool) are rejected";
const CACHE: &str = "prompt-cache markers exist only in Anthropic Messages; other providers cache implicitly";
const ORPHAN: &str = "a result without its call is rejected";
const FOREIGN_EXTRAS: &str = "fields unknown to the gateway pass only within their own provider family";
const NO_CACHE_KEY: &str = "this provider's profile takes no prompt_cache_key";
const NO_SAMPLING: &str = "this provider's profile rejects temperature and top_p (OpenAI reasoning models)";

/// The table. Keep rows grouped by stage, then format.
pub const TABLE: &[Row] = &[
    // Reading the client's body.
    d(Chat, "logit_bias", "token ids are tokenizer-specific and mean nothing to another model"),
    d(Chat, "prediction", "predicted outputs are a latency optimisation only OpenAI implements"),
    d(Chat, "web_search_options", HOSTED),
    d(Chat, "stream_options", "usage is requested per target (the gateway always wants it)"),
    d(Chat, "messages[].name", "participant names have no equivalent outside Chat"),
    d(Chat, "store", "OpenAI's stored-completions log; nothing later refers to it"),
    d(Responses, "include", "names Responses output extras; the gateway asks for what it needs"),
    d(Responses, "client_metadata", "Codex's installation and client details, for OpenAI's own bookkeeping"),
    d(Responses, "truncation", "server-side context truncation exists only in Responses"),
    d(Responses, "max_tool_calls", NOT_IN_FORMAT),
    d(Responses, "stream_options", "Responses stream obfuscation has no equivalent"),
    d(Responses, "input[type=local_shell_call]", HOSTED),
    d(Responses, "input[type=hosted_call]", HOSTED),
    d(Responses, "tool_choice.allowed_tools", "an allowed subset of tools has no equivalent; its mode is kept"),
    d(Responses, "tool_choice[hosted]", HOSTED),
    d(Responses, "input[status=incomplete]", "an interrupted call never ran; forwarding it orphans a call"),
    d(Messages, "content[].citations", "citations refer to Anthropic documents and search results"),
    d(Messages, "content[type=server_tool]", HOSTED),
    d(Messages, "container", "Anthropic code-execution containers exist only there"),
    d(Messages, "mcp_servers", HOSTED),
    d(Messages, "context_management", "Anthropic-side context editing exists only there"),
    d(Messages, "metadata", "only metadata.user_id has a meaning elsewhere"),
    d(Gemini, "safetySettings", "safety thresholds are Google's; other providers apply their own"),
    d(Gemini, "labels", "billing labels are Google Cloud's"),
    d(Gemini, "contents[].parts[].executableCode", HOSTED),
    d(Gemini, "generationConfig.mediaResolution", NOT_IN_FORMAT),
    d(Gemini, "generationConfig.responseModalities", "text is the only modality translated"),
    d(Gemini, "toolConfig.functionCallingConfig.allowedFunctionNames", "a subset of several tools has no equivalent"),
    // Writing the provider's body.
    e(Chat, "top_k", NOT_IN_FORMAT),
    e(Chat, "cache", CACHE),
    e(Chat, "reasoning", "OpenAI Chat cannot carry reasoning back; this provider's profile reads none"),
    e(Chat, "reasoning.budget", "Chat takes an effort, not a budget; the budget became an effort"),
    e(Chat, "reasoning.summary", NOT_IN_FORMAT),
    e(Chat, "tools[hosted]", HOSTED),
    e(Chat, "prompt_cache_key", NO_CACHE_KEY),
    e(Responses, "prompt_cache_key", NO_CACHE_KEY),
    e(Chat, "reasoning_effort", "this provider's profile does not accept reasoning_effort"),
    e(Chat, "stop[4..]", "Chat takes at most four stop sequences"),
    e(Chat, "store", NO_STATE),
    e(Chat, "tool_choice", NO_TOOLS),
    e(Chat, "parallel_tools", "this provider's profile does not accept parallel_tool_calls"),
    e(Chat, "sampling", NO_SAMPLING),
    e(Responses, "top_k", NOT_IN_FORMAT),
    e(Responses, "stop", "Responses has no stop sequences"),
    e(Responses, "seed", NOT_IN_FORMAT),
    e(Responses, "penalties", NOT_IN_FORMAT),
    e(Responses, "cache", CACHE),
    e(Responses, "reasoning", FOREIGN_REASONING),
    e(Responses, "tools[hosted]", HOSTED),
    e(Responses, "reasoning.budget", "Responses takes an effort, not a budget; the budget became an effort"),
    e(Responses, "tool_choice", NO_TOOLS),
    e(Responses, "sampling", NO_SAMPLING),
    e(Messages, "seed", NOT_IN_FORMAT),
    e(Messages, "penalties", NOT_IN_FORMAT),
    e(Messages, "logprobs", "Anthropic returns no log probabilities; the reply has none"),
    e(Messages, "reasoning", FOREIGN_REASONING),
    e(Messages, "reasoning.budget", "adaptive thinking takes an effort, not a budget; the budget became an effort"),
    e(Messages, "temperature", "Anthropic requires the default temperature while thinking"),
    e(Messages, "top_k", "Anthropic rejects top_k while thinking"),
    e(Messages, "top_p", "Anthropic requires top_p of at least 0.95 while thinking"),
    e(Messages, "sampling", "this model takes only the default sampling (Claude Opus 4.7 and later)"),
    e(Messages, "tools[hosted]", HOSTED),
    e(Messages, "tools[].strict", "strict tools need an Anthropic beta most compatible servers lack"),
    e(Messages, "metadata", "Anthropic metadata takes only user_id"),
    e(Messages, "service_tier", "Anthropic knows only auto and standard_only"),
    e(Messages, "store", NO_STATE),
    e(Messages, "verbosity", NOT_IN_FORMAT),
    e(Messages, "tool_choice", NO_TOOLS),
    e(Messages, "parallel_tools", "this provider's profile does not accept disable_parallel_tool_use"),
    e(Messages, "cache[5..]", "Anthropic allows at most four cache breakpoints"),
    e(Messages, "prompt_cache_key", "Anthropic caches by cache_control markers, not a key"),
    e(Gemini, "cache", CACHE),
    e(Gemini, "reasoning", FOREIGN_REASONING),
    e(Gemini, "user", "Gemini takes no end-user id"),
    e(Gemini, "metadata", NOT_IN_FORMAT),
    e(Gemini, "service_tier", NOT_IN_FORMAT),
    e(Gemini, "store", NO_STATE),
    e(Gemini, "verbosity", NOT_IN_FORMAT),
    e(Gemini, "tools[hosted]", HOSTED),
    e(Gemini, "tools[].strict", "Gemini has no strict mode"),
    e(Gemini, "tool_call.id", "ids from other providers mean nothing to Gemini, which pairs results by order"),
    e(Gemini, "stop[5..]", "Gemini takes at most five stop sequences"),
    e(Gemini, "tool_choice", NO_TOOLS),
    e(Gemini, "parallel_tools", NOT_IN_FORMAT),
    e(Gemini, "prompt_cache_key", "Gemini caches implicitly"),
    e(Messages, "tool_result.orphan", ORPHAN),
    e(Chat, "tool_result.orphan", ORPHAN),
    e(Responses, "tool_result.orphan", ORPHAN),
    e(Gemini, "tool_result.orphan", ORPHAN),
    e(Chat, "extras", FOREIGN_EXTRAS),
    e(Responses, "extras", FOREIGN_EXTRAS),
    e(Messages, "extras", FOREIGN_EXTRAS),
    e(Gemini, "extras", FOREIGN_EXTRAS),
];

/// Why `field` is dropped at `stage` for `format`, when the table says it is.
pub fn dropped(stage: Stage, format: Format, field: &str) -> Option<&'static str> {
    row(stage, format, field).map(|r| r.reason)
}

fn row(stage: Stage, format: Format, field: &str) -> Option<&'static Row> {
    TABLE.iter().find(|r| r.stage == stage && r.format == format && r.field == field)
}

/// A piece of the client's body the translator has never seen: a field, a
/// role's content, a block, an item or a value new to it. It is carried
/// where the target has a generic slot (a block with text becomes text),
/// else left out; either way the attempt lists it, so what a new client
/// release sends is seen instead of silently lost or refused.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Unmapped {
    /// Where it was in the client's body, e.g. `messages[3].content[1]`.
    pub path: String,
    /// What it was and what became of it.
    pub what: String,
}

/// What one translation dropped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Drops {
    /// Table rows hit, each once, in the order first hit.
    pub rows: Vec<&'static Row>,
    /// Drops a codec made without a table row: a bug, which tests catch.
    pub unlisted: Vec<(Stage, Format, String)>,
    /// What the client sent that the translator does not know.
    pub unmapped: Vec<Unmapped>,
    /// Values the translator changed to what the target takes, as
    /// `(field, what became of it)`.
    pub changed: Vec<(String, String)>,
}

impl Drops {
    /// Records a drop of `field` by a codec of `format` at `stage`.
    pub fn note(&mut self, stage: Stage, format: Format, field: &str) {
        if !self.note_listed(stage, format, field) {
            tracing::warn!(?stage, %format, field, "translation dropped a field the drop table does not list");
            self.unlisted.push((stage, format, field.to_owned()));
        }
    }

    /// Records a drop of `field` when the table lists it, and says whether
    /// it does; an unlisted field is left to the caller.
    pub fn note_listed(&mut self, stage: Stage, format: Format, field: &str) -> bool {
        let Some(r) = row(stage, format, field) else { return false };
        if !self.rows.contains(&r) {
            self.rows.push(r);
        }
        true
    }

    pub fn extend(&mut self, other: &Drops) {
        for r in &other.rows {
            if !self.rows.contains(r) {
                self.rows.push(r);
            }
        }
        self.unlisted.extend(other.unlisted.iter().cloned());
        for u in &other.unmapped {
            if !self.unmapped.contains(u) {
                self.unmapped.push(u.clone());
            }
        }
    }

    /// Records something of the client's body new to the translator.
    pub fn note_unmapped(&mut self, path: impl Into<String>, what: impl Into<String>) {
        let u = Unmapped { path: path.into(), what: what.into() };
        tracing::debug!(path = %u.path, what = %u.what, "translation met something it does not know");
        if !self.unmapped.contains(&u) {
            self.unmapped.push(u);
        }
    }

    /// Whether nothing was dropped or left unmapped.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty() && self.unlisted.is_empty() && self.unmapped.is_empty() && self.changed.is_empty()
    }

    /// Records that `field`'s value was changed, and to what.
    pub fn note_changed(&mut self, field: &str, what: String) {
        self.changed.push((field.to_owned(), what));
    }

    /// The dropped fields with their reasons, then what was unmapped, for a
    /// log line or attempt row.
    pub fn describe(&self) -> Vec<String> {
        let rows = self.rows.iter().map(|r| format!("{}: {}", r.field, r.reason));
        let unmapped = self.unmapped.iter().map(|u| format!("{}: unmapped: {}", u.path, u.what));
        let changed = self.changed.iter().map(|(field, what)| format!("{field}: {what}"));
        rows.chain(unmapped).chain(changed).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_unique() {
        for (i, a) in TABLE.iter().enumerate() {
            for b in &TABLE[i + 1..] {
                assert!(!(a.stage == b.stage && a.format == b.format && a.field == b.field), "duplicate {a:?}");
            }
        }
    }

    #[test]
    fn an_unlisted_drop_is_recorded_as_such() {
        let mut drops = Drops::default();
        drops.note(Stage::Encode, Format::Chat, "top_k");
        drops.note(Stage::Encode, Format::Chat, "top_k");
        drops.note(Stage::Encode, Format::Chat, "no such field");
        assert_eq!(drops.rows.len(), 1);
        assert_eq!(drops.unlisted.len(), 1);
        assert_eq!(dropped(Stage::Encode, Format::Chat, "top_k"), Some(NOT_IN_FORMAT));
    }
}
