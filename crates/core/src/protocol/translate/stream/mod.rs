//! Reply streams translated event by event: a provider's stream is decoded
//! into [`StreamEvent`]s ([`Decoder`]) and encoded as the client's stream
//! ([`Encoder`]); [`StreamTranslator`] joins the two for the gateway.
//!
//! Nothing is buffered beyond what one event needs, except where a client
//! format demands it (translation.md §D): the Responses done events repeat
//! an item's whole text, a Gemini client gets each tool call whole, and a
//! Responses client gets overlapping blocks one after another.
//!
//! # Layout
//! - [`frames`]: SSE in (the transport rules of §D.0) and out;
//! - [`decode`]: one decoder per provider format;
//! - [`encode`]: one encoder per client format;
//! - [`envelope`]: opaque reasoning state carried through another family's client;
//! - [`custom`]: custom-tool input wrapped and unwrapped as it streams;
//! - [`maps`]: stop reasons, error classes and usage in each format's words.

pub mod custom;
mod decode;
mod encode;
pub mod envelope;
mod frames;
pub(crate) mod maps;
mod translator;

#[cfg(test)]
mod tests;

pub use decode::Decoder;
pub use encode::{Encoder, Options};
pub use translator::StreamTranslator;

#[cfg(test)]
use crate::protocol::translate::ir::StreamEvent;

/// Whether a tool-call id was made up for a Gemini call that had none
/// (such an id is never sent back to Gemini).
pub fn is_synthetic_gemini_id(id: &str) -> bool {
    decode::is_synthetic_gemini_id(id)
}

/// The tool-call id a Messages client is given for a provider's id:
/// Anthropic's charset and length, the same every time for the same id.
pub fn messages_tool_id(id: &str) -> String {
    encode::messages_tool_id(id)
}

/// Decodes a whole recorded stream, for tests.
#[cfg(test)]
fn decode_all(format: crate::protocol::translate::ir::Format, bytes: &[u8]) -> Vec<StreamEvent> {
    let mut decoder = Decoder::new(format);
    let mut events = Vec::new();
    decoder.push(bytes, &mut events);
    decoder.finish(&mut events);
    events
}
