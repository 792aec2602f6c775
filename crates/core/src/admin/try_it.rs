//! `POST /admin/try`: a one-line "say hi" sent through the gateway's own
//! proxy, so a first-time user sees an answer (and, from the request's
//! record, its attempts) without a terminal or a coding tool. It is an
//! ordinary chat request: routed, journaled and counted like any other,
//! with a small output limit so it costs next to nothing.

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, Uri};
use axum::routing::post;
use axum::{Json, Router};
use secrecy::ExposeSecret;
use serde::{Deserialize, Serialize};

use crate::admin::base::AdminError;
use crate::http::correlation::RequestIds;
use crate::protocol::Endpoint;
use crate::proxy::{self, Inbound};
use crate::Gateway;

/// What the test request asks.
const PROMPT: &str = "Say hi in one short line.";
/// Its output limit: one line.
const MAX_TOKENS: u32 = 32;
/// The most of the answer's body read back.
const MAX_ANSWER_BYTES: usize = 256 * 1024;
/// The user agent it is on record under.
const USER_AGENT: &str = "switchyard-dashboard (test request)";

pub fn routes() -> Router<Gateway> {
    Router::new().route("/admin/try", post(try_it))
}

/// Which model to ask; the first one a provider lists when absent.
#[derive(Debug, Default, Deserialize)]
struct TryAsk {
    model: Option<String>,
}

/// What the test request got back.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct TryResult {
    /// Its id in the history (`GET /admin/requests/{id}` shows its attempts).
    pub request_id: String,
    pub model: String,
    pub status: u16,
    /// The model's answer, when it gave one.
    pub answer: Option<String>,
    /// Why there is no answer.
    pub error: Option<String>,
}

async fn try_it(State(gw): State<Gateway>, ask: Option<Json<TryAsk>>) -> Result<Json<TryResult>, AdminError> {
    let ask = ask.map(|Json(a)| a).unwrap_or_default();
    let model = match ask.model.filter(|m| !m.trim().is_empty()) {
        Some(m) => m,
        None => {
            first_model(&gw).ok_or_else(|| AdminError::unprocessable("no_model", "no provider lists a model to ask"))?
        }
    };
    let body = serde_json::json!({
        "model": model,
        "messages": [{ "role": "user", "content": PROMPT }],
        "max_tokens": MAX_TOKENS,
    });
    let ids = RequestIds::from_headers(&HeaderMap::new());
    let request_id = ids.request_id.clone();
    let inbound = Inbound {
        endpoint: Endpoint::ChatCompletions,
        path_model: None,
        ids,
        headers: headers(&gw),
        uri: Uri::from_static("/v1/chat/completions"),
        peer: None,
    };
    let response = proxy::handle(&gw, inbound, Body::from(body.to_string())).await;
    let status = response.status().as_u16();
    let bytes = axum::body::to_bytes(response.into_body(), MAX_ANSWER_BYTES)
        .await
        .map_err(|e| AdminError::internal("answer_unreadable", e.to_string()))?;
    let (answer, error) = read_answer(&bytes);
    Ok(Json(TryResult { request_id, model, status, answer, error }))
}

/// The headers a client of this gateway sends: JSON, and the local access
/// token when the gateway asks for one.
fn headers(gw: &Gateway) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(header::USER_AGENT, HeaderValue::from_static(USER_AGENT));
    let token = gw.access_token().and_then(|t| HeaderValue::try_from(format!("Bearer {}", t.expose_secret())).ok());
    if let Some(mut value) = token {
        value.set_sensitive(true);
        headers.insert(header::AUTHORIZATION, value);
    }
    headers
}

/// The first model an enabled provider lists, preferring one that can serve now.
fn first_model(gw: &Gateway) -> Option<String> {
    let live = gw.live();
    let enabled = || live.providers.iter().filter(|p| p.is_enabled());
    let first = |p: &std::sync::Arc<crate::upstream::provider::Provider>| {
        p.config.models.client_names().next().map(str::to_string)
    };
    let serving = enabled().filter(|p| p.keys.problem().is_none()).find_map(first);
    serving.or_else(|| enabled().find_map(first))
}

/// The answer of an OpenAI chat completion, or the error it carries.
fn read_answer(bytes: &[u8]) -> (Option<String>, Option<String>) {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(bytes) else {
        return (None, Some(String::from_utf8_lossy(bytes).chars().take(500).collect()));
    };
    let answer = v["choices"][0]["message"]["content"].as_str().map(|s| s.trim().to_string());
    let error = v["error"]["message"].as_str().map(str::to_string);
    match (answer, error) {
        (Some(a), None) => (Some(a), None),
        (a, Some(e)) => (a, Some(e)),
        (None, None) => (None, Some("the answer had no message".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_or_its_error_is_read_from_a_chat_completion() {
        let ok = br#"{"choices":[{"message":{"role":"assistant","content":" Hi! \n"}}]}"#;
        assert_eq!(read_answer(ok), (Some("Hi!".into()), None));
        let refused = br#"{"error":{"message":"no provider available for model m","code":"no_provider_available"}}"#;
        assert_eq!(read_answer(refused), (None, Some("no provider available for model m".into())));
        assert_eq!(read_answer(b"{}"), (None, Some("the answer had no message".into())));
    }
}
