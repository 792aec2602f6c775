//! Simulated LLM providers for tests and `switchyard demo`.
//!
//! A [`SimProvider`] speaks four wire formats on a real socket: OpenAI Chat
//! Completions (and Completions, Embeddings), OpenAI Responses, Anthropic
//! Messages (and `count_tokens`; `?beta=true` as Claude Code sends it) and
//! Google Gemini (`/v1beta/models/{model}:generateContent`,
//! `:streamGenerateContent` with or without `alt=sse`, `:countTokens`, and
//! the model list). Bodies are realistic (usage blocks, the real SSE event
//! sequences of each format, errors in each format's own shape), and follow
//! a [`Script`] of faults: error statuses with rate-limit headers,
//! fail-first-N, latency, a slow first event, stalls, mid-stream drops,
//! `event: error` before any content, and an error that echoes the request's
//! headers. It counts calls, keeps each request it saw (with its credential,
//! however the format sends it), and records when the caller went away
//! before the reply was complete.
//!
//! By default every successful reply is the same short text (or the script's
//! [`Script::reply`], such as an edit for aider to apply). Under an agent
//! script ([`Script::agent`], [`Script::tool_plan`] with a [`ToolPlan`]) the
//! provider plays its part of a tool-call round trip, reading each request
//! in its own format: it calls a tool the request offers, and once the
//! request carries the tool's result it answers with text quoting it; a
//! conversation whose calls and results do not pair up gets the 400 the
//! real provider would send. So a
//! test can drive a real client (an SDK, Claude Code, Codex, Gemini CLI)
//! through a whole agent turn, translated or not, with no model behind it.
//!
//! # Layout
//! - [`script`]: what the provider does on each call.
//! - [`agent`]: the tool-call round trip: reading tools and results, choosing arguments.
//! - [`wire`]: response bodies and event sequences, one module per format.
//! - this file: the server, its bookkeeping and the streaming machinery.

pub mod agent;
pub mod script;
pub mod wire;

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_stream::wrappers::ReceiverStream;

pub use agent::ToolPlan;
use agent::Turn;
pub use script::{Fault, Script};
use wire::{Endpoint, Framing, Reply};

/// A request as the simulated provider received it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: Method,
    pub path: String,
    pub query: Option<String>,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Recorded {
    /// The body as JSON (`Null` when it is not JSON).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_default()
    }

    /// The credential the request carried, however its format sends it:
    /// `authorization: Bearer`, `x-api-key`, `x-goog-api-key` or `?key=`.
    pub fn credential(&self) -> Option<String> {
        let header = |name: &str| self.headers.get(name).and_then(|v| v.to_str().ok());
        let bearer = header("authorization").map(|v| v.strip_prefix("Bearer ").unwrap_or(v));
        let query = self.query.as_deref().and_then(|q| q.split('&').find_map(|pair| pair.strip_prefix("key=")));
        bearer.or_else(|| header("x-api-key")).or_else(|| header("x-goog-api-key")).or(query).map(str::to_string)
    }
}

#[derive(Debug)]
struct Shared {
    name: String,
    script: Mutex<Script>,
    calls: AtomicUsize,
    requests: Mutex<Vec<Recorded>>,
    disconnects: watch::Sender<usize>,
    /// Replies still being written (handler running or stream open).
    in_flight: watch::Sender<usize>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A running simulated provider. Dropping it stops the server.
#[derive(Debug)]
pub struct SimProvider {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl SimProvider {
    /// Starts a provider on `127.0.0.1:0`.
    pub async fn start(name: &str, script: Script) -> io::Result<SimProvider> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        SimProvider::serve(listener, name, script)
    }

    /// Starts a provider on a listener the caller bound.
    pub fn serve(listener: TcpListener, name: &str, script: Script) -> io::Result<SimProvider> {
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            name: name.to_string(),
            script: Mutex::new(script),
            calls: AtomicUsize::new(0),
            requests: Mutex::new(Vec::new()),
            disconnects: watch::Sender::new(0),
            in_flight: watch::Sender::new(0),
        });
        let app = Router::new()
            .route("/v1/models", get(models))
            .route("/v1/{*path}", post(reply))
            .route("/v1beta/models", get(gemini_models))
            .route("/v1beta/models/{*path}", get(gemini_model).post(reply))
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::warn!("simulated provider stopped: {e}");
            }
        });
        Ok(SimProvider { addr, shared, task })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL to put in a provider's config (`http://127.0.0.1:N/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The base URL for a `kind = "gemini"` provider (`http://127.0.0.1:N/v1beta`).
    pub fn gemini_base_url(&self) -> String {
        format!("http://{}/v1beta", self.addr)
    }

    /// The server's root (`http://127.0.0.1:N`), as clients that add the
    /// version themselves take it: `ANTHROPIC_BASE_URL`, `GOOGLE_GEMINI_BASE_URL`.
    pub fn root_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// POST calls received so far.
    pub fn calls(&self) -> usize {
        self.shared.calls.load(Ordering::SeqCst)
    }

    pub fn requests(&self) -> Vec<Recorded> {
        lock(&self.shared.requests).clone()
    }

    /// Replies the caller abandoned before they were complete.
    pub fn disconnects(&self) -> usize {
        *self.shared.disconnects.borrow()
    }

    /// Replaces the script; the call count continues.
    pub fn set_script(&self, script: Script) {
        *lock(&self.shared.script) = script;
    }

    /// Waits until at least `n` disconnects were seen, or `within` passes.
    pub async fn wait_for_disconnects(&self, n: usize, within: Duration) -> bool {
        let mut rx = self.shared.disconnects.subscribe();
        tokio::time::timeout(within, rx.wait_for(|d| *d >= n)).await.is_ok_and(|r| r.is_ok())
    }

    /// Waits until no reply is being written, or `within` passes.
    pub async fn wait_idle(&self, within: Duration) -> bool {
        let mut rx = self.shared.in_flight.subscribe();
        tokio::time::timeout(within, rx.wait_for(|n| *n == 0)).await.is_ok_and(|r| r.is_ok())
    }

    /// Replies being written right now.
    pub fn in_flight(&self) -> usize {
        *self.shared.in_flight.borrow()
    }

    /// Follows the replies in flight as they change, for a peak.
    pub fn in_flight_watch(&self) -> watch::Receiver<usize> {
        self.shared.in_flight.subscribe()
    }
}

impl Drop for SimProvider {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Tracks one reply. If it is dropped before `finish`, the caller went away.
struct ReplyGuard {
    shared: Arc<Shared>,
    finished: bool,
}

impl ReplyGuard {
    fn new(shared: Arc<Shared>) -> ReplyGuard {
        shared.in_flight.send_modify(|n| *n += 1);
        ReplyGuard { shared, finished: false }
    }

    fn finish(mut self) {
        self.finished = true;
    }
}

impl Drop for ReplyGuard {
    fn drop(&mut self) {
        if !self.finished {
            self.shared.disconnects.send_modify(|n| *n += 1);
        }
        self.shared.in_flight.send_modify(|n| *n -= 1);
    }
}

async fn models(State(shared): State<Arc<Shared>>) -> Response {
    let models = lock(&shared.script).models.clone();
    axum::Json(wire::models_list(&shared.name, &models)).into_response()
}

async fn gemini_models(State(shared): State<Arc<Shared>>) -> Response {
    let models = lock(&shared.script).models.clone();
    axum::Json(wire::gemini::models_list(&models)).into_response()
}

async fn gemini_model(State(shared): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    let models = lock(&shared.script).models.clone();
    match wire::gemini::model_get(&models, &id) {
        Some(model) => axum::Json(model).into_response(),
        None => error_response(Endpoint::GeminiGenerate, 404, &[]),
    }
}

async fn reply(State(shared): State<Arc<Shared>>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let call = shared.calls.fetch_add(1, Ordering::SeqCst);
    let echo = wire::echo(&headers, uri.query());
    lock(&shared.requests).push(Recorded {
        method: Method::POST,
        path: uri.path().to_string(),
        query: uri.query().map(str::to_string),
        headers,
        body: body.clone(),
    });
    let Some(endpoint) = Endpoint::from_path(uri.path()) else {
        return (StatusCode::NOT_FOUND, "unknown simulated endpoint").into_response();
    };
    let (fault, latency, pacing, extra, agent, reply) = {
        let mut script = lock(&shared.script);
        let reply = script.reply.clone();
        (script.next_fault(), script.latency, script.pacing(), script.headers.clone(), script.agent.clone(), reply)
    };
    let guard = ReplyGuard::new(shared.clone());
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    let body: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let request = wire::Request { endpoint, path: uri.path(), query: uri.query(), body: &body };
    let text = match &reply {
        Some(reply) => agent::split(reply, pacing.chunks),
        None => wire::pieces(&shared.name, pacing.chunks),
    };
    let preface = matches!(fault, Fault::DropBeforeTools(_)).then(|| text.clone());
    let turn = match &agent {
        Some(plan) => agent::turn(plan, endpoint, &body, pacing.chunks, text),
        None => Turn::Text(text),
    };
    let (fault, turn) = match (fault, turn, preface) {
        (Fault::DropTextAfter(n), turn @ Turn::Text(_), _) => (Fault::DropAfter(n), turn),
        (Fault::DropBeforeTools(n), Turn::Tools(_), Some(text)) => (Fault::DropAfter(n), Turn::Text(text)),
        (Fault::DropTextAfter(_) | Fault::DropBeforeTools(_), turn, _) => (Fault::None, turn),
        (fault, turn, _) => (fault, turn),
    };
    let plan = wire::plan(&shared.name, call, request, turn, pacing);
    // An agent refuses what its real counterpart would: calls and results that do not pair up.
    let refused = agent.as_ref().and_then(|_| agent::unpaired(endpoint, &body));
    if let (Some(why), Fault::None) = (refused, &fault) {
        guard.finish();
        let mut response = axum::Json(wire::error_body_saying(endpoint, StatusCode::BAD_REQUEST, &why)).into_response();
        *response.status_mut() = StatusCode::BAD_REQUEST;
        return response;
    }
    let mut response = match fault {
        Fault::Status { status, headers } => {
            guard.finish();
            return error_response(endpoint, status, &headers);
        }
        Fault::Saying { status, message } => {
            guard.finish();
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let mut response = axum::Json(wire::error_body_saying(endpoint, status, &message)).into_response();
            *response.status_mut() = status;
            return response;
        }
        Fault::EchoRequest { status } => {
            guard.finish();
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let mut response = axum::Json(wire::echo_body(endpoint, status, &echo)).into_response();
            *response.status_mut() = status;
            add_headers(&mut response, &[("x-echo".to_string(), echo)]);
            return response;
        }
        Fault::Hang => {
            // Held until the caller gives up; the guard then records the disconnect.
            std::future::pending::<()>().await;
            guard.finish();
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
        _ => match plan {
            Reply::Json(value) => {
                guard.finish();
                axum::Json(value).into_response()
            }
            Reply::Events(mut events) => {
                let fault = match fault {
                    Fault::EchoErrorEvent => {
                        events.error = wire::echo_event(request, &echo);
                        Fault::ErrorEvent
                    }
                    other => other,
                };
                stream_response(events, fault, pacing.interval, guard)
            }
        },
    };
    add_headers(&mut response, &extra);
    response
}

fn add_headers(response: &mut Response, headers: &[(String, String)]) {
    for (name, value) in headers {
        if let (Ok(n), Ok(v)) =
            (axum::http::HeaderName::try_from(name.as_str()), axum::http::HeaderValue::try_from(value.as_str()))
        {
            response.headers_mut().append(n, v);
        }
    }
}

fn error_response(endpoint: Endpoint, status: u16, headers: &[(String, String)]) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = axum::Json(wire::error_body_with(endpoint, status, headers)).into_response();
    *response.status_mut() = status;
    add_headers(&mut response, headers);
    response
}

fn stream_response(events: wire::Events, fault: Fault, interval: Duration, guard: ReplyGuard) -> Response {
    let content_type = match events.framing {
        Framing::Sse => "text/event-stream; charset=utf-8",
        Framing::JsonArray => "application/json; charset=utf-8",
    };
    let (tx, rx) = mpsc::channel::<Result<Bytes, io::Error>>(4);
    tokio::spawn(async move {
        tokio::select! {
            // The receiver is dropped when the caller's connection goes away.
            () = tx.closed() => drop(guard),
            done = produce(&tx, events, fault, interval) => if done { guard.finish() } else { drop(guard) },
        }
    });
    Response::builder()
        .header("content-type", content_type)
        .header("cache-control", "no-cache")
        .body(Body::from_stream(ReceiverStream::new(rx)))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// Writes the events under the fault. Returns true when the reply ended as
/// scripted (including a deliberate drop), false if the receiver went away.
async fn produce(
    tx: &mpsc::Sender<Result<Bytes, io::Error>>,
    events: wire::Events,
    fault: Fault,
    interval: Duration,
) -> bool {
    let send = |chunk: Result<Bytes, io::Error>| async move { tx.send(chunk).await.is_ok() };
    if let Fault::SlowFirstByte(delay) = fault {
        tokio::time::sleep(delay).await;
    }
    for event in events.preamble {
        if !send(Ok(event)).await {
            return false;
        }
    }
    if matches!(fault, Fault::ErrorEvent) {
        return send(Ok(events.error)).await;
    }
    if let Fault::Thinking(delay) = fault {
        tokio::time::sleep(delay).await;
    }
    for (i, event) in events.content.into_iter().enumerate() {
        match fault {
            Fault::DropAfter(n) if i == n => {
                // Let what was sent reach the wire first: a real drop comes
                // after delivered bytes, not instead of them.
                tokio::time::sleep(Duration::from_millis(20)).await;
                let _ = send(Err(io::Error::new(io::ErrorKind::ConnectionReset, "simulated drop"))).await;
                return true;
            }
            Fault::ErrorAfter(n) if i == n => {
                return send(Ok(events.error)).await;
            }
            Fault::GarbleAfter(n) if i == n => {
                let garbled: &[u8] = match events.framing {
                    Framing::Sse => b"data: {\"id\": \"x\", \"choices\": [{\"delta\": {\"content\n\n",
                    Framing::JsonArray => b",{\"candidates\": [{\"content\n",
                };
                if !send(Ok(Bytes::from_static(garbled))).await {
                    return false;
                }
            }
            Fault::StallAfter(n) if i == n => {
                std::future::pending::<()>().await;
            }
            _ => {}
        }
        if i > 0 && !interval.is_zero() {
            tokio::time::sleep(interval).await;
        }
        if !send(Ok(event)).await {
            return false;
        }
    }
    for event in events.tail {
        if !send(Ok(event)).await {
            return false;
        }
    }
    true
}
