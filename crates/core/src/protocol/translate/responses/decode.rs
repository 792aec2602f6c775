//! Responses request → intermediate form.

use serde_json::Value;

use crate::protocol::translate::chat;
use crate::protocol::translate::dropped::Stage;
use crate::protocol::translate::envelope;
use crate::protocol::translate::error::Untranslatable;
use crate::protocol::translate::ir::{Family, Format};
use crate::protocol::translate::message::{
    CallKind, Logprobs, Media, Part, Reasoning, Request, Role, Tool, ToolChoice, ToolKind, Turn,
};
use crate::protocol::translate::openai;
use crate::protocol::translate::wire::*;

const MAPPED: &[&str] = &[
    "model",
    "input",
    "instructions",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "max_output_tokens",
    "temperature",
    "top_p",
    "reasoning",
    "text",
    "user",
    "safety_identifier",
    "metadata",
    "stream",
    "service_tier",
    "store",
    "previous_response_id",
    "prompt_cache_key",
    "top_logprobs",
    "conversation",
    "background",
    "prompt",
];

/// Items that are calls or results of tools the provider hosts.
const HOSTED_ITEMS: &[&str] = &[
    "web_search_call",
    "file_search_call",
    "computer_call",
    "computer_call_output",
    "code_interpreter_call",
    "image_generation_call",
    "mcp_call",
    "mcp_list_tools",
    "mcp_approval_request",
    "mcp_approval_response",
];

pub(crate) fn decode(body: &[u8]) -> Result<Request, Untranslatable> {
    let m = parse_body(body)?;
    let mut req = Request::unmapped(Format::Responses, &m, MAPPED);
    refuse_state(&m)?;
    req.model = opt_str(&m, "model", "")?.unwrap_or_default().to_owned();
    if let Some(i) = opt_str(&m, "instructions", "")? {
        req.system.push(Part::text(i));
    }
    input(&m, &mut req)?;
    tools(&m, &mut req)?;
    req.parallel_tools = opt_bool(&m, "parallel_tool_calls", "")?;
    req.max_output = opt_u32(&m, "max_output_tokens", "")?;
    req.temperature = opt_f64(&m, "temperature", "")?;
    req.top_p = opt_f64(&m, "top_p", "")?;
    if let Some(top) = opt_u32(&m, "top_logprobs", "")? {
        req.logprobs = Some(Logprobs { top: Some(top) });
    }
    if let Some(Value::Object(r)) = get(&m, "reasoning") {
        let mut out = Reasoning::default();
        if let Some(e) = opt_str(r, "effort", "reasoning")? {
            chat::set_effort(&mut out, e, "reasoning.effort", &mut req.drops);
        }
        out.summary =
            opt_str(r, "summary", "reasoning")?.or(opt_str(r, "generate_summary", "reasoning")?).map(str::to_owned);
        if out != Reasoning::default() {
            req.reasoning = Some(out);
        }
    }
    if let Some(Value::Object(t)) = get(&m, "text") {
        req.output_format = chat::response_format(t.get("format"))?;
        req.verbosity = opt_str(t, "verbosity", "text")?.map(str::to_owned);
    }
    req.user = opt_str(&m, "safety_identifier", "")?.or(opt_str(&m, "user", "")?).map(str::to_owned);
    req.metadata = get(&m, "metadata").and_then(Value::as_object).cloned();
    req.stream = opt_bool(&m, "stream", "")?.unwrap_or(false);
    req.service_tier = opt_str(&m, "service_tier", "")?.map(str::to_owned);
    req.store = opt_bool(&m, "store", "")?;
    req.previous_response_id = opt_str(&m, "previous_response_id", "")?.map(str::to_owned);
    req.prompt_cache_key = opt_str(&m, "prompt_cache_key", "")?.map(str::to_owned);
    Ok(req)
}

/// Requests that lean on state kept by OpenAI, other than
/// `previous_response_id` (refused per target, since a Responses target
/// could serve it).
fn refuse_state(m: &Obj) -> Result<(), Untranslatable> {
    if get(m, "conversation").is_some() {
        return Err(bad("conversation", "the request continues a conversation stored by OpenAI"));
    }
    if opt_bool(m, "background", "")? == Some(true) {
        return Err(bad("background", "background responses are stored and polled, which needs OpenAI's state"));
    }
    if get(m, "prompt").is_some() {
        return Err(bad("prompt", "the request names a prompt template stored by OpenAI"));
    }
    Ok(())
}

fn push(req: &mut Request, role: Role, part: Part) {
    match req.turns.last_mut() {
        Some(t) if t.role == role => t.parts.push(part),
        _ => req.turns.push(Turn::new(role, vec![part])),
    }
}

fn input(m: &Obj, req: &mut Request) -> Result<(), Untranslatable> {
    let items = match get(m, "input") {
        None => return Ok(()),
        Some(Value::String(s)) => {
            req.turns.push(Turn::new(Role::User, vec![Part::text(s.clone())]));
            return Ok(());
        }
        Some(v) => as_arr(v, "input")?,
    };
    for (i, item) in items.iter().enumerate() {
        let path = idx("input", i);
        item_into(as_obj(item, &path)?, &path, req)?;
    }
    Ok(())
}

fn item_into(item: &Obj, path: &str, req: &mut Request) -> Result<(), Untranslatable> {
    let kind = opt_str(item, "type", path)?.unwrap_or("message");
    let incomplete = opt_str(item, "status", path)? == Some("incomplete");
    match kind {
        "message" => {
            let role = match opt_str(item, "role", path)?.unwrap_or("user") {
                "assistant" => Role::Assistant,
                "system" | "developer" => Role::System,
                _ => Role::User,
            };
            for part in content(get(item, "content"), &at(path, "content"), req)? {
                push(req, role, part);
            }
        }
        "reasoning" => push(req, Role::Assistant, reasoning(item, path)?),
        "function_call" | "custom_tool_call" if incomplete => {
            req.drops.note(Stage::Decode, Format::Responses, "input[status=incomplete]");
        }
        "function_call" => {
            let args = match get(item, "arguments") {
                Some(Value::String(s)) => s.clone(),
                Some(v) => args_text(v),
                None => String::new(),
            };
            push(req, Role::Assistant, call(item, path, args, CallKind::Function)?);
        }
        "custom_tool_call" => {
            let input = opt_str(item, "input", path)?.unwrap_or_default().to_owned();
            push(req, Role::Assistant, call(item, path, input, CallKind::Custom)?);
        }
        "function_call_output" | "custom_tool_call_output" => {
            let kind = if kind == "function_call_output" { CallKind::Function } else { CallKind::Custom };
            let call_id = opt_str(item, "call_id", path)?.ok_or_else(|| bad(at(path, "call_id"), "required"))?;
            let content = content(get(item, "output"), &at(path, "output"), req)?;
            let result = Part::ToolResult {
                call_id: call_id.to_owned(),
                name: None,
                content,
                is_error: false,
                kind,
                cache: None,
            };
            push(req, Role::User, result);
        }
        "local_shell_call" | "local_shell_call_output" => {
            req.drops.note(Stage::Decode, Format::Responses, "input[type=local_shell_call]");
        }
        k if HOSTED_ITEMS.contains(&k) => req.drops.note(Stage::Decode, Format::Responses, "input[type=hosted_call]"),
        "item_reference" => return Err(bad(path, "the item refers to one stored by OpenAI")),
        "compaction" | "compaction_summary" => {
            return Err(bad(path, "the history was compacted by OpenAI into an encrypted summary only it can read"))
        }
        other => {
            if let Some(part) = req.new_block(item, other, path) {
                push(req, Role::User, part);
            }
        }
    }
    Ok(())
}

fn call(item: &Obj, path: &str, args: String, kind: CallKind) -> Result<Part, Untranslatable> {
    let id = opt_str(item, "call_id", path)?.or(opt_str(item, "id", path)?).unwrap_or_default().to_owned();
    let name = opt_str(item, "name", path)?.unwrap_or_default().to_owned();
    Ok(Part::ToolCall { id, name, args, kind })
}

fn reasoning(item: &Obj, path: &str) -> Result<Part, Untranslatable> {
    let summary: Vec<&str> = texts(item.get("summary")).collect();
    let full: Vec<&str> = texts(item.get("content")).collect();
    let mut text = joined(if full.is_empty() { &summary } else { &full }, "\n\n");
    let mut id = opt_str(item, "id", path)?.map(str::to_owned);
    let mut opaque = None;
    let mut redacted = false;
    if let Some(enc) = opt_str(item, "encrypted_content", path)? {
        let slot = envelope::read_slot(Family::OpenAi, enc);
        opaque = slot.opaque;
        redacted = slot.redacted;
        if slot.id.is_some() || slot.text.is_some() {
            id = slot.id;
        }
        if let Some(t) = slot.text {
            text = t;
        }
    }
    Ok(Part::Reasoning { text, opaque, redacted, id })
}

/// Message content (or a tool output): a string or a list of parts.
fn content(v: Option<&Value>, path: &str, req: &mut Request) -> Result<Vec<Part>, Untranslatable> {
    openai::content(v, path, req, content_part)
}

fn content_part(p: &Obj, path: &str, req: &mut Request) -> Result<Option<Part>, Untranslatable> {
    let kind = opt_str(p, "type", path)?.unwrap_or("input_text");
    Ok(Some(match kind {
        "input_text" | "output_text" | "text" | "summary_text" => {
            Part::text(opt_str(p, "text", path)?.unwrap_or_default())
        }
        "refusal" => Part::Refusal { text: opt_str(p, "refusal", path)?.unwrap_or_default().to_owned() },
        "input_image" => {
            let source = if let Some(id) = opt_str(p, "file_id", path)? {
                Media::FileId(id.to_owned())
            } else {
                let url = opt_str(p, "image_url", path)?.unwrap_or_default();
                match data_url(url) {
                    Some((media_type, data)) => Media::Base64 { media_type, data },
                    None => Media::Url(url.to_owned()),
                }
            };
            Part::Image { source, detail: opt_str(p, "detail", path)?.map(str::to_owned), cache: None }
        }
        "input_file" => {
            let source = if let Some(id) = opt_str(p, "file_id", path)? {
                Media::FileId(id.to_owned())
            } else if let Some(url) = opt_str(p, "file_url", path)? {
                Media::Url(url.to_owned())
            } else {
                openai::file_data(opt_str(p, "file_data", path)?.unwrap_or_default())
            };
            let filename = opt_str(p, "filename", path)?.map(str::to_owned);
            Part::Document { source, title: None, filename, cache: None }
        }
        other => return Ok(req.new_block(p, other, path)),
    }))
}

fn tools(m: &Obj, req: &mut Request) -> Result<(), Untranslatable> {
    for (i, t) in get(m, "tools").map(|v| as_arr(v, "tools")).transpose()?.into_iter().flatten().enumerate() {
        let path = idx("tools", i);
        let t = as_obj(t, &path)?;
        let name = opt_str(t, "name", &path)?.unwrap_or_default().to_owned();
        let description = opt_str(t, "description", &path)?.map(str::to_owned);
        let kind = match opt_str(t, "type", &path)?.unwrap_or("function") {
            "function" => ToolKind::Function {
                schema: get(t, "parameters").cloned().unwrap_or(Value::Null),
                strict: opt_bool(t, "strict", &path)?,
            },
            "custom" => ToolKind::Custom { format: get(t, "format").cloned() },
            _ => ToolKind::Hosted { origin: Format::Responses, raw: Value::Object(t.clone()) },
        };
        req.tools.push(Tool { name, description, kind, cache: None });
    }
    req.tool_choice = match get(m, "tool_choice") {
        None => None,
        Some(Value::String(s)) => Some(openai::choice_mode(s)),
        Some(Value::Object(o)) => {
            match (o.get("type").and_then(Value::as_str), o.get("name").and_then(Value::as_str)) {
                (Some("function" | "custom"), Some(n)) => Some(ToolChoice::Named(n.to_owned())),
                (Some("allowed_tools"), _) => {
                    req.drops.note(Stage::Decode, Format::Responses, "tool_choice.allowed_tools");
                    match o.get("mode").and_then(Value::as_str) {
                        Some("required") => Some(ToolChoice::Required),
                        _ => Some(ToolChoice::Auto),
                    }
                }
                _ => {
                    req.drops.note(Stage::Decode, Format::Responses, "tool_choice[hosted]");
                    None
                }
            }
        }
        Some(_) => return Err(bad("tool_choice", "expected a string or an object")),
    };
    Ok(())
}
