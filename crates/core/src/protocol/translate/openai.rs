//! What the two OpenAI formats, Chat and Responses, spell alike: content
//! as a string or a list of parts, file data, the tool-choice modes, the
//! tool list with its choice, and the usage details.
//!
//! Where they differ only in a field's name or nesting, the caller passes
//! the difference in; each codec keeps what is its own.

use serde_json::{json, Map, Value};

use super::error::Untranslatable;
use super::ir::Tokens;
use super::message::{Media, Part, Request, ToolChoice};
use super::reply::n;
use super::shape::{is_custom, Enc};
use super::wire::{as_obj, bad, data_url, idx, Obj};

/// `content` as a string or a list of parts, each read by `part`.
pub(crate) fn content(
    v: Option<&Value>,
    path: &str,
    req: &mut Request,
    part: fn(&Obj, &str, &mut Request) -> Result<Option<Part>, Untranslatable>,
) -> Result<Vec<Part>, Untranslatable> {
    match v {
        None => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(vec![Part::text(s.clone())]),
        Some(Value::Array(a)) => {
            let before = req.unmapped_count();
            let mut parts = Vec::with_capacity(a.len());
            for (i, p) in a.iter().enumerate() {
                parts.extend(part(as_obj(p, &idx(path, i))?, &idx(path, i), req)?);
            }
            req.refuse_emptied(a.len(), parts.len(), before, path)?;
            Ok(parts)
        }
        Some(_) => Err(bad(path, "expected a string or a list of parts")),
    }
}

/// `file_data`: a data URL, or bare base64 taken for a PDF (the only file
/// type both formats accept inline).
pub(crate) fn file_data(data: &str) -> Media {
    match data_url(data) {
        Some((media_type, data)) => Media::Base64 { media_type, data },
        None => Media::Base64 { media_type: "application/pdf".into(), data: data.to_owned() },
    }
}

/// A `tool_choice` given as a string.
pub(crate) fn choice_mode(mode: &str) -> ToolChoice {
    match mode {
        "none" => ToolChoice::None,
        "required" => ToolChoice::Required,
        _ => ToolChoice::Auto,
    }
}

/// Writes the tools, already encoded, and the tool choice; `named` writes
/// a choice of one tool, given its name and whether it is a custom tool.
/// Without tools a choice means nothing and is dropped.
pub(crate) fn tools_and_choice(
    req: &Request,
    tools: Vec<Value>,
    named: fn(&str, bool) -> Value,
    enc: &mut Enc<'_>,
    b: &mut Map<String, Value>,
) -> bool {
    if tools.is_empty() {
        if req.parallel_tools.is_some() {
            enc.drop("tool_choice");
        }
        return false;
    }
    b.insert("tools".into(), Value::Array(tools));
    if let Some(choice) = &req.tool_choice {
        let v = match choice {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::None => json!("none"),
            ToolChoice::Required => json!("required"),
            ToolChoice::Named(n) => named(n, is_custom(&req.tools, n)),
        };
        b.insert("tool_choice".into(), v);
    }
    true
}

/// Temperature and top-p where the provider takes them (one drop reason
/// for both where it does not); top-k, which neither format has, dropped.
pub(crate) fn sampling(req: &Request, enc: &mut Enc<'_>, b: &mut Map<String, Value>) {
    if enc.profile.sampling {
        if let Some(t) = req.temperature {
            b.insert("temperature".into(), json!(t));
        }
        if let Some(p) = req.top_p {
            b.insert("top_p".into(), json!(p));
        }
    } else if req.temperature.is_some() || req.top_p.is_some() {
        enc.drop("sampling");
    }
    if req.top_k.is_some() {
        enc.drop("top_k");
    }
}

/// The texts of the parts `text` picks, in order.
pub(crate) fn texts_of<'a>(parts: &'a [Part], text: fn(&'a Part) -> Option<&'a str>) -> Vec<&'a str> {
    parts.iter().filter_map(text).collect()
}

pub(crate) fn refusal_text(p: &Part) -> Option<&str> {
    match p {
        Part::Refusal { text } => Some(text),
        _ => None,
    }
}

pub(crate) fn reasoning_text(p: &Part) -> Option<&str> {
    match p {
        Part::Reasoning { text, .. } => Some(text),
        _ => None,
    }
}

/// Input and output counts (absent ones as 0, since clients require every
/// field) and the input details both formats write: cached tokens always,
/// cache writes when known.
pub(crate) fn usage_counts(t: &Tokens) -> (u64, u64, Value) {
    let mut details = json!({"cached_tokens": n(t.cache_read)});
    if let Some(w) = t.cache_write {
        details["cache_write_tokens"] = json!(w);
    }
    (n(t.input), n(t.output), details)
}
