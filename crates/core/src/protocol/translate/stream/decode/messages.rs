//! Anthropic Messages events.
//!
//! Blocks keep Anthropic's order but get the intermediate numbering (a
//! server-tool result block, which no other format can show, takes no
//! number and its deltas are dropped). A thinking block's `signature_delta`
//! becomes opaque Anthropic state on the reasoning block; a
//! `redacted_thinking` block is opaque state whole. Usage comes in two
//! parts, input at `message_start` and output at `message_delta`.

use serde::Deserialize;
use serde_json::Value;

use super::{upstream_error, Emitter};
use crate::protocol::translate::ir::{BlockKind, Delta, Family, Opaque, StopReason, StreamEvent, Tokens};
use crate::protocol::translate::stream::maps::count;
use crate::protocol::translate::vocab;

#[derive(Debug, Default)]
pub(crate) struct Messages {
    /// Anthropic's block index → ours, with the input a tool_use block
    /// started with (sent if no delta follows).
    blocks: Vec<(u64, usize, Option<String>)>,
    reason: Option<StopReason>,
}

#[derive(Deserialize)]
struct Event {
    #[serde(rename = "type", default)]
    kind: String,
    message: Option<Message>,
    index: Option<u64>,
    content_block: Option<Value>,
    delta: Option<Value>,
    usage: Option<Value>,
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Message {
    #[serde(default)]
    id: String,
    #[serde(default)]
    model: String,
    usage: Option<Value>,
}

impl Messages {
    pub(crate) fn event(&mut self, name: &str, data: &str, emit: &mut Emitter, out: &mut Vec<StreamEvent>) {
        let Ok(event) = serde_json::from_str::<Event>(data) else { return emit.unreadable(data, out) };
        let kind = if event.kind.is_empty() { name } else { event.kind.as_str() };
        match kind {
            "message_start" => {
                let message = event.message.unwrap_or(Message { id: String::new(), model: String::new(), usage: None });
                let tokens = message.usage.as_ref().map(tokens).unwrap_or_default();
                emit.start(&message.id, &message.model, tokens, out);
            }
            "content_block_start" => {
                if let (Some(index), Some(block)) = (event.index, event.content_block) {
                    self.block_start(index, &block, emit, out);
                }
            }
            "content_block_delta" => {
                if let (Some(index), Some(delta)) = (event.index.and_then(|i| self.ours(i)), event.delta) {
                    self.block_delta(index, &delta, emit, out);
                }
            }
            "content_block_stop" => {
                if let Some(at) = event.index.and_then(|i| self.blocks.iter().position(|b| b.0 == i)) {
                    let (_, index, input) = self.blocks.remove(at);
                    if let Some(input) = input {
                        emit.delta(index, Delta::ToolArgs(input), out);
                    }
                    emit.stop(index, out);
                }
            }
            "message_delta" => {
                if let Some(reason) = event.delta.as_ref().and_then(|d| d.get("stop_reason")).and_then(Value::as_str) {
                    self.reason = Some(vocab::messages_reason(reason));
                }
                if let Some(usage) = event.usage.as_ref() {
                    emit.add_tokens(tokens(usage));
                }
            }
            "message_stop" => emit.finish(self.reason.unwrap_or_else(|| emit.implied_reason()), out),
            "error" => {
                let (error, message) = upstream_error(&serde_json::json!({ "error": event.error }));
                emit.upstream_error(error, &message, out);
            }
            _ => {} // ping, and event types added later
        }
    }

    fn ours(&self, index: u64) -> Option<usize> {
        self.blocks.iter().find(|b| b.0 == index).map(|b| b.1)
    }

    fn block_start(&mut self, index: u64, block: &Value, emit: &mut Emitter, out: &mut Vec<StreamEvent>) {
        let text = |k: &str| block.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        let (kind, first, input) = match block.get("type").and_then(Value::as_str) {
            Some("text") => (BlockKind::Text, Some(Delta::Text(text("text"))), None),
            Some("thinking") => (BlockKind::Reasoning { id: None }, Some(Delta::Reasoning(text("thinking"))), None),
            Some("redacted_thinking") => {
                let opaque = Opaque { origin: Family::Anthropic, value: text("data") };
                (BlockKind::RedactedReasoning { opaque }, None, None)
            }
            Some("tool_use") => {
                let kind = BlockKind::ToolCall { id: text("id"), name: text("name"), custom: false };
                // Streams start tools with `input: {}` and send the input as
                // deltas; an input given whole is kept for the block's stop.
                let input = block.get("input").filter(|i| i.as_object().is_some_and(|o| !o.is_empty()));
                (kind, None, input.map(Value::to_string))
            }
            _ => return,
        };
        let ours = emit.open(kind, out);
        self.blocks.push((index, ours, input));
        if let Some(first) = first {
            emit.delta(ours, first, out);
        }
    }

    fn block_delta(&mut self, index: usize, delta: &Value, emit: &mut Emitter, out: &mut Vec<StreamEvent>) {
        let text = |k: &str| delta.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        let delta = match delta.get("type").and_then(Value::as_str) {
            Some("text_delta") => Delta::Text(text("text")),
            Some("thinking_delta") => Delta::Reasoning(text("thinking")),
            Some("signature_delta") => Delta::Opaque(Opaque { origin: Family::Anthropic, value: text("signature") }),
            Some("input_json_delta") => {
                // Deltas replace an input given whole at the start.
                if let Some(block) = self.blocks.iter_mut().find(|b| b.1 == index) {
                    block.2 = None;
                }
                Delta::ToolArgs(text("partial_json"))
            }
            _ => return, // citations and deltas added later
        };
        emit.delta(index, delta, out);
    }
}

/// Anthropic usage: `input_tokens` excludes the cache, which ours includes.
fn tokens(usage: &Value) -> Tokens {
    let read = count(usage, "cache_read_input_tokens");
    let write = count(usage, "cache_creation_input_tokens");
    let input =
        count(usage, "input_tokens").map(|i| i.saturating_add(read.unwrap_or(0)).saturating_add(write.unwrap_or(0)));
    Tokens { input, output: count(usage, "output_tokens"), cache_read: read, cache_write: write, reasoning: None }
}
