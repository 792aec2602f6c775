//! A cached answer handed to the client in the form it asked for, whichever
//! form was stored, with the cache's headers.
//!
//! | stored \ asked | JSON | stream |
//! |---|---|---|
//! | JSON | as stored | re-framed ([`super::reframe`]) |
//! | stream | folded ([`super::fold`]) | as stored, byte for byte |
//!
//! A chat stream is stored as the provider sent it, usage chunk included
//! when the gateway asked for one; replayed to a client that did not ask
//! for usage, the usage chunk and the `"usage":null` members are taken out
//! again by the same tap the live path uses.
//!
//! Headers: `x-switchyard-cache: hit|miss|stale|bypass` ([`set_headers`],
//! for live answers too), `age` in whole seconds for answers from the
//! cache, and `Warning: 110 - "Response is Stale"` on a stale one.

use std::time::Duration;

use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderValue, Response, StatusCode};
use bytes::Bytes;

use super::fold::{self, FoldError};
use super::key::Wire;
use super::metrics::CacheStatus;
use super::reframe::{self, ReframeError};
use super::store::{Entry, Form};
use crate::protocol::usage::Tap;
use crate::protocol::Endpoint;

pub const X_SWITCHYARD_CACHE: &str = "x-switchyard-cache";
const STALE_WARNING: &str = "110 - \"Response is Stale\"";
const JSON: &str = "application/json";
const EVENT_STREAM: &str = "text/event-stream";

/// What the client asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ask {
    pub wire: Wire,
    pub stream: bool,
    /// Chat and completions: the client set `stream_options.include_usage`.
    pub include_usage: bool,
}

/// A cached answer ready to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replay {
    pub status: StatusCode,
    pub content_type: HeaderValue,
    pub body: Bytes,
    pub stream: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplayError {
    #[error(transparent)]
    Reframe(#[from] ReframeError),
    #[error(transparent)]
    Fold(#[from] FoldError),
    #[error("the stored status {0} is not an HTTP status")]
    Status(u16),
}

/// `entry` in the form `ask` wants. An error means the entry cannot serve
/// this request (treat it as a miss).
pub fn replay(entry: &Entry, ask: Ask) -> Result<Replay, ReplayError> {
    let status = StatusCode::from_u16(entry.status).map_err(|_| ReplayError::Status(entry.status))?;
    let stream = ask.stream && ask.wire != Wire::Embeddings;
    let (body, content_type) = match (entry.form, stream) {
        (Form::Json, false) => (entry.body.clone(), stored_type(entry, JSON)),
        (Form::Json, true) => (
            Bytes::from(reframe::to_stream(ask.wire, &entry.body, ask.include_usage)?),
            HeaderValue::from_static(EVENT_STREAM),
        ),
        (Form::Sse, true) => (strip_usage(ask, &entry.body), stored_type(entry, EVENT_STREAM)),
        (Form::Sse, false) => (Bytes::from(fold::to_json(ask.wire, &entry.body)?), HeaderValue::from_static(JSON)),
    };
    Ok(Replay { status, content_type, body, stream })
}

fn stored_type(entry: &Entry, default: &'static str) -> HeaderValue {
    HeaderValue::from_str(&entry.content_type).unwrap_or(HeaderValue::from_static(default))
}

/// A stored chat stream without the usage the client did not ask for.
fn strip_usage(ask: Ask, stream: &Bytes) -> Bytes {
    let endpoint = match ask.wire {
        Wire::Chat => Endpoint::ChatCompletions,
        _ => return stream.clone(),
    };
    if ask.include_usage {
        return stream.clone();
    }
    let mut tap = Tap::new(endpoint, true, true, None);
    let mut out = tap.observe(stream.clone()).to_vec();
    out.extend_from_slice(&tap.flush());
    Bytes::from(out)
}

/// Sets `x-switchyard-cache`, and for an answer from the cache its `age`
/// (and the stale warning).
pub fn set_headers(headers: &mut HeaderMap, status: CacheStatus, age: Option<Duration>) {
    headers.insert(X_SWITCHYARD_CACHE, HeaderValue::from_static(status.as_str()));
    if let Some(age) = age {
        headers.insert(header::AGE, HeaderValue::from(age.as_secs()));
    }
    if status == CacheStatus::Stale {
        headers.insert(header::WARNING, HeaderValue::from_static(STALE_WARNING));
    }
}

/// The client's response for a replay: `status` is `Hit` or `Stale`.
pub fn response(replay: Replay, status: CacheStatus, age: Duration) -> Response<Body> {
    let mut response = Response::new(Body::from(replay.body));
    *response.status_mut() = replay.status;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, replay.content_type);
    if replay.stream {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    }
    set_headers(headers, status, Some(age));
    response
}

#[cfg(test)]
#[path = "replay_tests.rs"]
pub(super) mod tests;
