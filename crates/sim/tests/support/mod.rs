//! Plain-HTTP clients for the four wire formats, each checking that what the
//! simulated provider sends is well formed for its format (stream event
//! order, indexes, sequence numbers, terminators) while reassembling it into
//! an [`Outcome`]: the text, the tool calls and the stop reason.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code)]

use serde_json::{json, Value};
use switchyard_sim::SimProvider;

/// A tool call as a client reassembles it.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// Gemini's calls carry none.
    pub id: Option<String>,
    pub name: String,
    /// The arguments as JSON text, or a custom tool's raw input.
    pub input: String,
    pub custom: bool,
    /// How many delta events carried the input (1 when it came whole).
    pub deltas: usize,
}

impl Call {
    pub fn args(&self) -> Value {
        serde_json::from_str(&self.input).unwrap_or_else(|e| panic!("arguments {:?} are not JSON: {e}", self.input))
    }
}

/// One reply, reassembled.
#[derive(Debug, Default)]
pub struct Outcome {
    pub text: String,
    pub calls: Vec<Call>,
    pub stop: String,
    /// Text delta events (streams) seen.
    pub text_deltas: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Chat,
    Responses,
    Messages,
    Gemini,
}

impl Format {
    pub const ALL: [Format; 4] = [Format::Chat, Format::Responses, Format::Messages, Format::Gemini];

    /// The stop reason of a tool-call turn, and of a text turn.
    pub fn stops(self) -> (&'static str, &'static str) {
        match self {
            Format::Chat => ("tool_calls", "stop"),
            Format::Responses => ("completed", "completed"),
            Format::Messages => ("tool_use", "end_turn"),
            Format::Gemini => ("STOP", "STOP"),
        }
    }
}

/// A tool a request offers: its name and JSON schema (`None`: a Responses custom tool).
#[derive(Debug, Clone)]
pub struct Tool {
    pub name: &'static str,
    pub schema: Option<Value>,
}

pub fn bash() -> Tool {
    function("Bash", "command", ("timeout", "number"))
}

pub fn read() -> Tool {
    function("Read", "file_path", ("limit", "integer"))
}

/// A function tool taking one required string and one optional value of
/// JSON type `kind`, as coding agents' tools do.
fn function(name: &'static str, required: &str, (optional, kind): (&str, &str)) -> Tool {
    let properties = json!({ required: { "type": "string" }, optional: { "type": kind } });
    Tool { name, schema: Some(json!({ "type": "object", "properties": properties, "required": [required] })) }
}

pub fn apply_patch() -> Tool {
    Tool { name: "apply_patch", schema: None }
}

/// Sends one request in `format` offering `tools`; `answered` are the calls
/// of the previous turn, each answered with `result`.
pub async fn send(
    sim: &SimProvider,
    format: Format,
    stream: bool,
    tools: &[Tool],
    answered: &[Call],
    result: &str,
) -> Outcome {
    let (url, body) = request(sim, format, stream, tools, answered, result);
    let response = reqwest::Client::new().post(url).json(&body).send().await.unwrap();
    assert_eq!(response.status(), 200, "{format:?} stream={stream}");
    let content_type = response.headers()["content-type"].to_str().unwrap().to_string();
    let text = response.text().await.unwrap();
    if stream {
        assert!(content_type.starts_with("text/event-stream"), "{content_type}");
        match format {
            Format::Chat => chat_stream(&text),
            Format::Responses => responses_stream(&text),
            Format::Messages => messages_stream(&text),
            Format::Gemini => gemini_stream(&text),
        }
    } else {
        assert!(content_type.starts_with("application/json"), "{content_type}");
        let body: Value = serde_json::from_str(&text).unwrap();
        match format {
            Format::Chat => chat_body(&body),
            Format::Responses => responses_body(&body),
            Format::Messages => messages_body(&body),
            Format::Gemini => gemini_body(&body),
        }
    }
}

fn request(
    sim: &SimProvider,
    format: Format,
    stream: bool,
    tools: &[Tool],
    answered: &[Call],
    result: &str,
) -> (String, Value) {
    let root = sim.root_url();
    match format {
        Format::Chat => {
            let tools: Vec<Value> = tools
                .iter()
                .map(|t| json!({ "type": "function", "function": { "name": t.name, "parameters": t.schema } }))
                .collect();
            let mut messages = vec![json!({ "role": "user", "content": "run it" })];
            if !answered.is_empty() {
                let calls: Vec<Value> = answered
                    .iter()
                    .map(|c| json!({ "id": c.id, "type": "function", "function": { "name": c.name, "arguments": c.input } }))
                    .collect();
                messages.push(json!({ "role": "assistant", "content": null, "tool_calls": calls }));
                for c in answered {
                    messages.push(json!({ "role": "tool", "tool_call_id": c.id, "content": result }));
                }
            }
            let body = json!({
                "model": "gpt-test", "stream": stream, "stream_options": { "include_usage": true },
                "messages": messages, "tools": tools,
            });
            (format!("{root}/v1/chat/completions"), body)
        }
        Format::Responses => {
            let tools: Vec<Value> = tools
                .iter()
                .map(|t| match &t.schema {
                    Some(schema) => {
                        json!({ "type": "function", "name": t.name, "parameters": schema, "strict": false })
                    }
                    None => json!({ "type": "custom", "name": t.name, "format": { "type": "text" } }),
                })
                .collect();
            let mut input = vec![json!({ "role": "user", "content": [{ "type": "input_text", "text": "run it" }] })];
            for c in answered {
                input.push(if c.custom {
                    json!({ "type": "custom_tool_call", "call_id": c.id, "name": c.name, "input": c.input })
                } else {
                    json!({ "type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.input })
                });
            }
            for c in answered {
                let kind = if c.custom { "custom_tool_call_output" } else { "function_call_output" };
                input.push(json!({ "type": kind, "call_id": c.id, "output": result }));
            }
            let body = json!({ "model": "gpt-5", "stream": stream, "input": input, "tools": tools });
            (format!("{root}/v1/responses"), body)
        }
        Format::Messages => {
            let tools: Vec<Value> = tools
                .iter()
                .map(|t| json!({ "name": t.name, "description": "a tool", "input_schema": t.schema }))
                .collect();
            let mut messages = vec![json!({ "role": "user", "content": "run it" })];
            if !answered.is_empty() {
                let uses: Vec<Value> = answered
                    .iter()
                    .map(|c| json!({ "type": "tool_use", "id": c.id, "name": c.name, "input": c.args() }))
                    .collect();
                messages.push(json!({ "role": "assistant", "content": uses }));
                let results: Vec<Value> = answered
                    .iter()
                    .map(|c| {
                        json!({ "type": "tool_result", "tool_use_id": c.id, "content": [{ "type": "text", "text": result }] })
                    })
                    .collect();
                messages.push(json!({ "role": "user", "content": results }));
            }
            let body = json!({ "model": "claude-test", "max_tokens": 1024, "stream": stream, "messages": messages, "tools": tools });
            // Claude Code's path, query and all.
            (format!("{root}/v1/messages?beta=true"), body)
        }
        Format::Gemini => {
            let declarations: Vec<Value> =
                tools.iter().map(|t| json!({ "name": t.name, "parametersJsonSchema": t.schema })).collect();
            let mut contents = vec![json!({ "role": "user", "parts": [{ "text": "run it" }] })];
            if !answered.is_empty() {
                let calls: Vec<Value> =
                    answered.iter().map(|c| json!({ "functionCall": { "name": c.name, "args": c.args() } })).collect();
                contents.push(json!({ "role": "model", "parts": calls }));
                let responses: Vec<Value> = answered
                    .iter()
                    .map(|c| json!({ "functionResponse": { "name": c.name, "response": { "output": result } } }))
                    .collect();
                contents.push(json!({ "role": "user", "parts": responses }));
            }
            let body = json!({ "contents": contents, "tools": [{ "functionDeclarations": declarations }] });
            let base = sim.gemini_base_url();
            let url = if stream {
                format!("{base}/models/gemini-test:streamGenerateContent?alt=sse")
            } else {
                format!("{base}/models/gemini-test:generateContent")
            };
            (url, body)
        }
    }
}

/// SSE events as (event name, data), split on blank lines (`\n` or `\r\n`).
pub fn sse(text: &str) -> Vec<(Option<String>, String)> {
    let text = text.replace("\r\n", "\n");
    assert!(text.ends_with("\n\n"), "a stream ends after a whole event: {text:?}");
    text.split("\n\n")
        .filter(|block| !block.is_empty())
        .map(|block| {
            let mut name = None;
            let mut data = Vec::new();
            for line in block.lines() {
                if let Some(n) = line.strip_prefix("event: ") {
                    name = Some(n.to_string());
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data.push(d);
                } else {
                    panic!("unexpected SSE line {line:?}");
                }
            }
            (name, data.join("\n"))
        })
        .collect()
}

fn json_of(data: &str) -> Value {
    serde_json::from_str(data).unwrap_or_else(|e| panic!("event data {data:?} is not JSON: {e}"))
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or_else(|| panic!("no string at {pointer} in {v}"))
}

fn chat_body(body: &Value) -> Outcome {
    assert_eq!(body["object"], "chat.completion");
    let message = &body["choices"][0]["message"];
    assert_eq!(message["role"], "assistant");
    let calls = message["tool_calls"]
        .as_array()
        .map(|calls| {
            assert!(message["content"].is_null(), "a tool-call turn has no content: {message}");
            calls
                .iter()
                .map(|c| {
                    assert_eq!(c["type"], "function");
                    Call {
                        id: Some(str_at(c, "/id").to_string()),
                        name: str_at(c, "/function/name").to_string(),
                        input: str_at(c, "/function/arguments").to_string(),
                        custom: false,
                        deltas: 1,
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    assert!(body["usage"]["total_tokens"].as_u64().unwrap() > 0);
    Outcome {
        text: message["content"].as_str().unwrap_or_default().to_string(),
        calls,
        stop: str_at(body, "/choices/0/finish_reason").to_string(),
        text_deltas: 0,
    }
}

/// Chat chunks: `data:` only, ending in one `[DONE]`; a tool call's id and
/// name come before its arguments; one finish reason; the usage chunk
/// (`choices: []`) after it.
fn chat_stream(text: &str) -> Outcome {
    let events = sse(text);
    assert!(events.iter().all(|(name, _)| name.is_none()), "Chat chunks have no event names");
    let (last, chunks) = events.split_last().unwrap();
    assert_eq!(last.1, "[DONE]");
    let mut out = Outcome::default();
    let mut usage_seen = false;
    for (_, data) in chunks {
        let chunk = json_of(data);
        assert_eq!(chunk["object"], "chat.completion.chunk");
        assert!(!usage_seen, "nothing after the usage chunk but [DONE]");
        let Some(choice) = chunk["choices"].get(0) else {
            assert!(!out.stop.is_empty(), "usage comes after the finish reason");
            assert!(chunk["usage"]["total_tokens"].as_u64().unwrap() > 0);
            usage_seen = true;
            continue;
        };
        let delta = &choice["delta"];
        if let Some(text) = delta["content"].as_str().filter(|t| !t.is_empty()) {
            out.text.push_str(text);
            out.text_deltas += 1;
        }
        for tc in delta["tool_calls"].as_array().into_iter().flatten() {
            let index = tc["index"].as_u64().unwrap() as usize;
            if let Some(id) = tc["id"].as_str() {
                assert_eq!(index, out.calls.len(), "a new call takes the next index");
                out.calls.push(Call {
                    id: Some(id.to_string()),
                    name: str_at(tc, "/function/name").to_string(),
                    input: String::new(),
                    custom: false,
                    deltas: 0,
                });
            }
            let call = out.calls.get_mut(index).expect("arguments after the call's id and name");
            let args = tc["function"]["arguments"].as_str().unwrap_or_default();
            if !args.is_empty() {
                call.input.push_str(args);
                call.deltas += 1;
            }
        }
        if let Some(finish) = choice["finish_reason"].as_str() {
            assert!(out.stop.is_empty(), "one finish reason");
            out.stop = finish.to_string();
        }
    }
    assert!(usage_seen, "include_usage was asked for");
    out
}

fn responses_body(body: &Value) -> Outcome {
    assert_eq!(body["object"], "response");
    let mut out = Outcome { stop: str_at(body, "/status").to_string(), ..Outcome::default() };
    for item in body["output"].as_array().unwrap() {
        response_item(item, &mut out);
    }
    assert!(body["usage"]["output_tokens_details"]["reasoning_tokens"].is_u64());
    out
}

fn response_item(item: &Value, out: &mut Outcome) {
    assert_eq!(item["status"], "completed", "{item}");
    match str_at(item, "/type") {
        "message" => out.text.push_str(str_at(item, "/content/0/text")),
        kind @ ("function_call" | "custom_tool_call") => {
            let custom = kind == "custom_tool_call";
            assert!(str_at(item, "/id").starts_with(if custom { "ctc_" } else { "fc_" }));
            out.calls.push(Call {
                id: Some(str_at(item, "/call_id").to_string()),
                name: str_at(item, "/name").to_string(),
                input: str_at(item, if custom { "/input" } else { "/arguments" }).to_string(),
                custom,
                deltas: 1,
            })
        }
        other => panic!("unexpected output item {other}"),
    }
}

/// Responses events: `event:` names their data's `type`; sequence numbers
/// count up from 0; created, in_progress first, completed last; every
/// delta belongs to an item that was added and is not yet done, and the
/// deltas add up to what the `.done` events and the done item say.
fn responses_stream(text: &str) -> Outcome {
    let events = sse(text);
    let mut out = Outcome::default();
    let mut open: Vec<(String, String, usize)> = Vec::new(); // (item id, accumulated, deltas)
    let mut done_items = Vec::new();
    for (seq, (name, data)) in events.iter().enumerate() {
        let ev = json_of(data);
        let name = name.as_deref().expect("Responses events are named");
        assert_eq!(ev["type"], name);
        assert_eq!(ev["sequence_number"], seq as u64, "sequence numbers count up from 0");
        match (seq, name) {
            (0, n) => assert_eq!(n, "response.created"),
            (1, n) => assert_eq!(n, "response.in_progress"),
            (_, "response.output_item.added") => {
                let index = ev["output_index"].as_u64().unwrap() as usize;
                assert_eq!(index, open.len() + done_items.len(), "items open in output order");
                assert!(open.is_empty(), "one item at a time");
                open.push((str_at(&ev, "/item/id").to_string(), String::new(), 0));
            }
            (
                _,
                n @ ("response.output_text.delta"
                | "response.function_call_arguments.delta"
                | "response.custom_tool_call_input.delta"),
            ) => {
                let (id, acc, deltas) = open.last_mut().expect("a delta belongs to an open item");
                assert_eq!(str_at(&ev, "/item_id"), id);
                acc.push_str(str_at(&ev, "/delta"));
                *deltas += 1;
                if n == "response.output_text.delta" {
                    out.text_deltas += 1;
                }
            }
            (
                _,
                n @ ("response.output_text.done"
                | "response.function_call_arguments.done"
                | "response.custom_tool_call_input.done"),
            ) => {
                let field = match n {
                    "response.output_text.done" => "/text",
                    "response.function_call_arguments.done" => "/arguments",
                    _ => "/input",
                };
                let (id, acc, _) = open.last().unwrap();
                assert_eq!(str_at(&ev, "/item_id"), id);
                assert_eq!(str_at(&ev, field), acc, "the deltas add up to {n}");
            }
            (_, "response.output_item.done") => {
                let (id, acc, deltas) = open.pop().expect("done closes an open item");
                let item = &ev["item"];
                assert_eq!(str_at(item, "/id"), id);
                let mut one = Outcome::default();
                response_item(item, &mut one);
                if let Some(call) = one.calls.first_mut() {
                    assert_eq!(call.input, acc, "the done item holds what the deltas sent");
                    call.deltas = deltas;
                }
                out.text.push_str(&one.text);
                out.calls.extend(one.calls);
                done_items.push(item.clone());
            }
            (_, "response.completed") => {
                assert_eq!(seq + 1, events.len(), "response.completed is last");
                assert!(open.is_empty());
                assert_eq!(ev["response"]["output"], json!(done_items), "completed lists the done items");
                out.stop = str_at(&ev, "/response/status").to_string();
            }
            (_, "response.content_part.added" | "response.content_part.done") => {}
            (_, other) => panic!("unexpected event {other}"),
        }
    }
    out
}

fn messages_body(body: &Value) -> Outcome {
    assert_eq!(body["type"], "message");
    let mut out = Outcome { stop: str_at(body, "/stop_reason").to_string(), ..Outcome::default() };
    for block in body["content"].as_array().unwrap() {
        match str_at(block, "/type") {
            "text" => out.text.push_str(str_at(block, "/text")),
            "tool_use" => {
                assert!(block["input"].is_object());
                out.calls.push(Call {
                    id: Some(str_at(block, "/id").to_string()),
                    name: str_at(block, "/name").to_string(),
                    input: block["input"].to_string(),
                    custom: false,
                    deltas: 1,
                });
            }
            other => panic!("unexpected block {other}"),
        }
    }
    out
}

/// Messages events: message_start first, message_stop last, one
/// message_delta just before it; blocks start at consecutive indexes, deltas
/// go to an open block of the right kind, every block stops before the
/// message_delta.
fn messages_stream(text: &str) -> Outcome {
    let events = sse(text);
    let mut out = Outcome::default();
    let mut open: Option<(usize, String)> = None; // (index, kind)
    let mut next = 0;
    let mut inputs: Vec<String> = Vec::new();
    for (i, (name, data)) in events.iter().enumerate() {
        let ev = json_of(data);
        let name = name.as_deref().expect("Messages events are named");
        assert_eq!(ev["type"], name);
        match name {
            "message_start" => assert_eq!(i, 0, "message_start is first"),
            "ping" => {}
            "content_block_start" => {
                assert!(open.is_none(), "blocks do not overlap here");
                assert_eq!(ev["index"], next, "blocks start at consecutive indexes");
                let block = &ev["content_block"];
                let kind = str_at(block, "/type").to_string();
                if kind == "tool_use" {
                    assert_eq!(block["input"], json!({}), "input arrives in deltas");
                    out.calls.push(Call {
                        id: Some(str_at(block, "/id").to_string()),
                        name: str_at(block, "/name").to_string(),
                        input: String::new(),
                        custom: false,
                        deltas: 0,
                    });
                }
                inputs.push(String::new());
                open = Some((next, kind));
                next += 1;
            }
            "content_block_delta" => {
                let (index, kind) = open.as_ref().expect("a delta goes to an open block");
                assert_eq!(ev["index"], *index);
                match (kind.as_str(), str_at(&ev, "/delta/type")) {
                    ("text", "text_delta") => {
                        out.text.push_str(str_at(&ev, "/delta/text"));
                        out.text_deltas += 1;
                    }
                    ("tool_use", "input_json_delta") => {
                        let call = out.calls.last_mut().unwrap();
                        call.input.push_str(str_at(&ev, "/delta/partial_json"));
                        call.deltas += 1;
                    }
                    (kind, delta) => panic!("{delta} in a {kind} block"),
                }
            }
            "content_block_stop" => {
                let (index, _) = open.take().expect("stop closes an open block");
                assert_eq!(ev["index"], index);
            }
            "message_delta" => {
                assert!(open.is_none(), "every block stops before message_delta");
                assert_eq!(i + 2, events.len(), "message_delta comes just before message_stop");
                out.stop = str_at(&ev, "/delta/stop_reason").to_string();
                assert!(ev["usage"]["output_tokens"].as_u64().unwrap() > 0);
            }
            "message_stop" => assert_eq!(i + 1, events.len(), "message_stop is last"),
            other => panic!("unexpected event {other}"),
        }
    }
    assert!(!out.stop.is_empty(), "a message_delta was sent");
    out
}

fn gemini_candidate(chunk: &Value, out: &mut Outcome) {
    assert_eq!(chunk["candidates"][0]["content"]["role"], "model");
    for part in chunk["candidates"][0]["content"]["parts"].as_array().unwrap() {
        if let Some(text) = part["text"].as_str() {
            out.text.push_str(text);
            out.text_deltas += 1;
        } else if let Some(call) = part.get("functionCall") {
            assert!(call["args"].is_object(), "args is an object: {call}");
            assert!(call.get("id").is_none(), "Gemini's calls carry no id");
            out.calls.push(Call {
                id: None,
                name: str_at(call, "/name").to_string(),
                input: call["args"].to_string(),
                custom: false,
                deltas: 1,
            });
        } else {
            panic!("unexpected part {part}");
        }
    }
}

fn gemini_usage(chunk: &Value) {
    let usage = &chunk["usageMetadata"];
    let (prompt, output) =
        (usage["promptTokenCount"].as_u64().unwrap(), usage["candidatesTokenCount"].as_u64().unwrap());
    assert!(prompt > 0 && output > 0);
    assert_eq!(usage["totalTokenCount"].as_u64().unwrap(), prompt + output);
}

fn gemini_body(body: &Value) -> Outcome {
    let mut out = Outcome { stop: str_at(body, "/candidates/0/finishReason").to_string(), ..Outcome::default() };
    gemini_candidate(body, &mut out);
    gemini_usage(body);
    assert_eq!(body["modelVersion"], "gemini-test");
    out
}

/// Gemini SSE: `data:` lines ended by `\r\n\r\n`, whole responses each, no
/// `[DONE]`; only the last has a finish reason; usage on the last.
fn gemini_stream(text: &str) -> Outcome {
    assert!(text.ends_with("\r\n\r\n") && !text.contains("\n\n"), "Google ends events with CRLF CRLF");
    let events = sse(text);
    let mut out = Outcome::default();
    for (i, (name, data)) in events.iter().enumerate() {
        assert!(name.is_none(), "Gemini events are not named");
        let chunk = json_of(data);
        gemini_candidate(&chunk, &mut out);
        let finish = chunk["candidates"][0]["finishReason"].as_str();
        if i + 1 == events.len() {
            out.stop = finish.expect("the last chunk has the finish reason").to_string();
            gemini_usage(&chunk);
        } else {
            assert_eq!(finish, None, "only the last chunk has a finish reason");
        }
    }
    out
}
