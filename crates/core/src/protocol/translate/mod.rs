//! Translation between the four wire formats, hub and spoke: every format
//! decodes into the typed intermediate form in [`ir`] and [`message`] and
//! encodes out of it, so four formats cost four codecs each way instead of
//! twelve translators.
//!
//! Passthrough is not done here: when a provider speaks the client's own
//! format the body crosses byte for byte and none of this runs.
//!
//! A request goes [`decode_request`] → [`encode_request`] (or both at once,
//! [`translate_request`]), which also fills the [`Context`] its reply needs;
//! the reply goes [`translate_reply`] with that context; a provider's error
//! goes [`error::decode_error`] → [`error::encode_error`]. What the target cannot express
//! is dropped only through the table in [`dropped`]; what would change the
//! request's meaning is refused with [`Untranslatable`] (the provider is then
//! skipped for this request).
//!
//! # Stored state
//!
//! The gateway does not carry Responses conversations itself. Codex sends
//! `store: false`, the full input every turn and no `previous_response_id`,
//! so stateless translation is exact for it. A request that relies on state
//! a provider stored (`previous_response_id`, `conversation`, `background`,
//! a stored `prompt`, `item_reference`, Gemini `cachedContent`) is refused
//! for a provider without that state, naming the field, rather than sent
//! without the history it refers to.
//!
//! # Layout
//! - [`ir`]: formats, families, stop reasons, token counts, stream events,
//!   the [`Context`].
//! - [`message`]: the intermediate request and reply.
//! - `chat`, `responses`, `messages`, `gemini`: one codec per format;
//!   `openai` holds what Chat and Responses spell alike.
//! - `shape`: passes every request goes through before encoding.
//! - [`profile`]: per-provider capabilities the encoders consult;
//!   [`quirks`]: the per-model corrections to them.
//! - [`dropped`]: the drop table.
//! - [`envelope`]: opaque reasoning state across families.
//! - [`names`], [`schema`]: tool names/ids and schemas made acceptable.
//! - [`passthrough`]: envelopes scrubbed from a body that is otherwise
//!   forwarded as it is, and the retry after a rejected signature.
//! - [`error`]: errors across formats.
//! - `vocab`: each format's words for stop reasons and error classes, read by
//!   whole replies, streams and error bodies alike.
//! - [`estimate`], [`models`]: token estimates, model lists.
//! - [`stream`]: reply streams, decoded and encoded event by event.
//! - [`resume`]: the request that finishes a reply another provider broke off.

mod chat;
pub mod dropped;
pub mod envelope;
pub mod error;
pub mod estimate;
mod gemini;
pub mod ir;
pub mod message;
mod messages;
pub mod models;
pub mod names;
mod openai;
pub mod passthrough;
pub mod profile;
pub mod quirks;
mod reply;
mod responses;
pub mod resume;
pub mod schema;
mod shape;
pub mod stream;
mod vocab;
mod wire;

#[cfg(test)]
mod tests;

pub use dropped::Drops;
pub use error::{Untranslatable, UpstreamError};
pub use ir::{Context, Format};
pub use message::{Reply, Request};
pub use profile::Profile;

/// A translated request body and what was dropped to make it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoded {
    pub body: Vec<u8>,
    /// Source fields dropped by the decoder and target fields dropped by the
    /// encoder, each with its reason from the drop table.
    pub drops: Drops,
}

/// Reads a client's request body in `format`. Gemini's model and streaming
/// flag are in the URL: the caller sets [`Request::model`] and
/// [`Request::stream`] after decoding.
pub fn decode_request(format: Format, body: &[u8]) -> Result<Request, Untranslatable> {
    match format {
        Format::Chat => chat::decode_request(body),
        Format::Responses => responses::decode_request(body),
        Format::Messages => messages::decode_request(body),
        Format::Gemini => gemini::decode_request(body),
    }
}

/// Writes `req` for a provider speaking `target`, under its `profile`, naming
/// `upstream_model` (Gemini bodies name no model: it goes in the URL).
/// Fills `ctx` with what the reply's translation needs; the client's model
/// is taken from the request unless `ctx` already names one.
pub fn encode_request(
    target: Format,
    req: &Request,
    profile: &Profile,
    upstream_model: &str,
    ctx: &mut Context,
) -> Result<Vec<u8>, Untranslatable> {
    encode_request_report(target, req, profile, upstream_model, ctx).map(|e| e.body)
}

/// [`encode_request`], also saying what was dropped.
pub fn encode_request_report(
    target: Format,
    req: &Request,
    profile: &Profile,
    upstream_model: &str,
    ctx: &mut Context,
) -> Result<Encoded, Untranslatable> {
    if ctx.client_model.is_empty() {
        ctx.client_model = req.model.clone();
    }
    let mut drops = req.drops.clone();
    let mut req = req.clone();
    // What the model itself rejects corrects what the provider takes.
    let profile = profile.for_model(upstream_model);
    let output_limit = profile.max_output_tokens.or_else(|| quirks::output_limit(upstream_model));
    let mut enc = shape::Enc { target, profile: &profile, drops: &mut drops, output_limit };
    shape::prepare(&mut req, &mut enc, ctx)?;
    let body = match target {
        Format::Chat => chat::encode_request(&req, upstream_model, &mut enc),
        Format::Responses => responses::encode_request(&req, upstream_model, &mut enc),
        Format::Messages => messages::encode_request(&req, upstream_model, &mut enc),
        Format::Gemini => gemini::encode_request(&req, &mut enc),
    };
    Ok(Encoded { body: serde_json::to_vec(&body).unwrap_or_default(), drops })
}

/// Decodes a `from` body and encodes it for a `to` provider.
pub fn translate_request(
    from: Format,
    to: Format,
    body: &[u8],
    profile: &Profile,
    upstream_model: &str,
) -> Result<(Vec<u8>, Context), Untranslatable> {
    translate_request_report(from, to, body, profile, upstream_model).map(|(e, ctx)| (e.body, ctx))
}

/// [`translate_request`], also saying what was dropped.
pub fn translate_request_report(
    from: Format,
    to: Format,
    body: &[u8],
    profile: &Profile,
    upstream_model: &str,
) -> Result<(Encoded, Context), Untranslatable> {
    let req = decode_request(from, body)?;
    let mut ctx = Context::default();
    let encoded = encode_request_report(to, &req, profile, upstream_model, &mut ctx)?;
    Ok((encoded, ctx))
}

/// Reads a provider's non-streamed success body in `format`. A reply that is
/// really a failure (Responses `failed`, Gemini `MALFORMED_FUNCTION_CALL`,
/// tool calls without names, a Chat reply without a finish reason) is an
/// [`UpstreamError`], to be classified and retried like any other.
pub fn decode_reply(format: Format, body: &[u8]) -> Result<Reply, UpstreamError> {
    match format {
        Format::Chat => chat::decode_reply(body),
        Format::Responses => responses::decode_reply(body),
        Format::Messages => messages::decode_reply(body),
        Format::Gemini => gemini::decode_reply(body),
    }
}

/// Writes `reply` for a client speaking `format`: its id prefix, its model
/// alias, its tool names, and custom tool calls as such for Responses.
pub fn encode_reply(format: Format, reply: &Reply, ctx: &Context) -> Result<Vec<u8>, UpstreamError> {
    let reply = reply::finish(reply.clone())?;
    let body = match format {
        Format::Chat => chat::encode_reply(&reply, ctx),
        Format::Responses => responses::encode_reply(&reply, ctx),
        Format::Messages => messages::encode_reply(&reply, ctx),
        Format::Gemini => gemini::encode_reply(&reply, ctx),
    };
    Ok(serde_json::to_vec(&body).unwrap_or_default())
}

/// Decodes a `from` provider's reply and encodes it for a `to` client.
pub fn translate_reply(from: Format, to: Format, body: &[u8], ctx: &Context) -> Result<Vec<u8>, UpstreamError> {
    encode_reply(to, &decode_reply(from, body)?, ctx)
}
