//! Chat Completions request → intermediate form.

use serde_json::Value;

use crate::protocol::translate::dropped::{Drops, Stage};
use crate::protocol::translate::error::Untranslatable;
use crate::protocol::translate::ir::Format;
use crate::protocol::translate::message::{
    new_role, CallKind, Effort, Logprobs, Media, OutputFormat, Part, Reasoning, Request, Role, Tool, ToolChoice,
    ToolKind, Turn,
};
use crate::protocol::translate::openai;
use crate::protocol::translate::wire::*;

/// Top-level fields this decoder maps.
const MAPPED: &[&str] = &[
    "model",
    "messages",
    "tools",
    "functions",
    "tool_choice",
    "function_call",
    "parallel_tool_calls",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "top_k",
    "stop",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "n",
    "logprobs",
    "top_logprobs",
    "response_format",
    "reasoning_effort",
    "reasoning",
    "thinking",
    "verbosity",
    "user",
    "safety_identifier",
    "metadata",
    "stream",
    "service_tier",
    "prompt_cache_key",
    "modalities",
    "audio",
];

pub(crate) fn decode(body: &[u8]) -> Result<Request, Untranslatable> {
    let m = parse_body(body)?;
    let mut req = Request::unmapped(Format::Chat, &m, MAPPED);
    req.model = opt_str(&m, "model", "")?.unwrap_or_default().to_owned();
    refuse_audio_output(&m)?;
    messages(&m, &mut req)?;
    tools(&m, &mut req)?;
    req.parallel_tools = opt_bool(&m, "parallel_tool_calls", "")?;
    req.max_output = opt_u32(&m, "max_completion_tokens", "")?.or(opt_u32(&m, "max_tokens", "")?);
    req.temperature = opt_f64(&m, "temperature", "")?;
    req.top_p = opt_f64(&m, "top_p", "")?;
    req.top_k = opt_u32(&m, "top_k", "")?;
    req.stop = string_or_list(m.get("stop"), "stop")?;
    req.seed = opt_i64(&m, "seed", "")?;
    req.presence_penalty = opt_f64(&m, "presence_penalty", "")?;
    req.frequency_penalty = opt_f64(&m, "frequency_penalty", "")?;
    req.n = opt_u32(&m, "n", "")?;
    if opt_bool(&m, "logprobs", "")? == Some(true) {
        req.logprobs = Some(Logprobs { top: opt_u32(&m, "top_logprobs", "")? });
    }
    req.output_format = response_format(get(&m, "response_format"))?;
    req.reasoning = reasoning(&m, &mut req.drops)?;
    req.verbosity = opt_str(&m, "verbosity", "")?.map(str::to_owned);
    req.user = opt_str(&m, "safety_identifier", "")?.or(opt_str(&m, "user", "")?).map(str::to_owned);
    req.metadata = get(&m, "metadata").and_then(Value::as_object).cloned();
    req.stream = opt_bool(&m, "stream", "")?.unwrap_or(false);
    req.service_tier = opt_str(&m, "service_tier", "")?.map(str::to_owned);
    req.prompt_cache_key = opt_str(&m, "prompt_cache_key", "")?.map(str::to_owned);
    Ok(req)
}

fn refuse_audio_output(m: &Obj) -> Result<(), Untranslatable> {
    let wants_audio = get(m, "modalities").and_then(Value::as_array).is_some_and(|a| a.iter().any(|x| x != "text"));
    if wants_audio || get(m, "audio").is_some() {
        return Err(bad("modalities", "only text output is translated"));
    }
    Ok(())
}

fn messages(m: &Obj, req: &mut Request) -> Result<(), Untranslatable> {
    let list = as_arr(get(m, "messages").ok_or_else(|| bad("messages", "required"))?, "messages")?;
    let mut leading = true;
    for (i, msg) in list.iter().enumerate() {
        let path = idx("messages", i);
        let msg = as_obj(msg, &path)?;
        if msg.contains_key("name") {
            req.drops.note(Stage::Decode, Format::Chat, "messages[].name");
        }
        let role = opt_str(msg, "role", &path)?.ok_or_else(|| bad(at(&path, "role"), "required"))?;
        match role {
            "system" | "developer" => {
                let parts = content(get(msg, "content"), &at(&path, "content"), req)?;
                if leading {
                    req.system.extend(parts);
                } else {
                    req.turns.push(Turn::new(Role::System, parts));
                }
                continue;
            }
            "user" => {
                let parts = content(get(msg, "content"), &at(&path, "content"), req)?;
                req.turns.push(Turn::new(Role::User, parts));
            }
            "assistant" => {
                let turn = assistant(msg, &path, req)?;
                req.turns.push(turn);
            }
            "tool" | "function" => {
                let call_id = match role {
                    "tool" => opt_str(msg, "tool_call_id", &path)?,
                    _ => opt_str(msg, "name", &path)?,
                }
                .ok_or_else(|| bad(at(&path, "tool_call_id"), "required"))?
                .to_owned();
                let name = (role == "function").then(|| call_id.clone());
                let content = content(get(msg, "content"), &at(&path, "content"), req)?;
                let result =
                    Part::ToolResult { call_id, name, content, is_error: false, kind: CallKind::Function, cache: None };
                req.turns.push(Turn::new(Role::User, vec![result]));
            }
            other => return Err(new_role(&path, Some(other))),
        }
        leading = false;
    }
    Ok(())
}

fn assistant(msg: &Obj, path: &str, req: &mut Request) -> Result<Turn, Untranslatable> {
    let mut parts = Vec::new();
    let reasoning = opt_str(msg, "reasoning_content", path)?.or(opt_str(msg, "reasoning", path)?);
    if let Some(text) = reasoning.filter(|t| !t.is_empty()) {
        parts.push(Part::Reasoning { text: text.to_owned(), opaque: None, redacted: false, id: None });
    }
    parts.extend(content(get(msg, "content"), &at(path, "content"), req)?);
    if let Some(r) = opt_str(msg, "refusal", path)? {
        parts.push(Part::Refusal { text: r.to_owned() });
    }
    if let Some(calls) = get(msg, "tool_calls") {
        let calls_path = at(path, "tool_calls");
        for (i, call) in as_arr(calls, &calls_path)?.iter().enumerate() {
            parts.push(tool_call(as_obj(call, &idx(&calls_path, i))?, &idx(&calls_path, i))?);
        }
    }
    if let Some(fc) = get(msg, "function_call") {
        let fc = as_obj(fc, &at(path, "function_call"))?;
        let name = opt_str(fc, "name", path)?.unwrap_or_default().to_owned();
        let args = opt_str(fc, "arguments", path)?.unwrap_or_default().to_owned();
        parts.push(Part::ToolCall { id: name.clone(), name, args, kind: CallKind::Function });
    }
    Ok(Turn::new(Role::Assistant, parts))
}

fn tool_call(call: &Obj, path: &str) -> Result<Part, Untranslatable> {
    let id = opt_str(call, "id", path)?.unwrap_or_default().to_owned();
    if opt_str(call, "type", path)? == Some("custom") {
        let c = as_obj(get(call, "custom").ok_or_else(|| bad(at(path, "custom"), "required"))?, path)?;
        let name = opt_str(c, "name", path)?.unwrap_or_default().to_owned();
        let input = opt_str(c, "input", path)?.unwrap_or_default().to_owned();
        return Ok(Part::ToolCall { id, name, args: input, kind: CallKind::Custom });
    }
    let f = as_obj(get(call, "function").ok_or_else(|| bad(at(path, "function"), "required"))?, path)?;
    let name = opt_str(f, "name", path)?.unwrap_or_default().to_owned();
    let args = match get(f, "arguments") {
        Some(Value::String(s)) => s.clone(),
        Some(v) => args_text(v),
        None => String::new(),
    };
    Ok(Part::ToolCall { id, name, args, kind: CallKind::Function })
}

/// `content` as a string or a list of parts.
pub(crate) fn content(v: Option<&Value>, path: &str, req: &mut Request) -> Result<Vec<Part>, Untranslatable> {
    openai::content(v, path, req, content_part)
}

fn content_part(p: &Obj, path: &str, req: &mut Request) -> Result<Option<Part>, Untranslatable> {
    let mut part = content_part_alone(p, path, req)?;
    // Clients that reach Anthropic models through Chat (OpenRouter's
    // convention) mark cache breakpoints on parts: a Messages target keeps them.
    if let (Some(c), Some(slot)) =
        (get(p, "cache_control").and_then(Value::as_object), part.as_mut().and_then(Part::cache_mut))
    {
        *slot = Some(crate::protocol::translate::message::CacheMark {
            ttl: c.get("ttl").and_then(Value::as_str).map(str::to_owned),
        });
    }
    Ok(part)
}

fn content_part_alone(p: &Obj, path: &str, req: &mut Request) -> Result<Option<Part>, Untranslatable> {
    let kind = opt_str(p, "type", path)?.unwrap_or("text");
    Ok(Some(match kind {
        "text" => Part::text(opt_str(p, "text", path)?.unwrap_or_default()),
        "refusal" => Part::Refusal { text: opt_str(p, "refusal", path)?.unwrap_or_default().to_owned() },
        "image_url" => {
            let (url, detail) = match get(p, "image_url") {
                Some(Value::String(u)) => (u.clone(), None),
                Some(Value::Object(o)) => (
                    opt_str(o, "url", path)?.unwrap_or_default().to_owned(),
                    opt_str(o, "detail", path)?.map(str::to_owned),
                ),
                _ => return Err(bad(at(path, "image_url"), "required")),
            };
            let source = match data_url(&url) {
                Some((media_type, data)) => Media::Base64 { media_type, data },
                None => Media::Url(url),
            };
            Part::Image { source, detail, cache: None }
        }
        "input_audio" => {
            let a = as_obj(get(p, "input_audio").ok_or_else(|| bad(at(path, "input_audio"), "required"))?, path)?;
            Part::Audio {
                format: opt_str(a, "format", path)?.unwrap_or("wav").to_owned(),
                data: opt_str(a, "data", path)?.unwrap_or_default().to_owned(),
            }
        }
        "file" => {
            let f = as_obj(get(p, "file").ok_or_else(|| bad(at(path, "file"), "required"))?, path)?;
            let filename = opt_str(f, "filename", path)?.map(str::to_owned);
            let source = if let Some(id) = opt_str(f, "file_id", path)? {
                Media::FileId(id.to_owned())
            } else {
                openai::file_data(opt_str(f, "file_data", path)?.unwrap_or_default())
            };
            Part::Document { source, title: None, filename, cache: None }
        }
        other => return Ok(req.new_block(p, other, path)),
    }))
}

fn tools(m: &Obj, req: &mut Request) -> Result<(), Untranslatable> {
    if let Some(list) = get(m, "tools") {
        for (i, t) in as_arr(list, "tools")?.iter().enumerate() {
            let path = idx("tools", i);
            let t = as_obj(t, &path)?;
            req.tools.push(match opt_str(t, "type", &path)?.unwrap_or("function") {
                "function" => {
                    function_tool(as_obj(get(t, "function").ok_or_else(|| bad(&path, "function required"))?, &path)?)?
                }
                "custom" => {
                    let c = as_obj(get(t, "custom").ok_or_else(|| bad(&path, "custom required"))?, &path)?;
                    Tool {
                        name: opt_str(c, "name", &path)?.unwrap_or_default().to_owned(),
                        description: opt_str(c, "description", &path)?.map(str::to_owned),
                        kind: ToolKind::Custom { format: get(c, "format").cloned() },
                        cache: None,
                    }
                }
                _ => Tool {
                    name: String::new(),
                    description: None,
                    kind: ToolKind::Hosted { origin: Format::Chat, raw: Value::Object(t.clone()) },
                    cache: None,
                },
            });
        }
    }
    if let Some(list) = get(m, "functions") {
        for (i, f) in as_arr(list, "functions")?.iter().enumerate() {
            req.tools.push(function_tool(as_obj(f, &idx("functions", i))?)?);
        }
    }
    req.tool_choice = match get(m, "tool_choice").or(get(m, "function_call")) {
        None => None,
        Some(Value::String(s)) => Some(openai::choice_mode(s)),
        Some(Value::Object(o)) => {
            let name = o
                .get("function")
                .and_then(|f| f.get("name"))
                .or_else(|| o.get("custom").and_then(|c| c.get("name")))
                .or_else(|| o.get("name"))
                .and_then(Value::as_str);
            match name {
                Some(n) => Some(ToolChoice::Named(n.to_owned())),
                None => Some(ToolChoice::Required),
            }
        }
        Some(_) => return Err(bad("tool_choice", "expected a string or an object")),
    };
    Ok(())
}

fn function_tool(f: &Obj) -> Result<Tool, Untranslatable> {
    Ok(Tool {
        name: opt_str(f, "name", "tools")?.unwrap_or_default().to_owned(),
        description: opt_str(f, "description", "tools")?.map(str::to_owned),
        kind: ToolKind::Function {
            schema: get(f, "parameters").cloned().unwrap_or(Value::Null),
            strict: opt_bool(f, "strict", "tools")?,
        },
        cache: None,
    })
}

/// `response_format` of Chat (and, with the same inner shape, Responses
/// `text.format`).
pub(crate) fn response_format(v: Option<&Value>) -> Result<Option<OutputFormat>, Untranslatable> {
    let Some(Value::Object(o)) = v else {
        return Ok(None);
    };
    Ok(match o.get("type").and_then(Value::as_str) {
        Some("json_object") => Some(OutputFormat::JsonObject),
        Some("json_schema") => {
            let s = o.get("json_schema").and_then(Value::as_object).unwrap_or(o);
            Some(OutputFormat::JsonSchema {
                name: s.get("name").and_then(Value::as_str).map(str::to_owned),
                schema: s.get("schema").cloned().unwrap_or(Value::Null),
                strict: s.get("strict").and_then(Value::as_bool),
                description: s.get("description").and_then(Value::as_str).map(str::to_owned),
            })
        }
        _ => None,
    })
}

fn reasoning(m: &Obj, drops: &mut Drops) -> Result<Option<Reasoning>, Untranslatable> {
    let mut r = Reasoning::default();
    if let Some(e) = opt_str(m, "reasoning_effort", "")? {
        set_effort(&mut r, e, "reasoning_effort", drops);
    }
    // OpenRouter's `reasoning: {effort | max_tokens | enabled}`.
    if let Some(Value::Object(o)) = get(m, "reasoning") {
        if let Some(e) = o.get("effort").and_then(Value::as_str) {
            set_effort(&mut r, e, "reasoning.effort", drops);
        }
        r.budget = o.get("max_tokens").and_then(Value::as_u64).and_then(|n| u32::try_from(n).ok());
        if o.get("enabled") == Some(&Value::Bool(false)) {
            r.disabled = true;
        }
    }
    // DeepSeek's `thinking: {type: enabled|disabled}`.
    if let Some(t) = get(m, "thinking").and_then(|t| t.get("type")).and_then(Value::as_str) {
        r.disabled = t == "disabled";
        if t == "enabled" && r.effort.is_none() && r.budget.is_none() {
            r.effort = Some(Effort::Medium);
        }
    }
    Ok((r != Reasoning::default()).then_some(r))
}

/// An OpenAI effort; `none` switches reasoning off. An effort new to the
/// gateway is left to the provider's default, and listed as unmapped.
pub(crate) fn set_effort(r: &mut Reasoning, e: &str, path: &str, drops: &mut Drops) {
    if e == "none" {
        r.disabled = true;
        return;
    }
    r.effort = Effort::parse(e);
    if r.effort.is_none() {
        drops.note_unmapped(path, format!("effort `{e}` is new; the provider's default is used"));
    }
}
