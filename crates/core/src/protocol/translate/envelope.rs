//! The opaque-state envelope: how reasoning state from one provider family
//! survives a trip through a client of another format.
//!
//! A client keeps whatever it finds in its own opaque slot (a Messages
//! `signature`, a Responses `encrypted_content`, a Gemini `thoughtSignature`)
//! and sends it back next turn. When the state came from another family it
//! is wrapped as `sy1.<origin>.<base64url(json)>`, the JSON holding what the
//! origin needs back: the reasoning text (a signature covers it byte for
//! byte), the opaque value, the Responses item id, the redacted flag. On the
//! way back the envelope is opened, and its state is sent only to its origin
//! family; toward any other family the block is dropped, since a foreign or
//! fabricated signature is a 400.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde::{Deserialize, Serialize};

use super::ir::{Family, Opaque};

const PREFIX: &str = "sy1.";

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
        Family::OpenRouter => "ordt",
    }
}

fn family(code: &str) -> Option<Family> {
    match code {
        "anth" => Some(Family::Anthropic),
        "oai" => Some(Family::OpenAi),
        "gem" => Some(Family::Gemini),
        "ordt" => Some(Family::OpenRouter),
        _ => None,
    }
}

/// Wraps state from `origin` for a client of another family.
pub fn seal(origin: Family, sealed: &Sealed) -> String {
    let json = serde_json::to_vec(sealed).unwrap_or_default();
    format!("{PREFIX}{}.{}", code(origin), URL_SAFE_NO_PAD.encode(json))
}

/// Opens an envelope; `None` when the value is not one (a provider's own
/// signature, or garbage).
pub fn open(value: &str) -> Option<(Family, Sealed)> {
    let rest = value.strip_prefix(PREFIX)?;
    let (origin, data) = rest.split_once('.')?;
    let origin = family(origin)?;
    let bytes = URL_SAFE_NO_PAD.decode(data).ok()?;
    Some((origin, serde_json::from_slice(&bytes).ok()?))
}

/// What a client's opaque slot held, once read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    /// The state and its origin; `None` when the envelope held reasoning
    /// without state.
    pub opaque: Option<Opaque>,
    /// The reasoning text from an envelope, which replaces what the client
    /// shows (a client may have summarised or lost it).
    pub text: Option<String>,
    pub id: Option<String>,
    pub redacted: bool,
}

/// Reads the value a client of `client_family` put in its opaque slot: an
/// envelope is opened; anything else is the client's own family's state.
pub fn read_slot(client_family: Family, value: &str) -> Slot {
    match open(value) {
        Some((origin, s)) => {
            Slot { opaque: s.value.map(|value| Opaque { origin, value }), text: s.text, id: s.id, redacted: s.redacted }
        }
        None => Slot {
            opaque: Some(Opaque { origin: client_family, value: value.to_owned() }),
            text: None,
            id: None,
            redacted: false,
        },
    }
}

/// The value to put in a client's opaque slot for reasoning from `origin`:
/// the raw state when the client is of the same family, else an envelope.
/// `None` when there is nothing worth keeping.
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn an_envelope_round_trips_and_names_its_origin() {
        let s =
            Sealed { text: Some("let me think".into()), value: Some("EqQBCkgIARAB…".into()), ..Sealed::default() };
        let wrapped = seal(Family::Anthropic, &s);
        assert!(wrapped.starts_with("sy1.anth."));
        assert!(wrapped.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)));
        assert_eq!(open(&wrapped), Some((Family::Anthropic, s)));
    }

    #[test]
    fn a_plain_signature_is_the_clients_own() {
        let slot = read_slot(Family::Anthropic, "EqQBCkgIARAB");
        assert_eq!(slot.opaque, Some(Opaque { origin: Family::Anthropic, value: "EqQBCkgIARAB".into() }));
        assert!(open("sy1.zzz.e30").is_none());
        assert!(open("sy1.anth.!!!").is_none());
    }

    #[test]
    fn state_goes_raw_to_its_own_family_and_sealed_to_others() {
        let o = Opaque { origin: Family::OpenAi, value: "gAAAAB".into() };
        assert_eq!(write_slot(Family::OpenAi, Family::OpenAi, Some(&o), "x", None, false).as_deref(), Some("gAAAAB"));
        let sealed = write_slot(Family::Anthropic, Family::OpenAi, Some(&o), "sum", Some("rs_1"), false).unwrap();
        let slot = read_slot(Family::Anthropic, &sealed);
        assert_eq!(slot.opaque, Some(o));
        assert_eq!((slot.text.as_deref(), slot.id.as_deref()), (Some("sum"), Some("rs_1")));
        // Reasoning with no state still gets a non-empty signature (Claude
        // Code requires one), which opens to no state at all.
        let unsigned = write_slot(Family::Anthropic, Family::OpenAi, None, "hmm", None, false).unwrap();
        assert_eq!(read_slot(Family::Anthropic, &unsigned).opaque, None);
        assert_eq!(write_slot(Family::Anthropic, Family::OpenAi, None, "", None, false), None);
    }
}
