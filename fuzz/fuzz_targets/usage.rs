//! The usage reader: token counts read from a provider's JSON body, or from
//! its event stream as it goes by (with the extra usage chunk stripped when
//! the gateway asked for usage the client did not).
//!
//! Input: one byte that picks the endpoint and the mode (a JSON body, a
//! stream, a stripped stream), one byte that picks a cut and a body limit,
//! then the bytes.
//! Checked, for a body: whenever it is a JSON object, the fast scanner
//! finds the same top-level `usage` member a real JSON parser does (the
//! first one, spelled without escapes), so the counts equal those read from
//! `{"usage": <that member>}` alone; Anthropic's input count (which adds
//! cache reads and writes) is never below its cached count nor its cache
//! writes, which Gemini never reports; the body tap passes every
//! byte on and reads the same usage; the stored copy is the body's first
//! bytes. For a stream: usage and the bytes passed on are the same however
//! the stream is cut; unstripped, they are the stream itself; stripped, no
//! byte is added and a stream that never mentions usage is untouched.
#![no_main]

use std::borrow::Cow;
use std::fmt;

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use switchyard_core::fuzzing::ENDPOINTS;
use switchyard_core::fuzzing::{from_body, Tap};
use switchyard_core::protocol::Endpoint;
use switchyard_core::protocol::Usage;

/// A JSON object's top-level members in order, duplicates kept, each key
/// borrowed when it was written without escapes.
struct Members<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

struct Key<'a>(Cow<'a, str>);

impl<'de> serde::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(s.to_string())))
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de> serde::Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members<'de>, A::Error> {
                let mut members = Vec::new();
                while let Some((Key(k), v)) = map.next_entry::<Key<'de>, &'de RawValue>()? {
                    members.push((k, v));
                }
                Ok(Members(members))
            }
        }
        d.deserialize_map(V)
    }
}

/// The usage the body's top-level `usage` member holds, by a real parser;
/// `None` when the body is not a JSON object.
fn by_parser(endpoint: Endpoint, body: &[u8]) -> Option<Usage> {
    let text = std::str::from_utf8(body).ok()?;
    let Members(members) = serde_json::from_str(text).ok()?;
    let first = members.iter().find(|(k, _)| matches!(k, Cow::Borrowed("usage")));
    Some(match first {
        Some((_, value)) => from_body(endpoint, format!("{{\"usage\":{}}}", value.get()).as_bytes()),
        None => Usage::default(),
    })
}

fn check_body(endpoint: Endpoint, body: &[u8], cut: usize, limit: usize) {
    let usage = from_body(endpoint, body);
    if let Some(expected) = by_parser(endpoint, body) {
        assert_eq!(usage, expected, "the scanner finds the member the parser does");
    }
    if let (Endpoint::Messages, Some(input), Some(cached)) = (endpoint, usage.input_tokens, usage.cached_tokens) {
        assert!(input >= cached, "input counts include cache reads");
    }
    if let (Endpoint::Messages, Some(input), Some(written)) = (endpoint, usage.input_tokens, usage.cache_write_tokens) {
        assert!(input >= written, "input counts include cache writes");
    }
    if matches!(endpoint, Endpoint::GeminiGenerate | Endpoint::GeminiStream) {
        assert_eq!(usage.cache_write_tokens, None, "Gemini reports no cache writes");
    }
    let mut tap = Tap::new(endpoint, false, false, Some(limit));
    for piece in [&body[..cut], &body[cut..]] {
        let piece = Bytes::copy_from_slice(piece);
        assert_eq!(tap.observe(piece.clone()), piece, "a body passes unchanged");
    }
    assert_eq!(tap.flush(), Bytes::new());
    assert_eq!(tap.usage(), usage);
    let kept = String::from_utf8_lossy(&body[..limit.min(body.len())]).into_owned();
    assert_eq!(tap.kept(), Some(kept));
}

/// What a stream tap passes on (flushed at the end) and the usage it read.
fn tap_stream<'a>(endpoint: Endpoint, strip: bool, chunks: impl Iterator<Item = &'a [u8]>) -> (Vec<u8>, Usage) {
    let mut tap = Tap::new(endpoint, true, strip, None);
    let mut out = Vec::new();
    for chunk in chunks {
        out.extend_from_slice(&tap.observe(Bytes::copy_from_slice(chunk)));
    }
    out.extend_from_slice(&tap.flush());
    (out, tap.usage())
}

fn check_stream(endpoint: Endpoint, strip: bool, stream: &[u8], cut: usize, chunk: usize) {
    let whole = tap_stream(endpoint, strip, std::iter::once(stream));
    assert_eq!(whole, tap_stream(endpoint, strip, [&stream[..cut], &stream[cut..]].into_iter()), "cut at {cut}");
    assert_eq!(whole, tap_stream(endpoint, strip, stream.chunks(chunk)), "chunks of {chunk}");
    let (out, _) = whole;
    if !strip || !stream.windows(7).any(|w| w == b"\"usage\"") {
        assert_eq!(out, stream, "nothing to strip: passed on as received");
    } else {
        assert!(out.len() <= stream.len(), "stripping only removes");
    }
}

fuzz_target!(|data: &[u8]| {
    let [how, at, bytes @ ..] = data else { return };
    let endpoint = ENDPOINTS[usize::from(*how) % ENDPOINTS.len()];
    let cut = bytes.len() * usize::from(*at) / 255;
    match how / 6 % 3 {
        0 => check_body(endpoint, bytes, cut, usize::from(*at)),
        mode => check_stream(endpoint, mode == 2, bytes, cut, usize::from(at % 16) + 1),
    }
});
