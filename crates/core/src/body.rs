//! Reading what the gateway needs from a request body without re-serialising
//! it: the body is forwarded byte-for-byte, except that the `model` value may
//! be spliced out and replaced when a route maps an alias.

use std::ops::Range;

use bytes::{Bytes, BytesMut};
use serde::Deserialize;
use serde_json::value::RawValue;

/// What the gateway reads from a JSON request body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHead {
    pub model: String,
    /// Byte range of the `model` value (quotes included) in the body.
    model_span: Range<usize>,
    pub stream: bool,
    /// The client set `stream_options` itself.
    pub has_stream_options: bool,
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
    #[serde(borrow)]
    stream_options: Option<&'a RawValue>,
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
    let start = raw_model.get().as_ptr() as usize - text.as_ptr() as usize;
    let stream = head.stream.is_some_and(|s| s.get() == "true");
    Ok(RequestHead {
        model,
        model_span: start..start + raw_model.get().len(),
        stream,
        has_stream_options: head.stream_options.is_some(),
    })
}

impl RequestHead {
    /// The body with `model` replaced by `upstream_model`, every other byte kept.
    pub fn with_model(&self, body: &Bytes, upstream_model: &str) -> Bytes {
        if upstream_model == self.model {
            return body.clone();
        }
        let encoded = serde_json::Value::String(upstream_model.to_string()).to_string();
        let mut out = BytesMut::with_capacity(body.len() + encoded.len());
        out.extend_from_slice(&body[..self.model_span.start]);
        out.extend_from_slice(encoded.as_bytes());
        out.extend_from_slice(&body[self.model_span.end..]);
        out.freeze()
    }
}

/// `body` with `"stream_options":{"include_usage":true}` added as its last
/// member, every other byte kept. `None` if the body is not an object.
pub fn with_include_usage(body: &Bytes) -> Option<Bytes> {
    let end = body.iter().rposition(|b| !b.is_ascii_whitespace())?;
    if body[end] != b'}' {
        return None;
    }
    const MEMBER: &[u8] = br#","stream_options":{"include_usage":true}"#;
    let mut out = BytesMut::with_capacity(body.len() + MEMBER.len());
    out.extend_from_slice(&body[..end]);
    out.extend_from_slice(MEMBER);
    out.extend_from_slice(&body[end..]);
    Some(out.freeze())
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
    fn rewrites_only_the_model_value() {
        let body = Bytes::from_static(
            "{ \"messages\" : [{\"role\":\"user\",\"content\":\"h\u{e9}\"}],\n  \"model\" :\t\"a\\u0062c\", \"extra\": {\"z\":1.50} }".as_bytes(),
        );
        let head = inspect(&body).unwrap();
        assert_eq!(head.model, "abc");
        let out = head.with_model(&body, "provider/\"m\"");
        let expected = "{ \"messages\" : [{\"role\":\"user\",\"content\":\"h\u{e9}\"}],\n  \"model\" :\t\"provider/\\\"m\\\"\", \"extra\": {\"z\":1.50} }";
        assert_eq!(std::str::from_utf8(&out).unwrap(), expected);
        assert_eq!(head.with_model(&body, "abc"), body, "same name: untouched bytes");
    }

    #[test]
    fn include_usage_is_appended_as_the_last_member() {
        let body = Bytes::from_static(b"{\"model\":\"m\",\"stream\":true}\n");
        let out = with_include_usage(&body).unwrap();
        assert_eq!(&out[..], b"{\"model\":\"m\",\"stream\":true,\"stream_options\":{\"include_usage\":true}}\n");
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["stream_options"]["include_usage"], true);
        assert!(inspect(&out).unwrap().has_stream_options);
        assert!(!inspect(&body).unwrap().has_stream_options);
    }

    #[test]
    fn nested_model_fields_are_not_touched() {
        let body = Bytes::from_static(br#"{"tools":[{"model":"inner"}],"model":"outer"}"#);
        let head = inspect(&body).unwrap();
        assert_eq!(head.model, "outer");
        assert_eq!(&head.with_model(&body, "x")[..], br#"{"tools":[{"model":"inner"}],"model":"x"}"#);
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
