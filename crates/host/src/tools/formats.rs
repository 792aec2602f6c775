//! The file formats the tools keep their settings in, each edited in place:
//! JSON by byte spans ([`super::json`]), TOML with `toml_edit` (which keeps
//! comments, order and spacing), and the flat `key: value` / `KEY=value`
//! files (aider's YAML, a `.env`) line by line.

use serde_json::Value;
use toml_edit::{DocumentMut, Item, Table};

use super::{json, EditError};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    Toml,
    /// Top-level `key: value` lines (aider's `.aider.conf.yml`).
    FlatYaml,
    /// `KEY=value` lines.
    Dotenv,
}

impl Format {
    /// `text` with `path` set to `value`; everything else as it was.
    pub fn set(self, text: &str, path: &[&str], value: &Value) -> Result<String, EditError> {
        match self {
            Format::Json => json::set(text, path, value),
            Format::Toml => toml_set(text, path, value),
            Format::FlatYaml => Ok(line_set(text, flat(path)?, &yaml_scalar(value), ": ")),
            Format::Dotenv => Ok(line_set(text, flat(path)?, &dotenv_scalar(value), "=")),
        }
    }

    /// The string at `path`, if the file has one.
    pub fn get(self, text: &str, path: &[&str]) -> Option<String> {
        match self {
            Format::Json => json::get(text, path)?.as_str().map(str::to_string),
            Format::Toml => {
                let doc: DocumentMut = text.parse().ok()?;
                let mut item = doc.as_item();
                for key in path {
                    item = item.get(key)?;
                }
                item.as_str().map(str::to_string)
            }
            Format::FlatYaml => line_get(text, path.first()?, ':'),
            Format::Dotenv => line_get(text, path.first()?, '='),
        }
    }
}

fn flat<'a>(path: &[&'a str]) -> Result<&'a str, EditError> {
    match path {
        [key] => Ok(key),
        _ => Err(EditError::Unsupported("nested keys in a flat file")),
    }
}

fn toml_set(text: &str, path: &[&str], value: &Value) -> Result<String, EditError> {
    let mut doc: DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| EditError::Toml(e.to_string()))?;
    let Some((last, parents)) = path.split_last() else {
        return Err(EditError::Toml("an edit needs a key".into()));
    };
    let mut table = doc.as_table_mut();
    for key in parents {
        let entry = table.entry(key).or_insert_with(|| {
            let mut t = Table::new();
            // `[a.b]` without an empty `[a]` above it.
            t.set_implicit(true);
            Item::Table(t)
        });
        table = entry.as_table_mut().ok_or_else(|| EditError::Toml(format!("`{key}` is not a table")))?;
    }
    let item = toml_item(value)?;
    match table.get_mut(last) {
        // A replaced value keeps its comments and spacing.
        Some(Item::Value(old)) if item.is_value() => {
            let decor = old.decor().clone();
            if let Item::Value(mut new) = item {
                *new.decor_mut() = decor;
                *old = new;
            }
        }
        _ => {
            table.insert(last, item);
        }
    }
    Ok(doc.to_string())
}

/// A JSON value as TOML: objects become tables, the rest inline values.
fn toml_item(value: &Value) -> Result<Item, EditError> {
    match value {
        Value::Object(map) => {
            let mut table = Table::new();
            for (k, v) in map {
                table.insert(k, toml_item(v)?);
            }
            Ok(Item::Table(table))
        }
        Value::String(s) => Ok(toml_edit::value(s.as_str())),
        Value::Bool(b) => Ok(toml_edit::value(*b)),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Ok(toml_edit::value(i)),
            None => Ok(toml_edit::value(n.as_f64().unwrap_or_default())),
        },
        Value::Null | Value::Array(_) => Err(EditError::Unsupported("arrays or null in TOML")),
    }
}

fn yaml_scalar(value: &Value) -> String {
    match value {
        // Double-quoted YAML accepts JSON's string escapes.
        Value::String(s) => Value::String(s.clone()).to_string(),
        other => other.to_string(),
    }
}

fn dotenv_scalar(value: &Value) -> String {
    match value {
        Value::String(s) if s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./:@".contains(c)) => s.clone(),
        Value::String(s) => Value::String(s.clone()).to_string(),
        other => other.to_string(),
    }
}

/// Is `line` the setting of `key` (`key: …`, `key=…`, `export key=…`)?
fn is_key_line(line: &str, key: &str, sep: char) -> bool {
    let line = line.strip_prefix("export ").unwrap_or(line);
    line.strip_prefix(key).is_some_and(|rest| rest.trim_start().starts_with(sep))
}

/// Replaces the line setting `key` (unindented: top level), or appends one.
fn line_set(text: &str, key: &str, value: &str, sep: &str) -> String {
    let sep_char = sep.chars().next().unwrap_or('=');
    let new_line = format!("{key}{sep}{value}");
    let mut found = false;
    let mut out: Vec<String> = text
        .split_inclusive('\n')
        .map(|line| {
            if !found && is_key_line(line, key, sep_char) {
                found = true;
                let ending = &line[line.trim_end_matches(['\r', '\n']).len()..];
                format!("{new_line}{ending}")
            } else {
                line.to_string()
            }
        })
        .collect();
    if !found {
        if out.last().is_some_and(|l| !l.ends_with('\n')) {
            out.push("\n".into());
        }
        out.push(format!("{new_line}\n"));
    }
    out.concat()
}

fn line_get(text: &str, key: &str, sep: char) -> Option<String> {
    let line = text.lines().find(|l| is_key_line(l, key, sep))?;
    let (_, value) = line.split_once(sep)?;
    let value = value.trim();
    Some(serde_json::from_str::<String>(value).unwrap_or_else(|_| value.trim_matches('\'').to_string()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn toml_keeps_comments_order_and_other_tables() {
        let text = "# my codex\nmodel = \"o3\" # the one I like\n\n[analytics]\nenabled = false\n";
        let out = Format::Toml.set(text, &["model_provider"], &json!("switchyard")).unwrap();
        let out = Format::Toml
            .set(&out, &["model_providers", "switchyard"], &json!({"name": "Switchyard", "base_url": "http://x/v1"}))
            .unwrap();
        let out = Format::Toml.set(&out, &["model"], &json!("gpt-test")).unwrap();
        assert_eq!(
            out,
            "# my codex\nmodel = \"gpt-test\" # the one I like\nmodel_provider = \"switchyard\"\n\n[analytics]\nenabled = false\n\n\
             [model_providers.switchyard]\nbase_url = \"http://x/v1\"\nname = \"Switchyard\"\n"
        );
        assert_eq!(
            Format::Toml.get(&out, &["model_providers", "switchyard", "base_url"]).as_deref(),
            Some("http://x/v1")
        );
    }

    #[test]
    fn flat_yaml_replaces_the_top_level_line_only() {
        let text = "# aider\nmodel: gpt-4o\nnested:\n  openai-api-base: keep\nopenai-api-base: http://old\n";
        let out = Format::FlatYaml.set(text, &["openai-api-base"], &json!("http://new/v1")).unwrap();
        assert_eq!(
            out,
            "# aider\nmodel: gpt-4o\nnested:\n  openai-api-base: keep\nopenai-api-base: \"http://new/v1\"\n"
        );
        let out = Format::FlatYaml.set("dark-mode: true", &["openai-api-key"], &json!("sy-1")).unwrap();
        assert_eq!(out, "dark-mode: true\nopenai-api-key: \"sy-1\"\n");
        assert_eq!(Format::FlatYaml.get(&out, &["openai-api-key"]).as_deref(), Some("sy-1"));
    }

    #[test]
    fn dotenv_lines() {
        let text = "# mine\nexport FOO=bar\nGOOGLE_GEMINI_BASE_URL=http://old\r\n";
        let out = Format::Dotenv.set(text, &["GOOGLE_GEMINI_BASE_URL"], &json!("http://127.0.0.1:1")).unwrap();
        assert_eq!(out, "# mine\nexport FOO=bar\nGOOGLE_GEMINI_BASE_URL=http://127.0.0.1:1\r\n");
        assert_eq!(Format::Dotenv.get(&out, &["FOO"]).as_deref(), Some("bar"));
        assert!(Format::Dotenv.set("", &["A", "B"], &json!("x")).is_err());
    }
}
