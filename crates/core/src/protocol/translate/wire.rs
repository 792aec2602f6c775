//! Small helpers the codecs share for reading JSON with paths in errors and
//! for the pieces several formats spell alike (data URLs, arguments).

use serde_json::{Map, Value};

use super::error::Untranslatable;

pub(crate) type Obj = Map<String, Value>;

/// `base.key`, or `key` at the root.
pub(crate) fn at(base: &str, key: &str) -> String {
    if base.is_empty() {
        key.to_owned()
    } else {
        format!("{base}.{key}")
    }
}

/// `base[i]`.
pub(crate) fn idx(base: &str, i: usize) -> String {
    format!("{base}[{i}]")
}

pub(crate) fn bad(path: impl Into<String>, reason: impl Into<String>) -> Untranslatable {
    Untranslatable::new(path, reason)
}

/// The body as a JSON object.
pub(crate) fn parse_body(body: &[u8]) -> Result<Obj, Untranslatable> {
    match serde_json::from_slice(body) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(bad("", "the body is not a JSON object")),
        Err(e) => Err(bad("", format!("the body is not valid JSON: {e}"))),
    }
}

pub(crate) fn as_obj<'a>(v: &'a Value, path: &str) -> Result<&'a Obj, Untranslatable> {
    v.as_object().ok_or_else(|| bad(path, "expected an object"))
}

pub(crate) fn as_arr<'a>(v: &'a Value, path: &str) -> Result<&'a Vec<Value>, Untranslatable> {
    v.as_array().ok_or_else(|| bad(path, "expected an array"))
}

/// A present, non-null field.
pub(crate) fn get<'a>(m: &'a Obj, key: &str) -> Option<&'a Value> {
    m.get(key).filter(|v| !v.is_null())
}

pub(crate) fn opt_str<'a>(m: &'a Obj, key: &str, path: &str) -> Result<Option<&'a str>, Untranslatable> {
    get(m, key).map(|v| v.as_str().ok_or_else(|| bad(at(path, key), "expected a string"))).transpose()
}

pub(crate) fn opt_f64(m: &Obj, key: &str, path: &str) -> Result<Option<f64>, Untranslatable> {
    get(m, key).map(|v| v.as_f64().ok_or_else(|| bad(at(path, key), "expected a number"))).transpose()
}

pub(crate) fn opt_i64(m: &Obj, key: &str, path: &str) -> Result<Option<i64>, Untranslatable> {
    get(m, key).map(|v| v.as_i64().ok_or_else(|| bad(at(path, key), "expected an integer"))).transpose()
}

pub(crate) fn opt_u32(m: &Obj, key: &str, path: &str) -> Result<Option<u32>, Untranslatable> {
    get(m, key)
        .map(|v| {
            v.as_u64().and_then(|n| u32::try_from(n).ok()).ok_or_else(|| bad(at(path, key), "expected a small integer"))
        })
        .transpose()
}

pub(crate) fn opt_bool(m: &Obj, key: &str, path: &str) -> Result<Option<bool>, Untranslatable> {
    get(m, key).map(|v| v.as_bool().ok_or_else(|| bad(at(path, key), "expected true or false"))).transpose()
}

/// `stop` as a string or a list of strings.
pub(crate) fn string_or_list(v: Option<&Value>, path: &str) -> Result<Vec<String>, Untranslatable> {
    match v {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(vec![s.clone()]),
        Some(Value::Array(a)) => a
            .iter()
            .enumerate()
            .map(|(i, s)| s.as_str().map(str::to_owned).ok_or_else(|| bad(idx(path, i), "expected a string")))
            .collect(),
        Some(_) => Err(bad(path, "expected a string or a list of strings")),
    }
}

/// `data:<mime>;base64,<data>` split, or `None` for any other URL.
pub(crate) fn data_url(url: &str) -> Option<(String, String)> {
    let rest = url.strip_prefix("data:")?;
    let (meta, data) = rest.split_once(',')?;
    let mime = meta.strip_suffix(";base64")?;
    Some((mime.to_owned(), data.to_owned()))
}

pub(crate) fn to_data_url(media_type: &str, data: &str) -> String {
    format!("data:{media_type};base64,{data}")
}

/// Tool-call arguments as the JSON object Messages and Gemini require: an
/// empty string is `{}`, a non-object value is wrapped as `{"value": …}`,
/// text that is not JSON at all is kept as `{"value": "<text>"}` so the
/// model still sees what it wrote.
pub(crate) fn args_object(args: &str) -> Value {
    if args.trim().is_empty() {
        return Value::Object(Map::new());
    }
    match serde_json::from_str::<Value>(args) {
        Ok(v @ Value::Object(_)) => v,
        Ok(v) => serde_json::json!({ "value": v }),
        Err(_) => serde_json::json!({ "value": args }),
    }
}

/// Arguments as JSON text (Chat, Responses): an object serialised compactly.
pub(crate) fn args_text(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "{}".to_owned())
}

/// The `text` of each object in a JSON list (a block's `content`, a
/// reasoning item's `summary`); none when the value is not a list.
pub(crate) fn texts<'a>(list: Option<&'a Value>) -> impl Iterator<Item = &'a str> + 'a {
    list.and_then(Value::as_array).into_iter().flatten().filter_map(|p| p.get("text").and_then(Value::as_str))
}

/// The text of text parts, joined.
pub(crate) fn joined(texts: impl IntoIterator<Item = impl AsRef<str>>, sep: &str) -> String {
    let mut out = String::new();
    for t in texts {
        let t = t.as_ref();
        if t.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push_str(sep);
        }
        out.push_str(t);
    }
    out
}

/// A media type guessed from a URL's extension, for targets that need one.
pub(crate) fn mime_from_url(url: &str) -> Option<&'static str> {
    let path = url.split(['?', '#']).next().unwrap_or(url).to_ascii_lowercase();
    let ext = path.rsplit('.').next()?;
    Some(match ext {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "pdf" => "application/pdf",
        "txt" => "text/plain",
        _ => return None,
    })
}

/// A hex digest of `parts`, for deterministic synthetic ids.
pub(crate) fn short_hash(parts: &[&str]) -> String {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    for p in parts {
        ctx.update(p.as_bytes());
        ctx.update(&[0]);
    }
    ctx.finish().as_ref().iter().take(12).map(|b| format!("{b:02x}")).collect()
}

/// A fresh random id suffix.
pub(crate) fn random_id() -> String {
    uuid::Uuid::now_v7().simple().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn arguments_become_objects() {
        assert_eq!(args_object(""), json!({}));
        assert_eq!(args_object("  "), json!({}));
        assert_eq!(args_object(r#"{"a":1}"#), json!({"a": 1}));
        assert_eq!(args_object("[1,2]"), json!({"value": [1, 2]}));
        assert_eq!(args_object("{oops"), json!({"value": "{oops"}));
    }

    #[test]
    fn data_urls_split() {
        assert_eq!(data_url("data:image/png;base64,iVBOR"), Some(("image/png".into(), "iVBOR".into())));
        assert_eq!(data_url("https://x/y.png"), None);
        assert_eq!(mime_from_url("https://x/y.PNG?s=1"), Some("image/png"));
    }
}
