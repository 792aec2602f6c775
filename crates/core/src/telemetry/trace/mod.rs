//! OpenTelemetry traces, W3C trace context. A request's trace is decided
//! when it arrives (a child of the client's `traceparent`, or a trace the
//! gateway starts, as the sampler says); each upstream attempt gets a span
//! id of its own and sends it as its `traceparent`. The spans themselves
//! are built once the request is on record (`spans`), from the record the
//! history keeps, and leave through a bounded queue on a thread of their
//! own (`export`): the request path builds nothing until the request has
//! ended, and never waits on a collector.
//!
//! [`Tracer`] is the one thing the rest of the gateway holds. With no
//! endpoint configured it is off: nothing is built, a request's
//! [`RequestTrace`] is empty and every call on it returns at once.

pub mod content;
mod export;
pub mod settings;
mod spans;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::http::{HeaderMap, HeaderValue};
use opentelemetry::trace::{SpanId, TraceId};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use crate::history::record::RequestRecord;
pub use crate::protocol::usage::Answer;
use crate::protocol::Protocol;
use crate::telemetry::metrics::DropLabel;
pub use export::ExportError;
pub use settings::TraceSettings;

use crate::ground::headers::name::{TRACEPARENT, TRACESTATE};
/// Longest `tracestate` carried on (the W3C limit for a whole list).
const MAX_TRACESTATE: usize = 512;

/// The gateway's tracing: off, or a sampler and a queue to the collector.
#[derive(Clone, Default)]
pub struct Tracer {
    active: Option<Arc<Active>>,
}

impl std::fmt::Debug for Tracer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracer").field("on", &self.active.is_some()).finish()
    }
}

struct Active {
    settings: TraceSettings,
    queue: export::Queue,
    /// Who made the spans: Switchyard, at this version (built once).
    scope: opentelemetry::InstrumentationScope,
}

/// What the metrics count of the spans' way out.
#[derive(Debug, Clone)]
pub struct SpanCounters {
    pub exported: Counter,
    pub dropped: Family<DropLabel, Counter>,
}

impl Tracer {
    /// No tracing.
    pub fn off() -> Tracer {
        Tracer::default()
    }

    /// Tracing to `settings`' collector, spans carrying `instance` as
    /// `service.instance.id`. Its exporter is built on its own thread
    /// before this returns, so a URL it cannot use is said here.
    pub fn start(settings: TraceSettings, instance: &str, counters: SpanCounters) -> Result<Tracer, ExportError> {
        let queue = export::Queue::start(&settings, instance, counters)?;
        let scope =
            opentelemetry::InstrumentationScope::builder("switchyard").with_version(env!("CARGO_PKG_VERSION")).build();
        Ok(Tracer { active: Some(Arc::new(Active { settings, queue, scope })) })
    }

    /// Whether prompts and answers go on the attempt spans.
    pub fn captures_content(&self) -> bool {
        self.active.as_ref().is_some_and(|a| a.settings.capture_content)
    }

    /// The trace of a request arriving with `headers`.
    pub fn begin(&self, headers: &HeaderMap) -> RequestTrace {
        let Some(active) = &self.active else { return RequestTrace::default() };
        let parent = Parent::of(headers);
        let trace_id = match &parent {
            Some(p) => p.trace_id,
            None => TraceId::from_bytes(rand::random()),
        };
        let sampled = active.settings.sampling.keeps(trace_id.to_bytes(), parent.as_ref().map(|p| p.sampled));
        RequestTrace {
            traced: Some(Box::new(Traced {
                active: active.clone(),
                trace_id,
                span_id: new_span_id(),
                parent,
                sampled,
                started: SystemTime::now(),
                attempts: Vec::new(),
                waits: Vec::new(),
                passes: Vec::new(),
                answer: None,
            })),
        }
    }

    /// Sends what is queued, waiting at most `timeout` (a stopping gateway).
    pub async fn flush(&self, timeout: Duration) {
        if let Some(a) = &self.active {
            a.queue.flush(timeout).await;
        }
    }
}

fn new_span_id() -> SpanId {
    loop {
        let id = SpanId::from_bytes(rand::random());
        if id != SpanId::INVALID {
            return id;
        }
    }
}

/// The client's span, from a valid `traceparent` (and its `tracestate`).
#[derive(Debug, Clone)]
struct Parent {
    trace_id: TraceId,
    span_id: SpanId,
    sampled: bool,
    state: Option<HeaderValue>,
}

impl Parent {
    fn of(headers: &HeaderMap) -> Option<Parent> {
        let mut values = headers.get_all(TRACEPARENT).iter();
        // Two traceparents: neither is to be trusted.
        let (value, None) = (values.next()?, values.next()) else { return None };
        let (trace_id, span_id, sampled) = parse_traceparent(value.to_str().ok()?)?;
        Some(Parent { trace_id, span_id, sampled, state: tracestate(headers) })
    }
}

/// `version-traceid-spanid-flags` as W3C Trace Context gives it: a later
/// version is read as far as version 00 goes; ids of all zeros, version
/// `ff` and anything malformed are no parent at all.
fn parse_traceparent(v: &str) -> Option<(TraceId, SpanId, bool)> {
    let v = v.trim();
    let mut parts = v.splitn(5, '-');
    let (version, trace, span, flags) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let later = parts.next();
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if !hex(version, 2) || version == "ff" || !hex(trace, 32) || !hex(span, 16) || !hex(flags, 2) {
        return None;
    }
    if version == "00" && later.is_some() {
        return None;
    }
    let trace_id = TraceId::from_hex(trace).ok().filter(|t| *t != TraceId::INVALID)?;
    let span_id = SpanId::from_hex(span).ok().filter(|s| *s != SpanId::INVALID)?;
    let flags = u8::from_str_radix(flags, 16).ok()?;
    Some((trace_id, span_id, flags & 1 == 1))
}

/// The client's `tracestate`, its headers joined as one list. Over the
/// W3C's 512 characters, entries go as the specification says: those
/// longer than 128 characters first, then from the end of the list.
fn tracestate(headers: &HeaderMap) -> Option<HeaderValue> {
    let mut entries: Vec<&str> = Vec::new();
    for v in headers.get_all(TRACESTATE) {
        entries.extend(v.to_str().ok()?.split(',').map(str::trim).filter(|e| !e.is_empty()));
    }
    let size = |entries: &[&str]| entries.iter().map(|e| e.len() + 1).sum::<usize>().saturating_sub(1);
    if size(&entries) > MAX_TRACESTATE {
        entries.retain(|e| e.len() <= 128);
    }
    while size(&entries) > MAX_TRACESTATE {
        entries.pop();
    }
    (!entries.is_empty()).then(|| HeaderValue::from_str(&entries.join(",")).ok()).flatten()
}

/// One request's trace: empty when tracing is off.
#[derive(Default)]
pub struct RequestTrace {
    traced: Option<Box<Traced>>,
}

impl std::fmt::Debug for RequestTrace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.traced {
            None => f.write_str("RequestTrace(off)"),
            Some(t) => write!(f, "RequestTrace({}-{}, sampled: {})", t.trace_id, t.span_id, t.sampled),
        }
    }
}

struct Traced {
    active: Arc<Active>,
    trace_id: TraceId,
    /// The request's own (server) span.
    span_id: SpanId,
    parent: Option<Parent>,
    sampled: bool,
    started: SystemTime,
    /// Each attempt's span, by the attempt's index in the record.
    attempts: Vec<AttemptSpan>,
    /// Waits that are on no attempt: a queue, the team's gate.
    waits: Vec<Wait>,
    /// Providers passed over by their own state or a policy (not on record as attempts).
    passes: Vec<Pass>,
    answer: Option<Answer>,
}

/// What an attempt's span has beyond its record.
#[derive(Debug, Clone)]
struct AttemptSpan {
    index: usize,
    span_id: SpanId,
    protocol: Protocol,
    operation: &'static str,
    server: Option<(String, u16)>,
}

/// A wait the request spent before an attempt.
#[derive(Debug, Clone)]
struct Wait {
    at: SystemTime,
    took: Duration,
    provider: String,
    what: &'static str,
}

/// A provider the chain passed over.
#[derive(Debug, Clone)]
struct Pass {
    at: SystemTime,
    provider: String,
    why: String,
}

/// The span ids a log line names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ids {
    pub trace_id: TraceId,
    pub span_id: SpanId,
}

impl RequestTrace {
    /// The trace and the request's span, when tracing is on.
    pub fn ids(&self) -> Option<Ids> {
        self.traced.as_ref().map(|t| Ids { trace_id: t.trace_id, span_id: t.span_id })
    }

    /// The trace id the history keeps: only for a trace that is recorded.
    pub fn recorded_trace_id(&self) -> Option<String> {
        self.traced.as_ref().filter(|t| t.sampled).map(|t| t.trace_id.to_string())
    }

    /// Whether this request's spans will be exported (the answer's
    /// details are worth reading only then).
    pub fn sampled(&self) -> bool {
        self.traced.as_ref().is_some_and(|t| t.sampled)
    }

    /// The attempt at `index` is about to be sent with `headers` to `uri`:
    /// it gets a span of its own, named in its `traceparent` (the
    /// client's is replaced, never passed through) with the client's
    /// `tracestate` carried on.
    pub fn attempt(
        &mut self,
        index: usize,
        protocol: Protocol,
        endpoint: crate::protocol::Endpoint,
        uri: &axum::http::Uri,
        headers: &mut HeaderMap,
    ) {
        let Some(t) = self.traced.as_deref_mut() else { return };
        let span_id = new_span_id();
        let flags = if t.sampled { "01" } else { "00" };
        if let Ok(v) = HeaderValue::from_str(&format!("00-{}-{}-{flags}", t.trace_id, span_id)) {
            headers.insert(TRACEPARENT, v);
        }
        headers.remove(TRACESTATE);
        if let Some(state) = t.parent.as_ref().and_then(|p| p.state.clone()) {
            headers.insert(TRACESTATE, state);
        }
        let server = t.sampled.then(|| uri.host().map(|h| (h.to_string(), port_of(uri)))).flatten();
        t.attempts.push(AttemptSpan { index, span_id, protocol, operation: spans::operation(endpoint), server });
    }

    /// The request waited `took` for `provider` (`what`: a queue, the team).
    pub fn waited(&mut self, provider: &str, what: &'static str, took: Duration) {
        let Some(t) = self.traced.as_deref_mut().filter(|t| t.sampled) else { return };
        let at = SystemTime::now().checked_sub(took).unwrap_or(t.started);
        t.waits.push(Wait { at, took, provider: provider.to_string(), what });
    }

    /// `provider` was passed over for `why`.
    pub fn passed(&mut self, provider: &str, why: &str) {
        let Some(t) = self.traced.as_deref_mut().filter(|t| t.sampled) else { return };
        t.passes.push(Pass { at: SystemTime::now(), provider: provider.to_string(), why: why.to_string() });
    }

    /// What the delivered answer said of its id, model and finish.
    pub fn answered(&mut self, answer: Answer) {
        if let Some(t) = self.traced.as_deref_mut() {
            t.answer = Some(answer);
        }
    }

    /// The request is on record as `record`: its spans leave for the collector.
    pub fn finish(&mut self, record: &RequestRecord, content: Option<spans::Content>) {
        let Some(t) = self.traced.take().filter(|t| t.sampled) else { return };
        t.active.queue.push(spans::of(&t, record, content));
    }
}

pub use spans::{Content, CONTENT_LIMIT};

fn port_of(uri: &axum::http::Uri) -> u16 {
    uri.port_u16().unwrap_or(if uri.scheme_str() == Some("https") { 443 } else { 80 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_is_read_as_w3c_says() {
        let (t, s, sampled) = parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
        assert_eq!(t.to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(s.to_string(), "00f067aa0ba902b7");
        assert!(sampled);
        let later =
            parse_traceparent("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-what-comes-next").unwrap();
        assert!(!later.2, "a later version is read as far as 00 goes");
        for bad in [
            "",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
        ] {
            assert!(parse_traceparent(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn two_traceparents_are_no_parent_and_tracestates_are_joined() {
        let mut h = HeaderMap::new();
        h.append(TRACEPARENT, HeaderValue::from_static("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"));
        h.append(TRACESTATE, HeaderValue::from_static("a=1"));
        h.append(TRACESTATE, HeaderValue::from_static("b=2"));
        assert_eq!(Parent::of(&h).unwrap().state.unwrap(), "a=1,b=2");
        let long = format!("big={}", "x".repeat(200));
        let many: Vec<String> = (0..60).map(|i| format!("k{i:02}=v")).collect();
        let mut big = HeaderMap::new();
        big.insert(TRACESTATE, HeaderValue::from_str(&format!("first=1,{long},{}", many.join(","))).unwrap());
        let kept = tracestate(&big).unwrap();
        let kept = kept.to_str().unwrap();
        assert!(kept.len() <= MAX_TRACESTATE && kept.starts_with("first=1,k00=v"), "{kept}");
        assert!(!kept.contains("big="), "the entry over 128 characters goes first");
        h.append(TRACEPARENT, HeaderValue::from_static("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b8-01"));
        assert!(Parent::of(&h).is_none());
    }

    #[test]
    fn off_is_an_empty_trace_that_touches_nothing() {
        let mut trace = Tracer::off().begin(&HeaderMap::new());
        let mut headers = HeaderMap::new();
        headers.insert(TRACEPARENT, HeaderValue::from_static("client"));
        let uri: axum::http::Uri = "http://p/v1/chat/completions".parse().unwrap();
        trace.attempt(0, Protocol::OpenAi, crate::protocol::Endpoint::ChatCompletions, &uri, &mut headers);
        assert_eq!(headers[TRACEPARENT], "client", "off, the gateway is not a hop of the trace");
        assert!(trace.ids().is_none() && trace.recorded_trace_id().is_none());
    }
}
