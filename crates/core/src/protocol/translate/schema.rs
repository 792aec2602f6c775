//! Tool-parameter schemas made acceptable to each target.
//!
//! Every target wants an object at the root (Claude Code's no-argument tools
//! send none, and Vertex rejects other roots). Gemini's `parameters` take
//! only an OpenAPI-3 subset, so [`gemini`] rewrites a JSON schema into it:
//! references are inlined, `const` becomes a one-value enum, type unions with
//! `null` become `nullable`, `oneOf`/`allOf` become `anyOf` or are merged, and
//! every keyword outside the subset is removed, recursively.

use serde_json::{json, Map, Value};

/// The root fixed: `{type: object, properties: {}}` added where missing.
pub fn object_root(schema: &Value) -> Value {
    let mut out = match schema {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    if !out.contains_key("type") && !out.contains_key("anyOf") && !out.contains_key("oneOf") {
        out.insert("type".into(), json!("object"));
    }
    if out.get("type") == Some(&json!("object")) && !matches!(out.get("properties"), Some(Value::Object(_))) {
        out.insert("properties".into(), json!({}));
    }
    Value::Object(out)
}

/// Whether a schema has no properties at all (a no-argument tool).
pub fn is_empty_object(schema: &Value) -> bool {
    schema.get("properties").and_then(Value::as_object).is_none_or(Map::is_empty)
        && schema.get("anyOf").is_none()
        && schema.get("type").is_none_or(|t| t == "object")
}

const ALLOWED: &[&str] = &[
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "items",
    "properties",
    "required",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "minimum",
    "maximum",
    "default",
    "example",
    "anyOf",
    "propertyOrdering",
];

/// How deep references are followed before giving up (recursive schemas).
const MAX_DEPTH: usize = 16;

/// The schema rewritten into Gemini's OpenAPI subset.
pub fn gemini(schema: &Value) -> Value {
    let defs = collect_defs(schema);
    sanitise(schema, &defs, 0)
}

/// Whether Gemini's subset already expresses the schema unchanged.
pub fn fits_gemini(schema: &Value) -> bool {
    gemini(schema) == *schema
}

fn collect_defs(schema: &Value) -> Map<String, Value> {
    let mut defs = Map::new();
    for key in ["$defs", "definitions"] {
        if let Some(Value::Object(m)) = schema.get(key) {
            for (k, v) in m {
                defs.insert(format!("#/{key}/{k}"), v.clone());
            }
        }
    }
    defs
}

fn sanitise(schema: &Value, defs: &Map<String, Value>, depth: usize) -> Value {
    let Value::Object(map) = schema else {
        return json!({});
    };
    if let Some(target) = map.get("$ref").and_then(Value::as_str) {
        return match defs.get(target) {
            Some(def) if depth < MAX_DEPTH => {
                let mut merged = def.clone();
                if let (Value::Object(m), Some(d)) = (&mut merged, map.get("description")) {
                    m.insert("description".into(), d.clone());
                }
                sanitise(&merged, defs, depth + 1)
            }
            _ => json!({"type": "object", "description": "(recursive or unknown reference)"}),
        };
    }
    let mut map = map.clone();
    flatten_all_of(&mut map);
    if let Some(one_of) = map.remove("oneOf") {
        map.entry("anyOf").or_insert(one_of);
    }
    if let Some(c) = map.remove("const") {
        map.insert("enum".into(), json!([c]));
    }
    fix_type(&mut map);
    let mut out = Map::new();
    for (k, v) in map {
        if !ALLOWED.contains(&k.as_str()) {
            continue;
        }
        let v = match k.as_str() {
            "properties" => Value::Object(
                v.as_object()
                    .map(|p| p.iter().map(|(name, s)| (name.clone(), sanitise(s, defs, depth + 1))).collect())
                    .unwrap_or_default(),
            ),
            "items" => sanitise(&v, defs, depth + 1),
            "anyOf" => Value::Array(
                v.as_array().map(|a| a.iter().map(|s| sanitise(s, defs, depth + 1)).collect()).unwrap_or_default(),
            ),
            _ => v,
        };
        out.insert(k, v);
    }
    fix_enum_and_format(&mut out);
    if out.get("type") == Some(&json!("array")) && !out.contains_key("items") {
        out.insert("items".into(), json!({"type": "string"}));
    }
    if let (Some(Value::Array(req)), Some(Value::Object(props))) = (out.get("required"), out.get("properties")) {
        let kept: Vec<Value> =
            req.iter().filter(|r| r.as_str().is_some_and(|r| props.contains_key(r))).cloned().collect();
        out.insert("required".into(), Value::Array(kept));
    }
    if out.get("required").and_then(Value::as_array).is_some_and(Vec::is_empty) {
        out.remove("required");
    }
    Value::Object(out)
}

/// `allOf` of object schemas merged into one; any other `allOf` becomes
/// `anyOf` (looser, but Gemini has no conjunction).
fn flatten_all_of(map: &mut Map<String, Value>) {
    let Some(Value::Array(all)) = map.remove("allOf") else {
        return;
    };
    if all.iter().all(|s| s.get("properties").is_some() || s.get("type") == Some(&json!("object"))) {
        let mut props = map.get("properties").and_then(Value::as_object).cloned().unwrap_or_default();
        let mut required: Vec<Value> = map.get("required").and_then(Value::as_array).cloned().unwrap_or_default();
        for s in &all {
            if let Some(p) = s.get("properties").and_then(Value::as_object) {
                props.extend(p.clone());
            }
            if let Some(r) = s.get("required").and_then(Value::as_array) {
                required.extend(r.iter().cloned());
            }
        }
        map.insert("type".into(), json!("object"));
        map.insert("properties".into(), Value::Object(props));
        if !required.is_empty() {
            map.insert("required".into(), Value::Array(required));
        }
    } else if all.len() == 1 {
        if let Some(Value::Object(only)) = all.into_iter().next() {
            for (k, v) in only {
                map.entry(k).or_insert(v);
            }
        }
    } else {
        map.entry("anyOf").or_insert(Value::Array(all));
    }
}

/// `type: [x, "null"]` → `type: x, nullable: true`; a missing type inferred
/// from `properties` or `items`.
fn fix_type(map: &mut Map<String, Value>) {
    if let Some(Value::Array(types)) = map.get("type") {
        let nullable = types.iter().any(|t| t == "null");
        let rest: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
        match rest.len() {
            0 => {
                map.remove("type");
            }
            1 => {
                map.insert("type".into(), rest[0].clone());
            }
            _ => {
                map.remove("type");
                let any: Vec<Value> = rest.into_iter().map(|t| json!({"type": t})).collect();
                map.insert("anyOf".into(), Value::Array(any));
            }
        }
        if nullable {
            map.insert("nullable".into(), json!(true));
        }
    }
    if !map.contains_key("type") && !map.contains_key("anyOf") {
        if map.contains_key("properties") {
            map.insert("type".into(), json!("object"));
        } else if map.contains_key("items") {
            map.insert("type".into(), json!("array"));
        }
    }
}

fn fix_enum_and_format(out: &mut Map<String, Value>) {
    let ty = out.get("type").and_then(Value::as_str).unwrap_or("").to_owned();
    if let Some(Value::Array(values)) = out.get("enum").cloned() {
        if ty == "string" || ty.is_empty() {
            let strings =
                values.iter().map(|v| Value::String(v.as_str().map_or_else(|| v.to_string(), str::to_owned))).collect();
            out.insert("enum".into(), Value::Array(strings));
            if ty.is_empty() {
                out.insert("type".into(), json!("string"));
            }
        } else {
            out.remove("enum");
            let list: Vec<String> = values.iter().map(Value::to_string).collect();
            let note = format!("Allowed values: {}.", list.join(", "));
            let description = match out.get("description").and_then(Value::as_str) {
                Some(d) => format!("{d} {note}"),
                None => note,
            };
            out.insert("description".into(), json!(description));
        }
    }
    let allowed: &[&str] = match out.get("type").and_then(Value::as_str) {
        Some("string") if out.get("enum").and_then(Value::as_array).is_some_and(|e| !e.is_empty()) => {
            &["enum", "date-time"]
        }
        Some("string") => &["date-time"],
        Some("number") => &["float", "double"],
        Some("integer") => &["int32", "int64"],
        _ => &[],
    };
    if out.get("format").and_then(Value::as_str).is_some_and(|f| !allowed.contains(&f)) {
        out.remove("format");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_or_empty_root_becomes_an_object() {
        assert_eq!(object_root(&Value::Null), json!({"type": "object", "properties": {}}));
        assert_eq!(object_root(&json!({})), json!({"type": "object", "properties": {}}));
        assert_eq!(object_root(&json!({"type": "object"})), json!({"type": "object", "properties": {}}));
        let full = json!({"type": "object", "properties": {"a": {"type": "string"}}});
        assert_eq!(object_root(&full), full);
        assert!(is_empty_object(&object_root(&Value::Null)));
        assert!(!is_empty_object(&full));
    }

    #[test]
    fn gemini_gets_only_its_subset() {
        let schema = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "url": {"type": "string", "format": "uri"},
                "when": {"type": "string", "format": "date-time"},
                "note": {"type": ["string", "null"]},
                "mode": {"const": "fast"},
                "level": {"type": "integer", "enum": [1, 2, 3]},
                "tags": {"type": "array"},
                "item": {"$ref": "#/$defs/item"},
                "either": {"oneOf": [{"type": "string"}, {"type": "number", "exclusiveMinimum": 0}]},
                "map": {"type": "object", "propertyNames": {"pattern": "^a"}, "properties": {"k": {"type": "string"}}}
            },
            "required": ["url", "ghost"],
            "$defs": {"item": {"type": "object", "properties": {"id": {"type": "integer", "format": "int64"}}}}
        });
        let out = gemini(&schema);
        assert_eq!(
            out,
            json!({
                "type": "object",
                "properties": {
                    "url": {"type": "string"},
                    "when": {"type": "string", "format": "date-time"},
                    "note": {"type": "string", "nullable": true},
                    "mode": {"type": "string", "enum": ["fast"]},
                    "level": {"type": "integer", "description": "Allowed values: 1, 2, 3."},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "item": {"type": "object", "properties": {"id": {"type": "integer", "format": "int64"}}},
                    "either": {"anyOf": [{"type": "string"}, {"type": "number"}]},
                    "map": {"type": "object", "properties": {"k": {"type": "string"}}}
                },
                "required": ["url"]
            })
        );
        assert!(fits_gemini(&out));
        assert!(!fits_gemini(&schema));
    }

    #[test]
    fn recursive_references_stop() {
        let schema = json!({
            "type": "object",
            "properties": {"node": {"$ref": "#/$defs/node"}},
            "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}}
        });
        let out = gemini(&schema);
        assert_eq!(out["properties"]["node"]["type"], "object");
        assert!(out.to_string().len() < 20_000);
    }

    #[test]
    fn all_of_objects_merge() {
        let schema = json!({"allOf": [
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
            {"properties": {"b": {"type": "number"}}}
        ]});
        assert_eq!(
            gemini(&schema),
            json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "number"}}, "required": ["a"]})
        );
    }
}
