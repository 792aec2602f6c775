use super::*;

fn k(wire: Wire, model: &str, body: &str) -> Keyed {
    key(wire, model, body.as_bytes()).unwrap()
}

fn chat(body: &str) -> Keyed {
    k(Wire::Chat, "gpt-4o", body)
}

/// The canonical body, after the header line, wire and model.
fn canonical(wire: Wire, body: &str) -> String {
    let mut h = Hasher::default();
    h.key(wire, "m", body.as_bytes()).unwrap();
    let text = h.last();
    text.split_once("\u{1}\0\0\0\0\0\0\0m\n").unwrap().1.to_string()
}

#[test]
fn the_same_question_from_two_tools_has_one_key() {
    // One SDK: compact, streaming, with usage and a user id.
    let a = chat(
        r#"{"model":"gpt-4o","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"What is 2+2?"}],"temperature":0,"stream":true,"stream_options":{"include_usage":true},"user":"alice","store":false}"#,
    );
    // Another: pretty-printed, keys in another order, a float zero, padded
    // content, every unset field as null, its own metadata and cache key.
    let b = chat(
        "{\n  \"temperature\": 0.0,\n  \"messages\": [\n    {\"content\": \"  You are terse.\\n\", \"role\": \"system\", \"name\": null},\n    {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"What is 2+2? \"}]}\n  ],\n  \"model\": \"gpt-4o\",\n  \"stream\": false,\n  \"tools\": null,\n  \"metadata\": {\"session\": \"x\"},\n  \"prompt_cache_key\": \"abc\",\n  \"safety_identifier\": \"u1\"\n}",
    );
    // The part array differs from a plain string: not the same request.
    assert_ne!(a.key, b.key);
    let b = chat(
        "{\n  \"temperature\": 0.0,\n  \"messages\": [\n    {\"content\": \"  You are terse.\\n\", \"role\": \"system\", \"name\": null},\n    {\"role\": \"user\", \"content\": \"What is 2+2? \"}\n  ],\n  \"model\": \"gpt-4o\",\n  \"stream\": false,\n  \"tools\": null,\n  \"metadata\": {\"session\": \"x\"},\n  \"prompt_cache_key\": \"abc\",\n  \"safety_identifier\": \"u1\"\n}",
    );
    assert_eq!(a.key, b.key);
    assert_eq!(a.facts, Facts { temperature: Some(0.0), tool_turns: false, stateful: false });
}

#[test]
fn every_generating_endpoint_has_a_wire_and_counting_has_none() {
    use crate::protocol::Endpoint;
    assert_eq!(Wire::of(Endpoint::GeminiGenerate), Some(Wire::Gemini));
    assert_eq!(Wire::of(Endpoint::GeminiStream), Wire::of(Endpoint::GeminiGenerate), "one entry, streamed or not");
    assert_eq!(Wire::of(Endpoint::Messages), Some(Wire::Messages));
    assert_eq!(Wire::of(Endpoint::CountTokens), None);
    assert_eq!(Wire::of(Endpoint::GeminiCountTokens), None);
}

#[test]
fn what_changes_the_answer_changes_the_key() {
    let base = r#"{"model":"gpt-4o","temperature":0,"messages":[{"role":"user","content":"What is 2+2?"}]}"#;
    let keys = [
        chat(base).key,
        chat(&base.replace("\"temperature\":0", "\"temperature\":0.7")).key,
        chat(&base.replace("2+2", "2+3")).key,
        chat(&base.replace("2+2", "2 + 2")).key,
        chat(&base.replace("\"user\"", "\"assistant\"")).key,
        chat(&base.replace('}', ",\"max_tokens\":5}")).key,
        chat(&base.replace("\"temperature\":0,", "")).key,
        k(Wire::Chat, "gpt-4o-mini", base).key,
        k(Wire::Responses, "gpt-4o", base).key,
    ];
    for (i, a) in keys.iter().enumerate() {
        for b in &keys[i + 1..] {
            assert_ne!(a, b, "keys {i} collide");
        }
    }
}

#[test]
fn the_canonical_form_is_what_the_module_says() {
    assert_eq!(
        canonical(
            Wire::Chat,
            r#" { "z" : [ 1.50, -0, 1e2, 0.0, 12345678901234567890 ], "a": "\u00e9\/x", "stream": true, "n": null, "messages": [ {"role":"user","content":"  hi\n", "cache_control": {"type":"ephemeral"}} ] } "#
        ),
        r#"{"a":"é/x","messages":[{"content":"hi","role":"user"}],"z":[1.5,0,100,0,12345678901234567890]}"#
    );
    // Control characters are escaped one way; nested objects are sorted too.
    assert_eq!(
        canonical(Wire::Chat, r#"{"b":{"y":"\u0001\u000A","x":"\"q\""},"a":[{"d":1,"c":2}]}"#),
        r#"{"a":[{"c":2,"d":1}],"b":{"x":"\"q\"","y":"\u0001\n"}}"#
    );
}

#[test]
fn only_conversation_text_is_trimmed_and_schemas_keep_their_nulls() {
    let body = |input: &str, default: &str| {
        format!(
            r#"{{"prompt":"{input}","tools":[{{"type":"function","function":{{"name":"f","parameters":{{"type":"object","default":{default}}}}}}}]}}"#
        )
    };
    // A completion prompt's trailing space is a token: kept.
    assert_ne!(
        k(Wire::Completions, "m", &body("once ", "null")).key,
        k(Wire::Completions, "m", &body("once", "null")).key
    );
    // A schema's null default is not an absent one.
    assert_eq!(
        canonical(Wire::Completions, &body("x", "null")),
        r#"{"prompt":"x","tools":[{"function":{"name":"f","parameters":{"default":null,"type":"object"}},"type":"function"}]}"#
    );
    // Embeddings input is kept as sent.
    assert_ne!(k(Wire::Embeddings, "e", r#"{"input":"a "}"#).key, k(Wire::Embeddings, "e", r#"{"input":"a"}"#).key);
}

#[test]
fn anthropic_cache_breakpoints_and_system_padding_do_not_split_entries() {
    let plain = r#"{"model":"claude","max_tokens":64,"temperature":0,"system":"Be brief.","messages":[{"role":"user","content":[{"type":"text","text":"Hi"}]}]}"#;
    let marked = r#"{"model":"claude","max_tokens":64,"temperature":0,"metadata":{"user_id":"session-9"},
        "system":[{"type":"text","text":"Be brief. ","cache_control":{"type":"ephemeral"}}],
        "messages":[{"role":"user","content":[{"type":"text","text":"Hi\n","cache_control":{"type":"ephemeral","ttl":"1h"}}]}]}"#;
    let marked_string_system = marked
        .replace(r#"[{"type":"text","text":"Be brief. ","cache_control":{"type":"ephemeral"}}]"#, r#""  Be brief.""#);
    assert_eq!(k(Wire::Messages, "claude", plain).key, k(Wire::Messages, "claude", &marked_string_system).key);
    // A block list is another shape than a string, even with the same text.
    assert_ne!(k(Wire::Messages, "claude", plain).key, k(Wire::Messages, "claude", marked).key);
}

#[test]
fn responses_and_gemini_are_normalised_in_their_own_places() {
    let a = k(
        Wire::Responses,
        "gpt-5",
        r#"{"model":"gpt-5","instructions":" Be brief.","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"Hi "}]}],"temperature":0,"store":false,"prompt_cache_key":"codex-1"}"#,
    );
    let b = k(
        Wire::Responses,
        "gpt-5",
        r#"{"input":[{"role":"user","type":"message","content":[{"text":"Hi","type":"input_text"}]}],"instructions":"Be brief.","temperature":0,"include":null}"#,
    );
    assert_eq!(a.key, b.key);
    let g = |text: &str, temperature: &str| {
        k(
            Wire::Gemini,
            "gemini-2.5-flash",
            &format!(
                r#"{{"contents":[{{"role":"user","parts":[{{"text":"{text}"}}]}}],"systemInstruction":{{"parts":[{{"text":"Be brief. "}}]}},"generationConfig":{{"temperature":{temperature},"maxOutputTokens":64}}}}"#
            ),
        )
    };
    assert_eq!(g(" Hi", "0").key, g("Hi\\n", "0.0").key);
    assert_eq!(g("Hi", "0").facts.temperature, Some(0.0));
    assert_ne!(g("Hi", "0").key, g("Hi", "1").key);
}

#[test]
fn tool_turns_are_seen_in_every_format() {
    let cases = [
        (
            Wire::Chat,
            r#"{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]}]}"#,
        ),
        (Wire::Chat, r#"{"messages":[{"role":"tool","tool_call_id":"c1","content":"a.txt"}]}"#),
        (Wire::Responses, r#"{"input":[{"type":"function_call_output","call_id":"c1","output":"a.txt"}]}"#),
        (Wire::Responses, r#"{"input":[{"type":"custom_tool_call","call_id":"c1","name":"apply_patch","input":"x"}]}"#),
        (
            Wire::Messages,
            r#"{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"ok"}]}]}]}"#,
        ),
        (
            Wire::Messages,
            r#"{"messages":[{"role":"assistant","content":[{"type":"server_tool_use","id":"s","name":"web_search","input":{}}]}]}"#,
        ),
        (Wire::Gemini, r#"{"contents":[{"role":"model","parts":[{"functionCall":{"name":"ls","args":{}}}]}]}"#),
        (Wire::Gemini, r#"{"contents":[{"role":"user","parts":[{"functionResponse":{"name":"ls","response":{}}}]}]}"#),
    ];
    for (wire, body) in cases {
        assert!(k(wire, "m", body).facts.tool_turns, "{wire:?} {body}");
    }
    // Tools offered but not called, an empty call list, a tool's own
    // fields: not a tool turn.
    let offered = [
        (
            Wire::Chat,
            r#"{"tools":[{"type":"function","function":{"name":"ls"}}],"messages":[{"role":"user","content":"hi","tool_calls":[]}]}"#,
        ),
        (
            Wire::Messages,
            r#"{"tools":[{"name":"ls","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool_use"},"messages":[{"role":"user","content":"hi"}]}"#,
        ),
    ];
    for (wire, body) in offered {
        assert!(!k(wire, "m", body).facts.tool_turns, "{wire:?} {body}");
    }
}

#[test]
fn only_deterministic_stateless_requests_are_admitted_by_default() {
    let t0 = Facts { temperature: Some(0.0), ..Facts::default() };
    assert_eq!(t0.admit(Wire::Chat, false, false), Ok(()));
    let warm = Facts { temperature: Some(0.7), ..Facts::default() };
    assert_eq!(warm.admit(Wire::Chat, false, false), Err(Refusal::Sampled));
    assert_eq!(warm.admit(Wire::Chat, true, false), Ok(()), "the route allows sampled answers");
    // Absent means the API's default of about 1, in every generating format.
    for wire in [Wire::Chat, Wire::Completions, Wire::Responses, Wire::Messages, Wire::Gemini] {
        assert_eq!(Facts::default().admit(wire, false, false), Err(Refusal::Sampled), "{wire:?}");
    }
    assert_eq!(Facts::default().admit(Wire::Embeddings, false, false), Ok(()), "no sampling at all");
    let agent = Facts { tool_turns: true, ..t0 };
    assert_eq!(agent.admit(Wire::Messages, false, false), Err(Refusal::ToolTurns));
    assert_eq!(agent.admit(Wire::Messages, false, true), Ok(()));
    let chained = k(Wire::Responses, "m", r#"{"temperature":0,"previous_response_id":"resp_1","input":"go on"}"#);
    assert_eq!(chained.facts.admit(Wire::Responses, true, true), Err(Refusal::Stateful));
    let fresh =
        k(Wire::Responses, "m", r#"{"temperature":0,"previous_response_id":null,"background":false,"input":"hi"}"#);
    assert_eq!(fresh.facts.admit(Wire::Responses, false, false), Ok(()));
}

#[test]
fn bodies_that_cannot_be_canonical_are_refused() {
    for body in [
        "",
        "[1]",
        "{",
        r#"{"a":}"#,
        r#"{"a":1,}"#,
        r#"{"a":"x}"#,
        r#"{"a":tru}"#,
        r#"{"a":1} x"#,
        r#"{"a":"\ud800"}"#,
        r#"{"a":"\q"}"#,
        r#"{"a":-}"#,
    ] {
        assert!(key(Wire::Chat, "m", body.as_bytes()).is_err(), "{body:?}");
    }
    assert!(key(Wire::Chat, "m", b"{\"a\":\"\xff\"}").is_err());
    let deep = format!("{{\"a\":{}{}}}", "[".repeat(200), "]".repeat(200));
    assert!(key(Wire::Chat, "m", deep.as_bytes()).is_err());
    // A surrogate pair is one character.
    assert_eq!(canonical(Wire::Chat, r#"{"a":"\ud83d\ude00"}"#), "{\"a\":\"\u{1f600}\"}");
}

/// A typical 2 KB chat request: a system prompt, a few turns, options.
fn typical_request() -> String {
    let turn = |role: &str, text: &str| format!(r#"{{"role":"{role}","content":"{text}"}}"#);
    let mut messages = vec![turn(
        "system",
        "You are a careful assistant. Answer briefly and cite the file you read.\\nNever invent APIs.",
    )];
    for i in 0..6 {
        messages.push(turn("user", &format!("Question {i}: how does the retry policy decide between a retry and a fallback when the provider answers 429 with a retry-after header?")));
        messages.push(turn("assistant", &format!("Answer {i}: it honours the wait when it fits the deadline and the route's cap, else it moves on to the next provider in the chain.")));
    }
    format!(
        r#"{{"model":"gpt-4o-mini","messages":[{}],"temperature":0,"max_tokens":512,"top_p":1,"stream":true,"stream_options":{{"include_usage":true}},"user":"dev","response_format":{{"type":"text"}}}}"#,
        messages.join(",")
    )
}

/// The CPU a miss adds: keying a typical request. Run in release:
/// `cargo test --release -p switchyard-core --lib key_cost -- --ignored --nocapture`
#[test]
#[ignore]
fn key_cost() {
    let body = typical_request();
    assert!((1800..2600).contains(&body.len()), "{}", body.len());
    let mut h = Hasher::default();
    let runs = 20_000;
    for _ in 0..1000 {
        h.key(Wire::Chat, "gpt-4o-mini", body.as_bytes()).unwrap();
    }
    let started = std::time::Instant::now();
    for _ in 0..runs {
        std::hint::black_box(h.key(Wire::Chat, "gpt-4o-mini", std::hint::black_box(body.as_bytes())).unwrap());
    }
    let reused = started.elapsed() / runs;
    let started = std::time::Instant::now();
    for _ in 0..runs {
        std::hint::black_box(key(Wire::Chat, "gpt-4o-mini", std::hint::black_box(body.as_bytes())).unwrap());
    }
    let fresh = started.elapsed() / runs;
    println!("key of a {} byte request: {reused:?} with a reused hasher, {fresh:?} with a new one", body.len());
}
