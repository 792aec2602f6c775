//! The Gemini endpoints: model list, countTokens, both stream framings, and
//! the script's faults in Gemini's own shapes; credentials recorded however
//! a format sends them; faults coming before the agent's turn.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use futures_util::StreamExt as _;
use serde_json::{json, Value};
use switchyard_sim::{Fault, Script, SimProvider};

fn contents() -> Value {
    json!({ "contents": [{ "role": "user", "parts": [{ "text": "hi" }] }] })
}

async fn post(sim: &SimProvider, path_and_query: &str, body: &Value) -> reqwest::Response {
    reqwest::Client::new().post(format!("{}{path_and_query}", sim.root_url())).json(body).send().await.unwrap()
}

#[tokio::test]
async fn models_are_listed_and_fetched_in_geminis_shape() {
    let sim = SimProvider::start("g", Script::ok().models(&["gemini-test", "gemini-flash"])).await.unwrap();
    let client = reqwest::Client::new();
    let list: Value =
        client.get(format!("{}/v1beta/models", sim.root_url())).send().await.unwrap().json().await.unwrap();
    let names: Vec<&str> = list["models"].as_array().unwrap().iter().map(|m| m["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["models/gemini-test", "models/gemini-flash"]);
    assert!(list["models"][0]["supportedGenerationMethods"].as_array().unwrap().contains(&json!("generateContent")));

    let one = client.get(format!("{}/v1beta/models/gemini-flash", sim.root_url())).send().await.unwrap();
    assert_eq!(one.status(), 200);
    assert_eq!(one.json::<Value>().await.unwrap()["name"], "models/gemini-flash");
    let missing = client.get(format!("{}/v1beta/models/nope", sim.root_url())).send().await.unwrap();
    assert_eq!(missing.status(), 404);
    assert_eq!(missing.json::<Value>().await.unwrap()["error"]["status"], "NOT_FOUND");
    assert_eq!(sim.calls(), 0, "listings are not calls");
}

#[tokio::test]
async fn count_tokens_answers_total_tokens() {
    let sim = SimProvider::start("g", Script::ok()).await.unwrap();
    let reply = post(&sim, "/v1beta/models/gemini-test:countTokens", &contents()).await;
    assert_eq!(reply.status(), 200);
    let body: Value = reply.json().await.unwrap();
    assert!(body["totalTokens"].as_u64().unwrap() > 0, "{body}");
    assert_eq!(body.as_object().unwrap().len(), 1);
    let unknown = post(&sim, "/v1beta/models/gemini-test:embedText", &contents()).await;
    assert_eq!(unknown.status(), 404);
}

#[tokio::test]
async fn status_faults_answer_in_geminis_error_shape() {
    let script = Script::ok()
        .then_once(Fault::status_with(429, &[("retry-after", "30")]))
        .then_once(Fault::status(503))
        .then_once(Fault::status(529));
    let sim = SimProvider::start("g", script).await.unwrap();

    let limited = post(&sim, "/v1beta/models/gemini-test:generateContent", &contents()).await;
    assert_eq!(limited.status(), 429);
    assert_eq!(limited.headers()["retry-after"], "30");
    assert_eq!(
        limited.json::<Value>().await.unwrap(),
        json!({ "error": {
            "code": 429, "message": "simulated 429 Too Many Requests", "status": "RESOURCE_EXHAUSTED",
            "details": [{ "@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "30s" }],
        } })
    );
    let unavailable = post(&sim, "/v1beta/models/gemini-test:streamGenerateContent?alt=sse", &contents()).await;
    assert_eq!(unavailable.status(), 503);
    let body: Value = unavailable.json().await.unwrap();
    assert_eq!((body["error"]["code"].as_u64(), body["error"]["status"].as_str()), (Some(503), Some("UNAVAILABLE")));
    let overloaded = post(&sim, "/v1beta/models/gemini-test:generateContent", &contents()).await;
    assert_eq!(overloaded.json::<Value>().await.unwrap()["error"]["status"], "UNAVAILABLE");
}

/// Reads a body until it ends or breaks: (bytes received, whether it broke).
async fn read_until_break(response: reqwest::Response) -> (String, bool) {
    let mut stream = response.bytes_stream();
    let mut got = Vec::new();
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(bytes) => got.extend_from_slice(&bytes),
            Err(_) => return (String::from_utf8(got).unwrap(), true),
        }
    }
    (String::from_utf8(got).unwrap(), false)
}

#[tokio::test]
async fn a_stream_drops_mid_way_or_ends_in_an_error_event() {
    let script = Script::ok().then_once(Fault::DropAfter(2)).then_once(Fault::ErrorEvent);
    let sim = SimProvider::start("g", script).await.unwrap();
    let path = "/v1beta/models/gemini-test:streamGenerateContent?alt=sse";

    let (got, broke) = read_until_break(post(&sim, path, &contents()).await).await;
    assert!(broke, "the connection is reset mid-stream");
    let chunks: Vec<&str> = got.split("\r\n\r\n").filter(|c| !c.is_empty()).collect();
    assert_eq!(chunks.len(), 2, "two chunks before the drop: {got:?}");
    assert!(!got.contains("finishReason"));

    let failed = post(&sim, path, &contents()).await;
    assert_eq!(failed.status(), 200, "the error comes after the head");
    let body = failed.text().await.unwrap();
    let error: Value = serde_json::from_str(body.strip_prefix("data: ").unwrap().trim_end()).unwrap();
    assert_eq!((error["error"]["code"].as_u64(), error["error"]["status"].as_str()), (Some(503), Some("UNAVAILABLE")));
}

#[tokio::test]
async fn without_alt_sse_the_stream_is_one_json_array() {
    let sim = SimProvider::start("g", Script::ok().stream(3, Duration::ZERO)).await.unwrap();
    let reply = post(&sim, "/v1beta/models/gemini-test:streamGenerateContent", &contents()).await;
    assert!(reply.headers()["content-type"].to_str().unwrap().starts_with("application/json"));
    let chunks: Vec<Value> = reply.json().await.unwrap();
    let text: String =
        chunks.iter().map(|c| c["candidates"][0]["content"]["parts"][0]["text"].as_str().unwrap()).collect();
    assert_eq!(text, "Hello from g.");
    assert_eq!(chunks[2]["candidates"][0]["finishReason"], "STOP");
    assert_eq!(chunks[2]["usageMetadata"]["candidatesTokenCount"], 3);
}

#[tokio::test]
async fn credentials_are_recorded_however_they_are_sent() {
    let sim = SimProvider::start("g", Script::ok()).await.unwrap();
    let client = reqwest::Client::new();
    let url = |p: &str| format!("{}{p}", sim.root_url());
    client
        .post(url("/v1beta/models/m:generateContent"))
        .header("x-goog-api-key", "goog-header")
        .json(&contents())
        .send()
        .await
        .unwrap();
    client
        .post(url("/v1beta/models/m:streamGenerateContent?alt=sse&key=goog-query"))
        .json(&contents())
        .send()
        .await
        .unwrap();
    client.post(url("/v1/messages?beta=true")).header("x-api-key", "anth").json(&json!({})).send().await.unwrap();
    client.post(url("/v1/chat/completions")).bearer_auth("oai").json(&json!({})).send().await.unwrap();
    let seen: Vec<Option<String>> = sim.requests().iter().map(|r| r.credential()).collect();
    assert_eq!(
        seen,
        [Some("goog-header"), Some("goog-query"), Some("anth"), Some("oai")].map(|s| s.map(str::to_string))
    );
    assert_eq!(sim.requests()[1].query.as_deref(), Some("alt=sse&key=goog-query"));
}

#[tokio::test]
async fn an_echoing_provider_echoes_the_gemini_key() {
    let script = Script::ok().then_once(Fault::EchoRequest { status: 400 }).then_once(Fault::EchoErrorEvent);
    let sim = SimProvider::start("g", script).await.unwrap();
    let path = "/v1beta/models/m:streamGenerateContent?alt=sse&key=goog-secret";
    let echoed = reqwest::Client::new()
        .post(format!("{}{path}", sim.root_url()))
        .header("x-goog-api-key", "goog-header-secret")
        .json(&contents())
        .send()
        .await
        .unwrap();
    assert_eq!(echoed.status(), 400);
    assert!(echoed.headers()["x-echo"].to_str().unwrap().contains("goog-header-secret"));
    let body: Value = echoed.json().await.unwrap();
    assert_eq!(body["error"]["status"], "INVALID_ARGUMENT");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("goog-header-secret") && message.contains("key=goog-secret"), "{message}");

    let event = post(&sim, path, &contents()).await.text().await.unwrap();
    assert!(event.starts_with("data: {\"error\"") && event.contains("key=goog-secret"), "{event}");
}

/// Faults come before the agent's turn: a 529, then the tool call.
#[tokio::test]
async fn faults_still_strike_an_agent_script() {
    let script = Script::agent().fail_first(1, Fault::status(529));
    let sim = SimProvider::start("an", script).await.unwrap();
    let body = json!({
        "model": "claude-test", "max_tokens": 10, "messages": [{ "role": "user", "content": "go" }],
        "tools": [{ "name": "Bash", "input_schema": { "type": "object", "properties": {} } }],
    });
    let url = format!("{}/messages?beta=true", sim.base_url());
    let client = reqwest::Client::new();
    let first = client.post(&url).json(&body).send().await.unwrap();
    assert_eq!(first.status(), 529);
    assert_eq!(first.json::<Value>().await.unwrap()["error"]["type"], "overloaded_error");
    let second: Value = client.post(&url).json(&body).send().await.unwrap().json().await.unwrap();
    assert_eq!(second["stop_reason"], "tool_use");
    assert_eq!(second["content"][0]["name"], "Bash");
    let counted = client.post(format!("{}/messages/count_tokens?beta=true", sim.base_url())).json(&body).send().await;
    assert!(counted.unwrap().json::<Value>().await.unwrap()["input_tokens"].as_u64().unwrap() > 0);
}
