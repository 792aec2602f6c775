//! Which session a request belongs to: a coding agent's conversation, made
//! of many requests that each resend a long shared prefix. Taken from what
//! the client says when it says it (Claude Code, Codex, or any client's
//! `x-switchyard-session-id`), else derived from the conversation itself: a
//! digest of its system prompt and first user turn, which every later
//! request of the same conversation resends unchanged.

mod turn;

use std::fmt;
use std::ops::Range;

use http::HeaderMap;
use serde::de::{IgnoredAny, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

/// The header any client may send to name its session. Distinct from the
/// dashboard's sign-in header.
pub const HEADER: &str = "x-switchyard-session-id";
const CLAUDE_CODE: &str = "x-claude-code-session-id";
const CODEX: &str = "session-id";
const CODEX_TURN: &str = "x-codex-turn-metadata";
// As names made once: looking a header up by text parses and hashes the
// text each time.
const NAMED_HEADER: http::HeaderName = http::HeaderName::from_static(HEADER);
const CLAUDE_CODE_HEADER: http::HeaderName = http::HeaderName::from_static(CLAUDE_CODE);
const CODEX_HEADER: http::HeaderName = http::HeaderName::from_static(CODEX);
const CODEX_TURN_HEADER: http::HeaderName = http::HeaderName::from_static(CODEX_TURN);

/// The longest session id kept; a longer one is cut (ids are opaque names,
/// not data, and a row must stay small).
pub const MAX_LEN: usize = 128;

/// A request's session, and where its id came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub id: String,
    pub source: Source,
    /// The request carries more than the conversation's opening (a turn
    /// after the first user one). Always true for an id the client named.
    pub continuing: bool,
}

/// Where a session id came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `x-switchyard-session-id`.
    Named,
    /// Claude Code's `x-claude-code-session-id`.
    ClaudeCode,
    /// Codex's `session-id` header or its turn metadata.
    Codex,
    /// The body's `prompt_cache_key` (Codex, OpenAI SDK users).
    PromptCacheKey,
    /// A digest of the system prompt and the first user turn.
    Conversation,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Named => "named",
            Source::ClaudeCode => "claude_code",
            Source::Codex => "codex",
            Source::PromptCacheKey => "prompt_cache_key",
            Source::Conversation => "conversation",
        }
    }
}

impl Session {
    /// Whether the session steers routing: keeps its key and provider, and
    /// its reasoning is checked for its owner. An id the client named
    /// does; a digest does once the conversation has gone on. A script
    /// that sends the same lone prompt again and again is not a
    /// conversation, and its requests spread and fall back as any others.
    pub fn steers(&self) -> bool {
        self.source != Source::Conversation || self.continuing
    }

    /// The session's point for choosing among a provider's keys
    /// ([`crate::upstream::keys`]): the same on every instance and release.
    pub fn affinity(&self) -> u64 {
        fnv1a(FNV_START, self.id.as_bytes())
    }
}

impl fmt::Display for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.id)
    }
}

/// The session of a request with these headers and a body whose head
/// says `conversation` of it; `None` for a body that carries no
/// conversation at all.
pub fn identify(headers: &HeaderMap, conversation: &Conversation, body: &[u8]) -> Option<Session> {
    let named = |name: &http::HeaderName, source: Source| {
        header_id(headers, name).map(|id| Session { id, source, continuing: true })
    };
    named(&NAMED_HEADER, Source::Named)
        .or_else(|| named(&CLAUDE_CODE_HEADER, Source::ClaudeCode))
        .or_else(|| named(&CODEX_HEADER, Source::Codex))
        .or_else(|| codex_turn(headers).map(|id| Session { id, source: Source::Codex, continuing: true }))
        .or_else(|| conversation.session(body))
}

/// A header's value as an id: printable ASCII, trimmed, cut to [`MAX_LEN`].
fn header_id(headers: &HeaderMap, name: &http::HeaderName) -> Option<String> {
    clean(headers.get(name)?.to_str().ok()?)
}

fn clean(raw: &str) -> Option<String> {
    let id: String = raw.trim().chars().filter(|c| c.is_ascii_graphic()).take(MAX_LEN).collect();
    (!id.is_empty()).then_some(id)
}

/// The `session_id` in Codex's `x-codex-turn-metadata` JSON.
fn codex_turn(headers: &HeaderMap) -> Option<String> {
    #[derive(Deserialize)]
    struct Turn<'a> {
        #[serde(borrow)]
        session_id: Option<std::borrow::Cow<'a, str>>,
    }
    let raw = headers.get(&CODEX_TURN_HEADER)?.to_str().ok()?;
    clean(&serde_json::from_str::<Turn<'_>>(raw).ok()?.session_id?)
}

/// What a body says of its conversation, read in the same pass as the
/// rest of its head ([`crate::proxy::body`]): where its system prompt and
/// first user turn are, and its cache key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Conversation {
    cache_key: Option<String>,
    system: Option<Range<usize>>,
    first_user: Option<Range<usize>>,
    /// A turn follows the first user one.
    continuing: bool,
    /// The newest message is the user's own input ([`turn`]).
    turn: Option<bool>,
}

/// Each format's fields that say which conversation a body is, borrowed
/// from it. Deserialised by the body's head ([`crate::proxy::body`]).
#[derive(Default)]
pub(crate) struct Said<'a> {
    pub prompt_cache_key: Option<std::borrow::Cow<'a, str>>,
    /// Messages' `system`, Responses' `instructions`, Gemini's `systemInstruction`.
    pub system: Option<&'a RawValue>,
    /// Messages' and Chat's `messages`, Gemini's `contents`.
    pub messages: Option<Opening<'a>>,
    /// Responses' `input`: a string, or items.
    pub input: Option<&'a RawValue>,
}

impl Said<'_> {
    /// Where what was said sits in `text`, the body it was read from.
    pub(crate) fn locate(self, text: &str) -> Conversation {
        let opening = match (self.messages, self.input) {
            (Some(turns), _) => turns,
            (None, Some(input)) => opening_of_input(input),
            (None, None) => Opening::default(),
        };
        // A borrowed RawValue is a slice of `text`, so its offset is its position.
        let span = |raw: &RawValue| {
            let start = raw.get().as_ptr() as usize - text.as_ptr() as usize;
            start..start + raw.get().len()
        };
        Conversation {
            cache_key: self.prompt_cache_key.as_deref().and_then(clean),
            system: self.system.or(opening.system).map(span),
            first_user: opening.user.map(span),
            continuing: opening.more,
            turn: opening.newest.is_turn(),
        }
    }
}

impl Conversation {
    /// Whether the request is a turn of its conversation: its newest
    /// message (a system one aside) is the user's own input, not an agent's
    /// follow-up with tool results. `None` for a body without turns.
    pub fn turn(&self) -> Option<bool> {
        self.turn
    }

    /// The session the body names (`prompt_cache_key`) or implies: a
    /// digest of its opening, made only when asked for.
    fn session(&self, body: &[u8]) -> Option<Session> {
        if let Some(id) = &self.cache_key {
            return Some(Session { id: id.clone(), source: Source::PromptCacheKey, continuing: true });
        }
        if self.first_user.is_none() && self.system.is_none() {
            return None;
        }
        // FNV-1a: fixed, so every instance and release names a conversation
        // alike, and cheap (a few instructions a byte; SHA-256 cost more
        // than the rest of reading the request). A grouping key, not a secret.
        let mut hash = FNV_START;
        for part in [&self.system, &self.first_user] {
            let bytes = part.as_ref().and_then(|r| body.get(r.clone())).unwrap_or(b"-");
            // A separator per part, so that moving text between them changes the digest.
            hash = fnv1a(fnv1a(hash, bytes), b"\x00");
        }
        Some(Session { id: format!("conv-{hash:016x}"), source: Source::Conversation, continuing: self.continuing })
    }
}

/// The first turn of a list whose role is `user` (items without a role,
/// as Responses' plain strings, count as the user's), and the first whose
/// role is `system` or `developer` (Chat and Responses keep the system
/// prompt among the turns).
pub(crate) struct Opening<'a> {
    system: Option<&'a RawValue>,
    user: Option<&'a RawValue>,
    /// A turn follows the first user one.
    more: bool,
    /// What the newest turn that is not a system one says of its writer.
    newest: turn::Said,
}

impl Default for Opening<'_> {
    fn default() -> Self {
        Opening { system: None, user: None, more: false, newest: turn::Said::Other }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Opening<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Opening<'a>, D::Error> {
        struct Seek;
        impl<'de> Visitor<'de> for Seek {
            type Value = Opening<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of turns")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Opening<'de>, A::Error> {
                let mut found = Opening::default();
                // Up to the first user turn, each is kept whole (the digest
                // reads it) and then read for its role; after it, each is
                // read for its role alone, as it goes by.
                while let Some(raw) = seq.next_element::<&'de RawValue>()? {
                    let turn = read_turn(raw);
                    found.see(turn);
                    if turn.user {
                        found.user = Some(raw);
                        break;
                    }
                    if turn.system && found.system.is_none() {
                        found.system = Some(raw);
                    }
                }
                while let Some(turn) = seq.next_element::<turn::Turn>()? {
                    found.more = found.user.is_some();
                    found.see(turn);
                }
                Ok(found)
            }
            // Anything but a list (a client's mistake, which the
            // translator names later) holds no turns.
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Opening<'de>, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Opening::default())
            }
            fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<Opening<'de>, E> {
                Ok(Opening::default())
            }
            fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Opening<'de>, E> {
                Ok(Opening::default())
            }
            fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Opening<'de>, E> {
                Ok(Opening::default())
            }
            fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Opening<'de>, E> {
                Ok(Opening::default())
            }
            fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Opening<'de>, E> {
                Ok(Opening::default())
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<Opening<'de>, E> {
                Ok(Opening::default())
            }
        }
        d.deserialize_any(Seek)
    }
}

impl Opening<'_> {
    /// Keeps what a turn says of its writer, unless it is a system one.
    fn see(&mut self, turn: turn::Turn) {
        if turn.said != turn::Said::System {
            self.newest = turn.said;
        }
    }
}

/// A turn kept whole, read for its role (a plain string is the user's).
fn read_turn(raw: &RawValue) -> turn::Turn {
    serde_json::from_str::<turn::Turn>(raw.get()).unwrap_or(turn::Turn {
        said: turn::Said::Other,
        user: false,
        system: false,
    })
}

const FNV_START: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a over `bytes`, from `hash`: fixed everywhere, a few instructions a byte.
fn fnv1a(hash: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(hash, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// Responses' `input`: the string itself, or its opening items.
fn opening_of_input(input: &RawValue) -> Opening<'_> {
    if input.get().starts_with('"') {
        return Opening { system: None, user: Some(input), more: false, newest: turn::Said::Own };
    }
    serde_json::from_str::<Opening<'_>>(input.get()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        pairs.iter().map(|(k, v)| (http::HeaderName::from_static(k), v.parse().unwrap())).collect()
    }

    fn session(h: &HeaderMap, body: &str) -> Option<Session> {
        let bytes = body.as_bytes();
        let head = crate::proxy::body::inspect(bytes)
            .or_else(|_| crate::proxy::body::inspect_with_model(bytes, "m", false))
            .unwrap();
        identify(h, &head.conversation, body.as_bytes())
    }

    fn id(h: &HeaderMap, body: &str) -> Option<(String, Source)> {
        session(h, body).map(|s| (s.id, s.source))
    }

    #[test]
    fn a_client_s_own_id_comes_first() {
        let body = r#"{"model":"m","prompt_cache_key":"pck","messages":[{"role":"user","content":"hi"}]}"#;
        let all =
            headers(&[(HEADER, "mine"), (CLAUDE_CODE, "cc"), (CODEX, "cx"), (CODEX_TURN, r#"{"session_id":"turn"}"#)]);
        assert_eq!(id(&all, body), Some(("mine".into(), Source::Named)));
        assert_eq!(id(&headers(&[(CLAUDE_CODE, " cc-1 ")]), body), Some(("cc-1".into(), Source::ClaudeCode)));
        assert_eq!(id(&headers(&[(CODEX, "cx")]), body), Some(("cx".into(), Source::Codex)));
        let turn = headers(&[(CODEX_TURN, r#"{"turn_id":"t","session_id":"s-9"}"#)]);
        assert_eq!(id(&turn, body), Some(("s-9".into(), Source::Codex)));
        assert_eq!(id(&HeaderMap::new(), body), Some(("pck".into(), Source::PromptCacheKey)));
    }

    #[test]
    fn ids_are_printable_and_bounded() {
        let long = "x".repeat(500);
        let got = id(&headers(&[(HEADER, &long)]), "{}").unwrap().0;
        assert_eq!(got.len(), MAX_LEN);
        // Blank or unreadable: the next source is used.
        assert_eq!(id(&headers(&[(HEADER, "  ")]), "{}"), None);
        assert_eq!(id(&headers(&[(CODEX_TURN, "not json")]), "{}"), None);
    }

    #[test]
    fn a_conversation_keeps_its_id_as_it_grows() {
        let first = r#"{"model":"m","system":"be brief","messages":[{"role":"user","content":"fix the bug"}]}"#;
        let later = r#"{"model":"m","system":"be brief","max_tokens":9,"messages":[
            {"role":"user","content":"fix the bug"},{"role":"assistant","content":"done"},
            {"role":"user","content":"thanks"}]}"#;
        let other = r#"{"model":"m","system":"be brief","messages":[{"role":"user","content":"new task"}]}"#;
        let none = HeaderMap::new();
        let (a, source) = id(&none, first).unwrap();
        assert_eq!(source, Source::Conversation);
        assert!(!session(&none, first).unwrap().steers(), "a lone opening is no conversation yet");
        assert!(session(&none, later).unwrap().steers());
        assert!(session(&headers(&[(HEADER, "s")]), first).unwrap().steers());
        assert!(a.starts_with("conv-"), "{a}");
        assert_eq!(id(&none, later).unwrap().0, a);
        assert_ne!(id(&none, other).unwrap().0, a);
    }

    #[test]
    fn each_format_s_system_and_first_turn_count() {
        let none = HeaderMap::new();
        // Chat: the system message is passed over for the first user one.
        let chat = |sys: &str| {
            format!(
                r#"{{"model":"m","messages":[{{"role":"system","content":"{sys}"}},{{"role":"user","content":"q"}}]}}"#
            )
        };
        assert_eq!(id(&none, &chat("a")), id(&none, &chat("a")));
        assert_ne!(id(&none, &chat("a")).unwrap().0, id(&none, &chat("b")).unwrap().0);
        // Gemini: contents and systemInstruction, either spelling.
        let g1 =
            r#"{"systemInstruction":{"parts":[{"text":"s"}]},"contents":[{"role":"user","parts":[{"text":"q"}]}]}"#;
        let g2 = r#"{"contents":[{"role":"user","parts":[{"text":"q"}]},{"role":"model","parts":[{"text":"a"}]}],"system_instruction":{"parts":[{"text":"s"}]}}"#;
        assert_eq!(id(&none, g1).unwrap().0, id(&none, g2).unwrap().0);
        // Responses: instructions and a string or item input.
        let r1 = r#"{"model":"m","instructions":"i","input":"q"}"#;
        let r2 = r#"{"model":"m","instructions":"i","input":[{"role":"user","content":"q"}]}"#;
        assert!(id(&none, r1).is_some());
        assert!(id(&none, r2).is_some());
        assert_ne!(id(&none, r1), id(&none, r2));
        // Nothing conversational: no session.
        assert_eq!(id(&none, r#"{"model":"m","input":[]}"#), None);
        assert_eq!(id(&none, r#"{"model":"m"}"#), None);
    }
}
