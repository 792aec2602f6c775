//! OpenRouter's `reasoning_details`: reasoning as a list of typed entries
//! beside (or instead of) the plain `reasoning` string, on a Chat reply's
//! message and on stream deltas.
//!
//! ```json
//! "reasoning_details": [
//!   {"type": "reasoning.text", "text": "…", "signature": "…", "format": "anthropic-claude-v1", "index": 0},
//!   {"type": "reasoning.summary", "summary": "…", "format": "openai-responses-v1", "index": 0},
//!   {"type": "reasoning.encrypted", "data": "…", "format": "…", "index": 1}
//! ]
//! ```
//!
//! The entries carry what the model behind OpenRouter needs to continue
//! (an Anthropic signature on a text entry, encrypted state), and OpenRouter
//! asks for them back unmodified, in order. So they are kept whole, as one
//! [`Opaque`] of [`Family::OpenRouter`]: a client of another format holds
//! them in the gateway's envelope, and they go back, as they came, only to
//! a provider whose profile says `reasoning_field = "reasoning_details"`.
//! Their text (text and summary entries) is the reasoning the client sees.

use serde_json::{json, Map, Value};

use crate::protocol::translate::ir::{Family, Opaque};
use crate::protocol::translate::message::Part;

const TEXT: &str = "reasoning.text";
const SUMMARY: &str = "reasoning.summary";
const ENCRYPTED: &str = "reasoning.encrypted";
/// The fields a stream sends in fragments, to be joined.
const JOINED: [&str; 3] = ["text", "summary", "data"];

/// The text an entry shows: a text entry's `text`, a summary's `summary`.
fn text_of(entry: &Map<String, Value>) -> &str {
    let field = match entry.get("type").and_then(Value::as_str) {
        Some(TEXT) => "text",
        Some(SUMMARY) => "summary",
        _ => return "",
    };
    entry.get(field).and_then(Value::as_str).unwrap_or("")
}

/// The reasoning of a whole reply's `reasoning_details`: its text, and the
/// entries as state. `None` when there are none.
pub(crate) fn decode(details: Option<&Value>) -> Option<(String, Opaque)> {
    let entries = details?.as_array().filter(|a| !a.is_empty())?;
    let text = entries.iter().filter_map(Value::as_object).map(text_of).collect::<Vec<_>>().join("");
    Some((text, state(entries)))
}

fn state(entries: &[Value]) -> Opaque {
    Opaque { origin: Family::OpenRouter, value: Value::Array(entries.to_vec()).to_string() }
}

/// A stream's `reasoning_details`, gathered delta by delta into the entries
/// a whole reply would have had: fragments of one entry (same `index` and
/// type) are joined, its other fields (a signature, sent last) filled in.
#[derive(Debug, Default)]
pub(crate) struct Gathered {
    entries: Vec<Value>,
}

impl Gathered {
    /// Takes in one delta's entries; returns the text they add.
    pub(crate) fn push(&mut self, details: &Value) -> String {
        let mut added = String::new();
        for entry in details.as_array().into_iter().flatten().filter_map(Value::as_object) {
            added.push_str(text_of(entry));
            self.merge(entry);
        }
        added
    }

    fn merge(&mut self, entry: &Map<String, Value>) {
        let same = |held: &&mut Value| {
            held.get("type") == entry.get("type")
                && held.get("index").is_some()
                && held.get("index") == entry.get("index")
        };
        let Some(held) = self.entries.iter_mut().rev().find(same).and_then(Value::as_object_mut) else {
            self.entries.push(Value::Object(entry.clone()));
            return;
        };
        for (key, value) in entry {
            let empty = value.is_null() || value.as_str() == Some("");
            match held.get_mut(key) {
                Some(Value::String(have)) if JOINED.contains(&key.as_str()) => {
                    have.push_str(value.as_str().unwrap_or(""));
                }
                Some(_) if empty => {}
                // New, or a later value (a signature after an empty one).
                _ => {
                    held.insert(key.clone(), value.clone());
                }
            }
        }
    }

    /// The entries gathered so far, as state; none are kept after.
    pub(crate) fn take(&mut self) -> Option<Opaque> {
        let entries = std::mem::take(&mut self.entries);
        (!entries.is_empty()).then(|| state(&entries))
    }
}

/// `reasoning_details` for an assistant turn going to a provider that reads
/// them: the entries it sent, as they came; for reasoning it did not send,
/// a text entry (or an encrypted one for state that is only a string).
/// Empty when the turn has no reasoning.
pub(crate) fn encode(parts: &[Part], placeholder: Option<&str>) -> Vec<Value> {
    let mut out = Vec::new();
    for part in parts {
        let Part::Reasoning { text, opaque, .. } = part else { continue };
        match opaque.as_ref().filter(|o| o.origin == Family::OpenRouter) {
            Some(o) => match serde_json::from_str::<Value>(&o.value) {
                Ok(Value::Array(entries)) => out.extend(entries),
                _ => out.push(json!({"type": ENCRYPTED, "data": o.value})),
            },
            None if !text.is_empty() => out.push(json!({"type": TEXT, "text": text})),
            None => {}
        }
    }
    if let (true, Some(p)) = (out.is_empty(), placeholder) {
        out.push(json!({"type": TEXT, "text": p}));
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A Claude model through OpenRouter, streamed: text in fragments, the
    /// signature in an entry of its own at the end, as its docs show.
    #[test]
    fn stream_fragments_join_into_the_entries_a_whole_reply_has() {
        let mut g = Gathered::default();
        let f = "anthropic-claude-v1";
        let mut text = String::new();
        for delta in [
            json!([{"type": TEXT, "text": "Let me ", "index": 0, "format": f}]),
            json!([{"type": TEXT, "text": "think.", "index": 0, "format": f}]),
            json!([{"type": TEXT, "text": "", "signature": "EqQBCkgIARAB", "index": 0, "format": f}]),
            json!([{"type": ENCRYPTED, "data": "c2Vj", "index": 1, "format": f}]),
        ] {
            text.push_str(&g.push(&delta));
        }
        assert_eq!(text, "Let me think.");
        let state = g.take().unwrap();
        assert_eq!(state.origin, Family::OpenRouter);
        let entries: Value = serde_json::from_str(&state.value).unwrap();
        assert_eq!(
            entries,
            json!([
                {"type": TEXT, "text": "Let me think.", "signature": "EqQBCkgIARAB", "index": 0, "format": f},
                {"type": ENCRYPTED, "data": "c2Vj", "index": 1, "format": f},
            ])
        );
        assert!(g.take().is_none(), "taken once");
    }

    #[test]
    fn entries_go_back_as_they_came_and_other_reasoning_as_text() {
        let sent = json!([{"type": SUMMARY, "summary": "s", "format": "openai-responses-v1", "index": 0},
                          {"type": ENCRYPTED, "data": "gAAAA", "id": "rs_1", "format": "openai-responses-v1", "index": 0}]);
        let (text, opaque) = decode(Some(&sent)).unwrap();
        assert_eq!(text, "s");
        let own = Part::Reasoning { text, opaque: Some(opaque), redacted: false, id: None };
        assert_eq!(Value::Array(encode(&[own], None)), sent);
        // Another family's state never goes; its text does.
        let foreign = Part::Reasoning {
            text: "t".into(),
            opaque: Some(Opaque { origin: Family::Anthropic, value: "sig".into() }),
            redacted: false,
            id: None,
        };
        assert_eq!(encode(&[foreign], None), [json!({"type": TEXT, "text": "t"})]);
        // State that is only a string goes in the encrypted slot.
        let raw = Part::Reasoning {
            text: String::new(),
            opaque: Some(Opaque { origin: Family::OpenRouter, value: "opaque".into() }),
            redacted: false,
            id: None,
        };
        assert_eq!(encode(&[raw], None), [json!({"type": ENCRYPTED, "data": "opaque"})]);
        assert_eq!(encode(&[], Some("tool call")), [json!({"type": TEXT, "text": "tool call"})]);
        assert!(encode(&[], None).is_empty());
        assert!(decode(Some(&json!([]))).is_none() && decode(None).is_none());
    }
}
