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

pub(crate) use decode::decode as decode_request;
pub(crate) use encode::encode as encode_request;
pub(crate) use reply::{decode as decode_reply, encode as encode_reply};
