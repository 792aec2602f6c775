//! Encoders: [`StreamEvent`]s to the client's own event stream, as its
//! official SDK expects it.
//!
//! An encoder speaks of what the client asked for: the client's model
//! alias, the client's tool names (a tool renamed for the provider gets its
//! name back), and the client's custom tools (a call to one is a custom
//! tool call with raw input, whatever the provider was sent).

mod chat;
mod gemini;
mod messages;
mod responses;
mod sequence;

use std::collections::HashMap;

use bytes::BytesMut;

use super::custom;
use crate::protocol::translate::error::UpstreamError;
use crate::protocol::translate::ir::{Context, ErrorClass, Format, StreamEvent};

/// What the client asked for that the context does not say.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Options {
    /// A Chat client sent `stream_options.include_usage`: it gets a usage
    /// chunk before `[DONE]`.
    pub include_usage: bool,
    /// The reply's creation time in Unix seconds, for the formats that
    /// carry one (Chat `created`, Responses `created_at`); the caller reads
    /// the clock.
    pub created: u64,
}

/// A stateful encoder of one client stream.
#[derive(Debug)]
pub struct Encoder {
    inner: Inner,
    done: bool,
}

#[derive(Debug)]
enum Inner {
    Chat(chat::Chat),
    Responses(Box<responses::Responses>),
    Messages(messages::Messages),
    Gemini(gemini::Gemini),
}

impl Encoder {
    pub fn new(format: Format, ctx: Context, opts: Options) -> Encoder {
        let tools = Tools { ctx };
        let inner = match format {
            Format::Chat => Inner::Chat(chat::Chat::new(tools, opts)),
            Format::Responses => Inner::Responses(Box::new(responses::Responses::new(tools, opts))),
            Format::Messages => Inner::Messages(messages::Messages::new(tools)),
            Format::Gemini => Inner::Gemini(gemini::Gemini::new(tools)),
        };
        Encoder { inner, done: false }
    }

    /// Appends the client's bytes for one event to `out`. Nothing follows a
    /// terminal.
    pub fn encode(&mut self, event: &StreamEvent, out: &mut BytesMut) {
        if self.done {
            return;
        }
        self.done = matches!(event, StreamEvent::Finish { .. } | StreamEvent::Error { .. });
        match &mut self.inner {
            Inner::Chat(e) => e.event(event, out),
            Inner::Responses(e) => e.event(event, out),
            Inner::Messages(e) => e.event(event, out),
            Inner::Gemini(e) => e.event(event, out),
        }
    }

    /// Goes on with the provider's naming where the client was sent the
    /// provider's stream as is (see [`super::Naming`]): a Responses
    /// client's next event numbers and item ids.
    pub fn adopt(&mut self, naming: &super::Naming) {
        if let Inner::Responses(e) = &mut self.inner {
            e.adopt(naming);
        }
    }

    /// Ends the client's stream in an error in its own protocol (the
    /// upstream broke off); nothing when it has already ended.
    pub fn fail(&mut self, class: ErrorClass, message: &str, out: &mut BytesMut) {
        self.encode(&StreamEvent::Error { class, message: message.to_string(), quota: false }, out);
    }

    /// Whether the client's stream has had its terminal.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// A keep-alive for a long upstream silence: a Messages `ping`, an SSE
    /// comment elsewhere.
    pub fn keepalive(&self, out: &mut BytesMut) {
        match self.inner {
            Inner::Messages(_) => out.extend_from_slice(b"event: ping\ndata: {\"type\":\"ping\"}\n\n"),
            _ => out.extend_from_slice(b": keep-alive\n\n"),
        }
    }
}

/// The client's view of tool calls.
#[derive(Debug)]
pub(crate) struct Tools {
    ctx: Context,
}

impl Tools {
    /// The client's name of a tool, and whether the client's call to it is
    /// a custom one (and so how its arguments are written).
    pub(crate) fn client(&self, name: &str, custom: bool) -> (String, Input) {
        let name = self.ctx.renamed_tools.get(name).cloned().unwrap_or_else(|| name.to_string());
        let input = match (custom, self.ctx.custom_tools.contains(&name)) {
            (true, _) => Input::Raw,
            (false, true) => Input::Wrapped,
            (false, false) => Input::Json,
        };
        (name, input)
    }

    pub(crate) fn model(&self) -> &str {
        &self.ctx.client_model
    }
}

/// How a tool call's argument deltas are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Input {
    /// JSON arguments.
    Json,
    /// A custom tool's raw input, from a provider that has custom tools.
    Raw,
    /// A custom tool's input wrapped as `{"input": …}` by the emulation a
    /// provider without custom tools was sent.
    Wrapped,
}

/// Arguments as a JSON-arguments client needs them, whatever the provider sent.
#[derive(Debug)]
pub(crate) enum ToJson {
    Json,
    /// Raw input, written as `{"input":"…"}` as it goes.
    Wrap(custom::Wrapper),
}

impl ToJson {
    pub(crate) fn new(input: Input) -> ToJson {
        match input {
            Input::Raw => ToJson::Wrap(custom::Wrapper::default()),
            Input::Json | Input::Wrapped => ToJson::Json,
        }
    }

    pub(crate) fn push(&mut self, args: &str) -> String {
        match self {
            ToJson::Json => args.to_string(),
            ToJson::Wrap(w) => w.push(args),
        }
    }

    /// What ends the arguments; `{}` stands for none at all.
    pub(crate) fn finish(&mut self, sent_any: bool) -> String {
        match self {
            ToJson::Json if !sent_any => "{}".to_string(),
            ToJson::Json => String::new(),
            ToJson::Wrap(w) => w.finish(),
        }
    }
}

/// An id with the client's prefix, unless it has it already.
/// The indexes of the blocks still open, in stream order, so a finish closes
/// them as the client opened them.
pub(crate) fn in_order<V>(open: &HashMap<usize, V>) -> Vec<usize> {
    let mut keys: Vec<usize> = open.keys().copied().collect();
    keys.sort_unstable();
    keys
}

pub(crate) fn prefixed(prefix: &str, id: &str) -> String {
    if id.starts_with(prefix) {
        id.to_string()
    } else {
        format!("{prefix}{id}")
    }
}

/// An error event as the error it reports, so that it is written with the
/// same words as an error that comes before the reply.
pub(crate) fn upstream(class: ErrorClass, message: &str, quota: bool) -> UpstreamError {
    UpstreamError { class, message: message.to_string(), retry_after: None, quota }
}
