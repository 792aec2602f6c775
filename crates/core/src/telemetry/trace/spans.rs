//! A finished request's spans, built from its record: one SERVER span for
//! the request, one CLIENT span per attempt on the wire (named and
//! attributed as the OpenTelemetry GenAI semantic conventions say), an
//! INTERNAL span for an answer the cache gave; waits, skips and fallbacks
//! as events on the request's span.

use std::borrow::Cow;
use std::time::{Duration, SystemTime};

use opentelemetry::trace::{Event, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceState};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};

use super::{AttemptSpan, Traced};
use crate::ground::outcome::{AttemptOutcome, CacheStatus, Reason, RequestOutcome};
use crate::history::record::{AttemptRecord, RequestRecord};
use crate::protocol::usage::Usage;
use crate::protocol::{Endpoint, Protocol};

/// Prompts and answers for the attempt that answered, already scrubbed as
/// a capture is; only when content capture is asked for.
#[derive(Debug, Clone)]
pub struct Content {
    /// The client's format, which both are in.
    pub endpoint: Endpoint,
    /// As the conventions' input messages ([`super::content::input`]).
    pub input: Option<String>,
    /// The answer as the client got it, mapped once its finish is known.
    pub output: Option<String>,
}

/// The most of a prompt or an answer a span carries, each.
pub const CONTENT_LIMIT: usize = 16 * 1024;

/// `gen_ai.operation.name` for an endpoint.
pub(super) fn operation(endpoint: Endpoint) -> &'static str {
    match endpoint {
        Endpoint::ChatCompletions | Endpoint::Responses | Endpoint::Messages => "chat",
        Endpoint::GeminiGenerate | Endpoint::GeminiStream => "generate_content",
        Endpoint::Completions => "text_completion",
        Endpoint::Embeddings => "embeddings",
        Endpoint::CountTokens | Endpoint::GeminiCountTokens => "count_tokens",
    }
}

/// `gen_ai.provider.name`: the API's maker, as the conventions list them;
/// the provider's own name in the config is `switchyard.provider.name`.
fn provider_system(protocol: Protocol) -> &'static str {
    match protocol {
        Protocol::OpenAi => "openai",
        Protocol::Anthropic => "anthropic",
        Protocol::Gemini => "gcp.gemini",
    }
}

fn at(started: SystemTime, offset_ms: f64) -> SystemTime {
    started + Duration::from_secs_f64(offset_ms.max(0.0) / 1000.0)
}

fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

struct Span {
    id: SpanId,
    parent: SpanId,
    remote_parent: bool,
    kind: SpanKind,
    name: Cow<'static, str>,
    start: SystemTime,
    end: SystemTime,
    attributes: Vec<KeyValue>,
    events: Vec<Event>,
    status: Status,
}

impl Span {
    fn data(self, t: &Traced, scope: &InstrumentationScope) -> SpanData {
        let mut events = SpanEvents::default();
        events.events = self.events;
        SpanData {
            span_context: SpanContext::new(t.trace_id, self.id, TraceFlags::SAMPLED, false, state(t)),
            parent_span_id: self.parent,
            parent_span_is_remote: self.remote_parent,
            span_kind: self.kind,
            name: self.name,
            start_time: self.start,
            end_time: self.end.max(self.start),
            attributes: self.attributes,
            dropped_attributes_count: 0,
            events,
            links: SpanLinks::default(),
            status: self.status,
            instrumentation_scope: scope.clone(),
        }
    }
}

/// The client's `tracestate`, carried by the trace's spans as by its headers.
fn state(t: &Traced) -> TraceState {
    let header = t.parent.as_ref().and_then(|p| p.state.as_ref()).and_then(|v| v.to_str().ok());
    header.and_then(|v| v.parse().ok()).unwrap_or_default()
}

/// Every span of the request on record as `record`.
pub(super) fn of(t: &Traced, record: &RequestRecord, content: Option<Content>) -> Vec<SpanData> {
    let scope = &t.active.scope;
    let mut content = content;
    let mut out = Vec::with_capacity(2 + t.attempts.len());
    // The answer came from the last attempt called, when the record names its provider.
    let last_called = record.attempts.iter().rposition(|x| x.outcome.called());
    for a in &t.attempts {
        let Some(attempt) = record.attempts.get(a.index) else { continue };
        let delivered = last_called == Some(a.index) && record.provider.as_deref() == Some(attempt.provider.as_str());
        let content = if delivered { content.take() } else { None };
        out.push(attempt_span(t, a, attempt, delivered, content).data(t, scope));
    }
    if let Some(cache) = record.cache.filter(|c| matches!(c, CacheStatus::Hit | CacheStatus::Stale)) {
        out.push(cache_span(t, record, cache).data(t, scope));
    }
    out.push(server_span(t, record).data(t, scope));
    out
}

fn server_span(t: &Traced, record: &RequestRecord) -> Span {
    let mut attributes = vec![
        KeyValue::new("http.request.method", "POST"),
        KeyValue::new("http.route", record.endpoint.clone()),
        KeyValue::new("switchyard.request_id", record.id.clone()),
        KeyValue::new("switchyard.correlation_id", record.correlation_id.clone()),
        KeyValue::new("switchyard.outcome", record.outcome.as_str()),
        KeyValue::new("switchyard.fallback", record.fallback),
        KeyValue::new("switchyard.streamed", record.streamed),
    ];
    let optional = [
        ("gen_ai.request.model", record.model.clone()),
        ("gen_ai.conversation.id", record.session.clone()),
        ("switchyard.member", record.member.clone()),
        ("switchyard.provider.name", record.provider.clone()),
        ("switchyard.cache", record.cache.map(|c| c.as_str().to_string())),
        ("error.type", record.error_code.clone()),
    ];
    attributes.extend(optional.into_iter().filter_map(|(k, v)| Some(KeyValue::new(k, v?))));
    if let Some(status) = record.status {
        attributes.push(KeyValue::new("http.response.status_code", i64::from(status)));
    }
    if let Some(cost) = record.cost_usd {
        attributes.push(KeyValue::new("switchyard.cost_usd", cost));
    }
    usage(&mut attributes, &record.usage);
    // The HTTP conventions: a server's span is an error for its own 5xx
    // (or a stream broken midway), not for a 4xx the client is to fix.
    let server_error = record.status.is_none_or(|s| s >= 500);
    let failed = match record.outcome {
        RequestOutcome::Failed => true,
        RequestOutcome::Error | RequestOutcome::ProviderError => server_error,
        RequestOutcome::Ok | RequestOutcome::Rejected | RequestOutcome::Canceled => false,
    };
    let status = match (&record.error, failed) {
        (Some(e), true) => Status::error(e.clone()),
        (None, true) => Status::error(record.outcome.as_str()),
        _ => Status::Unset,
    };
    Span {
        id: t.span_id,
        parent: t.parent.as_ref().map_or(SpanId::INVALID, |p| p.span_id),
        remote_parent: t.parent.is_some(),
        kind: SpanKind::Server,
        name: format!("POST {}", record.endpoint).into(),
        start: t.started,
        end: at(t.started, record.duration_ms),
        attributes,
        events: events(t, record),
        status,
    }
}

/// Retry waits, providers passed over, fallbacks and the request's own
/// waits, in the order they happened.
fn events(t: &Traced, record: &RequestRecord) -> Vec<Event> {
    let mut out = Vec::new();
    for (i, a) in record.attempts.iter().enumerate() {
        let start = at(t.started, a.offset_ms);
        if a.outcome == AttemptOutcome::Skipped {
            let attrs = vec![
                KeyValue::new("switchyard.provider.name", a.provider.clone()),
                KeyValue::new("switchyard.reason", a.error.clone().unwrap_or_default()),
            ];
            out.push(Event::new("switchyard.provider.skipped", start, attrs, 0));
            continue;
        }
        if a.backoff_ms > 0.0 {
            let wait = Duration::from_secs_f64(a.backoff_ms / 1000.0);
            let attrs = vec![
                KeyValue::new("switchyard.provider.name", a.provider.clone()),
                KeyValue::new("switchyard.wait_ms", a.backoff_ms),
            ];
            // A retry's backoff, or a rate limit's wait before the attempt.
            let name = if a.reason == Reason::Retry { "switchyard.retry.wait" } else { "switchyard.rate_limit.wait" };
            out.push(Event::new(name, start.checked_sub(wait).unwrap_or(start), attrs, 0));
        }
        if a.reason == Reason::Fallback {
            let why = record.attempts[..i]
                .iter()
                .rev()
                .find(|p| p.outcome.called())
                .map(|p| p.error.clone().unwrap_or_else(|| p.outcome.as_str().to_string()))
                .unwrap_or_default();
            let attrs = vec![
                KeyValue::new("switchyard.fallback.from", a.fallback_from.clone().unwrap_or_default()),
                KeyValue::new("switchyard.fallback.to", a.provider.clone()),
                KeyValue::new("switchyard.reason", why),
            ];
            out.push(Event::new("switchyard.fallback", start, attrs, 0));
        }
    }
    for p in &t.passes {
        let attrs = vec![
            KeyValue::new("switchyard.provider.name", p.provider.clone()),
            KeyValue::new("switchyard.reason", p.why.clone()),
        ];
        out.push(Event::new("switchyard.provider.skipped", p.at, attrs, 0));
    }
    for w in &t.waits {
        let attrs = vec![
            KeyValue::new("switchyard.provider.name", w.provider.clone()),
            KeyValue::new("switchyard.wait_ms", w.took.as_secs_f64() * 1000.0),
        ];
        out.push(Event::new(format!("switchyard.{}.wait", w.what), w.at, attrs, 0));
    }
    out.sort_by_key(|e| e.timestamp);
    out
}

fn attempt_span(
    t: &Traced,
    a: &AttemptSpan,
    attempt: &AttemptRecord,
    delivered: bool,
    content: Option<Content>,
) -> Span {
    let mut attributes = vec![
        KeyValue::new("gen_ai.operation.name", a.operation),
        KeyValue::new("gen_ai.provider.name", provider_system(a.protocol)),
        KeyValue::new("gen_ai.request.model", attempt.model.clone()),
        KeyValue::new("switchyard.provider.name", attempt.provider.clone()),
        KeyValue::new("switchyard.attempt.seq", i64::from(attempt.seq)),
        KeyValue::new("switchyard.attempt.reason", attempt.reason.as_str()),
        KeyValue::new("switchyard.attempt.outcome", attempt.outcome.as_str()),
    ];
    if let Some(label) = &attempt.key_label {
        attributes.push(KeyValue::new("switchyard.provider.key_label", label.clone()));
    }
    if let Some((host, port)) = &a.server {
        attributes.push(KeyValue::new("server.address", host.clone()));
        attributes.push(KeyValue::new("server.port", i64::from(*port)));
    }
    if let Some(status) = attempt.status {
        attributes.push(KeyValue::new("http.response.status_code", i64::from(status)));
    }
    if delivered {
        if let Some(answer) = &t.answer {
            answered(&mut attributes, answer);
        }
    }
    usage(&mut attributes, &attempt.usage);
    if let Some(c) = content {
        let finish = t.answer.as_ref().map_or(&[][..], |a| a.finish_reasons.as_slice());
        let output = c.output.and_then(|o| super::content::output(c.endpoint, o.as_bytes(), finish, CONTENT_LIMIT));
        let pairs = [("gen_ai.input.messages", c.input), ("gen_ai.output.messages", output)];
        attributes.extend(pairs.into_iter().filter_map(|(k, v)| Some(KeyValue::new(k, v?))));
    }
    let ok = matches!(attempt.outcome, AttemptOutcome::Ok);
    let status = if ok {
        Status::Unset
    } else {
        let kind = match attempt.status {
            Some(code) if attempt.outcome == AttemptOutcome::HttpError => code.to_string(),
            _ => attempt.outcome.as_str().to_string(),
        };
        attributes.push(KeyValue::new("error.type", kind.clone()));
        Status::error(attempt.error.clone().unwrap_or(kind))
    };
    let start = at(t.started, attempt.offset_ms);
    Span {
        id: a.span_id,
        parent: t.span_id,
        remote_parent: false,
        kind: SpanKind::Client,
        name: format!("{} {}", a.operation, attempt.model).into(),
        start,
        end: at(start, attempt.duration_ms.unwrap_or(0.0)),
        attributes,
        events: Vec::new(),
        status,
    }
}

fn answered(attributes: &mut Vec<KeyValue>, answer: &super::Answer) {
    if let Some(id) = &answer.id {
        attributes.push(KeyValue::new("gen_ai.response.id", id.clone()));
    }
    if let Some(model) = &answer.model {
        attributes.push(KeyValue::new("gen_ai.response.model", model.clone()));
    }
    if !answer.finish_reasons.is_empty() {
        let reasons: Vec<opentelemetry::StringValue> = answer.finish_reasons.iter().map(|r| r.clone().into()).collect();
        attributes.push(KeyValue::new(
            "gen_ai.response.finish_reasons",
            opentelemetry::Value::Array(opentelemetry::Array::String(reasons)),
        ));
    }
}

fn usage(attributes: &mut Vec<KeyValue>, usage: &Usage) {
    let counts = [
        ("gen_ai.usage.input_tokens", usage.input_tokens),
        ("gen_ai.usage.output_tokens", usage.output_tokens),
        ("gen_ai.usage.cache_read.input_tokens", usage.cached_tokens),
        ("gen_ai.usage.cache_creation.input_tokens", usage.cache_write_tokens),
    ];
    attributes.extend(counts.into_iter().filter_map(|(k, v)| Some(KeyValue::new(k, int(v?)))));
}

/// An answer the response cache gave: a span of its own under the
/// request's, so that a trace shows where no provider was asked.
fn cache_span(t: &Traced, record: &RequestRecord, cache: CacheStatus) -> Span {
    let mut attributes = vec![KeyValue::new("switchyard.cache", cache.as_str())];
    if let Some(p) = &record.provider {
        attributes.push(KeyValue::new("switchyard.provider.name", p.clone()));
    }
    if let Some(saved) = record.saved_usd {
        attributes.push(KeyValue::new("switchyard.saved_usd", saved));
    }
    let start = record.attempts.last().map_or(t.started, |a| at(t.started, a.offset_ms + a.duration_ms.unwrap_or(0.0)));
    Span {
        id: super::new_span_id(),
        parent: t.span_id,
        remote_parent: false,
        kind: SpanKind::Internal,
        name: format!("cache {}", cache.as_str()).into(),
        start,
        end: at(t.started, record.duration_ms),
        attributes,
        events: Vec::new(),
        status: Status::Unset,
    }
}
