//! The passes every request goes through before a target's encoder writes
//! it: refusing what the target cannot do, and putting the conversation in
//! the shape the strictest formats demand.
//!
//! They run on the intermediate form, once, so each encoder can assume:
//! system turns are hoisted (except toward Responses, which keeps them in
//! place); tool names and call ids are valid for the target; every tool
//! call is answered in the next user turn, results first and in call order;
//! no text part is empty; and toward Messages and Gemini, roles alternate and
//! the first turn is the user's.

use std::collections::{HashMap, HashSet};

use serde_json::{json, Value};

use super::dropped::{Drops, Stage};
use super::error::Untranslatable;
use super::ir::{Context, Format};
use super::message::{family, CallKind, Media, Part, Request, Role, Tool, ToolChoice, ToolKind, Turn};
use super::names;
use super::profile::Profile;

/// Claude Code's first system line, whose rotating `cch=` value defeats
/// prefix caching anywhere but Anthropic (farion1231/cc-switch#2350).
const BILLING_HEADER: &str = "x-anthropic-billing-header:";

/// The image types Anthropic accepts.
const ANTHROPIC_IMAGES: &[&str] = &["image/jpeg", "image/png", "image/gif", "image/webp"];

/// What interrupted calls are answered with, so no call is left orphaned.
pub(crate) const INTERRUPTED: &str = "[tool call interrupted]";

/// What an encoder works with: the target, its profile and the record of
/// drops.
#[derive(Debug)]
pub(crate) struct Enc<'a> {
    pub target: Format,
    pub profile: &'a Profile,
    pub drops: &'a mut Drops,
    /// The most output the upstream model takes, if known.
    pub output_limit: Option<u32>,
}

impl Enc<'_> {
    /// Records a deliberate drop of `field` (a row of the drop table).
    pub fn drop(&mut self, field: &str) {
        self.drops.note(Stage::Encode, self.target, field);
    }

    /// Drops the client's top-level fields the gateway does not know (they
    /// pass only within their own family), naming each as unmapped.
    pub fn drop_extras(&mut self, req: &Request) {
        if req.extras.is_empty() {
            return;
        }
        self.drop("extras");
        for key in req.extras.keys() {
            self.drops.note_unmapped(key.as_str(), "a top-level field passed only to the client's own provider family");
        }
    }

    /// Drops the OpenAI-only request fields a target outside the OpenAI
    /// family cannot express: a stored completion, a verbosity hint and a
    /// prompt-cache key, in that order.
    pub fn drop_openai_only(&mut self, req: &Request) {
        if req.store == Some(true) {
            self.drop("store");
        }
        if req.verbosity.is_some() {
            self.drop("verbosity");
        }
        if req.prompt_cache_key.is_some() {
            self.drop("prompt_cache_key");
        }
    }
}

/// Runs every pass for `target`.
pub(crate) fn prepare(req: &mut Request, enc: &mut Enc<'_>, ctx: &mut Context) -> Result<(), Untranslatable> {
    refuse(req, enc)?;
    clamp_output(req, enc);
    if enc.target != Format::Messages {
        strip_billing(&mut req.system);
    }
    place_system(req, enc);
    drop_hosted(req, enc);
    if !(enc.target == Format::Responses || enc.target == Format::Chat && enc.profile.custom_tools) {
        emulate_custom(req, ctx);
    }
    rename_tools(req, enc, ctx);
    if enc.target != Format::Gemini {
        sanitise_ids(req, enc.profile.tool_id_max);
    }
    drop_empty(&mut req.turns);
    pair_results(&mut req.turns, enc);
    if matches!(enc.target, Format::Messages | Format::Gemini) {
        merge_roles(&mut req.turns);
        if req.turns.first().is_some_and(|t| t.role != Role::User) {
            req.turns.insert(0, Turn::new(Role::User, vec![Part::text("(continued)")]));
        }
    }
    Ok(())
}

/// The client's list of turns, for error paths.
fn turns_path(source: Option<Format>) -> &'static str {
    match source {
        Some(Format::Responses) => "input",
        Some(Format::Gemini) => "contents",
        _ => "messages",
    }
}

/// Requests that would change meaning on `target`.
fn refuse(req: &Request, enc: &Enc<'_>) -> Result<(), Untranslatable> {
    let target = enc.target;
    if req.n.is_some_and(|n| n > 1) && !matches!(target, Format::Chat | Format::Gemini) {
        return Err(Untranslatable::new(
            "n",
            format!("{target} cannot return several choices, and fanning out would multiply the cost"),
        ));
    }
    if req.previous_response_id.is_some() && target != Format::Responses {
        return Err(Untranslatable::new(
            "previous_response_id",
            format!(
                "the request continues a response stored by the provider; {target} providers keep no state \
                 (send the full input with store:false, as Codex does)"
            ),
        ));
    }
    let real_tools = req.tools.iter().filter(|t| !matches!(t.kind, ToolKind::Hosted { .. })).count();
    if real_tools > 0 && !enc.profile.tools {
        return Err(Untranslatable::new("tools", super::error::NO_TOOLS));
    }
    let list = turns_path(req.source);
    for (i, turn) in req.turns.iter().enumerate() {
        for (j, part) in turn.parts.iter().enumerate() {
            refuse_part(part, target, req.source, &format!("{list}[{i}].content[{j}]"))?;
            if let Part::ToolResult { content, .. } = part {
                for (k, inner) in content.iter().enumerate() {
                    refuse_part(inner, target, req.source, &format!("{list}[{i}].content[{j}].content[{k}]"))?;
                }
            }
        }
    }
    Ok(())
}

fn refuse_part(part: &Part, target: Format, source: Option<Format>, path: &str) -> Result<(), Untranslatable> {
    match part {
        Part::Audio { .. } if matches!(target, Format::Responses | Format::Messages) => {
            Err(Untranslatable::new(path, format!("{target} takes no audio input")))
        }
        Part::Image { source: Media::FileId(_), .. } | Part::Document { source: Media::FileId(_), .. }
            if source.map(family) != Some(family(target)) =>
        {
            Err(Untranslatable::new(path, "a file id refers to a file stored by another provider"))
        }
        Part::Document { source: Media::Url(_), .. } if target == Format::Chat => {
            Err(Untranslatable::new(path, "Chat cannot take a document by URL, and the gateway does not fetch it"))
        }
        Part::Document { source: Media::Base64 { media_type, .. }, .. }
            if target != Format::Gemini && media_type != "application/pdf" =>
        {
            Err(Untranslatable::new(path, format!("{target} takes no {media_type} documents, only PDF")))
        }
        Part::Image { source: Media::Base64 { media_type, .. }, .. }
            if target == Format::Messages && !ANTHROPIC_IMAGES.contains(&media_type.as_str()) =>
        {
            Err(Untranslatable::new(path, format!("Anthropic takes no {media_type} images")))
        }
        _ => Ok(()),
    }
}

/// Removes Claude Code's billing line from the first system text.
fn strip_billing(system: &mut Vec<Part>) {
    let Some(Part::Text { text, .. }) = system.first_mut() else {
        return;
    };
    if !text.starts_with(BILLING_HEADER) {
        return;
    }
    *text = text.split_once('\n').map(|(_, rest)| rest.trim_start_matches('\n').to_owned()).unwrap_or_default();
    if text.trim().is_empty() {
        system.remove(0);
    }
}

/// How Anthropic's own convention marks an instruction that arrives inside
/// the conversation: Claude Code sends its reminders in user turns so.
const REMINDER_OPEN: &str = "<system-reminder>\n";
const REMINDER_CLOSE: &str = "\n</system-reminder>";

/// Places system/developer turns (Codex's developer messages; the list of
/// agent types Claude Code's current models send as `role: "system"`).
///
/// Leading ones join the system prompt, which moves nothing. Later ones
/// keep their place, since moving one into the system prompt would set it
/// before turns it followed, and change a cached prefix each time one
/// arrives: Responses has developer items; a Chat provider whose profile
/// takes `mid_system` (OpenAI) gets a system message there. Messages and
/// Gemini have no system role among their turns, and strict chat templates
/// (Qwen, MiniMax) reject a system message after the first, so those get
/// the instruction in place as user text marked `<system-reminder>`, the
/// form Claude Code itself uses for models without mid-conversation system
/// messages. Adjacent user turns are merged afterwards where the target
/// needs alternation.
fn place_system(req: &mut Request, enc: &Enc<'_>) {
    if enc.target == Format::Responses {
        return;
    }
    let lead = req.turns.iter().take_while(|t| t.role == Role::System).count();
    for turn in req.turns.drain(..lead) {
        req.system.extend(turn.parts);
    }
    if enc.target == Format::Chat && enc.profile.mid_system {
        return;
    }
    for turn in req.turns.iter_mut().filter(|t| t.role == Role::System) {
        turn.role = Role::User;
        for part in &mut turn.parts {
            if let Part::Text { text, .. } = part {
                *text = format!("{REMINDER_OPEN}{text}{REMINDER_CLOSE}");
            }
        }
    }
}

/// Hosted tools run only on their own provider; drop them elsewhere, with a
/// `tool_choice` that names one.
/// A limit on output above what the model takes is lowered to it: the
/// provider would refuse the request, and the client asked for at most
/// that many, not for exactly that many.
fn clamp_output(req: &mut Request, enc: &mut Enc<'_>) {
    if let (Some(asked), Some(limit)) = (req.max_output, enc.output_limit) {
        if asked > limit {
            req.max_output = Some(limit);
            let what = format!("clamped from {asked} to {limit}, the model's output limit");
            enc.drops.note_changed("max_tokens", what);
        }
    }
}

fn drop_hosted(req: &mut Request, enc: &mut Enc<'_>) {
    let before = req.tools.len();
    req.tools.retain(|t| !matches!(&t.kind, ToolKind::Hosted { origin, .. } if *origin != enc.target));
    if req.tools.len() != before {
        enc.drop("tools[hosted]");
    }
    let dangling = match &req.tool_choice {
        Some(ToolChoice::Named(n)) => !req.tools.iter().any(|t| &t.name == n),
        Some(ToolChoice::Required) => req.tools.is_empty(),
        _ => false,
    };
    if dangling || req.tools.is_empty() && req.tool_choice.is_some() {
        req.tool_choice = None;
        enc.drop("tool_choice");
    }
}

/// The parameters of a custom tool emulated as a function.
pub(crate) fn custom_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"input": {"type": "string", "description": "The raw input for the tool."}},
        "required": ["input"],
    })
}

/// Freeform tools (Codex `apply_patch`) become functions taking one string
/// `input`; their grammar goes into the description so the model still
/// knows the format. Calls and results in history follow.
fn emulate_custom(req: &mut Request, ctx: &mut Context) {
    let mut custom = HashSet::new();
    for tool in &mut req.tools {
        let ToolKind::Custom { format } = &tool.kind else {
            continue;
        };
        let mut description = tool.description.clone().unwrap_or_default();
        if let Some(format) = format {
            let kind = format.get("type").and_then(Value::as_str).unwrap_or("text");
            if kind != "text" {
                let syntax = format.get("syntax").and_then(Value::as_str).unwrap_or("");
                let definition = format.get("definition").and_then(Value::as_str).unwrap_or("");
                description = format!(
                    "{description}\n\nPass the raw input as the string argument `input`. \
                     It must follow this {syntax} {kind}:\n{definition}"
                );
            }
        }
        tool.description = Some(description.trim().to_owned());
        tool.kind = ToolKind::Function { schema: custom_schema(), strict: None };
        custom.insert(tool.name.clone());
    }
    for turn in &mut req.turns {
        for part in &mut turn.parts {
            match part {
                Part::ToolCall { name, args, kind, .. } if *kind == CallKind::Custom => {
                    *args = json!({ "input": args }).to_string();
                    *kind = CallKind::Function;
                    custom.insert(name.clone());
                }
                Part::ToolResult { kind, .. } => *kind = CallKind::Function,
                _ => {}
            }
        }
    }
    ctx.custom_tools.extend(custom);
}

/// Tool names the target would reject, renamed everywhere they appear.
fn rename_tools(req: &mut Request, enc: &Enc<'_>, ctx: &mut Context) {
    let max = enc.profile.tool_name_max;
    let mut rename = |name: &mut String| {
        let sent = names::tool_name(enc.target, name, max);
        if sent != name.as_str() {
            let sent = sent.into_owned();
            ctx.renamed_tools.insert(sent.clone(), std::mem::replace(name, sent));
        }
    };
    for tool in &mut req.tools {
        rename(&mut tool.name);
    }
    if let Some(ToolChoice::Named(n)) = &mut req.tool_choice {
        rename(n);
    }
    for turn in &mut req.turns {
        for part in &mut turn.parts {
            match part {
                Part::ToolCall { name, .. } => rename(name),
                Part::ToolResult { name: Some(name), .. } => rename(name),
                _ => {}
            }
        }
    }
}

fn sanitise_ids(req: &mut Request, max: usize) {
    for turn in &mut req.turns {
        for part in &mut turn.parts {
            if let Part::ToolCall { id, .. } | Part::ToolResult { call_id: id, .. } = part {
                if let std::borrow::Cow::Owned(clean) = names::call_id(id, max) {
                    *id = clean;
                }
            }
        }
    }
}

fn blank(part: &Part) -> bool {
    match part {
        Part::Text { text, .. } | Part::Refusal { text } => text.trim().is_empty(),
        Part::Reasoning { text, opaque, .. } => text.is_empty() && opaque.is_none(),
        _ => false,
    }
}

/// Empty and whitespace-only text is removed everywhere ("text content
/// blocks must be non-empty"), and turns left empty with it.
fn drop_empty(turns: &mut Vec<Turn>) {
    for turn in turns.iter_mut() {
        turn.parts.retain(|p| !blank(p));
        for part in &mut turn.parts {
            if let Part::ToolResult { content, .. } = part {
                content.retain(|p| !blank(p));
            }
        }
    }
    turns.retain(|t| !t.parts.is_empty());
}

/// Every assistant tool call answered in the single next user turn, results
/// first and in call order (Messages and Gemini require it, Chat wants tool
/// messages right after the call); a missing result becomes an interrupted
/// one, a result whose call is not in the turn before it is dropped.
/// Results learn their call's name (Gemini needs it).
fn pair_results(turns: &mut Vec<Turn>, enc: &mut Enc<'_>) {
    let mut out: Vec<Turn> = Vec::with_capacity(turns.len());
    let mut input = std::mem::take(turns).into_iter().peekable();
    while let Some(turn) = input.next() {
        if turn.role != Role::Assistant {
            let parts = strip_orphans(turn.parts, enc);
            if !parts.is_empty() {
                out.push(Turn::new(turn.role, parts));
            }
            continue;
        }
        let calls: Vec<(String, String, CallKind)> = turn
            .parts
            .iter()
            .filter_map(|p| match p {
                Part::ToolCall { id, name, kind, .. } => Some((id.clone(), name.clone(), *kind)),
                _ => None,
            })
            .collect();
        out.push(turn);
        if calls.is_empty() {
            continue;
        }
        let mut results: HashMap<String, Part> = HashMap::new();
        let mut rest = Vec::new();
        while let Some(next) = input.next_if(|t| t.role == Role::User) {
            for part in next.parts {
                match part {
                    Part::ToolResult { ref call_id, .. } if calls.iter().any(|(id, ..)| id == call_id) => {
                        results.entry(call_id.clone()).or_insert(part);
                    }
                    Part::ToolResult { .. } => enc.drop("tool_result.orphan"),
                    other => rest.push(other),
                }
            }
        }
        let mut parts: Vec<Part> = calls
            .into_iter()
            .map(|(id, name, kind)| match results.remove(&id) {
                Some(Part::ToolResult { call_id, content, is_error, kind, cache, .. }) => {
                    Part::ToolResult { call_id, name: Some(name), content, is_error, kind, cache }
                }
                _ => Part::ToolResult {
                    call_id: id,
                    name: Some(name),
                    content: vec![Part::text(INTERRUPTED)],
                    is_error: true,
                    kind,
                    cache: None,
                },
            })
            .collect();
        parts.extend(rest);
        out.push(Turn::new(Role::User, parts));
    }
    *turns = out;
}

fn strip_orphans(parts: Vec<Part>, enc: &mut Enc<'_>) -> Vec<Part> {
    let before = parts.len();
    let kept: Vec<Part> = parts.into_iter().filter(|p| !matches!(p, Part::ToolResult { .. })).collect();
    if kept.len() != before {
        enc.drop("tool_result.orphan");
    }
    kept
}

/// Consecutive turns of one role become one (Messages and Gemini require
/// alternation).
fn merge_roles(turns: &mut Vec<Turn>) {
    let mut out: Vec<Turn> = Vec::with_capacity(turns.len());
    for turn in std::mem::take(turns) {
        match out.last_mut() {
            Some(last) if last.role == turn.role => last.parts.extend(turn.parts),
            _ => out.push(turn),
        }
    }
    *turns = out;
}

/// Whether the tools include one of this name that takes freeform input.
pub(crate) fn is_custom(tools: &[Tool], name: &str) -> bool {
    tools.iter().any(|t| t.name == name && matches!(t.kind, ToolKind::Custom { .. }))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn call(id: &str) -> Part {
        Part::ToolCall { id: id.into(), name: format!("f_{id}"), args: "{}".into(), kind: CallKind::Function }
    }

    fn result(id: &str) -> Part {
        Part::ToolResult {
            call_id: id.into(),
            name: None,
            content: vec![Part::text(id)],
            is_error: false,
            kind: CallKind::Function,
            cache: None,
        }
    }

    fn ids(turn: &Turn) -> Vec<String> {
        turn.parts
            .iter()
            .map(|p| match p {
                Part::ToolResult { call_id, .. } => call_id.clone(),
                Part::Text { text, .. } => format!("text:{text}"),
                _ => "?".into(),
            })
            .collect()
    }

    #[test]
    fn results_follow_their_calls_in_order_and_gaps_are_filled() {
        let mut turns = vec![
            Turn::new(Role::User, vec![result("stale"), Part::text("hi")]),
            Turn::new(Role::Assistant, vec![call("a"), call("b"), call("c")]),
            Turn::new(Role::User, vec![result("b")]),
            Turn::new(Role::User, vec![Part::text("go on"), result("a"), result("zzz")]),
        ];
        let profile = Profile::default();
        let mut drops = Drops::default();
        let mut enc = Enc { target: Format::Messages, profile: &profile, drops: &mut drops, output_limit: None };
        pair_results(&mut turns, &mut enc);
        assert_eq!(turns.len(), 3);
        assert_eq!(ids(&turns[0]), ["text:hi"]);
        assert_eq!(ids(&turns[2]), ["a", "b", "c", "text:go on"]);
        let Part::ToolResult { is_error, content, name, .. } = &turns[2].parts[2] else { panic!() };
        assert!(*is_error);
        assert_eq!(content, &vec![Part::text(INTERRUPTED)]);
        assert_eq!(name.as_deref(), Some("f_c"));
        assert_eq!(drops.rows.len(), 1);
        assert!(drops.unlisted.is_empty());
    }

    #[test]
    fn billing_line_goes_and_the_rest_stays() {
        let mut system = vec![
            Part::text("x-anthropic-billing-header: cc_version=2.0.14; cch=abc;\nYou are Claude Code."),
            Part::text("more"),
        ];
        strip_billing(&mut system);
        assert_eq!(system, vec![Part::text("You are Claude Code."), Part::text("more")]);
        let mut alone = vec![Part::text("x-anthropic-billing-header: cch=1;"), Part::text("rest")];
        strip_billing(&mut alone);
        assert_eq!(alone, vec![Part::text("rest")]);
    }
}
