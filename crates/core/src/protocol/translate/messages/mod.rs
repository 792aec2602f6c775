//! Anthropic Messages: `POST /v1/messages` (Claude Code).
//!
//! Thinking signatures are sent back to Anthropic byte for byte and never
//! to anyone else; state from other families reaches a Messages client
//! sealed in an envelope (see [`super::envelope`]) in the `signature` slot,
//! which is opened again on the way back. `input_tokens` here excludes
//! cached input, unlike every other format, and is converted both ways.

mod decode;
mod encode;
mod reply;

pub(crate) use decode::decode as decode_request;
pub(crate) use encode::encode as encode_request;
pub(crate) use reply::{decode as decode_reply, encode as encode_reply};
