//! The request-body inspector: what the gateway reads from a client's JSON
//! body (`model`, `stream`, `stream_options`) and the byte splices it makes
//! (a mapped `model`, an added `stream_options`).
//!
//! Input: one byte that picks the upstream model name, then the body.
//! Checked: whenever `inspect` accepts a body, the body is a JSON object
//! whose fields say what `inspect` read; the model rewrite is valid JSON
//! equal to the original with only `model` changed; asking for usage gives a
//! body the gateway itself accepts, equal to the original with only `model`
//! and `stream_options` changed, or, when the client set `stream_options`,
//! only `model`.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use switchyard_core::fuzzing::inspect;

/// Upstream names as routes map them, with the characters JSON must escape.
const NAMES: [&str; 6] = ["gpt-4o-mini", "provider/\"m\"", "a\\b", "line\nbreak\u{2028}", "é 模型 😀", "\u{0}\u{1f}"];

fn is_unbuildable(e: &serde_json::Error) -> bool {
    let m = e.to_string();
    ["lone leading surrogate", "unexpected end of hex escape", "invalid unicode code point", "number out of range"]
        .iter()
        .any(|s| m.contains(s))
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, body)) = data.split_first() else { return };
    let body = Bytes::copy_from_slice(body);
    let Ok(head) = inspect(&body) else { return };

    let original: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        // Values the gateway does not read are stepped over, not decoded: an
        // unpaired surrogate escape (`"\ud800"`) or a number past f64
        // (`1e999`) is JSON by the grammar, passed on for the provider to
        // judge, but not a value serde_json will build. All else must parse.
        Err(e) if is_unbuildable(&e) => return,
        Err(e) => panic!("an accepted body is JSON: {e}"),
    };
    let object = original.as_object().expect("an accepted body is an object");
    assert_eq!(object.get("model").and_then(Value::as_str), Some(head.model.as_str()));
    assert!(!head.model.is_empty());
    assert_eq!(head.stream, object.get("stream") == Some(&Value::Bool(true)));
    assert_eq!(head.has_stream_options, object.get("stream_options").is_some_and(|v| !v.is_null()));

    let name = NAMES[usize::from(pick) % NAMES.len()];
    let rewritten = head.upstream_body(&body, name, false);
    let mut expected = original.clone();
    expected["model"] = Value::String(name.to_string());
    let parsed: Value = serde_json::from_slice(&rewritten).expect("the rewritten body is JSON");
    assert_eq!(parsed, expected, "only the model changed");
    let again = inspect(&rewritten).expect("the rewritten body is accepted");
    assert_eq!((again.model.as_str(), again.stream), (name, head.stream));
    if name == head.model {
        assert_eq!(rewritten, body, "the same name leaves every byte");
    }

    let with_usage = head.upstream_body(&body, name, true);
    let again = inspect(&with_usage).expect("the body with usage asked for is accepted");
    assert!(again.has_stream_options && again.model == name);
    if head.has_stream_options {
        assert_eq!(with_usage, rewritten, "the client's own stream_options stay");
    } else {
        let parsed: Value = serde_json::from_slice(&with_usage).expect("the body with usage asked for is JSON");
        expected["stream_options"] = serde_json::json!({ "include_usage": true });
        assert_eq!(parsed, expected, "only stream_options added");
    }
});
