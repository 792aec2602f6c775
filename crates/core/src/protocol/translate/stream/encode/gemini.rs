//! Google Gemini `streamGenerateContent?alt=sse` chunks for the client
//! (translation.md §D.5): one `data:` object per increment, text as
//! `{text}`, reasoning as `{text, thought: true}`, a tool call as one whole
//! `functionCall` part with object arguments at the block's stop (only
//! that call's arguments are held), and the finish reason with the usage
//! on the last chunk. There is no `[DONE]`: the stream's end is the end.
//!
//! A reasoning block's opaque state becomes the `thoughtSignature` of the
//! first part after it (where Gemini puts it: on the call it belongs to),
//! Gemini's own signature as it was, another family's in an envelope.

use std::collections::HashMap;

use bytes::BytesMut;
use serde_json::{json, Map, Value};

use super::{upstream, Input, Tools};
use crate::protocol::translate::envelope;
use crate::protocol::translate::ir::{BlockKind, Delta, Family, Opaque, StopReason, StreamEvent, Tokens};
use crate::protocol::translate::stream::custom::Wrapper;
use crate::protocol::translate::stream::frames;
use crate::protocol::translate::{error, vocab};

#[derive(Debug)]
pub(crate) struct Gemini {
    tools: Tools,
    id: String,
    blocks: HashMap<usize, Block>,
    /// A signature waiting for the next part.
    signature: Option<String>,
    /// The provider's family, named in envelopes of stateless reasoning.
    origin: Family,
}

#[derive(Debug)]
enum Block {
    Text,
    Reasoning { text: String, opaques: Vec<Opaque>, id: Option<String> },
    Redacted(Opaque),
    Tool { id: String, name: String, args: String, wrap: Option<Wrapper> },
}

impl Gemini {
    pub(crate) fn new(tools: Tools) -> Gemini {
        Gemini { tools, id: String::new(), blocks: HashMap::new(), signature: None, origin: Family::Gemini }
    }

    pub(crate) fn event(&mut self, event: &StreamEvent, out: &mut BytesMut) {
        match event {
            StreamEvent::Start { id, origin, .. } => {
                self.id.clone_from(id);
                self.origin = *origin;
            }
            StreamEvent::BlockStart { index, block } => {
                let block = match block {
                    BlockKind::Text => Block::Text,
                    BlockKind::Reasoning { id } => {
                        Block::Reasoning { text: String::new(), opaques: Vec::new(), id: id.clone() }
                    }
                    BlockKind::RedactedReasoning { opaque } => Block::Redacted(opaque.clone()),
                    BlockKind::ToolCall { id, name, custom } => {
                        let (name, input) = self.tools.client(name, *custom);
                        let wrap = (input == Input::Raw).then(Wrapper::default);
                        Block::Tool { id: id.clone(), name, args: String::new(), wrap }
                    }
                };
                self.blocks.insert(*index, block);
            }
            StreamEvent::Delta { index, delta } => self.delta(*index, delta, out),
            StreamEvent::BlockStop { index } => self.stop(*index, out),
            StreamEvent::Finish { reason, tokens } => self.finish(*reason, tokens, out),
            StreamEvent::Error { class, message, quota } => {
                // State waiting for a part still reaches the client.
                self.flush_signature(out);
                frames::write(out, None, &error::gemini_body(&upstream(*class, message, *quota)));
            }
        }
    }

    fn delta(&mut self, index: usize, delta: &Delta, out: &mut BytesMut) {
        let Some(block) = self.blocks.get_mut(&index) else { return };
        let part = match (block, delta) {
            (Block::Text, Delta::Text(t)) => json!({"text": t}),
            (Block::Reasoning { text, .. }, Delta::Reasoning(t)) => {
                text.push_str(t);
                json!({"text": t, "thought": true})
            }
            (Block::Reasoning { opaques, .. }, Delta::Opaque(o)) => return opaques.push(o.clone()),
            (Block::Tool { args, wrap, .. }, Delta::ToolArgs(a)) => {
                match wrap {
                    Some(w) => args.push_str(&w.push(a)),
                    None => args.push_str(a),
                }
                return;
            }
            _ => return,
        };
        self.part(part, out);
    }

    fn stop(&mut self, index: usize, out: &mut BytesMut) {
        match self.blocks.remove(&index) {
            Some(Block::Reasoning { text, opaques, id }) => {
                let slot =
                    envelope::write_slot(Family::Gemini, self.origin, opaques.last(), &text, id.as_deref(), false);
                if let Some(signature) = slot {
                    self.hold_signature(signature, out);
                }
            }
            Some(Block::Redacted(opaque)) => {
                if let Some(signature) =
                    envelope::write_slot(Family::Gemini, self.origin, Some(&opaque), "", None, true)
                {
                    self.hold_signature(signature, out);
                }
            }
            Some(Block::Tool { id, name, mut args, wrap }) => {
                if let Some(mut w) = wrap {
                    args.push_str(&w.finish());
                }
                let mut call = json!({"name": name, "args": object_args(&args)});
                if !id.is_empty() {
                    call["id"] = id.into();
                }
                self.part(json!({"functionCall": call}), out);
            }
            Some(Block::Text) | None => {}
        }
    }

    /// Holds a signature for the next part; one already held, with no part
    /// between, goes out first on an empty part of its own.
    fn hold_signature(&mut self, signature: String, out: &mut BytesMut) {
        self.flush_signature(out);
        self.signature = Some(signature);
    }

    fn flush_signature(&mut self, out: &mut BytesMut) {
        if self.signature.is_some() {
            self.part(json!({"text": ""}), out);
        }
    }

    fn part(&mut self, mut part: Value, out: &mut BytesMut) {
        if let Some(signature) = self.signature.take() {
            part["thoughtSignature"] = signature.into();
        }
        let chunk = self.chunk(vec![part]);
        frames::write(out, None, &chunk);
    }

    fn chunk(&self, parts: Vec<Value>) -> Value {
        let mut candidate = json!({"index": 0});
        if !parts.is_empty() {
            candidate["content"] = json!({"role": "model", "parts": parts});
        }
        json!({"candidates": [candidate], "modelVersion": self.tools.model(), "responseId": self.id})
    }

    fn finish(&mut self, reason: StopReason, tokens: &Tokens, out: &mut BytesMut) {
        let mut open: Vec<usize> = self.blocks.keys().copied().collect();
        open.sort_unstable();
        for index in open {
            self.stop(index, out);
        }
        // A signature with no part after it goes on an empty text part.
        let parts = match self.signature.take() {
            Some(signature) => vec![json!({"text": "", "thoughtSignature": signature})],
            None => Vec::new(),
        };
        let mut chunk = self.chunk(parts);
        chunk["candidates"][0]["finishReason"] = vocab::gemini_finish(reason).into();
        chunk["usageMetadata"] = usage(tokens);
        frames::write(out, None, &chunk);
    }
}

/// Arguments as the object Gemini requires: `{}` for none or unreadable
/// ones, anything but an object wrapped as `{"value": …}` (§B.6 rule 6).
fn object_args(args: &str) -> Value {
    match serde_json::from_str::<Value>(args) {
        Ok(Value::Object(map)) => Value::Object(map),
        Ok(other) if !args.trim().is_empty() => json!({"value": other}),
        _ => Value::Object(Map::new()),
    }
}

/// Gemini usage: candidates exclude thoughts, which have their own count.
fn usage(tokens: &Tokens) -> Value {
    let input = tokens.input.unwrap_or(0);
    let output = tokens.output.unwrap_or(0);
    let thoughts = tokens.reasoning.unwrap_or(0);
    let mut usage = json!({
        "promptTokenCount": input,
        "candidatesTokenCount": output.saturating_sub(thoughts),
        "thoughtsTokenCount": thoughts,
        "totalTokenCount": input.saturating_add(output),
    });
    if let Some(cached) = tokens.cache_read {
        usage["cachedContentTokenCount"] = cached.into();
    }
    usage
}
