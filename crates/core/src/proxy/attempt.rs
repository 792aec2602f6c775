//! One upstream attempt under its timeout. A streamed answer is held until
//! its first content event: an error event, a drop or a stall before then is
//! an outcome like any other, and the request can still fall back.
//!
//! This is where upstream text enters the gateway, and where it is scrubbed
//! of secrets ([`crate::proxy::scrub`]) when the attempt failed: the failure's
//! words, and the head of an answer that is not a success, leave here
//! scrubbed, and its body carries the scrubber for whoever reads it.

use std::sync::Arc;
use std::time::Duration;

use axum::http::{header, HeaderMap, Request, StatusCode};
use bytes::{Bytes, BytesMut};
use http_body_util::Full;
use tokio::time::Instant;

use crate::policy::classify::{self, Outcome};
use crate::protocol::sse::{self, Splitter};
use crate::protocol::Endpoint;
use crate::proxy::scrub::{OnDemand, Scrubber};
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
    /// Set when the status is not a success: the body is an error text
    /// that must be read through this.
    pub scrub: Option<Arc<Scrubber>>,
}

/// How much of a failed provider's error body goes into the gateway's message.
const ERROR_SNIPPET_CHARS: usize = 300;
/// How long to wait for a failed provider's error body before giving up on it.
const ERROR_BODY_WAIT: Duration = Duration::from_secs(2);

impl Upstream {
    /// Reads an error body into `held` (up to about `limit` bytes, within
    /// the error-body wait), so it can be judged and still be relayed or
    /// translated whole; returns what was read, scrubbed.
    pub async fn hold_error(&mut self, limit: usize) -> String {
        let mut bytes = BytesMut::from(&self.held[..]);
        let rest = &mut self.rest;
        let read = async {
            while let Some(Ok(chunk)) = rest.data().await {
                bytes.extend_from_slice(&chunk);
                if bytes.len() > limit {
                    break;
                }
            }
        };
        let _ = tokio::time::timeout(ERROR_BODY_WAIT, read).await;
        self.held = bytes.freeze();
        let text = match &self.scrub {
            Some(scrub) => scrub.bytes(&self.held).into_owned(),
            None => self.held.to_vec(),
        };
        String::from_utf8_lossy(&text).into_owned()
    }

    /// A short, single-line, scrubbed excerpt of the error body.
    pub async fn error_text(mut self) -> String {
        let mut bytes = self.held.to_vec();
        let read = async {
            while let Some(Ok(chunk)) = self.rest.data().await {
                bytes.extend_from_slice(&chunk);
                if bytes.len() > ERROR_SNIPPET_CHARS * 4 {
                    break;
                }
            }
        };
        let _ = tokio::time::timeout(ERROR_BODY_WAIT, read).await;
        // Scrubbed before it is cut short: a secret the cut would halve is
        // whole here (or, cut by the read limit, redacted as a partial).
        let bytes = match &self.scrub {
            Some(scrub) => scrub.bytes(&bytes).into_owned(),
            None => bytes,
        };
        let text = String::from_utf8_lossy(&bytes);
        let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
        one_line.chars().take(ERROR_SNIPPET_CHARS).collect()
    }
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

/// How long an attempt waits for its answer to start.
#[derive(Debug, Clone, Copy)]
pub struct Patience {
    /// For the head, and for a stream's first event (`attempt_timeout`,
    /// within the request's deadline).
    pub timeout: Duration,
    /// Once a stream has begun (its preamble came) and the provider is
    /// thinking: the longest silence between events (`stream_idle_timeout`).
    /// A reasoning model can think for minutes before its first content;
    /// cutting it off at `timeout` wasted the work and moved the request.
    pub thinking: Duration,
    /// The request's deadline, which no wait passes.
    pub deadline: Instant,
    /// A provider thinking this long after its preamble is committed to:
    /// its stream goes to the client, kept alive from then on
    /// (`stream_keepalive`), so the client is never left without a byte.
    pub keepalive: Duration,
}

/// Sends the request and waits, as `patience` allows, for a head (or for
/// a stream's first content). A failure comes back scrubbed with `scrub`.
pub async fn run(
    client: &Client,
    request: Request<Full<Bytes>>,
    endpoint: Endpoint,
    patience: Patience,
    scrub: &OnDemand<'_>,
) -> Attempted {
    let started = Instant::now();
    let until = started + patience.timeout;
    let work = async {
        let response = match tokio::time::timeout_at(until, client.send(request)).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => return Attempted::failed(classify::of_transport(e.is_connect()), error_chain(&e)),
            Err(_) => return no_answer(patience.timeout),
        };
        let (head, rest) = response.into_parts();
        let (status, headers) = (head.status, head.headers);
        let sse = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let upstream = Upstream { status, headers, held: Bytes::new(), rest, sse, scrub: None };
        let ttfb = started.elapsed();
        if sse && status.is_success() {
            let mut attempted = until_content(upstream, endpoint, started, patience).await;
            attempted.ttfb = Some(ttfb);
            attempted
        } else {
            Attempted::answered(upstream, ttfb, None)
        }
    };
    // Boxed: the exchange's future (hyper's send, the wait for content) is
    // about 2 KB, and inline it would be carried by every future that
    // awaits this one; boxed, it is moved once.
    let attempted = Box::pin(work).await;
    scrubbed(attempted, scrub)
}

fn no_answer(timeout: Duration) -> Attempted {
    Attempted::failed(Outcome::Timeout, format!("no answer within {}", humantime::format_duration(timeout)))
}

/// A failed attempt's words, and an unsuccessful answer's head, without
/// secrets; its body gets the scrubber. A success passes untouched.
fn scrubbed(mut attempted: Attempted, scrub: &OnDemand<'_>) -> Attempted {
    if !attempted.detail.is_empty() {
        if let std::borrow::Cow::Owned(clean) = scrub.get().text(&attempted.detail) {
            attempted.detail = clean;
        }
    }
    if let Some(upstream) = attempted.upstream.as_mut().filter(|u| !u.status.is_success()) {
        let scrubber = scrub.get();
        scrubber.headers(&mut upstream.headers);
        upstream.scrub = Some(scrubber.clone());
    }
    attempted
}

async fn until_content(mut upstream: Upstream, endpoint: Endpoint, started: Instant, patience: Patience) -> Attempted {
    let mut splitter = Splitter::default();
    let mut held = BytesMut::new();
    let mut begun = false;
    loop {
        // Before the preamble, the attempt's timeout; after it, the provider
        // is thinking, and only a silence as long as a stream's idle limit
        // ends the wait. Neither passes the request's deadline.
        let until = if begun {
            (Instant::now() + patience.thinking.min(patience.keepalive)).min(patience.deadline)
        } else {
            (started + patience.timeout).min(patience.deadline)
        };
        let chunk = match tokio::time::timeout_at(until, upstream.rest.data()).await {
            // Thinking, and quiet for as long as a client may wait for a
            // byte: committed, its stream is relayed and kept alive.
            Err(_) if begun && patience.keepalive < patience.thinking && until < patience.deadline => {
                upstream.held = held.freeze();
                return Attempted::answered(upstream, started.elapsed(), None);
            }
            Err(_) if begun => {
                let quiet = humantime::format_duration(patience.thinking);
                return Attempted::failed(
                    Outcome::Timeout,
                    format!("no content, and silent for {quiet} after its preamble"),
                );
            }
            Err(_) => return no_answer(patience.timeout),
            Ok(None) => return Attempted::failed(Outcome::StreamDropped, "stream ended before any content"),
            Ok(Some(Err(e))) => {
                return Attempted::failed(
                    Outcome::StreamDropped,
                    format!("stream broke before any content: {}", error_chain(&e)),
                )
            }
            Ok(Some(Ok(chunk))) => chunk,
        };
        held.extend_from_slice(&chunk);
        for event in splitter.push(&chunk) {
            match sse::classify(endpoint, &event) {
                sse::Kind::Preamble => begun = true,
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
