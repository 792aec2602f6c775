//! The envelope that carries one provider's opaque reasoning state through a
//! client of another format: `sy1.<origin>.<base64url(json)>` (origin `anth`,
//! `oai` or `gem`), placed in the client's own opaque slot (a Messages
//! thinking `signature` or `redacted_thinking.data`, a Responses
//! `encrypted_content`, a Gemini `thoughtSignature`). When the client sends
//! it back, the request side opens it and hands the state to a provider of
//! the same family only.
//!
//! The JSON is [`Sealed`]: the reasoning text (an Anthropic signature
//! covers it byte for byte), the origin's value, a Responses item id, and
//! whether the block was redacted; absent members are left out. This is
//! the same contract the request and reply codecs read and write, so an
//! envelope made while streaming opens there, and the other way round.

use serde::{Deserialize, Serialize};

use crate::protocol::translate::ir::{Family, Opaque};

/// Every envelope starts with this.
pub const PREFIX: &str = "sy1.";

/// The contents of an envelope.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Sealed {
    /// The reasoning text as the origin produced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The origin's opaque value; `None` for reasoning that had none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// A Responses reasoning item id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub redacted: bool,
}

fn code(family: Family) -> &'static str {
    match family {
        Family::Anthropic => "anth",
        Family::OpenAi => "oai",
        Family::Gemini => "gem",
    }
}

fn family(code: &str) -> Option<Family> {
    match code {
        "anth" => Some(Family::Anthropic),
        "oai" => Some(Family::OpenAi),
        "gem" => Some(Family::Gemini),
        _ => None,
    }
}

/// Wraps state from `origin` for a client of another family.
pub fn seal(origin: Family, sealed: &Sealed) -> String {
    let json = serde_json::to_vec(sealed).unwrap_or_default();
    format!("{PREFIX}{}.{}", code(origin), base64url(&json))
}

/// Opens an envelope; `None` when the value is not one (a provider's own
/// signature, or garbage).
pub fn open(value: &str) -> Option<(Family, Sealed)> {
    let rest = value.strip_prefix(PREFIX)?;
    let (origin, data) = rest.split_once('.')?;
    let origin = family(origin)?;
    Some((origin, serde_json::from_slice(&unbase64url(data)?).ok()?))
}

/// The value for a client's opaque slot for reasoning from `origin`: the
/// raw state when the client is of the same family, else an envelope.
/// `None` when there is nothing worth keeping. Reasoning with text but no
/// state still gets an envelope, so a Messages client, which requires a
/// signature on every thinking block, always has one.
pub fn write_slot(
    client_family: Family,
    origin: Family,
    opaque: Option<&Opaque>,
    text: &str,
    id: Option<&str>,
    redacted: bool,
) -> Option<String> {
    if let Some(o) = opaque.filter(|o| o.origin == client_family) {
        return Some(o.value.clone());
    }
    let origin = opaque.map_or(origin, |o| o.origin);
    let sealed = Sealed {
        text: (!text.is_empty()).then(|| text.to_owned()),
        value: opaque.map(|o| o.value.clone()),
        id: id.map(str::to_owned),
        redacted,
    };
    (sealed != Sealed::default()).then(|| seal(origin, &sealed))
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

/// Decodes base64url without padding; `None` on anything else.
pub fn unbase64url(text: &str) -> Option<Vec<u8>> {
    let digits: Vec<u8> =
        text.bytes().map(|c| ALPHABET.iter().position(|a| *a == c).map(|p| p as u8)).collect::<Option<_>>()?;
    if digits.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, d)| n | u32::from(*d) << (18 - 6 * i));
        out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64url_matches_the_rfc_vectors() {
        let vectors = [("", ""), ("f", "Zg"), ("fo", "Zm8"), ("foo", "Zm9v"), ("foob", "Zm9vYg"), ("fooba", "Zm9vYmE")];
        for (plain, coded) in vectors.into_iter().chain([("foobar", "Zm9vYmFy")]) {
            assert_eq!(base64url(plain.as_bytes()), coded);
            assert_eq!(unbase64url(coded).as_deref(), Some(plain.as_bytes()));
        }
        assert_eq!(base64url(&[0xfb, 0xff]), "-_8");
        assert_eq!(unbase64url("Z"), None);
        assert_eq!(unbase64url("Zm9v+"), None);
        assert_eq!(unbase64url("Zg=="), None, "no padding, as the request side reads it");
    }

    #[test]
    fn an_envelope_round_trips_and_names_its_origin() {
        let s = Sealed { text: Some("hm".into()), value: Some("EqAB".into()), ..Sealed::default() };
        let sealed = seal(Family::Anthropic, &s);
        assert!(sealed.starts_with("sy1.anth."));
        assert_eq!(open(&sealed), Some((Family::Anthropic, s)));
        assert_eq!(open("EqAB-genuine-signature"), None);
        assert_eq!(open("sy1.zzz.e30"), None);
    }

    #[test]
    fn state_goes_raw_to_its_own_family_and_sealed_to_others() {
        let o = Opaque { origin: Family::OpenAi, value: "gAAA".into() };
        assert_eq!(
            write_slot(Family::OpenAi, Family::OpenAi, Some(&o), "x", Some("rs_1"), false).as_deref(),
            Some("gAAA")
        );
        let sealed = write_slot(Family::Anthropic, Family::OpenAi, Some(&o), "sum", Some("rs_1"), false).unwrap();
        let want =
            Sealed { text: Some("sum".into()), value: Some("gAAA".into()), id: Some("rs_1".into()), redacted: false };
        assert_eq!(open(&sealed), Some((Family::OpenAi, want)));
        let unsigned = write_slot(Family::Anthropic, Family::OpenAi, None, "hmm", None, false).unwrap();
        assert_eq!(open(&unsigned).map(|(_, s)| s.value), Some(None));
        assert_eq!(write_slot(Family::Anthropic, Family::OpenAi, None, "", None, false), None);
    }
}
