//! Sessions steering routing: a session keeps its key while it is usable
//! (so a provider's prompt cache stays warm), stays on the provider that
//! served it after a fallback, and never sends a provider reasoning it did
//! not sign.
//!
//! The provider here is a scripted Anthropic-style server that learns a
//! prompt cache per key, as providers do: a prefix seen on that key within
//! the cache's life is billed as cache reads, anything else as input. It
//! signs its thinking blocks and refuses, with Anthropic's 400, a block
//! another provider signed. The cache life is shortened to a fraction of a
//! second, and requests are paced the way a person paces them: each after
//! more than half the cache life and less than all of it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use serde_json::{json, Value};
use switchyard_core::secrets::MemoryStore;
use switchyard_tests::{http, TestGateway};
use tokio::net::TcpListener;
use tokio::time::Instant;

/// How long the provider keeps a prefix cached on a key.
const LIFE: Duration = Duration::from_millis(240);
/// The gap between a session's requests: more than half the life, less than all.
const PACE: Duration = Duration::from_millis(150);

#[derive(Default)]
struct State {
    /// (key, hash of a prefix) → until when it is cached.
    cache: HashMap<(String, String), Instant>,
    calls: u32,
    /// Every `fail_every`-th call answers 500.
    fail_every: Option<u32>,
    refused_signatures: u32,
    cache_read: u64,
    /// Tokens written to the cache: every prefix not read from it.
    written: u64,
    keys: HashMap<String, u32>,
}

/// A scripted Anthropic-style provider with a prompt cache per key and signed thinking.
struct Cached {
    name: String,
    url: String,
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Cached {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Cached {
    async fn start(name: &str, fail_every: Option<u32>) -> Cached {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(Mutex::new(State { fail_every, ..State::default() }));
        let (shared, me) = (state.clone(), name.to_string());
        let task = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let (state, me) = (shared.clone(), me.clone());
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| answer(req, state.clone(), me.clone()));
                    let io = hyper_util::rt::TokioIo::new(socket);
                    let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await;
                });
            }
        });
        Cached { name: name.to_string(), url, state, task }
    }

    fn stats(&self) -> (u64, u64, u32, HashMap<String, u32>) {
        let s = self.state.lock().unwrap();
        (s.cache_read, s.written, s.refused_signatures, s.keys.clone())
    }
}

fn reply(status: u16, body: Value) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap()
}

async fn answer(
    req: Request<Incoming>,
    state: Arc<Mutex<State>>,
    me: String,
) -> Result<Response<Full<Bytes>>, Infallible> {
    if req.method() != hyper::Method::POST {
        // The gateway's health probe: not part of any session.
        return Ok(reply(200, json!({"data": []})));
    }
    let key = req.headers().get("x-api-key").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let bytes = req.into_body().collect().await.unwrap().to_bytes();
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let mut s = state.lock().unwrap();
    s.calls += 1;
    let call = s.calls;
    if s.fail_every.is_some_and(|n| call.is_multiple_of(n)) {
        return Ok(reply(500, json!({"type": "error", "error": {"type": "api_error", "message": "overloaded"}})));
    }
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    for (i, m) in messages.iter().enumerate() {
        for (j, b) in m["content"].as_array().into_iter().flatten().enumerate() {
            let signed_here = b["signature"].as_str().is_some_and(|sig| sig.starts_with(&format!("sig-{me}-")));
            if b["type"] == "thinking" && !signed_here {
                s.refused_signatures += 1;
                let message = format!("messages.{i}.content.{j}: Invalid `signature` in `thinking` block");
                let error = json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}});
                return Ok(reply(400, error));
            }
        }
    }
    *s.keys.entry(key.clone()).or_default() += 1;
    // Prefixes at each turn boundary: the longest still cached on this key is read from the cache.
    let now = Instant::now();
    let prefix = |n: usize| format!("{}|{}", body["system"], Value::Array(messages[..n].to_vec()));
    let tokens = |n: usize| (prefix(n).len() / 4) as u64;
    let read = (1..=messages.len())
        .rev()
        .find(|&n| s.cache.get(&(key.clone(), prefix(n))).is_some_and(|until| *until > now))
        .map_or(0, tokens);
    let total = tokens(messages.len());
    for n in 1..=messages.len() {
        s.cache.insert((key.clone(), prefix(n)), now + LIFE);
    }
    s.cache_read += read;
    s.written += total - read;
    Ok(reply(
        200,
        json!({
            "id": format!("msg_{me}_{call}"), "type": "message", "role": "assistant", "model": body["model"],
            "content": [
                {"type": "thinking", "thinking": "considering", "signature": format!("sig-{me}-{call}")},
                {"type": "text", "text": format!("answer {call} from {me}")}
            ],
            "stop_reason": "end_turn", "stop_sequence": null,
            // As Anthropic counts: input excludes what was read from the
            // cache and what was written to it (here, all the rest).
            "usage": {"input_tokens": 0, "output_tokens": 4,
                      "cache_read_input_tokens": read, "cache_creation_input_tokens": total - read}
        }),
    ))
}

fn provider(p: &Cached, extra: &str) -> String {
    format!(
        "\n[[providers]]\nname = {:?}\nkind = \"anthropic\"\nbase_url = {:?}\nmodels = {{ \"claude\" = \"claude\" }}\n{extra}\n",
        p.name, p.url
    )
}

fn keys(entries: &[(&str, &str, &str)]) -> MemoryStore {
    entries.iter().fold(MemoryStore::new(), |s, (provider, label, secret)| s.with(provider, label, secret))
}

/// A Claude Code-like session: each turn resends the conversation so far,
/// with the assistant's answers (thinking included) and a new question.
struct Session {
    id: String,
    messages: Vec<Value>,
    providers: Vec<String>,
}

impl Session {
    fn new(id: &str) -> Session {
        Session { id: id.to_string(), messages: Vec::new(), providers: Vec::new() }
    }

    async fn turn(&mut self, gw: &TestGateway, n: usize) {
        let question = format!("step {n}: {}", "look at the code and say what to change next. ".repeat(40));
        self.messages.push(json!({"role": "user", "content": question}));
        let body = json!({
            "model": "claude", "max_tokens": 64,
            "system": "You are a careful coding agent. ".repeat(200),
            "thinking": {"type": "enabled", "budget_tokens": 1024},
            "messages": self.messages,
        });
        let r = http()
            .post(gw.url("/v1/messages"))
            .header("x-claude-code-session-id", &self.id)
            .json(&body)
            .send()
            .await
            .unwrap();
        let provider = r.headers()["x-switchyard-provider"].to_str().unwrap().to_string();
        assert_eq!(r.status(), 200, "turn {n} of {}", self.id);
        let answer: Value = r.json().await.unwrap();
        self.messages.push(json!({"role": "assistant", "content": answer["content"]}));
        self.providers.push(provider);
    }

    /// Runs `turns` turns paced as a person paces them.
    async fn paced(&mut self, gw: &TestGateway, turns: usize) {
        let start = Instant::now();
        for n in 0..turns {
            tokio::time::sleep_until(start + PACE * n as u32).await;
            self.turn(gw, n).await;
        }
    }

    fn switches(&self) -> usize {
        self.providers.windows(2).filter(|w| w[0] != w[1]).count()
    }
}

const TURNS: usize = 10;

/// Cache-read tokens one session gets through a provider with these keys.
async fn cache_read_with(key_entries: &[(&str, &str, &str)], extra: &str) -> (u64, HashMap<String, u32>) {
    let p = Cached::start("anth", None).await;
    let gw = TestGateway::start(&provider(&p, extra), keys(key_entries)).await;
    let mut session = Session::new("paced-session");
    session.paced(&gw, TURNS).await;
    let (read, _, refused, keys) = p.stats();
    assert_eq!(refused, 0);
    (read, keys)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_keeps_its_key_and_its_cache_while_sessions_spread_over_the_keys() {
    let two = [("anth", "one", "sk-ant-one-1111"), ("anth", "two", "sk-ant-two-2222")];
    let (alone, _) = cache_read_with(&two[..1], "").await;
    let (kept, used) = cache_read_with(&two, "").await;
    let (round_robin, _) = cache_read_with(&two, "[providers.policy]\nsession_affinity = false").await;
    assert!(alone > 0);
    assert_eq!(used.len(), 1, "one session, one key: {used:?}");
    assert!(
        kept * 100 >= alone * 95,
        "with two keys the session kept {kept} of the {alone} cache-read tokens one key gets"
    );
    assert!(
        round_robin * 100 <= alone * 20,
        "round-robin kept {round_robin} of {alone}: the comparison measures nothing"
    );

    // Three sessions at once still spread over both keys.
    let p = Cached::start("anth", None).await;
    let gw = TestGateway::start(&provider(&p, ""), keys(&two)).await;
    let mut sessions: Vec<Session> = ["alpha", "beta", "gamma", "delta"].iter().map(|id| Session::new(id)).collect();
    for s in &mut sessions {
        s.turn(&gw, 0).await;
        s.turn(&gw, 1).await;
    }
    let (_, _, _, keys) = p.stats();
    assert_eq!(keys.len(), 2, "sessions spread over the keys: {keys:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_fallback_a_session_stays_and_no_call_is_refused_for_a_signature() {
    // The primary fails every third call; both sign their own thinking.
    let primary = Cached::start("primary", Some(3)).await;
    let backup = Cached::start("backup", None).await;
    let config = format!(
        "[policy]\nmax_retries = 0\nbackoff_base = \"1ms\"\n{}{}\n[[routes]]\nmodel = \"claude\"\nchain = [\"primary\", \"backup\"]\n",
        provider(&primary, ""),
        provider(&backup, "")
    );
    let gw = TestGateway::start(&config, keys(&[("primary", "k", "sk-p-1111"), ("backup", "k", "sk-b-2222")])).await;
    let mut session = Session::new("sticky-session");
    for n in 0..12 {
        session.turn(&gw, n).await;
    }
    assert!(session.switches() <= 2, "provider switches: {:?}", session.providers);
    let (_, _, refused_p, _) = primary.stats();
    let (_, _, refused_b, _) = backup.stats();
    assert_eq!((refused_p, refused_b), (0, 0), "calls refused for a signature: {:?}", session.providers);
    // The attempt that lost another provider's thinking says so.
    let listed = gw.admin("/admin/requests?limit=100").await;
    let fell_back = listed["requests"].as_array().unwrap().iter().find(|r| r["fallback"] == true).unwrap();
    let detail = gw.admin(&format!("/admin/requests/{}", fell_back["id"].as_str().unwrap())).await;
    let said = detail.to_string();
    assert!(said.contains("signed by another provider"), "{said}");

    // A session that never met another provider sends its thinking untouched.
    let mut other = Session::new("steady");
    let fresh = Cached::start("solo", None).await;
    let gw = TestGateway::start(&provider(&fresh, ""), keys(&[("solo", "k", "sk-s-3333")])).await;
    for n in 0..4 {
        other.turn(&gw, n).await;
    }
    assert_eq!(fresh.stats().2, 0);
}

#[tokio::test]
async fn an_openai_provider_is_given_the_session_as_its_cache_key() {
    use switchyard_sim::{Recorded, Script, SimProvider};
    use switchyard_tests::{keys_for, ConfigText};
    let oa = SimProvider::start("oa", Script::ok()).await.unwrap();
    let config = ConfigText::new().chat_only(&oa, &["gpt-5"]).raw("profile = { prompt_cache_key = true }");
    let gw = TestGateway::start(config.build(), keys_for(&["oa"])).await;
    let turns = json!([{"role": "user", "content": "fix it"}, {"role": "assistant", "content": "how?"},
                       {"role": "user", "content": "well"}]);
    let r = http()
        .post(gw.url("/v1/messages"))
        .header("x-switchyard-session-id", "task-42")
        .json(&json!({"model": "gpt-5", "max_tokens": 16, "messages": turns}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // A client's own key wins over the session's.
    let r = http()
        .post(gw.url("/v1/responses"))
        .header("x-switchyard-session-id", "task-42")
        .json(&json!({"model": "gpt-5", "input": "hi", "prompt_cache_key": "mine"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let keys: Vec<Value> = oa.requests().iter().map(Recorded::json).map(|b| b["prompt_cache_key"].clone()).collect();
    assert_eq!(keys, [json!("task-42"), json!("mine")]);
}

/// Claude Code asks for 32,000 output tokens whatever the model; a route
/// that maps its model to one that takes fewer (Claude 3.5 Haiku: 8,192)
/// would be refused outright. The limit is lowered, in the client's own
/// body, and the attempt says so.
#[tokio::test]
async fn an_output_limit_above_the_model_s_is_lowered_in_the_client_s_own_body() {
    use switchyard_sim::{Recorded, Script, SimProvider};
    use switchyard_tests::{keys_for, ConfigText};
    let an = SimProvider::start("an", Script::ok()).await.unwrap();
    let config = ConfigText::new().provider(&an, "anthropic", &["claude-opus-4-8=claude-3-5-haiku-20241022"]);
    let gw = TestGateway::start(config.build(), keys_for(&["an"])).await;
    let ask = json!({"model": "claude-opus-4-8", "max_tokens": 32000, "messages": [{"role": "user", "content": "hi"}]});
    let r = gw.post("/v1/messages", &ask).await;
    assert_eq!(r.status(), 200);
    let id = r.headers()["x-request-id"].to_str().unwrap().to_string();
    r.bytes().await.unwrap();
    let sent: Vec<Value> = an.requests().iter().map(Recorded::json).collect();
    assert_eq!(sent[0]["max_tokens"], 8192, "{:?}", sent[0]);
    assert_eq!(sent[0]["model"], "claude-3-5-haiku-20241022");
    gw.recorded(1).await;
    let detail = gw.admin(&format!("/admin/requests/{id}")).await;
    assert!(detail.to_string().contains("max_tokens: clamped from 32000 to 8192"), "{detail}");
    // Within the limit: the body goes as it came.
    let r = gw
        .post(
            "/v1/messages",
            &json!({"model": "claude-opus-4-8", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
    assert_eq!(r.status(), 200);
    assert_eq!(an.requests()[1].json()["max_tokens"], 100);
}

/// What a session wrote to the provider's cache reaches its figures, and
/// costs the cache-write price (Anthropic's is 1.25 times the input price),
/// not the input price.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_s_cache_writes_are_recorded_and_priced_at_the_write_rate() {
    let p = Cached::start("anth", None).await;
    let prices = "[[prices]]\nmodel = \"claude\"\ninput = 3.0\noutput = 15.0\ncached = 0.3\ncache_write = 3.75\n";
    let config = format!("{prices}{}", provider(&p, ""));
    let gw = TestGateway::start(&config, keys(&[("anth", "one", "sk-ant-one-1111")])).await;
    let mut session = Session::new("writes");
    for n in 0..3 {
        session.turn(&gw, n).await;
    }
    let (read, written, _, _) = p.stats();
    assert!(read > 0 && written > 0, "the session read and wrote the cache: {read} / {written}");
    gw.recorded(3).await;
    let d = gw.admin("/admin/sessions/writes").await;
    let count = |k: &str| d[k].as_u64().unwrap();
    assert_eq!((count("cache_read_tokens"), count("cache_write_tokens")), (read, written), "{d}");
    assert_eq!(count("input_tokens"), read + written, "input counts cache reads and writes: {d}");
    assert_eq!((count("requests"), count("turns")), (3, 3), "{d}");
    let want = (read as f64 * 0.3 + written as f64 * 3.75 + 3.0 * 4.0 * 15.0) / 1e6;
    let cost = d["cost_usd"].as_f64().unwrap();
    assert!((cost - want).abs() < 1e-12, "cost {cost}, at the write rate {want}");
    let timeline = d["timeline"].as_array().unwrap();
    assert!(timeline.iter().all(|r| r["turn"] == true && r["usage"]["cache_write_tokens"].is_u64()), "{d}");
}

/// An Anthropic answer translated for a Chat client: the client's usage is
/// shaped as Chat shapes it, and the record keeps the cache writes the
/// provider reported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_translated_answer_keeps_its_cache_writes_on_record() {
    let p = Cached::start("anth", None).await;
    let gw = TestGateway::start(&provider(&p, ""), keys(&[("anth", "one", "sk-ant-one-1111")])).await;
    let body = json!({"model": "claude", "max_tokens": 64, "messages": [
        {"role": "system", "content": "You are a careful coding agent. ".repeat(100)},
        {"role": "user", "content": "What should change next?"}]});
    let r = http()
        .post(gw.url("/v1/chat/completions"))
        .header("x-switchyard-session-id", "chat")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let answer: Value = r.json().await.unwrap();
    let (_, written, _, _) = p.stats();
    assert!(written > 0);
    assert_eq!(answer["usage"]["prompt_tokens"], written, "the client's input counts the writes: {answer}");
    gw.recorded(1).await;
    let d = gw.admin("/admin/sessions/chat").await;
    assert_eq!(d["cache_write_tokens"].as_u64(), Some(written), "{d}");
    assert_eq!(d["timeline"][0]["endpoint"], "/v1/chat/completions", "{d}");
}
