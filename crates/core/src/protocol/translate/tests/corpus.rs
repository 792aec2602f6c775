//! What real clients send, put through every translation.
//!
//! `../testdata/corpus/<client>/<scenario>[-n].json` holds requests the
//! pinned CLIs and SDKs sent to a simulated provider, scrubbed, with the
//! client's version (`capture-corpus` writes them: docs/clients.md). For
//! each fixture and each other format, under the default profile and a
//! strict one: the translation succeeds, or the pair is one of
//! [`EXPECTED_SKIPS`] and fails as that entry says; every drop is listed
//! and nothing is left unmapped; no message says "unknown"; every tool the
//! client declared reaches the provider (hosted ones only where the drop
//! table lets them go); and the conversation keeps its tool calls and
//! results. The `anthropic-beta` headers the clients really sent go to
//! Anthropic whole, to a third party as its allowlist says, elsewhere not.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use super::json;
use crate::protocol::translate::ir::Format::{self, Chat, Gemini, Messages, Responses};
use crate::protocol::translate::profile::Profile;
use crate::protocol::translate::{translate_request_report, Encoded, Untranslatable};
use crate::protocol::Protocol;
use crate::proxy::headers::upstream_request;

/// Fewer fixtures than this means a client's folder went missing.
const MIN_FIXTURES: usize = 40;

/// A (fixture, target) pair whose translation is refused on purpose.
struct Skip {
    /// `client/file.json`.
    fixture: &'static str,
    to: Format,
    /// The refused field, as the error names it.
    field: &'static str,
    /// A piece of the error's reason.
    reason: &'static str,
}

/// The refusals a human agreed with: each must still happen, as written
/// here. Empty while every captured request translates everywhere.
const EXPECTED_SKIPS: &[Skip] = &[];

/// Problems the corpus shows that wait on a decision about the translator,
/// tolerated until then: (fixture prefix, a piece of the problem). Each
/// belongs in the drop table or the decoders; remove it when it is.
const PENDING: &[(&str, &str)] = &[];

/// One captured request.
struct Fixture {
    /// `client/file.json`.
    name: String,
    from: Format,
    doc: Value,
    body: Vec<u8>,
}

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/protocol/translate/testdata/corpus")
}

/// Every fixture, in name order, with the format its path says it is in.
/// Token counts are not translated by these codecs and are left out.
fn fixtures() -> Vec<Fixture> {
    let mut all = Vec::new();
    for client in sorted(&corpus_dir()) {
        for file in sorted(&client).into_iter().filter(|f| f.extension().is_some_and(|e| e == "json")) {
            let doc = json(&std::fs::read(&file).unwrap());
            let name = format!("{}/{}", dir_name(&client), dir_name(&file));
            let Some(from) = format_of(doc["path"].as_str().unwrap_or_default()) else { continue };
            let body = serde_json::to_vec(&doc["body"]).unwrap();
            all.push(Fixture { name, from, doc, body });
        }
    }
    all
}

fn sorted(dir: &Path) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    paths
}

fn dir_name(path: &Path) -> String {
    path.file_name().unwrap().to_string_lossy().to_string()
}

/// The format of a request to `path`; `None` for token counts.
fn format_of(path: &str) -> Option<Format> {
    match path {
        "/v1/messages" => Some(Messages),
        "/v1/chat/completions" => Some(Chat),
        "/v1/responses" => Some(Responses),
        "/v1/messages/count_tokens" => None,
        p if p.starts_with("/v1beta/models/") && p.ends_with(":countTokens") => None,
        p if p.starts_with("/v1beta/models/")
            && (p.ends_with(":generateContent") || p.ends_with(":streamGenerateContent")) =>
        {
            Some(Gemini)
        }
        other => panic!("a fixture for {other}, which the corpus test does not know how to read"),
    }
}

#[test]
fn the_corpus_is_all_there() {
    let all = fixtures();
    assert!(all.len() >= MIN_FIXTURES, "{} fixtures under {}", all.len(), corpus_dir().display());
    for client in ["claude-code", "codex", "gemini-cli", "openai-python", "anthropic-python", "google-genai-python"] {
        assert!(all.iter().any(|f| f.name.starts_with(&format!("{client}/"))), "no fixture of {client}");
    }
    for f in &all {
        for field in ["client", "version", "scenario"] {
            assert!(f.doc[field].as_str().is_some_and(|v| !v.is_empty()), "{}: no {field}", f.name);
        }
    }
}

/// Every fixture to every other format. What failed is reported all at
/// once, each problem with the cases that show it, so one run shows the
/// whole picture.
#[test]
fn every_fixture_translates_to_every_format() {
    let mut failures: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut used = vec![false; EXPECTED_SKIPS.len()];
    for f in &fixtures() {
        for to in Format::ALL.into_iter().filter(|to| *to != f.from) {
            for (profile_name, profile) in super::coverage::profiles() {
                let case = format!("{} {}->{to} ({profile_name})", f.name, f.from);
                let problems = match translate_request_report(f.from, to, &f.body, &profile, "m") {
                    Ok((encoded, _)) => check(f, to, &encoded),
                    Err(e) => refused(f, to, &e, &mut used),
                };
                let pending =
                    |p: &String| PENDING.iter().any(|(prefix, what)| f.name.starts_with(prefix) && p.contains(what));
                for problem in problems.into_iter().filter(|p| !pending(p)) {
                    failures.entry(problem).or_default().push(case.clone());
                }
            }
        }
    }
    for (skip, used) in EXPECTED_SKIPS.iter().zip(used) {
        if !used {
            failures
                .entry("the expected refusal did not happen".into())
                .or_default()
                .push(format!("{} ->{}", skip.fixture, skip.to));
        }
    }
    let report: Vec<String> =
        failures.iter().map(|(p, cases)| format!("{p}\n    in {}", cases.join("\n    in "))).collect();
    assert!(failures.is_empty(), "{} problem(s):\n{}", failures.len(), report.join("\n"));
}

/// The problems of a refusal: none when [`EXPECTED_SKIPS`] lists it as it happened.
fn refused(f: &Fixture, to: Format, e: &Untranslatable, used: &mut [bool]) -> Vec<String> {
    let text = e.to_string();
    let mut problems = Vec::new();
    let skip = EXPECTED_SKIPS.iter().position(|s| s.fixture == f.name && s.to == to);
    match skip {
        Some(i) if e.field == EXPECTED_SKIPS[i].field && text.contains(EXPECTED_SKIPS[i].reason) => used[i] = true,
        _ => problems.push(format!("refused: {text}")),
    }
    if text.to_lowercase().contains("unknown") {
        problems.push(format!("the refusal says unknown: {text}"));
    }
    problems
}

/// What a successful translation must show; one line per problem.
fn check(f: &Fixture, to: Format, encoded: &Encoded) -> Vec<String> {
    let mut problems = Vec::new();
    let drops = &encoded.drops;
    if !drops.unlisted.is_empty() {
        problems.push(format!("unlisted drops {:?}", drops.unlisted));
    }
    for u in &drops.unmapped {
        problems.push(format!("unmapped: {}: {}", u.path, u.what));
    }
    for row in drops.rows.iter().filter(|r| r.reason.contains("unknown") || r.field.contains("unknown")) {
        problems.push(format!("dropped as unknown: {:?} {} `{}`", row.stage, row.format, row.field));
    }
    let Ok(out) = serde_json::from_slice::<Value>(&encoded.body) else {
        problems.push("the encoded body is not JSON".to_string());
        return problems;
    };
    let source = &f.doc["body"];
    problems.extend(missing_tools(f.from, source, to, &out, encoded));
    let (calls, results) = (tool_calls(f.from, source), tool_calls(to, &out));
    let orphan = drops.rows.iter().any(|r| r.field == "tool_result.orphan");
    if calls.0 != results.0 || (calls.1 != results.1 && !orphan) {
        problems.push(format!("tool calls and results {calls:?} became {results:?}"));
    }
    problems
}

/// A tool the client declared, and whether the provider runs it itself.
#[derive(Debug)]
struct Declared {
    name: String,
    hosted: bool,
}

/// The tools a body declares, in its format.
fn declared(format: Format, body: &Value) -> Vec<Declared> {
    let tools = body["tools"].as_array().cloned().unwrap_or_default();
    let mut out = Vec::new();
    for t in &tools {
        let kind = t["type"].as_str();
        match format {
            Messages => {
                let hosted = kind.is_some_and(|k| k != "custom");
                out.extend(t["name"].as_str().map(|n| Declared { name: n.into(), hosted }));
            }
            Chat => {
                let name = t["function"]["name"].as_str().or(t["custom"]["name"].as_str());
                let hosted = !matches!(kind, Some("function" | "custom"));
                out.push(Declared { name: name.or(kind).unwrap_or_default().into(), hosted });
            }
            Responses => {
                let hosted = !matches!(kind, Some("function" | "custom"));
                out.push(Declared { name: t["name"].as_str().or(kind).unwrap_or_default().into(), hosted });
            }
            Gemini => {
                for d in t["functionDeclarations"].as_array().into_iter().flatten() {
                    out.extend(d["name"].as_str().map(|n| Declared { name: n.into(), hosted: false }));
                }
                let hosted = t.as_object().into_iter().flat_map(|m| m.keys()).filter(|k| *k != "functionDeclarations");
                out.extend(hosted.map(|k| Declared { name: k.clone(), hosted: true }));
            }
        }
    }
    out
}

/// The tools of `source` that did not reach `out`: a function tool always
/// must (perhaps renamed or shortened), a hosted one only where the drop
/// table does not let it go.
fn missing_tools(from: Format, source: &Value, to: Format, out: &Value, encoded: &Encoded) -> Vec<String> {
    let reached: Vec<String> = declared(to, out).into_iter().map(|d| d.name).collect();
    let hosted_dropped = encoded.drops.rows.iter().any(|r| r.field == "tools[hosted]");
    declared(from, source)
        .into_iter()
        .filter(|d| !reached.iter().any(|r| same_tool(&d.name, r)))
        .filter(|d| !(d.hosted && hosted_dropped))
        .map(|d| {
            format!("tool {} ({}) did not reach the provider", d.name, if d.hosted { "hosted" } else { "function" })
        })
        .collect()
}

/// Whether `sent` is the tool `declared`, allowing for what encoders do to
/// names: hosted tools renamed to their family's spelling, long names
/// shortened with a hash suffix, characters a format refuses replaced.
fn same_tool(declared: &str, sent: &str) -> bool {
    let norm = |s: &str| s.chars().filter(char::is_ascii_alphanumeric).collect::<String>().to_lowercase();
    let (d, s) = (norm(declared), norm(sent));
    d == s || d.contains(&s) && s.len() >= 6 || s.contains(&d) || (s.len() > 16 && d.starts_with(&s[..s.len() - 8]))
}

/// How many tool calls and tool results a body's conversation holds.
fn tool_calls(format: Format, body: &Value) -> (usize, usize) {
    let items = |key: &str| body[key].as_array().cloned().unwrap_or_default();
    let count = |list: &[Value], pred: &dyn Fn(&Value) -> bool| list.iter().filter(|v| pred(v)).count();
    match format {
        Messages => {
            let blocks: Vec<Value> =
                items("messages").iter().flat_map(|m| m["content"].as_array().cloned().unwrap_or_default()).collect();
            (count(&blocks, &|b| b["type"] == "tool_use"), count(&blocks, &|b| b["type"] == "tool_result"))
        }
        Chat => {
            let messages = items("messages");
            let calls = messages.iter().map(|m| m["tool_calls"].as_array().map_or(0, Vec::len)).sum();
            (calls, count(&messages, &|m| m["role"] == "tool"))
        }
        Responses => {
            let input = items("input");
            let is = |types: &'static [&'static str]| move |i: &Value| types.iter().any(|t| i["type"] == *t);
            (
                count(&input, &is(&["function_call", "custom_tool_call"])),
                count(&input, &is(&["function_call_output", "custom_tool_call_output"])),
            )
        }
        Gemini => {
            let parts: Vec<Value> =
                items("contents").iter().flat_map(|c| c["parts"].as_array().cloned().unwrap_or_default()).collect();
            (
                count(&parts, &|p| p.get("functionCall").is_some()),
                count(&parts, &|p| p.get("functionResponse").is_some()),
            )
        }
    }
}

/// The `anthropic-beta` values Claude Code and the Anthropic SDK really
/// sent: whole to Anthropic, filtered by the allowlist for a compatible
/// third party, to no provider of another kind.
#[test]
fn real_beta_headers_reach_only_who_takes_them() {
    let allow = vec!["interleaved-thinking-".to_string(), "context-1m-".to_string()];
    let third_party = Profile { anthropic_beta: Some(allow.clone()), ..Profile::default() };
    let mut checked = 0;
    for f in fixtures().iter().filter(|f| f.from == Messages) {
        let Some(betas) = f.doc["headers"]["anthropic-beta"].as_str() else { continue };
        checked += 1;
        let client = client_headers(&f.doc["headers"]);
        let sent = |kind, profile: &Profile| -> Vec<String> {
            let out = upstream_request(&client, kind, profile, None, "cid");
            let values = out.get_all("anthropic-beta").iter().map(|v| v.to_str().unwrap().to_string());
            values.flat_map(|v| v.split(',').map(|b| b.trim().to_string()).collect::<Vec<_>>()).collect()
        };
        let all: Vec<String> = betas.split(',').map(|b| b.trim().to_string()).collect();
        assert_eq!(sent(Protocol::Anthropic, &Profile::default()), all, "{}: Anthropic gets every beta", f.name);
        let allowed: Vec<String> =
            all.iter().filter(|b| allow.iter().any(|p| b.starts_with(p.as_str()))).cloned().collect();
        assert_eq!(sent(Protocol::Anthropic, &third_party), allowed, "{}: a third party gets the allowed ones", f.name);
        for kind in [Protocol::OpenAi, Protocol::Gemini] {
            assert!(sent(kind, &Profile::default()).is_empty(), "{}: no beta reaches {kind:?}", f.name);
            assert!(sent(kind, &third_party).is_empty(), "{}: no beta reaches {kind:?}", f.name);
        }
    }
    assert!(checked >= 10, "only {checked} fixtures carry anthropic-beta");
}

/// A fixture's headers as the gateway would receive them.
fn client_headers(headers: &Value) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in headers.as_object().into_iter().flatten() {
        let name = HeaderName::from_bytes(name.as_bytes()).unwrap();
        map.append(name, HeaderValue::from_str(value.as_str().unwrap()).unwrap());
    }
    map
}
