//! Decoders: a provider's event stream, in whatever chunks the network cut
//! it into, to [`StreamEvent`]s.
//!
//! Each format's decoder reads whole SSE events ([`frames::Reader`]) and
//! speaks through an [`Emitter`], which numbers blocks and keeps the rules
//! of the intermediate stream (see [`StreamEvent`]), so no format's quirks
//! can break them: a provider's second terminal, a delta for a block it
//! never opened or content after its end are dropped there.

mod chat;
mod gemini;
mod messages;
mod responses;

use super::frames::Reader;
use super::maps;
use crate::protocol::translate::ir::{BlockKind, Delta, ErrorClass, Family, Format, StopReason, StreamEvent, Tokens};
use crate::protocol::translate::vocab::{self, Classified};

/// A stateful decoder of one provider stream.
#[derive(Debug)]
pub struct Decoder {
    reader: Reader,
    format: Inner,
    emit: Emitter,
}

#[derive(Debug)]
enum Inner {
    Chat(chat::Chat),
    Responses(responses::Responses),
    Messages(messages::Messages),
    Gemini(gemini::Gemini),
}

impl Decoder {
    pub fn new(format: Format) -> Decoder {
        let family = match format {
            Format::Chat | Format::Responses => Family::OpenAi,
            Format::Messages => Family::Anthropic,
            Format::Gemini => Family::Gemini,
        };
        let format = match format {
            Format::Chat => Inner::Chat(chat::Chat::default()),
            Format::Responses => Inner::Responses(responses::Responses::default()),
            Format::Messages => Inner::Messages(messages::Messages::default()),
            Format::Gemini => Inner::Gemini(gemini::Gemini::default()),
        };
        Decoder { reader: Reader::default(), format, emit: Emitter::new(family) }
    }

    /// Reads the stream for a resume: an event that is not JSON at all
    /// ends it in an error, and the decoder says so ([`Decoder::malformed`])
    /// (otherwise such an event is passed over, as one the decoder has no
    /// use for is); and the provider's own naming is kept ([`Naming`]).
    pub fn watch(&mut self) {
        self.emit.watched = true;
    }

    /// Whether a watched stream ended at a malformed event.
    pub fn malformed(&self) -> bool {
        self.emit.malformed
    }

    /// What the provider named in a watched stream.
    pub fn naming(&self) -> &Naming {
        &self.emit.naming
    }

    /// Feeds upstream bytes; appends the events they complete to `out`.
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<StreamEvent>) {
        let Decoder { reader, format, emit } = self;
        if emit.done {
            return;
        }
        reader.push(bytes, &mut |name, data| format.event(name, data, emit, out));
    }

    /// The upstream stream ended; appends its last events to `out`. A
    /// stream that ended before its format's terminal ends in an error.
    pub fn finish(&mut self, out: &mut Vec<StreamEvent>) {
        let Decoder { reader, format, emit } = self;
        if emit.done {
            return;
        }
        reader.finish(&mut |name, data| format.event(name, data, emit, out));
        match format {
            Inner::Chat(f) => f.eof(emit, out),
            Inner::Responses(_) | Inner::Messages(_) => {}
            Inner::Gemini(f) => f.eof(emit, out),
        }
        emit.error(ErrorClass::Server, "the provider's stream ended before the reply was complete", out);
    }

    /// Whether the stream has reached its terminal.
    pub fn is_done(&self) -> bool {
        self.emit.done
    }

    /// The usage read so far, final once the stream is done.
    pub fn tokens(&self) -> Tokens {
        self.emit.tokens
    }
}

impl Inner {
    fn event(&mut self, name: &str, data: &str, emit: &mut Emitter, out: &mut Vec<StreamEvent>) {
        if emit.done {
            return;
        }
        match self {
            Inner::Chat(f) => f.event(data, emit, out),
            Inner::Responses(f) => f.event(name, data, emit, out),
            Inner::Messages(f) => f.event(name, data, emit, out),
            Inner::Gemini(f) => f.event(data, emit, out),
        }
    }
}

/// What a provider named in its own stream besides the events: a stream
/// the client got as the provider sent it goes on, when another attempt
/// finishes it, with the provider's creation time, event numbers and item
/// ids, not the gateway's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Naming {
    /// Chat `created`, Responses `created_at`.
    pub created: Option<u64>,
    /// The last Responses `sequence_number`.
    pub sequence: Option<u64>,
    /// Responses output item ids, by output index.
    pub items: Vec<String>,
}

/// Text or reasoning: the two kinds of block a format without blocks of
/// its own (Chat, Gemini) interleaves in one stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Open {
    Text,
    Reasoning,
}

/// The one text or reasoning block open in such a stream.
#[derive(Debug, Default)]
pub(crate) struct OpenProse(Option<(Open, usize)>);

impl OpenProse {
    /// The open block of this kind, opened (and the other kind closed) if
    /// need be.
    pub(crate) fn ensure(&mut self, kind: Open, emit: &mut Emitter, out: &mut Vec<StreamEvent>) -> usize {
        match self.0 {
            Some((k, index)) if k == kind => index,
            _ => {
                self.close(emit, out);
                let block = match kind {
                    Open::Text => BlockKind::Text,
                    Open::Reasoning => BlockKind::Reasoning { id: None },
                };
                let index = emit.open(block, out);
                self.0 = Some((kind, index));
                index
            }
        }
    }

    /// The open block's index, if it is reasoning.
    pub(crate) fn reasoning(&self) -> Option<usize> {
        self.0.filter(|(kind, _)| *kind == Open::Reasoning).map(|(_, index)| index)
    }

    pub(crate) fn close(&mut self, emit: &mut Emitter, out: &mut Vec<StreamEvent>) {
        if let Some((_, index)) = self.0.take() {
            emit.stop(index, out);
        }
    }
}

/// Writes the intermediate stream and keeps its rules.
#[derive(Debug)]
pub(crate) struct Emitter {
    family: Family,
    started: bool,
    done: bool,
    next: usize,
    /// The open blocks and what they hold, in opening order.
    open: Vec<(usize, Kind)>,
    tool_calls: usize,
    tokens: Tokens,
    /// See [`Decoder::watch`].
    watched: bool,
    malformed: bool,
    naming: Naming,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Reasoning,
    Tool,
}

impl Emitter {
    fn new(family: Family) -> Emitter {
        Emitter {
            family,
            started: false,
            done: false,
            next: 0,
            open: Vec::new(),
            tool_calls: 0,
            tokens: Tokens::default(),
            watched: false,
            malformed: false,
            naming: Naming::default(),
        }
    }

    /// The provider's naming, kept when the stream is watched.
    pub(crate) fn named(&mut self, name: impl FnOnce(&mut Naming)) {
        if self.watched {
            name(&mut self.naming);
        }
    }

    /// An event its format's decoder could not read. Only one that is no
    /// JSON at all is malformed: one of a shape the decoder does not know
    /// is a provider's extension, passed over.
    pub(crate) fn unreadable(&mut self, data: &str, out: &mut Vec<StreamEvent>) {
        // An event with no data is none a client would dispatch either.
        if !self.watched || data.trim().is_empty() {
            return;
        }
        if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(data) {
            self.malformed = true;
            let message = format!("the provider sent a malformed event ({} bytes, not JSON: {e})", data.len());
            self.error(ErrorClass::Server, &message, out);
        }
    }

    pub(crate) fn start(&mut self, id: &str, model: &str, tokens: Tokens, out: &mut Vec<StreamEvent>) {
        self.tokens = maps::merge(self.tokens, tokens);
        if !self.started && !self.done {
            self.started = true;
            out.push(StreamEvent::Start { id: id.to_string(), model: model.to_string(), tokens, origin: self.family });
        }
    }

    /// Opens a block and returns its index.
    pub(crate) fn open(&mut self, block: BlockKind, out: &mut Vec<StreamEvent>) -> usize {
        self.start("", "", Tokens::default(), out);
        let index = self.next;
        self.next += 1;
        let kind = match block {
            BlockKind::Text => Kind::Text,
            BlockKind::Reasoning { .. } | BlockKind::RedactedReasoning { .. } => Kind::Reasoning,
            BlockKind::ToolCall { .. } => Kind::Tool,
        };
        if kind == Kind::Tool {
            self.tool_calls += 1;
        }
        self.open.push((index, kind));
        out.push(StreamEvent::BlockStart { index, block });
        index
    }

    /// Adds to an open block; empty text and a delta that does not fit its
    /// block are dropped.
    pub(crate) fn delta(&mut self, index: usize, delta: Delta, out: &mut Vec<StreamEvent>) {
        let fits = match (&delta, self.kind(index)) {
            (Delta::Text(t), Some(Kind::Text)) | (Delta::Reasoning(t), Some(Kind::Reasoning)) => !t.is_empty(),
            (Delta::ToolArgs(t), Some(Kind::Tool)) => !t.is_empty(),
            (Delta::Opaque(_), Some(Kind::Reasoning)) => true,
            _ => false,
        };
        if fits && !self.done {
            out.push(StreamEvent::Delta { index, delta });
        }
    }

    pub(crate) fn stop(&mut self, index: usize, out: &mut Vec<StreamEvent>) {
        if let Some(at) = self.open.iter().position(|(i, _)| *i == index) {
            self.open.remove(at);
            out.push(StreamEvent::BlockStop { index });
        }
    }

    fn kind(&self, index: usize) -> Option<Kind> {
        self.open.iter().find(|(i, _)| *i == index).map(|(_, k)| *k)
    }

    pub(crate) fn tool_calls(&self) -> usize {
        self.tool_calls
    }

    pub(crate) fn add_tokens(&mut self, tokens: Tokens) {
        self.tokens = maps::merge(self.tokens, tokens);
    }

    /// Ends the reply: closes what is open, and says `ToolUse` whenever a
    /// tool call was made (Gemini says STOP for calls, some compatible
    /// providers say `stop`). A turn that claims tool calls but made none
    /// is an error: a client would take it as finished (cc-switch #4341).
    pub(crate) fn finish(&mut self, reason: StopReason, out: &mut Vec<StreamEvent>) {
        if self.done {
            return;
        }
        let reason = reason.with_calls(self.tool_calls > 0);
        if reason == StopReason::ToolUse && self.tool_calls == 0 {
            return self.error(ErrorClass::Server, "the provider ended its turn for tool calls but sent none", out);
        }
        self.start("", "", Tokens::default(), out);
        while let Some(&(index, _)) = self.open.first() {
            self.stop(index, out);
        }
        self.done = true;
        out.push(StreamEvent::Finish { reason, tokens: self.tokens });
    }

    /// The reason to end with when the provider gave none.
    pub(crate) fn implied_reason(&self) -> StopReason {
        if self.tool_calls > 0 {
            StopReason::ToolUse
        } else {
            StopReason::EndTurn
        }
    }

    /// Ends the reply in an error; open blocks stay open.
    pub(crate) fn error(&mut self, class: ErrorClass, message: &str, out: &mut Vec<StreamEvent>) {
        self.upstream_error(Classified { class, quota: false }, message, out);
    }

    /// Ends the reply in the provider's own error, read by [`upstream_error`].
    pub(crate) fn upstream_error(&mut self, error: Classified, message: &str, out: &mut Vec<StreamEvent>) {
        if !self.done {
            self.done = true;
            out.push(StreamEvent::Error { class: error.class, message: message.to_string(), quota: error.quota });
        }
    }
}

/// An upstream error object (`{"error":{…}}` or the object itself) read
/// for its class and message, whichever vocabulary it speaks.
pub(crate) fn upstream_error(error: &serde_json::Value) -> (Classified, String) {
    let e = error.get("error").filter(|e| e.is_object()).unwrap_or(error);
    let message = match e.get("message") {
        Some(serde_json::Value::String(m)) => m.clone(),
        _ => match error.get("error") {
            Some(serde_json::Value::String(m)) => m.clone(),
            _ => "the provider reported an error".to_string(),
        },
    };
    let text = |k: &str| match e.get(k) {
        Some(serde_json::Value::String(s)) => Some(s.clone()),
        Some(serde_json::Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    let names: Vec<String> = ["code", "type", "status"].iter().filter_map(|k| text(k)).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    (vocab::classify(&names, None, &message), message)
}
