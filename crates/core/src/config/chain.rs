//! A route's chain entries: a provider's name, or a provider with its
//! weight (`{ provider = "a", weight = 9 }`) for `strategy = "weighted"`.

use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use toml::Spanned;

/// One entry of `chain = [...]`.
#[derive(Debug)]
pub(super) struct RawEntry {
    pub provider: Spanned<String>,
    pub weight: Option<Spanned<i64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWeighted {
    provider: Spanned<String>,
    weight: Option<Spanned<i64>>,
}

/// By hand rather than untagged, so that a misspelt key is named in the
/// error instead of "did not match any variant".
impl<'de> Deserialize<'de> for RawEntry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<RawEntry, D::Error> {
        Spanned::<EntryValue>::deserialize(d).map(|spanned| {
            let span = spanned.span();
            match spanned.into_inner() {
                EntryValue::Name(name) => RawEntry { provider: Spanned::new(span, name), weight: None },
                EntryValue::Weighted(w) => RawEntry { provider: w.provider, weight: w.weight },
            }
        })
    }
}

enum EntryValue {
    Name(String),
    Weighted(RawWeighted),
}

impl<'de> Deserialize<'de> for EntryValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<EntryValue, D::Error> {
        struct Either;
        impl<'de> Visitor<'de> for Either {
            type Value = EntryValue;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a provider's name, or a table such as { provider = \"a\", weight = 9 }")
            }
            fn visit_str<E: de::Error>(self, name: &str) -> Result<EntryValue, E> {
                Ok(EntryValue::Name(name.to_string()))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<EntryValue, A::Error> {
                RawWeighted::deserialize(de::value::MapAccessDeserializer::new(map)).map(EntryValue::Weighted)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<EntryValue, A::Error> {
                Err(de::Error::invalid_type(de::Unexpected::Seq, &self))
            }
        }
        d.deserialize_any(Either)
    }
}
