//! Anthropic Messages events for the client (translation.md §D.1, output).
//!
//! `message_start` then `ping`; blocks numbered in the order the client
//! sees them open (a text block opens at its first text, so an empty one
//! never exists: Claude Code would replay it and get a 400); a thinking
//! block always closes with a `signature_delta` (the provider's own
//! signature when it is Anthropic's, an envelope otherwise, and a
//! placeholder when there was no state, since Claude Code requires one);
//! exactly one `message_delta` and one `message_stop`; an error is an
//! `error` event and no `message_stop` follows it.

use std::collections::HashMap;

use bytes::BytesMut;
use serde_json::{json, Value};

use super::{in_order, prefixed, upstream, ToJson, Tools};
use crate::protocol::translate::ir::{BlockKind, Delta, Family, Opaque, StopReason, StreamEvent, Tokens};
use crate::protocol::translate::stream::{frames, maps};
use crate::protocol::translate::{envelope, names};
use crate::protocol::translate::{error, vocab};

#[derive(Debug)]
pub(crate) struct Messages {
    tools: Tools,
    started: bool,
    next: usize,
    blocks: HashMap<usize, Block>,
    tool_calls: usize,
    /// The provider's family, named in envelopes of stateless reasoning.
    origin: Family,
}

#[derive(Debug)]
struct Block {
    /// The client's index, once the block has opened.
    index: Option<usize>,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    Text,
    Thinking { text: String, opaques: Vec<Opaque>, id: Option<String> },
    Redacted(Opaque),
    Tool { args: ToJson, sent_any: bool },
}

impl Messages {
    pub(crate) fn new(tools: Tools) -> Messages {
        Messages { tools, started: false, next: 0, blocks: HashMap::new(), tool_calls: 0, origin: Family::Anthropic }
    }

    pub(crate) fn event(&mut self, event: &StreamEvent, out: &mut BytesMut) {
        match event {
            StreamEvent::Start { id, tokens, origin, .. } => {
                self.origin = *origin;
                self.start(id, tokens, out);
            }
            StreamEvent::BlockStart { index, block } => self.block_start(*index, block, out),
            StreamEvent::Delta { index, delta } => self.delta(*index, delta, out),
            StreamEvent::BlockStop { index } => self.stop(*index, out),
            StreamEvent::Finish { reason, tokens } => self.finish(*reason, tokens, out),
            StreamEvent::Error { class, message, quota } => {
                frames::write(out, Some("error"), &error::messages_body(&upstream(*class, message, *quota)));
            }
        }
    }

    fn start(&mut self, id: &str, tokens: &Tokens, out: &mut BytesMut) {
        if self.started {
            return;
        }
        self.started = true;
        let message = json!({
            "id": prefixed("msg_", id),
            "type": "message",
            "role": "assistant",
            "model": self.tools.model(),
            "content": [],
            "stop_reason": null,
            "stop_sequence": null,
            "usage": usage(tokens),
        });
        frames::write(out, Some("message_start"), &json!({"type": "message_start", "message": message}));
        frames::write(out, Some("ping"), &json!({"type": "ping"}));
    }

    fn block_start(&mut self, index: usize, block: &BlockKind, out: &mut BytesMut) {
        self.start("", &Tokens::default(), out);
        let kind = match block {
            BlockKind::Text => Kind::Text,
            BlockKind::Reasoning { id } => Kind::Thinking { text: String::new(), opaques: Vec::new(), id: id.clone() },
            BlockKind::RedactedReasoning { opaque } => Kind::Redacted(opaque.clone()),
            BlockKind::ToolCall { id, name, custom } => {
                let (name, input) = self.tools.client(name, *custom);
                self.tool_calls += 1;
                let ours = self
                    .open(json!({"type": "tool_use", "id": names::call_id(id, 64), "name": name, "input": {}}), out);
                let block = Block { index: Some(ours), kind: Kind::Tool { args: ToJson::new(input), sent_any: false } };
                self.blocks.insert(index, block);
                return;
            }
        };
        // Text and thinking open at their first text (Claude Code would
        // replay an empty block and get a 400); a redacted block at its stop.
        self.blocks.insert(index, Block { index: None, kind });
    }

    fn open(&mut self, content_block: Value, out: &mut BytesMut) -> usize {
        let index = self.next;
        self.next += 1;
        let event = json!({"type": "content_block_start", "index": index, "content_block": content_block});
        frames::write(out, Some("content_block_start"), &event);
        index
    }

    fn delta(&mut self, index: usize, delta: &Delta, out: &mut BytesMut) {
        let Some(block) = self.blocks.get_mut(&index) else { return };
        let payload = match (&mut block.kind, delta) {
            (Kind::Text, Delta::Text(t)) => json!({"type": "text_delta", "text": t}),
            (Kind::Thinking { text, .. }, Delta::Reasoning(t)) => {
                text.push_str(t);
                json!({"type": "thinking_delta", "thinking": t})
            }
            (Kind::Thinking { opaques, .. }, Delta::Opaque(o)) => {
                opaques.push(o.clone());
                return;
            }
            (Kind::Tool { args, sent_any }, Delta::ToolArgs(a)) => {
                let partial = args.push(a);
                if partial.is_empty() {
                    return;
                }
                *sent_any = true;
                json!({"type": "input_json_delta", "partial_json": partial})
            }
            _ => return,
        };
        let ours = match block.index {
            Some(ours) => ours,
            None => {
                let ours = self.next;
                self.next += 1;
                let empty = match block.kind {
                    Kind::Thinking { .. } => json!({"type": "thinking", "thinking": "", "signature": ""}),
                    _ => json!({"type": "text", "text": ""}),
                };
                let start = json!({"type": "content_block_start", "index": ours, "content_block": empty});
                frames::write(out, Some("content_block_start"), &start);
                block.index = Some(ours);
                ours
            }
        };
        block_delta(out, ours, payload);
    }

    fn stop(&mut self, index: usize, out: &mut BytesMut) {
        let Some(block) = self.blocks.remove(&index) else { return };
        let ours = match block.kind {
            Kind::Text => block.index,
            Kind::Thinking { text, opaques, id } => {
                // Text, or state, or both: never an empty signature.
                let slot =
                    envelope::write_slot(Family::Anthropic, self.origin, opaques.last(), &text, id.as_deref(), false);
                let Some(signature) = slot else { return };
                let ours = match block.index {
                    Some(ours) => ours,
                    None => self.open(json!({"type": "thinking", "thinking": "", "signature": ""}), out),
                };
                block_delta(out, ours, json!({"type": "signature_delta", "signature": signature}));
                Some(ours)
            }
            Kind::Redacted(opaque) => {
                let slot = envelope::write_slot(Family::Anthropic, self.origin, Some(&opaque), "", None, true);
                let data = slot.unwrap_or_default();
                let ours = if opaque.origin == Family::Anthropic {
                    self.open(json!({"type": "redacted_thinking", "data": data}), out)
                } else {
                    let ours = self.open(json!({"type": "thinking", "thinking": "", "signature": ""}), out);
                    block_delta(out, ours, json!({"type": "signature_delta", "signature": data}));
                    ours
                };
                Some(ours)
            }
            Kind::Tool { mut args, sent_any } => {
                let end = args.finish(sent_any);
                if let (Some(ours), false) = (block.index, end.is_empty() || end == "{}") {
                    block_delta(out, ours, json!({"type": "input_json_delta", "partial_json": end}));
                }
                block.index
            }
        };
        if let Some(ours) = ours {
            frames::write(out, Some("content_block_stop"), &json!({"type": "content_block_stop", "index": ours}));
        }
    }

    fn finish(&mut self, reason: StopReason, tokens: &Tokens, out: &mut BytesMut) {
        self.start("", &Tokens::default(), out);
        for index in in_order(&self.blocks) {
            self.stop(index, out);
        }
        let reason = reason.with_calls(self.tool_calls > 0);
        let delta = json!({"stop_reason": vocab::messages_reason_name(reason), "stop_sequence": null});
        frames::write(
            out,
            Some("message_delta"),
            &json!({"type": "message_delta", "delta": delta, "usage": usage(tokens)}),
        );
        frames::write(out, Some("message_stop"), &json!({"type": "message_stop"}));
    }
}

fn block_delta(out: &mut BytesMut, index: usize, delta: Value) {
    frames::write(
        out,
        Some("content_block_delta"),
        &json!({"type": "content_block_delta", "index": index, "delta": delta}),
    );
}

/// Anthropic usage: `input_tokens` without the cache. At the start an
/// OpenAI-kind provider has not said yet: 0 then, the truth at the end.
fn usage(tokens: &Tokens) -> Value {
    let mut usage = json!({"input_tokens": maps::uncached_input(tokens), "output_tokens": tokens.output.unwrap_or(0)});
    if let Some(read) = tokens.cache_read {
        usage["cache_read_input_tokens"] = read.into();
    }
    if let Some(write) = tokens.cache_write {
        usage["cache_creation_input_tokens"] = write.into();
    }
    usage
}
