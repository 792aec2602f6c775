//! Gemini `generateContent` request → intermediate form.
//!
//! The model and the streaming flag are in the URL, not the body: the
//! caller sets [`Request::model`] and [`Request::stream`]. Google accepts
//! both camelCase and snake_case field names; both are read.

use std::collections::HashSet;

use serde_json::Value;

use crate::protocol::translate::dropped::{Drops, Stage};
use crate::protocol::translate::envelope;
use crate::protocol::translate::error::Untranslatable;
use crate::protocol::translate::ir::{Family, Format};
use crate::protocol::translate::message::{
    CallKind, Effort, Logprobs, Media, OutputFormat, Part, Reasoning, Request, Role, Tool, ToolChoice, ToolKind, Turn,
};
use crate::protocol::translate::wire::*;

const MAPPED: &[&str] =
    &["model", "contents", "systemInstruction", "tools", "toolConfig", "generationConfig", "cachedContent"];

/// `generationConfig` fields this decoder maps.
const CONFIG: &[&str] = &[
    "temperature",
    "topP",
    "topK",
    "candidateCount",
    "maxOutputTokens",
    "stopSequences",
    "seed",
    "presencePenalty",
    "frequencyPenalty",
    "responseMimeType",
    "responseSchema",
    "responseJsonSchema",
    "responseLogprobs",
    "logprobs",
    "thinkingConfig",
];

/// `camelCase` → `snake_case`.
fn snake(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 4);
    for c in camel.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// `snake_case` → `camelCase`.
fn camel(snake: &str) -> String {
    let mut out = String::with_capacity(snake.len());
    let mut upper = false;
    for c in snake.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.push(c.to_ascii_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// A field by its camelCase name, or its snake_case one.
pub(crate) fn gf<'a>(m: &'a Obj, name: &str) -> Option<&'a Value> {
    get(m, name).or_else(|| get(m, &snake(name)))
}

pub(crate) fn decode(body: &[u8]) -> Result<Request, Untranslatable> {
    let mut m = parse_body(body)?;
    // `:countTokens` may wrap a whole request.
    if let Some(Value::Object(inner)) = gf(&m, "generateContentRequest") {
        m = inner.clone();
    }
    let mut req = Request { source: Some(Format::Gemini), ..Request::default() };
    for (k, v) in &m {
        let key = camel(k);
        if MAPPED.contains(&key.as_str()) {
            continue;
        }
        req.keep_unmapped(&key, k, v);
    }
    if gf(&m, "cachedContent").is_some() {
        return Err(bad(
            "cachedContent",
            "the request uses content cached at Google, which other providers cannot see",
        ));
    }
    req.model = opt_str(&m, "model", "")?.unwrap_or_default().trim_start_matches("models/").to_owned();
    if let Some(si) = gf(&m, "systemInstruction") {
        let si = as_obj(si, "systemInstruction")?;
        for p in gf(si, "parts").map(|p| as_arr(p, "systemInstruction.parts")).transpose()?.into_iter().flatten() {
            if let Some(t) = p.get("text").and_then(Value::as_str) {
                req.system.push(Part::text(t));
            }
        }
    }
    contents(&m, &mut req)?;
    tools(&m, &mut req)?;
    if let Some(c) = gf(&m, "generationConfig") {
        config(as_obj(c, "generationConfig")?, &mut req)?;
    }
    Ok(req)
}

fn contents(m: &Obj, req: &mut Request) -> Result<(), Untranslatable> {
    let list = as_arr(gf(m, "contents").ok_or_else(|| bad("contents", "required"))?, "contents")?;
    // Calls of the previous model turn not yet answered: (id, name).
    let mut open: Vec<(String, String)> = Vec::new();
    for (i, c) in list.iter().enumerate() {
        let path = idx("contents", i);
        let c = as_obj(c, &path)?;
        let role = match opt_str(c, "role", &path)? {
            Some("model") => Role::Assistant,
            _ => Role::User,
        };
        if role == Role::Assistant {
            open.clear();
        }
        let mut parts = Vec::new();
        let list = gf(c, "parts").map(|p| as_arr(p, &at(&path, "parts"))).transpose()?;
        let before = req.unmapped_count();
        for (j, p) in list.into_iter().flatten().enumerate() {
            let ppath = idx(&at(&path, "parts"), j);
            part(as_obj(p, &ppath)?, &ppath, (i, j), &mut open, &mut parts, req)?;
        }
        req.refuse_emptied(list.map_or(0, Vec::len), parts.len(), before, &path)?;
        req.turns.push(Turn::new(role, parts));
    }
    Ok(())
}

fn part(
    p: &Obj,
    path: &str,
    (i, j): (usize, usize),
    open: &mut Vec<(String, String)>,
    parts: &mut Vec<Part>,
    req: &mut Request,
) -> Result<(), Untranslatable> {
    let signature = gf(p, "thoughtSignature").and_then(Value::as_str).map(|s| envelope::read_slot(Family::Gemini, s));
    let thought = get(p, "thought").and_then(Value::as_bool) == Some(true);
    if let Some(text) = get(p, "text").and_then(Value::as_str) {
        if thought {
            let slot = signature.unwrap_or(envelope::Slot { opaque: None, text: None, id: None, redacted: false });
            parts.push(Part::Reasoning {
                text: slot.text.unwrap_or_else(|| text.to_owned()),
                opaque: slot.opaque,
                redacted: slot.redacted,
                id: slot.id,
            });
            return Ok(());
        }
        push_signature(signature, parts);
        parts.push(Part::text(text));
        return Ok(());
    }
    if gf(p, "videoMetadata").is_some() {
        return Err(bad(at(path, "videoMetadata"), "video clips translate to no other format"));
    }
    let signed = signature.is_some();
    push_signature(signature, parts);
    if let Some(d) = gf(p, "inlineData") {
        let d = as_obj(d, path)?;
        let mime = gf(d, "mimeType").and_then(Value::as_str).unwrap_or("application/octet-stream").to_owned();
        let data = get(d, "data").and_then(Value::as_str).unwrap_or("").to_owned();
        parts.push(media_part(Media::Base64 { media_type: mime.clone(), data }, &mime));
    } else if let Some(f) = gf(p, "fileData") {
        let f = as_obj(f, path)?;
        let mime = gf(f, "mimeType").and_then(Value::as_str).unwrap_or("").to_owned();
        let uri = gf(f, "fileUri").and_then(Value::as_str).unwrap_or("").to_owned();
        parts.push(media_part(Media::Url(uri), &mime));
    } else if let Some(fc) = gf(p, "functionCall") {
        let fc = as_obj(fc, path)?;
        let name = opt_str(fc, "name", path)?.unwrap_or_default().to_owned();
        let id = match opt_str(fc, "id", path)? {
            Some(id) if !id.is_empty() => id.to_owned(),
            _ => format!("call_g{i}_{j}"),
        };
        open.push((id.clone(), name.clone()));
        let args = get(fc, "args").map(args_text).unwrap_or_else(|| "{}".to_owned());
        parts.push(Part::ToolCall { id, name, args, kind: CallKind::Function });
    } else if let Some(fr) = gf(p, "functionResponse") {
        parts.push(function_response(as_obj(fr, path)?, path, open)?);
    } else if gf(p, "executableCode").is_some() || gf(p, "codeExecutionResult").is_some() {
        req.drops.note(Stage::Decode, Format::Gemini, "contents[].parts[].executableCode");
    } else if !signed {
        // A part of a kind new to the gateway: left out and listed.
        let kinds: Vec<&str> = p.keys().map(String::as_str).filter(|k| *k != "thoughtSignature").collect();
        req.drops.note_unmapped(path, format!("a part of kind `{}`, left out", kinds.join(", ")));
    }
    Ok(())
}

/// A thought signature on a part that is not a thought travels as a
/// reasoning part of its own, just before the part it was on; the Gemini
/// encoder puts it back there.
fn push_signature(signature: Option<envelope::Slot>, parts: &mut Vec<Part>) {
    if let Some(slot) = signature {
        parts.push(Part::Reasoning {
            text: slot.text.unwrap_or_default(),
            opaque: slot.opaque,
            redacted: slot.redacted,
            id: slot.id,
        });
    }
}

fn media_part(source: Media, mime: &str) -> Part {
    if mime.starts_with("image/") {
        Part::Image { source, detail: None, cache: None }
    } else if let (Some(format), Media::Base64 { data, .. }) = (mime.strip_prefix("audio/"), &source) {
        Part::Audio { format: format.trim_start_matches("x-").to_owned(), data: data.clone() }
    } else {
        Part::Document { source, title: None, filename: None, cache: None }
    }
}

/// A function response, paired with its call: by id when it has one, else
/// the first open call of the same name, else the first open call.
fn function_response(fr: &Obj, path: &str, open: &mut Vec<(String, String)>) -> Result<Part, Untranslatable> {
    let name = opt_str(fr, "name", path)?.unwrap_or_default().to_owned();
    let given = opt_str(fr, "id", path)?.filter(|id| !id.is_empty());
    let pos = match given {
        Some(id) => open.iter().position(|(i, _)| i == id),
        None => open.iter().position(|(_, n)| *n == name).or(if open.is_empty() { None } else { Some(0) }),
    };
    let call_id = match pos {
        Some(p) => open.remove(p).0,
        None => given.map_or_else(|| name.clone(), str::to_owned),
    };
    let response = get(fr, "response").cloned().unwrap_or(Value::Null);
    let (text, is_error) = response_text(&response);
    let mut content = vec![Part::text(text)];
    for p in get(fr, "parts").and_then(Value::as_array).into_iter().flatten() {
        if let Some(d) = p.get("inlineData").or_else(|| p.get("inline_data")) {
            let mime = d.get("mimeType").or_else(|| d.get("mime_type")).and_then(Value::as_str).unwrap_or("");
            let data = d.get("data").and_then(Value::as_str).unwrap_or("").to_owned();
            content.push(media_part(Media::Base64 { media_type: mime.to_owned(), data }, mime));
        }
    }
    Ok(Part::ToolResult { call_id, name: Some(name), content, is_error, kind: CallKind::Function, cache: None })
}

/// A function response's text: the string of a lone `output`, `content` or
/// `result` (Gemini CLI sends `{output: …}`), else the JSON; `error` marks a
/// failed call.
fn response_text(response: &Value) -> (String, bool) {
    if let Some(m) = response.as_object() {
        if m.len() == 1 {
            for key in ["output", "content", "result", "error"] {
                if let Some(v) = m.get(key) {
                    let text = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
                    return (text, key == "error");
                }
            }
        }
        if let Some(e) = m.get("error") {
            return (e.as_str().map_or_else(|| e.to_string(), str::to_owned), true);
        }
    }
    (response.as_str().map_or_else(|| response.to_string(), str::to_owned), false)
}

fn tools(m: &Obj, req: &mut Request) -> Result<(), Untranslatable> {
    for (i, t) in gf(m, "tools").map(|v| as_arr(v, "tools")).transpose()?.into_iter().flatten().enumerate() {
        let path = idx("tools", i);
        let t = as_obj(t, &path)?;
        for (k, v) in t {
            if camel(k) != "functionDeclarations" {
                let mut raw = Obj::new();
                raw.insert(k.clone(), v.clone());
                req.tools.push(Tool {
                    name: String::new(),
                    description: None,
                    kind: ToolKind::Hosted { origin: Format::Gemini, raw: Value::Object(raw) },
                    cache: None,
                });
                continue;
            }
            for (j, f) in as_arr(v, &at(&path, "functionDeclarations"))?.iter().enumerate() {
                let fpath = idx(&at(&path, "functionDeclarations"), j);
                let f = as_obj(f, &fpath)?;
                let schema = gf(f, "parametersJsonSchema").or(gf(f, "parameters")).cloned().unwrap_or(Value::Null);
                req.tools.push(Tool {
                    name: opt_str(f, "name", &fpath)?.unwrap_or_default().to_owned(),
                    description: opt_str(f, "description", &fpath)?.map(str::to_owned),
                    kind: ToolKind::Function { schema: lower_types(&schema), strict: None },
                    cache: None,
                });
            }
        }
    }
    if let Some(cfg) = gf(m, "toolConfig").and_then(|c| c.as_object()).and_then(|c| gf(c, "functionCallingConfig")) {
        let cfg = as_obj(cfg, "toolConfig.functionCallingConfig")?;
        let names: Vec<&str> = gf(cfg, "allowedFunctionNames")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        req.tool_choice = match opt_str(cfg, "mode", "toolConfig.functionCallingConfig")? {
            Some("NONE") => Some(ToolChoice::None),
            Some("ANY") if names.len() == 1 => Some(ToolChoice::Named(names[0].to_owned())),
            Some("ANY") => Some(ToolChoice::Required),
            Some(_) => Some(ToolChoice::Auto),
            None => None,
        };
        if names.len() > 1 {
            req.drops.note(Stage::Decode, Format::Gemini, "toolConfig.functionCallingConfig.allowedFunctionNames");
        }
    }
    Ok(())
}

/// Gemini's OpenAPI schemas spell types in capitals (`OBJECT`); JSON Schema
/// wants them lower-case.
fn lower_types(schema: &Value) -> Value {
    match schema {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| {
                    let v = match (k.as_str(), v) {
                        ("type", Value::String(t)) => Value::String(t.to_ascii_lowercase()),
                        ("properties", Value::Object(p)) => {
                            Value::Object(p.iter().map(|(n, s)| (n.clone(), lower_types(s))).collect())
                        }
                        (_, v @ (Value::Object(_) | Value::Array(_))) => lower_types(v),
                        (_, v) => v.clone(),
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(lower_types).collect()),
        v => v.clone(),
    }
}

fn config(c: &Obj, req: &mut Request) -> Result<(), Untranslatable> {
    let p = "generationConfig";
    let known: HashSet<&str> = CONFIG.iter().copied().collect();
    for (k, v) in c {
        let key = camel(k);
        if known.contains(key.as_str()) {
            continue;
        }
        let field = format!("generationConfig.{key}");
        if key == "responseModalities" && v.as_array().is_some_and(|a| a.iter().any(|m| m != "TEXT")) {
            return Err(bad(field, "only text output is translated"));
        }
        req.keep_unmapped(&field, &field, v);
    }
    let f = |name: &str| gf(c, name);
    let num = |name: &str| f(name).and_then(Value::as_f64);
    req.temperature = num("temperature");
    req.top_p = num("topP");
    req.top_k = f("topK").and_then(Value::as_f64).map(|k| k as u32);
    req.n = f("candidateCount").and_then(Value::as_u64).and_then(|n| u32::try_from(n).ok());
    req.max_output = f("maxOutputTokens").and_then(Value::as_u64).and_then(|n| u32::try_from(n).ok());
    req.stop = string_or_list(f("stopSequences"), "generationConfig.stopSequences")?;
    req.seed = f("seed").and_then(Value::as_i64);
    req.presence_penalty = num("presencePenalty");
    req.frequency_penalty = num("frequencyPenalty");
    if f("responseLogprobs").and_then(Value::as_bool) == Some(true) {
        req.logprobs =
            Some(Logprobs { top: f("logprobs").and_then(Value::as_u64).and_then(|n| u32::try_from(n).ok()) });
    }
    if f("responseMimeType").and_then(Value::as_str) == Some("application/json") {
        req.output_format = Some(match f("responseJsonSchema").or(f("responseSchema")) {
            Some(s) => OutputFormat::JsonSchema { name: None, schema: lower_types(s), strict: None, description: None },
            None => OutputFormat::JsonObject,
        });
    }
    if let Some(t) = f("thinkingConfig") {
        req.reasoning = thinking(as_obj(t, &at(p, "thinkingConfig"))?, &mut req.drops)?;
    }
    Ok(())
}

fn thinking(t: &Obj, drops: &mut Drops) -> Result<Option<Reasoning>, Untranslatable> {
    let mut r = Reasoning::default();
    if let Some(level) = gf(t, "thinkingLevel").and_then(Value::as_str) {
        r.effort = Effort::parse(&level.to_ascii_lowercase());
        if r.effort.is_none() {
            let what = format!("thinking level `{level}` is new; the provider's default is used");
            drops.note_unmapped("generationConfig.thinkingConfig.thinkingLevel", what);
        }
    }
    match gf(t, "thinkingBudget").and_then(Value::as_i64) {
        Some(0) => r.disabled = true,
        Some(b) if b > 0 => r.budget = u32::try_from(b).ok(),
        // -1: dynamic thinking, the model decides.
        Some(_) => r.effort = r.effort.or(Some(Effort::Medium)),
        None => {}
    }
    if gf(t, "includeThoughts").and_then(Value::as_bool) == Some(true)
        && r.effort.is_none()
        && r.budget.is_none()
        && !r.disabled
    {
        r.effort = Some(Effort::Medium);
    }
    Ok((r != Reasoning::default()).then_some(r))
}
