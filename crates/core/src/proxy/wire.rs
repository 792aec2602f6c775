//! How an attempt speaks to its provider: in the client's own format, byte
//! for byte, or translated to a format the provider speaks, with the answer
//! translated back. Which one is decided per provider from its kind and
//! profile; the translation itself is [`crate::protocol::translate`]'s.
//!
//! A translated answer that is not a stream is read whole before the
//! attempt counts as answered, so a reply that cannot be read in the
//! provider's format is a failed attempt (and the request falls back), not
//! a broken answer to the client.

use std::time::Duration;

use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderValue, Response, StatusCode};
use bytes::{Bytes, BytesMut};

use crate::config::ProviderConfig;
use crate::policy::classify::Outcome;
use crate::protocol::translate::passthrough::Scrub;
use crate::protocol::translate::stream::{Options, StreamTranslator};
use crate::protocol::translate::Profile;
use crate::protocol::translate::{self, error as terror, Context, Format, Untranslatable};
use crate::protocol::Endpoint;
use crate::proxy::attempt::{error_chain, Attempted, Upstream};
use crate::proxy::body::RequestHead;

/// The largest translated answer read whole; a longer one fails the attempt.
const MAX_TRANSLATED_BODY: usize = 32 * 1024 * 1024;

/// A translated attempt: what was sent, and what the answer needs.
#[derive(Debug, Clone)]
pub struct Translated {
    pub client: Format,
    pub upstream: Format,
    /// The endpoint the provider is called on.
    pub endpoint: Endpoint,
    /// The body sent.
    pub body: Bytes,
    pub ctx: Context,
    /// What the translation left out, each with its reason; what the client
    /// sent that the translator does not know, each with what became of it.
    pub dropped: Vec<String>,
}

impl Translated {
    /// `client → upstream`, as history and the dashboard show it.
    pub fn label(&self) -> String {
        format!("{} → {}", self.client, self.upstream)
    }

    /// The stream translator for the answer, when it is a successful stream.
    pub fn stream(&self, sse_success: bool, head: &RequestHead) -> Option<Box<StreamTranslator>> {
        let created = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let options = Options { include_usage: head.has_stream_options, created };
        sse_success.then(|| Box::new(StreamTranslator::new(self.upstream, self.client, self.ctx.clone(), options)))
    }

    /// The query string sent upstream: the client's belongs to its own
    /// protocol (`?beta=true`, `?alt=sse`) and goes to no other; a Gemini
    /// stream asks for SSE.
    pub fn query(&self) -> Option<&'static str> {
        (self.endpoint == Endpoint::GeminiStream).then_some("alt=sse")
    }
}

/// The request for `provider` in the format it speaks, or `None` when it
/// speaks the client's own. `session` names the conversation
/// ([`crate::session`]): an OpenAI-format provider caches by
/// `prompt_cache_key`, so a request that names none is given the session's.
pub fn translate(
    endpoint: Endpoint,
    (head, body): (&RequestHead, &[u8]),
    provider: &ProviderConfig,
    profile: &Profile,
    upstream_model: &str,
    session: Option<&str>,
) -> Result<Option<Translated>, Untranslatable> {
    if provider.speaks(endpoint) {
        return Ok(None);
    }
    let Some(client) = endpoint.format() else {
        return Err(Untranslatable::new("", format!("{endpoint} is not translated to other formats")));
    };
    let to = provider.translated_format();
    let mut request = translate::decode_request(client, body)?;
    if client == Format::Gemini {
        // Gemini names its model and whether it streams in the path.
        request.model.clone_from(&head.model);
        request.stream = head.stream;
    }
    let keyed_by_caller = request.prompt_cache_key.is_some() || request.user.is_some();
    if matches!(to, Format::Chat | Format::Responses) && !keyed_by_caller {
        request.prompt_cache_key = session.map(str::to_owned);
    }
    let mut ctx = Context { client_model: head.model.clone(), ..Context::default() };
    let encoded = translate::encode_request_report(to, &request, profile, upstream_model, &mut ctx)?;
    let upstream_endpoint = match to {
        Format::Chat => Endpoint::ChatCompletions,
        Format::Responses => Endpoint::Responses,
        Format::Messages => Endpoint::Messages,
        Format::Gemini if head.stream => Endpoint::GeminiStream,
        Format::Gemini => Endpoint::GeminiGenerate,
    };
    let dropped = encoded.drops.describe();
    let body = Bytes::from(encoded.body);
    Ok(Some(Translated { client, upstream: to, endpoint: upstream_endpoint, body, ctx, dropped }))
}

/// A body going to a provider of the client's own format, with the
/// reasoning envelopes an earlier translated answer left in the client's
/// history opened for it (its own family's) or taken out (another's): the
/// provider would reject them. `None` when the body has none, which is
/// found without parsing it. With [`Scrub::AllReasoning`], every reasoning
/// block goes (the repair after a rejected signature).
pub fn scrubbed(
    endpoint: Endpoint,
    path_model: Option<&str>,
    body: &[u8],
    what: Scrub<'_>,
) -> Option<(Bytes, RequestHead)> {
    let format = endpoint.format()?;
    let clean = translate::passthrough::scrub(format, body, what)?;
    let head = match path_model {
        Some(model) => crate::proxy::body::inspect_with_model(&clean, model, endpoint.streams()),
        None => crate::proxy::body::inspect(&clean),
    };
    Some((Bytes::from(clean), head.ok()?))
}

/// A translated answer, made ready to relay: a whole body read and written
/// in the client's format; an error in the client's error shape. A stream
/// is left as it is: the relay translates it event by event.
pub async fn answer(mut attempted: Attempted, translated: &Translated, within: Duration) -> Attempted {
    let Some(mut upstream) = attempted.upstream.take() else { return attempted };
    if upstream.sse && upstream.status.is_success() {
        attempted.upstream = Some(upstream);
        return attempted;
    }
    let body = match tokio::time::timeout(within, read_whole(&mut upstream)).await {
        Ok(Ok(body)) => body,
        Ok(Err(detail)) => return Attempted { outcome: Outcome::StreamDropped, detail, ..attempted },
        Err(_) => {
            let detail = "the answer did not arrive whole in time".to_string();
            return Attempted { outcome: Outcome::Timeout, detail, ..attempted };
        }
    };
    let (status, out) = if upstream.status.is_success() {
        match translate::translate_reply(translated.upstream, translated.client, &body, &translated.ctx) {
            Ok(out) => (upstream.status, out),
            Err(e) => {
                // The provider said 200, but what it sent is no answer.
                let detail = format!("the {} answer could not be read: {}", translated.upstream, e.message);
                return Attempted { outcome: Outcome::Status(StatusCode::BAD_GATEWAY), detail, ..attempted };
            }
        }
    } else {
        let retry_after = upstream.headers.get(header::RETRY_AFTER).and_then(|v| v.to_str().ok());
        let error =
            terror::decode_error(translated.upstream, upstream.status, &body).with_retry_after_header(retry_after);
        let (status, out) = terror::encode_error(translated.client, &error);
        (if status.is_success() { upstream.status } else { status }, out)
    };
    rewrite_head(&mut upstream.headers);
    // The error text was scrubbed as it was read; what is held now is ours.
    upstream.scrub = None;
    upstream.held = Bytes::from(out);
    upstream.status = status;
    attempted.outcome = Outcome::Status(status);
    attempted.upstream = Some(upstream);
    attempted
}

/// The head of a translated body: JSON of another length, none of the
/// provider's framing.
fn rewrite_head(headers: &mut HeaderMap) {
    headers.remove(header::CONTENT_LENGTH);
    headers.remove(header::CONTENT_ENCODING);
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
}

/// The rest of the provider's body after what is held, scrubbed when it is
/// an error text.
async fn read_whole(upstream: &mut Upstream) -> Result<Vec<u8>, String> {
    let mut body = BytesMut::from(&upstream.held[..]);
    while let Some(chunk) = upstream.rest.data().await {
        let chunk = chunk.map_err(|e| format!("the answer broke off: {}", error_chain(&e)))?;
        if body.len() + chunk.len() > MAX_TRANSLATED_BODY {
            return Err(format!("the answer is larger than {MAX_TRANSLATED_BODY} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(match &upstream.scrub {
        Some(scrub) => scrub.bytes(&body).into_owned(),
        None => body.to_vec(),
    })
}

/// A token count no provider in the chain can give (only Anthropic's and
/// Gemini's APIs count tokens): a local estimate, in the client's shape,
/// labelled as one with `x-switchyard-token-count: estimate`.
pub fn estimated_count(endpoint: Endpoint, body: &[u8], head: &RequestHead) -> Result<Response<Body>, Untranslatable> {
    let format = match endpoint {
        Endpoint::GeminiCountTokens => Format::Gemini,
        _ => Format::Messages,
    };
    let mut request = translate::decode_request(format, body)?;
    request.model.clone_from(&head.model);
    let tokens = translate::estimate::estimate_input_tokens(&request);
    let mut response = Response::new(Body::from(translate::models::encode_token_count(format, tokens)));
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert("x-switchyard-token-count", HeaderValue::from_static("estimate"));
    Ok(response)
}
