//! Handing a provider's answer to the client. The body streams through as
//! it arrives, past a usage tap; once content has been sent, a failure ends
//! the stream with the protocol's own error event and counts against the
//! provider. When the body ends, the request goes on record, before the
//! client has its last byte. A body that has arrived whole by the time the
//! response starts (most answers that are not streams) goes on record
//! first and out in one piece, with a length. An answer that is not a
//! success is an error text, and goes out scrubbed of secrets.

use std::time::Duration;

use tokio::time::Instant;

use axum::body::Body;
use axum::http::{header, HeaderValue, Response};
use bytes::Bytes;
use futures_util::stream::BoxStream;
use futures_util::{FutureExt, StreamExt};
use tracing::warn;

use crate::ground::outcome::Verdict;
use crate::policy::classify;
use crate::protocol::sse;
use crate::protocol::translate::ir::ErrorClass;
use crate::protocol::translate::stream::seam::Continuation;
use crate::protocol::translate::stream::{Naming, StreamTranslator};
use crate::protocol::usage::Tap;
use crate::protocol::Endpoint;
use crate::proxy::attempt::{error_chain, Upstream};
use crate::proxy::cached::{Keeper, Keeping};
use crate::proxy::headers;
use crate::proxy::journal::Journal;
use crate::proxy::resume::{Continued, Resumer};
use crate::proxy::scrub;
use crate::team::Used;
use crate::upstream;
use crate::upstream::provider::Ticket;

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
    /// The client's endpoint.
    pub endpoint: Endpoint,
    /// The endpoint the provider was called on: the client's, or the one
    /// a translated request went to.
    pub upstream_endpoint: Endpoint,
    /// For a translated stream: the provider's events in the client's format.
    pub translator: Option<Box<StreamTranslator>>,
    pub idle: Duration,
    /// The longest a client of a committed event stream waits for a byte:
    /// past it, a comment line keeps its connection and timers alive.
    pub keepalive: Duration,
    /// The gateway asked for usage chunks the client did not ask for.
    pub strip_usage: bool,
    pub journal: Journal,
    /// Where a successful answer is stored in the response cache.
    pub keep: Option<Keeper>,
    /// With `resume` on: how a stream that breaks off is finished elsewhere.
    pub resume: Option<Box<Resumer>>,
}

/// The client's response. For an event stream the ticket records the
/// provider's health when the stream ends; otherwise it is recorded now.
/// A body the provider has already sent whole goes on record before this
/// resolves, and out with a length; any other streams through.
///
/// Not an `async fn`: one would keep its arguments and the relay built from
/// them side by side across its wait, and every request's future would
/// carry both. Everything is moved into the relay first; the future holds
/// only that.
pub fn respond(
    upstream: Upstream,
    mut ticket: Ticket,
    verdict: Verdict,
    delivery: Delivery<'_>,
) -> impl std::future::Future<Output = Response<Body>> + Send {
    let mut headers = headers::client_response(&upstream.headers);
    if upstream.sse {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    } else {
        ticket.record(verdict);
    }
    if let Ok(name) = HeaderValue::from_str(delivery.answered.provider) {
        headers.insert(crate::ground::headers::name::X_SWITCHYARD_PROVIDER, name);
    }
    headers.insert(crate::ground::headers::name::X_SWITCHYARD_ATTEMPTS, HeaderValue::from(delivery.answered.attempts));
    let status = upstream.status;
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
    let keeping = delivery.keep.and_then(|k| k.capture(status, upstream.sse, content_type)).map(Box::new);
    // Usage is read from what the provider sent, in its own format.
    let mut tap =
        Tap::new(delivery.upstream_endpoint, upstream.sse, delivery.strip_usage, delivery.journal.keep_bodies());
    let mut journal = delivery.journal;
    if journal.traced() {
        tap.read_answer();
    }
    journal.capture_answered(status, &upstream.headers);
    let keeps_answer = journal.keeps_answer();
    let mut relay = Relay {
        held: Some(upstream.held),
        rest: upstream.rest,
        peeked: None,
        ticket,
        sse: upstream.sse,
        endpoint: delivery.endpoint,
        idle: delivery.idle,
        keepalive: delivery.keepalive,
        quiet_since: None,
        at_boundary: true,
        tap,
        translator: delivery.translator,
        scrub: upstream.scrub.map(|s| Box::new(scrub::Stream::new(s))),
        journal: Some(journal),
        keeps_answer,
        keeping,
        ok: status.is_success(),
        resume: delivery.resume,
        seam: None,
        broke: None,
        not_resumed: None,
    };
    async move {
        let body = match relay.whole().await {
            Some(whole) => Body::from(whole),
            None => Body::from_stream(relay.into_stream()),
        };
        let mut response = Response::new(body);
        *response.status_mut() = status;
        *response.headers_mut() = headers;
        response
    }
}

/// The largest body collected whole before the response starts; a larger
/// one streams, as it would if it had not all arrived.
const WHOLE_MAX: usize = 64 * 1024;

struct Relay {
    held: Option<Bytes>,
    rest: upstream::Body,
    /// What the provider sent after a chunk, read while looking for the end.
    peeked: Option<Result<Bytes, hyper::Error>>,
    /// Dropped with the body: a client that leaves frees the provider's slot.
    ticket: Ticket,
    sse: bool,
    endpoint: Endpoint,
    idle: Duration,
    keepalive: Duration,
    /// Since when the provider has sent nothing, while it is silent.
    quiet_since: Option<Instant>,
    /// What the client has been sent ends with a whole event: only there
    /// may a keep-alive go.
    at_boundary: bool,
    tap: Tap,
    /// Rewrites a translated stream for the client, after the tap.
    translator: Option<Box<StreamTranslator>>,
    /// For an answer that is not a success: its body is scrubbed before
    /// anything (the tap, the client) sees it. Boxed: most answers are
    /// successes, and every relay would carry it inline.
    scrub: Option<Box<scrub::Stream>>,
    /// Present until the body has ended and the request is on record.
    journal: Option<Journal>,
    /// A copy of the answer as the client gets it, for the response cache.
    /// Boxed: most answers are not cached.
    keeping: Option<Box<Keeping>>,
    /// The provider answered with a success: what the tap reads of its
    /// usage settles the team's reservations. Any other answer returns them.
    ok: bool,
    /// Whether the request is captured, or its spans carry its answer: each chunk is then kept too.
    keeps_answer: bool,
    /// With `resume` on, until the stream is resumed or ends.
    resume: Option<Box<Resumer>>,
    /// A resumed stream: the continuation joined on to what was sent.
    seam: Option<Box<Continuation>>,
    /// A break found in the stream (an error event) once what came before
    /// it has gone out.
    broke: Option<String>,
    /// Why a break was not resumed, said with it.
    not_resumed: Option<String>,
}

impl Relay {
    fn into_stream(self) -> BoxStream<'static, Result<Bytes, std::io::Error>> {
        futures_util::stream::unfold(self, |mut relay| async move {
            let item = relay.next().await?;
            Some((item, relay))
        })
        .boxed()
    }

    /// The whole body, on record, if the provider has sent all of it
    /// already (up to [`WHOLE_MAX`]): hyper then writes the response's head
    /// and body in one go.
    async fn whole(&mut self) -> Option<Bytes> {
        let mut held = self.held.take().unwrap_or_default();
        let ended = loop {
            if held.len() > WHOLE_MAX {
                break false;
            }
            if self.ended_already() {
                break true;
            }
            match self.peeked.take() {
                Some(Ok(chunk)) => held = join(held, chunk),
                // Not here yet, or broken: the stream reports it.
                other => {
                    self.peeked = other;
                    break false;
                }
            }
        };
        if !ended {
            self.held = Some(held);
            return None;
        }
        let out = self.scrubbed(held);
        let out = self.observe(out);
        Some(self.end(out).await)
    }

    async fn next(&mut self) -> Option<Result<Bytes, std::io::Error>> {
        loop {
            // No journal: the body has ended.
            self.journal.as_ref()?;
            if let Some(failure) = self.broke.take() {
                if Box::pin(self.resumed(&failure)).await {
                    continue;
                }
                return Some(self.fail(failure).await);
            }
            let chunk = match self.held.take().filter(|b| !b.is_empty()) {
                Some(held) => held,
                None => match self.upstream_next().await {
                    Ok(Some(chunk)) => chunk,
                    Ok(None) => return last(self.end(Bytes::new()).await),
                    Err(Quiet::KeepAlive) => return Some(Ok(Bytes::from_static(KEEPALIVE_COMMENT))),
                    Err(Quiet::Dead(failure)) => {
                        if Box::pin(self.resumed(&failure)).await {
                            continue;
                        }
                        return Some(self.fail(failure).await);
                    }
                },
            };
            let chunk = self.scrubbed(chunk);
            let chunk = self.gated(chunk);
            let out = self.observe(chunk);
            if let Some(t) = self.translator.as_ref().filter(|t| t.holds_error() && self.broke.is_none()) {
                let message = t.error().map_or("", |(_, m)| m);
                self.broke = Some(crate::proxy::resume::broken_by(message, t.malformed()));
            }
            if self.broke.is_some() {
                // The break is taken up once what came before it is out.
                if out.is_empty() {
                    continue;
                }
                self.at_boundary = ends_an_event(&out);
                return Some(Ok(out));
            }
            // A translated stream is over for the client at its terminal
            // event, which may come before the provider's body ends: the
            // request goes on record then, so a client that closes on the
            // terminal (Codex does) has an answered request, not a canceled one.
            if self.ended_already() || self.translator.as_ref().is_some_and(|t| t.is_done()) || self.seam_done() {
                return last(self.end(out).await);
            }
            if !out.is_empty() {
                self.at_boundary = ends_an_event(&out);
                return Some(Ok(out));
            }
        }
    }

    /// Whether a silence may be filled with a keep-alive: a successful
    /// event stream, between two events.
    fn keeps_alive(&self) -> bool {
        self.sse && self.ok && self.at_boundary
    }

    /// `chunk` without secrets, when the answer is an error text; what
    /// could be the start of one is held back for the next chunk.
    fn scrubbed(&mut self, chunk: Bytes) -> Bytes {
        match &mut self.scrub {
            Some(scrub) => scrub.push(chunk),
            None => chunk,
        }
    }

    /// `chunk` past the usage tap and in the client's format. The cache
    /// keeps what the client gets: the provider's bytes as they are (usage
    /// the gateway asked for included, to replay to a client who asks for
    /// it), or a translated stream's events in the client's format.
    fn observe(&mut self, chunk: Bytes) -> Bytes {
        if self.translator.is_none() {
            if let Some(k) = &mut self.keeping {
                k.push(&chunk);
            }
        }
        if self.keeps_answer {
            if let Some(j) = &mut self.journal {
                j.capture_upstream(&chunk, self.sse);
            }
        }
        let out = self.tap.observe(chunk);
        let out = self.translated(out);
        if self.keeps_answer {
            if let Some(j) = &mut self.journal {
                j.capture_answer(&out);
            }
        }
        out
    }

    /// Whether a resumed stream has had its terminal.
    fn seam_done(&self) -> bool {
        self.seam.as_ref().is_some_and(|s| s.is_done())
    }

    /// `chunk` of an untranslated stream that may be resumed: whole events
    /// only, up to an error event, which is a break.
    fn gated(&mut self, chunk: Bytes) -> Bytes {
        match &mut self.resume {
            Some(r) if self.translator.is_none() && self.seam.is_none() && self.ok && self.sse => {
                let (out, broke) = r.pass(&chunk);
                if broke.is_some() {
                    self.broke = broke;
                }
                out
            }
            _ => chunk,
        }
    }

    /// Finishes the stream that broke off with `failure` at the chain's
    /// next provider, when resume is on and what was sent allows; false
    /// (the reason kept for the failure's words) otherwise.
    async fn resumed(&mut self, failure: &str) -> bool {
        let Some(resumer) = self.resume.take().filter(|_| self.ok && self.sse && self.seam.is_none()) else {
            return false;
        };
        // A translated stream was named by its translator; one relayed as
        // the provider sent it, by the provider.
        let sent = match &self.translator {
            Some(t) => t.sent().map(|s| (s.clone(), Naming { created: Some(t.created()), ..Naming::default() })),
            None => resumer.sent().map(|(s, n)| (s.clone(), n.clone())),
        };
        let (Some((sent, naming)), Some(telemetry)) =
            (sent, self.journal.as_ref().and_then(|j| j.telemetry().cloned()))
        else {
            return false;
        };
        let carried = match sent.resumable() {
            Ok(resume) => resume.text.chars().count(),
            Err(why) => {
                self.not_resumed = Some(why.to_string());
                telemetry.metrics.resume("not_resumable");
                return false;
            }
        };
        // The provider broke off, whatever follows.
        self.ticket.record(classify::at_end(true));
        let Some(journal) = self.journal.as_mut() else { return false };
        // Boxed: a continuation's attempt is a large future, and inline it
        // would make every relayed body's as large.
        match Box::pin(resumer.resume(&sent, &naming, journal)).await {
            Ok(continued) => {
                let usage = self.tap.usage();
                journal
                    .broke(format!("{failure}; resumed by the next attempt from {carried} characters of text"), usage);
                journal.resumed_by(continued.index);
                let keep = journal.keep_bodies();
                let traced = journal.traced();
                self.settle_broken(usage);
                self.switch_to(continued, keep, traced);
                telemetry.metrics.resume("resumed");
                true
            }
            Err(why) => {
                warn!(request_id = journal.request_id(), "mid-stream failure not resumed: {why}");
                self.not_resumed = Some(why);
                telemetry.metrics.resume("failed");
                false
            }
        }
    }

    /// The broken stream's team reservations settled with what it used.
    fn settle_broken(&mut self, usage: crate::protocol::usage::Usage) {
        let tokens = usage.is_known().then(|| usage.input_tokens.unwrap_or(0) + usage.output_tokens.unwrap_or(0));
        let cost_usd = self.journal.as_ref().and_then(|j| j.cost(&usage));
        self.ticket.settle(Used { tokens, cost_usd });
    }

    /// The relay goes on with the continuation's stream, joined on to what
    /// was sent.
    fn switch_to(&mut self, continued: Continued, keep: Option<usize>, traced: bool) {
        let Continued { upstream, ticket, endpoint, seam, .. } = continued;
        // The broken stream's slot, lease and key go back here.
        self.ticket = ticket;
        self.held = Some(upstream.held);
        self.rest = upstream.rest;
        self.peeked = None;
        self.quiet_since = None;
        self.tap = Tap::new(endpoint, true, false, keep);
        if traced {
            self.tap.read_answer();
        }
        self.translator = None;
        self.seam = Some(seam);
        // A reply made of two is no answer to replay from the cache.
        self.keeping = None;
        self.scrub = None;
    }

    /// `chunk` in the client's format, for a translated stream (kept for
    /// the cache as such).
    fn translated(&mut self, chunk: Bytes) -> Bytes {
        if let Some(seam) = &mut self.seam {
            return if chunk.is_empty() { chunk } else { seam.push(&chunk) };
        }
        let Some(t) = &mut self.translator else { return chunk };
        let out = if chunk.is_empty() { chunk } else { t.push(&chunk) };
        if let Some(k) = &mut self.keeping {
            k.push(&out);
        }
        out
    }

    /// The provider's next chunk, or why there is none yet: a silence the
    /// client is kept alive through, or one too long to wait out.
    async fn upstream_next(&mut self) -> Result<Option<Bytes>, Quiet> {
        let next = match self.peeked.take() {
            Some(peeked) => Some(peeked),
            None => {
                let now = Instant::now();
                let dead_at = *self.quiet_since.get_or_insert(now) + self.idle;
                let wake = if self.keeps_alive() { dead_at.min(now + self.keepalive) } else { dead_at };
                // Giving up the wait loses nothing: the body is read by
                // polling, and the next wait polls it again.
                match tokio::time::timeout_at(wake, self.rest.data()).await {
                    Ok(next) => next,
                    Err(_) if Instant::now() >= dead_at => {
                        let idle = humantime::format_duration(self.idle);
                        return Err(Quiet::Dead(format!("the provider sent nothing for {idle}")));
                    }
                    Err(_) => return Err(Quiet::KeepAlive),
                }
            }
        };
        self.quiet_since = None;
        next.transpose().map_err(|e| Quiet::Dead(format!("the provider's stream broke: {}", error_chain(&e))))
    }

    /// Whether the provider's body has ended already, found without
    /// waiting. The request then goes on record before its last chunk is
    /// handed on, not after: hyper sends the last chunk and the body's end
    /// in one write instead of two, and the client still gets its final
    /// byte only once the request is on record.
    fn ended_already(&mut self) -> bool {
        if self.peeked.is_some() {
            return false;
        }
        if hyper::body::Body::is_end_stream(&self.rest) {
            return true;
        }
        match self.rest.data().now_or_never() {
            Some(None) => true,
            Some(Some(next)) => {
                self.peeked = Some(next);
                false
            }
            None => false,
        }
    }

    /// The body ended: `out`, and whatever the tap held back, is the last
    /// of it, handed on once the request is on record.
    async fn end(&mut self, out: Bytes) -> Bytes {
        self.ticket.record(classify::at_end(false));
        // What an untranslated stream's last event left unended.
        let pending = self.resume.as_mut().map(|r| r.rest_of_stream()).unwrap_or_default();
        let out = if pending.is_empty() {
            out
        } else {
            let more = self.observe(pending);
            join(out, more)
        };
        let out = match self.scrub.as_mut().map(|s| s.finish()).filter(|b| !b.is_empty()) {
            Some(held_back) => {
                let more = self.observe(held_back);
                join(out, more)
            }
            None => out,
        };
        let tail = self.tap.flush();
        let mut tail = self.translated(tail);
        if let Some(seam) = &mut self.seam {
            tail = join(tail, seam.finish());
        } else if let Some(t) = &mut self.translator {
            // The provider's stream is over: the client's terminal events.
            let terminal = t.finish();
            if let Some(k) = &mut self.keeping {
                k.push(&terminal);
            }
            tail = join(tail, terminal);
        }
        if self.keeps_answer {
            if let Some(j) = &mut self.journal {
                j.capture_answer(&tail);
            }
        }
        let failure = match &self.seam {
            Some(seam) => seam.error().map(str::to_string),
            None => self.translator.as_ref().and_then(|t| t.error()).map(|(_, message)| message.to_string()),
        };
        if let Some(keeping) = self.keeping.take().filter(|_| failure.is_none()) {
            let usage = self.tap.usage();
            let cost = self.journal.as_ref().and_then(|j| j.cost(&usage));
            keeping.store(usage, cost);
        }
        self.finish(failure).await;
        join(out, tail)
    }

    /// The body broke off: the provider is blamed, and the client gets the
    /// protocol's error event (or, outside a stream, a broken body).
    async fn fail(&mut self, failure: String) -> Result<Bytes, std::io::Error> {
        let failure = match self.not_resumed.take() {
            Some(why) => format!("{failure}; {why}"),
            None => failure,
        };
        let request_id = self.journal.as_ref().map(|j| j.request_id());
        warn!(request_id, "mid-stream failure: {failure}");
        self.ticket.record(classify::at_end(true));
        let last = if let Some(t) = self.translator.as_mut().filter(|t| t.holds_error()) {
            // The provider's own error event, held back for a resume.
            Ok(t.release())
        } else if let Some(t) = &mut self.translator {
            Ok(t.fail(ErrorClass::Server, &failure))
        } else if let Some(seam) = &mut self.seam {
            Ok(seam.fail(ErrorClass::Server, &failure))
        } else if self.sse {
            Ok(sse::error_event(self.endpoint, &failure))
        } else {
            Err(std::io::Error::other(failure.clone()))
        };
        self.finish(Some(failure)).await;
        last
    }

    async fn finish(&mut self, failure: Option<String>) {
        if self.ok {
            // A stream that broke off was still paid for as far as it went.
            let usage = self.tap.usage();
            let tokens = usage.is_known().then(|| usage.input_tokens.unwrap_or(0) + usage.output_tokens.unwrap_or(0));
            let cost_usd = self.journal.as_ref().and_then(|j| j.cost(&usage));
            self.ticket.settle(Used { tokens, cost_usd });
        }
        if let Some(mut journal) = self.journal.take() {
            if let Some(answer) = self.tap.answer() {
                journal.answered(answer);
            }
            // Boxed: with the hand-over to history it waits on, this future
            // is about 1.5 KB, and inline it would make every future that
            // can reach here as large, each of them copied whole as it is
            // created.
            Box::pin(journal.finish_delivery(self.tap.usage(), failure, self.tap.kept())).await;
        }
    }
}

/// Why the provider's next chunk is not here.
enum Quiet {
    /// Silent for a keep-alive's interval: the client is sent one.
    KeepAlive,
    /// Silent too long, or broken: the stream fails.
    Dead(String),
}

/// An SSE comment: every client's parser skips it, and unlike a protocol's
/// own `ping` event it claims nothing about the provider.
const KEEPALIVE_COMMENT: &[u8] = b": keep-alive\n\n";

/// Whether `out` ends with a whole SSE event.
fn ends_an_event(out: &[u8]) -> bool {
    out.ends_with(b"\n\n") || out.ends_with(b"\r\n\r\n") || out.ends_with(b"\r\r")
}

/// The stream's last item: nothing if the last bytes are none.
fn last(bytes: Bytes) -> Option<Result<Bytes, std::io::Error>> {
    (!bytes.is_empty()).then_some(Ok(bytes))
}

/// `a` then `b`, copied only when both have bytes.
fn join(a: Bytes, b: Bytes) -> Bytes {
    match (a.is_empty(), b.is_empty()) {
        (_, true) => a,
        (true, false) => b,
        (false, false) => [a, b].concat().into(),
    }
}
