//! OpenAI Chat Completions chunks (translation.md §D.1, input side).
//!
//! Tool calls are keyed by their `index`; the id and name come only on a
//! call's first delta, and a provider that repeats the id on every delta is
//! not starting a new call. A call opens once both its id and name are
//! known, its arguments held until then. The first `finish_reason` closes
//! every block, later ones only update usage, and the end is announced at
//! `[DONE]` (or a clean end of stream after the finish), so one reply has
//! exactly one terminal however many finish chunks the provider sends.

use serde::Deserialize;
use serde_json::Value;

use super::{upstream_error, Emitter, Open, OpenProse};
use crate::protocol::translate::chat::details::Gathered;
use crate::protocol::translate::ir::{BlockKind, Delta, ErrorClass, StopReason, StreamEvent, Tokens};
use crate::protocol::translate::stream::maps::{count, count_in};
use crate::protocol::translate::vocab;

#[derive(Debug, Default)]
pub(crate) struct Chat {
    /// The open text or reasoning block.
    open: OpenProse,
    tools: Vec<Tool>,
    /// The first finish reason; `None` inside for one that is an error.
    finish: Option<Option<StopReason>>,
    /// OpenRouter's `reasoning_details` of the open reasoning block, handed
    /// on as its state when the block closes.
    details: Gathered,
}

#[derive(Debug, Default)]
struct Tool {
    /// The provider's `index`, or the order of first appearance without one.
    key: i64,
    id: Option<String>,
    name: String,
    custom: bool,
    /// The block, once open.
    block: Option<usize>,
    /// Arguments that came before the call could open.
    held: String,
    /// Whitespace at the end of the arguments so far.
    blank_run: usize,
}

/// Longest run of whitespace a call's arguments may have: a provider that
/// loops on whitespace (seen from Copilot) would otherwise stream forever.
const MAX_BLANK_RUN: usize = 500;

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    id: String,
    #[serde(default)]
    model: String,
    created: Option<u64>,
    #[serde(default)]
    choices: Vec<Choice>,
    usage: Option<Value>,
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    index: u32,
    delta: Option<ChoiceDelta>,
    finish_reason: Option<String>,
    /// vLLM: the stop sequence that matched.
    stop_reason: Option<Value>,
}

#[derive(Deserialize, Default)]
struct ChoiceDelta {
    content: Option<String>,
    reasoning_content: Option<String>,
    reasoning: Option<String>,
    reasoning_details: Option<Value>,
    tool_calls: Option<Vec<ToolDelta>>,
}

#[derive(Deserialize)]
struct ToolDelta {
    index: Option<i64>,
    id: Option<String>,
    function: Option<FunctionDelta>,
    /// A call to a custom (freeform) tool: raw `input`, not JSON.
    custom: Option<CustomDelta>,
}

#[derive(Deserialize)]
struct CustomDelta {
    name: Option<String>,
    input: Option<String>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    name: Option<String>,
    arguments: Option<String>,
}

impl Chat {
    pub(crate) fn event(&mut self, data: &str, emit: &mut Emitter, out: &mut Vec<StreamEvent>) {
        if data.trim() == "[DONE]" {
            return self.done(emit, out);
        }
        let Ok(chunk) = serde_json::from_str::<Chunk>(data) else { return emit.unreadable(data, out) };
        if let Some(error) = chunk.error.filter(|e| !e.is_null()) {
            let (error, message) = upstream_error(&serde_json::json!({ "error": error }));
            return emit.upstream_error(error, &message, out);
        }
        emit.start(&chunk.id, &chunk.model, Tokens::default(), out);
        if let Some(created) = chunk.created {
            emit.named(|n| n.created = n.created.or(Some(created)));
        }
        if let Some(usage) = chunk.usage.filter(Value::is_object) {
            emit.add_tokens(tokens(&usage));
        }
        for choice in chunk.choices.into_iter().filter(|c| c.index == 0) {
            if self.finish.is_some() {
                continue; // after the first finish only usage counts
            }
            if let Some(delta) = choice.delta {
                self.delta(delta, emit, out);
            }
            if let Some(reason) = choice.finish_reason {
                let stop_sequence = choice.stop_reason.is_some_and(|s| s.is_string());
                self.finish(&reason, stop_sequence, emit, out);
            }
        }
    }

    /// A clean end of stream counts as `[DONE]` once a finish was seen.
    pub(crate) fn eof(&mut self, emit: &mut Emitter, out: &mut Vec<StreamEvent>) {
        if self.finish.is_some() {
            self.done(emit, out);
        }
    }

    fn delta(&mut self, delta: ChoiceDelta, emit: &mut Emitter, out: &mut Vec<StreamEvent>) {
        let reasoning = delta.reasoning_content.or(delta.reasoning).filter(|r| !r.is_empty());
        // OpenRouter sends the text both as `reasoning` and in its entries:
        // the entries' text counts only when the string is absent.
        let details = delta.reasoning_details.filter(|d| d.as_array().is_some_and(|a| !a.is_empty()));
        let from_details = details.map(|d| {
            self.open.ensure(Open::Reasoning, emit, out);
            self.details.push(&d)
        });
        if let Some(text) = reasoning.or(from_details.filter(|t| !t.is_empty())) {
            let index = self.open.ensure(Open::Reasoning, emit, out);
            emit.delta(index, Delta::Reasoning(text), out);
        }
        if let Some(text) = delta.content.filter(|c| !c.is_empty()) {
            self.hand_on_details(emit, out);
            let index = self.open.ensure(Open::Text, emit, out);
            emit.delta(index, Delta::Text(text), out);
        }
        for call in delta.tool_calls.unwrap_or_default() {
            self.tool(call, emit, out);
        }
    }

    /// The open reasoning block's gathered entries, handed on as its state
    /// before it closes.
    fn hand_on_details(&mut self, emit: &mut Emitter, out: &mut Vec<StreamEvent>) {
        if let Some(index) = self.open.reasoning() {
            if let Some(state) = self.details.take() {
                emit.delta(index, Delta::Opaque(state), out);
            }
        }
    }

    fn close_prose(&mut self, emit: &mut Emitter, out: &mut Vec<StreamEvent>) {
        self.hand_on_details(emit, out);
        self.open.close(emit, out);
    }

    fn tool(&mut self, call: ToolDelta, emit: &mut Emitter, out: &mut Vec<StreamEvent>) {
        let id = call.id.filter(|i| !i.is_empty());
        let at = match call.index {
            // A known id under a new index is still the same call.
            Some(key) => self
                .tools
                .iter()
                .position(|t| t.key == key)
                .or_else(|| id.as_ref().and_then(|id| self.tools.iter().position(|t| t.id.as_ref() == Some(id)))),
            // No index: a new id is a new call, anything else adds to the last.
            None => match (&id, self.tools.last()) {
                (Some(id), Some(last)) if last.id.as_ref() != Some(id) => None,
                (_, Some(_)) => Some(self.tools.len() - 1),
                (_, None) => None,
            },
        };
        let at = at.unwrap_or_else(|| {
            let key = call.index.unwrap_or(self.tools.len() as i64);
            self.tools.push(Tool { key, ..Tool::default() });
            self.tools.len() - 1
        });
        let custom = call.custom.is_some();
        let (name, args) = match (call.function, call.custom) {
            (_, Some(c)) => (c.name, c.input),
            (Some(f), None) => (f.name, f.arguments),
            (None, None) => (None, None),
        };
        let tool = &mut self.tools[at];
        tool.custom |= custom;
        if tool.id.is_none() {
            tool.id = id;
        }
        if let Some(name) = name.filter(|n| !n.trim().is_empty()) {
            if tool.name.is_empty() {
                tool.name = name;
            }
        }
        let args = args.unwrap_or_default();
        let trailing = args.chars().rev().take_while(|c| c.is_whitespace()).count();
        tool.blank_run = if trailing == args.chars().count() { tool.blank_run + trailing } else { trailing };
        if tool.blank_run > MAX_BLANK_RUN {
            return emit.error(ErrorClass::Server, "the provider sent a tool call of endless whitespace", out);
        }
        match tool.block {
            Some(index) => emit.delta(index, Delta::ToolArgs(args), out),
            None => {
                tool.held.push_str(&args);
                if tool.id.is_some() && !tool.name.is_empty() {
                    self.open_tool(at, emit, out);
                }
            }
        }
    }

    fn open_tool(&mut self, at: usize, emit: &mut Emitter, out: &mut Vec<StreamEvent>) {
        self.close_prose(emit, out);
        let ordinal = emit.tool_calls();
        let tool = &mut self.tools[at];
        let id = tool.id.clone().unwrap_or_else(|| format!("call_{ordinal}"));
        let block = BlockKind::ToolCall { id, name: tool.name.clone(), custom: tool.custom };
        let index = emit.open(block, out);
        tool.block = Some(index);
        emit.delta(index, Delta::ToolArgs(std::mem::take(&mut tool.held)), out);
    }

    /// The first finish: close everything. Calls that never got an id open
    /// now with a made-up one; calls that never got a name are dropped.
    fn finish(&mut self, reason: &str, stop_sequence: bool, emit: &mut Emitter, out: &mut Vec<StreamEvent>) {
        self.close_prose(emit, out);
        for at in 0..self.tools.len() {
            if self.tools[at].block.is_none() && !self.tools[at].name.is_empty() {
                self.open_tool(at, emit, out);
            }
            if let Some(index) = self.tools[at].block {
                emit.stop(index, out);
            }
        }
        let reason = match vocab::chat_reason(reason) {
            Some(StopReason::EndTurn) if stop_sequence => Some(StopReason::StopSequence),
            r => r,
        };
        self.finish = Some(reason);
    }

    fn done(&mut self, emit: &mut Emitter, out: &mut Vec<StreamEvent>) {
        match self.finish {
            Some(Some(reason)) => emit.finish(reason, out),
            Some(None) => emit.error(ErrorClass::Overloaded, "the provider stopped without finishing the reply", out),
            None => {
                // [DONE] without a finish reason: close and imply one.
                self.finish("", false, emit, out);
                emit.finish(emit.implied_reason(), out);
            }
        }
    }
}

/// Chat usage: `prompt_tokens` already includes cached tokens.
fn tokens(usage: &Value) -> Tokens {
    Tokens {
        input: count(usage, "prompt_tokens"),
        output: count(usage, "completion_tokens"),
        cache_read: count_in(usage, "prompt_tokens_details", "cached_tokens")
            .or_else(|| count(usage, "prompt_cache_hit_tokens")),
        cache_write: count_in(usage, "prompt_tokens_details", "cache_write_tokens"),
        reasoning: count_in(usage, "completion_tokens_details", "reasoning_tokens"),
    }
}

#[cfg(test)]
mod tests {
    use crate::protocol::translate::ir::{Format, StreamEvent};

    fn call(args: &str, finish: &str) -> String {
        let args = serde_json::Value::from(args);
        format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"tool_calls\":[{{\"index\":0,\"id\":\"c\",\"function\":{{\"name\":\"f\",\"arguments\":{args}}}}}]}}{finish}}}]}}\n\n")
    }

    #[test]
    fn a_tool_call_of_endless_whitespace_is_cut_off() {
        let blanks: String = (0..5).map(|_| call(&" ".repeat(100), "")).collect();
        let end = call("1}", ",\"finish_reason\":\"tool_calls\"") + "data: [DONE]\n\n";
        // Five hundred blanks, then more arguments, are fine.
        let ok = format!("{}{blanks}{end}", call("{\"a\":", ""));
        let events = crate::protocol::translate::stream::decode_all(Format::Chat, ok.as_bytes());
        assert!(matches!(events.last(), Some(StreamEvent::Finish { .. })), "{events:?}");
        let endless = format!("{}{blanks}{}{end}", call("{\"a\":", ""), call(" ", ""));
        let events = crate::protocol::translate::stream::decode_all(Format::Chat, endless.as_bytes());
        assert!(matches!(events.last(), Some(StreamEvent::Error { .. })), "{events:?}");
    }
}
