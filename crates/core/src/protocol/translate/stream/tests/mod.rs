//! Tests of the stream translation: recorded provider streams (written by
//! hand from each provider's documented events, in `testdata/streams/`),
//! checked against golden client streams and against validators of each
//! client format's event rules, and property tests of chunking and round
//! trips.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod golden;
mod matrix;
mod props;
mod stops;
mod validate;

use serde_json::Value;

use super::frames::Reader;
use super::{Decoder, Options, StreamTranslator};
use crate::protocol::translate::envelope;
use crate::protocol::translate::ir::{
    BlockKind, Context, Delta, ErrorClass, Family, Format, Opaque, StopReason, StreamEvent, Tokens,
};

/// A recorded provider stream.
pub(super) struct Fixture {
    pub name: &'static str,
    pub format: Format,
    pub bytes: &'static [u8],
}

macro_rules! fixtures {
    ($($name:literal: $format:ident),* $(,)?) => {
        &[$(Fixture {
            name: $name,
            format: Format::$format,
            bytes: include_bytes!(concat!("../../testdata/streams/", $name, ".sse")),
        }),*]
    };
}

pub(super) const FIXTURES: &[Fixture] = fixtures![
    "chat_text": Chat, "chat_thinking": Chat, "chat_tools": Chat, "chat_error": Chat,
    "chat_h4": Chat, "chat_h7": Chat, "chat_h8": Chat, "chat_openrouter": Chat,
    "messages_text": Messages, "messages_thinking": Messages, "messages_tools": Messages,
    "messages_error": Messages, "messages_h5": Messages, "messages_h10": Messages,
    "responses_text": Responses, "responses_thinking": Responses, "responses_tools": Responses,
    "responses_error": Responses, "responses_h11": Responses,
    "gemini_text": Gemini, "gemini_thinking": Gemini, "gemini_tools": Gemini, "gemini_error": Gemini,
];

pub(super) fn fixture(name: &str) -> &'static Fixture {
    FIXTURES.iter().find(|f| f.name == name).unwrap_or_else(|| panic!("no fixture {name}"))
}

pub(super) fn decode(format: Format, bytes: &[u8]) -> Vec<StreamEvent> {
    super::decode_all(format, bytes)
}

/// Decodes `bytes` fed in pieces of the given sizes (cycled; 0 is an empty push).
pub(super) fn decode_in_pieces(format: Format, bytes: &[u8], sizes: &[usize]) -> Vec<StreamEvent> {
    let mut decoder = Decoder::new(format);
    let mut events = Vec::new();
    let mut rest = bytes;
    // Only empty pushes would never get through the stream.
    let progress = if sizes.iter().any(|s| *s > 0) { sizes } else { &[1] };
    let mut sizes = progress.iter().copied().cycle();
    while !rest.is_empty() {
        let n = sizes.next().unwrap_or(rest.len()).min(rest.len());
        decoder.push(&rest[..n], &mut events);
        rest = &rest[n..];
    }
    decoder.finish(&mut events);
    events
}

pub(super) fn opts() -> Options {
    Options { include_usage: true, created: 1_730_000_000 }
}

pub(super) fn ctx() -> Context {
    Context { client_model: "client-model".into(), ..Context::default() }
}

/// Translates a whole stream, fed `piece` bytes at a time.
pub(super) fn translate(from: Format, to: Format, ctx: Context, opts: Options, bytes: &[u8], piece: usize) -> String {
    let mut t = StreamTranslator::new(from, to, ctx, opts);
    let mut out = Vec::new();
    for chunk in bytes.chunks(piece.max(1)) {
        out.extend_from_slice(&t.push(chunk));
    }
    out.extend_from_slice(&t.finish());
    String::from_utf8(out).expect("client streams are UTF-8")
}

/// A client stream's events: the name (empty when none) and the JSON data
/// (`[DONE]` as a JSON string).
pub(super) fn parse_sse(text: &str) -> Vec<(String, Value)> {
    let mut reader = Reader::default();
    let mut events = Vec::new();
    let mut on = |name: &str, data: &str| {
        let json = if data == "[DONE]" {
            Value::String("[DONE]".into())
        } else {
            serde_json::from_str(data).unwrap_or_else(|e| panic!("bad JSON {data}: {e}"))
        };
        events.push((name.to_string(), json));
    };
    reader.push(text.as_bytes(), &mut on);
    reader.finish(&mut on);
    events
}

/// Checks the rules every decoder's output keeps (see `StreamEvent`).
pub(super) fn check_ir(events: &[StreamEvent]) {
    use std::collections::HashMap;
    let mut open: HashMap<usize, u8> = HashMap::new();
    let mut next = 0;
    let mut started = false;
    let mut ended = false;
    for (at, e) in events.iter().enumerate() {
        assert!(!ended, "event after the terminal: {e:?} in {events:#?}");
        match e {
            StreamEvent::Start { .. } => {
                assert!(!started, "second start");
                started = true;
            }
            StreamEvent::BlockStart { index, block } => {
                assert!(started, "block before start");
                assert_eq!(*index, next, "blocks numbered in order");
                next += 1;
                let kind = match block {
                    BlockKind::Text => 0,
                    BlockKind::Reasoning { .. } | BlockKind::RedactedReasoning { .. } => 1,
                    BlockKind::ToolCall { .. } => 2,
                };
                open.insert(*index, kind);
            }
            StreamEvent::Delta { index, delta } => {
                let kind = open.get(index).copied().unwrap_or_else(|| panic!("delta for a closed block at {at}"));
                let ok = match delta {
                    Delta::Text(t) => kind == 0 && !t.is_empty(),
                    Delta::Reasoning(t) => kind == 1 && !t.is_empty(),
                    Delta::Opaque(_) => kind == 1,
                    Delta::ToolArgs(a) => kind == 2 && !a.is_empty(),
                };
                assert!(ok, "delta {delta:?} does not fit block kind {kind}");
            }
            StreamEvent::BlockStop { index } => {
                assert!(open.remove(index).is_some(), "stop of a block not open");
            }
            StreamEvent::Finish { .. } => {
                assert!(open.is_empty(), "finish with open blocks");
                ended = true;
            }
            StreamEvent::Error { .. } => ended = true,
        }
    }
    assert!(ended, "no terminal in {events:#?}");
}

/// What a block amounts to, for comparing streams across formats.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Block {
    Text(String),
    /// Reasoning text and its state as the target family's slot holds it.
    Reasoning {
        text: String,
        state: Option<String>,
    },
    Tool {
        id: String,
        name: String,
        custom: bool,
        args: String,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum End {
    /// input, output, cache read, cache write, reasoning.
    Finish(StopReason, [u64; 5]),
    Error(ErrorClass),
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Summary {
    pub blocks: Vec<Block>,
    pub end: End,
}

/// Sums up a stream read back from a client of `target`: a Responses
/// client's reasoning item ids are ours, not the provider's, so not compared.
pub(super) fn summary_back(events: &[StreamEvent], target: Format) -> Summary {
    let mut events = events.to_vec();
    if target == Format::Responses {
        for e in &mut events {
            if let StreamEvent::BlockStart { block: BlockKind::Reasoning { id }, .. } = e {
                *id = None;
            }
        }
    }
    summary(&events, target)
}

/// Sums a stream up as a client of `target` could see it.
pub(super) fn summary(events: &[StreamEvent], target: Format) -> Summary {
    struct Acc {
        kind: BlockKind,
        content: String,
        opaques: Vec<Opaque>,
        stopped: bool,
    }
    let mut accs: Vec<Acc> = Vec::new();
    let mut end = None;
    let mut origin = Family::Anthropic;
    for e in events {
        match e {
            StreamEvent::BlockStart { block, .. } => {
                accs.push(Acc { kind: block.clone(), content: String::new(), opaques: Vec::new(), stopped: false })
            }
            StreamEvent::Delta { index, delta } => {
                let acc = &mut accs[*index];
                match delta {
                    Delta::Text(t) | Delta::Reasoning(t) | Delta::ToolArgs(t) => acc.content.push_str(t),
                    Delta::Opaque(o) => acc.opaques.push(o.clone()),
                }
            }
            StreamEvent::BlockStop { index } => accs[*index].stopped = true,
            StreamEvent::Finish { reason, tokens } => end = Some(End::Finish(*reason, counts(tokens))),
            StreamEvent::Error { class, .. } => end = Some(End::Error(*class)),
            StreamEvent::Start { origin: o, .. } => origin = *o,
        }
    }
    let family = match target {
        Format::Messages => Some(Family::Anthropic),
        Format::Responses => Some(Family::OpenAi),
        Format::Gemini => Some(Family::Gemini),
        Format::Chat => None,
    };
    let blocks = accs
        .into_iter()
        .map(|a| match a.kind {
            BlockKind::Text => Block::Text(a.content),
            BlockKind::Reasoning { .. } | BlockKind::RedactedReasoning { .. } => {
                let state = match (&a.kind, family) {
                    (_, None) => None,
                    (BlockKind::RedactedReasoning { opaque }, Some(f)) => {
                        envelope::write_slot(f, origin, Some(opaque), "", None, true)
                    }
                    (BlockKind::Reasoning { id }, Some(f)) if a.stopped => {
                        envelope::write_slot(f, origin, a.opaques.last(), &a.content, id.as_deref(), false)
                    }
                    // Unfinished: only state that came as it went.
                    (_, Some(f)) => {
                        a.opaques.last().and_then(|o| envelope::write_slot(f, origin, Some(o), "", None, false))
                    }
                };
                Block::Reasoning { text: a.content, state }
            }
            BlockKind::ToolCall { id, name, custom } => Block::Tool { id, name, custom, args: a.content },
        })
        .collect();
    normalise(Summary { blocks, end: end.expect("a terminal") }, target)
}

fn counts(t: &Tokens) -> [u64; 5] {
    let f = |v: Option<u64>| v.unwrap_or(0);
    [f(t.input), f(t.output), f(t.cache_read), f(t.cache_write), f(t.reasoning)]
}

/// What `target` cannot tell apart is made the same.
fn normalise(mut s: Summary, target: Format) -> Summary {
    let has_tools = s.blocks.iter().any(|b| matches!(b, Block::Tool { .. }));
    for b in &mut s.blocks {
        if let Block::Tool { id, custom, args, .. } = b {
            if target == Format::Messages {
                *id = crate::protocol::translate::names::call_id(id, 64).into_owned();
            }
            if *custom && matches!(target, Format::Messages | Format::Gemini) {
                *custom = false;
                *args = serde_json::json!({ "input": args }).to_string();
            }
            if !*custom && args.is_empty() {
                *args = "{}".into();
            }
            if target == Format::Gemini {
                // Compare JSON arguments as values: Gemini re-serialises them.
                *args = canonical_args(args, target == Format::Gemini);
            }
        }
    }
    s.blocks.retain(|b| match b {
        Block::Text(t) => !t.is_empty(),
        Block::Reasoning { text, state } => !text.is_empty() || state.is_some(),
        Block::Tool { .. } => true,
    });
    if matches!(target, Format::Chat | Format::Gemini) {
        // Neither format has block boundaries between runs of one kind.
        let mut merged: Vec<Block> = Vec::new();
        for b in s.blocks {
            match (merged.last_mut(), b) {
                (Some(Block::Text(a)), Block::Text(b)) => a.push_str(&b),
                (Some(Block::Reasoning { text, state }), Block::Reasoning { text: t, state: s }) => {
                    text.push_str(&t);
                    *state = s.or(state.take());
                }
                (_, b) => merged.push(b),
            }
        }
        s.blocks = merged;
    }
    if let End::Finish(reason, tokens) = &mut s.end {
        if target != Format::Messages && matches!(reason, StopReason::StopSequence | StopReason::PauseTurn) {
            *reason = StopReason::EndTurn;
        }
        if has_tools && matches!(reason, StopReason::EndTurn | StopReason::StopSequence) {
            *reason = StopReason::ToolUse;
        }
        match target {
            Format::Messages => tokens[4] = 0,
            Format::Responses | Format::Gemini => tokens[3] = 0,
            Format::Chat => {}
        }
    }
    if let End::Error(class) = &mut s.end {
        if target == Format::Gemini && matches!(class, ErrorClass::ContextTooLong | ErrorClass::RequestTooLarge) {
            *class = ErrorClass::InvalidRequest;
        }
    }
    s
}

/// JSON arguments as one canonical text; Gemini also makes them an object.
fn canonical_args(args: &str, object: bool) -> String {
    match serde_json::from_str::<Value>(args) {
        Ok(v @ Value::Object(_)) => v.to_string(),
        Ok(v) if object => serde_json::json!({ "value": v }).to_string(),
        Ok(v) => v.to_string(),
        Err(_) if object => "{}".into(),
        Err(_) => args.to_string(),
    }
}

#[test]
fn a_strict_decoder_breaks_at_an_event_that_is_not_json_and_only_there() {
    use crate::protocol::translate::ir::Format;
    let stream = b"data: {\"id\":\"c\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n\
data: {\"some_extension\": true}\n\ndata: {\"choices\": [{\"delta\n\n";
    let mut lenient = super::Decoder::new(Format::Chat);
    let mut events = Vec::new();
    lenient.push(stream, &mut events);
    assert!(!events.iter().any(|e| matches!(e, StreamEvent::Error { .. })) && !lenient.malformed());
    let mut strict = super::Decoder::new(Format::Chat);
    strict.watch();
    let mut events = Vec::new();
    strict.push(stream, &mut events);
    let errors: Vec<&StreamEvent> = events.iter().filter(|e| matches!(e, StreamEvent::Error { .. })).collect();
    assert_eq!(errors.len(), 1, "the unknown shape passed over, the broken event an error: {events:?}");
    assert!(strict.malformed() && strict.is_done());
    // Events with no data are none a client dispatches: no break.
    let mut quiet = super::Decoder::new(Format::Chat);
    quiet.watch();
    let mut events = Vec::new();
    quiet.push(b"data:\n\ndata: \n\ndata: {\"id\":\"c\",\"choices\":[]}\n\n", &mut events);
    assert!(!quiet.malformed() && !quiet.is_done(), "{events:?}");
}
