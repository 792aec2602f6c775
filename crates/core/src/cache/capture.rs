//! A copy of an answer as it goes by, for the cache: bounded, and kept only
//! if the answer is whole (a stream that ended as a success ends, a JSON
//! object). The relay feeds it what the provider sent, before any usage is
//! stripped for the client, so that a later client who asks for usage can
//! have it.

use bytes::Bytes;

use super::fold;
use super::key::Wire;
use super::store::Form;
use crate::protocol::usage::string_end;

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
            Form::Json => is_answer_object(&self.buf),
        };
        whole.then(|| Bytes::from(self.buf))
    }
}

/// Whether `body` is one whole JSON object, with nothing after it but
/// whitespace, and no top-level `error` member (whatever its value, `null`
/// too: some providers send an error with a success status).
///
/// A structural check, not a parse: strings are crossed whole (escapes
/// included) by `memchr`, brackets must pair, and the tokens between them
/// are not read. It catches what matters here, a body cut short or an
/// error, at a fraction of a parse's cost, and the bytes stored are the
/// provider's as the first client got them. A body that passes it and is
/// not JSON replays as it came; an answer retold in another form (a JSON
/// answer as a stream) is parsed then, and one that fails is a miss.
fn is_answer_object(body: &[u8]) -> bool {
    let start = body.len() - body.trim_ascii_start().len();
    if body.get(start) != Some(&b'{') {
        return false;
    }
    // Open brackets, innermost last; the top level's `{` included.
    let mut open: Vec<u8> = Vec::with_capacity(16);
    let mut at_key = false;
    let mut i = start;
    while let Some(&b) = body.get(i) {
        match b {
            b'"' => {
                let Some(end) = string_end(body, i + 1) else { return false };
                if at_key && open.len() == 1 && &body[i + 1..end] == b"error" {
                    return false;
                }
                at_key = false;
                i = end;
            }
            b'{' | b'[' => {
                open.push(b);
                at_key = b == b'{' && open.len() == 1;
            }
            b'}' | b']' => {
                let opener = if b == b'}' { b'{' } else { b'[' };
                if open.pop() != Some(opener) {
                    return false;
                }
                if open.is_empty() {
                    return body[i + 1..].trim_ascii().is_empty();
                }
            }
            b',' => at_key = open.len() == 1,
            _ => {}
        }
        i += 1;
    }
    false
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
        let mut later_error = Capture::new(Form::Json, 64);
        later_error.push(br#"{"choices":[{"a":1}], "error":{}}"#);
        assert_eq!(later_error.finish(Wire::Chat), None, "an error member after others");
        let mut escaped = Capture::new(Form::Json, 1024);
        escaped.push(b" {\"text\":\"a } ] \\\" \\\\\",\"meta\":{\"error\":null}}\n");
        assert!(escaped.finish(Wire::Chat).is_some(), "brackets and quotes in strings, a nested error member");
        for broken in [&br#"{"a":[1}"#[..], br#"{"a":[1}]"#, br#"{"a":"x}"#, br#"{"a":1}}"#, b"{", b"", b"   "] {
            let mut c = Capture::new(Form::Json, 64);
            c.push(broken);
            assert_eq!(c.finish(Wire::Chat), None, "{:?}", String::from_utf8_lossy(broken));
        }
        let mut stream = Capture::new(Form::Sse, 1024);
        stream.push(b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
        assert!(stream.finish(Wire::Messages).is_some());
        let mut open = Capture::new(Form::Sse, 1024);
        open.push(b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{}}\n\n");
        assert_eq!(open.finish(Wire::Messages), None);
    }
}
