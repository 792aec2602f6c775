//! Intermediate form → Chat Completions request.

use serde_json::{json, Map, Value};

use crate::protocol::translate::message::{
    family, CallKind, Media, OutputFormat, Part, Request, Role, Tool, ToolKind, Turn,
};
use crate::protocol::translate::profile::{MaxTokensField, ReasoningField};
use crate::protocol::translate::shape::{is_custom, Enc};
use crate::protocol::translate::wire::{joined, to_data_url};
use crate::protocol::translate::{ir::Family, message::Effort};
use crate::protocol::translate::{openai, schema};

/// What DeepSeek-style providers get when a tool-call turn in history has
/// no reasoning to replay ("reasoning_content must be passed back").
const REASONING_PLACEHOLDER: &str = "tool call";

/// Chat takes at most this many stop sequences.
const MAX_STOP: usize = 4;

pub(crate) fn encode(req: &Request, model: &str, enc: &mut Enc<'_>) -> Value {
    let mut b = Map::new();
    b.insert("model".into(), json!(model));
    b.insert("messages".into(), Value::Array(messages(req, enc)));
    tools(req, enc, &mut b);
    limits(req, enc, &mut b);
    reasoning(req, enc, &mut b);
    if let Some(f) = &req.output_format {
        b.insert("response_format".into(), response_format(f));
    }
    if let Some(v) = &req.verbosity {
        b.insert("verbosity".into(), json!(v));
    }
    if let Some(u) = &req.user {
        b.insert("user".into(), json!(openai_user(u)));
    }
    if let Some(m) = &req.metadata {
        b.insert("metadata".into(), Value::Object(m.clone()));
    }
    if let Some(t) = &req.service_tier {
        b.insert("service_tier".into(), json!(if t == "standard_only" { "default" } else { t }));
    }
    if req.store == Some(true) {
        enc.drop("store");
    }
    cache_key(req, enc, &mut b);
    if req.stream {
        b.insert("stream".into(), json!(true));
        if enc.profile.stream_options.sends() {
            b.insert("stream_options".into(), json!({"include_usage": true}));
        }
    }
    extras(req, enc, &mut b);
    Value::Object(b)
}

/// Unknown fields of an OpenAI-family client, passed on where nothing
/// mapped took their place.
pub(crate) fn extras(req: &Request, enc: &mut Enc<'_>, b: &mut Map<String, Value>) {
    if req.extras.is_empty() {
        return;
    }
    if req.source.map(family) != Some(Family::OpenAi) {
        enc.drop_extras(req);
        return;
    }
    for (k, v) in &req.extras {
        b.entry(k.clone()).or_insert_with(|| v.clone());
    }
}

/// OpenAI takes end-user ids of at most 64 characters; Claude Code's are
/// longer, so a longer one is sent as a stable hash of itself.
pub(crate) fn openai_user(user: &str) -> String {
    if user.len() <= OPENAI_USER_MAX {
        user.to_owned()
    } else {
        format!("u_{}", crate::protocol::translate::wire::short_hash(&[user]))
    }
}

const OPENAI_USER_MAX: usize = 64;

pub(crate) fn cache_key(req: &Request, enc: &mut Enc<'_>, b: &mut Map<String, Value>) {
    if !enc.profile.prompt_cache_key {
        if req.prompt_cache_key.is_some() {
            enc.drop("prompt_cache_key");
        }
        return;
    }
    if let Some(key) = req.prompt_cache_key.clone().or_else(|| req.user.as_deref().map(session_key)) {
        b.insert("prompt_cache_key".into(), json!(openai_user(&key)));
    }
}

/// A cache key from an end-user id: Claude Code's `…_session_<uuid>` keys
/// by session, so one conversation stays on one cache.
fn session_key(user: &str) -> String {
    user.rsplit_once("_session_").map_or(user, |(_, s)| s).to_owned()
}

fn messages(req: &Request, enc: &mut Enc<'_>) -> Vec<Value> {
    let mut out = Vec::new();
    let system: Vec<&str> = req.system.iter().filter_map(text_of).collect();
    let system_role = if enc.profile.developer_role { "developer" } else { "system" };
    if !system.is_empty() {
        let role = system_role;
        let content = if enc.profile.system_as_string {
            json!(joined(&system, "\n\n"))
        } else {
            Value::Array(system.iter().map(|t| json!({"type": "text", "text": t})).collect())
        };
        out.push(json!({"role": role, "content": content}));
    }
    if req.system.iter().chain(req.turns.iter().flat_map(|t| &t.parts)).any(has_cache) {
        enc.drop("cache");
    }
    for turn in &req.turns {
        match turn.role {
            Role::Assistant => out.push(assistant(turn, req, enc)),
            Role::User => user(turn, "user", &mut out),
            Role::System => user(turn, system_role, &mut out),
        }
    }
    out
}

fn has_cache(p: &Part) -> bool {
    match p {
        Part::Text { cache, .. } | Part::Image { cache, .. } | Part::Document { cache, .. } => cache.is_some(),
        Part::ToolResult { content, cache, .. } => cache.is_some() || content.iter().any(has_cache),
        _ => false,
    }
}

fn text_of(p: &Part) -> Option<&str> {
    match p {
        Part::Text { text, .. } => Some(text),
        _ => None,
    }
}

/// A user turn: tool messages first, one per result; media a tool returned
/// in a synthetic user message after them (a `tool` message holds text
/// only); then the user's own content.
/// A user turn, or a system one in the middle of the conversation (`role`
/// says which): tool results become tool messages, the rest one message.
fn user(turn: &Turn, role: &str, out: &mut Vec<Value>) {
    let mut media = Vec::new();
    let mut own = Vec::new();
    for part in &turn.parts {
        let Part::ToolResult { call_id, content, is_error, .. } = part else {
            own.push(part);
            continue;
        };
        let texts: Vec<String> = content.iter().filter_map(result_text).collect();
        let mut text = joined(&texts, "\n");
        if *is_error {
            text = format!("Error: {text}");
        }
        out.push(json!({"role": "tool", "tool_call_id": call_id, "content": text}));
        let images: Vec<Value> = content.iter().filter(|p| result_text(p).is_none()).filter_map(chat_part).collect();
        if !images.is_empty() {
            media.push(json!({"type": "text", "text": format!("Attachments of tool result {call_id}:")}));
            media.extend(images);
        }
    }
    if !media.is_empty() {
        out.push(json!({"role": "user", "content": media}));
    }
    if own.is_empty() {
        return;
    }
    let content = match own.as_slice() {
        [Part::Text { text, .. }] => json!(text),
        parts => Value::Array(parts.iter().copied().filter_map(chat_part).collect()),
    };
    out.push(json!({"role": role, "content": content}));
}

/// The text of a tool-result part, when it is text.
fn result_text(p: &Part) -> Option<String> {
    match p {
        Part::Text { text, .. } | Part::Refusal { text } => Some(text.clone()),
        Part::Document { source: Media::Text(t), .. } => Some(t.clone()),
        _ => None,
    }
}

fn chat_part(p: &Part) -> Option<Value> {
    Some(match p {
        Part::Text { text, .. } => json!({"type": "text", "text": text}),
        Part::Refusal { text } => json!({"type": "text", "text": text}),
        Part::Image { source, detail, .. } => {
            let url = match source {
                Media::Base64 { media_type, data } => to_data_url(media_type, data),
                Media::Url(u) | Media::FileId(u) | Media::Text(u) => u.clone(),
            };
            let mut image = json!({"url": url});
            if let Some(d) = detail {
                image["detail"] = json!(d);
            }
            json!({"type": "image_url", "image_url": image})
        }
        Part::Document { source, filename, title, .. } => {
            let mut file = match source {
                Media::Base64 { media_type, data } => json!({"file_data": to_data_url(media_type, data)}),
                Media::FileId(id) => json!({"file_id": id}),
                Media::Text(t) => return Some(json!({"type": "text", "text": t})),
                // Refused before encoding: Chat takes no document by URL.
                Media::Url(u) => return Some(json!({"type": "text", "text": u})),
            };
            if let Some(name) = filename.as_ref().or(title.as_ref()) {
                file["filename"] = json!(name);
            }
            json!({"type": "file", "file": file})
        }
        Part::Audio { format, data } => json!({"type": "input_audio", "input_audio": {"data": data, "format": format}}),
        Part::Reasoning { .. } | Part::ToolCall { .. } | Part::ToolResult { .. } => return None,
    })
}

fn assistant(turn: &Turn, req: &Request, enc: &mut Enc<'_>) -> Value {
    let mut msg = Map::new();
    msg.insert("role".into(), json!("assistant"));
    let texts: Vec<&str> = turn.parts.iter().filter_map(text_of).collect();
    let refusals = openai::texts_of(&turn.parts, openai::refusal_text);
    let calls: Vec<Value> = turn.parts.iter().filter_map(|p| call(p, req)).collect();
    msg.insert("content".into(), if texts.is_empty() { Value::Null } else { json!(joined(&texts, "")) });
    if !refusals.is_empty() {
        msg.insert("refusal".into(), json!(joined(&refusals, "\n")));
    }
    let reasoning = openai::texts_of(&turn.parts, openai::reasoning_text);
    let field = match enc.profile.reasoning_field {
        ReasoningField::None => None,
        ReasoningField::ReasoningContent => Some("reasoning_content"),
        ReasoningField::Reasoning => Some("reasoning"),
        ReasoningField::ReasoningDetails => {
            let placeholder =
                (!calls.is_empty() && enc.profile.reasoning_replay_required).then_some(REASONING_PLACEHOLDER);
            let details = super::details::encode(&turn.parts, placeholder);
            if !details.is_empty() {
                msg.insert("reasoning_details".into(), Value::Array(details));
            }
            None
        }
    };
    let sent_details = msg.contains_key("reasoning_details");
    let mut text = joined(&reasoning, "\n\n");
    if text.is_empty() && !calls.is_empty() && enc.profile.reasoning_replay_required {
        text = REASONING_PLACEHOLDER.to_owned();
    }
    match field {
        Some(f) if !text.is_empty() => {
            msg.insert(f.into(), json!(text));
        }
        _ if !reasoning.is_empty() && !sent_details => enc.drop("reasoning"),
        _ => {}
    }
    if !calls.is_empty() {
        msg.insert("tool_calls".into(), Value::Array(calls));
    }
    Value::Object(msg)
}

fn call(p: &Part, req: &Request) -> Option<Value> {
    let Part::ToolCall { id, name, args, kind } = p else {
        return None;
    };
    Some(if *kind == CallKind::Custom || is_custom(&req.tools, name) {
        json!({"id": id, "type": "custom", "custom": {"name": name, "input": args}})
    } else {
        let args = if args.trim().is_empty() { "{}".to_owned() } else { args.clone() };
        json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}})
    })
}

fn tools(req: &Request, enc: &mut Enc<'_>, b: &mut Map<String, Value>) {
    let tools: Vec<Value> = req.tools.iter().filter_map(tool).collect();
    if !openai::tools_and_choice(req, tools, named_choice, enc, b) {
        return;
    }
    if let Some(p) = req.parallel_tools {
        if enc.profile.parallel_tools {
            b.insert("parallel_tool_calls".into(), json!(p));
        } else {
            enc.drop("parallel_tools");
        }
    }
}

fn named_choice(name: &str, custom: bool) -> Value {
    if custom {
        json!({"type": "custom", "custom": {"name": name}})
    } else {
        json!({"type": "function", "function": {"name": name}})
    }
}

fn tool(t: &Tool) -> Option<Value> {
    match &t.kind {
        ToolKind::Function { schema: s, strict } => {
            let mut f = json!({"name": t.name, "parameters": schema::object_root(s)});
            if let Some(d) = &t.description {
                f["description"] = json!(d);
            }
            if let Some(s) = strict {
                f["strict"] = json!(s);
            }
            Some(json!({"type": "function", "function": f}))
        }
        ToolKind::Custom { format } => {
            let mut c = json!({"name": t.name});
            if let Some(d) = &t.description {
                c["description"] = json!(d);
            }
            if let Some(f) = format {
                c["format"] = f.clone();
            }
            Some(json!({"type": "custom", "custom": c}))
        }
        ToolKind::Hosted { raw, .. } => Some(raw.clone()),
    }
}

fn limits(req: &Request, enc: &mut Enc<'_>, b: &mut Map<String, Value>) {
    if let Some(n) = req.max_output {
        let field = match enc.profile.max_tokens_field {
            MaxTokensField::MaxTokens => "max_tokens",
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
        };
        b.insert(field.into(), json!(n));
    }
    openai::sampling(req, enc, b);
    if !req.stop.is_empty() {
        if req.stop.len() > MAX_STOP {
            enc.drop("stop[4..]");
        }
        b.insert("stop".into(), json!(req.stop.iter().take(MAX_STOP).collect::<Vec<_>>()));
    }
    for (k, v) in [("presence_penalty", req.presence_penalty), ("frequency_penalty", req.frequency_penalty)] {
        if let Some(v) = v {
            b.insert(k.into(), json!(v));
        }
    }
    if let Some(s) = req.seed {
        b.insert("seed".into(), json!(s));
    }
    if let Some(n) = req.n {
        b.insert("n".into(), json!(n));
    }
    if let Some(l) = req.logprobs {
        b.insert("logprobs".into(), json!(true));
        if let Some(top) = l.top {
            b.insert("top_logprobs".into(), json!(top));
        }
    }
}

fn reasoning(req: &Request, enc: &mut Enc<'_>, b: &mut Map<String, Value>) {
    let Some(r) = &req.reasoning else {
        return;
    };
    if r.summary.is_some() {
        enc.drop("reasoning.summary");
    }
    if r.disabled {
        return;
    }
    let effort = match (r.effort, r.budget) {
        (Some(e), _) => e,
        (None, Some(budget)) => {
            enc.drop("reasoning.budget");
            Effort::from_budget(budget)
        }
        (None, None) => return,
    };
    if enc.profile.reasoning_effort {
        b.insert("reasoning_effort".into(), json!(effort.openai()));
    } else {
        enc.drop("reasoning_effort");
    }
}

pub(crate) fn response_format(f: &OutputFormat) -> Value {
    match f {
        OutputFormat::JsonObject => json!({"type": "json_object"}),
        OutputFormat::JsonSchema { name, schema, strict, description } => {
            let mut s = json!({"name": name.as_deref().unwrap_or("response"), "schema": schema});
            if let Some(st) = strict {
                s["strict"] = json!(st);
            }
            if let Some(d) = description {
                s["description"] = json!(d);
            }
            json!({"type": "json_schema", "json_schema": s})
        }
    }
}
