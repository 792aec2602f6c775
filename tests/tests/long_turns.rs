//! Long turns: a committed stream never leaves its client waiting longer
//! than `stream_keepalive` for a byte, in any format, and a Responses
//! client always gets a terminal event.
//!
//! The provider pauses between chunks far longer than the keep-alive
//! interval (both shortened: the interval to 150 ms, the pauses to 700 ms);
//! the official Python SDKs, whose read timeout is shortened below the
//! pause, hold through it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::json;
use switchyard_sim::{Fault, Script, SimProvider};
use switchyard_tests::{http, keys_for, python, ConfigText, TestGateway};
use tokio::time::Instant;

const KEEPALIVE: &str = ": keep-alive\n\n";

/// The stream's text, and the longest gap between two of its chunks.
async fn read(r: reqwest::Response) -> (String, Duration) {
    let mut body = r.bytes_stream();
    let (mut text, mut gap, mut last) = (String::new(), Duration::ZERO, Instant::now());
    while let Some(chunk) = body.next().await {
        gap = gap.max(last.elapsed());
        last = Instant::now();
        text.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
    }
    (text, gap)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_provider_s_stream_is_kept_alive_with_comments_between_events() {
    let slow = Script::ok().stream(3, Duration::from_millis(700));
    let an = SimProvider::start("an", slow.clone()).await.unwrap();
    let oa = SimProvider::start("oa", slow).await.unwrap();
    let config = ConfigText::new()
        .raw("[policy]\nstream_keepalive = \"150ms\"")
        .provider(&an, "anthropic", &["claude"])
        .provider(&oa, "openai", &["gpt"]);
    let gw = TestGateway::start(config.build(), keys_for(&["an", "oa"])).await;
    let cases = [
        // Passthrough, in each format.
        (
            "/v1/messages",
            json!({"model": "claude", "max_tokens": 9, "stream": true, "messages": [{"role": "user", "content": "hi"}]}),
            "message_stop",
        ),
        ("/v1/responses", json!({"model": "gpt", "stream": true, "input": "hi"}), "response.completed"),
        (
            "/v1/chat/completions",
            json!({"model": "gpt", "stream": true, "messages": [{"role": "user", "content": "hi"}]}),
            "[DONE]",
        ),
        // Translated: a Chat client of an Anthropic provider.
        (
            "/v1/chat/completions",
            json!({"model": "claude", "stream": true, "messages": [{"role": "user", "content": "hi"}]}),
            "[DONE]",
        ),
    ];
    for (path, body, end) in cases {
        let r = http().post(gw.url(path)).json(&body).send().await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
        let (text, gap) = read(r).await;
        assert!(text.contains(end), "{path} {body}: the stream reached its end:\n{text}");
        assert!(text.matches(KEEPALIVE).count() >= 4, "{path} {body}: keep-alives:\n{text}");
        // Only between whole events, never inside one.
        for (at, _) in text.match_indices(KEEPALIVE) {
            assert!(at == 0 || text[..at].ends_with("\n\n"), "{path}: a keep-alive inside an event:\n{text}");
        }
        assert!(gap < Duration::from_millis(500), "{path} {body}: the client waited {gap:?} for a byte");
    }
}

#[tokio::test]
async fn a_responses_stream_that_breaks_ends_with_response_failed() {
    let oa = SimProvider::start("oa", Script::always(Fault::DropAfter(2))).await.unwrap();
    let config = ConfigText::new().provider(&oa, "openai", &["gpt"]);
    let gw = TestGateway::start(config.build(), keys_for(&["oa"])).await;
    let r = http()
        .post(gw.url("/v1/responses"))
        .json(&json!({"model": "gpt", "stream": true, "input": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let (text, _) = read(r).await;
    assert!(text.contains("response.output_text.delta"), "content came first:\n{text}");
    let last = text.trim_end().rsplit("\n\n").next().unwrap();
    assert!(last.starts_with("event: response.failed\ndata: {"), "{text}");
    let failed: serde_json::Value = serde_json::from_str(last.split_once("data: ").unwrap().1).unwrap();
    assert_eq!(failed["response"]["status"], "failed");
    assert!(failed["response"]["error"]["message"].as_str().unwrap().contains("broke"), "{failed}");
}

/// A reasoning model answers at once with its preamble, then thinks longer
/// than `attempt_timeout` before its first content: the attempt waits for
/// it (up to `stream_idle_timeout` of silence) instead of cutting it off
/// and moving the request. One silent past that limit is still left.
#[tokio::test]
async fn a_provider_thinking_after_its_preamble_is_waited_for_not_cut_off() {
    let thinker =
        SimProvider::start("thinker", Script::always(Fault::Thinking(Duration::from_millis(600)))).await.unwrap();
    let backup = SimProvider::start("backup", Script::ok()).await.unwrap();
    let config = ConfigText::new()
        .raw("[policy]\nattempt_timeout = \"200ms\"\nstream_idle_timeout = \"2s\"\nmin_fallback_budget = \"10ms\"")
        .provider(&thinker, "openai", &["gpt"])
        .provider(&backup, "openai", &["gpt"])
        .route("gpt", &["thinker", "backup"]);
    let gw = TestGateway::start(config.build(), keys_for(&["thinker", "backup"])).await;
    let ask = json!({"model": "gpt", "stream": true, "input": "think hard"});
    let r = http().post(gw.url("/v1/responses")).json(&ask).send().await.unwrap();
    assert_eq!(r.headers()["x-switchyard-provider"], "thinker");
    let (text, _) = read(r).await;
    assert!(text.contains("response.completed"), "{text}");
    assert_eq!(backup.calls(), 0);

    // Silent after its preamble for longer than stream_idle_timeout: timed out, and the backup answers.
    let config = ConfigText::new()
        .raw("[policy]\nattempt_timeout = \"200ms\"\nstream_idle_timeout = \"300ms\"\nmin_fallback_budget = \"10ms\"")
        .provider(&thinker, "openai", &["gpt"])
        .provider(&backup, "openai", &["gpt"])
        .route("gpt", &["thinker", "backup"]);
    let gw = TestGateway::start(config.build(), keys_for(&["thinker", "backup"])).await;
    let r = http().post(gw.url("/v1/responses")).json(&ask).send().await.unwrap();
    assert_eq!(r.headers()["x-switchyard-provider"], "backup");
    let id = r.headers()["x-request-id"].to_str().unwrap().to_string();
    read(r).await;
    let detail = gw.admin(&format!("/admin/requests/{id}")).await;
    assert!(detail.to_string().contains("silent for 300ms after its preamble"), "{detail}");
}

/// Thinking past `stream_keepalive` after its preamble, the provider is
/// committed to: the client has the preamble and keep-alives while it
/// thinks, then the whole answer, in every format.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_think_before_content_keeps_the_client_alive_from_the_preamble_on() {
    let think = || Script::always(Fault::Thinking(Duration::from_millis(700)));
    let an = SimProvider::start("an", think()).await.unwrap();
    let oa = SimProvider::start("oa", think()).await.unwrap();
    let config = ConfigText::new()
        .raw("[policy]\nstream_keepalive = \"150ms\"\nattempt_timeout = \"5s\"")
        .provider(&an, "anthropic", &["claude"])
        .provider(&oa, "openai", &["gpt"]);
    let gw = TestGateway::start(config.build(), keys_for(&["an", "oa"])).await;
    let cases = [
        (
            "/v1/messages",
            json!({"model": "claude", "max_tokens": 9, "stream": true, "messages": [{"role": "user", "content": "hi"}]}),
            "event: message_start",
            "message_stop",
        ),
        (
            "/v1/responses",
            json!({"model": "gpt", "stream": true, "input": "hi"}),
            "event: response.created",
            "response.completed",
        ),
        // Translated: a Responses client (Codex) of an Anthropic provider.
        (
            "/v1/responses",
            json!({"model": "claude", "stream": true, "input": "hi"}),
            "event: response.created",
            "response.completed",
        ),
    ];
    for (path, body, preamble, end) in cases {
        let started = Instant::now();
        let r = http().post(gw.url(path)).json(&body).send().await.unwrap();
        assert!(started.elapsed() < Duration::from_millis(600), "{path}: the head came only with the content");
        let (text, gap) = read(r).await;
        assert!(text.starts_with(preamble), "{path} {body}:\n{text}");
        let first_alive = text.find(KEEPALIVE).unwrap_or_else(|| panic!("{path} {body}: no keep-alive:\n{text}"));
        let first_content = text.find("delta").unwrap();
        assert!(first_alive < first_content, "{path} {body}: keep-alives came while it thought:\n{text}");
        assert!(text.contains(end), "{path} {body}:\n{text}");
        assert!(gap < Duration::from_millis(500), "{path} {body}: the client waited {gap:?} for a byte");
    }
}

/// Claude Code and Codex, each on its own provider kind, finish a tool turn
/// with a provider that thinks after its preamble before every answer
/// (longer than the keep-alive interval: each answer is committed to while
/// the provider thinks, and kept alive).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_and_codex_finish_a_tool_turn_with_a_provider_that_thinks_before_each_answer() {
    use switchyard_tests::clis::{Client, Sandbox, SECRET};
    for client in [Client::ClaudeCode, Client::Codex] {
        let sandbox = Sandbox::new();
        let plan = client.read_plan(&sandbox, &["notes.txt"]);
        let thinking = Script::always(Fault::Thinking(Duration::from_millis(700))).tool_plan(plan);
        let sim = SimProvider::start("thinker", thinking).await.unwrap();
        let config = ConfigText::new().raw("[policy]\nstream_keepalive = \"150ms\"\nattempt_timeout = \"300ms\"");
        let config = client.native().serve(config, &sim, &["*"]);
        let gw = TestGateway::start(config.build(), keys_for(&["thinker"])).await;
        let said = client.run(&sandbox, &gw, "What does notes.txt say?").await;
        assert!(said.contains(SECRET), "{client:?} quotes the file it read:\n{said}");
        let listed = gw.admin("/admin/requests?limit=50").await;
        let streamed: Vec<&serde_json::Value> =
            listed["requests"].as_array().unwrap().iter().filter(|r| r["streamed"] == true).collect();
        assert!(streamed.len() >= 2, "{client:?}: {listed}");
        for r in streamed {
            assert_eq!(r["outcome"], "ok", "{client:?}: {r}");
            assert_eq!(r["attempt_count"], 1, "{client:?}: no thinking answer was cut off: {r}");
        }
    }
}

/// A TCP relay in front of `to` that keeps every byte the client was sent:
/// what was on the wire, chunked framing and SSE comments included.
async fn relay(to: std::net::SocketAddr) -> (std::net::SocketAddr, std::sync::Arc<std::sync::Mutex<Vec<u8>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = seen.clone();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let upstream = tokio::net::TcpStream::connect(to).await.unwrap();
            let (mut client_read, mut client_write) = client.into_split();
            let (mut up_read, mut up_write) = upstream.into_split();
            tokio::spawn(async move { tokio::io::copy(&mut client_read, &mut up_write).await });
            let kept = kept.clone();
            tokio::spawn(async move {
                let mut buf = vec![0; 16 * 1024];
                while let Ok(n) = up_read.read(&mut buf).await {
                    if n == 0 || client_write.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                    kept.lock().unwrap().extend_from_slice(&buf[..n]);
                }
            });
        }
    });
    (addr, seen)
}

/// The official OpenAI and Anthropic Python SDKs stream from providers that
/// send their preamble and then think for 700 ms, while the SDKs give up on
/// a read after 400 ms of silence (the SDKs' own read timeout, shortened as
/// the pause is): keep-alives every 150 ms carry them through, answers
/// intact, and the comments are on the wire they read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_sdks_hold_through_a_long_think() {
    let think = || Script::always(Fault::Thinking(Duration::from_millis(700)));
    let an = SimProvider::start("an", think()).await.unwrap();
    let oa = SimProvider::start("oa", think()).await.unwrap();
    let config = ConfigText::new()
        .raw("[policy]\nstream_keepalive = \"150ms\"\nattempt_timeout = \"300ms\"")
        .provider(&an, "anthropic", &["claude"])
        .provider(&oa, "openai", &["gpt"]);
    let gw = TestGateway::start(config.build(), keys_for(&["an", "oa"])).await;
    let (addr, wire) = relay(gw.addr).await;
    let script = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python/long_think.py");
    let started = Instant::now();
    let out = tokio::process::Command::new(python())
        .arg(&script)
        .env("SWITCHYARD_URL", format!("http://{addr}"))
        .env("READ_TIMEOUT", "0.4")
        .env("NO_PROXY", "127.0.0.1")
        .output()
        .await
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let said: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    println!("{said:#} in {:?}", started.elapsed());
    for (stream, from, end) in
        [("chat", "oa", "stop"), ("responses", "oa", "response.completed"), ("messages", "an", "end_turn")]
    {
        let s = &said[stream];
        assert_eq!(s["end"], end, "{stream}: the stream ended whole: {s}");
        let text = s["text"].as_str().unwrap_or_default();
        assert!(text.starts_with(&format!("Hello from {from}.")), "{stream}: the provider's answer: {s}");
    }
    let wire = String::from_utf8_lossy(&wire.lock().unwrap()).into_owned();
    let comments = wire.matches(KEEPALIVE).count();
    // Three streams, each silent for 700 ms after its preamble.
    assert!(comments >= 6, "keep-alives on the wire: {comments}\n{wire}");
    assert_eq!((an.calls(), oa.calls()), (1, 2), "one call per stream: no SDK retried, no think was cut off");
}
