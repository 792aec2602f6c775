//! Intermediate form → Gemini `generateContent` request.
//!
//! The body carries neither the model nor the streaming flag: the caller
//! picks `models/{model}:generateContent` or `:streamGenerateContent?alt=sse`
//! from [`Request::stream`](crate::protocol::translate::message::Request).
//! Tool-call ids are never sent (Gemini pairs results with calls by order
//! and name, and ids made up elsewhere mean nothing to it); results carry the
//! called function's name, which Gemini requires.

use serde_json::{json, Map, Value};

use super::Signed;
use crate::protocol::translate::ir::Family;
use crate::protocol::translate::message::{
    Effort, Media, OutputFormat, Part, Request, Role, Tool, ToolChoice, ToolKind, Turn,
};
use crate::protocol::translate::profile::SchemaDialect;
use crate::protocol::translate::schema;
use crate::protocol::translate::shape::Enc;
use crate::protocol::translate::wire::{args_object, mime_from_url};

/// Google's documented value for a function call in history that has no
/// thought signature (Gemini 3 rejects such calls otherwise).
const SKIP_SIGNATURE: &str = "skip_thought_signature_validator";

/// Gemini takes at most this many stop sequences.
const MAX_STOP: usize = 5;

pub(crate) fn encode(req: &Request, enc: &mut Enc<'_>) -> Value {
    let mut b = Map::new();
    let system: Vec<Value> = req
        .system
        .iter()
        .filter_map(|p| match p {
            Part::Text { text, .. } => Some(json!({"text": text})),
            _ => None,
        })
        .collect();
    if !system.is_empty() {
        b.insert("systemInstruction".into(), json!({"parts": system}));
    }
    let has_cache = req.system.iter().chain(req.turns.iter().flat_map(|t| &t.parts)).any(|p| {
        matches!(
            p,
            Part::Text { cache: Some(_), .. }
                | Part::Image { cache: Some(_), .. }
                | Part::Document { cache: Some(_), .. }
                | Part::ToolResult { cache: Some(_), .. }
        )
    }) || req.tools.iter().any(|t| t.cache.is_some());
    if has_cache {
        enc.drop("cache");
    }
    if req.turns.iter().flat_map(|t| &t.parts).any(|p| matches!(p, Part::ToolCall { .. })) {
        enc.drop("tool_call.id");
    }
    let contents: Vec<Value> = req.turns.iter().map(|t| content(t, enc)).collect();
    b.insert("contents".into(), Value::Array(contents));
    tools(req, enc, &mut b);
    b.insert("generationConfig".into(), Value::Object(config(req, enc)));
    rest(req, enc, &mut b);
    Value::Object(b)
}

fn content(turn: &Turn, enc: &mut Enc<'_>) -> Value {
    let role = if turn.role == Role::Assistant { "model" } else { "user" };
    let mut signed = Signed::default();
    let mut media: Vec<Value> = Vec::new();
    let mut first_call = true;
    for part in &turn.parts {
        let v = match part {
            Part::Reasoning { text, opaque, .. } => {
                let sig = opaque.as_ref().filter(|o| o.origin == Family::Gemini).map(|o| o.value.clone());
                match (sig, text.is_empty()) {
                    (Some(sig), true) => {
                        signed.pending = Some(sig);
                        continue;
                    }
                    (Some(sig), false) => json!({"text": text, "thought": true, "thoughtSignature": sig}),
                    (None, _) => {
                        enc.drop("reasoning");
                        continue;
                    }
                }
            }
            Part::ToolCall { name, args, .. } => {
                if signed.pending.is_none() && first_call && enc.profile.thought_signature_sentinel {
                    signed.pending = Some(SKIP_SIGNATURE.to_owned());
                }
                first_call = false;
                json!({"functionCall": {"name": name, "args": args_object(args)}})
            }
            Part::ToolResult { name, content, is_error, .. } => {
                signed.parts.push(function_response(name.as_deref().unwrap_or(""), content, *is_error));
                media.extend(content.iter().filter(|p| !matches!(p, Part::Text { .. })).filter_map(data_part));
                continue;
            }
            other => match data_part(other) {
                Some(v) => v,
                None => continue,
            },
        };
        signed.push(v);
    }
    let mut parts = signed.finish();
    // Media a tool returned go after every function response of the turn,
    // so the responses stay together and in call order.
    let responses = parts.iter().take_while(|p| p.get("functionResponse").is_some()).count();
    parts.splice(responses..responses, media);
    json!({"role": role, "parts": parts})
}

/// `response` must be an object: a result that is a JSON object is sent as
/// it is, other text as `{content: …}`, an error as `{error: …}`.
fn function_response(name: &str, content: &[Part], is_error: bool) -> Value {
    let texts: Vec<&str> = content
        .iter()
        .filter_map(|p| match p {
            Part::Text { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let text = texts.join("\n");
    let response = if is_error {
        json!({"error": text})
    } else {
        match serde_json::from_str::<Value>(&text) {
            Ok(v @ Value::Object(_)) => v,
            _ => json!({"content": text}),
        }
    };
    json!({"functionResponse": {"name": name, "response": response}})
}

fn data_part(p: &Part) -> Option<Value> {
    Some(match p {
        Part::Text { text, .. } | Part::Refusal { text } => json!({"text": text}),
        Part::Image { source, .. } | Part::Document { source, .. } => match source {
            Media::Base64 { media_type, data } => json!({"inlineData": {"mimeType": media_type, "data": data}}),
            Media::Url(u) | Media::FileId(u) => {
                let mut f = json!({"fileUri": u});
                if let Some(m) = mime_from_url(u) {
                    f["mimeType"] = json!(m);
                }
                json!({"fileData": f})
            }
            Media::Text(t) => json!({"text": t}),
        },
        Part::Audio { format, data } => json!({"inlineData": {"mimeType": format!("audio/{format}"), "data": data}}),
        Part::Reasoning { .. } | Part::ToolCall { .. } | Part::ToolResult { .. } => return None,
    })
}

fn tools(req: &Request, enc: &mut Enc<'_>, b: &mut Map<String, Value>) {
    let mut declarations = Vec::new();
    let mut hosted = Vec::new();
    for t in &req.tools {
        match &t.kind {
            ToolKind::Hosted { raw, .. } => hosted.push(raw.clone()),
            ToolKind::Function { schema: s, strict } => {
                if strict.is_some() {
                    enc.drop("tools[].strict");
                }
                declarations.push(declaration(t, s, enc));
            }
            ToolKind::Custom { .. } => {
                declarations.push(declaration(t, &crate::protocol::translate::shape::custom_schema(), enc))
            }
        }
    }
    if req.parallel_tools.is_some() {
        enc.drop("parallel_tools");
    }
    if declarations.is_empty() && hosted.is_empty() {
        return;
    }
    let mut list = Vec::new();
    if !declarations.is_empty() {
        list.push(json!({"functionDeclarations": declarations}));
    }
    list.extend(hosted);
    b.insert("tools".into(), Value::Array(list));
    if let Some(choice) = &req.tool_choice {
        let cfg = match choice {
            ToolChoice::Auto => json!({"mode": "AUTO"}),
            ToolChoice::None => json!({"mode": "NONE"}),
            ToolChoice::Required => json!({"mode": "ANY"}),
            ToolChoice::Named(n) => json!({"mode": "ANY", "allowedFunctionNames": [n]}),
        };
        b.insert("toolConfig".into(), json!({"functionCallingConfig": cfg}));
    }
}

fn declaration(t: &Tool, s: &Value, enc: &Enc<'_>) -> Value {
    let mut d = json!({"name": t.name});
    if let Some(desc) = &t.description {
        d["description"] = json!(desc);
    }
    let root = schema::object_root(s);
    // Gemini rejects an object schema without properties: a tool without
    // arguments is declared without parameters.
    if schema::is_empty_object(&root) {
        return d;
    }
    match enc.profile.schema_dialect {
        SchemaDialect::JsonSchema if !schema::fits_gemini(&root) => d["parametersJsonSchema"] = root,
        _ => d["parameters"] = schema::gemini(&root),
    }
    d
}

fn config(req: &Request, enc: &mut Enc<'_>) -> Map<String, Value> {
    let mut c = Map::new();
    // Each parameter the request sets, in this order.
    let mut put = |k: &str, v: Option<Value>| {
        if let Some(v) = v {
            c.insert(k.into(), v);
        }
    };
    put("temperature", req.temperature.map(Value::from));
    put("topP", req.top_p.map(Value::from));
    put("topK", req.top_k.map(Value::from));
    put("candidateCount", req.n.map(Value::from));
    put("maxOutputTokens", req.max_output.map(Value::from));
    put("stopSequences", (!req.stop.is_empty()).then(|| json!(req.stop.iter().take(MAX_STOP).collect::<Vec<_>>())));
    put("seed", req.seed.map(Value::from));
    put("presencePenalty", req.presence_penalty.map(Value::from));
    put("frequencyPenalty", req.frequency_penalty.map(Value::from));
    if let Some(l) = req.logprobs {
        put("responseLogprobs", Some(json!(true)));
        put("logprobs", l.top.map(Value::from));
    }
    match &req.output_format {
        Some(OutputFormat::JsonObject) => put("responseMimeType", Some(json!("application/json"))),
        Some(OutputFormat::JsonSchema { schema: s, .. }) => {
            put("responseMimeType", Some(json!("application/json")));
            match enc.profile.schema_dialect {
                SchemaDialect::JsonSchema => put("responseJsonSchema", Some(s.clone())),
                SchemaDialect::OpenApi => put("responseSchema", Some(schema::gemini(s))),
            }
        }
        None => {}
    }
    if let Some(r) = &req.reasoning {
        let cfg = if r.disabled {
            json!({"thinkingBudget": 0})
        } else {
            match (r.budget, r.effort) {
                (Some(b), _) => json!({"thinkingBudget": b, "includeThoughts": true}),
                (None, Some(e)) => json!({"thinkingBudget": budget(e), "includeThoughts": true}),
                (None, None) => json!({"includeThoughts": true}),
            }
        };
        put("thinkingConfig", Some(cfg));
    }
    if req.stop.len() > MAX_STOP {
        enc.drop("stop[5..]");
    }
    if req.source == Some(crate::protocol::translate::ir::Format::Gemini) {
        for (k, v) in &req.extras {
            if let Some(key) = k.strip_prefix("generationConfig.") {
                c.entry(key.to_owned()).or_insert_with(|| v.clone());
            }
        }
    }
    c
}

/// A thinking budget for an effort (the same table as Anthropic's; Gemini
/// 3 also reads `thinkingBudget`).
fn budget(e: Effort) -> u32 {
    e.budget()
}

fn rest(req: &Request, enc: &mut Enc<'_>, b: &mut Map<String, Value>) {
    if req.user.is_some() {
        enc.drop("user");
    }
    if req.metadata.is_some() {
        enc.drop("metadata");
    }
    if req.service_tier.is_some() {
        enc.drop("service_tier");
    }
    enc.drop_openai_only(req);
    let source_gemini = req.source == Some(crate::protocol::translate::ir::Format::Gemini);
    if !source_gemini {
        enc.drop_extras(req);
    }
    if source_gemini {
        for (k, v) in req.extras.iter().filter(|(k, _)| !k.starts_with("generationConfig.")) {
            b.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
}
