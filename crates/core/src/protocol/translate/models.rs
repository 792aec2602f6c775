//! Model listings and token counts in each client's shape.
//!
//! The gateway lists the aliases it can route, not any provider's catalogue;
//! the caller builds the entries.

use std::time::{Duration, UNIX_EPOCH};

use serde_json::{json, Value};

use super::ir::Format;

/// One routable model.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ModelEntry {
    pub id: String,
    /// Who serves it (OpenAI's `owned_by`): a provider name.
    pub owned_by: String,
    /// Unix seconds.
    pub created: u64,
    pub display_name: Option<String>,
    pub input_token_limit: Option<u64>,
    pub output_token_limit: Option<u64>,
}

/// The methods a Gemini client may call on a listed model.
const GEMINI_METHODS: [&str; 3] = ["generateContent", "streamGenerateContent", "countTokens"];

fn rfc3339(secs: u64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(secs)).to_string()
}

fn entry(format: Format, m: &ModelEntry) -> Value {
    let name = m.display_name.clone().unwrap_or_else(|| m.id.clone());
    match format {
        Format::Chat | Format::Responses => {
            json!({"id": m.id, "object": "model", "created": m.created, "owned_by": m.owned_by})
        }
        Format::Messages => {
            json!({"type": "model", "id": m.id, "display_name": name, "created_at": rfc3339(m.created)})
        }
        Format::Gemini => {
            let mut v = json!({
                "name": format!("models/{}", m.id),
                "baseModelId": m.id,
                "version": "001",
                "displayName": name,
                "supportedGenerationMethods": GEMINI_METHODS,
            });
            if let Some(n) = m.input_token_limit {
                v["inputTokenLimit"] = json!(n);
            }
            if let Some(n) = m.output_token_limit {
                v["outputTokenLimit"] = json!(n);
            }
            v
        }
    }
}

/// The model list in the client's format (`GET /v1/models`,
/// `GET /v1beta/models`). Everything fits in one page.
pub fn encode_model_list(format: Format, models: &[ModelEntry]) -> Vec<u8> {
    let data: Vec<Value> = models.iter().map(|m| entry(format, m)).collect();
    let body = match format {
        Format::Chat | Format::Responses => json!({"object": "list", "data": data}),
        Format::Messages => json!({
            "data": data,
            "has_more": false,
            "first_id": models.first().map(|m| m.id.clone()),
            "last_id": models.last().map(|m| m.id.clone()),
        }),
        Format::Gemini => json!({"models": data}),
    };
    serde_json::to_vec(&body).unwrap_or_default()
}

/// One model in the client's format (`GET /v1/models/{id}`,
/// `GET /v1beta/models/{id}`).
pub fn encode_model(format: Format, model: &ModelEntry) -> Vec<u8> {
    serde_json::to_vec(&entry(format, model)).unwrap_or_default()
}

/// A token count in the client's format: Messages `count_tokens`, Gemini
/// `countTokens`, Responses `input_tokens`.
pub fn encode_token_count(format: Format, tokens: u64) -> Vec<u8> {
    let body = match format {
        Format::Messages => json!({"input_tokens": tokens}),
        Format::Gemini => json!({"totalTokens": tokens}),
        Format::Chat | Format::Responses => json!({"object": "response.input_tokens", "input_tokens": tokens}),
    };
    serde_json::to_vec(&body).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn models() -> Vec<ModelEntry> {
        vec![
            ModelEntry {
                id: "claude-sonnet-4-5".into(),
                owned_by: "anthropic".into(),
                created: 1_700_000_000,
                ..Default::default()
            },
            ModelEntry {
                id: "gpt-5".into(),
                owned_by: "openai".into(),
                created: 1_750_000_000,
                display_name: Some("GPT-5".into()),
                input_token_limit: Some(400_000),
                output_token_limit: Some(128_000),
            },
        ]
    }

    fn parse(b: Vec<u8>) -> Value {
        serde_json::from_slice(&b).unwrap()
    }

    #[test]
    fn openai_list() {
        let v = parse(encode_model_list(Format::Chat, &models()));
        assert_eq!(v["object"], "list");
        assert_eq!(
            v["data"][0],
            json!({"id": "claude-sonnet-4-5", "object": "model", "created": 1_700_000_000u64, "owned_by": "anthropic"})
        );
    }

    #[test]
    fn anthropic_list_pages_and_dates() {
        let v = parse(encode_model_list(Format::Messages, &models()));
        assert_eq!(v["has_more"], false);
        assert_eq!(v["first_id"], "claude-sonnet-4-5");
        assert_eq!(v["last_id"], "gpt-5");
        assert_eq!(v["data"][0]["created_at"], "2023-11-14T22:13:20Z");
        assert_eq!(v["data"][1]["display_name"], "GPT-5");
        assert_eq!(v["data"][0]["type"], "model");
        let empty = parse(encode_model_list(Format::Messages, &[]));
        assert_eq!((empty["first_id"].clone(), empty["last_id"].clone()), (Value::Null, Value::Null));
    }

    #[test]
    fn gemini_list_names_and_methods() {
        let v = parse(encode_model_list(Format::Gemini, &models()));
        assert_eq!(v["models"][1]["name"], "models/gpt-5");
        assert_eq!(v["models"][1]["inputTokenLimit"], 400_000);
        let methods = v["models"][0]["supportedGenerationMethods"].as_array().unwrap();
        assert!(methods.contains(&json!("generateContent")) && methods.contains(&json!("countTokens")));
        assert_eq!(parse(encode_model(Format::Gemini, &models()[0]))["name"], "models/claude-sonnet-4-5");
    }

    #[test]
    fn token_counts() {
        assert_eq!(parse(encode_token_count(Format::Messages, 12)), json!({"input_tokens": 12}));
        assert_eq!(parse(encode_token_count(Format::Gemini, 12)), json!({"totalTokens": 12}));
    }
}
