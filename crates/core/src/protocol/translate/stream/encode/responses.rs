//! OpenAI Responses events for the client (translation.md §D.3), in the
//! exact order Codex and the OpenAI SDKs expect: `response.created`,
//! `response.in_progress`, then each output item from `output_item.added`
//! through its parts and deltas to `output_item.done`, one item at a time
//! (overlapping blocks are put in sequence first), and one terminal:
//! `response.completed` with every done item and all usage fields,
//! `response.incomplete` with its reason, or `response.failed`. Every event
//! has the next `sequence_number`.
//!
//! A reasoning item gets its summary part at its first text (a signature
//! alone makes an item with an empty summary) and its opaque state as
//! `encrypted_content`; a text item opens at its first text. A call to one
//! of the client's custom tools is a `custom_tool_call` with raw input,
//! unwrapped as it streams when the provider was sent the emulation.

use bytes::BytesMut;
use serde_json::{json, Value};

use super::sequence::Sequencer;
use super::{prefixed, upstream, Input, Options, Tools};
use crate::protocol::translate::envelope;
use crate::protocol::translate::ir::{BlockKind, Delta, Family, Opaque, StopReason, StreamEvent, Tokens};
use crate::protocol::translate::stream::custom::Unwrapper;
use crate::protocol::translate::stream::frames;
use crate::protocol::translate::{error, vocab};

#[derive(Debug)]
pub(crate) struct Responses {
    tools: Tools,
    opts: Options,
    sequencer: Sequencer,
    writer: Writer,
}

/// Everything but the sequencing.
#[derive(Debug)]
struct Writer {
    id: String,
    started: bool,
    sequence: u64,
    /// The done items, in output order.
    output: Vec<Value>,
    current: Option<Item>,
    calls: usize,
    /// The provider's family, named in envelopes of stateless reasoning.
    origin: Family,
}

#[derive(Debug)]
struct Item {
    id: String,
    /// Added to the output yet (text waits for its first text).
    added: bool,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    Message { text: String },
    Reasoning { text: String, opaques: Vec<Opaque>, redacted: Option<Opaque>, id: Option<String> },
    Function { call_id: String, name: String, args: String },
    Custom { call_id: String, name: String, input: String, unwrap: Option<Unwrapper> },
}

impl Responses {
    pub(crate) fn new(tools: Tools, opts: Options) -> Responses {
        let writer = Writer {
            id: String::new(),
            started: false,
            sequence: 0,
            output: Vec::new(),
            current: None,
            calls: 0,
            origin: Family::OpenAi,
        };
        Responses { tools, opts, sequencer: Sequencer::default(), writer }
    }

    /// Numbers the next event after the provider's last, and names the
    /// items as the provider did.
    pub(crate) fn adopt(&mut self, naming: &crate::protocol::translate::stream::Naming) {
        let writer = &mut self.writer;
        if let Some(last) = naming.sequence {
            writer.sequence = writer.sequence.max(last + 1);
        }
        let done = writer.output.len();
        for (index, id) in naming.items.iter().enumerate().filter(|(_, id)| !id.is_empty()) {
            if let Some(item) = writer.output.get_mut(index) {
                item["id"] = id.as_str().into();
            } else if let (true, Some(current)) = (index == done, &mut writer.current) {
                current.id.clone_from(id);
            }
        }
    }

    pub(crate) fn event(&mut self, event: &StreamEvent, out: &mut BytesMut) {
        let Responses { tools, opts, sequencer, writer } = self;
        sequencer.push(event, &mut |e| writer.event(e, tools, opts, out));
    }
}

impl Writer {
    fn event(&mut self, event: &StreamEvent, tools: &Tools, opts: &Options, out: &mut BytesMut) {
        match event {
            StreamEvent::Start { id, origin, .. } => {
                self.origin = *origin;
                self.start(id, tools, opts, out);
            }
            StreamEvent::BlockStart { block, .. } => {
                self.start("", tools, opts, out);
                self.block_start(block, tools, out);
            }
            StreamEvent::Delta { delta, .. } => self.delta(delta, out),
            StreamEvent::BlockStop { .. } => self.stop(out),
            StreamEvent::Finish { reason, tokens } => {
                self.start("", tools, opts, out);
                self.stop(out);
                self.finish(*reason, tokens, tools, opts, out);
            }
            StreamEvent::Error { class, message, quota } => {
                self.start("", tools, opts, out);
                let code = vocab::openai_error(*class, *quota).stream_code;
                let message = error::openai_message(&upstream(*class, message, *quota));
                let mut response = self.response("failed", tools, opts);
                response["error"] = json!({"code": code, "message": message});
                self.write("response.failed", json!({"response": response}), out);
            }
        }
    }

    fn write(&mut self, kind: &str, mut event: Value, out: &mut BytesMut) {
        event["type"] = kind.into();
        event["sequence_number"] = self.sequence.into();
        self.sequence += 1;
        frames::write(out, Some(kind), &event);
    }

    fn response(&self, status: &str, tools: &Tools, opts: &Options) -> Value {
        json!({
            "id": self.id,
            "object": "response",
            "created_at": opts.created,
            "status": status,
            "model": tools.model(),
            "output": self.output,
            "error": null,
            "incomplete_details": null,
            "usage": null,
        })
    }

    fn start(&mut self, id: &str, tools: &Tools, opts: &Options, out: &mut BytesMut) {
        if self.started {
            return;
        }
        self.started = true;
        self.id = prefixed("resp_", id);
        let response = self.response("in_progress", tools, opts);
        self.write("response.created", json!({"response": response}), out);
        let response = self.response("in_progress", tools, opts);
        self.write("response.in_progress", json!({"response": response}), out);
    }

    fn output_index(&self) -> usize {
        self.output.len()
    }

    /// An item id unique across the client's turns: Codex replays them.
    fn item_id(&self, prefix: &str) -> String {
        let base = self.id.strip_prefix("resp_").unwrap_or(&self.id);
        format!("{prefix}_{base}_{}", self.output_index())
    }

    fn block_start(&mut self, block: &BlockKind, tools: &Tools, out: &mut BytesMut) {
        let (prefix, kind) = match block {
            BlockKind::Text => ("msg", Kind::Message { text: String::new() }),
            BlockKind::Reasoning { id } => {
                ("rs", Kind::Reasoning { text: String::new(), opaques: Vec::new(), redacted: None, id: id.clone() })
            }
            BlockKind::RedactedReasoning { opaque } => (
                "rs",
                Kind::Reasoning { text: String::new(), opaques: Vec::new(), redacted: Some(opaque.clone()), id: None },
            ),
            BlockKind::ToolCall { id, name, custom } => {
                self.calls += 1;
                let (name, input) = tools.client(name, *custom);
                let call_id = id.clone();
                match input {
                    Input::Json => ("fc", Kind::Function { call_id, name, args: String::new() }),
                    Input::Raw => ("ctc", Kind::Custom { call_id, name, input: String::new(), unwrap: None }),
                    Input::Wrapped => (
                        "ctc",
                        Kind::Custom { call_id, name, input: String::new(), unwrap: Some(Unwrapper::default()) },
                    ),
                }
            }
        };
        let mut item = Item { id: self.item_id(prefix), added: false, kind };
        if !matches!(item.kind, Kind::Message { .. }) {
            self.add(&mut item, out);
        }
        self.current = Some(item);
    }

    fn add(&mut self, item: &mut Item, out: &mut BytesMut) {
        item.added = true;
        let output_index = self.output_index();
        let body = match &item.kind {
            Kind::Message { .. } => {
                json!({"id": item.id, "type": "message", "status": "in_progress", "role": "assistant", "content": []})
            }
            Kind::Reasoning { .. } => json!({"id": item.id, "type": "reasoning", "summary": []}),
            Kind::Function { call_id, name, .. } => {
                json!({"id": item.id, "type": "function_call", "status": "in_progress", "call_id": call_id, "name": name, "arguments": ""})
            }
            Kind::Custom { call_id, name, .. } => {
                json!({"id": item.id, "type": "custom_tool_call", "status": "in_progress", "call_id": call_id, "name": name, "input": ""})
            }
        };
        self.write("response.output_item.added", json!({"output_index": output_index, "item": body}), out);
        if matches!(item.kind, Kind::Message { .. }) {
            let part = json!({"type": "output_text", "text": "", "annotations": []});
            let event = json!({"item_id": item.id, "output_index": output_index, "content_index": 0, "part": part});
            self.write("response.content_part.added", event, out);
        }
    }

    fn delta(&mut self, delta: &Delta, out: &mut BytesMut) {
        let Some(mut item) = self.current.take() else { return };
        let output_index = self.output_index();
        let id = item.id.clone();
        match (&mut item.kind, delta) {
            (Kind::Message { text }, Delta::Text(t)) => {
                let first = text.is_empty();
                text.push_str(t);
                if first {
                    self.add(&mut item, out);
                }
                let event = json!({"item_id": id, "output_index": output_index, "content_index": 0, "delta": t, "logprobs": []});
                self.write("response.output_text.delta", event, out);
            }
            (Kind::Reasoning { text, .. }, Delta::Reasoning(t)) => {
                if text.is_empty() {
                    let part = json!({"type": "summary_text", "text": ""});
                    let event = json!({"item_id": id, "output_index": output_index, "summary_index": 0, "part": part});
                    self.write("response.reasoning_summary_part.added", event, out);
                }
                text.push_str(t);
                let event = json!({"item_id": id, "output_index": output_index, "summary_index": 0, "delta": t});
                self.write("response.reasoning_summary_text.delta", event, out);
            }
            (Kind::Reasoning { opaques, .. }, Delta::Opaque(o)) => opaques.push(o.clone()),
            (Kind::Function { args, .. }, Delta::ToolArgs(a)) => {
                args.push_str(a);
                let event = json!({"item_id": id, "output_index": output_index, "delta": a});
                self.write("response.function_call_arguments.delta", event, out);
            }
            (Kind::Custom { input, unwrap, .. }, Delta::ToolArgs(a)) => {
                let a = match unwrap {
                    Some(u) => u.push(a),
                    None => a.clone(),
                };
                if !a.is_empty() {
                    input.push_str(&a);
                    let event = json!({"item_id": id, "output_index": output_index, "delta": a});
                    self.write("response.custom_tool_call_input.delta", event, out);
                }
            }
            _ => {}
        }
        self.current = Some(item);
    }

    fn stop(&mut self, out: &mut BytesMut) {
        let Some(mut item) = self.current.take() else { return };
        if !item.added {
            return; // a text block that never had text
        }
        let output_index = self.output_index();
        let id = item.id.clone();
        let done = match &mut item.kind {
            Kind::Message { text } => {
                let event = json!({"item_id": id, "output_index": output_index, "content_index": 0, "text": text, "logprobs": []});
                self.write("response.output_text.done", event, out);
                let part = json!({"type": "output_text", "text": text, "annotations": []});
                let event = json!({"item_id": id, "output_index": output_index, "content_index": 0, "part": part});
                self.write("response.content_part.done", event, out);
                json!({"id": id, "type": "message", "status": "completed", "role": "assistant", "content": [part]})
            }
            Kind::Reasoning { text, opaques, redacted, id: upstream_id } => {
                let mut summary = Vec::new();
                if !text.is_empty() {
                    let event = json!({"item_id": id, "output_index": output_index, "summary_index": 0, "text": text});
                    self.write("response.reasoning_summary_text.done", event, out);
                    let part = json!({"type": "summary_text", "text": text});
                    let event = json!({"item_id": id, "output_index": output_index, "summary_index": 0, "part": part});
                    self.write("response.reasoning_summary_part.done", event, out);
                    summary.push(part);
                }
                let state = match redacted {
                    Some(opaque) => envelope::write_slot(Family::OpenAi, self.origin, Some(opaque), "", None, true),
                    None => envelope::write_slot(
                        Family::OpenAi,
                        self.origin,
                        opaques.last(),
                        text,
                        upstream_id.as_deref(),
                        false,
                    ),
                };
                let mut done = json!({"id": id, "type": "reasoning", "summary": summary});
                if let Some(state) = state {
                    done["encrypted_content"] = state.into();
                }
                done
            }
            Kind::Function { call_id, name, args } => {
                // A call without arguments still gets some: `{}`.
                if args.is_empty() {
                    let end = "{}";
                    args.push_str(end);
                    let event = json!({"item_id": id, "output_index": output_index, "delta": end});
                    self.write("response.function_call_arguments.delta", event, out);
                }
                let event = json!({"item_id": id, "output_index": output_index, "name": name, "arguments": args});
                self.write("response.function_call_arguments.done", event, out);
                json!({"id": id, "type": "function_call", "status": "completed", "call_id": call_id, "name": name, "arguments": args})
            }
            Kind::Custom { call_id, name, input, unwrap } => {
                let end = unwrap.take().map(|mut u| u.finish()).unwrap_or_default();
                if !end.is_empty() {
                    input.push_str(&end);
                    let event = json!({"item_id": id, "output_index": output_index, "delta": end});
                    self.write("response.custom_tool_call_input.delta", event, out);
                }
                let event = json!({"item_id": id, "output_index": output_index, "input": input});
                self.write("response.custom_tool_call_input.done", event, out);
                json!({"id": id, "type": "custom_tool_call", "status": "completed", "call_id": call_id, "name": name, "input": input})
            }
        };
        self.write("response.output_item.done", json!({"output_index": output_index, "item": done}), out);
        self.output.push(done);
    }

    fn finish(&mut self, reason: StopReason, tokens: &Tokens, tools: &Tools, opts: &Options, out: &mut BytesMut) {
        let reason = reason.with_calls(self.calls > 0);
        let (kind, status) = match vocab::responses_incomplete_reason(reason) {
            Some(_) => ("response.incomplete", "incomplete"),
            None => ("response.completed", "completed"),
        };
        let mut response = self.response(status, tools, opts);
        if let Some(why) = vocab::responses_incomplete_reason(reason) {
            response["incomplete_details"] = json!({"reason": why});
        }
        response["usage"] = usage(tokens);
        self.write(kind, json!({"response": response}), out);
    }
}

/// Responses usage, every field present (clients require the details).
fn usage(tokens: &Tokens) -> Value {
    let input = tokens.input.unwrap_or(0);
    let output = tokens.output.unwrap_or(0);
    json!({
        "input_tokens": input,
        "input_tokens_details": {"cached_tokens": tokens.cache_read.unwrap_or(0)},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": tokens.reasoning.unwrap_or(0)},
        "total_tokens": input.saturating_add(output),
    })
}
