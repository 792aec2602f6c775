//! The cache key: SHA-256 over a canonical form of the request, so the same
//! question asked by two tools (which order, space and decorate their JSON
//! differently) finds the same entry, and a different question does not.
//!
//! # What is hashed
//!
//! `"switchyard-cache/1"`, the wire format ([`Wire::as_str`]), the model the
//! client asked for (length-prefixed), then the body in canonical form.
//! Request headers are not part of the key.
//!
//! # What the canonical form normalises
//!
//! Everywhere in the body:
//! - whitespace between tokens is removed;
//! - object members are sorted (by their canonical key text), duplicates kept;
//! - strings are re-escaped minimally: `\"`, `\\`, `\b \f \n \r \t` and
//!   `\u00XX` for other control characters; every other character (`/`,
//!   non-ASCII, U+2028) raw, so `"\u00e9"` and `"é"` are the same string;
//! - numbers: an integer stays as written (`-0` is `0`); a number with a
//!   fraction or an exponent is read as an `f64` and written as an integer
//!   when it is one below 2^53, else in Rust's shortest round-trip form, so
//!   `0`, `0.0` and `0e0` are the same, as are `1.50` and `1.5`.
//!
//! At the top level of the body:
//! - removed, because they do not change the answer: `model` (hashed
//!   separately, since Gemini puts it in the path), `stream`, `stream_options`,
//!   `user`, `metadata`, `safety_identifier`, `prompt_cache_key`,
//!   `prompt_cache_retention`, `store`, `service_tier`, `request_id`,
//!   `user_prompt_id`, `labels`;
//! - members whose value is `null` are removed (clients that serialise every
//!   unset field send `null` for what others leave out).
//!
//! In the conversation, meaning each message and each of its content parts:
//! chat and messages `messages[]`, responses `input[]` items, gemini
//! `contents[]` and `systemInstruction`, messages `system[]` blocks, and the
//! parts of `content[]` / `parts[]` inside them (tool results' nested
//! `content[]` included):
//! - the strings of `content` and `text` members have their leading and
//!   trailing whitespace (Unicode `White_Space`) trimmed, and so do the
//!   top-level `system` (messages) and `instructions` and string `input`
//!   (responses);
//! - `cache_control` members (Anthropic prompt-cache breakpoints, which
//!   clients move from turn to turn) and `null` members are removed.
//!
//! Not normalised, on purpose: tool definitions and JSON schemas (a `null`
//! there can be a schema's default), tool-call arguments, embeddings and
//! completions `input`/`prompt` (their trailing space changes the tokens),
//! and every other member, which is kept with its value in canonical form.
//!
//! # Facts for the cache's admission
//!
//! The same pass notes what [`Facts::admit`] needs: the sampling
//! temperature (top level, or gemini `generationConfig.temperature`),
//! whether the conversation holds a tool call or a tool result, and whether
//! the answer depends on state kept by the provider (responses
//! `previous_response_id`, `conversation`, a stored `prompt`, `background`).
//!
//! # Cost
//!
//! One pass over the bytes, no `serde_json::Value` tree; buffers grow once
//! per [`Hasher`] and are reused. See the `key_cost` test (ignored; run it
//! with `--ignored --nocapture` in a release build) for the figure.

use std::ops::Range;

use ring::digest;

use crate::protocol::Endpoint;

/// A wire format whose answers may be cached. Gemini's two generating
/// endpoints share one: streaming is its method, not part of the question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Wire {
    Chat,
    Completions,
    Responses,
    Messages,
    Embeddings,
    Gemini,
}

impl Wire {
    /// The cacheable wire format of a gateway endpoint (token counting is
    /// free and instant upstream: not worth a cache entry). For Gemini the
    /// model is in the path: key it with the path's model.
    pub fn of(endpoint: Endpoint) -> Option<Wire> {
        match endpoint {
            Endpoint::ChatCompletions => Some(Wire::Chat),
            Endpoint::Completions => Some(Wire::Completions),
            Endpoint::Responses => Some(Wire::Responses),
            Endpoint::Messages => Some(Wire::Messages),
            Endpoint::Embeddings => Some(Wire::Embeddings),
            Endpoint::GeminiGenerate | Endpoint::GeminiStream => Some(Wire::Gemini),
            Endpoint::CountTokens | Endpoint::GeminiCountTokens => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Wire::Chat => "chat",
            Wire::Completions => "completions",
            Wire::Responses => "responses",
            Wire::Messages => "messages",
            Wire::Embeddings => "embeddings",
            Wire::Gemini => "gemini",
        }
    }

    /// Whether a request that names no temperature is sampled. Every
    /// generating API defaults to a temperature of about 1 (OpenAI 1,
    /// Anthropic 1.0, Gemini 1.0 for its current models), so only an
    /// explicit 0 is deterministic; embeddings have no sampling at all.
    fn samples(self) -> bool {
        !matches!(self, Wire::Embeddings)
    }
}

/// A cache key: the SHA-256 of the canonical request.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CacheKey(pub [u8; 32]);

impl CacheKey {
    /// The first eight bytes, for the store's in-memory index.
    pub fn prefix(&self) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.0[..8]);
        u64::from_le_bytes(b)
    }

    pub fn hex(&self) -> String {
        use std::fmt::Write as _;
        self.0.iter().fold(String::with_capacity(64), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
    }
}

impl std::fmt::Debug for CacheKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CacheKey({})", &self.hex()[..16])
    }
}

/// What the canonical pass noticed about a request.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Facts {
    /// The sampling temperature asked for, when given as a number.
    pub temperature: Option<f64>,
    /// The conversation holds a tool call or a tool result.
    pub tool_turns: bool,
    /// The answer depends on state the provider keeps.
    pub stateful: bool,
}

/// Why a request is not stored by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Sampled with randomness: no temperature of 0.
    Sampled,
    /// An agent's turn: its answer depends on what the tools found.
    ToolTurns,
    /// The provider's own state (a previous response, a conversation) is part of the question.
    Stateful,
}

impl Refusal {
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Sampled => "sampled",
            Refusal::ToolTurns => "tool_turns",
            Refusal::Stateful => "stateful",
        }
    }
}

impl Facts {
    /// Whether the answer may be cached: deterministic (see
    /// [`Wire::samples`]) unless `sampled` allows any temperature, without
    /// tool turns unless `tools` allows them, and never stateful.
    pub fn admit(&self, wire: Wire, sampled: bool, tools: bool) -> Result<(), Refusal> {
        if self.stateful {
            return Err(Refusal::Stateful);
        }
        if self.tool_turns && !tools {
            return Err(Refusal::ToolTurns);
        }
        let deterministic = !wire.samples() || self.temperature == Some(0.0);
        if !deterministic && !sampled {
            return Err(Refusal::Sampled);
        }
        Ok(())
    }
}

/// A request the cache can look up.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Keyed {
    pub key: CacheKey,
    pub facts: Facts,
}

/// A body that cannot be put in canonical form: such a request is not cached.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot key the request body: {0}")]
pub struct KeyError(&'static str);

/// Computes keys, reusing its buffers from one request to the next. Cheap
/// to create; [`key`] makes one per call.
#[derive(Debug, Default)]
pub struct Hasher {
    out: Vec<u8>,
    scratch: Vec<u8>,
    text: String,
    members: Vec<Member>,
}

/// The key of `body` (a JSON object) sent to `wire` for `model`.
pub fn key(wire: Wire, model: &str, body: &[u8]) -> Result<Keyed, KeyError> {
    Hasher::default().key(wire, model, body)
}

impl Hasher {
    pub fn key(&mut self, wire: Wire, model: &str, body: &[u8]) -> Result<Keyed, KeyError> {
        let facts = self.canonical(wire, model, body)?;
        let digest = digest::digest(&digest::SHA256, &self.out);
        let mut key = [0u8; 32];
        key.copy_from_slice(digest.as_ref());
        Ok(Keyed { key: CacheKey(key), facts })
    }

    /// Writes the canonical form into `self.out`.
    fn canonical(&mut self, wire: Wire, model: &str, body: &[u8]) -> Result<Facts, KeyError> {
        // Checked once, so strings can be trimmed as text.
        std::str::from_utf8(body).map_err(|_| KeyError("not UTF-8"))?;
        self.out.clear();
        self.out.extend_from_slice(b"switchyard-cache/1\n");
        self.out.extend_from_slice(wire.as_str().as_bytes());
        self.out.push(b'\n');
        self.out.extend_from_slice(&(model.len() as u64).to_le_bytes());
        self.out.extend_from_slice(model.as_bytes());
        self.out.push(b'\n');
        self.members.clear();
        let mut c = Canon {
            src: body,
            pos: 0,
            out: &mut self.out,
            scratch: &mut self.scratch,
            text: &mut self.text,
            members: &mut self.members,
            wire,
            facts: Facts::default(),
            depth: 0,
        };
        c.ws();
        if c.peek() != Some(b'{') {
            return Err(KeyError("not a JSON object"));
        }
        c.object(Ctx::Top)?;
        c.ws();
        if c.pos != body.len() {
            return Err(KeyError("trailing bytes after the object"));
        }
        Ok(c.facts)
    }

    /// The canonical form of the last key computed, for tests.
    #[cfg(test)]
    fn last(&self) -> String {
        String::from_utf8_lossy(&self.out).into_owned()
    }
}

/// Where a value sits, which decides how it is normalised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ctx {
    /// The body itself.
    Top,
    /// A message or conversation item.
    Message,
    /// A content part of a message.
    Part,
    /// Gemini's `generationConfig`.
    Generation,
    /// Anything else: canonical form only.
    Verbatim,
}

impl Ctx {
    fn drops_nulls(self) -> bool {
        !matches!(self, Ctx::Verbatim)
    }
}

/// How a member's value is treated: the context of an object value, of an
/// array's elements, and whether a string value is trimmed.
#[derive(Debug, Clone, Copy)]
struct Slot {
    object: Ctx,
    elements: Ctx,
    trim: bool,
}

const VERBATIM: Slot = Slot { object: Ctx::Verbatim, elements: Ctx::Verbatim, trim: false };
const TRIMMED: Slot = Slot { object: Ctx::Verbatim, elements: Ctx::Verbatim, trim: true };
const MESSAGES: Slot = Slot { object: Ctx::Verbatim, elements: Ctx::Message, trim: false };
/// A string that is content (trimmed), or an array of content parts.
const CONTENT: Slot = Slot { object: Ctx::Verbatim, elements: Ctx::Part, trim: true };

/// What the member's key asks for.
#[derive(Debug, Clone, Copy)]
enum Rule {
    Drop,
    Keep(Slot),
    /// Kept, and its value tells something about the request.
    Note(Slot, Note),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Note {
    Temperature,
    /// A message's `role`: `tool` and `function` are tool results.
    Role,
    /// An item's or part's `type`: tool calls and results have their own.
    Type,
    /// Present (and not null, nor an empty array) means a tool turn.
    ToolTurn,
    /// Present and not null means provider state (`true` for `background`).
    State,
}

/// Top-level members that do not change the answer.
const IGNORED: &[&[u8]] = &[
    b"model",
    b"stream",
    b"stream_options",
    b"user",
    b"metadata",
    b"safety_identifier",
    b"prompt_cache_key",
    b"prompt_cache_retention",
    b"store",
    b"service_tier",
    b"request_id",
    b"user_prompt_id",
    b"labels",
];

fn rule(wire: Wire, ctx: Ctx, key: &[u8]) -> Rule {
    match ctx {
        Ctx::Top => top_rule(wire, key),
        Ctx::Message | Ctx::Part => match key {
            b"cache_control" => Rule::Drop,
            b"content" => Rule::Keep(CONTENT),
            b"text" => Rule::Keep(TRIMMED),
            b"parts" => Rule::Keep(Slot { object: Ctx::Verbatim, elements: Ctx::Part, trim: false }),
            b"role" if ctx == Ctx::Message => Rule::Note(VERBATIM, Note::Role),
            b"type" => Rule::Note(VERBATIM, Note::Type),
            b"tool_calls" | b"function_call" | b"tool_call_id" | b"functionCall" | b"functionResponse"
            | b"function_response" => Rule::Note(VERBATIM, Note::ToolTurn),
            _ => Rule::Keep(VERBATIM),
        },
        Ctx::Generation => match key {
            b"temperature" => Rule::Note(VERBATIM, Note::Temperature),
            _ => Rule::Keep(VERBATIM),
        },
        Ctx::Verbatim => Rule::Keep(VERBATIM),
    }
}

fn top_rule(wire: Wire, key: &[u8]) -> Rule {
    if IGNORED.contains(&key) {
        return Rule::Drop;
    }
    let message = Slot { object: Ctx::Message, elements: Ctx::Verbatim, trim: false };
    match (wire, key) {
        (_, b"temperature") => Rule::Note(VERBATIM, Note::Temperature),
        (Wire::Chat | Wire::Messages, b"messages") => Rule::Keep(MESSAGES),
        (Wire::Messages, b"system") => Rule::Keep(CONTENT),
        (Wire::Responses, b"input") => Rule::Keep(Slot { trim: true, ..MESSAGES }),
        (Wire::Responses, b"instructions") => Rule::Keep(TRIMMED),
        (Wire::Responses, b"previous_response_id" | b"conversation" | b"prompt" | b"background") => {
            Rule::Note(VERBATIM, Note::State)
        }
        (Wire::Gemini, b"contents") => Rule::Keep(MESSAGES),
        (Wire::Gemini, b"systemInstruction" | b"system_instruction") => Rule::Keep(message),
        (Wire::Gemini, b"generationConfig" | b"generation_config") => {
            Rule::Keep(Slot { object: Ctx::Generation, ..VERBATIM })
        }
        _ => Rule::Keep(VERBATIM),
    }
}

/// An object member written to `out`: its key text (between the quotes)
/// and the whole member (`"key":value`, without the comma before it).
#[derive(Debug, Clone)]
struct Member {
    key: Range<usize>,
    span: Range<usize>,
}

/// Deep enough for any real request; deeper is refused, not recursed into.
const MAX_DEPTH: u32 = 128;

struct Canon<'a> {
    src: &'a [u8],
    pos: usize,
    out: &'a mut Vec<u8>,
    scratch: &'a mut Vec<u8>,
    text: &'a mut String,
    members: &'a mut Vec<Member>,
    wire: Wire,
    facts: Facts,
    depth: u32,
}

type Step = Result<(), KeyError>;

impl Canon<'_> {
    fn peek(&self) -> Option<u8> {
        self.src.get(self.pos).copied()
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn expect(&mut self, b: u8) -> Step {
        if self.peek() == Some(b) {
            self.pos += 1;
            Ok(())
        } else {
            Err(KeyError("malformed JSON"))
        }
    }

    fn value(&mut self, slot: Slot) -> Step {
        self.ws();
        match self.peek() {
            Some(b'{') => self.object(slot.object),
            Some(b'[') => self.array(slot.elements),
            Some(b'"') => self.string(slot.trim),
            Some(b't') => self.literal(b"true"),
            Some(b'f') => self.literal(b"false"),
            Some(b'n') => self.literal(b"null"),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(KeyError("malformed JSON")),
        }
    }

    fn literal(&mut self, word: &'static [u8]) -> Step {
        if !self.src[self.pos..].starts_with(word) {
            return Err(KeyError("malformed JSON"));
        }
        self.pos += word.len();
        self.out.extend_from_slice(word);
        Ok(())
    }

    fn enter(&mut self) -> Step {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(KeyError("nested too deeply"));
        }
        Ok(())
    }

    fn array(&mut self, elements: Ctx) -> Step {
        self.enter()?;
        self.expect(b'[')?;
        self.out.push(b'[');
        // Elements are objects in every array the rules name; a string
        // among them is kept as it is.
        let slot = Slot { object: elements, elements: Ctx::Verbatim, trim: false };
        self.ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
        } else {
            loop {
                self.value(slot)?;
                self.ws();
                match self.peek() {
                    Some(b',') => {
                        self.pos += 1;
                        self.out.push(b',');
                    }
                    Some(b']') => {
                        self.pos += 1;
                        break;
                    }
                    _ => return Err(KeyError("malformed JSON")),
                }
            }
        }
        self.out.push(b']');
        self.depth -= 1;
        Ok(())
    }

    fn object(&mut self, ctx: Ctx) -> Step {
        self.enter()?;
        self.expect(b'{')?;
        let start = self.out.len();
        self.out.push(b'{');
        let base = self.members.len();
        self.ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
        } else {
            loop {
                self.member(ctx, base)?;
                self.ws();
                match self.peek() {
                    Some(b',') => self.pos += 1,
                    Some(b'}') => {
                        self.pos += 1;
                        break;
                    }
                    _ => return Err(KeyError("malformed JSON")),
                }
                self.ws();
            }
        }
        self.sort_members(start, base);
        self.members.truncate(base);
        self.out.push(b'}');
        self.depth -= 1;
        Ok(())
    }

    /// One `"key": value`, written with a comma before it unless it is the
    /// object's first, or left out.
    fn member(&mut self, ctx: Ctx, base: usize) -> Step {
        let before = self.out.len();
        if self.members.len() > base {
            self.out.push(b',');
        }
        let key_start = self.out.len();
        if self.peek() != Some(b'"') {
            return Err(KeyError("malformed JSON"));
        }
        self.string(false)?;
        let key = key_start + 1..self.out.len() - 1;
        self.ws();
        self.expect(b':')?;
        self.out.push(b':');
        let rule = rule(self.wire, ctx, &self.out[key.clone()]);
        let value_start = self.out.len();
        let (slot, note) = match rule {
            Rule::Drop => (VERBATIM, None),
            Rule::Keep(slot) => (slot, None),
            Rule::Note(slot, note) => (slot, Some(note)),
        };
        self.value(slot)?;
        let value = &self.out[value_start..];
        let null = value == b"null";
        if matches!(rule, Rule::Drop) || (null && ctx.drops_nulls()) {
            self.out.truncate(before);
            return Ok(());
        }
        if let Some(note) = note {
            self.note(note, value_start);
        }
        self.members.push(Member { key, span: key_start..self.out.len() });
        Ok(())
    }

    fn note(&mut self, note: Note, value_start: usize) {
        let value = &self.out[value_start..];
        match note {
            Note::Temperature => {
                self.facts.temperature = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok());
            }
            Note::Role => self.facts.tool_turns |= value == b"\"tool\"" || value == b"\"function\"",
            Note::Type => self.facts.tool_turns |= is_tool_type(value),
            Note::ToolTurn => self.facts.tool_turns |= value != b"[]",
            Note::State => self.facts.stateful |= value != b"false",
        }
    }

    /// Puts the members written since `start` in key order, with commas.
    fn sort_members(&mut self, start: usize, base: usize) {
        let members = &mut self.members[base..];
        let out = &*self.out;
        if members.windows(2).all(|w| out[w[0].key.clone()] <= out[w[1].key.clone()]) {
            return;
        }
        members.sort_by(|a, b| out[a.key.clone()].cmp(&out[b.key.clone()]));
        self.scratch.clear();
        self.scratch.extend_from_slice(&self.out[start + 1..]);
        self.out.truncate(start + 1);
        let offset = start + 1;
        for (i, m) in members.iter().enumerate() {
            if i > 0 {
                self.out.push(b',');
            }
            self.out.extend_from_slice(&self.scratch[m.span.start - offset..m.span.end - offset]);
        }
    }

    /// A string, re-escaped minimally, its surrounding whitespace trimmed
    /// when `trim`.
    fn string(&mut self, trim: bool) -> Step {
        self.expect(b'"')?;
        let start = self.pos;
        let mut i = start;
        let end = loop {
            match memchr::memchr2(b'"', b'\\', &self.src[i..]) {
                Some(at) if self.src[i + at] == b'"' => break i + at,
                Some(at) => i += at + 2,
                None => return Err(KeyError("unterminated string")),
            }
            if i > self.src.len() {
                return Err(KeyError("unterminated string"));
            }
        };
        self.pos = end + 1;
        let raw = &self.src[start..end];
        let plain = !raw.contains(&b'\\');
        if plain && !raw.iter().any(|b| *b < 0x20) {
            let raw = if trim { trim_text(raw) } else { raw };
            self.out.push(b'"');
            self.out.extend_from_slice(raw);
            self.out.push(b'"');
            return Ok(());
        }
        decode(raw, self.text)?;
        let text = if trim { self.text.trim() } else { self.text.as_str() };
        write_string(self.out, text);
        Ok(())
    }

    fn number(&mut self) -> Step {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        let mut integer = true;
        while let Some(b) = self.peek() {
            match b {
                b'0'..=b'9' => {}
                b'.' | b'e' | b'E' | b'+' | b'-' => integer = false,
                _ => break,
            }
            self.pos += 1;
        }
        let raw = &self.src[start..self.pos];
        if integer {
            match raw {
                b"-" => return Err(KeyError("malformed number")),
                b"-0" => self.out.push(b'0'),
                _ => self.out.extend_from_slice(raw),
            }
            return Ok(());
        }
        let text = std::str::from_utf8(raw).map_err(|_| KeyError("malformed number"))?;
        let x: f64 = text.parse().map_err(|_| KeyError("malformed number"))?;
        if !x.is_finite() {
            return Err(KeyError("number out of range"));
        }
        use std::io::Write as _;
        let written = if x.fract() == 0.0 && x.abs() < 9_007_199_254_740_992.0 {
            write!(self.out, "{}", x as i64)
        } else {
            write!(self.out, "{x}")
        };
        written.map_err(|_| KeyError("number"))
    }
}

/// A tool call's or tool result's `type`, in any format: Anthropic
/// `tool_use`, `tool_result`, `server_tool_use`, `web_search_tool_result`,
/// `mcp_tool_use`...; Responses `function_call`, `function_call_output`,
/// `custom_tool_call`, `computer_call_output`, `mcp_call`...
fn is_tool_type(value: &[u8]) -> bool {
    let Some(t) = value.strip_prefix(b"\"").and_then(|v| v.strip_suffix(b"\"")) else { return false };
    t.ends_with(b"tool_use")
        || t.ends_with(b"tool_result")
        || t.ends_with(b"_call")
        || t.ends_with(b"_call_output")
        || t.starts_with(b"mcp_")
}

/// `raw` (valid UTF-8, no escapes) without surrounding whitespace.
fn trim_text(raw: &[u8]) -> &[u8] {
    let ascii = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c);
    let edges_ascii = raw.first().is_none_or(|b| b.is_ascii()) && raw.last().is_none_or(|b| b.is_ascii());
    if edges_ascii {
        let start = raw.iter().position(|b| !ascii(b)).unwrap_or(raw.len());
        let end = raw.iter().rposition(|b| !ascii(b)).map_or(start, |i| i + 1);
        return &raw[start..end];
    }
    // A multi-byte character at an edge: Unicode's rules decide.
    match std::str::from_utf8(raw) {
        Ok(text) => text.trim().as_bytes(),
        Err(_) => raw,
    }
}

/// Decodes a JSON string's content (between the quotes) into `into`.
fn decode(raw: &[u8], into: &mut String) -> Step {
    into.clear();
    let bad = KeyError("malformed string escape");
    let mut i = 0;
    while i < raw.len() {
        let Some(at) = memchr::memchr(b'\\', &raw[i..]) else {
            into.push_str(std::str::from_utf8(&raw[i..]).map_err(|_| KeyError("not UTF-8"))?);
            break;
        };
        into.push_str(std::str::from_utf8(&raw[i..i + at]).map_err(|_| KeyError("not UTF-8"))?);
        i += at + 1;
        let c = match raw.get(i) {
            Some(b'"') => '"',
            Some(b'\\') => '\\',
            Some(b'/') => '/',
            Some(b'b') => '\u{8}',
            Some(b'f') => '\u{c}',
            Some(b'n') => '\n',
            Some(b'r') => '\r',
            Some(b't') => '\t',
            Some(b'u') => {
                let high = hex4(raw.get(i + 1..i + 5)).ok_or(KeyError("malformed string escape"))?;
                i += 4;
                let code = if (0xD800..0xDC00).contains(&high) {
                    let low = match raw.get(i + 1..i + 3) {
                        Some(b"\\u") => hex4(raw.get(i + 3..i + 7)),
                        _ => None,
                    };
                    let low = low.filter(|l| (0xDC00..0xE000).contains(l)).ok_or(KeyError("lone surrogate"))?;
                    i += 6;
                    0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)
                } else {
                    high
                };
                char::from_u32(code).ok_or(KeyError("lone surrogate"))?
            }
            _ => return Err(bad),
        };
        into.push(c);
        i += 1;
    }
    Ok(())
}

fn hex4(digits: Option<&[u8]>) -> Option<u32> {
    let digits = std::str::from_utf8(digits?).ok()?;
    u32::from_str_radix(digits, 16).ok()
}

/// `text` as a JSON string with minimal escapes.
fn write_string(out: &mut Vec<u8>, text: &str) {
    out.push(b'"');
    let bytes = text.as_bytes();
    let mut from = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0..=0x1f => b"",
            _ => continue,
        };
        out.extend_from_slice(&bytes[from..i]);
        if escape.is_empty() {
            out.extend_from_slice(format!("\\u{b:04x}").as_bytes());
        } else {
            out.extend_from_slice(escape);
        }
        from = i + 1;
    }
    out.extend_from_slice(&bytes[from..]);
    out.push(b'"');
}

#[cfg(test)]
#[path = "key_tests.rs"]
mod tests;
