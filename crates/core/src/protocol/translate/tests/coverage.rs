//! Every row of the drop table is exercised by some translation, and no
//! codec drops anything the table does not list.

use std::collections::HashSet;

use super::data;
use crate::protocol::translate::dropped::{Row, TABLE};
use crate::protocol::translate::ir::Format::{self, Chat, Gemini, Messages, Responses};
use crate::protocol::translate::profile::{Profile, ThinkingStyle};
use crate::protocol::translate::translate_request_report;

/// Every request fixture, with the format it is in.
const CORPUS: &[(&str, Format)] = &[
    ("msgs_params.json", Messages),
    ("msgs_parallel.json", Messages),
    ("claude_code.json", Messages),
    ("msgs_oai_envelope.json", Messages),
    ("edge_messages.json", Messages),
    ("chat_merge.json", Chat),
    ("chat_structured.json", Chat),
    ("edge_chat.json", Chat),
    ("codex.json", Responses),
    ("resp_replay.json", Responses),
    ("edge_responses.json", Responses),
    ("edge_responses_hosted_choice.json", Responses),
    ("gemini_cli.json", Gemini),
    ("gemini_oai_envelope.json", Gemini),
    ("edge_gemini.json", Gemini),
];

/// The profiles every fixture is translated under: the generic one, and a
/// strict one that takes no sampling, parallel tools, effort or cache marks.
pub(super) fn profiles() -> [(&'static str, Profile); 2] {
    let strict = Profile {
        sampling: false,
        parallel_tools: false,
        reasoning_effort: false,
        cache_breakpoints: false,
        thinking_style: ThinkingStyle::Adaptive,
        ..Profile::default()
    };
    [("default", Profile::default()), ("strict", strict)]
}

#[test]
fn every_drop_is_listed_and_every_row_is_hit() {
    let mut hit: HashSet<&'static Row> = HashSet::new();
    for (fixture, from) in CORPUS {
        let body = data(&format!("requests/{fixture}"));
        for to in Format::ALL {
            for (_, profile) in profiles() {
                let Ok((encoded, _)) = translate_request_report(*from, to, &body, &profile, "m") else {
                    continue;
                };
                assert!(
                    encoded.drops.unlisted.is_empty(),
                    "{fixture} {from}->{to}: unlisted drops {:?}",
                    encoded.drops.unlisted
                );
                hit.extend(encoded.drops.rows.iter().copied());
            }
        }
    }
    let missed: Vec<String> =
        TABLE.iter().filter(|r| !hit.contains(r)).map(|r| format!("{:?} {} {}", r.stage, r.format, r.field)).collect();
    assert!(missed.is_empty(), "drop-table rows no fixture exercises:\n{}", missed.join("\n"));
}

/// Every fixture translates to every target but where a refusal is the
/// point of the fixture.
#[test]
fn the_corpus_translates_everywhere() {
    for (fixture, from) in CORPUS {
        let body = data(&format!("requests/{fixture}"));
        for to in [Chat, Responses, Messages, Gemini] {
            if let Err(e) = translate_request_report(*from, to, &body, &Profile::default(), "m") {
                panic!("{fixture} {from}->{to}: {e}");
            }
        }
    }
}
