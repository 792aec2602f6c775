//! Property tests: a random valid request (or reply) written in format A,
//! read back, written in format B and read back keeps every field both A
//! and B can express; and no input, however odd, makes a codec panic.

use proptest::prelude::*;
use serde_json::{json, Map, Value};

use crate::protocol::translate::estimate::estimate_input_tokens;
use crate::protocol::translate::ir::Format::{self, Chat, Gemini, Messages, Responses};
use crate::protocol::translate::ir::{Context, Family, StopReason, Tokens};
use crate::protocol::translate::message::{CallKind, Part, Reply, Request, Role, Tool, ToolChoice, ToolKind, Turn};
use crate::protocol::translate::profile::Profile;
use crate::protocol::translate::{decode_reply, decode_request, encode_reply, encode_request_report, schema};

/// What a format can carry of the fields the generator produces.
#[derive(Debug, Clone, Copy)]
struct Caps {
    is_error: bool,
    top_k: bool,
    stop: bool,
    seed_and_penalties: bool,
    user: bool,
    stream: bool,
    /// `Some(true)`: both values; `Some(false)`: only `false`; `None`: none.
    parallel: Option<bool>,
    ids: bool,
    /// Messages saw `parallel: false`, and added an `auto` tool choice to
    /// carry `disable_parallel_tool_use`.
    via_messages: bool,
}

fn caps(f: Format) -> Caps {
    match f {
        Chat => Caps {
            is_error: false,
            top_k: false,
            stop: true,
            seed_and_penalties: true,
            user: true,
            stream: true,
            parallel: Some(true),
            ids: true,
            via_messages: false,
        },
        Responses => Caps {
            is_error: false,
            top_k: false,
            stop: false,
            seed_and_penalties: false,
            user: true,
            stream: true,
            parallel: Some(true),
            ids: true,
            via_messages: false,
        },
        Messages => Caps {
            is_error: true,
            top_k: true,
            stop: true,
            seed_and_penalties: false,
            user: true,
            stream: true,
            parallel: Some(false),
            ids: true,
            via_messages: false,
        },
        Gemini => Caps {
            is_error: true,
            top_k: true,
            stop: true,
            seed_and_penalties: true,
            user: false,
            stream: false,
            parallel: None,
            ids: false,
            via_messages: false,
        },
    }
}

fn both(a: Caps, b: Caps) -> Caps {
    Caps {
        is_error: a.is_error && b.is_error,
        top_k: a.top_k && b.top_k,
        stop: a.stop && b.stop,
        seed_and_penalties: a.seed_and_penalties && b.seed_and_penalties,
        user: a.user && b.user,
        stream: a.stream && b.stream,
        parallel: match (a.parallel, b.parallel) {
            (Some(x), Some(y)) => Some(x && y),
            _ => None,
        },
        ids: a.ids && b.ids,
        via_messages: false,
    }
}

/// The part of a request the comparison looks at.
#[derive(Debug, Clone, PartialEq)]
struct View {
    system: String,
    turns: Vec<(Role, Vec<ViewPart>)>,
    tools: Vec<(String, Option<String>, Value)>,
    tool_choice: Option<ToolChoice>,
    parallel: Option<bool>,
    max_output: Option<u32>,
    temperature: Option<f64>,
    top_p: Option<f64>,
    top_k: Option<u32>,
    stop: Vec<String>,
    seed: Option<i64>,
    penalties: (Option<f64>, Option<f64>),
    user: Option<String>,
    stream: bool,
}

#[derive(Debug, Clone, PartialEq)]
enum ViewPart {
    Text(String),
    Call { id: String, name: String, args: Value },
    Result { id: String, text: String, is_error: bool },
}

fn view(req: &Request, c: Caps) -> View {
    let system = super::texts(&req.system).join("\n\n");
    let mut turns: Vec<(Role, Vec<ViewPart>)> = Vec::new();
    for t in &req.turns {
        let parts: Vec<ViewPart> = t.parts.iter().filter_map(|p| view_part(p, c)).collect();
        match turns.last_mut() {
            Some((role, ps)) if *role == t.role => ps.extend(parts),
            _ => turns.push((t.role, parts)),
        }
    }
    let tools = req
        .tools
        .iter()
        .map(|t| {
            let schema = match &t.kind {
                ToolKind::Function { schema: s, .. } => schema::object_root(s),
                _ => Value::Null,
            };
            (t.name.clone(), t.description.clone(), schema)
        })
        .collect();
    let mut tool_choice = req.tool_choice.clone();
    if c.via_messages && req.parallel_tools == Some(false) && tool_choice.is_none() {
        tool_choice = Some(ToolChoice::Auto);
    }
    let parallel = match c.parallel {
        None => None,
        Some(true) => req.parallel_tools,
        Some(false) => req.parallel_tools.filter(|p| !p),
    };
    View {
        system,
        turns,
        tools,
        tool_choice,
        parallel,
        max_output: req.max_output,
        temperature: req.temperature,
        top_p: req.top_p,
        top_k: req.top_k.filter(|_| c.top_k),
        stop: if c.stop { req.stop.clone() } else { Vec::new() },
        seed: req.seed.filter(|_| c.seed_and_penalties),
        penalties: if c.seed_and_penalties { (req.presence_penalty, req.frequency_penalty) } else { (None, None) },
        user: req.user.clone().filter(|_| c.user),
        stream: req.stream && c.stream,
    }
}

fn view_part(p: &Part, c: Caps) -> Option<ViewPart> {
    Some(match p {
        Part::Text { text, .. } => ViewPart::Text(text.clone()),
        Part::ToolCall { id, name, args, .. } => ViewPart::Call {
            id: if c.ids { id.clone() } else { String::new() },
            name: name.clone(),
            args: serde_json::from_str(args).unwrap_or(Value::Null),
        },
        Part::ToolResult { call_id, content, is_error, .. } => {
            let text = super::texts(content).concat();
            let (text, is_error) = match (c.is_error, *is_error) {
                (false, true) => (format!("Error: {text}"), false),
                (_, e) => (text, e),
            };
            ViewPart::Result { id: if c.ids { call_id.clone() } else { String::new() }, text, is_error }
        }
        _ => return None,
    })
}

const NAMES: [&str; 4] = ["read", "write_file", "grep", "list_dir"];

fn text() -> impl Strategy<Value = String> {
    "[A-Za-z0-9][A-Za-z0-9 ,.!?é日]{0,20}"
}

fn tenths(lo: i32, hi: i32) -> impl Strategy<Value = f64> {
    (lo..=hi).prop_map(|k| f64::from(k) / 10.0)
}

fn args() -> impl Strategy<Value = String> {
    proptest::collection::btree_map(
        "[a-z]{1,6}",
        prop_oneof![
            "[a-z ]{0,8}".prop_map(Value::from),
            (-1000i64..1000).prop_map(Value::from),
            any::<bool>().prop_map(Value::from)
        ],
        0..3,
    )
    .prop_map(|m| Value::Object(m.into_iter().collect::<Map<String, Value>>()).to_string())
}

fn tool() -> impl Strategy<Value = (Option<String>, Value)> {
    let prop_type = prop_oneof![Just("string"), Just("number"), Just("integer"), Just("boolean")];
    let props = proptest::collection::btree_map("[a-z]{1,6}", prop_type, 0..3);
    (proptest::option::of(text()), props, any::<bool>()).prop_map(|(desc, props, require)| {
        let properties: Map<String, Value> = props.iter().map(|(k, t)| (k.clone(), json!({"type": t}))).collect();
        let mut schema = json!({"type": "object", "properties": properties});
        if require {
            if let Some(first) = props.keys().next() {
                schema["required"] = json!([first]);
            }
        }
        (desc, schema)
    })
}

/// One exchange: the user's text, the assistant's text and calls (tool
/// index, arguments), and the outcomes (text, is_error) of those calls.
type Exchange = (String, Option<String>, Vec<(usize, String)>, Vec<(String, bool)>);

fn exchange() -> impl Strategy<Value = Exchange> {
    (
        text(),
        proptest::option::of(text()),
        proptest::collection::vec((0..NAMES.len(), args()), 0..3),
        proptest::collection::vec((text(), any::<bool>()), 3),
    )
}

prop_compose! {
    fn request()(
        system in proptest::collection::vec(text(), 0..3),
        exchanges in proptest::collection::vec(exchange(), 1..4),
        last in text(),
        tools in proptest::collection::vec(tool(), 0..3),
        choice in 0..5usize,
        parallel in proptest::option::of(any::<bool>()),
        max_output in 1u32..100_000,
        temperature in proptest::option::of(tenths(0, 10)),
        top_p in proptest::option::of(tenths(1, 10)),
        top_k in proptest::option::of(1u32..100),
        stop in proptest::collection::vec("[a-z]{1,5}", 0..4),
        seed in proptest::option::of(0i64..1_000_000),
        presence in proptest::option::of(tenths(-20, 20)),
        frequency in proptest::option::of(tenths(-20, 20)),
        user in proptest::option::of("[a-z0-9_]{1,20}"),
        stream in any::<bool>(),
    ) -> Request {
        let mut turns = Vec::new();
        let mut pending: Vec<(String, String)> = Vec::new();
        let results = |pending: &[(String, String)], outcomes: &[(String, bool)]| -> Vec<Part> {
            pending.iter().zip(outcomes.iter().cycle()).map(|((id, _), (out, err))| Part::ToolResult {
                call_id: id.clone(),
                name: None,
                content: vec![Part::text(out.clone())],
                is_error: *err,
                kind: CallKind::Function,
                cache: None,
            }).collect()
        };
        for (i, (user_text, reply, calls, outcomes)) in exchanges.iter().enumerate() {
            let mut parts = results(&pending, outcomes);
            parts.push(Part::text(user_text.clone()));
            turns.push(Turn::new(Role::User, parts));
            let mut parts: Vec<Part> = reply.iter().map(|t| Part::text(t.clone())).collect();
            pending = calls.iter().enumerate().map(|(k, (n, _))| (format!("call_{i}_{k}"), NAMES[*n].to_owned())).collect();
            for ((id, name), (_, a)) in pending.iter().zip(calls) {
                parts.push(Part::ToolCall { id: id.clone(), name: name.clone(), args: a.clone(), kind: CallKind::Function });
            }
            if parts.is_empty() {
                parts.push(Part::text("ok"));
            }
            turns.push(Turn::new(Role::Assistant, parts));
        }
        let outcomes = exchanges.last().map(|e| e.3.clone()).unwrap_or_default();
        let mut parts = results(&pending, &outcomes);
        parts.push(Part::text(last));
        turns.push(Turn::new(Role::User, parts));
        let tools: Vec<Tool> = tools.into_iter().enumerate().map(|(i, (description, schema))| Tool {
            name: NAMES[i].to_owned(),
            description,
            kind: ToolKind::Function { schema, strict: None },
            cache: None,
        }).collect();
        let tool_choice = match (tools.first(), choice) {
            (None, _) | (_, 0) => None,
            (_, 1) => Some(ToolChoice::Auto),
            (_, 2) => Some(ToolChoice::None),
            (_, 3) => Some(ToolChoice::Required),
            (Some(t), _) => Some(ToolChoice::Named(t.name.clone())),
        };
        let parallel = parallel.filter(|_| !tools.is_empty() && tool_choice != Some(ToolChoice::None));
        Request {
            model: "m".into(),
            system: system.into_iter().map(Part::text).collect(),
            turns,
            tools,
            tool_choice,
            parallel_tools: parallel,
            max_output: Some(max_output),
            temperature,
            top_p,
            top_k,
            stop,
            seed,
            presence_penalty: presence,
            frequency_penalty: frequency,
            user,
            stream,
            ..Request::default()
        }
    }
}

/// Writes `req` as `format` and reads it back.
fn through(format: Format, req: &Request) -> Request {
    let mut ctx = Context::default();
    let encoded = encode_request_report(format, req, &Profile::default(), "m", &mut ctx).unwrap();
    assert!(encoded.drops.unlisted.is_empty(), "{format}: {:?}", encoded.drops.unlisted);
    assert!(ctx.renamed_tools.is_empty(), "{format}: valid names stay");
    let mut back = decode_request(format, &encoded.body).unwrap();
    if format == Gemini {
        // The model and the stream flag travel in Gemini's URL.
        back.model.clone_from(&req.model);
        back.stream = req.stream;
    }
    back
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn requests_keep_what_both_formats_share(req in request()) {
        for a in Format::ALL {
            let in_a = through(a, &req);
            for b in Format::ALL {
                let in_b = through(b, &in_a);
                let mut c = both(caps(a), caps(b));
                c.via_messages = a == Messages || b == Messages && caps(a).parallel.is_some();
                prop_assert_eq!(view(&in_b, c), view(&req, c), "{} -> {}", a, b);
            }
        }
    }

    #[test]
    fn replies_keep_what_both_formats_share(reply in reply()) {
        for a in Format::ALL {
            let in_a = decode_reply(a, &encode_reply(a, &reply, &Context::default()).unwrap()).unwrap();
            for b in Format::ALL {
                let in_b = decode_reply(b, &encode_reply(b, &in_a, &Context::default()).unwrap()).unwrap();
                let no_reasoning_count = [a, b].contains(&Messages);
                prop_assert_eq!(reply_view(&in_b, no_reasoning_count), reply_view(&reply, no_reasoning_count), "{} -> {}", a, b);
            }
        }
    }

    #[test]
    fn odd_bodies_never_panic(v in odd_json(), to in 0..4usize) {
        let body = v.to_string();
        for f in Format::ALL {
            if let Ok(req) = decode_request(f, body.as_bytes()) {
                estimate_input_tokens(&req);
                let _ = encode_request_report(Format::ALL[to], &req, &Profile::default(), "m", &mut Context::default());
            }
            if let Ok(reply) = decode_reply(f, body.as_bytes()) {
                let _ = encode_reply(Format::ALL[to], &reply, &Context::default());
            }
        }
    }
}

#[derive(Debug, PartialEq)]
struct ReplyView {
    text: String,
    reasoning: String,
    calls: Vec<(String, String, Value)>,
    stop: StopReason,
    tokens: (Option<u64>, Option<u64>, Option<u64>, u64),
}

fn reply_view(r: &Reply, no_reasoning_count: bool) -> ReplyView {
    let mut text = String::new();
    let mut reasoning = String::new();
    let mut calls = Vec::new();
    for p in &r.parts {
        match p {
            Part::Text { text: t, .. } => text.push_str(t),
            Part::Reasoning { text: t, .. } => reasoning.push_str(t),
            Part::ToolCall { id, name, args, .. } => {
                calls.push((id.clone(), name.clone(), serde_json::from_str(args).unwrap_or(Value::Null)));
            }
            _ => {}
        }
    }
    let t = r.tokens;
    let reasoning_tokens = if no_reasoning_count { 0 } else { t.reasoning.unwrap_or(0) };
    ReplyView { text, reasoning, calls, stop: r.stop, tokens: (t.input, t.output, t.cache_read, reasoning_tokens) }
}

prop_compose! {
    fn reply()(
        reasoning in proptest::option::of(text()),
        text in proptest::option::of(text()),
        calls in proptest::collection::vec((0..NAMES.len(), args()), 0..3),
        stop in 0..3usize,
        input in 0u64..100_000,
        cached in 0u64..100_000,
        output in 0u64..10_000,
        thought in 0u64..10_000,
    ) -> Reply {
        let mut parts = Vec::new();
        if let Some(r) = reasoning {
            parts.push(Part::Reasoning { text: r, opaque: None, redacted: false, id: None });
        }
        let has_text = text.is_some();
        parts.extend(text.map(Part::text));
        for (i, (n, a)) in calls.iter().enumerate() {
            parts.push(Part::ToolCall { id: format!("call_{i}"), name: NAMES[*n].to_owned(), args: a.clone(), kind: CallKind::Function });
        }
        let stop = match (calls.is_empty(), stop) {
            (false, _) => StopReason::ToolUse,
            (true, 1) => StopReason::MaxTokens,
            (true, 2) if has_text => StopReason::Refusal,
            _ => StopReason::EndTurn,
        };
        Reply {
            id: "r1".into(),
            model: "m".into(),
            parts,
            stop,
            stop_sequence: None,
            tokens: Tokens {
                input: Some(input),
                output: Some(output),
                cache_read: Some(cached.min(input)),
                cache_write: None,
                reasoning: Some(thought.min(output)),
            },
            created: Some(1_700_000_000),
            origin: Family::OpenAi,
        }
    }
}

fn odd_json() -> impl Strategy<Value = Value> {
    let keys = prop_oneof![
        Just("messages"),
        Just("input"),
        Just("contents"),
        Just("parts"),
        Just("content"),
        Just("role"),
        Just("type"),
        Just("text"),
        Just("tools"),
        Just("tool_calls"),
        Just("functionCall"),
        Just("candidates"),
        Just("choices"),
        Just("message"),
        Just("output"),
        Just("system"),
        Just("thinking"),
        Just("usage"),
        Just("tool_choice"),
        Just("generationConfig"),
        Just("name"),
        Just("id"),
        Just("arguments"),
        Just("args"),
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        (-5i64..5).prop_map(Value::from),
        prop_oneof![
            Just("user"),
            Just("assistant"),
            Just("model"),
            Just("tool"),
            Just("text"),
            Just("tool_use"),
            Just("function_call"),
            Just("stop"),
            Just(""),
            Just("{}"),
            Just("data:image/png;base64,AA")
        ]
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(5, 64, 6, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::vec((keys.clone(), inner), 0..5)
                .prop_map(|kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())),
        ]
    })
}
