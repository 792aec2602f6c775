//! Server-sent events in and out, by the transport rules every decoder
//! shares: lines end in `\n`, `\r\n` or `\r`, a blank line ends an event,
//! `data:` may or may not be followed by a space, several `data:` lines are
//! joined with `\n`, comments (`:`) and unknown fields are skipped.
//!
//! Lines are cut on bytes before any text is decoded, and a line is decoded
//! only once it is complete: a character split across chunks is never cut,
//! because a line break byte cannot occur inside a multibyte sequence. What
//! is held between chunks is the current line and the current event's data,
//! never more than one event.

use bytes::BytesMut;

/// Reads events out of a byte stream, chunk by chunk.
#[derive(Debug, Default)]
pub(crate) struct Reader {
    /// The bytes of a line not yet ended.
    line: Vec<u8>,
    /// The last chunk ended in `\r`: a `\n` that starts the next one belongs
    /// to the same line break.
    after_cr: bool,
    /// The current event's `event:` field.
    name: String,
    /// The current event's joined `data:` lines.
    data: String,
    /// Whether any `data:` line was seen (an empty one counts).
    has_data: bool,
}

impl Reader {
    /// Feeds bytes; calls `on_event(name, data)` for each event they complete.
    pub(crate) fn push(&mut self, mut bytes: &[u8], on_event: &mut dyn FnMut(&str, &str)) {
        if self.after_cr && !bytes.is_empty() {
            self.after_cr = false;
            if let Some(rest) = bytes.strip_prefix(b"\n") {
                bytes = rest;
            }
        }
        while let Some(at) = memchr::memchr2(b'\n', b'\r', bytes) {
            self.line.extend_from_slice(&bytes[..at]);
            let crlf = bytes[at] == b'\r' && bytes.get(at + 1) == Some(&b'\n');
            if bytes[at] == b'\r' && at + 1 == bytes.len() {
                self.after_cr = true;
            }
            bytes = &bytes[at + if crlf { 2 } else { 1 }..];
            self.end_line(on_event);
        }
        self.line.extend_from_slice(bytes);
    }

    /// The stream ended: an event missing only its blank line still counts
    /// (some providers end on `data: [DONE]` with no line break at all).
    pub(crate) fn finish(&mut self, on_event: &mut dyn FnMut(&str, &str)) {
        if !self.line.is_empty() {
            self.end_line(on_event);
        }
        self.dispatch(on_event);
    }

    fn end_line(&mut self, on_event: &mut dyn FnMut(&str, &str)) {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            self.dispatch(on_event);
        } else {
            // Only genuinely invalid bytes are replaced: the line is whole.
            let text = String::from_utf8_lossy(&line);
            self.field(&text);
        }
        // Keep the allocation for the next line.
        self.line = line;
        self.line.clear();
    }

    fn field(&mut self, line: &str) {
        if line.starts_with(':') {
            return;
        }
        let (name, value) = match line.split_once(':') {
            Some((name, value)) => (name, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match name {
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "event" => {
                self.name.clear();
                self.name.push_str(value);
            }
            _ => {}
        }
    }

    fn dispatch(&mut self, on_event: &mut dyn FnMut(&str, &str)) {
        if self.has_data {
            on_event(&self.name, &self.data);
        }
        self.name.clear();
        self.data.clear();
        self.has_data = false;
    }
}

/// Writes one event: `event: <name>` when named, then its JSON as one `data:` line.
pub(crate) fn write(out: &mut BytesMut, name: Option<&str>, json: &serde_json::Value) {
    if let Some(name) = name {
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b"\n");
    }
    out.extend_from_slice(b"data: ");
    // A JSON value always serialises; the writer into a Vec cannot fail.
    if serde_json::to_writer(VecWriter(out), json).is_err() {
        out.extend_from_slice(b"null");
    }
    out.extend_from_slice(b"\n\n");
}

/// Writes a raw `data:` line (`[DONE]`).
pub(crate) fn write_raw(out: &mut BytesMut, data: &str) {
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(data.as_bytes());
    out.extend_from_slice(b"\n\n");
}

/// `io::Write` into a `BytesMut`, so JSON is serialised in place.
struct VecWriter<'a>(&'a mut BytesMut);

impl std::io::Write for VecWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(chunks: &[&[u8]]) -> Vec<(String, String)> {
        let mut reader = Reader::default();
        let mut got = Vec::new();
        let mut on = |n: &str, d: &str| got.push((n.to_string(), d.to_string()));
        for c in chunks {
            reader.push(c, &mut on);
        }
        reader.finish(&mut on);
        got
    }

    #[test]
    fn line_endings_spaces_comments_and_joined_data() {
        let stream = b"event: a\r\ndata:1\r\n\r\n: ping\n\ndata: x\ndata: y\n\nid: 3\nretry: 5\ndata: z\r\rdata: end";
        let want = vec![
            ("a".to_string(), "1".to_string()),
            (String::new(), "x\ny".to_string()),
            (String::new(), "z".to_string()),
            (String::new(), "end".to_string()),
        ];
        assert_eq!(events(&[stream]), want);
        for cut in 0..stream.len() {
            assert_eq!(events(&[&stream[..cut], &stream[cut..]]), want, "cut at {cut}");
        }
    }

    #[test]
    fn a_character_split_across_chunks_comes_out_whole() {
        let stream = "data: 你好\n\n".as_bytes();
        for cut in 0..stream.len() {
            assert_eq!(events(&[&stream[..cut], &stream[cut..]]), vec![(String::new(), "你好".into())]);
        }
    }

    #[test]
    fn a_name_without_data_is_no_event_and_does_not_leak() {
        assert_eq!(events(&[b"event: ping\n\ndata: 1\n\n"]), vec![(String::new(), "1".into())]);
    }
}
