//! Google Gemini: `models/{model}:generateContent` (Gemini CLI).
//!
//! Gemini's tool calls often have no ids: decoding synthesises them
//! (`call_…`), pairing each function response with the first open call of
//! the same name; encoding sends none and keeps responses in call order,
//! one `user` content per model turn, as Gemini requires. A thought
//! signature on a part that is not a thought travels as a reasoning part of
//! its own just before that part, and is put back on it.

mod decode;
mod encode;
mod reply;

use serde_json::{json, Value};

pub(crate) use decode::decode as decode_request;
pub(crate) use encode::encode as encode_request;
pub(crate) use reply::{decode as decode_reply, encode as encode_reply};

/// Gemini parts being written, and the thought signature waiting for the
/// part it goes on: the one after the thought, or, when none follows, an
/// empty text part of its own.
#[derive(Debug, Default)]
struct Signed {
    parts: Vec<Value>,
    pending: Option<String>,
}

impl Signed {
    /// Adds `part`, carrying the waiting signature if there is one.
    fn push(&mut self, mut part: Value) {
        if let Some(sig) = self.pending.take() {
            part["thoughtSignature"] = json!(sig);
        }
        self.parts.push(part);
    }

    /// The parts, with a signature nothing followed last.
    fn finish(mut self) -> Vec<Value> {
        if let Some(sig) = self.pending.take() {
            self.parts.push(json!({"text": "", "thoughtSignature": sig}));
        }
        self.parts
    }
}
