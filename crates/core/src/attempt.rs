//! One upstream attempt under its timeout. A streamed answer is held until
//! its first content event: an error event, a drop or a stall before then is
//! an outcome like any other, and the request can still fall back.

use std::time::Duration;

use axum::http::{header, HeaderMap, Request, StatusCode};
use bytes::{Bytes, BytesMut};
use http_body_util::Full;
use tokio::time::Instant;

use crate::classify::{self, Outcome};
use crate::protocol::Endpoint;
use crate::sse::{self, Splitter};
use crate::upstream::{Body, Client};

/// A provider's answer, ready to relay: head, the bytes already read while
/// waiting for content, and the rest of the body.
pub struct Upstream {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub held: Bytes,
    pub rest: Body,
    /// Whether the body is an event stream.
    pub sse: bool,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream").field("status", &self.status).field("held", &self.held.len()).finish_non_exhaustive()
    }
}

#[derive(Debug)]
pub struct Attempted {
    pub outcome: Outcome,
    /// Present when the provider answered with a head worth relaying or reading.
    pub upstream: Option<Upstream>,
    /// What went wrong, in words, when something did.
    pub detail: String,
    /// Time to the response head.
    pub ttfb: Option<Duration>,
    /// Time to a stream's first content event.
    pub ttft: Option<Duration>,
}

impl Attempted {
    fn failed(outcome: Outcome, detail: impl Into<String>) -> Attempted {
        Attempted { outcome, upstream: None, detail: detail.into(), ttfb: None, ttft: None }
    }

    fn answered(upstream: Upstream, ttfb: Duration, ttft: Option<Duration>) -> Attempted {
        Attempted {
            outcome: Outcome::Status(upstream.status),
            upstream: Some(upstream),
            detail: String::new(),
            ttfb: Some(ttfb),
            ttft,
        }
    }
}

/// Sends the request and waits, within `timeout`, for a head (or for a
/// stream's first content).
pub async fn run(client: &Client, request: Request<Full<Bytes>>, endpoint: Endpoint, timeout: Duration) -> Attempted {
    let started = Instant::now();
    let work = async {
        let response = match client.send(request).await {
            Ok(r) => r,
            Err(e) => return Attempted::failed(classify::of_error(&e), error_chain(&e)),
        };
        let (head, rest) = response.into_parts();
        let (status, headers) = (head.status, head.headers);
        let sse = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let upstream = Upstream { status, headers, held: Bytes::new(), rest, sse };
        let ttfb = started.elapsed();
        if sse && status.is_success() {
            let mut attempted = until_content(upstream, endpoint, started).await;
            attempted.ttfb = Some(ttfb);
            attempted
        } else {
            Attempted::answered(upstream, ttfb, None)
        }
    };
    match tokio::time::timeout(timeout, work).await {
        Ok(attempted) => attempted,
        Err(_) => {
            Attempted::failed(Outcome::Timeout, format!("no answer within {}", humantime::format_duration(timeout)))
        }
    }
}

async fn until_content(mut upstream: Upstream, endpoint: Endpoint, started: Instant) -> Attempted {
    let mut splitter = Splitter::default();
    let mut held = BytesMut::new();
    loop {
        let chunk = match upstream.rest.data().await {
            None => return Attempted::failed(Outcome::StreamDropped, "stream ended before any content"),
            Some(Err(e)) => {
                return Attempted::failed(
                    Outcome::StreamDropped,
                    format!("stream broke before any content: {}", error_chain(&e)),
                )
            }
            Some(Ok(chunk)) => chunk,
        };
        held.extend_from_slice(&chunk);
        for event in splitter.push(&chunk) {
            match sse::classify(endpoint, &event) {
                sse::Kind::Preamble => {}
                sse::Kind::Error(message) => {
                    return Attempted::failed(Outcome::StreamError, format!("error event before content: {message}"))
                }
                sse::Kind::Content => {
                    upstream.held = held.freeze();
                    let ttft = started.elapsed();
                    return Attempted::answered(upstream, ttft, Some(ttft));
                }
            }
        }
    }
}

/// An error with its causes, which is where HTTP errors keep the useful part.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
