//! Server-sent events as the gateway needs them: split into whole events
//! without changing a byte, and sorted into preamble, content and errors so
//! a stream can be held until its first content and still fall back.

use bytes::{Bytes, BytesMut};
use serde_json::Value;

use crate::protocol::Endpoint;

/// Splits a byte stream into complete events, each with its terminating
/// blank line, exactly as received.
#[derive(Debug, Default)]
pub struct Splitter {
    buf: BytesMut,
    /// How much of `buf` is known to hold no event's end, so a long event
    /// arriving in small chunks is searched once, not again on every chunk.
    searched: usize,
}

impl Splitter {
    /// Adds bytes; returns the events they complete.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<Bytes> {
        self.buf.extend_from_slice(chunk);
        let mut events = Vec::new();
        // An end is at most 4 bytes long: one may begin in the last 3 searched.
        let mut from = self.searched.saturating_sub(3);
        while let Some(end) = event_end(&self.buf, from) {
            events.push(self.buf.split_to(end).freeze());
            from = 0;
        }
        self.searched = self.buf.len();
        events
    }

    /// Bytes of an event not yet complete.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    /// Takes the bytes of an event that will never complete.
    pub fn take_pending(&mut self) -> Bytes {
        self.searched = 0;
        self.buf.split().freeze()
    }
}

/// The end (exclusive) of the first complete event that ends at or after
/// `from`: after "\n\n", "\r\n\r\n" or "\r\r". Line breaks are found by
/// `memchr`, as most of an event's bytes are its data.
fn event_end(buf: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while let Some(at) = memchr::memchr2(b'\n', b'\r', buf.get(i..)?) {
        i += at;
        match (buf[i], buf.get(i + 1)) {
            (b'\n', Some(b'\n')) | (b'\r', Some(b'\r')) => return Some(i + 2),
            (b'\r', Some(b'\n')) if buf.get(i + 2..i + 4) == Some(b"\r\n") => return Some(i + 4),
            _ => i += 1,
        }
    }
    None
}

/// What an event means for committing a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// Before any content: may be held back and discarded on fallback.
    Preamble,
    /// Content (or the end of a reply): the stream is committed.
    Content,
    /// The provider reported an error in the stream.
    Error(String),
}

/// The event's name and joined data lines.
pub fn parse(event: &[u8]) -> (Option<String>, String) {
    let text = String::from_utf8_lossy(event);
    let mut name = None;
    let mut data: Vec<&str> = Vec::new();
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("event:") {
            name = Some(v.trim().to_string());
        } else if let Some(v) = line.strip_prefix("data:") {
            data.push(v.strip_prefix(' ').unwrap_or(v));
        }
    }
    (name, data.join("\n"))
}

/// Sorts one event of `endpoint`'s stream.
pub fn classify(endpoint: Endpoint, event: &[u8]) -> Kind {
    let (name, data) = parse(event);
    if data.is_empty() && name.is_none() {
        return Kind::Preamble; // a comment or keep-alive
    }
    if data.trim() == "[DONE]" {
        return Kind::Content;
    }
    let json: Value = serde_json::from_str(&data).unwrap_or(Value::Null);
    let kind = name.as_deref().or_else(|| json.get("type").and_then(Value::as_str)).unwrap_or("");
    if kind == "error"
        || kind == "response.failed"
        || json.get("error").is_some_and(|e| !e.is_null()) && kind != "response.completed"
    {
        return Kind::Error(error_message(&json));
    }
    let preamble = match endpoint {
        Endpoint::Messages => matches!(kind, "message_start" | "ping" | "content_block_start"),
        Endpoint::Responses => matches!(
            kind,
            "response.created"
                | "response.in_progress"
                | "response.queued"
                | "response.output_item.added"
                | "response.content_part.added"
        ),
        Endpoint::ChatCompletions | Endpoint::Completions => !chat_has_content(&json),
        Endpoint::GeminiGenerate | Endpoint::GeminiStream => !gemini_has_content(&json),
        Endpoint::Embeddings | Endpoint::CountTokens | Endpoint::GeminiCountTokens => false,
    };
    if preamble {
        Kind::Preamble
    } else {
        Kind::Content
    }
}

/// A chat or completion chunk carries content when any choice has text,
/// tool calls, a refusal, reasoning, or a finish reason; a usage-only chunk
/// counts too (the reply is over).
fn chat_has_content(chunk: &Value) -> bool {
    let non_empty = |v: Option<&Value>| match v {
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Null) | None => false,
        Some(_) => true,
    };
    let choices = chunk.get("choices").and_then(Value::as_array);
    let any_choice = choices.is_some_and(|cs| {
        cs.iter().any(|c| {
            let d = c.get("delta").unwrap_or(c);
            ["content", "text", "tool_calls", "function_call", "refusal", "reasoning", "reasoning_content"]
                .iter()
                .any(|k| non_empty(d.get(*k)))
                || non_empty(c.get("finish_reason"))
        })
    });
    any_choice || choices.is_some_and(Vec::is_empty) && non_empty(chunk.get("usage"))
}

/// A Gemini chunk carries content when a candidate has a part or a finish
/// reason, or when the prompt was blocked (the reply is over).
fn gemini_has_content(chunk: &Value) -> bool {
    let candidates = chunk.get("candidates").and_then(Value::as_array);
    let any = candidates.is_some_and(|cs| {
        cs.iter().any(|c| {
            c.pointer("/content/parts").and_then(Value::as_array).is_some_and(|p| !p.is_empty())
                || c.get("finishReason").is_some_and(|r| !r.is_null())
        })
    });
    any || chunk.pointer("/promptFeedback/blockReason").is_some()
}

fn error_message(json: &Value) -> String {
    let pick = |v: &Value| v.get("message").and_then(Value::as_str).map(str::to_string);
    json.get("error")
        .and_then(pick)
        .or_else(|| pick(json))
        .or_else(|| json.pointer("/response/error/message").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_else(|| "error event".into())
}

/// The protocol's own error event, to end a stream that failed after content.
pub fn error_event(endpoint: Endpoint, message: &str) -> Bytes {
    let code = crate::protocol::error::ErrorCode::UpstreamError.as_str();
    let text = match endpoint {
        Endpoint::Messages | Endpoint::CountTokens => format!(
            "event: error\ndata: {}\n\n",
            serde_json::json!({ "type": "error", "error": { "type": "api_error", "message": message } })
        ),
        // The error event, then the terminal event Responses clients wait
        // for: Codex reports "stream closed before response.completed"
        // for a stream that ends without one.
        Endpoint::Responses => format!(
            "event: error\ndata: {}\n\nevent: response.failed\ndata: {}\n\n",
            serde_json::json!({ "type": "error", "code": code, "message": message, "param": null }),
            serde_json::json!({ "type": "response.failed", "response": {
                "id": "resp_failed", "object": "response", "status": "failed", "output": [],
                "error": { "code": "server_error", "message": message } } })
        ),
        Endpoint::ChatCompletions | Endpoint::Completions | Endpoint::Embeddings => format!(
            "data: {}\n\n",
            serde_json::json!({ "error": { "message": message, "type": "server_error", "param": null, "code": code } })
        ),
        Endpoint::GeminiGenerate | Endpoint::GeminiStream | Endpoint::GeminiCountTokens => format!(
            "data: {}\n\n",
            serde_json::json!({ "error": { "code": 502, "message": message, "status": "UNAVAILABLE" } })
        ),
    };
    Bytes::from(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitter_keeps_bytes_and_handles_any_chunking() {
        let stream = b"event: a\ndata: 1\n\n: keep-alive\n\ndata: 2\r\n\r\ndata: 3\n\n";
        for cut in 1..stream.len() {
            let mut s = Splitter::default();
            let mut events = s.push(&stream[..cut]);
            events.extend(s.push(&stream[cut..]));
            assert_eq!(events.concat(), stream.to_vec(), "cut at {cut}");
            assert_eq!(events.len(), 4);
            assert_eq!(s.pending(), 0);
        }
    }

    #[test]
    fn a_long_event_in_small_chunks_is_searched_once() {
        // Each chunk used to search the whole pending event again: a 1 MiB
        // event sent a byte at a time took about 5 * 10^11 steps, minutes of
        // a runtime thread a slow or hostile provider could pin.
        let started = std::time::Instant::now();
        let mut s = Splitter::default();
        let data = vec![b'x'; 1 << 20];
        for (i, byte) in data.chunks(1).enumerate() {
            assert!(s.push(byte).is_empty());
            if i % 4096 == 0 {
                assert!(started.elapsed() < std::time::Duration::from_secs(10), "{i} bytes in 10 s");
            }
        }
        assert_eq!(s.push(b"\r\n\r").len(), 0);
        let events = s.push(b"\n");
        assert_eq!((events.len(), events[0].len(), s.pending()), (1, (1 << 20) + 4, 0));
    }

    #[test]
    fn chat_preamble_content_and_errors() {
        let role = br#"data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}

"#;
        let text = br#"data: {"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}

"#;
        let tool = br#"data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0}]}}]}

"#;
        let error = br#"data: {"error":{"message":"overloaded","type":"server_error"}}

"#;
        assert_eq!(classify(Endpoint::ChatCompletions, role), Kind::Preamble);
        assert_eq!(classify(Endpoint::ChatCompletions, text), Kind::Content);
        assert_eq!(classify(Endpoint::ChatCompletions, tool), Kind::Content);
        assert_eq!(classify(Endpoint::ChatCompletions, b"data: [DONE]\n\n"), Kind::Content);
        assert_eq!(classify(Endpoint::ChatCompletions, error), Kind::Error("overloaded".into()));
        assert_eq!(classify(Endpoint::ChatCompletions, b": ping\n\n"), Kind::Preamble);
    }

    #[test]
    fn anthropic_and_responses_events() {
        let m = |name: &str| format!("event: {name}\ndata: {{\"type\":\"{name}\"}}\n\n").into_bytes();
        for name in ["message_start", "ping", "content_block_start"] {
            assert_eq!(classify(Endpoint::Messages, &m(name)), Kind::Preamble, "{name}");
        }
        assert_eq!(classify(Endpoint::Messages, &m("content_block_delta")), Kind::Content);
        let e = b"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
        assert_eq!(classify(Endpoint::Messages, e), Kind::Error("Overloaded".into()));
        assert_eq!(classify(Endpoint::Responses, &m("response.created")), Kind::Preamble);
        assert_eq!(classify(Endpoint::Responses, &m("response.output_text.delta")), Kind::Content);
        let completed =
            b"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"error\":null}}\n\n";
        assert_eq!(classify(Endpoint::Responses, completed), Kind::Content);
    }

    #[test]
    fn error_events_parse_as_errors_in_their_protocol() {
        for endpoint in [Endpoint::ChatCompletions, Endpoint::Responses, Endpoint::Messages] {
            let events = Splitter::default().push(&error_event(endpoint, "upstream went away"));
            for event in &events {
                assert_eq!(classify(endpoint, event), Kind::Error("upstream went away".into()), "{endpoint}");
            }
            // A Responses stream ends with its terminal event.
            let terminal = (endpoint == Endpoint::Responses).then_some("response.failed");
            let last = String::from_utf8_lossy(events.last().unwrap()).to_string();
            assert_eq!(terminal.is_some(), last.contains("event: response.failed"), "{endpoint}: {last}");
        }
    }
}
