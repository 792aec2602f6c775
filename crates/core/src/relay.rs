//! Handing a provider's answer to the client. The body streams through as
//! it arrives, past a usage tap; once content has been sent, a failure ends
//! the stream with the protocol's own error event and counts against the
//! provider. When the body ends, the request goes on record.

use std::time::Duration;

use axum::body::Body;
use axum::http::{header, HeaderValue, Response};
use bytes::Bytes;
use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use tracing::warn;

use crate::attempt::{error_chain, Upstream};
use crate::headers;
use crate::journal::Journal;
use crate::protocol::Endpoint;
use crate::provider::{Ticket, Verdict};
use crate::sse;
use crate::usage::Tap;

/// Who answered, for the response headers.
#[derive(Debug, Clone, Copy)]
pub struct Answered<'a> {
    pub provider: &'a str,
    pub attempts: u32,
}

/// Everything the relayed body needs besides the upstream answer.
#[derive(Debug)]
pub struct Delivery<'a> {
    pub answered: Answered<'a>,
    pub endpoint: Endpoint,
    pub idle: Duration,
    /// The gateway asked for usage chunks the client did not ask for.
    pub strip_usage: bool,
    pub journal: Journal,
}

/// The client's response. For an event stream the ticket records the
/// provider's health when the stream ends; otherwise it is recorded now.
pub fn respond(upstream: Upstream, mut ticket: Ticket, verdict: Verdict, delivery: Delivery<'_>) -> Response<Body> {
    let mut headers = headers::client_response(&upstream.headers);
    if upstream.sse {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    } else {
        ticket.record(verdict);
    }
    if let Ok(name) = HeaderValue::from_str(delivery.answered.provider) {
        headers.insert(crate::headers::name::X_SWITCHYARD_PROVIDER, name);
    }
    headers.insert(crate::headers::name::X_SWITCHYARD_ATTEMPTS, HeaderValue::from(delivery.answered.attempts));
    let tap = Tap::new(delivery.endpoint, upstream.sse, delivery.strip_usage, delivery.journal.keep_bodies());
    let body = Relay {
        held: Some(upstream.held),
        rest: upstream.rest,
        ticket,
        sse: upstream.sse,
        endpoint: delivery.endpoint,
        idle: delivery.idle,
        tap,
        journal: Some(delivery.journal),
    };
    let mut response = Response::new(Body::from_stream(body.into_stream()));
    *response.status_mut() = upstream.status;
    *response.headers_mut() = headers;
    response
}

struct Relay {
    held: Option<Bytes>,
    rest: BoxStream<'static, Result<Bytes, hyper::Error>>,
    /// Dropped with the body: a client that leaves frees the provider's slot.
    ticket: Ticket,
    sse: bool,
    endpoint: Endpoint,
    idle: Duration,
    tap: Tap,
    /// Present until the body has ended and the request is on record.
    journal: Option<Journal>,
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
        loop {
            // No journal: the body has ended.
            self.journal.as_ref()?;
            if let Some(held) = self.held.take().filter(|b| !b.is_empty()) {
                let out = self.tap.observe(held);
                if out.is_empty() {
                    continue;
                }
                return Some(Ok(out));
            }
            let failure = match tokio::time::timeout(self.idle, self.rest.next()).await {
                Ok(Some(Ok(chunk))) => {
                    let out = self.tap.observe(chunk);
                    if out.is_empty() {
                        continue;
                    }
                    return Some(Ok(out));
                }
                Ok(None) => {
                    self.ticket.record(Verdict::Healthy);
                    let tail = self.tap.flush();
                    self.finish(None).await;
                    return (!tail.is_empty()).then_some(Ok(tail));
                }
                Ok(Some(Err(e))) => format!("the provider's stream broke: {}", error_chain(&e)),
                Err(_) => format!("the provider sent nothing for {}", humantime::format_duration(self.idle)),
            };
            let request_id = self.journal.as_ref().map(|j| j.request_id());
            warn!(request_id, "mid-stream failure: {failure}");
            self.ticket.record(Verdict::Failed);
            let last = if self.sse {
                Ok(sse::error_event(self.endpoint, &failure))
            } else {
                Err(std::io::Error::other(failure.clone()))
            };
            self.finish(Some(failure)).await;
            return Some(last);
        }
    }

    async fn finish(&mut self, failure: Option<String>) {
        if let Some(journal) = self.journal.take() {
            journal.finish_delivery(self.tap.usage(), failure, self.tap.kept()).await;
        }
    }
}
