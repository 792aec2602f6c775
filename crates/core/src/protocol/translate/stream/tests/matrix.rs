//! Every recorded provider stream to every client format: the client's
//! stream keeps its format's rules, ends as the provider's did, and read
//! back by that format's own decoder says what the provider said (as far
//! as the client's format can say it).

use super::validate::{check, Ending};
use super::{check_ir, ctx, decode, decode_in_pieces, opts, summary, summary_back, translate, FIXTURES};
use crate::protocol::translate::ir::{Format, StreamEvent};

#[test]
fn every_recorded_stream_decodes_by_the_rules() {
    for f in FIXTURES {
        let events = decode(f.format, f.bytes);
        check_ir(&events);
        let byte_by_byte = decode_in_pieces(f.format, f.bytes, &[1]);
        assert_eq!(byte_by_byte, events, "{} fed a byte at a time", f.name);
    }
}

#[test]
fn every_decoder_to_every_encoder() {
    for f in FIXTURES {
        let source = decode(f.format, f.bytes);
        let failed = matches!(source.last(), Some(StreamEvent::Error { .. }));
        for to in Format::ALL {
            let whole = translate(f.format, to, ctx(), opts(), f.bytes, usize::MAX);
            let ending = check(to, &whole);
            assert_eq!(ending == Ending::Error, failed, "{} → {to}: {whole}", f.name);
            let back = decode(to, whole.as_bytes());
            check_ir(&back);
            assert_eq!(summary_back(&back, to), summary(&source, to), "{} → {to}:\n{whole}", f.name);
            // Chunking upstream bytes changes nothing the client sees.
            let trickled = translate(f.format, to, ctx(), opts(), f.bytes, 3);
            assert_eq!(super::parse_sse(&trickled), super::parse_sse(&whole), "{} → {to} in 3-byte pieces", f.name);
        }
    }
}

#[test]
fn the_translator_reports_content_usage_and_the_stop_reason() {
    let f = super::fixture("chat_tools");
    let mut t = super::StreamTranslator::new(f.format, Format::Messages, ctx(), opts());
    let (head, tail) = f.bytes.split_at(f.bytes.iter().position(|b| *b == b'\n').unwrap() + 2);
    t.push(head);
    assert!(!t.has_content(), "a role chunk is no content");
    t.push(tail);
    assert!(t.has_content());
    t.finish();
    assert!(t.is_done());
    assert_eq!(t.stop_reason(), Some(crate::protocol::translate::ir::StopReason::ToolUse));
    assert_eq!((t.tokens().input, t.tokens().output, t.tokens().cache_read), (Some(80), Some(40), Some(64)));
    assert_eq!(t.error(), None);
}
