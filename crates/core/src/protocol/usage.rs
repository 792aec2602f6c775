//! Token usage, read from what the provider sends: JSON bodies and event
//! streams of each protocol, incrementally, never buffering a whole stream.
//!
//! For OpenAI-kind chat streams whose client did not ask for usage, the
//! gateway asks upstream (`stream_options.include_usage`) and strips the
//! extra usage chunk and the `"usage":null` fields before the client sees
//! them, so the client's stream is unchanged and spend is still counted.

use bytes::{Bytes, BytesMut};
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::protocol::sse::{self, Splitter};
use crate::protocol::Endpoint;

/// Tokens of one reply. `None` means the provider did not say.
///
/// In JSON it is an object of its fields. In a compact binary form (the
/// history spool's postcard) it is the three counts it had before cache
/// writes were read: the spool carries a record's cache writes after the
/// record instead, so that frames of every version keep reading (see
/// `history/spool.rs`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Usage {
    /// All input tokens, cached ones (read and written) included.
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    /// Input tokens read from the provider's prompt cache.
    pub cached_tokens: Option<u64>,
    /// Input tokens written to the provider's prompt cache (Anthropic's
    /// `cache_creation_input_tokens`, OpenRouter's `cache_write_tokens`);
    /// OpenAI and Gemini report none.
    pub cache_write_tokens: Option<u64>,
}

/// Two counts as one: added, unknown only where both are.
pub fn add(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
    }
}

impl Usage {
    /// Two attempts' usage as one: each count added, unknown only where
    /// both are.
    pub fn plus(&self, other: &Usage) -> Usage {
        Usage {
            input_tokens: add(self.input_tokens, other.input_tokens),
            output_tokens: add(self.output_tokens, other.output_tokens),
            cached_tokens: add(self.cached_tokens, other.cached_tokens),
            cache_write_tokens: add(self.cache_write_tokens, other.cache_write_tokens),
        }
    }
}

/// [`Usage`] as JSON has it.
#[derive(Serialize, Deserialize)]
struct UsageJson {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cached_tokens: Option<u64>,
    #[serde(default)]
    cache_write_tokens: Option<u64>,
}

impl Serialize for Usage {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            UsageJson {
                input_tokens: self.input_tokens,
                output_tokens: self.output_tokens,
                cached_tokens: self.cached_tokens,
                cache_write_tokens: self.cache_write_tokens,
            }
            .serialize(s)
        } else {
            (self.input_tokens, self.output_tokens, self.cached_tokens).serialize(s)
        }
    }
}

impl<'de> Deserialize<'de> for Usage {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Usage, D::Error> {
        if d.is_human_readable() {
            let u = UsageJson::deserialize(d)?;
            Ok(Usage {
                input_tokens: u.input_tokens,
                output_tokens: u.output_tokens,
                cached_tokens: u.cached_tokens,
                cache_write_tokens: u.cache_write_tokens,
            })
        } else {
            let (input_tokens, output_tokens, cached_tokens) = Deserialize::deserialize(d)?;
            Ok(Usage { input_tokens, output_tokens, cached_tokens, cache_write_tokens: None })
        }
    }
}

impl Usage {
    pub fn is_known(&self) -> bool {
        self.input_tokens.is_some() || self.output_tokens.is_some()
    }

    /// The counts as SQLite stores them (input, output, cached): a signed
    /// integer, or unknown for one too large to be. Cache writes are a
    /// column of their own ([`Usage::cache_write_column`]), on history's
    /// rows only.
    pub fn columns(&self) -> [Option<i64>; 3] {
        [column(self.input_tokens), column(self.output_tokens), column(self.cached_tokens)]
    }

    /// Cache writes as history stores them.
    pub fn cache_write_column(&self) -> Option<i64> {
        column(self.cache_write_tokens)
    }

    /// Read back from [`Usage::columns`]; a negative count is unknown.
    pub fn from_columns([input, output, cached]: [Option<i64>; 3]) -> Usage {
        Usage {
            input_tokens: count(input),
            output_tokens: count(output),
            cached_tokens: count(cached),
            cache_write_tokens: None,
        }
    }

    /// With the cache writes read back from their column.
    pub fn with_cache_writes(self, written: Option<i64>) -> Usage {
        Usage { cache_write_tokens: count(written), ..self }
    }

    /// Later readings win field by field (Anthropic sends input first, output last).
    fn merge(&mut self, other: Usage) {
        self.input_tokens = other.input_tokens.or(self.input_tokens);
        self.output_tokens = other.output_tokens.or(self.output_tokens);
        self.cached_tokens = other.cached_tokens.or(self.cached_tokens);
        self.cache_write_tokens = other.cache_write_tokens.or(self.cache_write_tokens);
    }
}

fn column(v: Option<u64>) -> Option<i64> {
    v.and_then(|n| i64::try_from(n).ok())
}

fn count(v: Option<i64>) -> Option<u64> {
    v.and_then(|n| u64::try_from(n).ok())
}

/// A `usage` object of any protocol, read without building a tree: each
/// protocol fills some of these members and the rest stay absent.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Raw {
    prompt_tokens: Count,
    completion_tokens: Count,
    prompt_tokens_details: Details,
    input_tokens: Count,
    output_tokens: Count,
    input_tokens_details: Details,
    cache_read_input_tokens: Count,
    cache_creation_input_tokens: Count,
    #[serde(rename = "promptTokenCount")]
    prompt_token_count: Count,
    #[serde(rename = "toolUsePromptTokenCount")]
    tool_use_prompt_token_count: Count,
    #[serde(rename = "candidatesTokenCount")]
    candidates_token_count: Count,
    #[serde(rename = "thoughtsTokenCount")]
    thoughts_token_count: Count,
    #[serde(rename = "cachedContentTokenCount")]
    cached_content_token_count: Count,
}

/// `*_tokens_details`: its cached count, and its cache writes
/// (`cache_write_tokens`: OpenRouter reports them for models that bill
/// writes, and the gateway writes them into a whole answer it translated
/// from Anthropic's, which is read in the client's format). Like
/// [`Count`], anything but an object reads as "did not say".
#[derive(Debug, Default, Clone, Copy)]
struct Details {
    cached_tokens: Count,
    cache_write_tokens: Count,
}

/// A token count: a non-negative integer, or nothing. Anything else a
/// provider puts there (null, a string, a float) reads as "did not say",
/// without failing the rest of the object.
#[derive(Debug, Default, Clone, Copy)]
struct Count(Option<u64>);

/// The visitor methods for the values a field does not expect: each is
/// read (and skipped) as the field's "did not say".
macro_rules! unexpected_reads_as_default {
    ($t:ty) => {
        fn visit_i64<E>(self, _: i64) -> Result<$t, E> {
            Ok(<$t>::default())
        }
        fn visit_f64<E>(self, _: f64) -> Result<$t, E> {
            Ok(<$t>::default())
        }
        fn visit_bool<E>(self, _: bool) -> Result<$t, E> {
            Ok(<$t>::default())
        }
        fn visit_str<E>(self, _: &str) -> Result<$t, E> {
            Ok(<$t>::default())
        }
        fn visit_unit<E>(self) -> Result<$t, E> {
            Ok(<$t>::default())
        }
        fn visit_none<E>(self) -> Result<$t, E> {
            Ok(<$t>::default())
        }
        fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<$t, D::Error> {
            d.deserialize_any(self)
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<$t, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(<$t>::default())
        }
    };
}

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Count, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Count;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a token count")
            }
            fn visit_u64<E>(self, n: u64) -> Result<Count, E> {
                Ok(Count(Some(n)))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Count, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Count(None))
            }
            unexpected_reads_as_default!(Count);
        }
        d.deserialize_any(Visitor)
    }
}

impl<'de> Deserialize<'de> for Details {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Details, D::Error> {
        #[derive(Deserialize)]
        #[serde(field_identifier, rename_all = "snake_case")]
        enum Field {
            CachedTokens,
            CacheWriteTokens,
            #[serde(other)]
            Other,
        }
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Details;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("token count details")
            }
            fn visit_u64<E>(self, _: u64) -> Result<Details, E> {
                Ok(Details::default())
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Details, A::Error> {
                let mut details = Details::default();
                while let Some(field) = map.next_key::<Field>()? {
                    match field {
                        Field::CachedTokens => details.cached_tokens = map.next_value()?,
                        Field::CacheWriteTokens => details.cache_write_tokens = map.next_value()?,
                        Field::Other => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(details)
            }
            unexpected_reads_as_default!(Details);
        }
        d.deserialize_any(Visitor)
    }
}

impl Raw {
    /// OpenAI Chat Completions, Completions and Embeddings `usage`.
    fn openai(&self) -> Usage {
        let input = self.prompt_tokens.0;
        Usage {
            input_tokens: input,
            output_tokens: self.completion_tokens.0.or(input.map(|_| 0)),
            cached_tokens: self.prompt_tokens_details.cached_tokens.0,
            cache_write_tokens: self.prompt_tokens_details.cache_write_tokens.0,
        }
    }

    /// OpenAI Responses `usage`.
    fn responses(&self) -> Usage {
        Usage {
            input_tokens: self.input_tokens.0,
            output_tokens: self.output_tokens.0,
            cached_tokens: self.input_tokens_details.cached_tokens.0,
            cache_write_tokens: self.input_tokens_details.cache_write_tokens.0,
        }
    }

    /// Anthropic `usage`: input excludes cache reads and writes, so add them.
    fn anthropic(&self) -> Usage {
        let read = self.cache_read_input_tokens.0;
        let written = self.cache_creation_input_tokens.0;
        Usage {
            // Saturating: the counts are the provider's, and may be anything.
            input_tokens: self
                .input_tokens
                .0
                .map(|b| b.saturating_add(read.unwrap_or(0)).saturating_add(written.unwrap_or(0))),
            output_tokens: self.output_tokens.0,
            cached_tokens: read,
            cache_write_tokens: written,
        }
    }

    /// Gemini `usageMetadata`: the prompt includes cached and tool-use
    /// prompt tokens; the output is the candidates' tokens plus thoughts.
    fn gemini(&self) -> Usage {
        let prompt = self.prompt_token_count.0;
        let input = prompt.map(|p| p.saturating_add(self.tool_use_prompt_token_count.0.unwrap_or(0)));
        let candidates = self.candidates_token_count.0;
        let thoughts = self.thoughts_token_count.0;
        let output = match (candidates, thoughts) {
            (None, None) => input.map(|_| 0),
            (c, t) => Some(c.unwrap_or(0).saturating_add(t.unwrap_or(0))),
        };
        Usage {
            input_tokens: input,
            output_tokens: output,
            cached_tokens: self.cached_content_token_count.0,
            cache_write_tokens: None,
        }
    }

    fn of(&self, endpoint: Endpoint) -> Usage {
        match endpoint {
            Endpoint::ChatCompletions | Endpoint::Completions | Endpoint::Embeddings => self.openai(),
            Endpoint::Responses => self.responses(),
            Endpoint::Messages => self.anthropic(),
            Endpoint::GeminiGenerate | Endpoint::GeminiStream => self.gemini(),
            // Counting tokens is free and uses no tokens.
            Endpoint::CountTokens | Endpoint::GeminiCountTokens => Usage::default(),
        }
    }
}

/// Usage from a complete JSON response body. Only the top-level `usage`
/// member is parsed; the rest (the reply itself, often most of the bytes)
/// is stepped over by [`member`], which is a few times cheaper than having
/// a parser validate what it then ignores.
pub fn from_body(endpoint: Endpoint, body: &[u8]) -> Usage {
    let key: &[u8] = match endpoint.protocol() {
        crate::protocol::Protocol::Gemini => b"usageMetadata",
        _ => b"usage",
    };
    let Some(value) = member(body, key) else { return Usage::default() };
    match Option::<Raw>::deserialize(&mut serde_json::Deserializer::from_slice(value)) {
        Ok(Some(raw)) => raw.of(endpoint),
        _ => Usage::default(),
    }
}

/// Where the value of the member `key` of the top-level JSON object starts.
/// Strings are stepped over whole, escapes included, and nesting is counted,
/// so a `key` inside a string or a nested object is not mistaken for it. A
/// key spelled with escapes is not recognised: providers write plain names.
fn member<'a>(body: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    if body.trim_ascii_start().first() != Some(&b'{') {
        return None;
    }
    let (mut depth, mut at_key, mut i) = (0usize, false, 0);
    while let Some(&b) = body.get(i) {
        match b {
            b'"' => {
                let end = string_end(body, i + 1)?;
                if depth == 1 && at_key {
                    if &body[i + 1..end] == key {
                        return body[end + 1..].trim_ascii_start().strip_prefix(b":");
                    }
                    at_key = false;
                }
                i = end;
            }
            b'{' => {
                depth += 1;
                at_key = depth == 1;
            }
            b'[' => depth += 1,
            b'}' | b']' => depth = depth.checked_sub(1)?,
            b',' if depth == 1 => at_key = true,
            _ => {}
        }
        i += 1;
    }
    None
}

/// The index of the quote that closes the string whose content starts at
/// `i`. The reply's text is most of a body's bytes, so strings are crossed
/// by `memchr`, several bytes at a time.
pub(crate) fn string_end(body: &[u8], mut i: usize) -> Option<usize> {
    loop {
        i += memchr::memchr2(b'"', b'\\', body.get(i..)?)?;
        match body[i] {
            b'"' => return Some(i),
            _ => i += 2,
        }
    }
}

/// Reads a `usage` member of an already parsed event.
fn read(usage: &Value, endpoint: Endpoint) -> Option<Usage> {
    let raw = Raw::deserialize(usage).ok()?;
    Some(raw.of(endpoint))
}

/// Usage carried by one stream event, if any.
fn from_event(endpoint: Endpoint, data: &Value) -> Option<Usage> {
    let usage = match endpoint {
        Endpoint::ChatCompletions | Endpoint::Completions => data.get("usage"),
        Endpoint::Responses => data.pointer("/response/usage"),
        Endpoint::Messages => data.pointer("/message/usage").or_else(|| data.get("usage")),
        // Cumulative on each chunk: the last one seen wins.
        Endpoint::GeminiGenerate | Endpoint::GeminiStream => data.get("usageMetadata"),
        Endpoint::Embeddings | Endpoint::CountTokens | Endpoint::GeminiCountTokens => None,
    };
    read(usage.filter(|u| u.is_object())?, endpoint)
}

/// What an answer says of itself: its id, the model that wrote it, and
/// why it stopped (per choice or candidate), in whichever format it came.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Answer {
    pub id: Option<String>,
    pub model: Option<String>,
    pub finish_reasons: Vec<String>,
}

impl Answer {
    /// Takes what `v` (a whole body, or one event of a stream) says; a
    /// stream's later events win.
    pub fn read(&mut self, v: &Value) {
        // The answer itself, or the object a stream's event wraps it in
        // (Responses' `response`, Anthropic's `message_start`).
        for at in [Some(v), v.get("response"), v.get("message")].into_iter().flatten() {
            let text = |key: &str| at.get(key).and_then(Value::as_str).map(str::to_string);
            if let Some(id) = text("id").or_else(|| text("responseId")) {
                self.id = Some(id);
            }
            if let Some(model) = text("model").or_else(|| text("modelVersion")) {
                self.model = Some(model);
            }
        }
        let mut reasons: Vec<String> = Vec::new();
        for (list, key) in [("choices", "finish_reason"), ("candidates", "finishReason")] {
            let found = v.get(list).and_then(Value::as_array).into_iter().flatten();
            reasons.extend(found.filter_map(|c| c.get(key)?.as_str().map(str::to_string)));
        }
        let single = [v.get("stop_reason"), v.pointer("/delta/stop_reason"), v.pointer("/response/status")];
        reasons.extend(single.into_iter().flatten().filter_map(|r| r.as_str().map(str::to_string)));
        if v.get("object").and_then(Value::as_str) == Some("response") {
            reasons.extend(v.get("status").and_then(Value::as_str).map(str::to_string));
        }
        if !reasons.is_empty() {
            self.finish_reasons = reasons;
        }
    }
}

/// The members of a whole answer that say what it is, every other member
/// skipped unread (a body is mostly its text: building it as a `Value`
/// would cost more than the rest of the request).
#[derive(Deserialize)]
struct Described<'a> {
    #[serde(borrow, default)]
    id: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default, rename = "responseId")]
    response_id: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    model: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default, rename = "modelVersion")]
    model_version: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    object: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    status: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    stop_reason: Option<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    choices: Vec<Finish<'a>>,
    #[serde(default)]
    candidates: Vec<Finish<'a>>,
}

/// A choice's or a candidate's finish, the rest of it skipped.
#[derive(Deserialize)]
struct Finish<'a> {
    #[serde(borrow, default, alias = "finishReason")]
    finish_reason: Option<std::borrow::Cow<'a, str>>,
}

impl Answer {
    /// Takes what a whole JSON answer says.
    fn read_body(&mut self, body: &[u8]) {
        let Ok(d) = serde_json::from_slice::<Described<'_>>(body) else { return };
        let text = |v: Option<std::borrow::Cow<'_, str>>| v.map(std::borrow::Cow::into_owned);
        self.id = text(d.id.or(d.response_id)).or(self.id.take());
        self.model = text(d.model.or(d.model_version)).or(self.model.take());
        let mut reasons: Vec<String> =
            d.choices.into_iter().chain(d.candidates).filter_map(|c| text(c.finish_reason)).collect();
        reasons.extend(text(d.stop_reason));
        if d.object.as_deref() == Some("response") {
            reasons.extend(text(d.status));
        }
        if !reasons.is_empty() {
            self.finish_reasons = reasons;
        }
    }
}

/// Watches a response body go by and reads its usage.
#[derive(Debug)]
pub struct Tap {
    endpoint: Endpoint,
    mode: Mode,
    usage: Usage,
    /// What the answer says of itself, read only when asked for (a traced request).
    answer: Option<Box<Answer>>,
    /// A copy of the first bytes, kept only when bodies are stored.
    kept: Option<(Vec<u8>, usize)>,
}

#[derive(Debug)]
enum Mode {
    /// A JSON body: kept up to a limit, parsed at the end.
    Json { buf: Vec<u8>, overflow: bool },
    /// A JSON body whose usage has been read: what follows is passed on
    /// unread (nothing does: it is read once the body has ended).
    Read,
    /// An event stream, read event by event.
    Events { splitter: Splitter, strip_usage: bool, out: BytesMut },
}

/// Longest JSON body read for usage; larger ones are relayed unread.
const MAX_JSON_BODY: usize = 8 * 1024 * 1024;

impl Tap {
    /// `strip_usage`: the gateway asked for usage the client did not, so the
    /// extra usage chunk and `"usage":null` fields are removed from its stream.
    pub fn new(endpoint: Endpoint, sse: bool, strip_usage: bool, keep: Option<usize>) -> Tap {
        let mode = if sse {
            Mode::Events { splitter: Splitter::default(), strip_usage, out: BytesMut::new() }
        } else {
            Mode::Json { buf: Vec::new(), overflow: false }
        };
        Tap { endpoint, mode, usage: Usage::default(), answer: None, kept: keep.map(|limit| (Vec::new(), limit)) }
    }

    /// Reads what the answer says of its id, model and finish too: every
    /// event of a stream is parsed then, not only those with usage.
    pub fn read_answer(&mut self) {
        self.answer = Some(Box::default());
    }

    /// What the answer said of itself, when asked for (complete once the body has ended).
    pub fn answer(&mut self) -> Option<Answer> {
        self.usage();
        self.answer.as_deref().cloned()
    }

    /// Reads a chunk; returns the bytes to pass on (the chunk itself, unless stripping).
    pub fn observe(&mut self, chunk: Bytes) -> Bytes {
        if let Some((kept, limit)) = &mut self.kept {
            let room = limit.saturating_sub(kept.len());
            kept.extend_from_slice(&chunk[..room.min(chunk.len())]);
        }
        match &mut self.mode {
            Mode::Json { buf, overflow } => {
                if !*overflow && buf.len() + chunk.len() <= MAX_JSON_BODY {
                    buf.extend_from_slice(&chunk);
                } else {
                    *overflow = true;
                    buf.clear();
                }
                chunk
            }
            Mode::Read => chunk,
            Mode::Events { splitter, strip_usage, out } => {
                for event in splitter.push(&chunk) {
                    // Most events carry no usage: skip parsing those.
                    let json = if self.answer.is_some() || mentions_usage(self.endpoint, &event) {
                        let (_, data) = sse::parse(&event);
                        serde_json::from_str(&data).unwrap_or(Value::Null)
                    } else {
                        Value::Null
                    };
                    if let Some(u) = from_event(self.endpoint, &json) {
                        self.usage.merge(u);
                    }
                    if let Some(a) = &mut self.answer {
                        a.read(&json);
                    }
                    if *strip_usage {
                        if let Some(event) = strip(&event, &json) {
                            out.extend_from_slice(&event);
                        }
                    }
                }
                if *strip_usage {
                    out.split().freeze()
                } else {
                    chunk
                }
            }
        }
    }

    /// Bytes held back at the end of a stripped stream (an unterminated event).
    pub fn flush(&mut self) -> Bytes {
        match &mut self.mode {
            Mode::Events { splitter, strip_usage: true, .. } => splitter.take_pending(),
            _ => Bytes::new(),
        }
    }

    /// The usage read so far (complete once the body has ended). A JSON
    /// body is read at the first call, once (the cache's copy and the
    /// record both ask for it), and what comes after is not: ask only once
    /// the body has ended.
    pub fn usage(&mut self) -> Usage {
        if let Mode::Json { buf, overflow: false } = &self.mode {
            if !buf.is_empty() {
                self.usage = from_body(self.endpoint, buf);
                if let Some(a) = &mut self.answer {
                    a.read_body(buf);
                }
                self.mode = Mode::Read;
            }
        }
        self.usage
    }

    /// The stored copy of the body, when bodies are stored.
    pub fn kept(&self) -> Option<String> {
        self.kept.as_ref().map(|(k, _)| String::from_utf8_lossy(k).into_owned())
    }
}

fn mentions_usage(endpoint: Endpoint, event: &[u8]) -> bool {
    let key: &[u8] = match endpoint.protocol() {
        crate::protocol::Protocol::Gemini => b"\"usageMetadata\"",
        _ => b"\"usage\"",
    };
    event.windows(key.len()).any(|w| w == key)
}

/// The event as the client would have seen it without `include_usage`:
/// `None` for the usage-only chunk, and `"usage":null` removed elsewhere.
fn strip(event: &Bytes, json: &Value) -> Option<Bytes> {
    let usage_only = json.get("choices").and_then(Value::as_array).is_some_and(Vec::is_empty)
        && json.get("usage").is_some_and(Value::is_object);
    if usage_only {
        return None;
    }
    const NULL_USAGE: &[u8] = b",\"usage\":null}";
    let body_end = event.len() - event.iter().rev().take_while(|b| **b == b'\n' || **b == b'\r').count();
    if event[..body_end].ends_with(NULL_USAGE) {
        let mut out = BytesMut::with_capacity(event.len());
        out.extend_from_slice(&event[..body_end - NULL_USAGE.len()]);
        out.extend_from_slice(b"}");
        out.extend_from_slice(&event[body_end..]);
        return Some(out.freeze());
    }
    Some(event.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer_of(endpoint: Endpoint, sse: bool, bytes: &[u8]) -> Answer {
        let mut tap = Tap::new(endpoint, sse, false, None);
        tap.read_answer();
        tap.observe(Bytes::copy_from_slice(bytes));
        tap.answer().unwrap()
    }

    #[test]
    fn an_answer_s_id_model_and_finish_are_read_in_every_format() {
        let chat = br#"{"id":"chatcmpl-1","model":"gpt-4o-2024","choices":[{"finish_reason":"tool_calls"},{"finish_reason":"stop"}],"usage":{"prompt_tokens":1}}"#;
        let a = answer_of(Endpoint::ChatCompletions, false, chat);
        assert_eq!((a.id.as_deref(), a.model.as_deref()), (Some("chatcmpl-1"), Some("gpt-4o-2024")));
        assert_eq!(a.finish_reasons, ["tool_calls", "stop"]);
        let messages = b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"claude-x\",\"usage\":{\"input_tokens\":3}}}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n";
        let a = answer_of(Endpoint::Messages, true, messages);
        assert_eq!(
            (a.id.as_deref(), a.model.as_deref(), a.finish_reasons.as_slice()),
            (Some("msg_1"), Some("claude-x"), ["end_turn".to_string()].as_slice())
        );
        let gemini =
            br#"{"responseId":"r-1","modelVersion":"gemini-2.5-flash","candidates":[{"finishReason":"STOP"}]}"#;
        let a = answer_of(Endpoint::GeminiGenerate, false, gemini);
        assert_eq!(
            (a.id.as_deref(), a.model.as_deref(), a.finish_reasons.as_slice()),
            (Some("r-1"), Some("gemini-2.5-flash"), ["STOP".to_string()].as_slice())
        );
        let responses = br#"{"id":"resp_1","object":"response","model":"gpt-5","status":"incomplete"}"#;
        let a = answer_of(Endpoint::Responses, false, responses);
        assert_eq!(
            (a.id.as_deref(), a.finish_reasons.as_slice()),
            (Some("resp_1"), ["incomplete".to_string()].as_slice())
        );
    }

    #[test]
    fn an_untraced_tap_reads_no_answer() {
        let mut tap = Tap::new(Endpoint::ChatCompletions, false, false, None);
        tap.observe(Bytes::from_static(br#"{"id":"x","model":"m"}"#));
        assert!(tap.answer().is_none());
    }

    #[test]
    fn gemini_usage_counts_thoughts_as_output_and_the_last_chunk_wins() {
        let body = br#"{"candidates":[{"content":{"parts":[{"text":"hi"}]}}],"usageMetadata":{"promptTokenCount":12,"candidatesTokenCount":3,"thoughtsTokenCount":5,"cachedContentTokenCount":4,"totalTokenCount":20}}"#;
        let u = from_body(Endpoint::GeminiGenerate, body);
        assert_eq!((u.input_tokens, u.output_tokens, u.cached_tokens), (Some(12), Some(8), Some(4)));
        let stream = concat!(
            "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"a\"}]}}],\"usageMetadata\":{\"promptTokenCount\":12,\"candidatesTokenCount\":1}}\r\n\r\n",
            "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"b\"}]},\"finishReason\":\"STOP\"}],\"usageMetadata\":{\"promptTokenCount\":12,\"candidatesTokenCount\":2}}\r\n\r\n",
        );
        let mut tap = Tap::new(Endpoint::GeminiStream, true, false, None);
        let out = tap.observe(Bytes::from_static(stream.as_bytes()));
        let out = [out, tap.flush()].concat();
        assert_eq!(out, stream.as_bytes(), "relayed unchanged");
        assert_eq!((tap.usage().input_tokens, tap.usage().output_tokens), (Some(12), Some(2)));
    }

    #[test]
    fn bodies_of_each_protocol() {
        let chat =
            br#"{"usage":{"prompt_tokens":12,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":4}}}"#;
        assert_eq!(
            from_body(Endpoint::ChatCompletions, chat),
            Usage { input_tokens: Some(12), output_tokens: Some(5), cached_tokens: Some(4), cache_write_tokens: None }
        );
        let resp = br#"{"usage":{"input_tokens":7,"output_tokens":3,"input_tokens_details":{"cached_tokens":0}}}"#;
        assert_eq!(from_body(Endpoint::Responses, resp).output_tokens, Some(3));
        let msg = br#"{"usage":{"input_tokens":10,"cache_read_input_tokens":90,"cache_creation_input_tokens":5,"output_tokens":2}}"#;
        assert_eq!(
            from_body(Endpoint::Messages, msg),
            Usage {
                input_tokens: Some(105),
                output_tokens: Some(2),
                cached_tokens: Some(90),
                cache_write_tokens: Some(5)
            }
        );
        let emb = br#"{"usage":{"prompt_tokens":8,"total_tokens":8}}"#;
        assert_eq!(from_body(Endpoint::Embeddings, emb).output_tokens, Some(0));
        assert!(!from_body(Endpoint::ChatCompletions, b"{}").is_known());
    }

    #[test]
    fn odd_counts_read_as_unknown_without_losing_the_rest() {
        let odd = br#"{"id":"x","usage":{"prompt_tokens":"12","completion_tokens":5,"prompt_tokens_details":null,"extra":{"a":[1,{"b":2}]}}}"#;
        assert_eq!(from_body(Endpoint::ChatCompletions, odd), Usage { output_tokens: Some(5), ..Usage::default() });
        let mixed =
            br#"{"usage":{"prompt_tokens":3,"completion_tokens":-1,"prompt_tokens_details":{"cached_tokens":[1]}}}"#;
        assert_eq!(
            from_body(Endpoint::ChatCompletions, mixed),
            Usage { input_tokens: Some(3), output_tokens: Some(0), ..Usage::default() }
        );
        assert!(!from_body(Endpoint::Messages, br#"{"usage":"none"}"#).is_known());
        assert!(!from_body(Endpoint::Messages, b"not json").is_known());
    }

    #[test]
    fn anthropic_counts_too_large_to_add_saturate() {
        // Adding cache reads to the input count overflowed (a panic in a
        // debug build, a wrapped, tiny count in a release one).
        let msg = br#"{"usage":{"input_tokens":18446744073709551615,"cache_read_input_tokens":1,"cache_creation_input_tokens":2}}"#;
        assert_eq!(from_body(Endpoint::Messages, msg).input_tokens, Some(u64::MAX));
    }

    #[test]
    fn only_the_top_level_usage_member_counts() {
        let chat = Endpoint::ChatCompletions;
        let nested = br#"{"choices":[{"message":{"usage":{"prompt_tokens":99}}}],"x":{"usage":{"prompt_tokens":98}}}"#;
        assert!(!from_body(chat, nested).is_known(), "nested usage is not the reply's");
        let in_strings = br#"{"content":"say \"usage\": {\"prompt_tokens\": 97}","usage_note":"usage","k":"usage"}"#;
        assert!(!from_body(chat, in_strings).is_known(), "text and other keys are not the member");
        let after =
            br#"{ "choices" : [ {"a":[1,{"b":"}]\\"}]} ] , "usage" : {"prompt_tokens":3,"completion_tokens":1} }"#;
        assert_eq!(from_body(chat, after).input_tokens, Some(3), "found past nesting, brackets in strings and spaces");
        assert!(!from_body(chat, br#"[{"usage":{"prompt_tokens":1}}]"#).is_known(), "not an object");
        assert!(!from_body(chat, br#"{"usage":null}"#).is_known());
        assert!(!from_body(chat, br#"{"a":"unterminated"#).is_known());
    }

    #[test]
    fn anthropic_stream_usage_comes_in_two_parts() {
        let mut tap = Tap::new(Endpoint::Messages, true, false, None);
        let stream = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":11,\"output_tokens\":1}}}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":9}}\n\n";
        for piece in stream.as_bytes().chunks(7) {
            tap.observe(Bytes::copy_from_slice(piece));
        }
        assert_eq!(tap.usage(), Usage { input_tokens: Some(11), output_tokens: Some(9), ..Usage::default() });
    }

    /// Claude Code's streams: `message_start` says the cache reads and
    /// writes, `message_delta` the output (and, from newer APIs, the same
    /// cache counts again).
    #[test]
    fn anthropic_cache_writes_are_read_from_bodies_and_both_stream_events() {
        let msg = br#"{"usage":{"input_tokens":4,"cache_read_input_tokens":0,"cache_creation_input_tokens":1500,"output_tokens":2}}"#;
        let u = from_body(Endpoint::Messages, msg);
        assert_eq!((u.input_tokens, u.cached_tokens, u.cache_write_tokens), (Some(1504), Some(0), Some(1500)));
        let start = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3,\"cache_creation_input_tokens\":200,\"cache_read_input_tokens\":1000,\"output_tokens\":1}}}\n\n";
        for delta in [
            "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":9}}\n\n",
            "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"input_tokens\":3,\"cache_creation_input_tokens\":200,\"cache_read_input_tokens\":1000,\"output_tokens\":9}}\n\n",
        ] {
            let mut tap = Tap::new(Endpoint::Messages, true, false, None);
            for piece in format!("{start}{delta}").as_bytes().chunks(11) {
                tap.observe(Bytes::copy_from_slice(piece));
            }
            let want = Usage {
                input_tokens: Some(1203),
                output_tokens: Some(9),
                cached_tokens: Some(1000),
                cache_write_tokens: Some(200),
            };
            assert_eq!(tap.usage(), want, "{delta}");
        }
        let chat =
            br#"{"usage":{"prompt_tokens":12,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":4}}}"#;
        assert_eq!(from_body(Endpoint::ChatCompletions, chat).cache_write_tokens, None, "OpenAI reports no writes");
        // As OpenRouter reports them, and as a whole answer translated from
        // Anthropic's carries them.
        let chat = br#"{"usage":{"prompt_tokens":1200,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":1000,"cache_write_tokens":150}}}"#;
        assert_eq!(from_body(Endpoint::ChatCompletions, chat).cache_write_tokens, Some(150));
        let resp = br#"{"usage":{"input_tokens":1200,"output_tokens":5,"input_tokens_details":{"cached_tokens":1000,"cache_write_tokens":150}}}"#;
        assert_eq!(from_body(Endpoint::Responses, resp).cache_write_tokens, Some(150));
    }

    /// JSON names cache writes; the compact form keeps the three counts it
    /// always had, which the spool's older frames hold.
    #[test]
    fn usage_in_json_and_in_the_compact_form() {
        let u =
            Usage { input_tokens: Some(1), output_tokens: Some(2), cached_tokens: None, cache_write_tokens: Some(3) };
        let json = serde_json::to_value(u).unwrap();
        assert_eq!(json["cache_write_tokens"], 3);
        assert_eq!(serde_json::from_value::<Usage>(json).unwrap(), u);
        let old = serde_json::json!({"input_tokens": 1, "output_tokens": 2, "cached_tokens": null});
        assert_eq!(serde_json::from_value::<Usage>(old).unwrap().cache_write_tokens, None);
        let compact = postcard::to_allocvec(&u).unwrap();
        assert_eq!(compact, [1, 1, 1, 2, 0]);
        assert_eq!(postcard::from_bytes::<Usage>(&compact).unwrap(), Usage { cache_write_tokens: None, ..u });
    }

    #[test]
    fn stripping_restores_the_stream_the_client_asked_for() {
        let upstream = concat!(
            "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}],\"id\":\"x\",\"usage\":null}\n\n",
            "data: {\"choices\":[],\"id\":\"x\",\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1}}\n\n",
            "data: [DONE]\n\n"
        );
        let expected = "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}],\"id\":\"x\"}\n\ndata: [DONE]\n\n";
        let mut tap = Tap::new(Endpoint::ChatCompletions, true, true, None);
        let mut out = Vec::new();
        for piece in upstream.as_bytes().chunks(5) {
            out.extend_from_slice(&tap.observe(Bytes::copy_from_slice(piece)));
        }
        out.extend_from_slice(&tap.flush());
        assert_eq!(String::from_utf8(out).unwrap(), expected);
        assert_eq!(tap.usage().input_tokens, Some(3));
    }

    #[test]
    fn a_json_body_is_read_once_and_asked_for_again() {
        let mut tap = Tap::new(Endpoint::ChatCompletions, false, false, None);
        let body = br#"{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2}}"#;
        for piece in body.chunks(9) {
            assert_eq!(&tap.observe(Bytes::copy_from_slice(piece))[..], piece, "passed on as it came");
        }
        let first = tap.usage();
        assert_eq!((first.input_tokens, first.output_tokens), (Some(7), Some(2)));
        assert!(matches!(tap.mode, Mode::Read), "the body's copy is let go once read");
        assert_eq!(tap.usage(), first);
    }

    #[test]
    fn kept_copy_is_truncated() {
        let mut tap = Tap::new(Endpoint::ChatCompletions, false, false, Some(4));
        tap.observe(Bytes::from_static(b"{\"usage\":"));
        assert_eq!(tap.kept().as_deref(), Some("{\"us"));
    }
}
