//! Intermediate form → Responses request.
//!
//! Always stateless: `store: false`, the whole conversation in `input`, and
//! `include: ["reasoning.encrypted_content"]` when reasoning is on, so the
//! reasoning comes back in a form the next turn can replay (the ChatGPT and
//! Codex backends require both). Tool schemas get `strict: false` unless the
//! client asked for strict: Responses defaults to strict, which rejects or
//! rewrites the loose schemas coding tools send.

use serde_json::{json, Map, Value};

use crate::protocol::translate::chat;
use crate::protocol::translate::ir::Family;
use crate::protocol::translate::message::{CallKind, Effort, Media, Part, Request, Role, Tool, ToolKind, Turn};
use crate::protocol::translate::shape::{is_custom, Enc};
use crate::protocol::translate::wire::{joined, to_data_url};
use crate::protocol::translate::{openai, schema};

pub(crate) fn encode(req: &Request, model: &str, enc: &mut Enc<'_>) -> Value {
    let mut b = Map::new();
    b.insert("model".into(), json!(model));
    let system: Vec<&str> = req.system.iter().filter_map(text_of).collect();
    if !system.is_empty() {
        b.insert("instructions".into(), json!(joined(&system, "\n\n")));
    }
    let mut items = Vec::new();
    let mut replays_reasoning = false;
    for turn in &req.turns {
        turn_items(turn, req, enc, &mut items, &mut replays_reasoning);
    }
    if req.system.iter().chain(req.turns.iter().flat_map(|t| &t.parts)).any(has_cache) {
        enc.drop("cache");
    }
    b.insert("input".into(), Value::Array(items));
    tools(req, enc, &mut b);
    limits(req, enc, &mut b);
    let reasoning_on = reasoning(req, enc, &mut b);
    let mut text = Map::new();
    if let Some(f) = &req.output_format {
        let mut format = chat::encode_response_format(f);
        // Responses flattens `json_schema` into `format`.
        if let Some(Value::Object(inner)) = format.get_mut("json_schema").map(Value::take) {
            if let Value::Object(f) = &mut format {
                f.remove("json_schema");
                f.extend(inner);
            }
        }
        text.insert("format".into(), format);
    }
    if let Some(v) = &req.verbosity {
        text.insert("verbosity".into(), json!(v));
    }
    if !text.is_empty() {
        b.insert("text".into(), Value::Object(text));
    }
    if let Some(u) = &req.user {
        b.insert("user".into(), json!(chat::openai_user(u)));
    }
    if let Some(m) = &req.metadata {
        b.insert("metadata".into(), Value::Object(m.clone()));
    }
    if let Some(t) = &req.service_tier {
        b.insert("service_tier".into(), json!(if t == "standard_only" { "default" } else { t }));
    }
    if let Some(p) = &req.previous_response_id {
        b.insert("previous_response_id".into(), json!(p));
    }
    b.insert("store".into(), json!(false));
    let mut include = Vec::new();
    if reasoning_on || replays_reasoning {
        include.push("reasoning.encrypted_content");
    }
    if let Some(top) = req.logprobs.and_then(|l| l.top) {
        b.insert("top_logprobs".into(), json!(top));
        include.push("message.output_text.logprobs");
    }
    if !include.is_empty() {
        b.insert("include".into(), json!(include));
    }
    chat::cache_key(req, enc, &mut b);
    if req.stream {
        b.insert("stream".into(), json!(true));
    }
    chat::extras(req, enc, &mut b);
    Value::Object(b)
}

fn text_of(p: &Part) -> Option<&str> {
    match p {
        Part::Text { text, .. } => Some(text),
        _ => None,
    }
}

fn has_cache(p: &Part) -> bool {
    match p {
        Part::Text { cache, .. } | Part::Image { cache, .. } | Part::Document { cache, .. } => cache.is_some(),
        Part::ToolResult { content, cache, .. } => cache.is_some() || content.iter().any(has_cache),
        _ => false,
    }
}

fn turn_items(turn: &Turn, req: &Request, enc: &mut Enc<'_>, items: &mut Vec<Value>, replays: &mut bool) {
    match turn.role {
        Role::Assistant => assistant_items(turn, req, enc, items, replays),
        Role::User | Role::System => {
            let role = if turn.role == Role::System { "developer" } else { "user" };
            let mut content = Vec::new();
            for part in &turn.parts {
                match part {
                    Part::ToolResult { call_id, content: c, is_error, kind, name, .. } => {
                        let custom =
                            *kind == CallKind::Custom || name.as_deref().is_some_and(|n| is_custom(&req.tools, n));
                        let kind = if custom { "custom_tool_call_output" } else { "function_call_output" };
                        items.push(json!({"type": kind, "call_id": call_id, "output": output(c, *is_error)}));
                    }
                    other => content.extend(input_part(other)),
                }
            }
            if !content.is_empty() {
                items.push(json!({"type": "message", "role": role, "content": content}));
            }
        }
    }
}

/// A tool output: a string when it is only text, else a list of parts.
fn output(content: &[Part], is_error: bool) -> Value {
    let texts: Option<Vec<&str>> = content.iter().map(text_of).collect();
    let prefix = if is_error { "Error: " } else { "" };
    match texts {
        Some(t) => json!(format!("{prefix}{}", joined(&t, "\n"))),
        None => {
            let mut parts: Vec<Value> = Vec::new();
            if is_error {
                parts.push(json!({"type": "input_text", "text": "Error:"}));
            }
            parts.extend(content.iter().flat_map(input_part));
            Value::Array(parts)
        }
    }
}

fn input_part(p: &Part) -> Option<Value> {
    Some(match p {
        Part::Text { text, .. } | Part::Refusal { text } => json!({"type": "input_text", "text": text}),
        Part::Image { source: Media::Text(t), .. } | Part::Document { source: Media::Text(t), .. } => {
            json!({"type": "input_text", "text": t})
        }
        Part::Image { source, detail, .. } => {
            let mut v = media_item(source, "input_image", ("image_url", "image_url"));
            v["detail"] = json!(detail.as_deref().unwrap_or("auto"));
            v
        }
        Part::Document { source, filename, title, .. } => {
            let mut v = media_item(source, "input_file", ("file_data", "file_url"));
            if let Some(name) = filename.as_ref().or(title.as_ref()) {
                v["filename"] = json!(name);
            }
            v
        }
        // Refused before encoding: Responses takes no audio.
        Part::Audio { .. } | Part::Reasoning { .. } | Part::ToolCall { .. } | Part::ToolResult { .. } => return None,
    })
}

/// A media input item of type `kind`, its data URL and its URL under the
/// keys `kind` names them by (an image puts both in `image_url`).
fn media_item(source: &Media, kind: &str, (data_key, url_key): (&str, &str)) -> Value {
    match source {
        Media::Base64 { media_type, data } => json!({"type": kind, data_key: to_data_url(media_type, data)}),
        Media::Url(u) => json!({"type": kind, url_key: u}),
        Media::FileId(id) => json!({"type": kind, "file_id": id}),
        Media::Text(t) => json!({"type": "input_text", "text": t}),
    }
}

fn assistant_items(turn: &Turn, req: &Request, enc: &mut Enc<'_>, items: &mut Vec<Value>, replays: &mut bool) {
    let mut text: Vec<Value> = Vec::new();
    let flush = |text: &mut Vec<Value>, items: &mut Vec<Value>| {
        if !text.is_empty() {
            items.push(json!({"type": "message", "role": "assistant", "content": std::mem::take(text)}));
        }
    };
    for part in &turn.parts {
        match part {
            Part::Text { text: t, .. } => text.push(json!({"type": "output_text", "text": t})),
            Part::Refusal { text: t } => text.push(json!({"type": "refusal", "refusal": t})),
            Part::Reasoning { text: t, opaque, id, .. } => {
                flush(&mut text, items);
                match opaque.as_ref().filter(|o| o.origin == Family::OpenAi) {
                    Some(o) => {
                        let mut item = json!({
                            "type": "reasoning",
                            "summary": if t.is_empty() { json!([]) } else { json!([{"type": "summary_text", "text": t}]) },
                            "encrypted_content": o.value,
                        });
                        if let Some(id) = id {
                            item["id"] = json!(id);
                        }
                        items.push(item);
                        *replays = true;
                    }
                    None => enc.drop("reasoning"),
                }
            }
            Part::ToolCall { id, name, args, kind } => {
                flush(&mut text, items);
                if *kind == CallKind::Custom || is_custom(&req.tools, name) {
                    items.push(json!({"type": "custom_tool_call", "call_id": id, "name": name, "input": args}));
                } else {
                    let args = if args.trim().is_empty() { "{}" } else { args };
                    items.push(json!({"type": "function_call", "call_id": id, "name": name, "arguments": args}));
                }
            }
            _ => {}
        }
    }
    flush(&mut text, items);
}

fn tools(req: &Request, enc: &mut Enc<'_>, b: &mut Map<String, Value>) {
    let tools: Vec<Value> = req.tools.iter().map(tool).collect();
    if !openai::tools_and_choice(req, tools, named_choice, enc, b) {
        return;
    }
    if let Some(p) = req.parallel_tools {
        b.insert("parallel_tool_calls".into(), json!(p));
    }
}

fn named_choice(name: &str, custom: bool) -> Value {
    json!({"type": if custom { "custom" } else { "function" }, "name": name})
}

fn tool(t: &Tool) -> Value {
    let mut v = match &t.kind {
        ToolKind::Function { schema: s, strict } => json!({
            "type": "function",
            "name": t.name,
            "parameters": schema::object_root(s),
            "strict": strict.unwrap_or(false),
        }),
        ToolKind::Custom { format } => {
            let mut c = json!({"type": "custom", "name": t.name});
            if let Some(f) = format {
                c["format"] = f.clone();
            }
            c
        }
        ToolKind::Hosted { raw, .. } => return raw.clone(),
    };
    if let Some(d) = &t.description {
        v["description"] = json!(d);
    }
    v
}

fn limits(req: &Request, enc: &mut Enc<'_>, b: &mut Map<String, Value>) {
    if let Some(n) = req.max_output {
        b.insert("max_output_tokens".into(), json!(n));
    }
    openai::sampling(req, enc, b);
    if !req.stop.is_empty() {
        enc.drop("stop");
    }
    if req.seed.is_some() {
        enc.drop("seed");
    }
    if req.presence_penalty.is_some() || req.frequency_penalty.is_some() {
        enc.drop("penalties");
    }
}

/// Writes `reasoning`; whether reasoning is on.
fn reasoning(req: &Request, enc: &mut Enc<'_>, b: &mut Map<String, Value>) -> bool {
    let Some(r) = &req.reasoning else {
        return false;
    };
    if r.disabled {
        return false;
    }
    let effort = r.effort.or(r.budget.map(Effort::from_budget));
    let mut v = Map::new();
    if let Some(e) = effort {
        v.insert("effort".into(), json!(e.openai()));
    }
    if r.effort.is_none() && r.budget.is_some() {
        enc.drop("reasoning.budget");
    }
    v.insert("summary".into(), json!(r.summary.as_deref().unwrap_or("auto")));
    b.insert("reasoning".into(), Value::Object(v));
    true
}
