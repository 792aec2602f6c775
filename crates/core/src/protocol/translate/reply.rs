//! What every reply codec shares: the checks a decoded reply passes, and the
//! client-facing touches every encoder applies (ids with the client's
//! prefix, the client's model alias, the client's tool names).

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

use super::error::UpstreamError;
use super::ir::{Context, ErrorClass};
use super::message::{Part, Reply};
use super::wire::{random_id, short_hash};

/// A decoded reply made valid: tool calls with an empty name are dropped (a
/// "completed" turn without calls makes Codex end its loop silently), and a
/// reply whose calls were all unusable is an error rather than an empty
/// success. A reply with calls stops for tool use, whatever the provider
/// said (Gemini says STOP, some compat servers say `stop`).
pub(crate) fn finish(mut reply: Reply) -> Result<Reply, UpstreamError> {
    let had_calls = reply.has_tool_calls();
    reply.parts.retain(|p| !matches!(p, Part::ToolCall { name, .. } if name.trim().is_empty()));
    if had_calls && !reply.has_tool_calls() {
        return Err(UpstreamError::new(ErrorClass::Server, "the provider returned tool calls without a tool name"));
    }
    reply.stop = reply.stop.with_calls(reply.has_tool_calls());
    Ok(reply)
}

/// The reply's id with the prefix the client's SDK expects.
pub(crate) fn client_id(prefix: &str, id: &str) -> String {
    if id.is_empty() {
        format!("{prefix}{}", random_id())
    } else if id.starts_with(prefix) {
        id.to_owned()
    } else {
        format!("{prefix}{id}")
    }
}

/// A deterministic id for the `n`th item of a reply, for formats whose
/// items need ids the provider did not give.
pub(crate) fn item_id(prefix: &str, reply_id: &str, n: usize) -> String {
    format!("{prefix}{}", short_hash(&[reply_id, &n.to_string()]))
}

/// The model the client asked for, else the provider's.
pub(crate) fn model<'a>(reply: &'a Reply, ctx: &'a Context) -> &'a str {
    if ctx.client_model.is_empty() {
        &reply.model
    } else {
        &ctx.client_model
    }
}

/// The client's name for a tool, and whether the client declared it as a
/// freeform (custom) tool.
pub(crate) fn tool_name<'a>(ctx: &'a Context, sent: &'a str) -> (&'a str, bool) {
    let name = ctx.renamed_tools.get(sent).map_or(sent, String::as_str);
    (name, ctx.custom_tools.contains(name))
}

/// The raw input of a call to an emulated custom tool: the `input` argument,
/// or the arguments as they are when the model did not wrap them.
pub(crate) fn custom_input(args: &str) -> String {
    match serde_json::from_str::<Value>(args) {
        Ok(Value::Object(m)) => match m.get("input") {
            Some(Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
            None => args.to_owned(),
        },
        _ => args.to_owned(),
    }
}

/// Unix seconds of the reply, or now.
pub(crate) fn created(reply: &Reply) -> u64 {
    reply.created.unwrap_or_else(|| SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()))
}

/// Texts of the reply's text parts, in order.
pub(crate) fn texts(reply: &Reply) -> impl Iterator<Item = &str> {
    reply.parts.iter().filter_map(|p| match p {
        Part::Text { text, .. } => Some(text.as_str()),
        _ => None,
    })
}

/// `0` for an absent count, for formats that require every field.
pub(crate) fn n(v: Option<u64>) -> u64 {
    v.unwrap_or(0)
}

/// Splits a leading `<think>…</think>` (some servers put reasoning in the
/// content) into reasoning and the rest.
pub(crate) fn split_think(content: &str) -> Option<(String, String)> {
    let rest = content.trim_start().strip_prefix("<think>")?;
    let (thought, after) = rest.split_once("</think>")?;
    Some((thought.trim().to_owned(), after.trim_start().to_owned()))
}
