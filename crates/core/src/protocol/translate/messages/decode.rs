//! Anthropic Messages request → intermediate form.

use serde_json::Value;

use crate::protocol::translate::dropped::Stage;
use crate::protocol::translate::envelope;
use crate::protocol::translate::error::Untranslatable;
use crate::protocol::translate::ir::{Family, Format};
use crate::protocol::translate::message::{
    new_role, CacheMark, CallKind, Effort, Media, OutputFormat, Part, Reasoning, Request, Role, Tool, ToolChoice,
    ToolKind, Turn,
};
use crate::protocol::translate::wire::*;

const MAPPED: &[&str] = &[
    "model",
    "messages",
    "system",
    "max_tokens",
    "temperature",
    "top_p",
    "top_k",
    "stop_sequences",
    "stream",
    "tools",
    "tool_choice",
    "thinking",
    "metadata",
    "service_tier",
    "output_config",
    "output_format",
];

/// Content blocks of Anthropic's server tools and their results.
const SERVER_BLOCKS: &[&str] = &[
    "server_tool_use",
    "web_search_tool_result",
    "web_fetch_tool_result",
    "code_execution_tool_result",
    "bash_code_execution_tool_result",
    "text_editor_code_execution_tool_result",
    "tool_search_tool_result",
    "mcp_tool_use",
    "mcp_tool_result",
    "container_upload",
];

pub(crate) fn decode(body: &[u8]) -> Result<Request, Untranslatable> {
    let m = parse_body(body)?;
    let mut req = Request::unmapped(Format::Messages, &m, MAPPED);
    req.model = opt_str(&m, "model", "")?.unwrap_or_default().to_owned();
    req.system = match get(&m, "system") {
        None => Vec::new(),
        Some(Value::String(s)) => vec![Part::text(s.clone())],
        Some(v) => blocks(as_arr(v, "system")?, "system", &mut req)?,
    };
    let list = as_arr(get(&m, "messages").ok_or_else(|| bad("messages", "required"))?, "messages")?;
    for (i, msg) in list.iter().enumerate() {
        let path = idx("messages", i);
        let msg = as_obj(msg, &path)?;
        let role = match opt_str(msg, "role", &path)? {
            Some("assistant") => Role::Assistant,
            Some("user") => Role::User,
            // Anthropic's mid-conversation system messages (a beta Claude
            // Code's current models use): placed per target by the encoder.
            Some("system") => Role::System,
            other => return Err(new_role(&path, other)),
        };
        let parts = match get(msg, "content") {
            None => Vec::new(),
            Some(Value::String(s)) => vec![Part::text(s.clone())],
            Some(v) => {
                let list = as_arr(v, &at(&path, "content"))?;
                let before = req.unmapped_count();
                let parts = blocks(list, &at(&path, "content"), &mut req)?;
                req.refuse_emptied(list.len(), parts.len(), before, &path)?;
                parts
            }
        };
        req.turns.push(Turn::new(role, parts));
    }
    tools(&m, &mut req)?;
    req.max_output = opt_u32(&m, "max_tokens", "")?;
    req.temperature = opt_f64(&m, "temperature", "")?;
    req.top_p = opt_f64(&m, "top_p", "")?;
    req.top_k = opt_u32(&m, "top_k", "")?;
    req.stop = string_or_list(m.get("stop_sequences"), "stop_sequences")?;
    req.stream = opt_bool(&m, "stream", "")?.unwrap_or(false);
    req.service_tier = opt_str(&m, "service_tier", "")?.map(str::to_owned);
    if let Some(Value::Object(meta)) = get(&m, "metadata") {
        req.user = opt_str(meta, "user_id", "metadata")?.map(str::to_owned);
        if meta.keys().any(|k| k != "user_id") {
            req.drops.note(Stage::Decode, Format::Messages, "metadata");
        }
    }
    reasoning_and_format(&m, &mut req)?;
    Ok(req)
}

fn cache(block: &Obj) -> Option<CacheMark> {
    let c = block.get("cache_control")?.as_object()?;
    Some(CacheMark { ttl: c.get("ttl").and_then(Value::as_str).map(str::to_owned) })
}

fn blocks(list: &[Value], path: &str, req: &mut Request) -> Result<Vec<Part>, Untranslatable> {
    let mut parts = Vec::with_capacity(list.len());
    for (i, b) in list.iter().enumerate() {
        let path = idx(path, i);
        if let Some(p) = block(as_obj(b, &path)?, &path, req)? {
            parts.push(p);
        }
    }
    Ok(parts)
}

fn block(b: &Obj, path: &str, req: &mut Request) -> Result<Option<Part>, Untranslatable> {
    let kind = opt_str(b, "type", path)?.ok_or_else(|| bad(at(path, "type"), "required"))?;
    if b.contains_key("citations") && !b.get("citations").is_some_and(Value::is_null) {
        req.drops.note(Stage::Decode, Format::Messages, "content[].citations");
    }
    Ok(Some(match kind {
        "text" => Part::Text { text: opt_str(b, "text", path)?.unwrap_or_default().to_owned(), cache: cache(b) },
        "image" => Part::Image { source: source(b, path)?, detail: None, cache: cache(b) },
        "document" => Part::Document {
            source: source(b, path)?,
            title: opt_str(b, "title", path)?.map(str::to_owned),
            filename: None,
            cache: cache(b),
        },
        "search_result" => {
            let title = opt_str(b, "title", path)?.unwrap_or_default();
            Part::text(format!("{title}\n{}", content_text(b)).trim().to_owned())
        }
        "thinking" => {
            let text = opt_str(b, "thinking", path)?.unwrap_or_default();
            let signature = opt_str(b, "signature", path)?.unwrap_or_default();
            reasoning(text, signature, false)
        }
        "redacted_thinking" => reasoning("", opt_str(b, "data", path)?.unwrap_or_default(), true),
        "tool_use" => Part::ToolCall {
            id: opt_str(b, "id", path)?.unwrap_or_default().to_owned(),
            name: opt_str(b, "name", path)?.unwrap_or_default().to_owned(),
            args: get(b, "input").map(args_text).unwrap_or_else(|| "{}".to_owned()),
            kind: CallKind::Function,
        },
        "tool_result" => {
            let content = match get(b, "content") {
                None => Vec::new(),
                Some(Value::String(s)) => vec![Part::text(s.clone())],
                Some(v) => blocks(as_arr(v, &at(path, "content"))?, &at(path, "content"), req)?,
            };
            Part::ToolResult {
                call_id: opt_str(b, "tool_use_id", path)?.unwrap_or_default().to_owned(),
                name: None,
                content,
                is_error: opt_bool(b, "is_error", path)?.unwrap_or(false),
                kind: CallKind::Function,
                cache: cache(b),
            }
        }
        k if SERVER_BLOCKS.contains(&k) => {
            req.drops.note(Stage::Decode, Format::Messages, "content[type=server_tool]");
            return Ok(None);
        }
        other => return Ok(req.new_block(b, other, path)),
    }))
}

/// A thinking block: an envelope restores state from another family and the
/// text it covers; an empty signature is reasoning with no state at all.
fn reasoning(text: &str, signature: &str, redacted: bool) -> Part {
    if signature.is_empty() {
        return Part::Reasoning { text: text.to_owned(), opaque: None, redacted, id: None };
    }
    let slot = envelope::read_slot(Family::Anthropic, signature);
    Part::Reasoning {
        text: slot.text.unwrap_or_else(|| text.to_owned()),
        opaque: slot.opaque,
        redacted: redacted || slot.redacted,
        id: slot.id,
    }
}

/// The texts of a block's `content[]` entries, one a line: how a search
/// result and a content-sourced document carry their text.
fn content_text(o: &Obj) -> String {
    joined(texts(o.get("content")), "\n")
}

fn source(b: &Obj, path: &str) -> Result<Media, Untranslatable> {
    let s = as_obj(get(b, "source").ok_or_else(|| bad(at(path, "source"), "required"))?, &at(path, "source"))?;
    let path = at(path, "source");
    Ok(match opt_str(s, "type", &path)? {
        Some("base64") => Media::Base64 {
            media_type: opt_str(s, "media_type", &path)?.unwrap_or("application/octet-stream").to_owned(),
            data: opt_str(s, "data", &path)?.unwrap_or_default().to_owned(),
        },
        Some("url") => Media::Url(opt_str(s, "url", &path)?.unwrap_or_default().to_owned()),
        Some("file") => Media::FileId(opt_str(s, "file_id", &path)?.unwrap_or_default().to_owned()),
        Some("text") => Media::Text(opt_str(s, "data", &path)?.unwrap_or_default().to_owned()),
        Some("content") => Media::Text(content_text(s)),
        other => {
            let what = format!(
                "a source of type `{}` the gateway cannot read; the model would not see it",
                other.unwrap_or("")
            );
            return Err(bad(at(&path, "type"), what));
        }
    })
}

fn tools(m: &Obj, req: &mut Request) -> Result<(), Untranslatable> {
    for (i, t) in get(m, "tools").map(|v| as_arr(v, "tools")).transpose()?.into_iter().flatten().enumerate() {
        let path = idx("tools", i);
        let t = as_obj(t, &path)?;
        let name = opt_str(t, "name", &path)?.unwrap_or_default().to_owned();
        let kind = match opt_str(t, "type", &path)? {
            None | Some("custom") => ToolKind::Function {
                schema: get(t, "input_schema").cloned().unwrap_or(Value::Null),
                strict: opt_bool(t, "strict", &path)?,
            },
            // Server tools and Anthropic-defined client tools (bash,
            // text_editor, computer): their schema lives at Anthropic.
            Some(_) => ToolKind::Hosted { origin: Format::Messages, raw: Value::Object(t.clone()) },
        };
        req.tools.push(Tool {
            name,
            description: opt_str(t, "description", &path)?.map(str::to_owned),
            kind,
            cache: cache(t),
        });
    }
    if let Some(Value::Object(c)) = get(m, "tool_choice") {
        req.tool_choice = match opt_str(c, "type", "tool_choice")? {
            Some("any") => Some(ToolChoice::Required),
            Some("none") => Some(ToolChoice::None),
            Some("tool") => Some(ToolChoice::Named(opt_str(c, "name", "tool_choice")?.unwrap_or_default().to_owned())),
            _ => Some(ToolChoice::Auto),
        };
        if let Some(d) = opt_bool(c, "disable_parallel_tool_use", "tool_choice")? {
            req.parallel_tools = Some(!d);
        }
    }
    Ok(())
}

fn reasoning_and_format(m: &Obj, req: &mut Request) -> Result<(), Untranslatable> {
    let config = get(m, "output_config").and_then(Value::as_object);
    let effort = config.and_then(|c| c.get("effort")).and_then(Value::as_str).and_then(|e| {
        let parsed = Effort::parse(e);
        if parsed.is_none() {
            req.drops
                .note_unmapped("output_config.effort", format!("effort `{e}` is new; the provider's default is used"));
        }
        parsed
    });
    if let Some(Value::Object(t)) = get(m, "thinking") {
        let mut r = Reasoning { effort, ..Reasoning::default() };
        match opt_str(t, "type", "thinking")? {
            Some("enabled") => r.budget = opt_u32(t, "budget_tokens", "thinking")?,
            Some("adaptive") => r.effort = Some(effort.unwrap_or(Effort::High)),
            _ => r.disabled = true,
        }
        req.reasoning = Some(r);
    } else if let Some(e) = effort {
        req.reasoning = Some(Reasoning { effort: Some(e), ..Reasoning::default() });
    }
    let format = config.and_then(|c| c.get("format")).or(get(m, "output_format"));
    if let Some(f) = format.filter(|f| f.get("type").and_then(Value::as_str) == Some("json_schema")) {
        req.output_format = Some(OutputFormat::JsonSchema {
            name: None,
            schema: f.get("schema").cloned().unwrap_or(Value::Null),
            strict: None,
            description: None,
        });
    }
    Ok(())
}
