//! Handing a provider's answer to the client. The body streams through as
//! it arrives; once content has been sent, a failure ends the stream with
//! the protocol's own error event and counts against the provider.

use std::time::Duration;

use axum::body::Body;
use axum::http::{header, HeaderValue, Response};
use bytes::Bytes;
use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use tracing::warn;

use crate::attempt::{error_chain, Upstream};
use crate::headers;
use crate::protocol::Endpoint;
use crate::provider::{Ticket, Verdict};
use crate::sse;

/// Who answered, for the response headers.
#[derive(Debug, Clone, Copy)]
pub struct Answered<'a> {
    pub provider: &'a str,
    pub attempts: u32,
}

/// The client's response. For an event stream the ticket records the
/// provider's health when the stream ends; otherwise it is recorded now.
pub fn respond(upstream: Upstream, mut ticket: Ticket, verdict: Verdict, endpoint: Endpoint, idle: Duration, answered: Answered<'_>) -> Response<Body> {
    let mut headers = headers::client_response(&upstream.headers);
    if upstream.sse {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    } else {
        ticket.record(verdict);
    }
    if let Ok(name) = HeaderValue::from_str(answered.provider) {
        headers.insert("x-switchyard-provider", name);
    }
    headers.insert("x-switchyard-attempts", HeaderValue::from(answered.attempts));
    let body = Relay { held: Some(upstream.held), rest: upstream.rest, ticket, sse: upstream.sse, endpoint, idle, done: false };
    let mut response = Response::new(Body::from_stream(body.into_stream()));
    *response.status_mut() = upstream.status;
    *response.headers_mut() = headers;
    response
}

struct Relay {
    held: Option<Bytes>,
    rest: BoxStream<'static, Result<Bytes, reqwest::Error>>,
    /// Dropped with the body: a client that leaves frees the provider's slot.
    ticket: Ticket,
    sse: bool,
    endpoint: Endpoint,
    idle: Duration,
    done: bool,
}

impl Relay {
    fn into_stream(self) -> BoxStream<'static, Result<Bytes, std::io::Error>> {
        futures_util::stream::unfold(self, |mut relay| async move {
            let item = relay.next().await?;
            Some((item, relay))
        })
        .boxed()
    }

    async fn next(&mut self) -> Option<Result<Bytes, std::io::Error>> {
        if let Some(held) = self.held.take().filter(|b| !b.is_empty()) {
            return Some(Ok(held));
        }
        if self.done {
            return None;
        }
        let failure = match tokio::time::timeout(self.idle, self.rest.next()).await {
            Ok(Some(Ok(chunk))) => return Some(Ok(chunk)),
            Ok(None) => {
                self.done = true;
                self.ticket.record(Verdict::Healthy);
                return None;
            }
            Ok(Some(Err(e))) => format!("the provider's stream broke: {}", error_chain(&e)),
            Err(_) => format!("the provider sent nothing for {}", humantime::format_duration(self.idle)),
        };
        self.done = true;
        warn!("mid-stream failure: {failure}");
        self.ticket.record(Verdict::Failed);
        if self.sse {
            Some(Ok(sse::error_event(self.endpoint, &failure)))
        } else {
            Some(Err(std::io::Error::other(failure)))
        }
    }
}
