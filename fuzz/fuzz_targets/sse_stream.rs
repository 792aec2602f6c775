//! The SSE splitter and event classifier: how the gateway cuts a provider's
//! stream into events and decides, event by event, whether the stream is
//! still in its preamble (and may fall back), has content, or failed.
//!
//! Input: one byte that picks the endpoint and how the stream is cut, one
//! byte that picks where, then the stream's bytes.
//! Checked: the events and what is left pending are the same whether the
//! stream arrives whole, in two pieces cut anywhere, or in small chunks;
//! no byte is lost, added or reordered; each event ends at its first blank
//! line; a comment or keep-alive is preamble; and the
//! protocol's own error event, built around any text, splits as whole
//! events (one; two for Responses, whose terminal event follows) that each
//! classify as an error with that text.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use switchyard_core::fuzzing::ENDPOINTS;
use switchyard_core::fuzzing::{classify, error_event, parse, Endpoint, Kind, Splitter};

/// The events and the pending bytes of a stream fed in `chunks`.
fn split<'a>(chunks: impl Iterator<Item = &'a [u8]>) -> (Vec<Bytes>, Bytes) {
    let mut splitter = Splitter::default();
    let mut events = Vec::new();
    for chunk in chunks {
        events.extend(splitter.push(chunk));
    }
    let pending = splitter.pending();
    let rest = splitter.take_pending();
    assert_eq!((rest.len(), splitter.pending()), (pending, 0));
    (events, rest)
}

/// Where the first blank line of `bytes` ends, by the SSE rules the splitter
/// keeps: "\n\n", "\r\r" or "\r\n\r\n".
fn first_end(bytes: &[u8]) -> Option<usize> {
    (0..bytes.len()).find_map(|i| {
        let rest = &bytes[i..];
        if rest.starts_with(b"\r\n\r\n") {
            Some(i + 4)
        } else if rest.starts_with(b"\n\n") || rest.starts_with(b"\r\r") {
            Some(i + 2)
        } else {
            None
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let [how, at, stream @ ..] = data else { return };
    let endpoint = ENDPOINTS[usize::from(*how) % ENDPOINTS.len()];
    let cut = stream.len() * usize::from(*at) / 255;
    let chunk = usize::from(how / 6 % 16) + 1;

    let whole = split(std::iter::once(stream));
    let halves = split([&stream[..cut], &stream[cut..]].into_iter());
    let small = split(stream.chunks(chunk));
    assert_eq!(whole, halves, "cut at {cut}");
    assert_eq!(whole, small, "chunks of {chunk}");

    let (events, pending) = &whole;
    let mut rejoined = events.concat();
    rejoined.extend_from_slice(pending);
    assert_eq!(rejoined, stream, "bytes kept as received");
    for event in events {
        assert_eq!(first_end(event), Some(event.len()), "an event ends at its first blank line");
    }
    assert_eq!(first_end(pending), None, "pending bytes hold no complete event");

    // `attempt::until_content` commits at the first event that is not
    // preamble; the events are the same for every cut, so that decision is
    // too. Every event is classified; a comment or keep-alive never commits.
    for event in events {
        let kind = classify(endpoint, event);
        let (name, data) = parse(event);
        if name.is_none() && data.is_empty() {
            assert_eq!(kind, Kind::Preamble, "a comment or keep-alive never commits");
        }
    }

    let message = String::from_utf8_lossy(stream);
    let error = error_event(endpoint, &message);
    let (error_events, rest) = split(std::iter::once(&error[..]));
    assert_eq!((error_events.concat(), rest.len()), (error.to_vec(), 0), "whole events");
    // One event, except Responses: its error event is followed by the
    // terminal `response.failed` its clients wait for.
    assert_eq!(error_events.len(), if endpoint == Endpoint::Responses { 2 } else { 1 }, "events");
    let message = message.into_owned();
    for event in &error_events {
        assert_eq!(classify(endpoint, event), Kind::Error(message.clone()));
    }
});
