//! The request that finishes a reply another provider broke off: the
//! client's own request, in its own format, with the text already sent as
//! the assistant's turn so far. It then goes wherever any request goes
//! (translated for a provider of another format), so each format is
//! written here once.
//!
//! How the provider is asked depends on what it can do with a partial
//! turn ([`Ask`]): Anthropic continues a last assistant message as its own
//! (a prefill); a Chat provider with `prefix_completion` does with
//! `prefix: true`; any other is given the partial turn and asked in words
//! to go on without repeating it (the stream's seam cuts what it repeats
//! all the same, [`super::stream::seam`]).

use serde_json::{json, Map, Value};

use super::error::Untranslatable;
use super::ir::Format;

/// How a provider is asked to go on from a partial reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    /// The partial turn last, continued as the provider's own (Anthropic).
    Prefill,
    /// The partial turn last, marked `prefix: true` (Chat providers with
    /// `prefix_completion`).
    Prefix,
    /// The partial turn, then a user message asking for the rest.
    Instructed,
}

/// What an [`Ask::Instructed`] continuation is told.
pub const INSTRUCTION: &str = "Your previous reply was cut off. Continue it exactly where it stopped, \
without repeating any of it and without any preamble.";

/// The client's request `body` (in `format`) asking to continue from
/// `text`, the reply sent so far.
pub fn continuation(format: Format, body: &[u8], text: &str, ask: Ask) -> Result<Vec<u8>, Untranslatable> {
    let mut request: Map<String, Value> = serde_json::from_slice(body)
        .map_err(|e| Untranslatable::new("", format!("the request is not a JSON object: {e}")))?;
    // Anthropic refuses a final assistant turn that ends in white space;
    // the seam drops it again from the continuation's start.
    let text = if ask == Ask::Prefill { text.trim_end() } else { text };
    match format {
        Format::Chat => chat(&mut request, text, ask),
        Format::Messages => messages(&mut request, text, ask),
        Format::Responses => responses(&mut request, text, ask),
        Format::Gemini => gemini(&mut request, text, ask),
    }?;
    serde_json::to_vec(&request).map_err(|e| Untranslatable::new("", e.to_string()))
}

/// The array at `field`, which the request must carry.
fn list<'a>(request: &'a mut Map<String, Value>, field: &str) -> Result<&'a mut Vec<Value>, Untranslatable> {
    request
        .get_mut(field)
        .and_then(Value::as_array_mut)
        .ok_or_else(|| Untranslatable::new(field, "a continuation needs the conversation as a list"))
}

fn chat(request: &mut Map<String, Value>, text: &str, ask: Ask) -> Result<(), Untranslatable> {
    let messages = list(request, "messages")?;
    let mut turn = json!({ "role": "assistant", "content": text });
    if ask == Ask::Prefix {
        turn["prefix"] = Value::Bool(true);
    }
    messages.push(turn);
    if ask == Ask::Instructed {
        messages.push(json!({ "role": "user", "content": INSTRUCTION }));
    }
    Ok(())
}

fn messages(request: &mut Map<String, Value>, text: &str, ask: Ask) -> Result<(), Untranslatable> {
    let messages = list(request, "messages")?;
    messages.push(json!({ "role": "assistant", "content": [{ "type": "text", "text": text }] }));
    if ask == Ask::Instructed {
        messages.push(json!({ "role": "user", "content": [{ "type": "text", "text": INSTRUCTION }] }));
    } else {
        // A prefill and extended thinking do not go together: the
        // continuation writes on without thinking again.
        request.remove("thinking");
    }
    Ok(())
}

fn responses(request: &mut Map<String, Value>, text: &str, ask: Ask) -> Result<(), Untranslatable> {
    // A string input is one user message.
    if let Some(Value::String(input)) = request.get("input") {
        let input = input.clone();
        request.insert("input".into(), json!([{ "type": "message", "role": "user", "content": input }]));
    }
    let input = list(request, "input")?;
    input.push(json!({
        "type": "message",
        "role": "assistant",
        "content": [{ "type": "output_text", "text": text }],
    }));
    if ask == Ask::Instructed {
        input.push(json!({ "type": "message", "role": "user", "content": INSTRUCTION }));
    }
    Ok(())
}

fn gemini(request: &mut Map<String, Value>, text: &str, ask: Ask) -> Result<(), Untranslatable> {
    let contents = list(request, "contents")?;
    contents.push(json!({ "role": "model", "parts": [{ "text": text }] }));
    if ask == Ask::Instructed {
        contents.push(json!({ "role": "user", "parts": [{ "text": INSTRUCTION }] }));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn made(format: Format, body: Value, ask: Ask) -> Value {
        serde_json::from_slice(&continuation(format, &serde_json::to_vec(&body).unwrap(), "Half a ", ask).unwrap())
            .unwrap()
    }

    #[test]
    fn each_format_carries_the_partial_turn_as_its_provider_can_take_it() {
        let chat = json!({ "model": "m", "messages": [{ "role": "user", "content": "hi" }] });
        let c = made(Format::Chat, chat.clone(), Ask::Prefix);
        assert_eq!(c["messages"][1], json!({ "role": "assistant", "content": "Half a ", "prefix": true }));
        assert_eq!(c["messages"].as_array().unwrap().len(), 2);
        let c = made(Format::Chat, chat, Ask::Instructed);
        assert_eq!(c["messages"][2], json!({ "role": "user", "content": INSTRUCTION }));
        assert!(c["messages"][1].get("prefix").is_none());

        let body = json!({ "model": "m", "max_tokens": 9, "thinking": { "type": "enabled", "budget_tokens": 1024 },
            "messages": [{ "role": "user", "content": "hi" }] });
        let c = made(Format::Messages, body, Ask::Prefill);
        assert_eq!(c["messages"][1]["content"][0]["text"], "Half a", "no trailing space in a prefill");
        assert!(c.get("thinking").is_none(), "a prefill goes without thinking");
        assert_eq!(c["messages"].as_array().unwrap().len(), 2);

        let c = made(Format::Responses, json!({ "model": "m", "input": "hi" }), Ask::Instructed);
        let input = c["input"].as_array().unwrap();
        assert_eq!(input[0], json!({ "type": "message", "role": "user", "content": "hi" }));
        assert_eq!(input[1]["content"][0], json!({ "type": "output_text", "text": "Half a " }));
        assert_eq!(input[2]["content"], INSTRUCTION);

        let c = made(
            Format::Gemini,
            json!({ "contents": [{ "role": "user", "parts": [{ "text": "hi" }] }] }),
            Ask::Prefill,
        );
        assert_eq!(c["contents"][1], json!({ "role": "model", "parts": [{ "text": "Half a" }] }));
    }

    #[test]
    fn a_request_without_its_conversation_says_which_field() {
        let e = continuation(Format::Chat, br#"{"model":"m"}"#, "x", Ask::Instructed).unwrap_err();
        assert_eq!(e.field, "messages");
        assert!(continuation(Format::Gemini, b"[]", "x", Ask::Prefill).is_err());
    }
}
