//! Property tests: any chunking of a recorded stream decodes the same, and
//! any valid event sequence survives each format's encoder and decoder.

use bytes::BytesMut;
use proptest::prelude::*;

use super::{check_ir, ctx, decode, decode_in_pieces, opts, summary, summary_back, FIXTURES};
use crate::protocol::translate::ir::{
    BlockKind, Delta, ErrorClass, Family, Format, Opaque, StopReason, StreamEvent, Tokens,
};
use crate::protocol::translate::stream::Encoder;

proptest! {
    // No regression files: a failure prints its minimal input to keep as a test.
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    /// Pieces of 0 to 7 bytes split characters, `\r\n` pairs and `data:`
    /// prefixes anywhere; the events are those of the whole stream.
    #[test]
    fn any_chunking_decodes_like_the_whole(sizes in prop::collection::vec(0usize..8, 1..64)) {
        for f in FIXTURES {
            let whole = decode(f.format, f.bytes);
            prop_assert_eq!(&decode_in_pieces(f.format, f.bytes, &sizes), &whole, "{}", f.name);
            // The same stream with CRLF line ends (a JSON line holds no raw
            // newline), so pieces also split `event:` from its `data:`.
            let crlf = String::from_utf8_lossy(f.bytes).replace("\r\n", "\n").replace('\n', "\r\n");
            prop_assert_eq!(&decode_in_pieces(f.format, crlf.as_bytes(), &sizes), &whole, "{} with CRLF", f.name);
        }
    }

    /// What an encoder writes, its own format's decoder reads back as the
    /// same reply (as far as the format can say it).
    #[test]
    fn encoded_events_decode_back(events in stream(), format in prop::sample::select(Format::ALL.to_vec())) {
        let mut encoder = Encoder::new(format, ctx(), opts());
        let mut out = BytesMut::new();
        for e in &events {
            encoder.encode(e, &mut out);
        }
        let back = decode(format, &out);
        check_ir(&back);
        let text = String::from_utf8_lossy(&out).into_owned();
        prop_assert_eq!(summary_back(&back, format), summary(&events, format), "{}", text);
    }
}

fn text() -> impl Strategy<Value = String> {
    let chars = prop::sample::select(vec!['a', 'b', ' ', '世', '界', '😀', 'é', '"', '\\', '\n', '{', '}', '\u{2028}']);
    prop::collection::vec(chars, 0..6).prop_map(|c| c.into_iter().collect())
}

fn texts() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(text(), 0..4)
}

#[derive(Debug, Clone)]
enum Segment {
    Text(Vec<String>),
    Reasoning(Vec<String>, Option<(Family, Vec<String>)>, Option<String>),
    Redacted(String),
    /// Calls: name, custom, argument pieces; then the order their pieces
    /// interleave in.
    Tools(Vec<(String, bool, Vec<String>)>, Vec<usize>),
}

fn opaque(family: Family, value: &str) -> Opaque {
    Opaque { origin: family, value: value.to_string() }
}

fn segment() -> impl Strategy<Value = Segment> {
    let family = prop::sample::select(vec![Family::Anthropic, Family::OpenAi, Family::Gemini]);
    let state = prop::option::of((family, prop::collection::vec("[a-zA-Z0-9+/=]{1,12}", 1..3)));
    let call = (prop::sample::select(vec!["get_weather", "Bash", "apply_patch", "read"]), any::<bool>(), texts());
    prop_oneof![
        texts().prop_map(Segment::Text),
        (texts(), state, prop::option::of("rs_[a-z0-9]{1,6}")).prop_map(|(t, s, id)| Segment::Reasoning(t, s, id)),
        "[a-zA-Z0-9+/]{4,16}".prop_map(Segment::Redacted),
        (prop::collection::vec(call, 1..4), prop::collection::vec(0usize..4, 0..12)).prop_map(|(calls, order)| {
            let calls = calls.into_iter().map(|(name, custom, pieces)| (name.to_string(), custom, pieces)).collect();
            Segment::Tools(calls, order)
        }),
    ]
}

/// A valid intermediate stream: segments, then a finish consistent with
/// them, or an error (perhaps inside a text or reasoning block).
fn stream() -> impl Strategy<Value = Vec<StreamEvent>> {
    let tokens = (
        0u64..50,
        0u64..50,
        prop::option::of(0u64..500),
        prop::option::of(0u64..50),
        0u64..100,
        prop::option::of(0u64..100),
    );
    let classes = prop::sample::select(ErrorClass::ALL.to_vec());
    let reasons = prop::sample::select(vec![
        StopReason::EndTurn,
        StopReason::StopSequence,
        StopReason::MaxTokens,
        StopReason::ToolUse,
        StopReason::Refusal,
        StopReason::PauseTurn,
    ]);
    let partial = prop::option::of((any::<bool>(), prop::collection::vec(text(), 1..3)));
    let origin = prop::sample::select(vec![Family::Anthropic, Family::OpenAi, Family::Gemini]);
    let head = (prop::collection::vec(segment(), 0..5), origin);
    (head, tokens, reasons, prop::option::of((classes, partial))).prop_map(
        |((segments, origin), (input, output, read, write, extra, reasoning), reason, error)| {
            let mut b = Builder::default();
            let (id, model) = ("up_1".to_string(), "up-model".to_string());
            b.events.push(StreamEvent::Start { id, model, tokens: Tokens::default(), origin });
            for s in segments {
                b.segment(s);
            }
            match error {
                Some((class, partial)) => {
                    if let Some((reasoning, pieces)) = partial {
                        let kind = if reasoning { BlockKind::Reasoning { id: None } } else { BlockKind::Text };
                        let index = b.open(kind);
                        for p in pieces.into_iter().filter(|p| !p.is_empty()) {
                            let d = if reasoning { Delta::Reasoning(p) } else { Delta::Text(p) };
                            b.events.push(StreamEvent::Delta { index, delta: d });
                        }
                    }
                    b.events.push(StreamEvent::Error { class, message: "boom".into(), quota: false });
                }
                None => {
                    let reason = match (reason, b.tools > 0) {
                        (StopReason::ToolUse, false) => StopReason::EndTurn,
                        (r, _) => r,
                    };
                    let read_or_0 = read.unwrap_or(0);
                    let tokens = Tokens {
                        input: Some(input + read_or_0 + write.unwrap_or(0)),
                        output: Some(output + extra + reasoning.unwrap_or(0)),
                        cache_read: read,
                        cache_write: write,
                        reasoning,
                    };
                    b.events.push(StreamEvent::Finish { reason, tokens });
                }
            }
            b.events
        },
    )
}

#[derive(Default)]
struct Builder {
    events: Vec<StreamEvent>,
    next: usize,
    tools: usize,
}

impl Builder {
    fn open(&mut self, block: BlockKind) -> usize {
        let index = self.next;
        self.next += 1;
        self.events.push(StreamEvent::BlockStart { index, block });
        index
    }

    fn delta(&mut self, index: usize, delta: Delta) {
        self.events.push(StreamEvent::Delta { index, delta });
    }

    fn stop(&mut self, index: usize) {
        self.events.push(StreamEvent::BlockStop { index });
    }

    fn segment(&mut self, segment: Segment) {
        match segment {
            Segment::Text(pieces) => {
                let index = self.open(BlockKind::Text);
                for p in pieces.into_iter().filter(|p| !p.is_empty()) {
                    self.delta(index, Delta::Text(p));
                }
                self.stop(index);
            }
            Segment::Reasoning(pieces, state, id) => {
                let index = self.open(BlockKind::Reasoning { id });
                for p in pieces.into_iter().filter(|p| !p.is_empty()) {
                    self.delta(index, Delta::Reasoning(p));
                }
                for (family, values) in state.into_iter() {
                    for v in values {
                        self.delta(index, Delta::Opaque(opaque(family, &v)));
                    }
                }
                self.stop(index);
            }
            Segment::Redacted(data) => {
                let index = self
                    .open(BlockKind::RedactedReasoning { opaque: Opaque { origin: Family::Anthropic, value: data } });
                self.stop(index);
            }
            Segment::Tools(calls, order) => {
                let mut open = Vec::new();
                for (name, custom, pieces) in calls {
                    let id = format!("call_{}", self.next);
                    let index = self.open(BlockKind::ToolCall { id, name, custom });
                    self.tools += 1;
                    let pieces = if custom { pieces } else { json_pieces(&pieces) };
                    open.push((index, pieces.into_iter().filter(|p| !p.is_empty()).collect::<Vec<_>>()));
                }
                // Interleave the pieces as `order` says, then the rest in order.
                for pick in order {
                    let n = open.len();
                    let (index, pieces) = &mut open[pick % n];
                    if !pieces.is_empty() {
                        let p = pieces.remove(0);
                        self.delta(*index, Delta::ToolArgs(p));
                    }
                }
                for (index, pieces) in open {
                    for p in pieces {
                        self.delta(index, Delta::ToolArgs(p));
                    }
                    self.stop(index);
                }
            }
        }
    }
}

/// JSON arguments made of the texts, cut into pieces at character bounds.
fn json_pieces(texts: &[String]) -> Vec<String> {
    if texts.is_empty() {
        return Vec::new();
    }
    let json = serde_json::json!({ "q": texts.concat(), "n": texts.len() }).to_string();
    let chars: Vec<char> = json.chars().collect();
    let size = chars.len().div_ceil(texts.len()).max(1);
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}
