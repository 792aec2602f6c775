//! A reply stream finished by another attempt: what the client was sent
//! before a provider's stream broke off ([`Sent`], fed the events it
//! carried), whether the reply can be continued ([`Sent::resumable`]), and
//! the continuation's events joined on at the seam ([`Continuation`]).
//!
//! The client sees one stream in its own format: its encoder is primed with
//! what was sent (its output dropped, as the client has it already), so the
//! message id, the content block or choice index and the open text block
//! go on where they were. The continuation's own start is dropped, its
//! first text joins the open text block, the tail of what was sent that
//! it repeats is cut, and its finish carries the usage of both attempts.

use bytes::{Bytes, BytesMut};

use super::{Decoder, Encoder, Naming, Options};
use crate::protocol::translate::ir::{BlockKind, Context, Delta, Format, StreamEvent, Tokens};

/// A repeat of what was sent is cut at the seam from this many bytes on:
/// a shorter match (a letter, a space) is as likely a coincidence.
const MIN_REPEAT: usize = 10;
/// The most of a continuation's first text held back to find a repeat.
const REPEAT_WINDOW: usize = 512;

/// Why a broken reply is not continued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotResumed {
    /// A tool call had begun: its arguments cannot be continued by another.
    ToolCall { name: String },
    /// A thinking block was open.
    Thinking,
    /// The stream had ended (a terminal reached the client).
    Ended,
    /// Nothing but the reply's start had been sent: a fallback's business.
    NoContent,
}

impl std::fmt::Display for NotResumed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotResumed::ToolCall { name } => write!(f, "not resumed: a tool call (`{name}`) was in progress"),
            NotResumed::Thinking => f.write_str("not resumed: a thinking block was in progress"),
            NotResumed::Ended => f.write_str("not resumed: the stream had ended"),
            NotResumed::NoContent => f.write_str("not resumed: no content had been sent"),
        }
    }
}

/// One block as the client has it (its text is in the events).
#[derive(Debug, Clone)]
struct Block {
    kind: BlockKind,
    open: bool,
}

/// What the client was sent of a reply, in events.
#[derive(Debug, Clone, Default)]
pub struct Sent {
    /// Every event, as sent: the client's encoder is primed with them one
    /// by one, as it counted them (Responses numbers its events).
    events: Vec<StreamEvent>,
    started: bool,
    blocks: Vec<Block>,
    ended: bool,
    /// The usage read so far.
    tokens: Tokens,
}

/// What a resumable reply had said: the text to continue from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resume {
    /// The reply's text so far, every text block in order.
    pub text: String,
}

impl Sent {
    /// Takes in one event the client was sent.
    pub fn observe(&mut self, event: &StreamEvent) {
        self.events.push(event.clone());
        match event {
            StreamEvent::Start { tokens, .. } => {
                self.started = true;
                self.tokens = super::maps::merge(self.tokens, *tokens);
            }
            StreamEvent::BlockStart { block, .. } => {
                self.blocks.push(Block { kind: block.clone(), open: true });
            }
            StreamEvent::Delta { .. } => {}
            StreamEvent::BlockStop { index } => {
                if let Some(b) = self.blocks.get_mut(*index) {
                    b.open = false;
                }
            }
            StreamEvent::Finish { tokens, .. } => {
                self.tokens = super::maps::merge(self.tokens, *tokens);
                self.ended = true;
            }
            StreamEvent::Error { .. } => self.ended = true,
        }
    }

    /// The usage the provider reported before it broke off.
    pub fn tokens(&self) -> Tokens {
        self.tokens
    }

    /// Whether the reply can be continued by another attempt, and from
    /// what text: only text (and thinking that was finished) was sent.
    pub fn resumable(&self) -> Result<Resume, NotResumed> {
        if self.ended {
            return Err(NotResumed::Ended);
        }
        if let Some(Block { kind: BlockKind::ToolCall { name, .. }, .. }) =
            self.blocks.iter().find(|b| matches!(b.kind, BlockKind::ToolCall { .. }))
        {
            return Err(NotResumed::ToolCall { name: name.clone() });
        }
        if self.blocks.iter().any(|b| b.open && !matches!(b.kind, BlockKind::Text)) {
            return Err(NotResumed::Thinking);
        }
        if !self.started || self.blocks.is_empty() {
            return Err(NotResumed::NoContent);
        }
        Ok(Resume { text: self.text(|_| true) })
    }

    /// The text sent in the text blocks `which` picks, in order.
    fn text(&self, which: impl Fn(usize) -> bool) -> String {
        let is_text = |i: usize| self.blocks.get(i).is_some_and(|b| matches!(b.kind, BlockKind::Text)) && which(i);
        self.events
            .iter()
            .filter_map(|e| match e {
                StreamEvent::Delta { index, delta: Delta::Text(t) } if is_text(*index) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The client's encoder as the sent events left it (its output
    /// dropped: the client has it), joined to a decoder of the
    /// continuation's format.
    ///
    /// `naming`: how the client's stream was named besides its events —
    /// its creation time, and the provider's numbering and ids where the
    /// client got the provider's stream as is.
    pub fn continue_in(
        &self,
        upstream: Format,
        client: Format,
        ctx: Context,
        opts: Options,
        naming: &Naming,
    ) -> Continuation {
        let opts = Options { created: naming.created.unwrap_or(opts.created), ..opts };
        let mut encoder = Encoder::new(client, ctx, opts);
        let mut sink = BytesMut::new();
        for event in &self.events {
            encoder.encode(event, &mut sink);
        }
        encoder.adopt(naming);
        let open_text = self.blocks.iter().rposition(|b| b.open && matches!(b.kind, BlockKind::Text));
        let last_text = self.blocks.iter().rposition(|b| matches!(b.kind, BlockKind::Text));
        let tail = last_text.map(|last| self.text(|i| i == last));
        Continuation {
            decoder: Decoder::new(upstream),
            encoder,
            events: Vec::new(),
            map: Vec::new(),
            next: self.blocks.len(),
            open_text,
            seam: Some(Seam { sent: tail.unwrap_or_default(), held: String::new() }),
            before: self.tokens,
            content: false,
            error: None,
            out: BytesMut::new(),
        }
    }
}

/// The seam between the text sent and the continuation's: the
/// continuation's first text is held until a repeat of the sent text's
/// tail can be told from new text.
#[derive(Debug)]
struct Seam {
    sent: String,
    held: String,
}

impl Seam {
    /// The held text once it can be told, with a repeat of the sent
    /// text's tail cut; `None` while more is needed. `done`: no more text
    /// is coming for the block.
    fn take(&mut self, done: bool) -> Option<String> {
        if !done && self.held.len() < REPEAT_WINDOW && self.may_grow() {
            return None;
        }
        let held = std::mem::take(&mut self.held);
        let cut = repeat(&self.sent, &held);
        Some(held[cut..].to_string())
    }

    /// Whether the held text could still grow into a longer repeat: a
    /// longer suffix of the sent text starts with it.
    fn may_grow(&self) -> bool {
        let Some(first) = self.held.chars().next() else { return true };
        self.sent
            .match_indices(first)
            .any(|(i, _)| self.sent.len() - i > self.held.len() && self.sent[i..].starts_with(&self.held))
    }
}

/// How many bytes at the start of `next` repeat the end of `sent`: the
/// longest suffix of `sent` that `next` starts with, from [`MIN_REPEAT`]
/// bytes; or the whitespace `sent` ended in, which a continuation of text
/// cut after it (a prefill goes without it) starts with again.
fn repeat(sent: &str, next: &str) -> usize {
    let longest = sent.len().min(next.len());
    let text = (MIN_REPEAT..=longest)
        .rev()
        .filter(|&k| next.is_char_boundary(k) && sent.is_char_boundary(sent.len() - k))
        .find(|&k| sent.ends_with(&next[..k]));
    let space = &sent[sent.trim_end().len()..];
    text.unwrap_or(if !space.is_empty() && next.starts_with(space) { space.len() } else { 0 })
}

/// A continuation's stream, joined on to what the client was sent.
#[derive(Debug)]
pub struct Continuation {
    decoder: Decoder,
    encoder: Encoder,
    events: Vec<StreamEvent>,
    /// The continuation's block index → the client's.
    map: Vec<usize>,
    /// The client's next block index.
    next: usize,
    /// The client's text block left open, which the continuation's first
    /// text block goes on.
    open_text: Option<usize>,
    /// Present until the continuation's first text is joined on.
    seam: Option<Seam>,
    /// The usage of the attempt that broke off, added to the continuation's.
    before: Tokens,
    /// Whether content (a delta, or the reply's end) has gone to the client.
    content: bool,
    /// The error the continuation ended in, if it did.
    error: Option<String>,
    out: BytesMut,
}

impl Continuation {
    /// Feeds the continuation's bytes; returns the client's.
    pub fn push(&mut self, bytes: &[u8]) -> Bytes {
        self.decoder.push(bytes, &mut self.events);
        self.flush()
    }

    /// The continuation's stream ended cleanly; the client's last bytes.
    pub fn finish(&mut self) -> Bytes {
        self.decoder.finish(&mut self.events);
        self.flush()
    }

    /// Whether the client's stream has had its terminal.
    pub fn is_done(&self) -> bool {
        self.encoder.is_done()
    }

    /// Whether the continuation has sent content yet (its first content is
    /// where it is committed to, as any attempt).
    pub fn has_content(&self) -> bool {
        self.content
    }

    /// The continuation broke off too: the client's stream ends in an
    /// error in its own protocol.
    pub fn fail(&mut self, class: crate::protocol::translate::ir::ErrorClass, message: &str) -> Bytes {
        self.error = Some(message.to_string());
        self.encoder.fail(class, message, &mut self.out);
        self.out.split().freeze()
    }

    /// The error the continuation ended in, if it did.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    fn flush(&mut self) -> Bytes {
        let events = std::mem::take(&mut self.events);
        for event in events {
            for joined in self.join(event) {
                self.content |= matches!(joined, StreamEvent::Delta { .. } | StreamEvent::Finish { .. });
                self.encoder.encode(&joined, &mut self.out);
            }
        }
        self.out.split().freeze()
    }

    /// One event of the continuation as the client's: none, one or (a held
    /// seam let go) two.
    fn join(&mut self, event: StreamEvent) -> Vec<StreamEvent> {
        match event {
            StreamEvent::Start { .. } => Vec::new(),
            StreamEvent::BlockStart { block, .. } => {
                let first = self.map.is_empty();
                if let (BlockKind::Text, Some(open), true) = (&block, self.open_text, first) {
                    self.map.push(open);
                    return Vec::new();
                }
                let mut out = Vec::new();
                // The continuation goes on with something else (the tool
                // call the text was leading to): the text sent is ended.
                if let Some(open) = self.open_text.take().filter(|_| first) {
                    self.seam = None;
                    out.push(StreamEvent::BlockStop { index: open });
                }
                let index = self.next;
                self.next += 1;
                self.map.push(index);
                out.push(StreamEvent::BlockStart { index, block });
                out
            }
            StreamEvent::Delta { index, delta } => {
                let Some(&to) = self.map.get(index) else { return Vec::new() };
                match delta {
                    Delta::Text(text) if Some(to) == self.open_text && self.seam.is_some() => {
                        self.held(to, text, false)
                    }
                    delta => vec![StreamEvent::Delta { index: to, delta }],
                }
            }
            StreamEvent::BlockStop { index } => {
                let Some(&to) = self.map.get(index) else { return Vec::new() };
                let mut out = if Some(to) == self.open_text { self.held(to, String::new(), true) } else { Vec::new() };
                out.push(StreamEvent::BlockStop { index: to });
                out
            }
            StreamEvent::Finish { reason, tokens } => {
                vec![StreamEvent::Finish { reason, tokens: summed(self.before, tokens) }]
            }
            StreamEvent::Error { class, message, quota } => {
                self.error = Some(message.clone());
                vec![StreamEvent::Error { class, message, quota }]
            }
        }
    }

    /// Text for the seam block, held until a repeat can be cut.
    fn held(&mut self, index: usize, text: String, done: bool) -> Vec<StreamEvent> {
        let Some(seam) = &mut self.seam else { return Vec::new() };
        seam.held.push_str(&text);
        match seam.take(done) {
            Some(text) => {
                self.seam = None;
                if text.is_empty() {
                    Vec::new()
                } else {
                    vec![StreamEvent::Delta { index, delta: Delta::Text(text) }]
                }
            }
            None => Vec::new(),
        }
    }
}

/// Two attempts' usage as one: the counts added.
fn summed(a: Tokens, b: Tokens) -> Tokens {
    use crate::protocol::usage::add;
    Tokens {
        input: add(a.input, b.input),
        output: add(a.output, b.output),
        cache_read: add(a.cache_read, b.cache_read),
        cache_write: add(a.cache_write, b.cache_write),
        reasoning: add(a.reasoning, b.reasoning),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::translate::ir::{Family, StopReason};

    const FORMATS: [Format; 4] = [Format::Chat, Format::Responses, Format::Messages, Format::Gemini];

    fn ctx() -> Context {
        Context { client_model: "m".into(), ..Context::default() }
    }

    fn opts() -> Options {
        Options { include_usage: true, created: 1_767_225_600 }
    }

    fn tokens(input: u64, output: u64) -> Tokens {
        Tokens { input: Some(input), output: Some(output), ..Tokens::default() }
    }

    /// A reply's events: its start, one text block in `parts`, and (when
    /// `finished`) its end.
    fn reply(id: &str, parts: &[&str], finished: bool, used: Tokens) -> Vec<StreamEvent> {
        let mut events = vec![
            StreamEvent::Start {
                id: id.into(),
                model: "m".into(),
                tokens: tokens(used.input.unwrap_or(0), 0),
                origin: Family::OpenAi,
            },
            StreamEvent::BlockStart { index: 0, block: BlockKind::Text },
        ];
        events.extend(parts.iter().map(|p| StreamEvent::Delta { index: 0, delta: Delta::Text((*p).into()) }));
        if finished {
            events.push(StreamEvent::BlockStop { index: 0 });
            events.push(StreamEvent::Finish { reason: StopReason::EndTurn, tokens: used });
        }
        events
    }

    fn encoded(format: Format, events: &[StreamEvent]) -> Vec<u8> {
        let mut encoder = Encoder::new(format, ctx(), opts());
        let mut out = BytesMut::new();
        for e in events {
            encoder.encode(e, &mut out);
        }
        out.to_vec()
    }

    fn text_of(events: &[StreamEvent]) -> String {
        events
            .iter()
            .filter_map(|e| match e {
                StreamEvent::Delta { delta: Delta::Text(t), .. } => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }

    /// What the client got: the first attempt's part, then the
    /// continuation's, from `continuation` sent in `upstream`'s format.
    fn joined(
        client: Format,
        upstream: Format,
        first: &[StreamEvent],
        continuation: &[StreamEvent],
    ) -> (Vec<u8>, Sent) {
        let mut sent = Sent::default();
        first.iter().for_each(|e| sent.observe(e));
        let mut bytes = encoded(client, first);
        let mut c = sent.continue_in(upstream, client, ctx(), opts(), &Naming::default());
        let provider = encoded(upstream, continuation);
        // In small pieces, as a network delivers them.
        for piece in provider.chunks(7) {
            bytes.extend_from_slice(&c.push(piece));
        }
        bytes.extend_from_slice(&c.finish());
        assert!(c.is_done() && c.has_content());
        (bytes, sent)
    }

    #[test]
    fn a_cut_reply_goes_on_in_every_format_from_every_other_as_one_stream() {
        let first = reply("first", &["The quick ", "brown fox"], false, tokens(12, 0));
        let next = reply("second", &["quick brown fox jumps", " over the lazy dog."], true, tokens(20, 9));
        for client in FORMATS {
            for upstream in FORMATS {
                let (bytes, sent) = joined(client, upstream, &first, &next);
                assert_eq!(sent.resumable().unwrap().text, "The quick brown fox");
                let events = super::super::decode_all(client, &bytes);
                let case = format!("{client:?} from {upstream:?}: {}", String::from_utf8_lossy(&bytes));
                let starts: Vec<_> = events.iter().filter(|e| matches!(e, StreamEvent::Start { .. })).collect();
                assert_eq!(starts.len(), 1, "{case}");
                assert_eq!(text_of(&events), "The quick brown fox jumps over the lazy dog.", "{case}");
                let blocks = events.iter().filter(|e| matches!(e, StreamEvent::BlockStart { .. })).count();
                assert_eq!(blocks, 1, "one content block: {case}");
                let Some(StreamEvent::Finish { reason, tokens: used }) = events.last() else {
                    panic!("no finish: {case}")
                };
                assert_eq!(*reason, StopReason::EndTurn, "{case}");
                assert_eq!((used.input, used.output), (Some(32), Some(9)), "the attempts' usage summed: {case}");
            }
        }
    }

    #[test]
    fn a_continuation_that_goes_on_with_a_tool_call_ends_the_text_first() {
        let first = reply("first", &["Let me read ", "the file"], false, tokens(12, 0));
        let call = BlockKind::ToolCall { id: "call_1".into(), name: "read".into(), custom: false };
        let next = vec![
            StreamEvent::Start {
                id: "second".into(),
                model: "m".into(),
                tokens: tokens(20, 0),
                origin: Family::OpenAi,
            },
            StreamEvent::BlockStart { index: 0, block: call },
            StreamEvent::Delta { index: 0, delta: Delta::ToolArgs(r#"{"path":"notes.txt"}"#.into()) },
            StreamEvent::BlockStop { index: 0 },
            StreamEvent::Finish { reason: StopReason::ToolUse, tokens: tokens(20, 4) },
        ];
        for client in FORMATS {
            for upstream in FORMATS {
                let (bytes, _) = joined(client, upstream, &first, &next);
                let events = super::super::decode_all(client, &bytes);
                let case = format!("{client:?} from {upstream:?}: {}", String::from_utf8_lossy(&bytes));
                assert_eq!(text_of(&events), "Let me read the file", "{case}");
                let kinds: Vec<(usize, bool)> = events
                    .iter()
                    .filter_map(|e| match e {
                        StreamEvent::BlockStart { index, block } => {
                            Some((*index, matches!(block, BlockKind::ToolCall { .. })))
                        }
                        _ => None,
                    })
                    .collect();
                assert_eq!(kinds, [(0, false), (1, true)], "the text, then the call: {case}");
                let text_ended = events.iter().position(|e| matches!(e, StreamEvent::BlockStop { index: 0 }));
                let call_began = events.iter().position(|e| matches!(e, StreamEvent::BlockStart { index: 1, .. }));
                assert!(text_ended < call_began && text_ended.is_some(), "{case}");
                let Some(StreamEvent::Finish { reason, .. }) = events.last() else { panic!("no finish: {case}") };
                assert_eq!(*reason, StopReason::ToolUse, "{case}");
            }
        }
    }

    #[test]
    fn the_seam_cuts_a_repeat_and_keeps_new_text_and_spaces_whole() {
        let cases = [
            // Sent, the continuation's first text, what the client gets of it.
            ("The quick brown fox", " jumps.", " jumps."),
            ("The quick brown fox", "quick brown fox jumps.", " jumps."),
            ("The quick brown fox", "fox jumps.", "fox jumps."),
            ("Hello ", " world", "world"),
            ("end.\n", "\nNext", "Next"),
            ("é café au lait", "café au lait, s'il vous plaît", ", s'il vous plaît"),
        ];
        for (sent_text, next_text, expected) in cases {
            let first = reply("a", &[sent_text], false, tokens(1, 0));
            let next = reply("b", &[next_text], true, tokens(1, 1));
            let (bytes, _) = joined(Format::Messages, Format::Chat, &first, &next);
            let events = super::super::decode_all(Format::Messages, &bytes);
            assert_eq!(text_of(&events), format!("{sent_text}{expected}"), "{sent_text:?} + {next_text:?}");
        }
    }

    #[test]
    fn a_tool_call_or_open_thinking_is_not_resumed_and_finished_thinking_is() {
        let call = BlockKind::ToolCall { id: "c1".into(), name: "read".into(), custom: false };
        let mut sent = Sent::default();
        for e in reply("a", &["Let me look."], false, tokens(1, 0)) {
            sent.observe(&e);
        }
        sent.observe(&StreamEvent::BlockStop { index: 0 });
        sent.observe(&StreamEvent::BlockStart { index: 1, block: call });
        assert_eq!(sent.resumable(), Err(NotResumed::ToolCall { name: "read".into() }));
        assert!(sent.resumable().unwrap_err().to_string().contains("tool call (`read`)"));

        let mut thinking = Sent::default();
        let start = StreamEvent::Start {
            id: "a".into(),
            model: "m".into(),
            tokens: Tokens::default(),
            origin: Family::Anthropic,
        };
        thinking.observe(&start);
        thinking.observe(&StreamEvent::BlockStart { index: 0, block: BlockKind::Reasoning { id: None } });
        thinking.observe(&StreamEvent::Delta { index: 0, delta: Delta::Reasoning("Hmm".into()) });
        assert_eq!(thinking.resumable(), Err(NotResumed::Thinking));
        thinking.observe(&StreamEvent::BlockStop { index: 0 });
        thinking.observe(&StreamEvent::BlockStart { index: 1, block: BlockKind::Text });
        thinking.observe(&StreamEvent::Delta { index: 1, delta: Delta::Text("So".into()) });
        assert_eq!(thinking.resumable().map(|r| r.text), Ok("So".to_string()));

        let mut ended = Sent::default();
        for e in reply("a", &["Done."], true, tokens(1, 1)) {
            ended.observe(&e);
        }
        assert_eq!(ended.resumable(), Err(NotResumed::Ended));
        let mut nothing = Sent::default();
        nothing.observe(&start);
        assert_eq!(nothing.resumable(), Err(NotResumed::NoContent));
    }

    #[test]
    fn after_finished_thinking_the_text_goes_on_in_its_own_block() {
        let start = StreamEvent::Start {
            id: "msg_1".into(),
            model: "m".into(),
            tokens: tokens(5, 0),
            origin: Family::Anthropic,
        };
        let first = vec![
            start,
            StreamEvent::BlockStart { index: 0, block: BlockKind::Reasoning { id: None } },
            StreamEvent::Delta { index: 0, delta: Delta::Reasoning("Think.".into()) },
            StreamEvent::BlockStop { index: 0 },
            StreamEvent::BlockStart { index: 1, block: BlockKind::Text },
            StreamEvent::Delta { index: 1, delta: Delta::Text("Half a".into()) },
        ];
        let next = reply("msg_2", &[" sentence."], true, tokens(7, 3));
        let (bytes, _) = joined(Format::Messages, Format::Messages, &first, &next);
        let text = String::from_utf8_lossy(&bytes);
        let events = super::super::decode_all(Format::Messages, &bytes);
        assert_eq!(text_of(&events), "Half a sentence.", "{text}");
        assert_eq!(text.matches("event: content_block_start").count(), 2, "the text block goes on: {text}");
        assert_eq!(text.matches("event: message_start").count(), 1, "{text}");
        assert!(text.contains(r#"{"delta":{"text":" sentence.","type":"text_delta"},"index":1,"#), "{text}");
    }
}
