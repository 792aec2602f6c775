//! Google Gemini `streamGenerateContent?alt=sse` chunks (translation.md §D.5).
//!
//! Every chunk is a whole `GenerateContentResponse`; its parts are
//! increments. `thought: true` text is reasoning. A `functionCall` arrives
//! whole, so it becomes a tool block with its arguments in one delta; a
//! call without an id gets one made up from the response id, as the reply
//! codec makes them (no id is ever sent back to Gemini). A `thoughtSignature`
//! is opaque Gemini state and rides on a reasoning block: the open one, or
//! one opened for it just before the part that carried it, so the state
//! reaches a client of another format ahead of the call it belongs to. The
//! last `usageMetadata` counts (it is cumulative). The finish reason comes
//! on the last chunk, but the end is the end of the stream.

use serde::Deserialize;
use serde_json::Value;

use super::{upstream_error, Emitter, Open, OpenProse};
use crate::protocol::translate::ir::{BlockKind, Delta, ErrorClass, Family, Opaque, StopReason, StreamEvent, Tokens};
use crate::protocol::translate::stream::maps::count;
use crate::protocol::translate::vocab;
use crate::protocol::translate::{reply, wire};

#[derive(Debug, Default)]
pub(crate) struct Gemini {
    open: OpenProse,
    /// The response id, for made-up call ids unique across turns.
    response_id: String,
    reason: Option<Result<StopReason, String>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Chunk {
    #[serde(default)]
    candidates: Vec<Candidate>,
    usage_metadata: Option<Value>,
    #[serde(default)]
    model_version: String,
    #[serde(default)]
    response_id: String,
    prompt_feedback: Option<Value>,
    error: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate {
    #[serde(default)]
    index: u32,
    content: Option<Content>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Content {
    #[serde(default)]
    parts: Vec<Part>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Part {
    text: Option<String>,
    #[serde(default)]
    thought: bool,
    thought_signature: Option<String>,
    function_call: Option<FunctionCall>,
}

#[derive(Deserialize)]
struct FunctionCall {
    id: Option<String>,
    #[serde(default)]
    name: String,
    args: Option<Value>,
}

impl Gemini {
    pub(crate) fn event(&mut self, data: &str, emit: &mut Emitter, out: &mut Vec<StreamEvent>) {
        let Ok(chunk) = serde_json::from_str::<Chunk>(data) else { return emit.unreadable(data, out) };
        if let Some(error) = chunk.error.filter(|e| !e.is_null()) {
            let (error, message) = upstream_error(&error);
            return emit.upstream_error(error, &message, out);
        }
        if self.response_id.is_empty() {
            self.response_id = chunk.response_id.clone();
        }
        let usage = chunk.usage_metadata.as_ref().map(tokens).unwrap_or_default();
        emit.start(&chunk.response_id, &chunk.model_version, Tokens { output: None, ..usage }, out);
        emit.add_tokens(usage);
        for candidate in chunk.candidates.into_iter().filter(|c| c.index == 0) {
            for part in candidate.content.map(|c| c.parts).unwrap_or_default() {
                self.part(part, emit, out);
            }
            if let Some(reason) = candidate.finish_reason {
                self.reason = Some(vocab::gemini_reason(&reason).map_err(|()| reason));
            }
        }
        if let Some(blocked) = chunk.prompt_feedback.as_ref().and_then(|f| f.get("blockReason")) {
            if blocked.is_string() {
                self.reason = Some(Ok(StopReason::Refusal));
            }
        }
    }

    /// The end of the stream is the end of the reply, if it said why it ended.
    pub(crate) fn eof(&mut self, emit: &mut Emitter, out: &mut Vec<StreamEvent>) {
        match self.reason.take() {
            Some(Ok(reason)) => emit.finish(reason, out),
            Some(Err(reason)) => {
                emit.error(ErrorClass::Server, &format!("the model's output was unusable ({reason})"), out)
            }
            None => {}
        }
    }

    fn part(&mut self, part: Part, emit: &mut Emitter, out: &mut Vec<StreamEvent>) {
        let signature =
            part.thought_signature.filter(|s| !s.is_empty()).map(|value| Opaque { origin: Family::Gemini, value });
        if let Some(call) = part.function_call {
            self.signature_before(signature, emit, out);
            let ordinal = emit.tool_calls();
            let id = call.id.filter(|i| !i.is_empty()).unwrap_or_else(|| self.synthetic_id(ordinal));
            let args = call.args.filter(|a| !a.is_null()).map_or_else(|| "{}".to_string(), |a| a.to_string());
            let index = emit.open(BlockKind::ToolCall { id, name: call.name, custom: false }, out);
            emit.delta(index, Delta::ToolArgs(args), out);
            emit.stop(index, out);
            return;
        }
        let text = part.text.unwrap_or_default();
        if part.thought {
            let index = self.open.ensure(Open::Reasoning, emit, out);
            emit.delta(index, Delta::Reasoning(text), out);
            if let Some(signature) = signature {
                emit.delta(index, Delta::Opaque(signature), out);
            }
            return;
        }
        // Text continues the open text block across chunks: only a
        // signature between two pieces of text ends it.
        if signature.is_some() {
            self.signature_before(signature, emit, out);
        }
        if !text.is_empty() {
            let index = self.open.ensure(Open::Text, emit, out);
            emit.delta(index, Delta::Text(text), out);
        }
    }

    /// Puts a signature carried by a text or call part on the reasoning block
    /// before it, and closes that block.
    fn signature_before(&mut self, signature: Option<Opaque>, emit: &mut Emitter, out: &mut Vec<StreamEvent>) {
        if let Some(signature) = signature {
            let index = self.open.ensure(Open::Reasoning, emit, out);
            emit.delta(index, Delta::Opaque(signature), out);
        }
        self.open.close(emit, out);
    }

    /// An id for a call that had none, unique across turns: the client
    /// pairs results by it, and a later provider may reject a repeat.
    fn synthetic_id(&mut self, ordinal: usize) -> String {
        if self.response_id.is_empty() {
            self.response_id = wire::random_id();
        }
        reply::item_id("call_", &self.response_id, ordinal)
    }
}

/// Gemini usage: the prompt count includes cached and tool-use prompt
/// tokens; output is candidates plus thoughts.
fn tokens(usage: &Value) -> Tokens {
    let prompt = count(usage, "promptTokenCount");
    let tool_prompt = count(usage, "toolUsePromptTokenCount");
    let candidates = count(usage, "candidatesTokenCount");
    let thoughts = count(usage, "thoughtsTokenCount");
    let input = prompt.map(|p| p.saturating_add(tool_prompt.unwrap_or(0)));
    let output = match (candidates, thoughts) {
        (None, None) => None,
        (c, t) => Some(c.unwrap_or(0).saturating_add(t.unwrap_or(0))),
    };
    Tokens {
        input,
        output,
        cache_read: count(usage, "cachedContentTokenCount"),
        cache_write: None,
        reasoning: thoughts,
    }
}

#[cfg(test)]
mod tests {
    use crate::protocol::translate::ir::{BlockKind, Delta, Format, StreamEvent};
    use crate::protocol::translate::stream::decode_all;

    fn chunk(parts: &str) -> String {
        format!("data: {{\"candidates\":[{{\"content\":{{\"parts\":[{parts}],\"role\":\"model\"}},\"index\":0}}],\"responseId\":\"r\"}}\n\n")
    }

    fn blocks(events: &[StreamEvent]) -> Vec<(BlockKind, String)> {
        let mut blocks: Vec<(BlockKind, String)> = Vec::new();
        for event in events {
            match event {
                StreamEvent::BlockStart { block, .. } => blocks.push((block.clone(), String::new())),
                StreamEvent::Delta { delta: Delta::Text(t) | Delta::Reasoning(t), .. } => {
                    blocks.last_mut().unwrap().1.push_str(t);
                }
                _ => {}
            }
        }
        blocks
    }

    /// A Gemini stream sends a reply's text a piece per chunk: one text
    /// block, not one per chunk (a Messages client such as Claude Code shows
    /// only the last text block of a reply, so it lost all but the last piece).
    #[test]
    fn text_over_several_chunks_is_one_block() {
        let stream = [chunk(r#"{"text":"Hello"}"#), chunk(r#"{"text":" wor"}"#), chunk(r#"{"text":"ld"}"#)].concat();
        let events = decode_all(Format::Gemini, stream.as_bytes());
        assert_eq!(blocks(&events), [(BlockKind::Text, "Hello world".to_string())], "{events:?}");
        // An empty text part (Gemini's last chunk often has one) ends nothing either.
        let stream = [chunk(r#"{"text":"Hi"}"#), chunk(r#"{"text":""}"#), chunk(r#"{"text":"!"}"#)].concat();
        assert_eq!(blocks(&decode_all(Format::Gemini, stream.as_bytes())), [(BlockKind::Text, "Hi!".to_string())]);
        // Thinking then text over chunks: one block of each.
        let stream = [
            chunk(r#"{"text":"hm","thought":true}"#),
            chunk(r#"{"text":"m","thought":true}"#),
            chunk(r#"{"text":"a"}"#),
            chunk(r#"{"text":"b"}"#),
        ]
        .concat();
        let got = blocks(&decode_all(Format::Gemini, stream.as_bytes()));
        assert_eq!(got, [(BlockKind::Reasoning { id: None }, "hmm".to_string()), (BlockKind::Text, "ab".to_string())]);
    }
}
