//! The envelope that carries one provider's opaque reasoning state through a
//! client of another format: `sy1.<origin>.<base64url(json)>`, placed in the
//! client's own opaque slot (a Messages thinking `signature`, a Responses
//! `encrypted_content`, a Gemini `thoughtSignature`). When the client sends
//! it back, the request side opens it and hands the original to a provider
//! of the same family only.
//!
//! The JSON holds what that family needs back:
//! - `anth`: `{"type":"thinking","thinking":…,"signature":…}` or
//!   `{"type":"redacted_thinking","data":…}`;
//! - `oai`: `{"id":…,"encrypted_content":…}`;
//! - `gem`: `{"sigs":[…]}`;
//! - `none`: `{}`, for reasoning that had no state at all: a Messages client
//!   must get a non-empty signature, and this one matches no provider, so it
//!   is always dropped on the way back.

use serde_json::{json, Value};

use crate::protocol::translate::ir::{Family, Opaque};

/// Every envelope starts with this.
pub const PREFIX: &str = "sy1.";

/// The placeholder signature for reasoning that came with no state.
pub const NONE: &str = "sy1.none.e30";

/// An opened envelope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opened {
    /// The family it came from; `None` for the placeholder.
    pub origin: Option<Family>,
    /// The JSON it held.
    pub json: Value,
}

fn tag(family: Family) -> &'static str {
    match family {
        Family::Anthropic => "anth",
        Family::OpenAi => "oai",
        Family::Gemini => "gem",
    }
}

/// Seals a JSON payload from `origin`.
pub fn seal(origin: Family, json: &Value) -> String {
    format!("{PREFIX}{}.{}", tag(origin), base64url(json.to_string().as_bytes()))
}

/// Opens an envelope; `None` when `text` is not one (a provider's own value).
pub fn open(text: &str) -> Option<Opened> {
    let rest = text.strip_prefix(PREFIX)?;
    let (tag, body) = rest.split_once('.')?;
    let origin = match tag {
        "anth" => Some(Family::Anthropic),
        "oai" => Some(Family::OpenAi),
        "gem" => Some(Family::Gemini),
        "none" => None,
        _ => return None,
    };
    let json = serde_json::from_slice(&unbase64url(body)?).ok()?;
    Some(Opened { origin, json })
}

/// The opaque state a reasoning block gathered, as one client slot holds it:
/// the provider's own value when the client's family is the origin, an
/// envelope otherwise. `thinking` is the block's text, which an Anthropic
/// signature cannot be replayed without. `None` when there was no state.
pub fn slot(opaques: &[Opaque], thinking: &str, client: Family) -> Option<String> {
    let first = opaques.first()?;
    let same: Vec<&Opaque> = opaques.iter().filter(|o| o.origin == first.origin).collect();
    let last = same.last().map_or(first, |o| o);
    if first.origin == client {
        return Some(match client {
            Family::OpenAi => openai_field(&last.value, "encrypted_content"),
            Family::Anthropic | Family::Gemini => last.value.clone(),
        });
    }
    let payload = match first.origin {
        Family::Anthropic => json!({"type": "thinking", "thinking": thinking, "signature": last.value}),
        Family::OpenAi => {
            serde_json::from_str(&last.value).unwrap_or_else(|_| json!({"encrypted_content": last.value}))
        }
        Family::Gemini => json!({"sigs": same.iter().map(|o| o.value.as_str()).collect::<Vec<_>>()}),
    };
    Some(seal(first.origin, &payload))
}

/// A redacted block's state in a client slot of another family.
pub fn redacted_slot(opaque: &Opaque, client: Family) -> String {
    if opaque.origin == client {
        return opaque.value.clone();
    }
    match opaque.origin {
        Family::Anthropic => seal(Family::Anthropic, &json!({"type": "redacted_thinking", "data": opaque.value})),
        Family::OpenAi | Family::Gemini => slot(std::slice::from_ref(opaque), "", client).unwrap_or_default(),
    }
}

/// A field of an OpenAI opaque value (`{"id","encrypted_content"}`); a value
/// that is not such an object is taken as the encrypted content itself.
pub fn openai_field(value: &str, field: &str) -> String {
    match serde_json::from_str::<Value>(value) {
        Ok(Value::Object(map)) => map.get(field).and_then(Value::as_str).unwrap_or_default().to_string(),
        _ if field == "encrypted_content" => value.to_string(),
        _ => String::new(),
    }
}

/// The OpenAI opaque value of a reasoning item.
pub fn openai_value(id: &str, encrypted_content: &str) -> String {
    json!({"id": id, "encrypted_content": encrypted_content}).to_string()
}

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Base64url without padding (RFC 4648 §5), the alphabet safe in any slot.
pub fn base64url(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], chunk.get(1).copied().unwrap_or(0), chunk.get(2).copied().unwrap_or(0)];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for i in 0..=chunk.len() {
            out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
        }
    }
    out
}

/// Decodes base64url, padded or not; `None` on any other character.
pub fn unbase64url(text: &str) -> Option<Vec<u8>> {
    let digits: Vec<u8> = text
        .trim_end_matches('=')
        .bytes()
        .map(|c| ALPHABET.iter().position(|a| *a == c).map(|p| p as u8))
        .collect::<Option<_>>()?;
    if digits.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, d)| n | u32::from(*d) << (18 - 6 * i));
        let bytes = n.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64url_matches_the_rfc_vectors() {
        for (plain, coded) in [
            ("", ""),
            ("f", "Zg"),
            ("fo", "Zm8"),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg"),
            ("fooba", "Zm9vYmE"),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64url(plain.as_bytes()), coded);
            assert_eq!(unbase64url(coded).as_deref(), Some(plain.as_bytes()));
        }
        assert_eq!(base64url(&[0xfb, 0xff]), "-_8");
        assert_eq!(unbase64url("Zg=="), Some(b"f".to_vec()));
        assert_eq!(unbase64url("Z"), None);
        assert_eq!(unbase64url("Zm9v+"), None);
    }

    #[test]
    fn a_sealed_envelope_opens_to_its_origin_and_json() {
        let json = json!({"type": "thinking", "thinking": "hm", "signature": "EqAB"});
        let sealed = seal(Family::Anthropic, &json);
        assert!(sealed.starts_with("sy1.anth."));
        assert_eq!(open(&sealed), Some(Opened { origin: Some(Family::Anthropic), json }));
        assert_eq!(open(NONE), Some(Opened { origin: None, json: json!({}) }));
        assert_eq!(open("EqAB-genuine-signature"), None);
    }

    #[test]
    fn a_slot_of_the_same_family_holds_the_value_itself() {
        let anth = [Opaque { origin: Family::Anthropic, value: "EqAB".into() }];
        assert_eq!(slot(&anth, "t", Family::Anthropic).as_deref(), Some("EqAB"));
        let oai = [Opaque { origin: Family::OpenAi, value: openai_value("rs_1", "gAAA") }];
        assert_eq!(slot(&oai, "", Family::OpenAi).as_deref(), Some("gAAA"));
        let to_msgs = slot(&oai, "", Family::Anthropic).and_then(|s| open(&s));
        assert_eq!(to_msgs.map(|o| o.json), Some(json!({"id": "rs_1", "encrypted_content": "gAAA"})));
        let gem = [
            Opaque { origin: Family::Gemini, value: "s1".into() },
            Opaque { origin: Family::Gemini, value: "s2".into() },
        ];
        assert_eq!(
            slot(&gem, "", Family::OpenAi).and_then(|s| open(&s)).map(|o| o.json),
            Some(json!({"sigs": ["s1", "s2"]}))
        );
        assert_eq!(slot(&[], "t", Family::Anthropic), None);
    }
}
