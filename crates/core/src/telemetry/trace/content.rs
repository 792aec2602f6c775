//! Prompts and answers as the GenAI semantic conventions carry them
//! (`gen_ai.input.messages`, `gen_ai.output.messages`): a JSON array of
//! messages, each a `role` and its `parts` (`text`, `tool_call`,
//! `tool_call_response`, or the kind of anything else), whatever format
//! the client spoke. Read from the client's body and from the answer it
//! was sent (whole, or a stream's events put together).

use serde_json::{json, Value};

use crate::protocol::Endpoint;

/// The client's request body as the conventions' input messages, the
/// system's instructions first; over `limit` bytes, the oldest turns go
/// (the system's instructions and the latest turn stay), then the rest is cut.
pub fn input(endpoint: Endpoint, body: &[u8], limit: usize) -> Option<String> {
    let mut out = messages_in(endpoint, body)?;
    let size = |m: &[Value]| Value::Array(m.to_vec()).to_string().len();
    while size(&out) > limit && out.len() > 1 {
        let oldest = usize::from(out[0]["role"] == "system" && out.len() > 2);
        out.remove(oldest);
    }
    within(Value::Array(out).to_string(), limit)
}

/// `json` if within `limit`; else cut to it, on a character's boundary
/// (no longer JSON then: the conventions allow a truncated value).
fn within(json: String, limit: usize) -> Option<String> {
    if json.len() <= limit {
        return Some(json);
    }
    let mut end = limit;
    while !json.is_char_boundary(end) {
        end -= 1;
    }
    Some(json[..end].to_string())
}

fn messages_in(endpoint: Endpoint, body: &[u8]) -> Option<Vec<Value>> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let mut out = Vec::new();
    match endpoint {
        Endpoint::ChatCompletions | Endpoint::Completions => {
            for m in v.get("messages").and_then(Value::as_array).into_iter().flatten() {
                out.push(chat_message(m));
            }
            if let Some(p) = v.get("prompt").and_then(Value::as_str) {
                out.push(message("user", vec![text(p)]));
            }
        }
        Endpoint::Messages | Endpoint::CountTokens => {
            if let Some(system) = v.get("system") {
                out.push(message("system", blocks(system)));
            }
            for m in v.get("messages").and_then(Value::as_array).into_iter().flatten() {
                let role = m.get("role").and_then(Value::as_str).unwrap_or("user");
                out.push(message(role, blocks(m.get("content").unwrap_or(&Value::Null))));
            }
        }
        Endpoint::Responses => {
            if let Some(i) = v.get("instructions").and_then(Value::as_str) {
                out.push(message("system", vec![text(i)]));
            }
            match v.get("input") {
                Some(Value::String(s)) => out.push(message("user", vec![text(s)])),
                Some(Value::Array(items)) => out.extend(items.iter().map(response_item)),
                _ => {}
            }
        }
        Endpoint::GeminiGenerate | Endpoint::GeminiStream | Endpoint::GeminiCountTokens => {
            if let Some(system) = v.get("systemInstruction").or_else(|| v.get("system_instruction")) {
                out.push(message("system", gemini_parts(system)));
            }
            for c in v.get("contents").and_then(Value::as_array).into_iter().flatten() {
                let role = match c.get("role").and_then(Value::as_str) {
                    Some("model") => "assistant",
                    _ => "user",
                };
                out.push(message(role, gemini_parts(c)));
            }
        }
        Endpoint::Embeddings => match v.get("input") {
            Some(Value::String(s)) => out.push(message("user", vec![text(s)])),
            Some(Value::Array(items)) => {
                let parts = items.iter().filter_map(Value::as_str).map(text).collect();
                out.push(message("user", parts));
            }
            _ => {}
        },
    }
    (!out.is_empty()).then_some(out)
}

/// The answer the client was sent, as the conventions' output messages.
/// A stream's text deltas are put together into one message.
pub fn output(endpoint: Endpoint, answer: &[u8], finish: &[String], limit: usize) -> Option<String> {
    let finish_reason = finish.first().cloned();
    let messages = match serde_json::from_slice::<Value>(answer) {
        Ok(v) => whole(endpoint, &v),
        Err(_) => streamed(endpoint, answer),
    };
    let out: Vec<Value> = messages
        .into_iter()
        .map(|mut m| {
            if let (Some(obj), Some(f)) = (m.as_object_mut(), &finish_reason) {
                obj.entry("finish_reason").or_insert_with(|| Value::from(f.clone()));
            }
            m
        })
        .collect();
    if out.is_empty() {
        return None;
    }
    within(Value::Array(out).to_string(), limit)
}

fn whole(endpoint: Endpoint, v: &Value) -> Vec<Value> {
    match endpoint {
        Endpoint::ChatCompletions | Endpoint::Completions => v
            .get("choices")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|c| {
                let mut m = match c.get("message") {
                    Some(m) => chat_message(m),
                    None => message("assistant", c.get("text").and_then(Value::as_str).map(text).into_iter().collect()),
                };
                if let (Some(obj), Some(f)) = (m.as_object_mut(), c.get("finish_reason").filter(|f| f.is_string())) {
                    obj.insert("finish_reason".into(), f.clone());
                }
                m
            })
            .collect(),
        Endpoint::Messages => {
            let mut m = message("assistant", blocks(v.get("content").unwrap_or(&Value::Null)));
            if let (Some(obj), Some(f)) = (m.as_object_mut(), v.get("stop_reason").filter(|f| f.is_string())) {
                obj.insert("finish_reason".into(), f.clone());
            }
            vec![m]
        }
        Endpoint::Responses => {
            let items = v.get("output").and_then(Value::as_array).into_iter().flatten();
            let parts: Vec<Value> = items.flat_map(|i| parts_of(&response_item(i))).collect();
            vec![message("assistant", parts)]
        }
        Endpoint::GeminiGenerate | Endpoint::GeminiStream => v
            .get("candidates")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|c| message("assistant", gemini_parts(c.get("content").unwrap_or(&Value::Null))))
            .collect(),
        Endpoint::Embeddings | Endpoint::CountTokens | Endpoint::GeminiCountTokens => Vec::new(),
    }
}

/// The text of a stream's events, in order: one assistant message.
fn streamed(endpoint: Endpoint, answer: &[u8]) -> Vec<Value> {
    let mut said = String::new();
    // Split and read as the gateway reads every stream (multi-line data, CRLF).
    let mut splitter = crate::protocol::sse::Splitter::default();
    let mut events = splitter.push(answer);
    // The kept answer may end inside an event: its whole part is read too.
    events.push(splitter.take_pending());
    for event in events {
        let (_, data) = crate::protocol::sse::parse(&event);
        let Ok(e) = serde_json::from_str::<Value>(&data) else { continue };
        let piece = match endpoint {
            Endpoint::ChatCompletions | Endpoint::Completions => {
                e.pointer("/choices/0/delta/content").or_else(|| e.pointer("/choices/0/text"))
            }
            Endpoint::Messages => e.pointer("/delta/text"),
            Endpoint::Responses => (e.get("type").and_then(Value::as_str) == Some("response.output_text.delta"))
                .then(|| e.get("delta"))
                .flatten(),
            Endpoint::GeminiGenerate | Endpoint::GeminiStream => e.pointer("/candidates/0/content/parts/0/text"),
            Endpoint::Embeddings | Endpoint::CountTokens | Endpoint::GeminiCountTokens => None,
        };
        if let Some(p) = piece.and_then(Value::as_str) {
            said.push_str(p);
        }
    }
    if said.is_empty() {
        return Vec::new();
    }
    vec![message("assistant", vec![text(&said)])]
}

fn message(role: &str, parts: Vec<Value>) -> Value {
    json!({ "role": role, "parts": parts })
}

fn text(s: &str) -> Value {
    json!({ "type": "text", "content": s })
}

fn parts_of(message: &Value) -> Vec<Value> {
    message.get("parts").and_then(Value::as_array).cloned().unwrap_or_default()
}

/// A part the conventions have no kind for: named by its own type.
fn other(kind: &str) -> Value {
    json!({ "type": kind })
}

fn chat_message(m: &Value) -> Value {
    let role = m.get("role").and_then(Value::as_str).unwrap_or("user");
    let mut parts = Vec::new();
    match m.get("content") {
        Some(Value::String(s)) if role == "tool" => {
            parts.push(json!({ "type": "tool_call_response", "id": m.get("tool_call_id"), "response": s }));
        }
        Some(Value::String(s)) => parts.push(text(s)),
        Some(Value::Array(items)) => {
            for i in items {
                match (i.get("type").and_then(Value::as_str), i.get("text").and_then(Value::as_str)) {
                    (Some("text"), Some(t)) => parts.push(text(t)),
                    (kind, _) => parts.push(other(kind.unwrap_or("unknown"))),
                }
            }
        }
        _ => {}
    }
    for call in m.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
        let f = call.get("function").unwrap_or(&Value::Null);
        parts.push(json!({
            "type": "tool_call",
            "id": call.get("id"),
            "name": f.get("name"),
            "arguments": f.get("arguments"),
        }));
    }
    let role = if role == "developer" { "system" } else { role };
    message(role, parts)
}

/// Anthropic's content: a string, or blocks.
fn blocks(content: &Value) -> Vec<Value> {
    match content {
        Value::String(s) => vec![text(s)],
        Value::Array(items) => items
            .iter()
            .map(|b| match b.get("type").and_then(Value::as_str) {
                Some("text") => text(b.get("text").and_then(Value::as_str).unwrap_or("")),
                Some("tool_use") => {
                    json!({ "type": "tool_call", "id": b.get("id"), "name": b.get("name"), "arguments": b.get("input") })
                }
                Some("tool_result") => {
                    json!({ "type": "tool_call_response", "id": b.get("tool_use_id"), "response": b.get("content") })
                }
                kind => other(kind.unwrap_or("unknown")),
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// An item of a Responses `input` or `output`.
fn response_item(item: &Value) -> Value {
    match item.get("type").and_then(Value::as_str) {
        Some("function_call") => message(
            "assistant",
            vec![json!({
                "type": "tool_call",
                "id": item.get("call_id"),
                "name": item.get("name"),
                "arguments": item.get("arguments"),
            })],
        ),
        Some("function_call_output") => message(
            "tool",
            vec![json!({ "type": "tool_call_response", "id": item.get("call_id"), "response": item.get("output") })],
        ),
        Some("message") | None => {
            let role = item.get("role").and_then(Value::as_str).unwrap_or("user");
            let parts = match item.get("content") {
                Some(Value::String(s)) => vec![text(s)],
                Some(Value::Array(c)) => c
                    .iter()
                    .map(|p| match p.get("text").and_then(Value::as_str) {
                        Some(t) => text(t),
                        None => other(p.get("type").and_then(Value::as_str).unwrap_or("unknown")),
                    })
                    .collect(),
                _ => Vec::new(),
            };
            message(role, parts)
        }
        Some(kind) => message("assistant", vec![other(kind)]),
    }
}

/// Gemini's `parts` of a content.
fn gemini_parts(content: &Value) -> Vec<Value> {
    let parts = content.get("parts").and_then(Value::as_array).into_iter().flatten();
    parts
        .map(|p| {
            if let Some(t) = p.get("text").and_then(Value::as_str) {
                return text(t);
            }
            if let Some(call) = p.get("functionCall") {
                return json!({ "type": "tool_call", "id": call.get("id"), "name": call.get("name"), "arguments": call.get("args") });
            }
            if let Some(r) = p.get("functionResponse") {
                return json!({ "type": "tool_call_response", "id": r.get("id"), "response": r.get("response") });
            }
            other(p.as_object().and_then(|o| o.keys().next()).map_or("unknown", String::as_str))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(s: Option<String>) -> Value {
        serde_json::from_str(&s.unwrap()).unwrap()
    }

    #[test]
    fn each_format_s_prompt_becomes_roles_and_parts() {
        let chat = br#"{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{}}]},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","function":{"name":"ls","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"a.txt"}]}"#;
        assert_eq!(
            parsed(input(Endpoint::ChatCompletions, chat, 1 << 20)),
            json!([
                {"role":"system","parts":[{"type":"text","content":"be brief"}]},
                {"role":"user","parts":[{"type":"text","content":"hi"},{"type":"image_url"}]},
                {"role":"assistant","parts":[{"type":"tool_call","id":"c1","name":"ls","arguments":"{}"}]},
                {"role":"tool","parts":[{"type":"tool_call_response","id":"c1","response":"a.txt"}]}
            ])
        );
        let messages = br#"{"system":"be brief","messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}]}"#;
        assert_eq!(
            parsed(input(Endpoint::Messages, messages, 1 << 20)),
            json!([
                {"role":"system","parts":[{"type":"text","content":"be brief"}]},
                {"role":"user","parts":[{"type":"tool_call_response","id":"t1","response":"ok"}]}
            ])
        );
        let gemini = br#"{"systemInstruction":{"parts":[{"text":"be brief"}]},"contents":[{"role":"model","parts":[{"functionCall":{"name":"ls","args":{}}}]}]}"#;
        let g = parsed(input(Endpoint::GeminiGenerate, gemini, 1 << 20));
        assert_eq!((g[1]["role"].as_str(), g[1]["parts"][0]["type"].as_str()), (Some("assistant"), Some("tool_call")));
        let responses = br#"{"instructions":"be brief","input":"hi"}"#;
        assert_eq!(parsed(input(Endpoint::Responses, responses, 1 << 20))[1]["parts"][0]["content"], "hi");
    }

    #[test]
    fn a_long_conversation_keeps_its_instructions_and_latest_turns() {
        let turns: Vec<Value> =
            (0..200).map(|i| json!({"role":"user","content":format!("turn {i} {}", "x".repeat(100))})).collect();
        let mut all = vec![json!({"role":"system","content":"be brief"})];
        all.extend(turns);
        let body = json!({ "messages": all }).to_string();
        let kept = parsed(input(Endpoint::ChatCompletions, body.as_bytes(), 4096));
        let kept = kept.as_array().unwrap();
        assert_eq!(kept[0]["role"], "system");
        assert!(kept.last().unwrap()["parts"][0]["content"].as_str().unwrap().starts_with("turn 199 "));
        assert!(kept.len() < 40);
    }

    #[test]
    fn an_answer_whole_or_streamed_is_one_assistant_message_with_its_finish() {
        let whole = br#"{"choices":[{"message":{"role":"assistant","content":"Hello"},"finish_reason":"stop"}]}"#;
        assert_eq!(
            parsed(output(Endpoint::ChatCompletions, whole, &[], 1 << 20)),
            json!([{"role":"assistant","parts":[{"type":"text","content":"Hello"}],"finish_reason":"stop"}])
        );
        let stream = b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"Hel\"}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"lo\"}}\n\n";
        assert_eq!(
            parsed(output(Endpoint::Messages, stream, &["end_turn".into()], 1 << 20)),
            json!([{"role":"assistant","parts":[{"type":"text","content":"Hello"}],"finish_reason":"end_turn"}])
        );
    }
}
