//! OpenAI Responses: `POST /v1/responses` (Codex CLI).
//!
//! # Stored state
//!
//! Responses can be stateful: `previous_response_id` continues a response
//! OpenAI stored, `conversation` a stored conversation. The gateway does not
//! carry conversations itself. Codex sends `store: false`, the whole input
//! every turn and no `previous_response_id`, so translating it statelessly is
//! exact. A request that relies on stored state (`previous_response_id`,
//! `conversation`, `background`, a stored `prompt`, an `item_reference`) is
//! refused for a provider without that state, with the reason, rather than
//! sent without the history it refers to. `store: true` alone is dropped
//! (noted): nothing can refer to the result later except through a
//! `previous_response_id`, which would then be refused.

mod decode;
mod encode;
mod reply;

pub(crate) use decode::decode as decode_request;
pub(crate) use encode::encode as encode_request;
pub(crate) use reply::{decode as decode_reply, encode as encode_reply};
