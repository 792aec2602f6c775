//! Reply streams translated event by event: a provider's stream is decoded
//! into [`StreamEvent`]s ([`Decoder`]) and encoded as the client's stream
//! ([`Encoder`]); [`StreamTranslator`] joins the two for the gateway.
//!
//! Nothing is buffered beyond what one event needs, except where a client
//! format demands it (translation.md §D): the Responses done events repeat
//! an item's whole text, a Gemini client gets each tool call whole, and a
//! Responses client gets overlapping blocks one after another.
//!
//! # Layout
//! - [`frames`]: SSE in (the transport rules of §D.0) and out;
//! - [`decode`]: one decoder per provider format;
//! - [`encode`]: one encoder per client format;
//! - [`custom`]: custom-tool input wrapped and unwrapped as it streams;
//! - [`seam`]: a reply broken off and finished by another attempt, joined
//!   into one stream for the client;
//! - [`maps`]: token counts read and merged (stop reasons and error classes
//!   are in the translator's `vocab`, shared with whole replies).

pub mod custom;
mod decode;
mod encode;
mod frames;
mod maps;
pub mod seam;

#[cfg(test)]
mod tests;

pub use decode::{Decoder, Naming};
pub use encode::{Encoder, Options};

use bytes::{Bytes, BytesMut};

use crate::protocol::translate::ir::{Context, ErrorClass, Format, StopReason, StreamEvent, Tokens};

/// Decodes a whole recorded stream, for tests.
#[cfg(test)]
fn decode_all(format: Format, bytes: &[u8]) -> Vec<StreamEvent> {
    let mut decoder = Decoder::new(format);
    let mut events = Vec::new();
    decoder.push(bytes, &mut events);
    decoder.finish(&mut events);
    events
}

/// Translates one reply stream from the provider's format to the client's.
///
/// Besides the bytes, it tells the gateway what it needs to commit and to
/// count: whether content has come yet (a stream is committed to its
/// provider at its first content, and can still fall back before), the
/// usage and the stop reason, and the upstream's own error if the stream
/// ended in one.
#[derive(Debug)]
pub struct StreamTranslator {
    decoder: Decoder,
    encoder: Encoder,
    events: Vec<StreamEvent>,
    out: BytesMut,
    content: bool,
    reason: Option<StopReason>,
    error: Option<(ErrorClass, String)>,
    /// With resume on: what the client was sent, and an error event held
    /// back from it until the stream is known not to go on elsewhere.
    watch: Option<Box<Watch>>,
    created: u64,
}

/// A translated stream watched for a resume.
#[derive(Debug, Default)]
struct Watch {
    sent: seam::Sent,
    held: Option<StreamEvent>,
}

impl StreamTranslator {
    pub fn new(from: Format, to: Format, ctx: Context, opts: Options) -> StreamTranslator {
        StreamTranslator {
            decoder: Decoder::new(from),
            encoder: Encoder::new(to, ctx, opts),
            events: Vec::new(),
            out: BytesMut::new(),
            content: false,
            reason: None,
            error: None,
            watch: None,
            created: opts.created,
        }
    }

    /// Keeps what the client is sent, for a resume ([`seam`]), and holds
    /// an error event back from the client until [`release`](Self::release).
    pub fn watch(&mut self) {
        self.watch = Some(Box::default());
        self.decoder.watch();
    }

    /// The client stream's creation time, as its encoder was told it.
    pub fn created(&self) -> u64 {
        self.created
    }

    /// Whether a watched stream's error is a malformed event of the
    /// provider's, not an error it sent.
    pub fn malformed(&self) -> bool {
        self.decoder.malformed()
    }

    /// What the client was sent, when watched.
    pub fn sent(&self) -> Option<&seam::Sent> {
        self.watch.as_ref().map(|w| &w.sent)
    }

    /// Whether an error event is held back.
    pub fn holds_error(&self) -> bool {
        self.watch.as_ref().is_some_and(|w| w.held.is_some())
    }

    /// The held error event, in the client's format: the stream is not
    /// going on elsewhere after all.
    pub fn release(&mut self) -> Bytes {
        if let Some(error) = self.watch.take().and_then(|w| w.held) {
            self.encoder.encode(&error, &mut self.out);
        }
        self.out.split().freeze()
    }

    /// Feeds upstream bytes; returns the client's bytes they produce (often
    /// none: an event split across chunks waits for its end).
    pub fn push(&mut self, bytes: &[u8]) -> Bytes {
        self.decoder.push(bytes, &mut self.events);
        self.flush()
    }

    /// The upstream ended cleanly; returns the client's last bytes. A
    /// stream cut short of its terminal ends in an error, never a success.
    pub fn finish(&mut self) -> Bytes {
        self.decoder.finish(&mut self.events);
        self.flush()
    }

    /// The upstream broke off (a reset, a timeout): the client's stream
    /// ends in an error in its own protocol. Nothing if it had ended.
    pub fn fail(&mut self, class: ErrorClass, message: &str) -> Bytes {
        // Not resumed after all: this error goes to the client.
        self.watch = None;
        self.events.push(StreamEvent::Error { class, message: message.to_string(), quota: false });
        self.flush()
    }

    /// A keep-alive to send after a long upstream silence.
    pub fn keepalive(&self) -> Bytes {
        let mut out = BytesMut::new();
        self.encoder.keepalive(&mut out);
        out.freeze()
    }

    /// Whether content (any delta, or the end of the reply) has been
    /// produced: the point at which the gateway commits to this provider.
    pub fn has_content(&self) -> bool {
        self.content
    }

    /// Whether the client's stream has had its terminal.
    pub fn is_done(&self) -> bool {
        self.encoder.is_done()
    }

    /// The usage the provider reported so far; final once the stream is done.
    pub fn tokens(&self) -> Tokens {
        self.decoder.tokens()
    }

    /// Why the reply ended, once it ended normally.
    pub fn stop_reason(&self) -> Option<StopReason> {
        self.reason
    }

    /// The error the stream ended in: the provider's, or the one passed to
    /// [`fail`](Self::fail).
    pub fn error(&self) -> Option<(ErrorClass, &str)> {
        self.error.as_ref().map(|(class, message)| (*class, message.as_str()))
    }

    fn flush(&mut self) -> Bytes {
        for event in self.events.drain(..) {
            if self.encoder.is_done() {
                break;
            }
            match &event {
                StreamEvent::Delta { .. } => self.content = true,
                StreamEvent::Finish { reason, .. } => {
                    self.content = true;
                    self.reason = Some(*reason);
                }
                StreamEvent::Error { class, message, .. } => self.error = Some((*class, message.clone())),
                StreamEvent::Start { .. } | StreamEvent::BlockStart { .. } | StreamEvent::BlockStop { .. } => {}
            }
            if let Some(w) = &mut self.watch {
                if matches!(event, StreamEvent::Error { .. }) {
                    w.held = Some(event);
                    break;
                }
                w.sent.observe(&event);
            }
            self.encoder.encode(&event, &mut self.out);
        }
        self.events.clear();
        self.out.split().freeze()
    }
}
