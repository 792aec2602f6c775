//! Requests, per pair and direction (translation.md §H request cases).

use serde_json::{json, Value};

use super::{data, dropped, go, go_model, json};
use crate::protocol::translate::estimate::estimate_input_tokens;
use crate::protocol::translate::ir::Format::{self, Chat, Gemini, Messages, Responses};
use crate::protocol::translate::profile::{
    MaxTokensField, Profile, ReasoningField, SchemaDialect, StreamOptions, ThinkingStyle,
};
use crate::protocol::translate::{decode_request, translate_request, translate_request_report};

fn openai() -> Profile {
    Profile { max_tokens_field: MaxTokensField::MaxCompletionTokens, prompt_cache_key: true, ..Profile::default() }
}

fn deepseek() -> Profile {
    Profile { reasoning_field: ReasoningField::ReasoningContent, reasoning_replay_required: true, ..Profile::default() }
}

fn anthropic() -> Profile {
    Profile { cache_breakpoints: false, ..Profile::default() }
}

/// Golden cases: a fixture in, the whole expected body out.
#[test]
fn golden_bodies() {
    let cases: [(&str, Format, Format, Profile, &str, &str); 3] = [
        // §H 1: one system string without the billing line, no cache
        // markers, `stop`, `max_completion_tokens`, no `top_k`, and no
        // `temperature` (o3 takes only the default).
        ("msgs_params.json", Messages, Chat, openai(), "o3", "msgs_params.chat.json"),
        // §H 2: calls in one assistant message; results in call order, the
        // error marked; the image a tool returned in a synthetic user
        // message; then the user's text.
        ("msgs_parallel.json", Messages, Chat, Profile::default(), "gpt-4.1", "msgs_parallel.chat.json"),
        // §H 3: two tool_use (`""` → `{}`), one user turn [results, text],
        // `max_tokens` from the profile.
        ("chat_merge.json", Chat, Messages, anthropic(), "claude-sonnet-4-5", "chat_merge.messages.json"),
    ];
    for (fixture, from, to, profile, model, expected) in cases {
        let out = go_model(from, to, fixture, &profile, model);
        assert_eq!(out, json(&data(&format!("expected/{expected}"))), "{fixture} {from}->{to}");
    }
}

#[test]
fn codex_to_deepseek_chat() {
    let (out, ctx, drops) = go(Responses, Chat, "codex.json", &deepseek());
    let msgs = out["messages"].as_array().unwrap();
    // One head system: instructions and the leading developer message; the
    // later one keeps its place, as a reminder (DeepSeek's profile takes no
    // system message after the first).
    assert_eq!(msgs[0]["role"], "system");
    let system = msgs[0]["content"].as_str().unwrap();
    assert!(system.starts_with("You are Codex"));
    assert!(system.ends_with("sandbox_mode is workspace-write</permissions instructions>"), "{system}");
    assert!(!system.contains("Approval policy"));
    assert_eq!(msgs.iter().filter(|m| m["role"] == "system").count(), 1);
    // Consecutive user items are one message.
    assert_eq!(msgs[1]["content"].as_array().unwrap().len(), 2);
    // The reasoning summary is replayed as reasoning_content; the second
    // tool turn, which had none, gets DeepSeek's placeholder.
    assert_eq!(msgs[2]["role"], "assistant");
    assert_eq!(msgs[2]["reasoning_content"], "**Planning file creation**");
    assert_eq!(msgs[2]["content"], Value::Null);
    let patch = &msgs[2]["tool_calls"][0];
    assert_eq!(patch["id"], "call_patch1");
    assert_eq!(patch["function"]["name"], "apply_patch");
    let args: Value = serde_json::from_str(patch["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"input": "*** Begin Patch\n*** Add File: hello.txt\n+hi\n*** End Patch\n"}));
    assert_eq!(msgs[3]["role"], "tool");
    assert_eq!(msgs[3]["tool_call_id"], "call_patch1");
    assert_eq!(msgs[4]["reasoning_content"], "tool call");
    assert_eq!(msgs[5], json!({"role": "tool", "tool_call_id": "call_shell1", "content": "hi\n"}));
    let reminder = "<system-reminder>\nApproval policy is now on-request.\n</system-reminder>";
    let last = json!([{"type": "text", "text": reminder}, {"type": "text", "text": "Now delete it."}]);
    assert_eq!(msgs[6], json!({"role": "user", "content": last}));
    assert_eq!(msgs.len(), 7);
    // apply_patch is a function taking `input`, its grammar described.
    let tools = out["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 2, "web_search is hosted and dropped");
    assert_eq!(tools[1]["function"]["name"], "apply_patch");
    assert_eq!(tools[1]["function"]["parameters"]["required"], json!(["input"]));
    assert!(tools[1]["function"]["description"].as_str().unwrap().contains("start: begin_patch"));
    assert!(ctx.custom_tools.contains("apply_patch"));
    // store and include are not sent; usage is asked for.
    assert!(out.get("store").is_none() && out.get("include").is_none());
    assert_eq!(out["stream_options"], json!({"include_usage": true}));
    assert_eq!(out["reasoning_effort"], "medium");
    assert_eq!(out["parallel_tool_calls"], false);
    for field in ["include", "tools[hosted]", "prompt_cache_key"] {
        assert!(dropped(&drops, field), "{field} not reported");
    }
}

#[test]
fn codex_to_messages() {
    let (out, ctx, drops) = go(Responses, Messages, "codex.json", &Profile::default());
    let msgs = out["messages"].as_array().unwrap();
    assert_eq!(msgs[0]["role"], "user");
    assert_eq!(msgs[0]["content"].as_array().unwrap().len(), 2, "consecutive user items merge");
    // OpenAI's encrypted reasoning cannot go to Anthropic; with no signed
    // thinking in the tool loop, thinking is switched off explicitly.
    assert_eq!(msgs[1]["content"][0]["type"], "tool_use");
    assert_eq!(out["thinking"], json!({"type": "disabled"}));
    assert!(dropped(&drops, "reasoning"));
    assert_eq!(
        msgs[1]["content"][0]["input"]["input"],
        "*** Begin Patch\n*** Add File: hello.txt\n+hi\n*** End Patch\n"
    );
    assert_eq!(msgs[2]["content"][0]["type"], "tool_result");
    assert_eq!(msgs[2]["content"][0]["tool_use_id"], "call_patch1");
    let last = msgs.last().unwrap()["content"].as_array().unwrap();
    assert_eq!(last[0]["type"], "tool_result");
    assert_eq!(last[1]["text"], "<system-reminder>\nApproval policy is now on-request.\n</system-reminder>");
    assert_eq!(last[2]["text"], "Now delete it.");
    // Codex sends no max_output_tokens: the profile's default.
    assert_eq!(out["max_tokens"], 8192);
    assert_eq!(out["tool_choice"], json!({"type": "auto", "disable_parallel_tool_use": true}));
    // Cache breakpoints: system, last tool, last two user turns.
    let system = out["system"].as_array().unwrap();
    assert_eq!(system.last().unwrap()["cache_control"], json!({"type": "ephemeral"}));
    assert_eq!(out["tools"].as_array().unwrap().last().unwrap()["cache_control"], json!({"type": "ephemeral"}));
    let marks = out.to_string().matches("cache_control").count();
    assert_eq!(marks, 4);
    assert!(ctx.custom_tools.contains("apply_patch"));
}

#[test]
fn claude_code_to_chat() {
    let (out, ctx, drops) = go(Messages, Chat, "claude_code.json", &Profile::default());
    let msgs = out["messages"].as_array().unwrap();
    assert_eq!(
        msgs[0],
        json!({"role": "system", "content": "You are Claude Code, Anthropic's official CLI for Claude.\n\nYou are an interactive CLI tool that helps users with software engineering tasks."})
    );
    let user = msgs[1]["content"].as_array().unwrap();
    assert_eq!(user[2]["image_url"]["url"], "data:image/png;base64,iVBORw0KGgoAAAANSUhEUg==");
    assert_eq!(msgs[2]["content"], "Let me look.");
    assert!(msgs[2].get("reasoning_content").is_none(), "the generic profile reads no reasoning");
    assert_eq!(msgs[3], json!({"role": "tool", "tool_call_id": "toolu_01Abc", "content": "Error: Permission denied"}));
    let tools = out["tools"].as_array().unwrap();
    assert_eq!(tools[1]["function"]["parameters"], json!({"type": "object", "properties": {}}));
    let long = tools[2]["function"]["name"].as_str().unwrap();
    assert_eq!(long.len(), 64);
    assert_eq!(
        ctx.renamed_tools.get(long).map(String::as_str),
        Some("mcp__github__search_repositories_with_a_really_long_name_that_exceeds_sixty_four_chars")
    );
    assert_eq!(out["reasoning_effort"], "medium", "a 10000-token budget is a medium effort");
    assert_eq!(out["max_tokens"], 32000);
    assert_eq!(out["user"], "user_3f2a9c_account_7e1d_session_5b0e4f");
    for field in ["cache", "reasoning", "reasoning.budget"] {
        assert!(dropped(&drops, field), "{field} not reported");
    }
    assert_eq!(ctx.client_model, "claude-sonnet-4-5-20250929");
}

#[test]
fn claude_code_to_responses() {
    let (out, _, drops) = go(Messages, Responses, "claude_code.json", &Profile::default());
    assert!(out["instructions"].as_str().unwrap().starts_with("You are Claude Code"));
    let input = out["input"].as_array().unwrap();
    assert_eq!(input[0]["content"][2]["type"], "input_image");
    // The Anthropic thinking block is not OpenAI's to replay.
    assert!(input.iter().all(|i| i["type"] != "reasoning"));
    assert!(dropped(&drops, "reasoning"));
    assert_eq!(
        input[1],
        json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Let me look."}]})
    );
    assert_eq!(
        input[2],
        json!({"type": "function_call", "call_id": "toolu_01Abc", "name": "Bash", "arguments": "{\"command\":\"ls\"}"})
    );
    assert_eq!(
        input[3],
        json!({"type": "function_call_output", "call_id": "toolu_01Abc", "output": "Error: Permission denied"})
    );
    assert!(out["tools"].as_array().unwrap().iter().all(|t| t["strict"] == false));
    assert_eq!(out["store"], false);
    assert_eq!(out["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(out["reasoning"], json!({"effort": "medium", "summary": "auto"}));
    assert_eq!(out["max_output_tokens"], 32000);
}

#[test]
fn claude_code_to_gemini() {
    let (out, _, drops) = go(Messages, Gemini, "claude_code.json", &Profile::default());
    assert!(out.get("model").is_none() && out.get("stream").is_none());
    assert_eq!(out["systemInstruction"]["parts"].as_array().unwrap().len(), 2);
    let contents = out["contents"].as_array().unwrap();
    assert_eq!(
        contents[0]["parts"][2]["inlineData"],
        json!({"mimeType": "image/png", "data": "iVBORw0KGgoAAAANSUhEUg=="})
    );
    assert_eq!(contents[1]["role"], "model");
    assert_eq!(contents[1]["parts"][0], json!({"text": "Let me look."}));
    // No Gemini signature in history: the documented sentinel.
    assert_eq!(
        contents[1]["parts"][1],
        json!({"functionCall": {"name": "Bash", "args": {"command": "ls"}}, "thoughtSignature": "skip_thought_signature_validator"})
    );
    assert_eq!(
        contents[2],
        json!({"role": "user", "parts": [{"functionResponse": {"name": "Bash", "response": {"error": "Permission denied"}}}]})
    );
    let decls = out["tools"][0]["functionDeclarations"].as_array().unwrap();
    assert_eq!(
        decls[0]["parameters"],
        json!({"type": "object", "properties": {
            "command": {"type": "string", "description": "The command to execute"},
            "timeout": {"type": "number"},
            "run_in_background": {"type": "boolean", "nullable": true}
        }, "required": ["command"]})
    );
    assert!(decls[1].get("parameters").is_none(), "a tool without arguments declares no parameters");
    assert_eq!(decls[2]["parameters"]["properties"]["q"], json!({"type": "string"}));
    assert_eq!(decls[2]["parameters"]["properties"]["per_page"]["type"], "integer");
    assert!(decls[2]["parameters"]["properties"]["per_page"].get("enum").is_none());
    assert_eq!(
        out["generationConfig"],
        json!({"maxOutputTokens": 32000, "temperature": 1.0, "thinkingConfig": {"thinkingBudget": 10000, "includeThoughts": true}})
    );
    for field in ["reasoning", "user", "cache", "tool_call.id"] {
        assert!(dropped(&drops, field), "{field} not reported");
    }
}

#[test]
fn gemini_cli_to_chat() {
    let (out, _, drops) = go(Gemini, Chat, "gemini_cli.json", &deepseek());
    let msgs = out["messages"].as_array().unwrap();
    assert_eq!(msgs[0]["role"], "system");
    assert_eq!(msgs[2]["reasoning_content"], "I should read the file.");
    let call = &msgs[2]["tool_calls"][0];
    let id = call["id"].as_str().unwrap();
    assert!(id.starts_with("call_"), "a synthesised id: {id}");
    assert_eq!(call["function"]["arguments"], "{\"absolute_path\":\"/home/dev/app/package.json\"}");
    assert_eq!(msgs[3], json!({"role": "tool", "tool_call_id": id, "content": "{\"version\": \"1.2.3\"}"}));
    assert_eq!(msgs[4], json!({"role": "assistant", "content": "The version is 1.2.3."}));
    assert_eq!(out["tools"][1]["function"]["parameters"]["properties"]["path"]["type"], "string");
    assert_eq!((out["temperature"].clone(), out["top_p"].clone()), (json!(0.0), json!(1.0)));
    assert_eq!(out["reasoning_effort"], "medium");
    assert!(dropped(&drops, "safetySettings"));
}

#[test]
fn gemini_cli_to_messages() {
    let (out, _, drops) = go(Gemini, Messages, "gemini_cli.json", &anthropic());
    let msgs = out["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 5);
    let call = &msgs[1]["content"][0];
    assert_eq!(call["type"], "tool_use");
    let result = &msgs[2]["content"][0];
    assert_eq!(result["tool_use_id"], call["id"]);
    assert_eq!(result["content"], "{\"version\": \"1.2.3\"}");
    // Gemini's signatures mean nothing to Anthropic; thinking stays on
    // outside a tool loop, without temperature 0 (Anthropic requires 1).
    assert!(msgs.iter().flat_map(|m| m["content"].as_array().unwrap()).all(|b| b["type"] != "thinking"));
    assert_eq!(out["thinking"], json!({"type": "enabled", "budget_tokens": 4096}));
    assert!(out.get("temperature").is_none());
    assert_eq!(out["top_p"], 1.0);
    for field in ["reasoning", "temperature"] {
        assert!(dropped(&drops, field), "{field} not reported");
    }
    assert_eq!(out["tools"][0]["input_schema"]["properties"]["absolute_path"]["type"], "string");
}

/// §H 9: replaying reasoning toward Anthropic.
#[test]
fn responses_replay_to_messages() {
    let (out, _, _) = go(Responses, Messages, "resp_replay.json", &anthropic());
    let assistant = &out["messages"][1]["content"];
    assert_eq!(
        assistant[0],
        json!({"type": "thinking", "thinking": "I should inspect main.rs first.", "signature": "EqQBCkgIBxABGAIiQanthropic-sig=="})
    );
    assert_eq!(assistant[1]["type"], "tool_use");
    assert_eq!(out["thinking"], json!({"type": "enabled", "budget_tokens": 4096}));
    // Forced tool choice: thinking off, and no thinking blocks sent.
    let mut forced: Value = json(&data("requests/resp_replay.json"));
    forced["tool_choice"] = json!("required");
    let (body, _) =
        translate_request(Responses, Messages, forced.to_string().as_bytes(), &anthropic(), "claude").unwrap();
    let body = json(&body);
    assert_eq!(body["thinking"], json!({"type": "disabled"}));
    assert_eq!(body["messages"][1]["content"][0]["type"], "tool_use");
    assert_eq!(body["tool_choice"], json!({"type": "any"}));
}

/// §H 18: signatures reach only their own family.
#[test]
fn signature_hygiene() {
    // An OpenAI envelope held by Claude Code opens for Responses…
    let (out, _, _) = go(Messages, Responses, "msgs_oai_envelope.json", &Profile::default());
    assert_eq!(
        out["input"][1],
        json!({"type": "reasoning", "id": "rs_9", "summary": [{"type": "summary_text", "text": "Summary of my plan."}],
               "encrypted_content": "gAAAAB_real_openai_encrypted"})
    );
    assert_eq!(out["input"][2]["content"][0]["text"], "Here is the plan.");
    // …its text is replayed to a DeepSeek-style provider, with the
    // unsigned block's…
    let (out, _, _) = go(Messages, Chat, "msgs_oai_envelope.json", &deepseek());
    assert_eq!(out["messages"][1]["reasoning_content"], "Summary of my plan.\n\nunsigned musing");
    // …and it is stripped toward Anthropic, with the empty signature's block.
    let (out, _, drops) = go(Gemini, Messages, "gemini_oai_envelope.json", &anthropic());
    assert_eq!(out["messages"][1]["content"], json!([{"type": "text", "text": "Here is the plan."}]));
    assert!(dropped(&drops, "reasoning"));
    let (out, _, _) = go(Messages, Gemini, "msgs_oai_envelope.json", &Profile::default());
    assert_eq!(out["contents"][1]["parts"], json!([{"text": "Here is the plan."}]));
}

/// §H 17: ids Anthropic would reject become valid, unique and paired.
#[test]
fn tool_call_ids_are_sanitised_in_pairs() {
    let long = format!("fc_{}|{}", "a".repeat(40), "b".repeat(37));
    assert_eq!(long.len(), 81);
    let body = json!({
        "model": "kimi-k2",
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "functions.Bash:0", "type": "function", "function": {"name": "Bash", "arguments": "{}"}},
                {"id": long, "type": "function", "function": {"name": "Bash", "arguments": "{}"}},
                {"id": "functions_Bash_0", "type": "function", "function": {"name": "Bash", "arguments": "{}"}}
            ]},
            {"role": "tool", "tool_call_id": "functions.Bash:0", "content": "one"},
            {"role": "tool", "tool_call_id": long, "content": "two"},
            {"role": "tool", "tool_call_id": "functions_Bash_0", "content": "three"}
        ]
    });
    let (out, _) = translate_request(Chat, Messages, body.to_string().as_bytes(), &anthropic(), "claude").unwrap();
    let out = json(&out);
    let calls: Vec<String> = out["messages"][1]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect();
    let results: Vec<String> = out["messages"][2]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["tool_use_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(calls, results);
    assert_eq!(calls[2], "functions_Bash_0", "valid ids are kept");
    let unique: std::collections::HashSet<&String> = calls.iter().collect();
    assert_eq!(unique.len(), 3);
    for id in &calls {
        assert!(id.len() <= 64 && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'), "{id}");
    }
    assert_eq!(out["messages"][2]["content"][1]["content"], "two");
}

/// §H 22 (profile parts): Groq gets no reasoning field and a string system;
/// a provider without tools refuses an agent; stream_options only where
/// accepted.
#[test]
fn provider_quirks_come_from_the_profile() {
    let groq = Profile { reasoning_effort: false, stream_options: StreamOptions::No, ..Profile::default() };
    let (out, _, drops) = go(Responses, Chat, "codex.json", &groq);
    assert!(out["messages"].as_array().unwrap().iter().all(|m| m.get("reasoning_content").is_none()));
    assert!(out["messages"][0]["content"].is_string());
    assert!(out.get("stream_options").is_none() && out.get("reasoning_effort").is_none());
    assert!(dropped(&drops, "reasoning_effort"));
    let arrays = Profile { system_as_string: false, developer_role: true, ..Profile::default() };
    let (out, _, _) = go(Messages, Chat, "claude_code.json", &arrays);
    assert_eq!(out["messages"][0]["role"], "developer");
    assert_eq!(out["messages"][0]["content"][1]["type"], "text");
    let ollama = Profile { tools: false, ..Profile::default() };
    let err = translate_request(Messages, Chat, &data("requests/claude_code.json"), &ollama, "qwen3").unwrap_err();
    assert_eq!(err.field, "tools");
    assert!(err.reason.contains("does not support tools"));
    // Without tools the same provider is fine.
    assert!(translate_request(Messages, Chat, &data("requests/msgs_params.json"), &ollama, "qwen3").is_ok());
}

/// §H 25: structured output everywhere; Responses tools loose by default.
#[test]
fn structured_output_reaches_every_format() {
    let schema = json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false});
    let (out, _, _) = go(Chat, Messages, "chat_structured.json", &anthropic());
    assert_eq!(out["output_config"], json!({"format": {"type": "json_schema", "schema": schema}}));
    let (out, _, _) = go(Chat, Responses, "chat_structured.json", &Profile::default());
    assert_eq!(out["text"]["format"], json!({"type": "json_schema", "name": "city", "strict": true, "schema": schema}));
    assert_eq!(out["tools"][0]["strict"], false);
    let json_schema = Profile { schema_dialect: SchemaDialect::JsonSchema, ..Profile::default() };
    let (out, _, _) = go(Chat, Gemini, "chat_structured.json", &json_schema);
    assert_eq!(out["generationConfig"]["responseMimeType"], "application/json");
    assert_eq!(out["generationConfig"]["responseJsonSchema"], schema);
    let (out, _, _) = go(Chat, Gemini, "chat_structured.json", &Profile::default());
    assert_eq!(
        out["generationConfig"]["responseSchema"],
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
    );
    // Back the other way, Messages' schema becomes Chat's response_format.
    let body = json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "x"}],
                      "output_config": {"format": {"type": "json_schema", "schema": schema}}});
    let (out, _) = translate_request(Messages, Chat, body.to_string().as_bytes(), &Profile::default(), "m").unwrap();
    assert_eq!(
        json(&out)["response_format"],
        json!({"type": "json_schema", "json_schema": {"name": "response", "schema": schema}})
    );
}

#[test]
fn stateful_and_unanswerable_requests_are_refused() {
    let chained = json!({"model": "gpt-5", "input": "and then?", "previous_response_id": "resp_123"});
    for to in [Chat, Messages, Gemini] {
        let err =
            translate_request(Responses, to, chained.to_string().as_bytes(), &Profile::default(), "m").unwrap_err();
        assert_eq!(err.field, "previous_response_id");
        assert!(err.reason.contains("keep no state"), "{}", err.reason);
    }
    let (out, _) =
        translate_request(Responses, Responses, chained.to_string().as_bytes(), &Profile::default(), "m").unwrap();
    assert_eq!(json(&out)["previous_response_id"], "resp_123");
    let two = json!({"model": "gpt-4.1", "n": 2, "messages": [{"role": "user", "content": "hi"}]});
    for to in [Responses, Messages] {
        let err = translate_request(Chat, to, two.to_string().as_bytes(), &Profile::default(), "m").unwrap_err();
        assert_eq!(err.field, "n");
    }
    let (out, _) = translate_request(Chat, Gemini, two.to_string().as_bytes(), &Profile::default(), "m").unwrap();
    assert_eq!(json(&out)["generationConfig"]["candidateCount"], 2);
    let audio = json!({"model": "gpt-4o", "messages": [{"role": "user", "content": [
        {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}]}]});
    let err = translate_request(Chat, Messages, audio.to_string().as_bytes(), &Profile::default(), "m").unwrap_err();
    assert_eq!(err.field, "messages[0].content[0]");
    let (out, _) = translate_request(Chat, Gemini, audio.to_string().as_bytes(), &Profile::default(), "m").unwrap();
    assert_eq!(json(&out)["contents"][0]["parts"][0]["inlineData"]["mimeType"], "audio/wav");
    let cached =
        json!({"contents": [{"role": "user", "parts": [{"text": "x"}]}], "cachedContent": "cachedContents/abc"});
    let err = translate_request(Gemini, Chat, cached.to_string().as_bytes(), &Profile::default(), "m").unwrap_err();
    assert_eq!(err.field, "cachedContent");
    let video = json!({"contents": [{"role": "user", "parts": [
        {"inlineData": {"mimeType": "video/mp4", "data": "AAAA"}}]}]});
    let err = translate_request(Gemini, Chat, video.to_string().as_bytes(), &Profile::default(), "m").unwrap_err();
    assert!(err.reason.contains("video/mp4"), "{}", err.reason);
    let clip = json!({"contents": [{"role": "user", "parts": [
        {"fileData": {"fileUri": "files/abc", "mimeType": "video/mp4"}, "videoMetadata": {"startOffset": "1s"}}]}]});
    let err = translate_request(Gemini, Responses, clip.to_string().as_bytes(), &Profile::default(), "m").unwrap_err();
    assert_eq!(err.field, "contents[0].parts[0].videoMetadata");
    let bad = translate_request(Chat, Messages, b"{not json", &Profile::default(), "m").unwrap_err();
    assert!(bad.reason.contains("not valid JSON"));
}

#[test]
fn orphans_and_interruptions_never_reach_strict_targets() {
    let body = json!({
        "model": "gpt-4.1",
        "messages": [
            {"role": "tool", "tool_call_id": "call_gone", "content": "stale"},
            {"role": "user", "content": "  "},
            {"role": "user", "content": "start"},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "user", "content": "never mind"}
        ]
    });
    let (out, _) = translate_request(Chat, Gemini, body.to_string().as_bytes(), &Profile::default(), "m").unwrap();
    let out = json(&out);
    let contents = out["contents"].as_array().unwrap();
    assert_eq!(contents.len(), 3);
    assert_eq!(contents[0]["parts"], json!([{"text": "start"}]));
    assert_eq!(
        contents[2]["parts"],
        json!([{"functionResponse": {"name": "f", "response": {"error": "[tool call interrupted]"}}}, {"text": "never mind"}])
    );
}

/// §H 23: the estimate is sane on a real agent body and never fails.
#[test]
fn estimate_counts_system_tools_and_images() {
    let req = decode_request(Messages, &data("requests/claude_code.json")).unwrap();
    let n = estimate_input_tokens(&req);
    let chars = data("requests/claude_code.json").len() as u64;
    // One image is 1600; the rest is about a quarter of the body's text.
    assert!(n > 1600 + chars / 8 && n < 1600 + chars / 2, "{n} for {chars} bytes");
    // Gemini's countTokens body may wrap a whole request.
    let wrapped =
        format!("{{\"generateContentRequest\": {}}}", String::from_utf8(data("requests/gemini_cli.json")).unwrap());
    let inner = decode_request(Gemini, &data("requests/gemini_cli.json")).unwrap();
    assert_eq!(decode_request(Gemini, wrapped.as_bytes()).unwrap(), inner);
    let mut without_tools = req.clone();
    without_tools.tools.clear();
    assert!(estimate_input_tokens(&without_tools) + 50 < n, "tool schemas count");
}

#[test]
fn unknown_fields_pass_only_within_a_family() {
    let body = json!({"model": "m", "messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"enable_thinking": false}});
    let (out, _) = translate_request(Chat, Responses, body.to_string().as_bytes(), &Profile::default(), "m").unwrap();
    assert_eq!(json(&out)["chat_template_kwargs"], json!({"enable_thinking": false}));
    let (encoded, _) = crate::protocol::translate::translate_request_report(
        Chat,
        Messages,
        body.to_string().as_bytes(),
        &Profile::default(),
        "m",
    )
    .unwrap();
    assert!(json(&encoded.body).get("chat_template_kwargs").is_none());
    assert!(dropped(&encoded.drops, "extras"));
}

#[test]
fn long_end_user_ids_are_hashed_for_openai() {
    let user = format!("user_{}_account_{}_session_{}", "a".repeat(64), "b".repeat(36), "c".repeat(36));
    let body = json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "x"}], "metadata": {"user_id": user}});
    let (out, _) =
        translate_request(Messages, Responses, body.to_string().as_bytes(), &Profile::default(), "m").unwrap();
    let sent = json(&out)["user"].as_str().unwrap().to_owned();
    assert!(sent.len() <= 64 && sent.starts_with("u_"), "{sent}");
    let (again, _) = translate_request(Messages, Chat, body.to_string().as_bytes(), &openai(), "m").unwrap();
    let again = json(&again);
    assert_eq!(again["user"], json!(sent), "the same user hashes the same way");
    // The cache key is the session, not the user.
    assert_eq!(again["prompt_cache_key"], json!("c".repeat(36)));
}

/// §B.7 per-model rules: OpenAI's reasoning models get no temperature or
/// top_p (a listed drop); newer Claude models get adaptive thinking with an
/// effort (from the budget when only a budget was asked for); Claude Haiku
/// 4.5 gets a budget even where the profile says adaptive.
#[test]
fn model_rules_correct_the_profile() {
    let report = |from, to, body: &Value, profile: &Profile, model| {
        let (encoded, _) = translate_request_report(from, to, body.to_string().as_bytes(), profile, model).unwrap();
        assert!(encoded.drops.unlisted.is_empty(), "{:?}", encoded.drops.unlisted);
        (json(&encoded.body), encoded.drops)
    };
    let sampled = json!({"model": "claude-x", "max_tokens": 64, "temperature": 0.2, "top_p": 0.9,
                         "messages": [{"role": "user", "content": "hi"}]});
    for model in ["gpt-5", "o3-mini", "openai/gpt-5-mini"] {
        let (out, drops) = report(Messages, Chat, &sampled, &Profile::default(), model);
        assert!(out.get("temperature").is_none() && out.get("top_p").is_none(), "{model}: {out}");
        assert!(dropped(&drops, "sampling"), "{model}");
        let (out, _) = report(Messages, Responses, &sampled, &Profile::default(), model);
        assert!(out.get("temperature").is_none(), "{model}: {out}");
    }
    let (out, drops) = report(Messages, Chat, &sampled, &Profile::default(), "gpt-4.1");
    assert_eq!((out["temperature"].as_f64(), out["top_p"].as_f64()), (Some(0.2), Some(0.9)));
    assert!(!dropped(&drops, "sampling"));

    let effort = json!({"model": "gpt-5", "max_tokens": 40000, "reasoning_effort": "high",
                        "messages": [{"role": "user", "content": "hi"}]});
    let (out, _) = report(Chat, Messages, &effort, &Profile::default(), "claude-opus-4-6");
    assert_eq!(out["thinking"], json!({"type": "adaptive"}));
    assert_eq!(out["output_config"]["effort"], "high");
    let (out, _) = report(Chat, Messages, &effort, &Profile::default(), "claude-sonnet-4-5");
    assert_eq!(out["thinking"], json!({"type": "enabled", "budget_tokens": 16384}));
    let adaptive = Profile { thinking_style: ThinkingStyle::Adaptive, ..Profile::default() };
    let (out, _) = report(Chat, Messages, &effort, &adaptive, "claude-haiku-4-5-20251001");
    assert_eq!(out["thinking"], json!({"type": "enabled", "budget_tokens": 16384}), "Haiku 4.5 takes no adaptive");
    assert!(out.get("output_config").is_none(), "{out}");

    let budget = json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
                        "generationConfig": {"maxOutputTokens": 20000, "thinkingConfig": {"thinkingBudget": 10000}}});
    let (out, drops) = report(Gemini, Messages, &budget, &Profile::default(), "claude-opus-4-6");
    assert_eq!(out["thinking"], json!({"type": "adaptive"}));
    assert_eq!(out["output_config"]["effort"], "medium", "a 10000-token budget is a medium effort");
    assert!(dropped(&drops, "reasoning.budget"));
}

/// Claude Code asks Opus for 32,000 tokens; GPT-4o takes at most 16,384
/// and refuses more outright. The limit is lowered, and the attempt says so.
#[test]
fn an_output_limit_above_the_model_s_is_clamped_with_a_note() {
    let body =
        json!({"model": "claude-opus-4-8", "max_tokens": 32000, "messages": [{"role": "user", "content": "hi"}]});
    let bytes = body.to_string();
    let (encoded, _) = translate_request_report(Messages, Chat, bytes.as_bytes(), &openai(), "gpt-4o").unwrap();
    let sent: Value = serde_json::from_slice(&encoded.body).unwrap();
    assert_eq!(sent["max_completion_tokens"], 16384);
    assert!(
        encoded
            .drops
            .describe()
            .iter()
            .any(|d| d == "max_tokens: clamped from 32000 to 16384, the model's output limit"),
        "{:?}",
        encoded.drops.describe()
    );
    // Within the limit, or for a model the table does not know: unchanged.
    let (encoded, _) = translate_request_report(Messages, Chat, bytes.as_bytes(), &openai(), "gpt-5").unwrap();
    assert_eq!(serde_json::from_slice::<Value>(&encoded.body).unwrap()["max_completion_tokens"], 32000);
    assert!(encoded.drops.describe().iter().all(|d| !d.contains("clamped")));
    let (encoded, _) = translate_request_report(Messages, Chat, bytes.as_bytes(), &openai(), "my-local").unwrap();
    assert_eq!(serde_json::from_slice::<Value>(&encoded.body).unwrap()["max_completion_tokens"], 32000);
    // A profile's own limit wins, for every target.
    let small = Profile { max_output_tokens: Some(1000), ..Profile::default() };
    let (encoded, _) = translate_request_report(Messages, Gemini, bytes.as_bytes(), &small, "gemini-2.5-pro").unwrap();
    let sent: Value = serde_json::from_slice(&encoded.body).unwrap();
    assert_eq!(sent["generationConfig"]["maxOutputTokens"], 1000);
}

/// A Chat client's cache breakpoints on its parts (OpenRouter's convention
/// for Anthropic models) reach a Messages provider as `cache_control`.
#[test]
fn chat_cache_breakpoints_reach_a_messages_provider() {
    let body = json!({"model": "claude", "messages": [
        {"role": "system", "content": [{"type": "text", "text": "long rules", "cache_control": {"type": "ephemeral"}}]},
        {"role": "user", "content": [{"type": "text", "text": "big file", "cache_control": {"type": "ephemeral", "ttl": "1h"}},
                                     {"type": "text", "text": "question"}]}]});
    let (sent, _) =
        translate_request(Chat, Messages, body.to_string().as_bytes(), &anthropic(), "claude-sonnet-4-5").unwrap();
    let sent: Value = serde_json::from_slice(&sent).unwrap();
    assert_eq!(sent["system"][0]["cache_control"], json!({"type": "ephemeral"}), "{sent}");
    let user = &sent["messages"][0]["content"];
    assert_eq!(user[0]["cache_control"], json!({"type": "ephemeral", "ttl": "1h"}), "{sent}");
    assert!(user[1].get("cache_control").is_none(), "{sent}");
}
