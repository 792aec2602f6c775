//! OpenAI Responses events (translation.md §D.4).
//!
//! Output items map to blocks by `output_index`: a reasoning item to a
//! reasoning block with the item's id (its `encrypted_content` becomes
//! opaque OpenAI state at `output_item.done`), a message to a text block
//! (opened at its first text, so an empty message makes no block), a
//! `function_call` or `custom_tool_call` to a tool call. A done item whose
//! content never came as deltas is sent whole from the done event. Summary
//! parts are joined with a blank line. A replayed `sequence_number` (a
//! provider resuming after a reconnect) is dropped.

use serde::Deserialize;
use serde_json::Value;

use super::{upstream_error, Emitter};
use crate::protocol::translate::ir::{BlockKind, Delta, Family, Opaque, StreamEvent, Tokens};
use crate::protocol::translate::stream::maps::{count, count_in};
use crate::protocol::translate::{vocab, wire};

#[derive(Debug, Default)]
pub(crate) struct Responses {
    items: Vec<Item>,
    last_sequence: Option<u64>,
}

#[derive(Debug)]
struct Item {
    output_index: u64,
    kind: ItemKind,
    /// The block, once open (a message's opens at its first text).
    block: Option<usize>,
    /// Whether any delta came, so the done item need not be sent whole.
    streamed: bool,
    /// The summary part the last reasoning delta was in.
    summary_index: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ItemKind {
    Message,
    Reasoning,
    Tool,
}

#[derive(Deserialize)]
struct Event {
    #[serde(rename = "type", default)]
    kind: String,
    sequence_number: Option<u64>,
    output_index: Option<u64>,
    summary_index: Option<u64>,
    #[serde(default)]
    delta: String,
    item: Option<Value>,
    response: Option<Value>,
    code: Option<Value>,
    message: Option<String>,
}

impl Responses {
    pub(crate) fn event(&mut self, name: &str, data: &str, emit: &mut Emitter, out: &mut Vec<StreamEvent>) {
        let Ok(event) = serde_json::from_str::<Event>(data) else { return emit.unreadable(data, out) };
        if let Some(seq) = event.sequence_number {
            if self.last_sequence.is_some_and(|last| seq <= last) {
                return;
            }
            self.last_sequence = Some(seq);
            emit.named(|n| n.sequence = Some(seq));
        }
        let kind = if event.kind.is_empty() { name } else { event.kind.as_str() };
        match kind {
            "response.created" | "response.in_progress" => {
                let response = event.response.unwrap_or(Value::Null);
                let text = |k: &str| response.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
                if let Some(created) = response.get("created_at").and_then(Value::as_u64) {
                    emit.named(|n| n.created = n.created.or(Some(created)));
                }
                emit.start(&text("id"), &text("model"), Tokens::default(), out);
            }
            "response.output_item.added" => self.added(&event, emit, out),
            "response.output_text.delta" | "response.refusal.delta" => {
                if let Some(index) = self.message_block(event.output_index, emit, out) {
                    emit.delta(index, Delta::Text(event.delta), out);
                }
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                self.reasoning_delta(&event, emit, out);
            }
            "response.function_call_arguments.delta" | "response.custom_tool_call_input.delta" => {
                if let Some(item) = self.item(event.output_index) {
                    item.streamed = true;
                    if let Some(index) = item.block {
                        emit.delta(index, Delta::ToolArgs(event.delta), out);
                    }
                }
            }
            "response.output_item.done" => self.done(&event, emit, out),
            "response.completed" | "response.incomplete" => {
                let response = event.response.unwrap_or(Value::Null);
                if let Some(usage) = response.get("usage").filter(|u| u.is_object()) {
                    emit.add_tokens(tokens(usage));
                }
                let reason = match response.pointer("/incomplete_details/reason").and_then(Value::as_str) {
                    Some(reason) => vocab::responses_incomplete(reason),
                    None if kind == "response.incomplete" => vocab::responses_incomplete(""),
                    None => emit.implied_reason(),
                };
                emit.finish(reason, out);
            }
            "response.failed" => {
                let error = event.response.as_ref().and_then(|r| r.get("error")).cloned().unwrap_or(Value::Null);
                let (error, message) = upstream_error(&error);
                emit.upstream_error(error, &message, out);
            }
            "error" => {
                let error = serde_json::json!({ "code": event.code, "message": event.message });
                let (error, message) = upstream_error(&error);
                emit.upstream_error(error, &message, out);
            }
            _ => {}
        }
    }

    fn item(&mut self, output_index: Option<u64>) -> Option<&mut Item> {
        let output_index = output_index?;
        self.items.iter_mut().find(|i| i.output_index == output_index)
    }

    fn added(&mut self, event: &Event, emit: &mut Emitter, out: &mut Vec<StreamEvent>) {
        let (Some(output_index), Some(item)) = (event.output_index, event.item.as_ref()) else { return };
        let text = |k: &str| item.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        emit.named(|n| n.items.push(text("id")));
        let (kind, block) = match item.get("type").and_then(Value::as_str) {
            Some("message") => (ItemKind::Message, None),
            Some("reasoning") => {
                let id = Some(text("id")).filter(|i| !i.is_empty());
                (ItemKind::Reasoning, Some(emit.open(BlockKind::Reasoning { id }, out)))
            }
            Some(t @ ("function_call" | "custom_tool_call")) => {
                let call =
                    BlockKind::ToolCall { id: text("call_id"), name: text("name"), custom: t == "custom_tool_call" };
                (ItemKind::Tool, Some(emit.open(call, out)))
            }
            _ => return, // hosted tool calls no other format can show
        };
        self.items.push(Item { output_index, kind, block, streamed: false, summary_index: None });
    }

    fn message_block(
        &mut self,
        output_index: Option<u64>,
        emit: &mut Emitter,
        out: &mut Vec<StreamEvent>,
    ) -> Option<usize> {
        let item = self.item(output_index).filter(|i| i.kind == ItemKind::Message)?;
        item.streamed = true;
        Some(*item.block.get_or_insert_with(|| emit.open(BlockKind::Text, out)))
    }

    fn reasoning_delta(&mut self, event: &Event, emit: &mut Emitter, out: &mut Vec<StreamEvent>) {
        let Some(item) = self.item(event.output_index).filter(|i| i.kind == ItemKind::Reasoning) else { return };
        let Some(index) = item.block else { return };
        // A new summary part after text starts a new paragraph.
        if item.streamed && event.summary_index.is_some() && event.summary_index != item.summary_index {
            emit.delta(index, Delta::Reasoning("\n\n".into()), out);
        }
        item.summary_index = event.summary_index.or(item.summary_index);
        item.streamed |= !event.delta.is_empty();
        emit.delta(index, Delta::Reasoning(event.delta.clone()), out);
    }

    fn done(&mut self, event: &Event, emit: &mut Emitter, out: &mut Vec<StreamEvent>) {
        let Some(done) = event.item.as_ref() else { return };
        let Some(at) = event.output_index.and_then(|o| self.items.iter().position(|i| i.output_index == o)) else {
            return;
        };
        let item = self.items.remove(at);
        let text = |k: &str| done.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        match item.kind {
            ItemKind::Message => {
                let block = match item.block {
                    Some(index) => Some(index),
                    None => {
                        let whole = message_text(done);
                        (!whole.is_empty()).then(|| {
                            let index = emit.open(BlockKind::Text, out);
                            emit.delta(index, Delta::Text(whole), out);
                            index
                        })
                    }
                };
                if let Some(index) = block {
                    emit.stop(index, out);
                }
            }
            ItemKind::Reasoning => {
                let Some(index) = item.block else { return };
                if !item.streamed {
                    emit.delta(index, Delta::Reasoning(summary_text(done)), out);
                }
                let encrypted = text("encrypted_content");
                if !encrypted.is_empty() {
                    emit.delta(index, Delta::Opaque(Opaque { origin: Family::OpenAi, value: encrypted }), out);
                }
                emit.stop(index, out);
            }
            ItemKind::Tool => {
                let Some(index) = item.block else { return };
                if !item.streamed {
                    let whole = done.get("arguments").or_else(|| done.get("input"));
                    emit.delta(index, Delta::ToolArgs(whole.and_then(Value::as_str).unwrap_or_default().into()), out);
                }
                emit.stop(index, out);
            }
        }
    }
}

/// The text of a done message item, its parts joined.
fn message_text(item: &Value) -> String {
    let parts = item.get("content").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    parts
        .iter()
        .filter_map(|p| p.get("text").or_else(|| p.get("refusal")).and_then(Value::as_str))
        .collect::<Vec<_>>()
        .concat()
}

/// The summary of a done reasoning item, its parts a paragraph each.
fn summary_text(item: &Value) -> String {
    wire::texts(item.get("summary")).collect::<Vec<_>>().join("\n\n")
}

/// Responses usage: `input_tokens` includes cached tokens.
fn tokens(usage: &Value) -> Tokens {
    Tokens {
        input: count(usage, "input_tokens"),
        output: count(usage, "output_tokens"),
        cache_read: count_in(usage, "input_tokens_details", "cached_tokens"),
        cache_write: count_in(usage, "input_tokens_details", "cache_write_tokens"),
        reasoning: count_in(usage, "output_tokens_details", "reasoning_tokens"),
    }
}
