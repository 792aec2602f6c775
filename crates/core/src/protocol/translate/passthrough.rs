//! Reasoning state in a body that otherwise passes through untouched.
//!
//! When a provider speaks the client's format the body is forwarded as it
//! is, but a client that was once served across formats holds envelopes
//! (see [`super::envelope`]) in its opaque slots, and the provider would
//! reject them ("Invalid `signature` in `thinking` block"). [`scrub`] opens
//! each envelope: state of the provider's own family is restored to its raw
//! form, anything else is removed. It is also the retry after such a 400:
//! with [`Scrub::AllReasoning`] every reasoning block goes, and Anthropic
//! thinking is switched off. Bodies without the envelope prefix are not even
//! parsed.

use serde_json::{json, Map, Value};

use super::envelope;
use super::ir::{Family, Format};
use super::message::family;

/// What to remove.
#[derive(Clone, Copy)]
pub enum Scrub<'a> {
    /// Envelopes from other families; envelopes of the provider's own family
    /// are opened back into their raw state.
    Envelopes,
    /// Every reasoning block, signed or not (the retry after the provider
    /// rejected a signature).
    AllReasoning,
    /// Envelopes as [`Scrub::Envelopes`] does, and each raw signed value
    /// the test says the provider did not make (it is of the provider's
    /// family, but another provider of it served that turn).
    Foreign(&'a (dyn Fn(&str) -> bool + Sync)),
}

impl std::fmt::Debug for Scrub<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Scrub::Envelopes => "Envelopes",
            Scrub::AllReasoning => "AllReasoning",
            Scrub::Foreign(_) => "Foreign",
        })
    }
}

/// Stands in for an assistant turn that held nothing but removed reasoning,
/// since no format accepts an empty turn.
const OMITTED: &str = "(reasoning omitted)";

/// The body with reasoning state fixed for a provider of `format`, or `None`
/// when nothing needed to change.
pub fn scrub(format: Format, body: &[u8], what: Scrub<'_>) -> Option<Vec<u8>> {
    // Chat has no opaque slots, so nothing to fix, and no scan: this runs
    // for every native Chat request.
    if format == Format::Chat {
        return None;
    }
    if matches!(what, Scrub::Envelopes) && memchr::memmem::find(body, b"sy1.").is_none() {
        return None;
    }
    let mut v: Value = serde_json::from_slice(body).ok()?;
    let own = family(format);
    let changed = match format {
        Format::Messages => messages(&mut v, own, what),
        Format::Responses => responses(&mut v, own, what),
        Format::Gemini => gemini(&mut v, own, what),
        Format::Chat => false,
    };
    changed.then(|| serde_json::to_vec(&v).unwrap_or_else(|_| body.to_vec()))
}

/// What to do with one opaque value.
enum Verdict {
    Keep,
    /// Restore the raw state (and the text it covers, when known).
    Restore {
        value: String,
        text: Option<String>,
        id: Option<String>,
    },
    Remove,
}

fn judge(value: Option<&str>, own: Family, what: Scrub<'_>) -> Verdict {
    if matches!(what, Scrub::AllReasoning) {
        return Verdict::Remove;
    }
    let Some(value) = value else {
        return Verdict::Keep;
    };
    match (envelope::open(value), what) {
        (None, Scrub::Foreign(made_here)) if !made_here(value) => Verdict::Remove,
        (None, _) => Verdict::Keep,
        (Some((origin, sealed)), _) => match sealed.value {
            Some(raw) if origin == own => Verdict::Restore { value: raw, text: sealed.text, id: sealed.id },
            _ => Verdict::Remove,
        },
    }
}

fn messages(v: &mut Value, own: Family, what: Scrub<'_>) -> bool {
    let mut changed = false;
    let Some(list) = v.get_mut("messages").and_then(Value::as_array_mut) else {
        return false;
    };
    for msg in list.iter_mut() {
        let Some(blocks) = msg.get_mut("content").and_then(Value::as_array_mut) else {
            continue;
        };
        let before = blocks.len();
        blocks.retain_mut(|b| {
            let (slot, text_key) = match b.get("type").and_then(Value::as_str) {
                Some("thinking") => ("signature", Some("thinking")),
                Some("redacted_thinking") => ("data", None),
                _ => return true,
            };
            match judge(b.get(slot).and_then(Value::as_str), own, what) {
                Verdict::Keep => true,
                Verdict::Restore { value, text, .. } => {
                    b[slot] = json!(value);
                    if let (Some(k), Some(t)) = (text_key, text) {
                        b[k] = json!(t);
                    }
                    changed = true;
                    true
                }
                Verdict::Remove => false,
            }
        });
        if blocks.len() != before {
            changed = true;
            if blocks.is_empty() {
                blocks.push(json!({"type": "text", "text": OMITTED}));
            }
        }
    }
    if changed && thinking_on(v) && (matches!(what, Scrub::AllReasoning) || !tool_loop_starts_with_thinking(v)) {
        v["thinking"] = json!({"type": "disabled"});
        if let Some(m) = v.as_object_mut() {
            remove_effort(m);
        }
        strip_all_thinking(v);
    }
    changed
}

fn thinking_on(v: &Value) -> bool {
    matches!(v.pointer("/thinking/type").and_then(Value::as_str), Some("enabled" | "adaptive"))
}

/// `output_config.effort` goes with adaptive thinking.
fn remove_effort(m: &mut Map<String, Value>) {
    if let Some(Value::Object(c)) = m.get_mut("output_config") {
        c.remove("effort");
        if c.is_empty() {
            m.remove("output_config");
        }
    }
}

fn is_thinking(b: &Value) -> bool {
    matches!(b.get("type").and_then(Value::as_str), Some("thinking" | "redacted_thinking"))
}

/// Anthropic's rule: inside a tool loop, the assistant turn that opened it
/// starts with thinking.
fn tool_loop_starts_with_thinking(v: &Value) -> bool {
    let Some(list) = v.get("messages").and_then(Value::as_array) else {
        return true;
    };
    let in_loop = list.last().is_some_and(|m| {
        m.get("role") == Some(&json!("user"))
            && m.get("content").and_then(Value::as_array).is_some_and(|c| c.iter().any(|b| b["type"] == "tool_result"))
    });
    if !in_loop {
        return true;
    }
    let assistant = list.iter().rev().find(|m| m.get("role") == Some(&json!("assistant")));
    assistant.and_then(|m| m.pointer("/content/0")).is_some_and(is_thinking)
}

fn strip_all_thinking(v: &mut Value) {
    for msg in v.get_mut("messages").and_then(Value::as_array_mut).into_iter().flatten() {
        if let Some(blocks) = msg.get_mut("content").and_then(Value::as_array_mut) {
            let before = blocks.len();
            blocks.retain(|b| !is_thinking(b));
            if blocks.is_empty() && before > 0 {
                blocks.push(json!({"type": "text", "text": OMITTED}));
            }
        }
    }
}

fn responses(v: &mut Value, own: Family, what: Scrub<'_>) -> bool {
    let Some(items) = v.get_mut("input").and_then(Value::as_array_mut) else {
        return false;
    };
    let mut changed = false;
    items.retain_mut(|item| {
        if item.get("type").and_then(Value::as_str) != Some("reasoning") {
            return true;
        }
        match judge(item.get("encrypted_content").and_then(Value::as_str), own, what) {
            Verdict::Keep => true,
            Verdict::Restore { value, id, .. } => {
                item["encrypted_content"] = json!(value);
                if let Some(id) = id {
                    item["id"] = json!(id);
                }
                changed = true;
                true
            }
            Verdict::Remove => {
                changed = true;
                false
            }
        }
    });
    changed
}

/// Google's documented value for a call whose signature is unknown.
const SKIP_SIGNATURE: &str = "skip_thought_signature_validator";

fn gemini(v: &mut Value, own: Family, what: Scrub<'_>) -> bool {
    let mut changed = false;
    for content in v.get_mut("contents").and_then(Value::as_array_mut).into_iter().flatten() {
        let Some(parts) = content.get_mut("parts").and_then(Value::as_array_mut) else {
            continue;
        };
        let before = parts.len();
        parts.retain_mut(|p| {
            let thought = p.get("thought") == Some(&json!(true));
            let sig = p.get("thoughtSignature").and_then(Value::as_str);
            let verdict = match (what, sig, thought) {
                (Scrub::AllReasoning, _, true) => Verdict::Remove,
                (Scrub::AllReasoning, None, false) => Verdict::Keep,
                (Scrub::Foreign(_), ..) => judge(sig, own, what),
                _ => judge(sig, own, Scrub::Envelopes),
            };
            match verdict {
                Verdict::Keep => true,
                Verdict::Restore { value, text, .. } => {
                    p["thoughtSignature"] = json!(value);
                    if let (true, Some(t)) = (thought, text) {
                        p["text"] = json!(t);
                    }
                    changed = true;
                    true
                }
                Verdict::Remove if thought => false,
                Verdict::Remove => {
                    if let Some(m) = p.as_object_mut() {
                        m.remove("thoughtSignature");
                        if m.contains_key("functionCall") {
                            m.insert("thoughtSignature".into(), json!(SKIP_SIGNATURE));
                        }
                    }
                    changed = true;
                    true
                }
            }
        });
        if parts.len() != before {
            changed = true;
            if parts.is_empty() {
                parts.push(json!({"text": OMITTED}));
            }
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::protocol::translate::envelope::{seal, Sealed};

    fn sealed(origin: Family, text: &str, value: &str) -> String {
        seal(origin, &Sealed { text: Some(text.into()), value: Some(value.into()), ..Sealed::default() })
    }

    fn parse(b: Option<Vec<u8>>) -> Value {
        serde_json::from_slice(&b.unwrap()).unwrap()
    }

    #[test]
    fn untouched_bodies_are_not_parsed() {
        let body = br#"{"messages":[{"role":"user","content":"hi"}]}"#;
        assert_eq!(scrub(Format::Messages, body, Scrub::Envelopes), None);
        assert_eq!(scrub(Format::Chat, b"not even json sy1.", Scrub::Envelopes), None);
    }

    #[test]
    fn claude_code_history_from_another_provider_reaches_anthropic_clean() {
        let body = json!({
            "model": "claude", "max_tokens": 4000, "thinking": {"type": "enabled", "budget_tokens": 2000},
            "messages": [
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "plan", "signature": sealed(Family::OpenAi, "plan", "gAAAA")},
                    {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]}
            ]
        });
        let out = parse(scrub(Format::Messages, body.to_string().as_bytes(), Scrub::Envelopes));
        assert_eq!(
            out["messages"][1]["content"],
            json!([{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}])
        );
        // The loop no longer starts with thinking: thinking goes off.
        assert_eq!(out["thinking"], json!({"type": "disabled"}));
    }

    #[test]
    fn own_family_envelopes_are_opened() {
        let body = json!({"model": "gpt-5", "input": [
            {"type": "reasoning", "summary": [], "encrypted_content": seal(Family::OpenAi, &Sealed { value: Some("gAAAA".into()), id: Some("rs_1".into()), ..Sealed::default() })},
            {"type": "reasoning", "summary": [], "encrypted_content": sealed(Family::Anthropic, "t", "sig")},
            {"type": "reasoning", "summary": [], "encrypted_content": "gAAAA_raw"}
        ]});
        let out = parse(scrub(Format::Responses, body.to_string().as_bytes(), Scrub::Envelopes));
        assert_eq!(
            out["input"],
            json!([
                {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA"},
                {"type": "reasoning", "summary": [], "encrypted_content": "gAAAA_raw"}
            ])
        );
        let gem = json!({"contents": [{"role": "model", "parts": [
            {"text": "x", "thought": true, "thoughtSignature": sealed(Family::Anthropic, "x", "sig")},
            {"functionCall": {"name": "f", "args": {}}, "thoughtSignature": sealed(Family::Gemini, "", "CiQB")},
            {"functionCall": {"name": "g", "args": {}}, "thoughtSignature": sealed(Family::OpenAi, "", "gA")}
        ]}]});
        let out = parse(scrub(Format::Gemini, gem.to_string().as_bytes(), Scrub::Envelopes));
        assert_eq!(
            out["contents"][0]["parts"],
            json!([
                {"functionCall": {"name": "f", "args": {}}, "thoughtSignature": "CiQB"},
                {"functionCall": {"name": "g", "args": {}}, "thoughtSignature": SKIP_SIGNATURE}
            ])
        );
    }

    #[test]
    fn the_retry_after_a_rejected_signature_strips_all_thinking() {
        let body = json!({
            "model": "claude", "max_tokens": 4000, "thinking": {"type": "adaptive"}, "output_config": {"effort": "high"},
            "messages": [
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "EqQB"}]},
                {"role": "user", "content": "again"}
            ]
        });
        let out = parse(scrub(Format::Messages, body.to_string().as_bytes(), Scrub::AllReasoning));
        assert_eq!(out["messages"][1]["content"], json!([{"type": "text", "text": OMITTED}]));
        assert_eq!(out["thinking"], json!({"type": "disabled"}));
        assert!(out.get("output_config").is_none());
    }
}
