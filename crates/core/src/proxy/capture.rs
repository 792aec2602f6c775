//! Capture: what the inspector shows of one request. The client's request
//! (method, path, headers without credentials, body), per attempt the
//! request as it went upstream and the provider's answer (for a stream, its
//! events with their arrival times), and what the client got.
//!
//! A request is captured when bodies are kept (`[history] store_bodies`),
//! when the capture switch is on (the next N requests or until a time, set
//! from the dashboard or the CLI), or when it carries
//! `x-switchyard-capture: 1`. Deciding costs a bool, two atomics and a
//! header lookup; a request not captured carries `None` and every capture
//! step is skipped on that `None`.
//!
//! Each body is cut at `[history] body_limit` (a marker says where), and
//! everything is scrubbed of every secret the gateway knows and the client
//! sent before it is compressed (zstd) into a record of its own, kept in
//! the `captures` table beside the request's row.

use std::sync::Arc;

use axum::http::{HeaderMap, HeaderValue};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::journal::Journal;
use super::scrub::Scrubber;
use super::Inbound;
use crate::gateway::capture::Switch;
use crate::gateway::Gateway;
use crate::ground::headers;
use crate::telemetry::trace::CONTENT_LIMIT;

use crate::history::record::CaptureRecord;

/// The request header that asks for one request to be captured.
pub const CAPTURE_HEADER: &str = "x-switchyard-capture";

/// Put where a body was cut at `body_limit`.
pub const CUT_MARKER: &str = "\n[… cut at history.body_limit]";

/// zstd's level: fast, and captures are small.
const ZSTD_LEVEL: i32 = 3;

/// The whole capture of one request, as stored and as the inspector reads it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Captured {
    pub client: CapturedRequest,
    pub attempts: Vec<CapturedAttempt>,
    /// What the client got: the answer in its own format, or the gateway's error.
    pub answer: Option<CapturedResponse>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct CapturedRequest {
    pub method: String,
    /// Path and query (credential parameters removed), or the upstream URL.
    pub path: String,
    /// Credentials' values replaced by `[redacted]`.
    pub headers: Vec<(String, String)>,
    pub body: Option<CapturedBody>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct CapturedBody {
    /// The body as text (lossy UTF-8), up to `body_limit`, then [`CUT_MARKER`].
    pub text: String,
    /// Its full size in bytes.
    #[cfg_attr(test, ts(type = "number"))]
    pub size: u64,
    pub truncated: bool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct CapturedAttempt {
    /// The attempt's `seq` in the request's attempts.
    pub seq: u32,
    pub request: CapturedRequest,
    pub response: Option<CapturedResponse>,
    /// Secrets `[server] redact_outgoing` took out of the prompt.
    pub redacted: u32,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct CapturedResponse {
    pub status: Option<u16>,
    pub headers: Vec<(String, String)>,
    pub body: CapturedBody,
    /// For an event stream: each event as it arrived.
    pub events: Vec<CapturedEvent>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct CapturedEvent {
    /// Milliseconds from the attempt's send to the event's arrival.
    pub at_ms: f64,
    /// The event's `event:` name, if it has one.
    pub event: Option<String>,
    /// Its size in bytes.
    #[cfg_attr(test, ts(type = "number"))]
    pub size: u64,
    pub text: String,
}

/// A capture being gathered, carried by the request's journal.
#[derive(Debug)]
pub struct Capture {
    scrub: Arc<Scrubber>,
    limit: usize,
    replay_of: Option<String>,
    doc: Captured,
    /// A stream's bytes after its last whole event.
    pending: Vec<u8>,
    /// Where the answering attempt's events are timed from.
    sent: Option<Instant>,
}

/// Whether to capture this request: the one check every request pays.
pub fn wanted(store_bodies: bool, switch: &Switch, client: &HeaderMap) -> bool {
    store_bodies || client.get(CAPTURE_HEADER).is_some_and(|v| v.as_bytes() == b"1") || switch.on()
}

/// The attempt at `index`'s request as it leaves: with `[server]
/// redact_outgoing`, without the secrets its prompt carried (counted on the
/// attempt); captured, when the request is. Neither on: returned as it is.
pub async fn outgoing(gateway: &Gateway, journal: &mut Journal, index: usize, request: Upstream) -> Upstream {
    let redact = gateway.redacts_outgoing();
    if !redact && !journal.captured() {
        return request;
    }
    let (parts, body) = request.into_parts();
    let body = match http_body_util::BodyExt::collect(body).await {
        Ok(collected) => collected.to_bytes(),
        Err(never) => match never {},
    };
    let cleaned = if redact {
        let known = Scrubber::for_request(gateway, &gateway.live().providers, &HeaderMap::new(), None);
        super::redact::outgoing(&known, &body)
    } else {
        None
    };
    let (body, redacted) = match cleaned {
        Some((clean, n)) => (bytes::Bytes::from(clean), n),
        None => (body, 0),
    };
    if redacted > 0 {
        journal.redacted(index, redacted);
    }
    journal.capture_sent(index, &parts, &body, redacted);
    axum::http::Request::from_parts(parts, http_body_util::Full::new(body))
}

/// A request on its way upstream.
type Upstream = axum::http::Request<http_body_util::Full<bytes::Bytes>>;

/// Starts capturing `inbound` into its journal, if it is to be captured
/// and there is a history to keep it in.
pub fn begin(gateway: &Gateway, inbound: &Inbound, journal: &mut Journal) {
    let Some(sink) = gateway.sink() else { return };
    if !wanted(sink.keep_bodies.is_some(), gateway.capture_switch(), &inbound.headers) {
        return;
    }
    let live = gateway.live();
    let scrub = Scrubber::for_request(gateway, &live.providers, &inbound.headers, inbound.uri.query());
    let limit = live.config.history.body_limit;
    let mut capture = Capture::new(Arc::new(scrub), limit, gateway.capture_switch(), &inbound.ids.request_id);
    let path = match inbound.uri.query() {
        Some(q) => format!("{}?{}", inbound.uri.path(), headers::forwarded_query(q)),
        None => inbound.uri.path().to_string(),
    };
    capture.client("POST", &path, &inbound.headers);
    journal.capture(capture);
}

/// Keeps a traced request's prompt and answer for its spans, when
/// `[telemetry] capture_content` asks for them: the client's messages (the
/// latest that fit in [`CONTENT_LIMIT`]) and what the client was sent (up
/// to [`ANSWER_KEPT`]), scrubbed of every secret as a capture is before
/// they leave.
pub fn begin_span_content(gateway: &Gateway, inbound: &Inbound, journal: &mut Journal) {
    if !(gateway.tracer().captures_content() && journal.traced()) {
        return;
    }
    let live = gateway.live();
    let scrub = Scrubber::for_request(gateway, &live.providers, &inbound.headers, inbound.uri.query());
    journal.span_content(SpanContent {
        scrub: Arc::new(scrub),
        endpoint: inbound.endpoint,
        input: None,
        output: Vec::new(),
    });
}

/// The most of an answer kept for its span before it is read (a stream's
/// events are more than their text).
pub const ANSWER_KEPT: usize = 4 * CONTENT_LIMIT;

/// A traced request's prompt and answer, as they go by.
pub struct SpanContent {
    scrub: Arc<Scrubber>,
    endpoint: crate::protocol::Endpoint,
    input: Option<String>,
    output: Vec<u8>,
}

impl std::fmt::Debug for SpanContent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SpanContent({:?}, {} bytes of answer)", self.endpoint, self.output.len())
    }
}

impl SpanContent {
    pub fn input(&mut self, body: &[u8]) {
        self.input = crate::telemetry::trace::content::input(self.endpoint, body, CONTENT_LIMIT);
    }

    pub fn output(&mut self, chunk: &[u8]) {
        let room = ANSWER_KEPT.saturating_sub(self.output.len());
        self.output.extend_from_slice(&chunk[..room.min(chunk.len())]);
    }

    /// Both, scrubbed, for the spans.
    pub fn seal(self) -> crate::telemetry::trace::Content {
        let scrub = |text: &str| self.scrub.text(text).into_owned();
        let output = (!self.output.is_empty()).then(|| scrub(&String::from_utf8_lossy(&self.output)));
        crate::telemetry::trace::Content { endpoint: self.endpoint, input: self.input.as_deref().map(scrub), output }
    }
}

impl Capture {
    pub fn new(scrub: Arc<Scrubber>, limit: usize, switch: &Switch, request_id: &str) -> Capture {
        Capture {
            scrub,
            limit,
            replay_of: switch.replay_of(request_id),
            doc: Captured::default(),
            pending: Vec::new(),
            sent: None,
        }
    }

    pub fn client(&mut self, method: &str, path: &str, client: &HeaderMap) {
        self.doc.client =
            CapturedRequest { method: method.to_string(), path: path.to_string(), headers: listed(client), body: None };
    }

    pub fn client_body(&mut self, body: &[u8]) {
        self.doc.client.body = Some(self.body(body));
    }

    /// The attempt `seq` went to `url` with these headers and body.
    pub fn sent(&mut self, seq: u32, url: &str, sent: &HeaderMap, body: &[u8], redacted: u32) {
        let request = CapturedRequest {
            method: "POST".into(),
            path: url.to_string(),
            headers: listed(sent),
            body: Some(self.body(body)),
        };
        self.doc.attempts.push(CapturedAttempt { seq, request, response: None, redacted });
    }

    /// The attempt `seq` failed: its status, if it answered, and what it said.
    pub fn failed(&mut self, seq: u32, status: Option<u16>, text: &str) {
        let body = self.body(text.as_bytes());
        if let Some(a) = self.attempt(seq) {
            a.response = Some(CapturedResponse { status, body, ..CapturedResponse::default() });
        }
    }

    /// The attempt `seq` answered the client: its head, sent at `sent`.
    pub fn answered(&mut self, seq: u32, status: u16, head: &HeaderMap, sent: Instant) {
        self.sent = Some(sent);
        if let Some(a) = self.attempt(seq) {
            a.response =
                Some(CapturedResponse { status: Some(status), headers: listed(head), ..CapturedResponse::default() });
        }
        self.doc.answer = Some(CapturedResponse { status: Some(status), ..CapturedResponse::default() });
    }

    /// Bytes of the answering attempt's body as they arrive.
    pub fn upstream(&mut self, seq: u32, chunk: &[u8], sse: bool) {
        let at_ms = self.sent.map_or(0.0, |s| s.elapsed().as_secs_f64() * 1000.0);
        let limit = self.limit;
        if sse {
            self.pending.extend_from_slice(chunk);
            let events = split_events(&mut self.pending);
            if let Some(r) = self.attempt(seq).and_then(|a| a.response.as_mut()) {
                for event in events {
                    if r.body.size < limit as u64 {
                        r.events.push(event_of(&event, at_ms));
                    }
                    append(&mut r.body, &event, limit);
                }
            }
        } else if let Some(r) = self.attempt(seq).and_then(|a| a.response.as_mut()) {
            append(&mut r.body, chunk, limit);
        }
    }

    /// Bytes the client got.
    pub fn answer(&mut self, chunk: &[u8]) {
        let limit = self.limit;
        if let Some(answer) = &mut self.doc.answer {
            append(&mut answer.body, chunk, limit);
        }
    }

    /// The gateway answered with its own error.
    pub fn error(&mut self, status: u16, message: &str) {
        let body = self.body(message.as_bytes());
        self.doc.answer = Some(CapturedResponse { status: Some(status), body, ..CapturedResponse::default() });
    }

    fn attempt(&mut self, seq: u32) -> Option<&mut CapturedAttempt> {
        self.doc.attempts.iter_mut().rev().find(|a| a.seq == seq)
    }

    fn body(&self, bytes: &[u8]) -> CapturedBody {
        let mut body = CapturedBody::default();
        append(&mut body, bytes, self.limit);
        body
    }

    /// The record to store: scrubbed, then compressed. `None` if it cannot
    /// be encoded (logged).
    pub fn seal(mut self, request_id: &str, started_at_ms: i64) -> Option<CaptureRecord> {
        if !self.pending.is_empty() {
            let rest = std::mem::take(&mut self.pending);
            if let Some(r) = self.doc.attempts.iter_mut().rev().find_map(|a| a.response.as_mut()) {
                append(&mut r.body, &rest, self.limit);
            }
        }
        scrub_all(&mut self.doc, &self.scrub);
        let json = serde_json::to_vec(&self.doc).ok()?;
        match zstd::bulk::compress(&json, ZSTD_LEVEL) {
            Ok(data) => Some(CaptureRecord {
                request_id: request_id.to_string(),
                started_at_ms,
                replay_of: self.replay_of,
                data,
            }),
            Err(e) => {
                tracing::warn!(request_id, "capture not kept: {e}");
                None
            }
        }
    }
}

/// A stored capture read back.
pub fn decode(data: &[u8]) -> Result<Captured, String> {
    let json = zstd::stream::decode_all(data).map_err(|e| format!("capture does not decompress: {e}"))?;
    serde_json::from_slice(&json).map_err(|e| format!("capture does not parse: {e}"))
}

/// Headers as pairs, a credential's value replaced (the provider's key
/// upstream, the client's key or member key from the client).
fn listed(map: &HeaderMap) -> Vec<(String, String)> {
    map.iter()
        .map(|(name, value)| {
            let value =
                if headers::CREDENTIALS.contains(name) { super::scrub::REDACTED.to_string() } else { shown(value) };
            (name.as_str().to_string(), value)
        })
        .collect()
}

fn shown(value: &HeaderValue) -> String {
    String::from_utf8_lossy(value.as_bytes()).into_owned()
}

/// Adds `bytes` to `body`, up to `limit` bytes of text, then the marker.
fn append(body: &mut CapturedBody, bytes: &[u8], limit: usize) {
    body.size += bytes.len() as u64;
    if body.truncated {
        return;
    }
    let room = limit.saturating_sub(body.text.len());
    if bytes.len() <= room {
        body.text.push_str(&String::from_utf8_lossy(bytes));
    } else {
        body.text.push_str(&String::from_utf8_lossy(&bytes[..room]));
        body.text.push_str(CUT_MARKER);
        body.truncated = true;
    }
}

/// The whole SSE events at the start of `pending` (each with its blank
/// line), leaving what follows the last one.
fn split_events(pending: &mut Vec<u8>) -> Vec<Vec<u8>> {
    let mut events = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i + 1 < pending.len() {
        let end = match (pending[i], pending[i + 1]) {
            (b'\n', b'\n') => Some(i + 2),
            (b'\r', b'\n') if pending[i + 2..].starts_with(b"\r\n") => Some(i + 4),
            _ => None,
        };
        match end {
            Some(end) => {
                events.push(pending[start..end].to_vec());
                start = end;
                i = end;
            }
            None => i += 1,
        }
    }
    pending.drain(..start);
    events
}

fn event_of(raw: &[u8], at_ms: f64) -> CapturedEvent {
    let text = String::from_utf8_lossy(raw).into_owned();
    let event = text.lines().find_map(|l| l.strip_prefix("event:")).map(|n| n.trim().to_string());
    CapturedEvent { at_ms, event, size: raw.len() as u64, text }
}

/// Every text in the capture without the secrets `scrub` knows.
fn scrub_all(doc: &mut Captured, scrub: &Scrubber) {
    let clean = |s: &mut String| {
        if let std::borrow::Cow::Owned(c) = scrub.text(s) {
            *s = c;
        }
    };
    let request = |r: &mut CapturedRequest| {
        clean(&mut r.path);
        r.headers.iter_mut().for_each(|(_, v)| clean(v));
        if let Some(b) = &mut r.body {
            clean(&mut b.text);
        }
    };
    let response = |r: &mut CapturedResponse| {
        r.headers.iter_mut().for_each(|(_, v)| clean(v));
        clean(&mut r.body.text);
        r.events.iter_mut().for_each(|e| clean(&mut e.text));
    };
    request(&mut doc.client);
    for a in &mut doc.attempts {
        request(&mut a.request);
        if let Some(r) = &mut a.response {
            response(r);
        }
    }
    if let Some(r) = &mut doc.answer {
        response(r);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::capture::SwitchState;

    fn capture(limit: usize) -> Capture {
        let mut scrub = Scrubber::new();
        scrub.add("sk-provider-secret-1234");
        Capture::new(Arc::new(scrub), limit, &Switch::default(), "r1")
    }

    #[test]
    fn events_are_split_as_they_arrive_and_timed() {
        let mut c = capture(1024);
        c.sent(1, "http://p/v1/chat/completions", &HeaderMap::new(), b"{}", 0);
        c.answered(1, 200, &HeaderMap::new(), Instant::now());
        c.upstream(1, b"data: {\"a\":1}\n\ndata: {\"b\"", true);
        c.upstream(1, b":2}\n\nevent: done\ndata: [DONE]\n\n", true);
        let events = &c.doc.attempts[0].response.as_ref().unwrap().events;
        assert_eq!(events.len(), 3);
        assert_eq!(events[1].text, "data: {\"b\":2}\n\n");
        assert_eq!(events[2].event.as_deref(), Some("done"));
        assert!(events.iter().all(|e| e.at_ms >= 0.0));
    }

    #[test]
    fn a_body_is_cut_at_the_limit_with_a_marker() {
        let mut c = capture(8);
        c.client_body(b"0123456789abcdef");
        let body = c.doc.client.body.as_ref().unwrap();
        assert_eq!(body.text, format!("01234567{CUT_MARKER}"));
        assert_eq!(body.size, 16);
        assert!(body.truncated);
    }

    #[test]
    fn credentials_and_known_secrets_are_not_stored() {
        let mut c = capture(1024);
        let mut h = HeaderMap::new();
        h.insert("x-api-key", HeaderValue::from_static("sk-client-key-5678"));
        h.insert("x-note", HeaderValue::from_static("has sk-provider-secret-1234 inside"));
        c.client("POST", "/v1/messages", &h);
        c.client_body(br#"{"prompt":"sk-provider-secret-1234"}"#);
        c.error(502, "provider said sk-provider-secret-1234");
        let record = c.seal("r1", 1).unwrap();
        let doc = decode(&record.data).unwrap();
        let text = serde_json::to_string(&doc).unwrap();
        assert!(!text.contains("sk-client-key-5678"), "{text}");
        assert!(!text.contains("sk-provider-secret-1234"), "{text}");
        assert!(text.contains("[redacted]"));
    }

    #[test]
    fn the_switch_counts_down_and_links_replays() {
        let s = Switch::default();
        s.set(SwitchState { remaining: 2, until_ms: 0 });
        assert!(s.on() && s.on() && !s.on());
        s.expect_replay("new", "old", None);
        assert_eq!(s.replay_of("other"), None);
        assert_eq!(s.replay_of("new").as_deref(), Some("old"));
        assert_eq!(s.replay_of("new"), None);
    }
}
