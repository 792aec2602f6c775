//! What clients send that the translator met late: system messages in the
//! middle of the conversation (Claude Code's current models), and blocks,
//! roles and values new to it, which are decided, not refused.

use serde_json::{json, Value};

use super::json;
use crate::protocol::translate::ir::Format::{self, Chat, Gemini, Messages, Responses};
use crate::protocol::translate::profile::Profile;
use crate::protocol::translate::{translate_request_report, Encoded, Untranslatable};

/// What Claude Code 2.1 sends with a current model: the list of agent
/// types as a system message after the first user turn, then a tool turn.
fn claude_code_current() -> Value {
    json!({
        "model": "claude-opus-4-8",
        "max_tokens": 32000,
        "system": [{"type": "text", "text": "You are Claude Code."}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Read notes.txt"}]},
            {"role": "system", "content": [{"type": "text", "text": "Available agent types: general-purpose"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "notes.txt"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "1\thello"}]}
        ],
        "tools": [{"name": "Read", "description": "Reads a file", "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}}],
        "stream": true
    })
}

fn run(from: Format, to: Format, body: &Value, profile: &Profile) -> Result<Encoded, Untranslatable> {
    translate_request_report(from, to, body.to_string().as_bytes(), profile, "m").map(|(e, _)| e)
}

fn ok(from: Format, to: Format, body: &Value, profile: &Profile) -> (Value, Encoded) {
    let e = run(from, to, body, profile).unwrap_or_else(|e| panic!("{from}->{to}: {e}"));
    assert!(e.drops.unlisted.is_empty(), "{:?}", e.drops.unlisted);
    (json(&e.body), e)
}

const REMINDER: &str = "<system-reminder>\nAvailable agent types: general-purpose\n</system-reminder>";

#[test]
fn a_mid_conversation_system_message_keeps_its_place_in_chat() {
    let openai = Profile { mid_system: true, ..Profile::default() };
    let (out, _) = ok(Messages, Chat, &claude_code_current(), &openai);
    let roles: Vec<&str> = out["messages"].as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user", "system", "assistant", "tool"]);
    assert_eq!(out["messages"][2]["content"], "Available agent types: general-purpose");
    assert_eq!(out["messages"][0]["content"], "You are Claude Code.", "the head system prompt is untouched");

    // A reasoning-model profile names the role `developer`.
    let developer = Profile { mid_system: true, developer_role: true, ..Profile::default() };
    let (out, _) = ok(Messages, Chat, &claude_code_current(), &developer);
    assert_eq!(out["messages"][2]["role"], "developer");
}

#[test]
fn a_strict_chat_server_gets_the_instruction_in_place_as_a_reminder() {
    let (out, _) = ok(Messages, Chat, &claude_code_current(), &Profile::default());
    let msgs = out["messages"].as_array().unwrap();
    assert_eq!(msgs.iter().filter(|m| m["role"] == "system").count(), 1, "only the head system message");
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user", "user", "assistant", "tool"]);
    assert_eq!(msgs[2]["content"], REMINDER);
}

#[test]
fn a_mid_conversation_system_message_is_a_developer_item_in_responses() {
    let (out, _) = ok(Messages, Responses, &claude_code_current(), &Profile::default());
    let input = out["input"].as_array().unwrap();
    assert_eq!(input[0]["role"], "user");
    assert_eq!(input[1]["role"], "developer");
    assert_eq!(input[1]["content"][0]["text"], "Available agent types: general-purpose");
    assert_eq!(input[2]["type"], "function_call");
    assert_eq!(input[3]["type"], "function_call_output");
    assert_eq!(out["instructions"], "You are Claude Code.");
}

#[test]
fn gemini_gets_the_instruction_in_place_without_reordering_turns() {
    let (out, _) = ok(Messages, Gemini, &claude_code_current(), &Profile::default());
    let contents = out["contents"].as_array().unwrap();
    let roles: Vec<&str> = contents.iter().map(|c| c["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "model", "user"], "the reminder joins the user turn it follows");
    let first: Vec<&str> = contents[0]["parts"].as_array().unwrap().iter().filter_map(|p| p["text"].as_str()).collect();
    assert_eq!(first, ["Read notes.txt", REMINDER]);
    let system = out["systemInstruction"]["parts"][0]["text"].as_str().unwrap();
    assert!(!system.contains("agent types"), "not hoisted into the system instruction: {system}");
}

#[test]
fn leading_system_turns_join_the_system_prompt_and_later_ones_stay_for_anthropic() {
    let body = json!({
        "model": "gpt-5.5",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
            {"role": "developer", "content": "Approval policy is now never."},
            {"role": "user", "content": "go on"}
        ]
    });
    let (out, _) = ok(Chat, Messages, &body, &Profile::default());
    assert_eq!(out["system"][0]["text"], "Be brief.");
    let msgs = out["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 3);
    let last: Vec<&str> = msgs[2]["content"].as_array().unwrap().iter().map(|p| p["text"].as_str().unwrap()).collect();
    assert_eq!(last, ["<system-reminder>\nApproval policy is now never.\n</system-reminder>", "go on"]);
}

#[test]
fn a_block_new_to_the_gateway_is_carried_as_text_or_left_out_and_listed() {
    let mut body = claude_code_current();
    body["messages"][0]["content"] = json!([
        {"type": "text", "text": "Read notes.txt"},
        {"type": "annotation", "text": "the user highlighted line 3"},
        {"type": "hologram", "frames": 3}
    ]);
    for to in [Chat, Responses, Gemini] {
        let (out, e) = ok(Messages, to, &body, &Profile::default());
        let text = out.to_string();
        assert!(text.contains("the user highlighted line 3"), "{to}: carried as text");
        assert!(!text.contains("hologram") && !text.contains("frames"), "{to}: left out");
        let listed: Vec<(&str, &str)> = e.drops.unmapped.iter().map(|u| (u.path.as_str(), u.what.as_str())).collect();
        assert_eq!(
            listed,
            [
                ("messages[0].content[1]", "a block of type `annotation`, carried as its text"),
                ("messages[0].content[2]", "a block of type `hologram`, left out"),
            ],
            "{to}"
        );
        assert!(e
            .drops
            .describe()
            .iter()
            .any(|d| d == "messages[0].content[2]: unmapped: a block of type `hologram`, left out"));
    }
}

#[test]
fn what_cannot_be_left_out_skips_the_provider_and_says_why() {
    let mut body = claude_code_current();
    body["messages"][0]["content"] = json!([{"type": "hologram", "frames": 3}]);
    let e = run(Messages, Chat, &body, &Profile::default()).unwrap_err();
    assert_eq!(e.field, "messages[0]");
    assert!(e.reason.contains("leaving them out would leave out the message"), "{e}");

    let mut body = claude_code_current();
    body["messages"][1]["role"] = json!("narrator");
    let e = run(Messages, Chat, &body, &Profile::default()).unwrap_err();
    assert_eq!(e.field, "messages[1].role");
    assert!(e.reason.contains("`narrator` is new to the gateway"), "{e}");
    assert!(!e.reason.contains("unknown"));
}

#[test]
fn new_items_parts_and_efforts_are_listed_not_refused() {
    let responses = json!({
        "model": "gpt-5.5",
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
            {"type": "ghost_item", "payload": 1}
        ],
        "reasoning": {"effort": "ludicrous"}
    });
    let (out, e) = ok(Responses, Chat, &responses, &Profile::default());
    assert!(out.get("reasoning_effort").is_none());
    let paths: Vec<&str> = e.drops.unmapped.iter().map(|u| u.path.as_str()).collect();
    assert_eq!(paths, ["input[1]", "reasoning.effort"]);

    let gemini = json!({
        "contents": [{"role": "user", "parts": [{"text": "hi"}, {"hologramData": {"x": 1}}]}],
        "generationConfig": {"thinkingConfig": {"thinkingLevel": "ULTRA"}}
    });
    let (_, e) = ok(Gemini, Messages, &gemini, &Profile::default());
    let paths: Vec<&str> = e.drops.unmapped.iter().map(|u| u.path.as_str()).collect();
    assert_eq!(paths, ["contents[0].parts[1]", "generationConfig.thinkingConfig.thinkingLevel"]);
}

#[test]
fn unknown_top_level_fields_dropped_across_families_are_named() {
    let body = json!({"model": "m", "messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {}});
    let (_, e) = ok(Chat, Messages, &body, &Profile::default());
    assert_eq!(e.drops.unmapped[0].path, "chat_template_kwargs");
}
