//! OpenAI Chat Completions chunks for the client (translation.md §D.2).
//!
//! A role chunk first; text as `content`, reasoning as `reasoning_content`
//! (the field DeepSeek-style clients read; opaque state has no place in
//! Chat and is dropped); each tool call under its ordinal among the calls,
//! not the block number, with its id and name on its first delta only, and
//! `"{}"` for a call that had no arguments; then the finish chunk, a usage
//! chunk only for a client that asked with `include_usage`, and `[DONE]`.
//! An error is an `{"error":…}` chunk and no `[DONE]`.

use std::collections::HashMap;

use bytes::BytesMut;
use serde_json::{json, Value};

use super::{in_order, prefixed, upstream, Input, Options, ToJson, Tools};
use crate::protocol::translate::ir::{BlockKind, Delta, StopReason, StreamEvent, Tokens};
use crate::protocol::translate::stream::custom::Unwrapper;
use crate::protocol::translate::stream::frames;
use crate::protocol::translate::{error, vocab};

#[derive(Debug)]
pub(crate) struct Chat {
    tools: Tools,
    opts: Options,
    id: String,
    started: bool,
    /// Tool-call blocks: their ordinal and how their arguments are written.
    calls: HashMap<usize, Call>,
    next_call: usize,
}

#[derive(Debug)]
struct Call {
    ordinal: usize,
    args: Args,
    sent_any: bool,
}

#[derive(Debug)]
enum Args {
    /// A function's JSON arguments.
    Function(ToJson),
    /// A custom tool's raw input (`type: custom`), unwrapped if need be.
    Custom(Option<Unwrapper>),
}

impl Chat {
    pub(crate) fn new(tools: Tools, opts: Options) -> Chat {
        Chat { tools, opts, id: String::new(), started: false, calls: HashMap::new(), next_call: 0 }
    }

    pub(crate) fn event(&mut self, event: &StreamEvent, out: &mut BytesMut) {
        match event {
            StreamEvent::Start { id, .. } => self.start(id, out),
            StreamEvent::BlockStart { index, block: BlockKind::ToolCall { id, name, custom } } => {
                self.start("", out);
                let (name, input) = self.tools.client(name, *custom);
                let ordinal = self.next_call;
                self.next_call += 1;
                let (kind, args) = match input {
                    Input::Json => ("function", Args::Function(ToJson::new(input))),
                    Input::Raw => ("custom", Args::Custom(None)),
                    Input::Wrapped => ("custom", Args::Custom(Some(Unwrapper::default()))),
                };
                let empty = if kind == "custom" {
                    json!({"name": name, "input": ""})
                } else {
                    json!({"name": name, "arguments": ""})
                };
                let call = json!({"index": ordinal, "id": id, "type": kind, kind: empty});
                self.chunk(json!({"tool_calls": [call]}), None, out);
                self.calls.insert(*index, Call { ordinal, args, sent_any: false });
            }
            StreamEvent::BlockStart { .. } => self.start("", out),
            StreamEvent::Delta { index, delta } => self.delta(*index, delta, out),
            StreamEvent::BlockStop { index } => self.stop(*index, out),
            StreamEvent::Finish { reason, tokens } => self.finish(*reason, tokens, out),
            StreamEvent::Error { class, message, quota } => {
                let words = vocab::openai_error(*class, *quota);
                let message = error::openai_message(&upstream(*class, message, *quota));
                let error =
                    json!({"message": message, "type": words.stream_kind, "param": null, "code": words.stream_code});
                frames::write(out, None, &json!({"error": error}));
            }
        }
    }

    fn start(&mut self, id: &str, out: &mut BytesMut) {
        if self.started {
            return;
        }
        self.started = true;
        self.id = prefixed("chatcmpl-", id);
        self.chunk(json!({"role": "assistant", "content": ""}), None, out);
    }

    fn delta(&mut self, index: usize, delta: &Delta, out: &mut BytesMut) {
        let payload = match delta {
            Delta::Text(t) => json!({"content": t}),
            Delta::Reasoning(t) => json!({"reasoning_content": t}),
            Delta::Opaque(_) => return,
            Delta::ToolArgs(a) => {
                let Some(call) = self.calls.get_mut(&index) else { return };
                let Some(payload) = call.args(a) else { return };
                payload
            }
        };
        self.chunk(payload, None, out);
    }

    fn stop(&mut self, index: usize, out: &mut BytesMut) {
        let Some(mut call) = self.calls.remove(&index) else { return };
        let end = match &mut call.args {
            Args::Function(args) => args.finish(call.sent_any),
            Args::Custom(unwrap) => unwrap.as_mut().map(Unwrapper::finish).unwrap_or_default(),
        };
        if !end.is_empty() {
            let (kind, field) = match call.args {
                Args::Function(_) => ("function", "arguments"),
                Args::Custom(_) => ("custom", "input"),
            };
            let call = json!({"index": call.ordinal, kind: {field: end}});
            self.chunk(json!({"tool_calls": [call]}), None, out);
        }
    }

    fn finish(&mut self, reason: StopReason, tokens: &Tokens, out: &mut BytesMut) {
        self.start("", out);
        for index in in_order(&self.calls) {
            self.stop(index, out);
        }
        let reason = reason.with_calls(self.next_call > 0);
        self.chunk(json!({}), Some(vocab::chat_finish(reason)), out);
        if self.opts.include_usage {
            let mut chunk = self.base();
            chunk["choices"] = json!([]);
            chunk["usage"] = usage(tokens);
            frames::write(out, None, &chunk);
        }
        frames::write_raw(out, "[DONE]");
    }

    fn base(&self) -> Value {
        json!({"id": self.id, "object": "chat.completion.chunk", "created": self.opts.created, "model": self.tools.model()})
    }

    fn chunk(&self, delta: Value, finish_reason: Option<&str>, out: &mut BytesMut) {
        let mut chunk = self.base();
        chunk["choices"] = json!([{"index": 0, "delta": delta, "finish_reason": finish_reason}]);
        frames::write(out, None, &chunk);
    }
}

impl Call {
    /// The `tool_calls` delta for some arguments, if they add anything.
    fn args(&mut self, args: &str) -> Option<Value> {
        let (kind, field, text) = match &mut self.args {
            Args::Function(json) => ("function", "arguments", json.push(args)),
            Args::Custom(Some(unwrap)) => ("custom", "input", unwrap.push(args)),
            Args::Custom(None) => ("custom", "input", args.to_string()),
        };
        if text.is_empty() {
            return None;
        }
        self.sent_any = true;
        Some(json!({"tool_calls": [{"index": self.ordinal, kind: {field: text}}]}))
    }
}

/// Chat usage: `prompt_tokens` includes cached tokens.
fn usage(tokens: &Tokens) -> Value {
    let input = tokens.input.unwrap_or(0);
    let output = tokens.output.unwrap_or(0);
    let mut details = json!({"cached_tokens": tokens.cache_read.unwrap_or(0)});
    if let Some(write) = tokens.cache_write {
        details["cache_write_tokens"] = write.into();
    }
    json!({
        "prompt_tokens": input,
        "completion_tokens": output,
        "total_tokens": input.saturating_add(output),
        "prompt_tokens_details": details,
        "completion_tokens_details": {"reasoning_tokens": tokens.reasoning.unwrap_or(0)},
    })
}
