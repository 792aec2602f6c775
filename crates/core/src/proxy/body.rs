//! Reading what the gateway needs from a request body without re-serialising
//! it: the body is forwarded byte-for-byte, except that the `model` value may
//! be spliced out and replaced when a route maps an alias, and usage asked
//! for in `stream_options`.

use std::borrow::Cow;
use std::ops::Range;

use bytes::{Bytes, BytesMut};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::session::{Conversation, Opening, Said};

/// What the gateway reads from a JSON request body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHead {
    pub model: String,
    /// Byte range of the `model` value (quotes included) in the body; none
    /// when the model is in the path (Gemini's), not the body.
    model_span: Option<Range<usize>>,
    pub stream: bool,
    /// The client set `stream_options` itself (to anything but `null`).
    pub has_stream_options: bool,
    /// Byte range of a `"stream_options": null` value: asking for usage
    /// replaces it, as adding a second member would name the key twice.
    null_stream_options: Option<Range<usize>>,
    /// Index of the object's closing brace, where an added member goes.
    object_end: usize,
    /// The most output the client allows (`max_tokens`,
    /// `max_completion_tokens` or `max_output_tokens`), for estimates.
    pub max_output: Option<u64>,
    /// Byte range of that limit's value, to lower it ([`RequestHead::with_output_limit`]).
    max_output_span: Option<Range<usize>>,
    /// What the body says of its conversation ([`crate::session`]).
    pub conversation: Conversation,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BodyError {
    #[error("request body is not valid JSON: {0}")]
    Malformed(String),
    #[error("request body must include a string \"model\" field")]
    MissingModel,
}

#[derive(Deserialize)]
struct Head<'a> {
    #[serde(borrow)]
    model: Option<&'a RawValue>,
    #[serde(borrow)]
    stream: Option<&'a RawValue>,
    #[serde(borrow, default)]
    stream_options: Present<'a>,
    #[serde(borrow)]
    max_tokens: Option<&'a RawValue>,
    #[serde(borrow)]
    max_completion_tokens: Option<&'a RawValue>,
    #[serde(borrow)]
    max_output_tokens: Option<&'a RawValue>,
    // Which conversation it is ([`crate::session`]), each format's fields.
    #[serde(borrow)]
    prompt_cache_key: Option<Cow<'a, str>>,
    /// Messages' system prompt.
    #[serde(borrow)]
    system: Option<&'a RawValue>,
    /// Responses' system prompt.
    #[serde(borrow)]
    instructions: Option<&'a RawValue>,
    /// Gemini's system prompt, in either spelling.
    #[serde(borrow, alias = "system_instruction", rename = "systemInstruction")]
    system_instruction: Option<&'a RawValue>,
    /// The turns: Messages' and Chat's `messages`, Gemini's `contents`.
    #[serde(borrow, alias = "contents")]
    messages: Option<Opening<'a>>,
    /// Responses' turns.
    #[serde(borrow)]
    input: Option<&'a RawValue>,
}

impl<'a> Head<'a> {
    /// Its conversation fields, as [`crate::session`] takes them.
    fn said(self) -> Said<'a> {
        Said {
            prompt_cache_key: self.prompt_cache_key,
            system: self.system.or(self.instructions).or(self.system_instruction),
            messages: self.messages,
            input: self.input,
        }
    }
}

/// A member's raw value, `null` included: `Option` would read a `null`
/// as absent and lose where it is.
#[derive(Default)]
struct Present<'a>(Option<&'a RawValue>);

impl<'de: 'a, 'a> Deserialize<'de> for Present<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Present<'a>, D::Error> {
        <&'a RawValue>::deserialize(d).map(|v| Present(Some(v)))
    }
}

/// Validates the body as a JSON object and reads `model` and `stream`.
pub fn inspect(body: &[u8]) -> Result<RequestHead, BodyError> {
    let text = std::str::from_utf8(body).map_err(|e| BodyError::Malformed(e.to_string()))?;
    if !text.trim_start().starts_with('{') {
        return Err(BodyError::Malformed("expected a JSON object".into()));
    }
    let head: Head<'_> = serde_json::from_str(text).map_err(|e| BodyError::Malformed(e.to_string()))?;
    let raw_model = head.model.ok_or(BodyError::MissingModel)?;
    let model: String = serde_json::from_str(raw_model.get()).map_err(|_| BodyError::MissingModel)?;
    if model.is_empty() {
        return Err(BodyError::MissingModel);
    }
    // A borrowed RawValue is a slice of `text`, so its offset is its position.
    let span = |raw: &RawValue| {
        let start = raw.get().as_ptr() as usize - text.as_ptr() as usize;
        start..start + raw.get().len()
    };
    let stream = head.stream.is_some_and(|s| s.get() == "true");
    let stream_options = head.stream_options.0;
    let limit = [head.max_completion_tokens, head.max_tokens, head.max_output_tokens]
        .into_iter()
        .flatten()
        .find_map(|raw| raw.get().parse::<u64>().ok().map(|n| (n, span(raw))));
    let (max_output, max_output_span) = limit.map_or((None, None), |(n, at)| (Some(n), Some(at)));
    Ok(RequestHead {
        model,
        model_span: Some(span(raw_model)),
        stream,
        has_stream_options: stream_options.is_some_and(|v| v.get() != "null"),
        null_stream_options: stream_options.filter(|v| v.get() == "null").map(span),
        // A parsed object ends with its brace, then JSON whitespace only.
        object_end: text.trim_end_matches([' ', '\t', '\n', '\r']).len() - 1,
        max_output,
        max_output_span,
        conversation: head.said().locate(text),
    })
}

/// Validates the body as a JSON object, for an endpoint whose path names
/// the model and whether it streams (Gemini's).
pub fn inspect_with_model(body: &[u8], model: &str, stream: bool) -> Result<RequestHead, BodyError> {
    let text = std::str::from_utf8(body).map_err(|e| BodyError::Malformed(e.to_string()))?;
    if !text.trim_start().starts_with('{') {
        return Err(BodyError::Malformed("expected a JSON object".into()));
    }
    // Read as any head: a Gemini body names no model and no `stream`, and
    // its limit is nested in `generationConfig`.
    let head: Head<'_> = serde_json::from_str(text).map_err(|e| BodyError::Malformed(e.to_string()))?;
    if model.is_empty() {
        return Err(BodyError::MissingModel);
    }
    Ok(RequestHead {
        model: model.to_string(),
        model_span: None,
        stream,
        has_stream_options: false,
        null_stream_options: None,
        object_end: text.trim_end_matches([' ', '\t', '\n', '\r']).len() - 1,
        max_output: None,
        max_output_span: None,
        conversation: head.said().locate(text),
    })
}

/// Whether a body (of any format: each calls them `tools`) offers tools:
/// a non-empty `tools` array. Read only for a provider without tools.
pub fn carries_tools(body: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Tools<'a> {
        #[serde(borrow)]
        tools: Option<&'a RawValue>,
    }
    serde_json::from_slice::<Tools<'_>>(body)
        .ok()
        .and_then(|t| t.tools)
        .is_some_and(|raw| serde_json::from_str::<Vec<serde::de::IgnoredAny>>(raw.get()).is_ok_and(|v| !v.is_empty()))
}

impl RequestHead {
    /// `body` (which this head was read from) with its output limit
    /// lowered to `limit`, when it asks for more; every other byte kept.
    pub fn with_output_limit(&self, body: &[u8], limit: u64) -> Option<Vec<u8>> {
        let span = self.max_output_span.clone().filter(|_| self.max_output.is_some_and(|n| n > limit))?;
        let mut out = Vec::with_capacity(body.len());
        out.extend_from_slice(body.get(..span.start)?);
        out.extend_from_slice(limit.to_string().as_bytes());
        out.extend_from_slice(body.get(span.end..)?);
        Some(out)
    }

    /// The body to send upstream: `model` replaced by `upstream_model` and,
    /// with `include_usage`, `"stream_options":{"include_usage":true}` in
    /// place of a `null` one or added as the last member; every other byte
    /// kept. A client's own `stream_options` is never changed.
    pub fn upstream_body(&self, body: &Bytes, upstream_model: &str, include_usage: bool) -> Bytes {
        const OPTIONS: &[u8] = br#"{"include_usage":true}"#;
        const MEMBER: &[u8] = br#","stream_options":{"include_usage":true}"#;
        let mut splices: Vec<(Range<usize>, Cow<'_, [u8]>)> = Vec::new();
        if let Some(span) = self.model_span.clone().filter(|_| upstream_model != self.model) {
            let encoded = serde_json::Value::String(upstream_model.to_string()).to_string();
            splices.push((span, Cow::Owned(encoded.into_bytes())));
        }
        if include_usage && !self.has_stream_options {
            splices.push(match &self.null_stream_options {
                Some(null) => (null.clone(), Cow::Borrowed(OPTIONS)),
                None => (self.object_end..self.object_end, Cow::Borrowed(MEMBER)),
            });
        }
        if splices.is_empty() {
            return body.clone();
        }
        splices.sort_by_key(|(range, _)| range.start);
        let mut out = BytesMut::with_capacity(body.len() + splices.iter().map(|(_, b)| b.len()).sum::<usize>());
        let mut at = 0;
        for (range, bytes) in splices {
            out.extend_from_slice(&body[at..range.start]);
            out.extend_from_slice(&bytes);
            at = range.end;
        }
        out.extend_from_slice(&body[at..]);
        out.freeze()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_model_and_stream() {
        let head = inspect(br#"{"stream": true, "model":"gpt-4o-mini","x":[1,2]}"#).unwrap();
        assert_eq!(head.model, "gpt-4o-mini");
        assert!(head.stream);
        assert!(!inspect(br#"{"model":"m","stream":false}"#).unwrap().stream);
        assert!(!inspect(br#"{"model":"m"}"#).unwrap().stream);
    }

    #[test]
    fn turns_that_are_not_a_list_are_the_translator_s_to_name_not_a_parse_error() {
        for body in [
            &br#"{"model":"m","messages":"x"}"#[..],
            br#"{"model":"m","messages":{"a":[1]}}"#,
            br#"{"model":"m","contents":7}"#,
        ] {
            assert!(inspect(body).is_ok(), "{}", String::from_utf8_lossy(body));
        }
        assert!(inspect(br#"{"model":"m","messages":[1,}"#).is_err());
    }

    #[test]
    fn reads_the_output_limit_in_each_api_s_name() {
        let limit = |body: &[u8]| inspect(body).unwrap().max_output;
        assert_eq!(limit(br#"{"model":"m","max_tokens":512}"#), Some(512));
        assert_eq!(limit(br#"{"model":"m","max_completion_tokens":64,"max_tokens":9}"#), Some(64));
        assert_eq!(limit(br#"{"model":"m","max_output_tokens":128}"#), Some(128));
        assert_eq!(limit(br#"{"model":"m","max_tokens":null}"#), None);
        assert_eq!(limit(br#"{"model":"m","max_tokens":-1}"#), None);
        assert_eq!(limit(br#"{"model":"m"}"#), None);
    }

    #[test]
    fn rewrites_only_the_model_value() {
        let body = Bytes::from_static(
            "{ \"messages\" : [{\"role\":\"user\",\"content\":\"h\u{e9}\"}],\n  \"model\" :\t\"a\\u0062c\", \"extra\": {\"z\":1.50} }".as_bytes(),
        );
        let head = inspect(&body).unwrap();
        assert_eq!(head.model, "abc");
        let out = head.upstream_body(&body, "provider/\"m\"", false);
        let expected = "{ \"messages\" : [{\"role\":\"user\",\"content\":\"h\u{e9}\"}],\n  \"model\" :\t\"provider/\\\"m\\\"\", \"extra\": {\"z\":1.50} }";
        assert_eq!(std::str::from_utf8(&out).unwrap(), expected);
        assert_eq!(head.upstream_body(&body, "abc", false), body, "same name: untouched bytes");
    }

    #[test]
    fn include_usage_is_appended_as_the_last_member() {
        let body = Bytes::from_static(b"{\"model\":\"m\",\"stream\":true}\n");
        let head = inspect(&body).unwrap();
        let out = head.upstream_body(&body, "m", true);
        assert_eq!(&out[..], b"{\"model\":\"m\",\"stream\":true,\"stream_options\":{\"include_usage\":true}}\n");
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["stream_options"]["include_usage"], true);
        assert!(inspect(&out).unwrap().has_stream_options);
        assert!(!head.has_stream_options);
        let own = Bytes::from_static(br#"{"model":"m","stream_options":{}}"#);
        assert_eq!(inspect(&own).unwrap().upstream_body(&own, "m", true), own, "the client's own options stay");
    }

    #[test]
    fn null_stream_options_is_replaced_not_duplicated() {
        // A client that serialises every unset field sends `"stream_options":null`;
        // adding a second member made a body with the key twice, which the
        // gateway itself (and strict parsers upstream) refuse.
        let body = Bytes::from_static(br#"{"model":"m","stream":true,"stream_options":null}"#);
        let head = inspect(&body).unwrap();
        assert!(!head.has_stream_options);
        let out = head.upstream_body(&body, "n", true);
        assert_eq!(&out[..], br#"{"model":"n","stream":true,"stream_options":{"include_usage":true}}"#);
        assert!(inspect(&out).unwrap().has_stream_options);
        let before = Bytes::from_static(br#"{"stream_options" : null ,"model":"m"}"#);
        let out = inspect(&before).unwrap().upstream_body(&before, "longer", true);
        assert_eq!(&out[..], br#"{"stream_options" : {"include_usage":true} ,"model":"longer"}"#);
    }

    #[test]
    fn nested_model_fields_are_not_touched() {
        let body = Bytes::from_static(br#"{"tools":[{"model":"inner"}],"model":"outer"}"#);
        let head = inspect(&body).unwrap();
        assert_eq!(head.model, "outer");
        assert_eq!(&head.upstream_body(&body, "x", false)[..], br#"{"tools":[{"model":"inner"}],"model":"x"}"#);
    }

    #[test]
    fn tools_are_found_only_when_some_are_offered() {
        assert!(carries_tools(br#"{"model":"m","tools":[{"name":"Bash"}]}"#));
        assert!(!carries_tools(br#"{"model":"m","tools":[]}"#));
        assert!(!carries_tools(br#"{"model":"m","tools":null}"#));
        assert!(!carries_tools(br#"{"model":"m","messages":[{"tools":[1]}]}"#), "only the top level counts");
    }

    #[test]
    fn rejects_bad_bodies() {
        assert!(matches!(inspect(b"{\"model\": "), Err(BodyError::Malformed(_))));
        assert!(matches!(inspect(b"[1,2]"), Err(BodyError::Malformed(_))));
        assert!(matches!(inspect(b"\xff"), Err(BodyError::Malformed(_))));
        assert_eq!(inspect(br#"{"messages":[]}"#), Err(BodyError::MissingModel));
        assert_eq!(inspect(br#"{"model":7}"#), Err(BodyError::MissingModel));
        assert_eq!(inspect(br#"{"model":""}"#), Err(BodyError::MissingModel));
    }
}
