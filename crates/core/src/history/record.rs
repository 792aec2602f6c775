//! What is kept about each request, attempt and event. Keys never appear
//! here: an attempt names its key by label only.

use serde::{Deserialize, Serialize};

use crate::ground::outcome::CacheStatus;
use crate::ground::outcome::{AttemptOutcome, Reason, RequestOutcome};
use crate::protocol::usage::Usage;

/// One upstream attempt: what the journal records, the history stores and
/// the admin API returns (as `AttemptRow`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "AttemptRow"))]
pub struct AttemptRecord {
    pub seq: u32,
    pub provider: String,
    pub key_label: Option<String>,
    pub model: String,
    pub reason: Reason,
    pub fallback_from: Option<String>,
    #[serde(rename = "started_at")]
    pub started_at_ms: i64,
    /// Start relative to the request's start.
    pub offset_ms: f64,
    pub timeout_ms: Option<f64>,
    /// Backoff slept just before this attempt.
    pub backoff_ms: f64,
    pub duration_ms: Option<f64>,
    pub ttfb_ms: Option<f64>,
    pub ttft_ms: Option<f64>,
    pub status: Option<u16>,
    pub outcome: AttemptOutcome,
    pub retry_after_ms: Option<f64>,
    #[cfg_attr(test, ts(as = "Option<crate::policy::breaker::BreakerState>"))]
    pub breaker_state: Option<String>,
    pub error: Option<String>,
    pub usage: Usage,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RequestRecord {
    pub id: String,
    pub correlation_id: String,
    pub started_at_ms: i64,
    pub finished_at_ms: i64,
    pub user_agent: Option<String>,
    pub endpoint: String,
    pub model: Option<String>,
    pub streamed: bool,
    pub outcome: RequestOutcome,
    pub status: Option<u16>,
    pub provider: Option<String>,
    pub provider_model: Option<String>,
    pub fallback: bool,
    pub duration_ms: f64,
    pub ttft_ms: Option<f64>,
    pub usage: Usage,
    pub cost_usd: Option<f64>,
    pub error_code: Option<String>,
    pub error: Option<String>,
    pub request_body: Option<String>,
    pub response_body: Option<String>,
    pub attempts: Vec<AttemptRecord>,
    /// The attempts sent in a format other than the client's. After the
    /// fields of version 1 of the spool's frames, so that a frame written
    /// before it existed reads with none (see spool.rs).
    pub translations: Vec<AttemptTranslation>,
    /// What the response cache did; `None` when it was not consulted.
    /// Version 3 of the frames added this and `saved_usd`, last.
    pub cache: Option<CacheStatus>,
    /// What an answer from the cache would have cost from the provider
    /// (its stored usage at today's prices); `None` for other requests.
    pub saved_usd: Option<f64>,
    /// What each translated attempt left out. Version 4 of the frames
    /// added it, last.
    #[serde(default)]
    pub dropped: Vec<AttemptDropped>,
    /// The team instance that served it (`[team] instance`); `None` for a
    /// gateway alone. Version 5 of the frames added it, last.
    #[serde(default)]
    pub instance: Option<String>,
    /// Why the route's strategy put each attempt's provider where it did;
    /// none for attempts in chain order. Version 6 of the frames added it, last.
    #[serde(default)]
    pub routing: Vec<AttemptRouting>,
    /// The team member whose key made it; `None` for the owner (the local
    /// access token) or a gateway without members. Never the key itself.
    /// Version 7 of the frames added it, last.
    #[serde(default)]
    pub member: Option<String>,
    /// The conversation it is part of ([`crate::session`]); `None` for a
    /// request refused before its body was read. Version 8 of the frames
    /// added it, last.
    #[serde(default)]
    pub session: Option<String>,
    /// Whether its newest message was the user's own input (a turn of the
    /// conversation: `Some(true)`) or an agent's follow-up after tool calls
    /// (`Some(false)`); `None` when its body was not read or holds no
    /// conversation. Version 9 of the frames added it, last.
    #[serde(default)]
    pub turn: Option<bool>,
    /// The request's W3C trace id (`traceparent`'s 32 lowercase hex digits),
    /// under which its spans were exported; `None` when tracing is off or
    /// the trace was not sampled. Version 10 of the frames added it, last.
    #[serde(default)]
    pub trace_id: Option<String>,
    /// The device a member's joined gateway sent it from
    /// (`x-switchyard-device`); `None` for any other request. Version 11 of
    /// the frames added it, last.
    #[serde(default)]
    pub device: Option<String>,
}

impl RequestRecord {
    /// A request record before anything is known about its outcome.
    pub fn blank(id: &str, correlation_id: &str, endpoint: &str, user_agent: Option<&str>) -> RequestRecord {
        let now = crate::ground::clock::now_ms();
        RequestRecord {
            id: id.to_string(),
            correlation_id: correlation_id.to_string(),
            started_at_ms: now,
            finished_at_ms: now,
            user_agent: user_agent.map(str::to_string),
            endpoint: endpoint.to_string(),
            model: None,
            streamed: false,
            outcome: crate::ground::outcome::RequestOutcome::Canceled,
            status: None,
            provider: None,
            provider_model: None,
            fallback: false,
            duration_ms: 0.0,
            ttft_ms: None,
            usage: crate::protocol::usage::Usage::default(),
            cost_usd: None,
            error_code: None,
            error: None,
            request_body: None,
            response_body: None,
            attempts: Vec::new(),
            translations: Vec::new(),
            cache: None,
            saved_usd: None,
            dropped: Vec::new(),
            instance: None,
            routing: Vec::new(),
            member: None,
            session: None,
            turn: None,
            trace_id: None,
            device: None,
        }
    }
}

/// Which strategy put an attempt's provider where it was, and the figures
/// it weighed then. Stored as figures; text is made when it is read
/// ([`crate::policy::order::Routing::describe`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct AttemptRouting {
    pub seq: u32,
    pub routing: crate::policy::order::Routing,
}

impl AttemptRouting {
    /// How history stores it: a format byte, then the figures in postcard,
    /// as the spool writes records. Not JSON: writing numbers as text cost
    /// the history writer more per request than the decision itself.
    pub fn column(&self) -> Option<Vec<u8>> {
        postcard::to_extend(&self.routing, vec![ROUTING_V1]).ok()
    }

    /// Read back from [`AttemptRouting::column`].
    pub fn from_column(seq: u32, bytes: &[u8]) -> Option<AttemptRouting> {
        match bytes.split_first()? {
            (&ROUTING_V1, rest) => postcard::from_bytes(rest).ok().map(|routing| AttemptRouting { seq, routing }),
            _ => None,
        }
    }
}

/// The first byte of a stored [`AttemptRouting`]: a field added to
/// [`crate::policy::order::Routing`] needs a new one (see spool.rs).
const ROUTING_V1: u8 = 1;

/// An attempt translated for its provider: the client's format and the one
/// the provider was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct AttemptTranslation {
    pub seq: u32,
    pub client: crate::protocol::Format,
    pub provider: crate::protocol::Format,
}

impl AttemptTranslation {
    /// How history stores it: `messages>chat`.
    pub fn column(&self) -> String {
        format!("{}>{}", self.client, self.provider)
    }

    /// Read back from [`AttemptTranslation::column`].
    pub fn from_column(seq: u32, text: &str) -> Option<AttemptTranslation> {
        let (client, provider) = text.split_once('>')?;
        let format = |t: &str| crate::protocol::Format::ALL.into_iter().find(|f| f.as_str() == t);
        Some(AttemptTranslation { seq, client: format(client)?, provider: format(provider)? })
    }
}

/// What a translated attempt left out: each drop-table row it hit, as
/// `field: reason`, then each thing the client sent that the translator
/// does not know, as `path: unmapped: what became of it`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct AttemptDropped {
    pub seq: u32,
    pub fields: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct EventRecord {
    pub at_ms: i64,
    pub kind: String,
    pub provider: Option<String>,
    pub detail: String,
    pub request_id: Option<String>,
}

/// A request's captured bodies (see [`crate::proxy::capture`]): kept in a
/// table of their own, never in the request's row. Spooled with its
/// request, in a frame of its own kind (see the spool's
/// `FRAME_CAPTURE_V1`): a capture the client saw the end of survives a
/// crash as its request does. Its shape is pinned by the spool's tests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaptureRecord {
    pub request_id: String,
    pub started_at_ms: i64,
    /// The request this one re-sent, for a replay.
    pub replay_of: Option<String>,
    /// The capture as zstd-compressed JSON, scrubbed before it was compressed.
    #[serde(with = "raw_bytes")]
    pub data: Vec<u8>,
}

/// A byte vector as bytes, not as a sequence of numbers: postcard then
/// copies a large capture in one go instead of a call per byte.
mod raw_bytes {
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(data: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(data)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        d.deserialize_byte_buf(Bytes)
    }

    struct Bytes;

    impl serde::de::Visitor<'_> for Bytes {
        type Value = Vec<u8>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("bytes")
        }

        fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
            Ok(v.to_vec())
        }

        fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
            Ok(v)
        }
    }
}

#[derive(Debug, Clone)]
pub enum Record {
    Request(Box<RequestRecord>),
    Event(EventRecord),
    Capture(Box<CaptureRecord>),
}

/// A finished, successful request, for tests to change what they need.
#[cfg(test)]
pub(crate) fn sample_request(id: &str) -> RequestRecord {
    RequestRecord {
        model: Some("m".into()),
        outcome: RequestOutcome::Ok,
        status: Some(200),
        provider: Some("p".into()),
        provider_model: Some("m".into()),
        duration_ms: 1.0,
        ..RequestRecord::blank(id, id, "/v1/chat/completions", None)
    }
}
