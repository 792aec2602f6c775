//! Intermediate form → Anthropic Messages request.
//!
//! Thinking is the delicate part. Only blocks signed by Anthropic are sent
//! (foreign or fabricated signatures are a 400). Thinking is then switched
//! off for the request, rather than sent in a form Anthropic rejects, when:
//! the client forces a tool (`any`/`tool` is rejected with thinking); the
//! trailing tool loop's assistant turn does not start with a signed
//! thinking block ("Expected `thinking`… found `tool_use`"); or the budget
//! left under `max_tokens` is below Anthropic's minimum of 1024. With
//! thinking off, thinking blocks are not sent at all.

use serde_json::{json, Map, Value};

use crate::protocol::translate::ir::Family;
use crate::protocol::translate::message::{
    CacheMark, Effort, Media, OutputFormat, Part, Request, Role, Tool, ToolChoice, ToolKind, Turn,
};
use crate::protocol::translate::profile::ThinkingStyle;
use crate::protocol::translate::schema;
use crate::protocol::translate::shape::Enc;
use crate::protocol::translate::wire::{args_object, joined};

/// Anthropic's smallest thinking budget.
const MIN_BUDGET: u32 = 1024;

/// Anthropic allows this many cache breakpoints per request.
const MAX_BREAKPOINTS: usize = 4;

/// Appended to the system prompt to emulate a JSON-object response format,
/// which Messages lacks (it has JSON schemas only).
const JSON_OBJECT_NOTE: &str = "Respond with a single valid JSON object and nothing else.";

pub(crate) fn encode(req: &Request, model: &str, enc: &mut Enc<'_>) -> Value {
    let mut req = req.clone();
    let max_tokens = req.max_output.unwrap_or(enc.profile.default_max_tokens);
    let thinking = thinking(&req, max_tokens, enc);
    keep_signed_reasoning(&mut req.turns, thinking.is_some(), enc);
    breakpoints(&mut req, enc);
    let mut b = Map::new();
    b.insert("model".into(), json!(model));
    b.insert("max_tokens".into(), json!(max_tokens));
    if let Some(OutputFormat::JsonObject) = req.output_format {
        req.system.push(Part::text(JSON_OBJECT_NOTE));
    }
    if let Some(system) = system(&req.system) {
        b.insert("system".into(), system);
    }
    b.insert("messages".into(), Value::Array(req.turns.iter().map(message).collect()));
    tools(&req, enc, &mut b);
    match &thinking {
        Some(t) => {
            b.insert("thinking".into(), t.clone());
        }
        None if req.reasoning.as_ref().is_some_and(|r| r.disabled || wants_thinking(&req)) => {
            b.insert("thinking".into(), json!({"type": "disabled"}));
        }
        None => {}
    }
    sampling(&req, thinking.is_some(), enc, &mut b);
    let mut config = Map::new();
    if let (Some(t), Some(e)) = (&thinking, req.reasoning.as_ref().and_then(adaptive_effort)) {
        if t["type"] == "adaptive" {
            config.insert("effort".into(), json!(anthropic_effort(e)));
        }
    }
    if let Some(OutputFormat::JsonSchema { schema, .. }) = &req.output_format {
        config.insert("format".into(), json!({"type": "json_schema", "schema": schema}));
    }
    if !config.is_empty() {
        b.insert("output_config".into(), Value::Object(config));
    }
    rest(&req, enc, &mut b);
    Value::Object(b)
}

fn anthropic_effort(e: Effort) -> &'static str {
    match e {
        Effort::Minimal | Effort::Low => "low",
        Effort::Medium => "medium",
        Effort::High => "high",
        Effort::XHigh | Effort::Max => "max",
    }
}

/// The effort adaptive thinking is asked for with: the client's, or the
/// one its budget stands for (a model that takes only adaptive thinking
/// has no budget).
fn adaptive_effort(r: &crate::protocol::translate::message::Reasoning) -> Option<Effort> {
    r.effort.or_else(|| r.budget.map(Effort::from_budget))
}

fn wants_thinking(req: &Request) -> bool {
    req.reasoning.as_ref().is_some_and(|r| !r.disabled && (r.effort.is_some() || r.budget.is_some()))
}

fn signed(p: &Part) -> bool {
    matches!(p, Part::Reasoning { opaque: Some(o), .. } if o.origin == Family::Anthropic && !o.value.is_empty())
}

/// The `thinking` object, or `None` when thinking must be (or stay) off.
fn thinking(req: &Request, max_tokens: u32, enc: &mut Enc<'_>) -> Option<Value> {
    if !wants_thinking(req) {
        return None;
    }
    let forced = matches!(req.tool_choice, Some(ToolChoice::Required | ToolChoice::Named(_)));
    if forced || !tool_loop_starts_with_thinking(&req.turns) {
        return None;
    }
    let r = req.reasoning.as_ref()?;
    if enc.profile.thinking_style == ThinkingStyle::Adaptive {
        if r.effort.is_none() && r.budget.is_some() {
            enc.drop("reasoning.budget");
        }
        return Some(json!({"type": "adaptive"}));
    }
    let budget = match (r.budget, r.effort) {
        (Some(b), _) if b < max_tokens => b,
        (Some(_), _) => max_tokens / 2,
        (None, Some(e)) => e.budget().min(max_tokens / 2),
        (None, None) => return None,
    };
    (budget >= MIN_BUDGET).then(|| json!({"type": "enabled", "budget_tokens": budget}))
}

/// Whether the conversation is not inside a tool loop, or the assistant
/// turn that opened the loop starts with signed thinking.
fn tool_loop_starts_with_thinking(turns: &[Turn]) -> bool {
    let in_loop = turns
        .last()
        .is_some_and(|t| t.role == Role::User && t.parts.iter().any(|p| matches!(p, Part::ToolResult { .. })));
    if !in_loop {
        return true;
    }
    let assistant = turns.iter().rev().find(|t| t.role == Role::Assistant);
    assistant.and_then(|t| t.parts.first()).is_some_and(signed)
}

/// Drops reasoning Anthropic would reject (unsigned, or another family's),
/// and all of it when thinking is off.
fn keep_signed_reasoning(turns: &mut [Turn], thinking_on: bool, enc: &mut Enc<'_>) {
    let mut dropped = false;
    for turn in turns.iter_mut() {
        turn.parts.retain(|p| {
            let keep = !matches!(p, Part::Reasoning { .. }) || thinking_on && signed(p);
            dropped |= !keep;
            keep
        });
    }
    if dropped {
        enc.drop("reasoning");
    }
}

/// Cache breakpoints: at most four are kept (the last ones, which cover the
/// longest prefix); a request from a format without them gets them at the
/// end of the system prompt, the last tool and the last two user turns,
/// when the profile asks.
fn breakpoints(req: &mut Request, enc: &mut Enc<'_>) {
    let mut marks: Vec<&mut Option<CacheMark>> = Vec::new();
    marks.extend(req.tools.iter_mut().map(|t| &mut t.cache));
    marks.extend(req.system.iter_mut().filter_map(Part::cache_mut));
    for turn in req.turns.iter_mut() {
        for part in turn.parts.iter_mut() {
            if let Part::ToolResult { content, cache, .. } = part {
                marks.push(cache);
                marks.extend(content.iter_mut().filter_map(Part::cache_mut));
            } else if let Some(c) = part.cache_mut() {
                marks.push(c);
            }
        }
    }
    let set: Vec<usize> = marks.iter().enumerate().filter(|(_, m)| m.is_some()).map(|(i, _)| i).collect();
    if set.len() > MAX_BREAKPOINTS {
        for &i in &set[..set.len() - MAX_BREAKPOINTS] {
            *marks[i] = None;
        }
        enc.drop("cache[5..]");
    }
    if !set.is_empty()
        || !enc.profile.cache_breakpoints
        || req.source == Some(crate::protocol::translate::ir::Format::Messages)
    {
        return;
    }
    if let Some(t) = req.tools.last_mut() {
        t.cache = Some(CacheMark { ttl: None });
    }
    if let Some(c) = req.system.iter_mut().rev().find_map(Part::cache_mut) {
        *c = Some(CacheMark { ttl: None });
    }
    for turn in req.turns.iter_mut().rev().filter(|t| t.role == Role::User).take(2) {
        if let Some(c) = turn.parts.iter_mut().rev().find_map(Part::cache_mut) {
            *c = Some(CacheMark { ttl: None });
        }
    }
}

fn cache_control(c: &Option<CacheMark>) -> Option<Value> {
    c.as_ref().map(|c| match &c.ttl {
        Some(ttl) => json!({"type": "ephemeral", "ttl": ttl}),
        None => json!({"type": "ephemeral"}),
    })
}

fn system(parts: &[Part]) -> Option<Value> {
    let texts: Vec<(&str, &Option<CacheMark>)> = parts
        .iter()
        .filter_map(|p| match p {
            Part::Text { text, cache } if !text.trim().is_empty() => Some((text.as_str(), cache)),
            _ => None,
        })
        .collect();
    if texts.is_empty() {
        return None;
    }
    if texts.iter().all(|(_, c)| c.is_none()) {
        return Some(json!(joined(texts.iter().map(|(t, _)| *t), "\n\n")));
    }
    Some(Value::Array(
        texts
            .iter()
            .map(|(t, c)| {
                let mut b = json!({"type": "text", "text": t});
                if let Some(cc) = cache_control(c) {
                    b["cache_control"] = cc;
                }
                b
            })
            .collect(),
    ))
}

fn message(turn: &Turn) -> Value {
    let role = if turn.role == Role::Assistant { "assistant" } else { "user" };
    // Tool results first: Anthropic requires them before any text.
    let (results, others): (Vec<&Part>, Vec<&Part>) =
        turn.parts.iter().partition(|p| matches!(p, Part::ToolResult { .. }));
    let content: Vec<Value> = results.into_iter().chain(others).filter_map(block).collect();
    json!({"role": role, "content": content})
}

fn block(p: &Part) -> Option<Value> {
    let (mut b, cache) = match p {
        Part::Text { text, cache } => (json!({"type": "text", "text": text}), cache),
        Part::Refusal { text } => (json!({"type": "text", "text": text}), &None),
        Part::Image { source, cache, .. } => (json!({"type": "image", "source": media(source)?}), cache),
        Part::Document { source, title, filename, cache } => {
            let mut d = json!({"type": "document", "source": media(source)?});
            if let Some(t) = title.as_ref().or(filename.as_ref()) {
                d["title"] = json!(t);
            }
            (d, cache)
        }
        Part::Reasoning { text, opaque: Some(o), redacted, .. } => {
            let b = if *redacted {
                json!({"type": "redacted_thinking", "data": o.value})
            } else {
                json!({"type": "thinking", "thinking": text, "signature": o.value})
            };
            (b, &None)
        }
        Part::ToolCall { id, name, args, .. } => {
            (json!({"type": "tool_use", "id": id, "name": name, "input": args_object(args)}), &None)
        }
        Part::ToolResult { call_id, content, is_error, cache, .. } => {
            let inner: Vec<Value> = content.iter().filter_map(block).collect();
            let all_text = content.iter().all(|p| matches!(p, Part::Text { cache: None, .. }));
            let content = if all_text {
                json!(joined(
                    content.iter().filter_map(|p| match p {
                        Part::Text { text, .. } => Some(text.as_str()),
                        _ => None,
                    }),
                    "\n"
                ))
            } else {
                Value::Array(inner)
            };
            let mut r = json!({"type": "tool_result", "tool_use_id": call_id, "content": content});
            if *is_error {
                r["is_error"] = json!(true);
            }
            (r, cache)
        }
        Part::Reasoning { opaque: None, .. } | Part::Audio { .. } => return None,
    };
    if let Some(cc) = cache_control(cache) {
        b["cache_control"] = cc;
    }
    Some(b)
}

fn media(m: &Media) -> Option<Value> {
    Some(match m {
        Media::Base64 { media_type, data } => json!({"type": "base64", "media_type": media_type, "data": data}),
        Media::Url(u) => json!({"type": "url", "url": u}),
        Media::FileId(id) => json!({"type": "file", "file_id": id}),
        Media::Text(t) => json!({"type": "text", "media_type": "text/plain", "data": t}),
    })
}

fn tools(req: &Request, enc: &mut Enc<'_>, b: &mut Map<String, Value>) {
    let tools: Vec<Value> = req.tools.iter().map(|t| tool(t, enc)).collect();
    if tools.is_empty() {
        if req.parallel_tools.is_some() {
            enc.drop("tool_choice");
        }
        return;
    }
    b.insert("tools".into(), Value::Array(tools));
    let mut choice = match &req.tool_choice {
        None => None,
        Some(ToolChoice::Auto) => Some(json!({"type": "auto"})),
        Some(ToolChoice::None) => Some(json!({"type": "none"})),
        Some(ToolChoice::Required) => Some(json!({"type": "any"})),
        Some(ToolChoice::Named(n)) => Some(json!({"type": "tool", "name": n})),
    };
    if req.parallel_tools == Some(false) {
        if enc.profile.parallel_tools {
            let c = choice.get_or_insert_with(|| json!({"type": "auto"}));
            if c["type"] != "none" {
                c["disable_parallel_tool_use"] = json!(true);
            }
        } else {
            enc.drop("parallel_tools");
        }
    }
    if let Some(c) = choice {
        b.insert("tool_choice".into(), c);
    }
}

fn tool(t: &Tool, enc: &mut Enc<'_>) -> Value {
    let mut v = match &t.kind {
        ToolKind::Function { schema: s, strict } => {
            if *strict == Some(true) {
                enc.drop("tools[].strict");
            }
            json!({"name": t.name, "input_schema": schema::object_root(s)})
        }
        ToolKind::Custom { .. } => {
            json!({"name": t.name, "input_schema": crate::protocol::translate::shape::custom_schema()})
        }
        ToolKind::Hosted { raw, .. } => return raw.clone(),
    };
    if let Some(d) = &t.description {
        v["description"] = json!(d);
    }
    if let Some(cc) = cache_control(&t.cache) {
        v["cache_control"] = cc;
    }
    v
}

/// Sampling: temperature is clamped to Anthropic's 0–1; with thinking on,
/// Anthropic requires the default temperature, no `top_k` and a `top_p` of
/// at least 0.95, so anything else is dropped.
fn sampling(req: &Request, thinking: bool, enc: &mut Enc<'_>, b: &mut Map<String, Value>) {
    if !enc.profile.sampling {
        if req.temperature.is_some() || req.top_p.is_some() || req.top_k.is_some() {
            enc.drop("sampling");
        }
    } else {
        sampling_allowed(req, thinking, enc, b);
    }
    if !req.stop.is_empty() {
        b.insert("stop_sequences".into(), json!(req.stop));
    }
}

fn sampling_allowed(req: &Request, thinking: bool, enc: &mut Enc<'_>, b: &mut Map<String, Value>) {
    if let Some(t) = req.temperature {
        if thinking && t != 1.0 {
            enc.drop("temperature");
        } else {
            b.insert("temperature".into(), json!(t.clamp(0.0, 1.0)));
        }
    }
    if let Some(p) = req.top_p {
        if thinking && p < 0.95 {
            enc.drop("top_p");
        } else {
            b.insert("top_p".into(), json!(p));
        }
    }
    if let Some(k) = req.top_k {
        if thinking {
            enc.drop("top_k");
        } else {
            b.insert("top_k".into(), json!(k));
        }
    }
}

fn rest(req: &Request, enc: &mut Enc<'_>, b: &mut Map<String, Value>) {
    if let Some(u) = &req.user {
        b.insert("metadata".into(), json!({"user_id": u}));
    }
    if req.metadata.is_some() {
        enc.drop("metadata");
    }
    match req.service_tier.as_deref() {
        None => {}
        Some("auto") => {
            b.insert("service_tier".into(), json!("auto"));
        }
        Some("default" | "standard_only") => {
            b.insert("service_tier".into(), json!("standard_only"));
        }
        Some(_) => enc.drop("service_tier"),
    }
    if req.seed.is_some() {
        enc.drop("seed");
    }
    if req.presence_penalty.is_some() || req.frequency_penalty.is_some() {
        enc.drop("penalties");
    }
    if req.logprobs.is_some() {
        enc.drop("logprobs");
    }
    enc.drop_openai_only(req);
    enc.drop_extras(req);
    if req.stream {
        b.insert("stream".into(), json!(true));
    }
}
