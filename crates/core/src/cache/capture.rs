//! A copy of an answer as it goes by, for the cache: bounded, and kept only
//! if the answer is whole (a stream that ended as a success ends, a JSON
//! object). The relay feeds it what the provider sent, before any usage is
//! stripped for the client, so that a later client who asks for usage can
//! have it.

use bytes::Bytes;

use super::fold;
use super::key::Wire;
use super::store::Form;

#[derive(Debug)]
pub struct Capture {
    form: Form,
    buf: Vec<u8>,
    max: usize,
    overflowed: bool,
}

impl Capture {
    /// A capture of at most `max` bytes (the store's `max_entry_bytes`).
    pub fn new(form: Form, max: usize) -> Capture {
        Capture { form, buf: Vec::new(), max, overflowed: false }
    }

    pub fn push(&mut self, chunk: &[u8]) {
        if self.overflowed {
            return;
        }
        if self.buf.len() + chunk.len() > self.max {
            // Too large to cache: stop copying at once.
            self.overflowed = true;
            self.buf = Vec::new();
            return;
        }
        self.buf.extend_from_slice(chunk);
    }

    /// The answer to store, if it fit and is whole.
    pub fn finish(self, wire: Wire) -> Option<Bytes> {
        if self.overflowed || self.buf.is_empty() {
            return None;
        }
        let whole = match self.form {
            Form::Sse => fold::is_whole(wire, &self.buf),
            Form::Json => matches!(serde_json::from_slice(&self.buf), Ok(Top { error: Seen(false) })),
        };
        whole.then(|| Bytes::from(self.buf))
    }
}

/// A JSON object's top level, read only to learn whether it has an `error`
/// member: the rest is checked as JSON and skipped, not built into a tree
/// (which was most of what a stored miss cost).
#[derive(serde::Deserialize)]
struct Top {
    #[serde(default)]
    error: Seen,
}

/// Whether a member was there, whatever its value (`null` too).
#[derive(Default)]
struct Seen(bool);

impl<'de> serde::Deserialize<'de> for Seen {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Seen, D::Error> {
        serde::de::IgnoredAny::deserialize(d).map(|_| Seen(true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_whole_answers_that_fit_are_kept() {
        let mut json = Capture::new(Form::Json, 64);
        json.push(b"{\"choices\":");
        json.push(b"[]}");
        assert_eq!(json.finish(Wire::Chat).as_deref(), Some(&b"{\"choices\":[]}"[..]));
        let mut big = Capture::new(Form::Json, 8);
        big.push(b"{\"a\":\"0123456789\"}");
        assert_eq!(big.finish(Wire::Chat), None);
        let mut cut = Capture::new(Form::Json, 64);
        cut.push(b"{\"choices\":[");
        assert_eq!(cut.finish(Wire::Chat), None);
        let mut error = Capture::new(Form::Json, 64);
        error.push(br#"{"error":{"message":"x"}}"#);
        assert_eq!(error.finish(Wire::Chat), None);
        let mut null_error = Capture::new(Form::Json, 64);
        null_error.push(br#"{"choices":[],"error":null}"#);
        assert_eq!(null_error.finish(Wire::Chat), None, "an error member, even null");
        let mut array = Capture::new(Form::Json, 64);
        array.push(b"[1,2]");
        assert_eq!(array.finish(Wire::Chat), None, "not an object");
        let mut trailing = Capture::new(Form::Json, 64);
        trailing.push(br#"{"choices":[]} x"#);
        assert_eq!(trailing.finish(Wire::Chat), None, "not JSON");
        let mut stream = Capture::new(Form::Sse, 1024);
        stream.push(b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
        assert!(stream.finish(Wire::Messages).is_some());
        let mut open = Capture::new(Form::Sse, 1024);
        open.push(b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{}}\n\n");
        assert_eq!(open.finish(Wire::Messages), None);
    }
}
