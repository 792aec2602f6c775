//! Whether a request is a turn of its conversation: its newest message is
//! the user's own input, not an agent's follow-up that hands back the
//! results of the tools it called. Read in the one pass over the turns
//! that finds the conversation's opening ([`super::Opening`]), each turn
//! as a few borrowed fields: no second parse of the body, no allocation
//! per turn.
//!
//! Per format, the newest turn that is not a system one (Claude Code puts
//! `system` messages among its turns, aider ends with a reminder):
//! - Messages: a `user` message is a turn unless it holds a `tool_result`
//!   block. Claude Code adds text beside its tool results (reminders, its
//!   compaction instruction), so "only tool results" would count those as
//!   turns.
//! - Chat: `user` is a turn; `tool` and `function` are follow-ups.
//! - Responses: a `user` message (or a plain string) is a turn; an item of
//!   another `type` (`function_call_output`, `custom_tool_call_output`, …)
//!   is not.
//! - Gemini: a `user` content is a turn unless a part is a
//!   `functionResponse`.
//!
//! An assistant's message as the newest (a prefill) is no user input.

use std::borrow::Cow;
use std::fmt;

use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};

/// What one turn of a list says of who wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Said {
    /// The user's own input.
    Own,
    /// An agent's follow-up (tool results), or the assistant's own words.
    FollowUp,
    /// A system or developer message: passed over.
    System,
    /// Not a turn at all (a number, a list).
    Other,
}

impl Said {
    /// Whether a request whose newest turn is this one is a turn of the
    /// conversation; `None` when it says nothing.
    pub(crate) fn is_turn(self) -> Option<bool> {
        match self {
            Said::Own => Some(true),
            Said::FollowUp => Some(false),
            Said::System | Said::Other => None,
        }
    }
}

/// One turn, read by its role, its `type` and whether its content holds a
/// tool's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Turn {
    pub said: Said,
    /// Its role is `user` or it has none (the digest's notion of the
    /// user's turn, which these fields leave as it was).
    pub user: bool,
    /// Its role is `system` or `developer`.
    pub system: bool,
}

impl<'de> Deserialize<'de> for Turn {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Turn, D::Error> {
        d.deserialize_any(TurnVisitor)
    }
}

struct TurnVisitor;

/// The members of a turn that are read; the rest are stepped over.
#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "snake_case")]
enum Field {
    Role,
    Type,
    #[serde(alias = "parts")]
    Content,
    #[serde(other)]
    Other,
}

impl<'de> Visitor<'de> for TurnVisitor {
    type Value = Turn;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a turn")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Turn, A::Error> {
        let (mut role, mut kind, mut tool_result) = (None::<Cow<'de, str>>, None::<Cow<'de, str>>, false);
        while let Some(field) = map.next_key::<Field>()? {
            match field {
                Field::Role => role = map.next_value::<Text<'de>>()?.0,
                Field::Type => kind = map.next_value::<Text<'de>>()?.0,
                Field::Content => tool_result = map.next_value::<ToolResult>()?.0,
                Field::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let role = role.as_deref();
        let user = matches!(role, None | Some("user"));
        let system = matches!(role, Some("system" | "developer"));
        let said = if system {
            Said::System
        } else if kind.as_deref().is_some_and(|k| k != "message") {
            Said::FollowUp
        } else if user && !tool_result {
            Said::Own
        } else {
            Said::FollowUp
        };
        Ok(Turn { said, user, system })
    }
    /// A plain string turn is the user's.
    fn visit_str<E>(self, _: &str) -> Result<Turn, E> {
        Ok(Turn { said: Said::Own, user: true, system: false })
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Turn, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Turn::OTHER)
    }
    fn visit_bool<E>(self, _: bool) -> Result<Turn, E> {
        Ok(Turn::OTHER)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Turn, E> {
        Ok(Turn::OTHER)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Turn, E> {
        Ok(Turn::OTHER)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Turn, E> {
        Ok(Turn::OTHER)
    }
    fn visit_unit<E>(self) -> Result<Turn, E> {
        Ok(Turn::OTHER)
    }
}

impl Turn {
    const OTHER: Turn = Turn { said: Said::Other, user: false, system: false };
}

/// A string member, borrowed when it has no escapes; anything else reads
/// as absent.
struct Text<'a>(Option<Cow<'a, str>>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Text<'de>, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Some(Cow::Borrowed(s))))
            }
            fn visit_str<E>(self, s: &str) -> Result<Text<'de>, E> {
                Ok(Text(Some(Cow::Owned(s.to_string()))))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Text<'de>, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Text(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Text<'de>, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Text(None))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Text<'de>, E> {
                Ok(Text(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Text<'de>, E> {
                Ok(Text(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Text<'de>, E> {
                Ok(Text(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Text<'de>, E> {
                Ok(Text(None))
            }
            fn visit_unit<E>(self) -> Result<Text<'de>, E> {
                Ok(Text(None))
            }
        }
        d.deserialize_any(V)
    }
}

/// Whether a turn's content (Messages' `content`, Gemini's `parts`) holds
/// a tool's result: a `tool_result` block or a `functionResponse` part.
struct ToolResult(bool);

impl<'de> Deserialize<'de> for ToolResult {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ToolResult, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ToolResult;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a turn's content")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ToolResult, A::Error> {
                let mut found = false;
                while let Some(block) = seq.next_element::<Block>()? {
                    found |= block.0;
                }
                Ok(ToolResult(found))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ToolResult, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(ToolResult(false))
            }
            fn visit_str<E>(self, _: &str) -> Result<ToolResult, E> {
                Ok(ToolResult(false))
            }
            fn visit_bool<E>(self, _: bool) -> Result<ToolResult, E> {
                Ok(ToolResult(false))
            }
            fn visit_i64<E>(self, _: i64) -> Result<ToolResult, E> {
                Ok(ToolResult(false))
            }
            fn visit_u64<E>(self, _: u64) -> Result<ToolResult, E> {
                Ok(ToolResult(false))
            }
            fn visit_f64<E>(self, _: f64) -> Result<ToolResult, E> {
                Ok(ToolResult(false))
            }
            fn visit_unit<E>(self) -> Result<ToolResult, E> {
                Ok(ToolResult(false))
            }
        }
        d.deserialize_any(V)
    }
}

/// One block of content: whether it is a tool's result.
struct Block(bool);

impl<'de> Deserialize<'de> for Block {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Block, D::Error> {
        #[derive(Deserialize)]
        #[serde(field_identifier)]
        enum Key {
            #[serde(rename = "type")]
            Type,
            #[serde(rename = "functionResponse", alias = "function_response")]
            FunctionResponse,
            #[serde(other)]
            Other,
        }
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Block;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a content block")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Block, A::Error> {
                let mut found = false;
                while let Some(key) = map.next_key::<Key>()? {
                    match key {
                        Key::Type => found |= map.next_value::<Text<'de>>()?.0.as_deref() == Some("tool_result"),
                        Key::FunctionResponse => {
                            map.next_value::<IgnoredAny>()?;
                            found = true;
                        }
                        Key::Other => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(Block(found))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Block, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Block(false))
            }
            fn visit_str<E>(self, _: &str) -> Result<Block, E> {
                Ok(Block(false))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Block, E> {
                Ok(Block(false))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Block, E> {
                Ok(Block(false))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Block, E> {
                Ok(Block(false))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Block, E> {
                Ok(Block(false))
            }
            fn visit_unit<E>(self) -> Result<Block, E> {
                Ok(Block(false))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    /// A request the real client sent (the translation corpus), read by
    /// the body's head as the gateway reads it.
    fn turn_of(fixture: &str) -> Option<bool> {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("src/protocol/translate/testdata/corpus")
            .join(format!("{fixture}.json"));
        let captured: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let body = serde_json::to_vec(&captured["body"]).unwrap();
        let head = crate::proxy::body::inspect(&body)
            .or_else(|_| crate::proxy::body::inspect_with_model(&body, "m", false))
            .unwrap();
        head.conversation.turn()
    }

    /// A tool round trip is one turn and two or more requests: the
    /// client's prompt, then its tool results.
    #[test]
    fn real_clients_tool_round_trips_are_one_turn() {
        for (prompt, follow_ups) in [
            ("claude-code/read-tool-1", &["claude-code/read-tool-2"][..]),
            ("claude-code/read-tool-opus-4-8-1", &["claude-code/read-tool-opus-4-8-2"]),
            ("claude-code/web-search-1", &["claude-code/web-search-3"]),
            ("claude-code/subagent-3", &["claude-code/subagent-4", "claude-code/subagent-5"]),
            ("codex/exec-command-1", &["codex/exec-command-2"]),
            ("codex/apply-patch-1", &["codex/apply-patch-2"]),
            ("gemini-cli/read-file-1", &["gemini-cli/read-file-2"]),
            ("gemini-cli/read-file-auto-2", &["gemini-cli/read-file-auto-3"]),
            ("openai-python/openai-chat-tools-1", &["openai-python/openai-chat-tools-2"]),
            ("openai-python/openai-responses-tools-1", &["openai-python/openai-responses-tools-2"]),
            ("anthropic-python/anthropic-messages-tools-1", &["anthropic-python/anthropic-messages-tools-2"]),
            ("google-genai-python/genai-tools-1", &["google-genai-python/genai-tools-2"]),
        ] {
            assert_eq!(turn_of(prompt), Some(true), "{prompt}: the user's prompt");
            for f in follow_ups {
                assert_eq!(turn_of(f), Some(false), "{f}: tool results");
            }
        }
    }

    /// Turns after the first, and prompts followed by a system message.
    #[test]
    fn later_prompts_are_turns_and_system_messages_are_passed_over() {
        for fixture in [
            "claude-code/first-turn",
            "claude-code/continue",
            "claude-code/compacted-continue",
            "claude-code/model-opus-4-8",
            "codex/first-turn",
            "codex/resume",
            "gemini-cli/first-turn",
            "openai-python/openai-chat",
            "openai-python/openai-responses",
        ] {
            assert_eq!(turn_of(fixture), Some(true), "{fixture}");
        }
    }

    #[test]
    fn each_format_s_follow_ups() {
        let head = |body: &str| crate::proxy::body::inspect(body.as_bytes()).unwrap().conversation.turn();
        let chat = r#"{"model":"m","messages":[{"role":"user","content":"q"},{"role":"assistant","tool_calls":[]},{"role":"tool","content":"42"}]}"#;
        assert_eq!(head(chat), Some(false));
        let prefill = r#"{"model":"m","messages":[{"role":"user","content":"q"},{"role":"assistant","content":"{"}]}"#;
        assert_eq!(head(prefill), Some(false), "an assistant's prefill is no user input");
        let escaped = r#"{"model":"m","messages":[{"role":"us\u0065r","content":[{"type":"tool_r\u0065sult"}]}]}"#;
        assert_eq!(head(escaped), Some(false), "escaped names read as written");
        assert_eq!(head(r#"{"model":"m","input":[]}"#), None, "no turns");
        assert_eq!(head(r#"{"model":"m","messages":"odd"}"#), None);
        assert_eq!(head(r#"{"model":"m","prompt":"q"}"#), None, "not a conversation");
    }
}
