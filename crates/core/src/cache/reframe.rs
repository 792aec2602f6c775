//! A stored JSON answer told again as the event stream its protocol would
//! have sent: the same events in the same order, the whole text of each
//! block in one delta, and the usage where the protocol puts it.
//!
//! - chat: a role chunk, then per choice its reasoning, content, refusal
//!   and tool calls, a finish chunk, the usage chunk (`choices: []`) when the
//!   client asked for `stream_options.include_usage`, and `data: [DONE]`;
//! - completions: a text chunk and a finish chunk per choice, the usage
//!   chunk when asked for, `[DONE]`;
//! - messages: `message_start` (input usage), `ping`, per content block
//!   `content_block_start`, its deltas (`text_delta`, `thinking_delta` and
//!   `signature_delta`, one `input_json_delta` with the whole input) and
//!   `content_block_stop`, then `message_delta` (stop reason, usage) and
//!   `message_stop`;
//! - responses: `response.created`, `response.in_progress`, per output item
//!   `output_item.added`, its parts' and arguments' deltas and dones, and
//!   `output_item.done`, then `response.completed` (or `.incomplete`) with
//!   the whole response, usage included; every event numbered;
//! - gemini: the response as the one chunk of an `alt=sse` stream.

use serde_json::{json, Map, Value};

use super::key::Wire;

/// Why an answer could not be told as a stream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReframeError {
    #[error("the stored answer is not a JSON object")]
    NotJson,
    #[error("{0} answers have no stream form")]
    NoStream(&'static str),
}

/// `body` (a whole JSON answer of `wire`) as that protocol's event stream.
pub fn to_stream(wire: Wire, body: &[u8], include_usage: bool) -> Result<Vec<u8>, ReframeError> {
    let value: Value = serde_json::from_slice(body).map_err(|_| ReframeError::NotJson)?;
    let Value::Object(answer) = value else { return Err(ReframeError::NotJson) };
    let mut out = Events::default();
    match wire {
        Wire::Chat => chat(&answer, include_usage, &mut out),
        Wire::Completions => completions(&answer, include_usage, &mut out),
        Wire::Messages => messages(&answer, &mut out),
        Wire::Responses => responses(answer, &mut out),
        Wire::Gemini => out.data(&Value::Object(answer)),
        Wire::Embeddings => return Err(ReframeError::NoStream("embeddings")),
    }
    Ok(out.bytes)
}

#[derive(Default)]
struct Events {
    bytes: Vec<u8>,
}

impl Events {
    fn data(&mut self, value: &Value) {
        self.bytes.extend_from_slice(b"data: ");
        self.bytes.extend_from_slice(value.to_string().as_bytes());
        self.bytes.extend_from_slice(b"\n\n");
    }

    fn event(&mut self, name: &str, value: &Value) {
        self.bytes.extend_from_slice(b"event: ");
        self.bytes.extend_from_slice(name.as_bytes());
        self.bytes.push(b'\n');
        self.data(value);
    }

    fn done(&mut self) {
        self.bytes.extend_from_slice(b"data: [DONE]\n\n");
    }
}

fn get<'a>(m: &'a Map<String, Value>, key: &str) -> &'a Value {
    m.get(key).unwrap_or(&Value::Null)
}

fn text(v: &Value) -> Option<&str> {
    v.as_str().filter(|s| !s.is_empty())
}

fn choices(answer: &Map<String, Value>) -> Vec<&Map<String, Value>> {
    get(answer, "choices").as_array().map(|a| a.iter().filter_map(Value::as_object).collect()).unwrap_or_default()
}

/// A chunk with the answer's id, creation time and model (and fingerprint),
/// carrying `choices` (and `usage: null` when usage was asked for).
fn chunk(answer: &Map<String, Value>, object: &str, choices: Value, include_usage: bool) -> Value {
    let mut c = Map::new();
    for key in ["id", "created", "model"] {
        c.insert(key.into(), get(answer, key).clone());
    }
    c.insert("object".into(), Value::from(object));
    for key in ["system_fingerprint", "service_tier"] {
        if let Some(v) = answer.get(key) {
            c.insert(key.into(), v.clone());
        }
    }
    c.insert("choices".into(), choices);
    if include_usage {
        c.insert("usage".into(), Value::Null);
    }
    Value::Object(c)
}

fn usage_chunk(answer: &Map<String, Value>, object: &str, out: &mut Events) {
    let mut last = chunk(answer, object, json!([]), false);
    last["usage"] = get(answer, "usage").clone();
    out.data(&last);
}

fn chat(answer: &Map<String, Value>, include_usage: bool, out: &mut Events) {
    const OBJECT: &str = "chat.completion.chunk";
    for choice in choices(answer) {
        let index = get(choice, "index").clone();
        let empty = Map::new();
        let message = get(choice, "message").as_object().unwrap_or(&empty);
        let delta = |delta: Value| json!([{"index": index, "delta": delta, "logprobs": null, "finish_reason": null}]);
        let role = get(message, "role").as_str().unwrap_or("assistant");
        out.data(&chunk(answer, OBJECT, delta(json!({"role": role, "content": ""})), include_usage));
        for field in ["reasoning_content", "reasoning", "content", "refusal"] {
            if let Some(t) = text(get(message, field)) {
                out.data(&chunk(answer, OBJECT, delta(json!({ field: t })), include_usage));
            }
        }
        let calls = get(message, "tool_calls").as_array().map(Vec::as_slice).unwrap_or_default();
        for (i, call) in calls.iter().enumerate() {
            let mut call = call.clone();
            if let Some(c) = call.as_object_mut() {
                c.insert("index".into(), Value::from(i));
            }
            out.data(&chunk(answer, OBJECT, delta(json!({ "tool_calls": [call] })), include_usage));
        }
        let finish =
            json!([{"index": index, "delta": {}, "logprobs": null, "finish_reason": get(choice, "finish_reason")}]);
        out.data(&chunk(answer, OBJECT, finish, include_usage));
    }
    if include_usage {
        usage_chunk(answer, OBJECT, out);
    }
    out.done();
}

fn completions(answer: &Map<String, Value>, include_usage: bool, out: &mut Events) {
    const OBJECT: &str = "text_completion";
    for choice in choices(answer) {
        let index = get(choice, "index").clone();
        let part = |text: &Value, finish: &Value| json!([{"text": text, "index": index, "logprobs": null, "finish_reason": finish}]);
        out.data(&chunk(answer, OBJECT, part(get(choice, "text"), &Value::Null), include_usage));
        out.data(&chunk(answer, OBJECT, part(&json!(""), get(choice, "finish_reason")), include_usage));
    }
    if include_usage {
        usage_chunk(answer, OBJECT, out);
    }
    out.done();
}

fn messages(answer: &Map<String, Value>, out: &mut Events) {
    let usage = get(answer, "usage").as_object().cloned().unwrap_or_default();
    let mut start = answer.clone();
    start.insert("content".into(), json!([]));
    start.insert("stop_reason".into(), Value::Null);
    start.insert("stop_sequence".into(), Value::Null);
    // Output is counted at the end, as a live stream counts it.
    let mut start_usage = usage.clone();
    start_usage.insert("output_tokens".into(), json!(0));
    start.insert("usage".into(), Value::Object(start_usage));
    out.event("message_start", &json!({"type": "message_start", "message": start}));
    out.event("ping", &json!({"type": "ping"}));
    let blocks = get(answer, "content").as_array().map(Vec::as_slice).unwrap_or_default();
    for (index, block) in blocks.iter().enumerate() {
        content_block(index, block, out);
    }
    let delta = json!({"stop_reason": get(answer, "stop_reason"), "stop_sequence": get(answer, "stop_sequence")});
    out.event("message_delta", &json!({"type": "message_delta", "delta": delta, "usage": usage}));
    out.event("message_stop", &json!({"type": "message_stop"}));
}

fn content_block(index: usize, block: &Value, out: &mut Events) {
    let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
    let delta = |out: &mut Events, delta: Value| {
        out.event("content_block_delta", &json!({"type": "content_block_delta", "index": index, "delta": delta}));
    };
    let start = |out: &mut Events, block: Value| {
        out.event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": block}),
        );
    };
    match kind {
        "text" => {
            let mut empty = block.clone();
            empty["text"] = json!("");
            start(out, empty);
            if let Some(t) = block.get("text").and_then(text) {
                delta(out, json!({"type": "text_delta", "text": t}));
            }
        }
        "thinking" => {
            start(out, json!({"type": "thinking", "thinking": "", "signature": ""}));
            if let Some(t) = block.get("thinking").and_then(text) {
                delta(out, json!({"type": "thinking_delta", "thinking": t}));
            }
            if let Some(s) = block.get("signature").and_then(text) {
                delta(out, json!({"type": "signature_delta", "signature": s}));
            }
        }
        "tool_use" | "server_tool_use" | "mcp_tool_use" => {
            let mut empty = block.clone();
            empty["input"] = json!({});
            start(out, empty);
            let input = block.get("input").map(Value::to_string).unwrap_or_else(|| "{}".into());
            delta(out, json!({"type": "input_json_delta", "partial_json": input}));
        }
        // Whole in its start event (redacted thinking, tool results).
        _ => start(out, block.clone()),
    }
    out.event("content_block_stop", &json!({"type": "content_block_stop", "index": index}));
}

/// Responses events, numbered in order.
struct Numbered<'a> {
    out: &'a mut Events,
    next: u64,
}

impl Numbered<'_> {
    fn emit(&mut self, kind: &str, mut fields: Value) {
        if let Some(f) = fields.as_object_mut() {
            f.insert("type".into(), Value::from(kind));
            f.insert("sequence_number".into(), Value::from(self.next));
        }
        self.next += 1;
        self.out.event(kind, &fields);
    }
}

fn responses(answer: Map<String, Value>, out: &mut Events) {
    let mut seq = Numbered { out, next: 0 };
    let mut opening = answer.clone();
    opening.insert("status".into(), json!("in_progress"));
    opening.insert("output".into(), json!([]));
    opening.insert("usage".into(), Value::Null);
    let opening = Value::Object(opening);
    seq.emit("response.created", json!({ "response": opening }));
    seq.emit("response.in_progress", json!({ "response": opening }));
    let items = get(&answer, "output").as_array().cloned().unwrap_or_default();
    for (output_index, item) in items.iter().enumerate() {
        output_item(&mut seq, output_index, item);
    }
    let terminal = match get(&answer, "status").as_str() {
        Some("incomplete") => "response.incomplete",
        Some("failed") => "response.failed",
        _ => "response.completed",
    };
    seq.emit(terminal, json!({ "response": Value::Object(answer) }));
}

fn output_item(seq: &mut Numbered<'_>, output_index: usize, item: &Value) {
    let kind = item.get("type").and_then(Value::as_str).unwrap_or("");
    let id = item.get("id").cloned().unwrap_or(Value::Null);
    let at = |extra: Value| {
        let mut v = json!({"item_id": id, "output_index": output_index});
        if let (Some(v), Value::Object(extra)) = (v.as_object_mut(), extra) {
            v.extend(extra);
        }
        v
    };
    let mut added = item.clone();
    match kind {
        "message" => {
            added["status"] = json!("in_progress");
            added["content"] = json!([]);
        }
        "function_call" => {
            added["status"] = json!("in_progress");
            added["arguments"] = json!("");
        }
        "reasoning" => added["summary"] = json!([]),
        _ => {}
    }
    seq.emit("response.output_item.added", json!({"output_index": output_index, "item": added}));
    match kind {
        "message" => {
            let parts = item.get("content").and_then(Value::as_array).cloned().unwrap_or_default();
            for (content_index, part) in parts.iter().enumerate() {
                let (field, delta_kind, done_kind) = match part.get("type").and_then(Value::as_str) {
                    Some("refusal") => ("refusal", "response.refusal.delta", "response.refusal.done"),
                    _ => ("text", "response.output_text.delta", "response.output_text.done"),
                };
                let mut empty = part.clone();
                empty[field] = json!("");
                if field == "text" {
                    empty["annotations"] = json!([]);
                }
                let whole = part.get(field).cloned().unwrap_or(json!(""));
                seq.emit("response.content_part.added", at(json!({"content_index": content_index, "part": empty})));
                seq.emit(delta_kind, at(json!({"content_index": content_index, "delta": whole})));
                seq.emit(done_kind, at(json!({"content_index": content_index, field: whole})));
                seq.emit("response.content_part.done", at(json!({"content_index": content_index, "part": part})));
            }
        }
        "function_call" => {
            let arguments = item.get("arguments").cloned().unwrap_or(json!(""));
            seq.emit("response.function_call_arguments.delta", at(json!({"delta": arguments})));
            seq.emit("response.function_call_arguments.done", at(json!({"arguments": arguments})));
        }
        "reasoning" => {
            let summary = item.get("summary").and_then(Value::as_array).cloned().unwrap_or_default();
            for (summary_index, part) in summary.iter().enumerate() {
                let whole = part.get("text").cloned().unwrap_or(json!(""));
                let empty = json!({"type": "summary_text", "text": ""});
                seq.emit(
                    "response.reasoning_summary_part.added",
                    at(json!({"summary_index": summary_index, "part": empty})),
                );
                seq.emit(
                    "response.reasoning_summary_text.delta",
                    at(json!({"summary_index": summary_index, "delta": whole})),
                );
                seq.emit(
                    "response.reasoning_summary_text.done",
                    at(json!({"summary_index": summary_index, "text": whole})),
                );
                seq.emit(
                    "response.reasoning_summary_part.done",
                    at(json!({"summary_index": summary_index, "part": part})),
                );
            }
        }
        _ => {}
    }
    seq.emit("response.output_item.done", json!({"output_index": output_index, "item": item}));
}
