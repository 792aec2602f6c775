//! Golden and property tests of translation across formats. Fixtures in
//! `../testdata` are written by hand from each provider's documentation and
//! from the bodies Claude Code, Codex and Gemini CLI send.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod corpus;
mod coverage;
mod new_shapes;
mod props;
mod replies;
mod requests;

use serde_json::Value;

use super::ir::{Context, Format};
use super::message::Part;
use super::profile::Profile;
use super::{translate_request_report, Drops};

pub(super) fn data(path: &str) -> Vec<u8> {
    let full = format!("{}/src/protocol/translate/testdata/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&full).unwrap_or_else(|e| panic!("{full}: {e}"))
}

pub(super) fn json(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap()
}

/// Translates a request fixture; the body as JSON, the context, the drops.
pub(super) fn go(from: Format, to: Format, fixture: &str, profile: &Profile) -> (Value, Context, Drops) {
    let body = data(&format!("requests/{fixture}"));
    let (encoded, ctx) = translate_request_report(from, to, &body, profile, "up-model")
        .unwrap_or_else(|e| panic!("{fixture} {from}->{to}: {e}"));
    assert!(encoded.drops.unlisted.is_empty(), "unlisted drops: {:?}", encoded.drops.unlisted);
    (json(&encoded.body), ctx, encoded.drops)
}

/// The same, naming the model the golden files expect.
pub(super) fn go_model(from: Format, to: Format, fixture: &str, profile: &Profile, model: &str) -> Value {
    let body = data(&format!("requests/{fixture}"));
    let (out, _) = super::translate_request(from, to, &body, profile, model).unwrap();
    json(&out)
}

/// The text of each text part, in order.
pub(super) fn texts(parts: &[Part]) -> Vec<&str> {
    parts.iter().filter_map(|p| if let Part::Text { text, .. } = p { Some(text.as_str()) } else { None }).collect()
}

/// The reasoning parts' text, run together.
pub(super) fn reasoning(parts: &[Part]) -> String {
    parts.iter().filter_map(|p| if let Part::Reasoning { text, .. } = p { Some(text.as_str()) } else { None }).collect()
}

pub(super) fn dropped(drops: &Drops, field: &str) -> bool {
    drops.rows.iter().any(|r| r.field == field)
}
