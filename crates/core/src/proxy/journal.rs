//! The record of one request as it happens: each attempt as it starts and
//! ends, then the request's outcome, usage and cost. It is handed to the
//! history writer exactly once: when the request ends, or, if the client
//! leaves first, when it is dropped (as canceled).

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use tokio::time::Instant;

use crate::cache::{CacheStatus, Entry};

use crate::ground::clock::now_ms;
use crate::ground::outcome::AttemptOutcome;
use crate::ground::outcome::Reason;
use crate::ground::outcome::RequestOutcome;
use crate::history::record::{AttemptRecord, AttemptRouting, Record, RequestRecord};

use crate::protocol::error::ApiError;
use crate::protocol::usage::{Answer, Usage};
use crate::protocol::{Endpoint, Protocol};
use crate::telemetry::trace::RequestTrace;
use crate::telemetry::Telemetry;
use crate::upstream::strategy::Routing;
use axum::http::Request;

pub use crate::history::Sink;

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// How an attempt is described when it starts.
#[derive(Debug, Clone)]
pub struct AttemptStart {
    pub provider: String,
    pub key_label: Option<String>,
    pub model: String,
    pub reason: Reason,
    pub fallback_from: Option<String>,
    pub timeout: Duration,
    pub backoff: Duration,
    pub breaker_state: &'static str,
    /// The client's format and the provider's, when they differ.
    pub translation: Option<(crate::protocol::Format, crate::protocol::Format)>,
    /// What the translation left out (see [`crate::protocol::translate::Drops::describe`]).
    pub dropped: Vec<String>,
    /// Why the route's strategy put the provider where it did; none in chain order.
    pub routing: Option<Routing>,
}

/// A provider the chain passed over without calling it, put on record as
/// an attempt that ended `skipped` (see [`Journal::skip`]).
#[derive(Debug, Clone)]
pub struct Skip {
    pub provider: String,
    pub model: String,
    /// Where in the chain it was passed over: first, or while falling back.
    pub reason: Reason,
    pub fallback_from: Option<String>,
    /// What kept it from being called, for whoever reads the row: the
    /// field and why it cannot go there, or the policy and its limit.
    pub why: String,
    pub routing: Option<Routing>,
}

/// How an attempt ended.
#[derive(Debug, Clone, Default)]
pub struct AttemptEnd {
    pub status: Option<StatusCode>,
    pub ttfb: Option<Duration>,
    pub ttft: Option<Duration>,
    pub retry_after: Option<Duration>,
    pub error: Option<String>,
}

#[derive(Debug)]
pub struct Journal {
    sink: Option<Sink>,
    telemetry: Option<Arc<Telemetry>>,
    /// Boxed from the start, as it leaves: a journal moves with the
    /// request's futures, and the record is most of it. Gone once the
    /// request is sealed, or the journal taken: it records nothing more.
    record: Option<Box<RequestRecord>>,
    started: Instant,
    attempt_started: Vec<Instant>,
    /// The attempt whose answer went to the client.
    delivered: Option<usize>,
    /// The attempt whose stream broke off and was resumed by the one
    /// delivered now: both are paid for.
    resumed_from: Option<usize>,
    /// What the inspector will show, when the request is captured.
    capture: Option<Box<super::capture::Capture>>,
    /// What a member's request holds of its budget, settled once its cost
    /// is counted.
    member_hold: Option<crate::members::spend::MemberHold>,
    /// The request's trace: its spans leave with the record.
    trace: RequestTrace,
    /// The prompt and answer for its spans, when content capture is asked for.
    span_content: Option<Box<super::capture::SpanContent>>,
}

impl Journal {
    pub fn start(
        sink: Option<Sink>,
        telemetry: Arc<Telemetry>,
        id: &str,
        correlation_id: &str,
        endpoint: &str,
        user_agent: Option<&str>,
        instance: Option<&str>,
    ) -> Journal {
        let mut record = Box::new(RequestRecord::blank(id, correlation_id, endpoint, user_agent));
        record.instance = instance.map(str::to_owned);
        Journal {
            sink,
            telemetry: Some(telemetry),
            record: Some(record),
            started: Instant::now(),
            attempt_started: Vec::new(),
            delivered: None,
            resumed_from: None,
            capture: None,
            member_hold: None,
            trace: RequestTrace::default(),
            span_content: None,
        }
    }

    /// Records the request as part of `trace` (its spans leave with the record).
    pub fn with_trace(mut self, trace: RequestTrace) -> Journal {
        self.trace = trace;
        self
    }

    /// The gateway's telemetry, while the journal records.
    pub fn telemetry(&self) -> Option<&Arc<Telemetry>> {
        self.telemetry.as_ref()
    }

    /// Moves the journal out (to the relayed body), leaving one that records nothing.
    pub fn take(&mut self) -> Journal {
        let empty = Journal {
            sink: None,
            telemetry: None,
            delivered: None,
            resumed_from: None,
            attempt_started: Vec::new(),
            started: self.started,
            record: None,
            capture: None,
            member_hold: None,
            trace: RequestTrace::default(),
            span_content: None,
        };
        std::mem::replace(self, empty)
    }

    /// Names the member whose key made the request (never the key).
    /// The member whose key made the request, and the device its joined
    /// gateway named, if one did.
    pub fn member(&mut self, name: &str, device: Option<&str>) {
        if let Some(record) = self.record.as_deref_mut() {
            record.member = Some(name.to_string());
            record.device = device.map(str::to_string);
        }
    }

    /// Keeps what the member's request holds of its budget until the
    /// request's cost is counted.
    pub fn member_hold(&mut self, hold: crate::members::spend::MemberHold) {
        self.member_hold = Some(hold);
    }

    /// Names the conversation the request is part of, if it has one, and
    /// whether the request is one of its turns ([`crate::session::Conversation::turn`]).
    pub fn session(&mut self, session: Option<&crate::session::Session>, turn: Option<bool>) {
        if let Some(record) = self.record.as_deref_mut() {
            record.session = session.map(|s| s.id.clone());
            record.turn = turn;
        }
    }

    pub fn request_id(&self) -> &str {
        self.record.as_ref().map_or("", |r| &r.id)
    }

    pub fn keep_bodies(&self) -> Option<usize> {
        self.sink.as_ref().and_then(|s| s.keep_bodies)
    }

    pub fn request(&mut self, model: &str, streamed: bool, body: &[u8]) {
        let keep = self.keep_bodies();
        if let Some(c) = &mut self.capture {
            c.client_body(body);
        }
        if let Some(c) = &mut self.span_content {
            c.input(body);
        }
        let Some(record) = self.record.as_deref_mut() else { return };
        record.model = Some(model.to_string());
        record.streamed = streamed;
        if let Some(limit) = keep {
            record.request_body = Some(String::from_utf8_lossy(&body[..limit.min(body.len())]).into_owned());
        }
    }

    /// Notes an attempt starting; returns its index.
    pub fn begin(&mut self, start: AttemptStart) -> usize {
        let now = Instant::now();
        self.attempt_started.push(now);
        let Some(record) = self.record.as_deref_mut() else { return self.attempt_started.len() - 1 };
        if matches!(start.reason, Reason::Fallback | Reason::Resume) {
            record.fallback = true;
        }
        let seq = record.attempts.len() as u32 + 1;
        if let Some((client, provider)) = start.translation {
            record.translations.push(crate::history::record::AttemptTranslation { seq, client, provider });
        }
        if !start.dropped.is_empty() {
            record.dropped.push(crate::history::record::AttemptDropped { seq, fields: start.dropped });
        }
        if let Some(routing) = start.routing {
            record.routing.push(AttemptRouting { seq, routing });
        }
        record.attempts.push(AttemptRecord {
            seq,
            provider: start.provider,
            key_label: start.key_label,
            model: start.model,
            reason: start.reason,
            fallback_from: start.fallback_from,
            started_at_ms: now_ms(),
            offset_ms: ms(now - self.started),
            timeout_ms: Some(ms(start.timeout)),
            backoff_ms: ms(start.backoff),
            duration_ms: None,
            ttfb_ms: None,
            ttft_ms: None,
            status: None,
            outcome: AttemptOutcome::Canceled,
            retry_after_ms: None,
            breaker_state: Some(start.breaker_state.to_string()),
            error: None,
            usage: Usage::default(),
        });
        record.attempts.len() - 1
    }

    /// Notes a provider passed over without a call: an attempt that starts
    /// and ends at once, with no timeout, backoff or breaker state. It
    /// does not make the request a fallback: nothing was tried.
    pub fn skip(&mut self, skip: Skip) {
        let now = Instant::now();
        self.attempt_started.push(now);
        let Some(record) = self.record.as_deref_mut() else { return };
        let seq = record.attempts.len() as u32 + 1;
        if let Some(routing) = skip.routing {
            record.routing.push(AttemptRouting { seq, routing });
        }
        record.attempts.push(AttemptRecord {
            seq,
            provider: skip.provider,
            key_label: None,
            model: skip.model,
            reason: skip.reason,
            fallback_from: skip.fallback_from,
            started_at_ms: now_ms(),
            offset_ms: ms(now - self.started),
            timeout_ms: None,
            backoff_ms: 0.0,
            duration_ms: Some(0.0),
            ttfb_ms: None,
            ttft_ms: None,
            status: None,
            outcome: AttemptOutcome::Skipped,
            retry_after_ms: None,
            breaker_state: None,
            error: Some(skip.why),
            usage: Usage::default(),
        });
    }

    /// Notes how an attempt ended (for a delivered stream: at its first content).
    pub fn end(&mut self, index: usize, outcome: AttemptOutcome, end: AttemptEnd) {
        let started = self.attempt_started.get(index).copied().unwrap_or(self.started);
        if let (Some(c), Some(error)) = (&mut self.capture, &end.error) {
            c.failed(index as u32 + 1, end.status.map(|s| s.as_u16()), error);
        }
        if let Some(a) = self.record.as_deref_mut().and_then(|r| r.attempts.get_mut(index)) {
            a.outcome = outcome;
            a.duration_ms = Some(ms(started.elapsed()));
            a.status = end.status.map(|s| s.as_u16());
            a.ttfb_ms = end.ttfb.map(ms);
            a.ttft_ms = end.ttft.map(ms);
            a.retry_after_ms = end.retry_after.map(ms);
            a.error = end.error;
        }
    }

    /// The attempt at `index` answered the client.
    pub fn deliver(&mut self, index: usize, status: StatusCode) {
        self.delivered = Some(index);
        let Some(record) = self.record.as_deref_mut() else { return };
        record.status = Some(status.as_u16());
        if let Some(a) = record.attempts.get(index) {
            record.provider = Some(a.provider.clone());
            record.provider_model = Some(a.model.clone());
            record.ttft_ms = a.ttft_ms.map(|t| a.offset_ms + t);
        }
    }

    /// The relayed body ended (`failure`: a mid-stream failure after content).
    /// The delivered attempt's stream broke off (`error`) after `usage`,
    /// and is being resumed: its end on record now.
    pub fn broke(&mut self, error: String, usage: Usage) {
        let Some(i) = self.delivered else { return };
        self.resumed_from = Some(i);
        self.delivered_ended(i, usage, Some(error));
    }

    /// The delivered attempt at `i` ended after `usage`, broken off with
    /// `failure` if it was.
    fn delivered_ended(&mut self, i: usize, usage: Usage, failure: Option<String>) {
        let started = self.attempt_started.get(i).copied().unwrap_or(self.started);
        if let Some(a) = self.record.as_deref_mut().and_then(|r| r.attempts.get_mut(i)) {
            a.usage = usage;
            a.duration_ms = Some(ms(started.elapsed()));
            if let Some(f) = failure {
                a.outcome = AttemptOutcome::MidStreamFailure;
                a.error = Some(f);
            }
        }
    }

    /// The attempt at `index` goes on with the stream that broke off.
    pub fn resumed_by(&mut self, index: usize) {
        self.delivered = Some(index);
    }

    pub async fn finish_delivery(mut self, usage: Usage, failure: Option<String>, response_body: Option<String>) {
        if let Some(i) = self.delivered {
            self.delivered_ended(i, usage, failure.clone());
        }
        let Some(record) = self.record.as_deref_mut() else { return };
        let ok = record.status.is_some_and(|s| (200..300).contains(&s));
        record.outcome = match (&failure, ok) {
            (Some(_), _) => RequestOutcome::Failed,
            (None, true) => RequestOutcome::Ok,
            (None, false) => RequestOutcome::ProviderError,
        };
        record.error = failure;
        record.usage = usage;
        record.response_body = response_body;
        if let (Some(sink), Some(provider), Some(model)) = (&self.sink, &record.provider, &record.provider_model) {
            record.cost_usd = sink.prices.cost(provider, model, &usage);
        }
        if let (Some(first), Some(then)) = (self.resumed_from, self.delivered.filter(|d| Some(*d) != self.resumed_from))
        {
            // Resumed: both attempts' tokens, each at its provider's prices.
            let price =
                |a: &AttemptRecord| self.sink.as_ref().and_then(|s| s.prices.cost(&a.provider, &a.model, &a.usage));
            let (a, b) = (record.attempts.get(first), record.attempts.get(then));
            if let (Some(a), Some(b)) = (a, b) {
                record.usage = a.usage.plus(&b.usage);
                record.cost_usd = match (price(a), price(b)) {
                    (None, None) => None,
                    (x, y) => Some(x.unwrap_or(0.0) + y.unwrap_or(0.0)),
                };
            }
        }
        self.send().await;
    }

    /// What `usage` costs at the delivering provider's prices, if known.
    pub fn cost(&self, usage: &Usage) -> Option<f64> {
        let (sink, record) = (self.sink.as_ref()?, self.record.as_deref()?);
        sink.prices.cost(record.provider.as_deref()?, record.provider_model.as_deref()?, usage)
    }

    /// What `usage` would cost at `provider`'s prices for `model`, if priced.
    pub fn price(&self, provider: &str, model: &str, usage: &Usage) -> Option<f64> {
        self.sink.as_ref()?.prices.cost(provider, model, usage)
    }

    /// What the response cache does for this request, as far as it is
    /// known before the chain is asked (a miss or a bypass).
    pub fn cache(&mut self, status: CacheStatus) {
        if let Some(record) = self.record.as_deref_mut() {
            record.cache = Some(status);
        }
    }

    /// What a stored answer would cost from its provider now: its stored
    /// usage at today's prices, else what it cost when it was stored.
    pub fn saved(&self, entry: &Entry) -> Option<f64> {
        let priced = match (&self.sink, &entry.provider) {
            (Some(sink), Some(provider)) => sink.prices.cost(provider, &entry.model, &entry.usage),
            _ => None,
        };
        priced.or(entry.cost_usd)
    }

    /// The response cache answered (`status` says fresh or stale) with an
    /// answer `provider` gave before: no provider was paid, and `saved` is
    /// what it would have cost. A stale answer keeps the failed attempts
    /// that came before it on record.
    pub async fn finish_cached(
        mut self,
        status: StatusCode,
        cache: CacheStatus,
        provider: Option<&str>,
        saved: Option<f64>,
    ) {
        let Some(record) = self.record.as_deref_mut() else { return };
        record.status = Some(status.as_u16());
        record.outcome = RequestOutcome::Ok;
        record.cost_usd = Some(0.0);
        record.cache = Some(cache);
        record.provider = provider.map(str::to_string);
        record.saved_usd = saved;
        self.send().await;
    }

    /// The gateway answered by itself (a local token count): no provider,
    /// no usage.
    pub async fn finish_local(mut self, status: StatusCode) {
        let Some(record) = self.record.as_deref_mut() else { return };
        record.status = Some(status.as_u16());
        record.outcome = RequestOutcome::Ok;
        self.send().await;
    }

    /// The gateway answered with its own error.
    pub async fn finish_error(mut self, error: &ApiError) {
        if let Some(c) = &mut self.capture {
            c.error(error.code.status().as_u16(), &error.message);
        }
        let Some(record) = self.record.as_deref_mut() else { return };
        // Providers skipped on record were never called: refused all the same.
        let called = record.attempts.iter().any(|a| a.outcome.called());
        record.outcome =
            if !called && !error.code.is_exhausted() { RequestOutcome::Rejected } else { RequestOutcome::Error };
        record.status = Some(error.code.status().as_u16());
        record.error_code = Some(error.code.as_str().to_string());
        record.error = Some(error.message.clone());
        self.send().await;
    }

    /// The attempt at `index` is about to be sent as `request` to a
    /// provider speaking `protocol`: its span, and its `traceparent`.
    pub fn trace_attempt<B>(&mut self, index: usize, protocol: Protocol, endpoint: Endpoint, request: &mut Request<B>) {
        let (parts, headers) = (request.uri().clone(), request.headers_mut());
        self.trace.attempt(index, protocol, endpoint, &parts, headers);
    }

    /// The request waited `took` for `provider` (`what`: `queue`, `team`), on its trace.
    pub fn waited(&mut self, provider: &str, what: &'static str, took: Duration) {
        self.trace.waited(provider, what, took);
    }

    /// `provider` was passed over (`why`: its breaker, a cool-down, a
    /// share, a limit), on the request's span.
    pub fn passed(&mut self, provider: &str, why: &str) {
        self.trace.passed(provider, why);
    }

    /// Whether the request's spans are exported (what the answer says of
    /// itself is worth reading only then).
    pub fn traced(&self) -> bool {
        self.trace.sampled()
    }

    /// The ids the request's log lines carry, when tracing is on.
    pub fn trace_ids(&self) -> Option<crate::telemetry::trace::Ids> {
        self.trace.ids()
    }

    /// What the delivered answer said of its id, model and finish, for its span.
    pub fn answered(&mut self, answer: Answer) {
        self.trace.answered(answer);
    }

    /// Ends the record and hands it out, once, with its capture if it has
    /// one: the journal keeps nothing.
    fn seal(&mut self) -> Option<(Sink, Record, Option<Record>)> {
        let mut record = self.record.take()?;
        record.finished_at_ms = now_ms();
        record.duration_ms = ms(self.started.elapsed());
        record.trace_id = self.trace.recorded_trace_id();
        self.trace.finish(&record, self.span_content.take().map(|c| c.seal()));
        if let Some(telemetry) = self.telemetry.take() {
            telemetry.request_finished(&record);
        }
        // Counted in the ledger just now: the reservation goes only after.
        if let Some(mut hold) = self.member_hold.take() {
            hold.settle(record.cost_usd);
        }
        let sink = self.sink.take()?;
        let capture = self.capture.take().and_then(|c| c.seal(&record.id, record.started_at_ms));
        Some((sink, Record::Request(record), capture.map(|c| Record::Capture(Box::new(c)))))
    }

    /// Hands the record over, spooled first: a request the client saw end
    /// is a request on record, even if the process dies the next instant.
    async fn send(&mut self) {
        if let Some((sink, record, capture)) = self.seal() {
            sink.recorder.complete_with(record, capture).await;
        }
    }

    /// Captures this request ([`super::capture`]).
    pub fn capture(&mut self, capture: super::capture::Capture) {
        self.capture = Some(Box::new(capture));
    }

    /// Whether the request is captured.
    pub fn captured(&self) -> bool {
        self.capture.is_some()
    }

    /// The attempt at `index` is sent as `parts` with `body` (captured, if the request is).
    pub fn capture_sent(&mut self, index: usize, parts: &axum::http::request::Parts, body: &[u8], redacted: usize) {
        if let Some(c) = &mut self.capture {
            let redacted = u32::try_from(redacted).unwrap_or(u32::MAX);
            c.sent(index as u32 + 1, &parts.uri.to_string(), &parts.headers, body, redacted);
        }
    }

    /// `[server] redact_outgoing` took `count` secrets out of the attempt
    /// at `index`'s prompt: said on the attempt, with what it left out.
    pub fn redacted(&mut self, index: usize, count: usize) {
        let Some(record) = self.record.as_deref_mut() else { return };
        let seq = index as u32 + 1;
        let note = format!("prompt: {count} secrets redacted (server.redact_outgoing)");
        match record.dropped.iter_mut().find(|d| d.seq == seq) {
            Some(d) => d.fields.push(note),
            None => record.dropped.push(crate::history::record::AttemptDropped { seq, fields: vec![note] }),
        }
    }

    /// The answering attempt's head, as the provider sent it.
    pub fn capture_answered(&mut self, status: StatusCode, headers: &axum::http::HeaderMap) {
        let (Some(c), Some(i)) = (&mut self.capture, self.delivered) else { return };
        let sent = self.attempt_started.get(i).copied().unwrap_or(self.started);
        c.answered(i as u32 + 1, status.as_u16(), headers, sent);
    }

    /// Bytes of the answering attempt's body, as the provider sent them.
    pub fn capture_upstream(&mut self, chunk: &[u8], sse: bool) {
        if let (Some(c), Some(i)) = (&mut self.capture, self.delivered) {
            c.upstream(i as u32 + 1, chunk, sse);
        }
    }

    /// Bytes the client got.
    pub fn capture_answer(&mut self, chunk: &[u8]) {
        if let Some(c) = &mut self.capture {
            c.answer(chunk);
        }
        if let Some(c) = &mut self.span_content {
            c.output(chunk);
        }
    }

    /// Keeps the prompt and answer for the request's spans.
    pub fn span_content(&mut self, content: super::capture::SpanContent) {
        self.span_content = Some(Box::new(content));
    }

    /// Whether the answer's bytes are wanted as they go by (a capture, or a span's content).
    pub fn keeps_answer(&self) -> bool {
        self.capture.is_some() || self.span_content.is_some()
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        let Some(record) = self.record.as_deref_mut() else { return };
        // The client left: the request and whatever attempt was running end as canceled.
        record.outcome = RequestOutcome::Canceled;
        if let Some(i) = self.delivered {
            // A stream the client left ends now, not at its first content.
            let at = self.attempt_started.get(i).copied();
            if let (Some(a), Some(at)) = (record.attempts.get_mut(i), at) {
                a.outcome = AttemptOutcome::Canceled;
                a.duration_ms = Some(ms(at.elapsed()));
            }
        }
        for (a, at) in record.attempts.iter_mut().zip(&self.attempt_started) {
            if a.duration_ms.is_none() {
                a.duration_ms = Some(ms(at.elapsed()));
            }
        }
        if let Some((sink, record, capture)) = self.seal() {
            sink.recorder.record_now(record);
            if let Some(capture) = capture {
                sink.recorder.record_now(capture);
            }
        }
    }
}
