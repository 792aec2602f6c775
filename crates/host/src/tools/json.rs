//! Setting values in a JSON (or JSONC) file without rewriting it.
//!
//! A user's settings file is theirs: its key order, indentation, comments
//! (Gemini CLI and opencode accept JSONC) and trailing commas must survive a
//! `connect`. So the file is not parsed into a tree and printed again: it is
//! scanned for the byte spans of objects and their members, and each edit
//! replaces one value's span or inserts one member after an object's last
//! member, in the indentation the file already uses.

use serde_json::Value;

use super::EditError;

/// Sets `path` (object keys from the root) to `value` in `text`, creating
/// the objects on the way. An empty text becomes a new, pretty-printed file.
pub fn set(text: &str, path: &[&str], value: &Value) -> Result<String, EditError> {
    if text.trim().is_empty() {
        return Ok(pretty(&nest(path, value), "", "  ") + "\n");
    }
    let mut scan = Scanner { text, pos: 0 };
    scan.skip_blank()?;
    let root = scan.pos;
    scan.value()?;
    set_in(text, root, path, value)
}

/// The value at `path`, if the file has one (comments and all).
pub fn get(text: &str, path: &[&str]) -> Option<Value> {
    let mut scan = Scanner { text, pos: 0 };
    scan.skip_blank().ok()?;
    let mut at = scan.pos;
    for key in path {
        let object = members(text, at).ok()?;
        at = object.members.iter().find(|m| m.key == *key)?.value.0;
    }
    let mut scan = Scanner { text, pos: at };
    let (start, end) = scan.value().ok()?;
    serde_json::from_str(&text[start..end]).ok()
}

/// `value` under the keys of `path`, innermost last.
fn nest(path: &[&str], value: &Value) -> Value {
    path.iter().rev().fold(value.clone(), |inner, key| Value::Object([(key.to_string(), inner)].into_iter().collect()))
}

fn set_in(text: &str, at: usize, path: &[&str], value: &Value) -> Result<String, EditError> {
    let Some((key, rest)) = path.split_first() else {
        return Err(EditError::Json("an edit needs a key".into()));
    };
    let object = members(text, at)?;
    let unit = indent_unit(text, &object);
    match object.members.iter().find(|m| m.key == *key) {
        Some(member) if rest.is_empty() => {
            let indent = line_indent(text, member.key_start);
            let (start, end) = member.value;
            Ok(format!("{}{}{}", &text[..start], pretty(value, &indent, &unit), &text[end..]))
        }
        Some(member) if text[member.value.0..].starts_with('{') => set_in(text, member.value.0, rest, value),
        Some(_) => Err(EditError::Json(format!("\"{key}\" is not an object"))),
        None => Ok(insert(text, &object, key, &nest(rest, value), &unit)),
    }
}

/// Adds `"key": value` as the object's last member.
fn insert(text: &str, object: &Object, key: &str, value: &Value, unit: &str) -> String {
    let quoted = Value::String(key.to_string());
    match object.members.last() {
        Some(last) => {
            let indent = line_indent(text, last.key_start);
            let (_, end) = last.value;
            // A trailing comma after the last member stays where it is.
            let after = &text[end..object.close];
            let (at, lead) = match after.find(',') {
                Some(i) if after[..i].trim().is_empty() => (end + i + 1, ""),
                _ => (end, ","),
            };
            // Members on one line (`{ "a": 1 }`) get the new one on that line too.
            let same_line = !text[object.open..last.key_start].contains('\n');
            let gap = if same_line { " ".to_string() } else { format!("\n{indent}") };
            let member = format!("{lead}{gap}{quoted}: {}", pretty(value, &indent, unit));
            format!("{}{member}{}", &text[..at], &text[at..])
        }
        None => {
            let outer = line_indent(text, object.open);
            let indent = format!("{outer}{unit}");
            let member = format!("\n{indent}{quoted}: {}\n{outer}", pretty(value, &indent, unit));
            format!("{}{member}{}", &text[..object.open + 1], &text[object.close..])
        }
    }
}

/// `value` pretty-printed with `unit` per level, continuation lines at `indent`.
fn pretty(value: &Value, indent: &str, unit: &str) -> String {
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(unit.as_bytes());
    let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
    if serde::Serialize::serialize(value, &mut ser).is_err() {
        return value.to_string();
    }
    String::from_utf8_lossy(&out).replace('\n', &format!("\n{indent}"))
}

/// The whitespace at the start of the line holding byte `at`.
fn line_indent(text: &str, at: usize) -> String {
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    text[start..].chars().take_while(|c| *c == ' ' || *c == '\t').collect()
}

/// One level of the file's indentation, from an object's members (two spaces if it has none).
fn indent_unit(text: &str, object: &Object) -> String {
    let outer = line_indent(text, object.open);
    object
        .members
        .first()
        .map(|m| line_indent(text, m.key_start))
        .and_then(|inner| inner.strip_prefix(&outer).map(str::to_string))
        .filter(|unit| !unit.is_empty())
        .unwrap_or_else(|| "  ".to_string())
}

#[derive(Debug)]
struct Member {
    key: String,
    key_start: usize,
    /// The value's byte span.
    value: (usize, usize),
}

#[derive(Debug)]
struct Object {
    open: usize,
    close: usize,
    members: Vec<Member>,
}

/// The members of the object whose `{` is at `at`.
fn members(text: &str, at: usize) -> Result<Object, EditError> {
    let mut scan = Scanner { text, pos: at };
    scan.expect(b'{')?;
    let mut members = Vec::new();
    loop {
        scan.skip_blank()?;
        match scan.peek() {
            Some(b'}') => return Ok(Object { open: at, close: scan.pos, members }),
            Some(b',') => scan.pos += 1,
            Some(b'"') => {
                let key_start = scan.pos;
                let (s, e) = scan.string()?;
                let key: String = serde_json::from_str(&text[s..e]).map_err(|e| EditError::Json(e.to_string()))?;
                scan.skip_blank()?;
                scan.expect(b':')?;
                scan.skip_blank()?;
                let value = scan.value()?;
                members.push(Member { key, key_start, value });
            }
            _ => return Err(scan.error("a key or `}`")),
        }
    }
}

/// Walks JSON text by bytes; positions are byte offsets into `text`.
struct Scanner<'a> {
    text: &'a str,
    pos: usize,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    fn error(&self, wanted: &str) -> EditError {
        let line = self.text[..self.pos.min(self.text.len())].matches('\n').count() + 1;
        EditError::Json(format!("line {line}: expected {wanted}"))
    }

    fn expect(&mut self, byte: u8) -> Result<(), EditError> {
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.error(&format!("`{}`", byte as char)))
        }
    }

    /// Skips whitespace and `//` or `/* */` comments.
    fn skip_blank(&mut self) -> Result<(), EditError> {
        let bytes = self.text.as_bytes();
        loop {
            match (self.peek(), bytes.get(self.pos + 1)) {
                (Some(b' ' | b'\t' | b'\r' | b'\n'), _) => self.pos += 1,
                (Some(b'/'), Some(b'/')) => {
                    self.pos = self.text[self.pos..].find('\n').map_or(self.text.len(), |i| self.pos + i);
                }
                (Some(b'/'), Some(b'*')) => match self.text[self.pos + 2..].find("*/") {
                    Some(i) => self.pos += i + 4,
                    None => return Err(self.error("`*/`")),
                },
                _ => return Ok(()),
            }
        }
    }

    /// A string's span, quotes included.
    fn string(&mut self) -> Result<(usize, usize), EditError> {
        let start = self.pos;
        self.expect(b'"')?;
        let bytes = self.text.as_bytes();
        while let Some(&b) = bytes.get(self.pos) {
            self.pos += 1;
            match b {
                b'\\' => self.pos += 1,
                b'"' => return Ok((start, self.pos)),
                _ => {}
            }
        }
        Err(self.error("the end of a string"))
    }

    /// Any value's span.
    fn value(&mut self) -> Result<(usize, usize), EditError> {
        let start = self.pos;
        match self.peek() {
            Some(b'"') => self.string(),
            Some(open @ (b'{' | b'[')) => {
                let close = if open == b'{' { b'}' } else { b']' };
                self.pos += 1;
                loop {
                    self.skip_blank()?;
                    match self.peek() {
                        Some(b) if b == close => {
                            self.pos += 1;
                            return Ok((start, self.pos));
                        }
                        Some(b',' | b':') => self.pos += 1,
                        Some(_) => {
                            self.value()?;
                        }
                        None => return Err(self.error(&format!("`{}`", close as char))),
                    }
                }
            }
            Some(_) => {
                let bytes = self.text.as_bytes();
                while bytes.get(self.pos).is_some_and(|b| b.is_ascii_alphanumeric() || b"+-.".contains(b)) {
                    self.pos += 1;
                }
                if self.pos == start {
                    return Err(self.error("a value"));
                }
                Ok((start, self.pos))
            }
            None => Err(self.error("a value")),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn a_new_key_goes_last_in_the_files_own_indentation() {
        let text = "{\n    \"theme\": \"dark\",\n    \"env\": {\n        \"FOO\": \"1\"\n    }\n}\n";
        let out = set(text, &["env", "BAR"], &json!("2")).unwrap();
        assert_eq!(
            out,
            "{\n    \"theme\": \"dark\",\n    \"env\": {\n        \"FOO\": \"1\",\n        \"BAR\": \"2\"\n    }\n}\n"
        );
    }

    #[test]
    fn an_existing_value_is_replaced_in_place() {
        let text = "{ \"env\": { \"URL\": \"old\", \"KEEP\": true } }";
        assert_eq!(
            set(text, &["env", "URL"], &json!("new")).unwrap(),
            "{ \"env\": { \"URL\": \"new\", \"KEEP\": true } }"
        );
        assert_eq!(
            set(text, &["env", "MORE"], &json!(1)).unwrap(),
            "{ \"env\": { \"URL\": \"old\", \"KEEP\": true, \"MORE\": 1 } }"
        );
    }

    #[test]
    fn missing_objects_are_created_and_comments_and_trailing_commas_survive() {
        let text = "{\n  // my theme\n  \"theme\": \"dark\", /* keep */\n}\n";
        let out = set(text, &["security", "auth", "selectedType"], &json!("gemini-api-key")).unwrap();
        assert_eq!(
            out,
            "{\n  // my theme\n  \"theme\": \"dark\",\n  \"security\": {\n    \"auth\": {\n      \"selectedType\": \"gemini-api-key\"\n    }\n  } /* keep */\n}\n"
        );
        assert_eq!(get(&out, &["security", "auth", "selectedType"]), Some(json!("gemini-api-key")));
        assert_eq!(get(&out, &["theme"]), Some(json!("dark")));
    }

    #[test]
    fn an_empty_object_and_an_empty_file_get_the_member() {
        assert_eq!(set("{}", &["a"], &json!(1)).unwrap(), "{\n  \"a\": 1\n}");
        assert_eq!(set("", &["env", "A"], &json!("x")).unwrap(), "{\n  \"env\": {\n    \"A\": \"x\"\n  }\n}\n");
    }

    #[test]
    fn strings_with_braces_and_escapes_do_not_confuse_the_scan() {
        let text = r#"{"a": "}{\"", "b": [1, {"c": "]"}], "env": {}}"#;
        let out = set(text, &["env", "K"], &json!("v")).unwrap();
        assert_eq!(get(&out, &["a"]), Some(json!("}{\"")));
        assert_eq!(get(&out, &["env", "K"]), Some(json!("v")));
        assert!(out.starts_with(r#"{"a": "}{\"", "b": [1, {"c": "]"}], "env": {"#));
    }

    #[test]
    fn a_broken_file_is_an_error_not_a_rewrite() {
        assert!(set("{\"a\": ", &["b"], &json!(1)).is_err());
        assert!(set("{\"a\": 1} ", &["a", "b"], &json!(1)).is_err());
    }
}
