//! OpenAI Chat Completions: `POST /v1/chat/completions`.
//!
//! Chat is the poorest of the four formats: it has no place for thinking
//! signatures, cache markers, tool-result errors or per-block structure, so
//! most of what is dropped on the way to a Chat provider is dropped here
//! (each through the drop table). Reasoning is sent back only under a
//! profile that reads it (`reasoning_content` for DeepSeek-style servers,
//! `reasoning_details` for OpenRouter: see [`details`]).

mod decode;
pub(crate) mod details;
mod encode;
mod reply;

pub(crate) use decode::{decode as decode_request, response_format, set_effort};
pub(crate) use encode::{
    cache_key, encode as encode_request, extras, openai_user, response_format as encode_response_format,
};
pub(crate) use reply::{decode as decode_reply, encode as encode_reply};
