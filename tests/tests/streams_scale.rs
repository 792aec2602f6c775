//! Thousands of open streams: a scripted upstream holds every stream open
//! (one event each interval), the clients check that each stream arrives
//! byte for byte, and a second set of clients leaves mid-stream to show
//! that each upstream connection closes at once and each attempt is on
//! record as canceled. At a small size this runs with the other tests
//! against a gateway in this process; `bench/run` runs the ignored
//! `benchmark` against the release binary, with 2,000 streams held 30 s,
//! and records memory per open stream, CPU per event and the c=1 latency
//! of plain requests sent meanwhile, then the same held streams through
//! nginx as a plain reverse proxy, the floor:
//!
//!   STREAMS_BIN=target/release/switchyard cargo test --release -p switchyard-tests \
//!     --test streams_scale -- --ignored --nocapture benchmark
//!
//! (`STREAMS=200 STREAM_SECONDS=5` for a shorter run.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use switchyard_tests::{http, ConfigText, TestGateway, ADMIN_TOKEN};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Barrier;

/// Events a leaving client reads before it goes.
const READ_BEFORE_LEAVING: usize = 5;
/// A leaving client's stream would run this many events if it stayed.
const LEAVE_EVENTS: u32 = 100_000;

/// One streamed chunk, all of one length so that bytes count events.
fn event(i: u32) -> String {
    format!(
        "data: {{\"id\":\"hold\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"m\",\
         \"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"t{i:06} \"}},\"finish_reason\":null}}]}}\n\n"
    )
}

/// What follows the last content event: the finish, the usage, the end.
fn ending(events: u32) -> String {
    format!(
        "data: {{\"id\":\"hold\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"m\",\
         \"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"stop\"}}]}}\n\n\
         data: {{\"id\":\"hold\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"m\",\
         \"choices\":[],\"usage\":{{\"prompt_tokens\":5,\"completion_tokens\":{events},\"total_tokens\":{}}}}}\n\n\
         data: [DONE]\n\n",
        events + 5
    )
}

/// The whole body of a stream of `events` events, as the client must get it.
fn whole_stream(events: u32) -> Vec<u8> {
    let mut body: String = (0..events).map(event).collect();
    body.push_str(&ending(events));
    body.into_bytes()
}

const PLAIN_ANSWER: &str = "{\"id\":\"plain\",\"object\":\"chat.completion\",\"created\":0,\"model\":\"m\",\
    \"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"hi\"},\"finish_reason\":\"stop\"}],\
    \"usage\":{\"prompt_tokens\":5,\"completion_tokens\":1,\"total_tokens\":6}}";

/// An upstream that can hold thousands of streams: `POST /hold/{events}/…`
/// streams `events` events one `interval` apart, `POST /plain/…` answers
/// JSON at once. While it streams it also reads, so it sees a connection
/// closed by the gateway the moment it closes, not at its next write.
struct Holder {
    addr: SocketAddr,
    shared: Arc<HolderShared>,
    task: tokio::task::JoinHandle<()>,
}

struct HolderShared {
    interval: Duration,
    /// Events written, all streams together.
    sent: AtomicU64,
    /// Streams written to their end.
    completed: AtomicUsize,
    /// When each stream cut short was closed, by its number (the body's `user`).
    closed: Mutex<HashMap<u32, Instant>>,
}

impl Holder {
    async fn start(interval: Duration) -> Holder {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(HolderShared {
            interval,
            sent: AtomicU64::new(0),
            completed: AtomicUsize::new(0),
            closed: Mutex::new(HashMap::new()),
        });
        let accepting = shared.clone();
        let task = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let _ = socket.set_nodelay(true);
                tokio::spawn(serve_connection(socket, accepting.clone()));
            }
        });
        Holder { addr, shared, task }
    }

    fn base_url(&self, events: u32) -> String {
        format!("http://{}/hold/{events}/v1", self.addr)
    }

    fn plain_url(&self) -> String {
        format!("http://{}/plain/v1", self.addr)
    }

    fn closed(&self) -> HashMap<u32, Instant> {
        self.shared.closed.lock().unwrap().clone()
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One request read off a connection: its path and body.
async fn read_request(socket: &mut TcpStream, buf: &mut Vec<u8>) -> Option<(String, Vec<u8>)> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            assert!(!head.contains("transfer-encoding"), "the upstream reads only sized bodies: {head}");
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:").map(|v| v.trim().parse().unwrap()))
                .unwrap_or(0);
            if buf.len() >= end + 4 + length {
                let path = head.split_whitespace().nth(1).unwrap_or_default().to_string();
                let body = buf[end + 4..end + 4 + length].to_vec();
                buf.drain(..end + 4 + length);
                return Some((path, body));
            }
        }
        let mut chunk = [0u8; 16 * 1024];
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

async fn serve_connection(mut socket: TcpStream, shared: Arc<HolderShared>) {
    let mut buf = Vec::new();
    while let Some((path, body)) = read_request(&mut socket, &mut buf).await {
        let served = match path.strip_prefix("/hold/").and_then(|rest| rest.split('/').next()) {
            Some(events) => {
                let number = stream_number(&body);
                hold(&mut socket, &shared, number, events.parse().unwrap()).await
            }
            None => {
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{PLAIN_ANSWER}",
                    PLAIN_ANSWER.len()
                );
                socket.write_all(reply.as_bytes()).await.is_ok()
            }
        };
        if !served {
            return;
        }
    }
}

/// The stream's number, which clients send as the OpenAI `user` field.
fn stream_number(body: &[u8]) -> u32 {
    let body: Value = serde_json::from_slice(body).unwrap();
    body["user"].as_str().and_then(|u| u.strip_prefix("s-")).and_then(|n| n.parse().ok()).unwrap()
}

fn chunk(data: &str) -> Vec<u8> {
    format!("{:x}\r\n{data}\r\n", data.len()).into_bytes()
}

/// Streams `events` events; false when the gateway closed the connection first.
async fn hold(socket: &mut TcpStream, shared: &HolderShared, number: u32, events: u32) -> bool {
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n\
                transfer-encoding: chunked\r\n\r\n";
    if socket.write_all(head.as_bytes()).await.is_err() {
        return closed(shared, number);
    }
    let mut tick = tokio::time::interval(shared.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut probe = [0u8; 64];
    for i in 0..events {
        tokio::select! {
            _ = tick.tick() => {}
            // Nothing more is sent on this connection until the answer is
            // complete: a read that returns is the gateway leaving.
            _ = socket.read(&mut probe) => return closed(shared, number),
        }
        if socket.write_all(&chunk(&event(i))).await.is_err() {
            return closed(shared, number);
        }
        shared.sent.fetch_add(1, Ordering::Relaxed);
    }
    let mut tail = chunk(&ending(events));
    tail.extend_from_slice(b"0\r\n\r\n");
    if socket.write_all(&tail).await.is_err() {
        return closed(shared, number);
    }
    shared.completed.fetch_add(1, Ordering::Relaxed);
    true
}

fn closed(shared: &HolderShared, number: u32) -> bool {
    shared.closed.lock().unwrap().insert(number, Instant::now());
    false
}

/// A client connection to the gateway, HTTP/1.1 as SDKs speak it.
async fn connect(gateway: SocketAddr) -> Result<(SendRequest<Full<Bytes>>, tokio::task::JoinHandle<()>), String> {
    let tcp = TcpStream::connect(gateway).await.map_err(|e| format!("connect: {e}"))?;
    tcp.set_nodelay(true).map_err(|e| format!("nodelay: {e}"))?;
    let (sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await.map_err(|e| format!("handshake: {e}"))?;
    Ok((sender, tokio::spawn(async move { drop(connection.await) })))
}

fn chat(gateway: SocketAddr, body: &Value, correlation: &str) -> hyper::Request<Full<Bytes>> {
    hyper::Request::post("/v1/chat/completions")
        .header("host", gateway.to_string())
        .header("content-type", "application/json")
        .header("x-correlation-id", correlation)
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap()
}

fn stream_body(model: &str, number: usize) -> Value {
    json!({
        "model": model,
        "stream": true,
        "stream_options": { "include_usage": true },
        "user": format!("s-{number}"),
        "messages": [{ "role": "user", "content": "Hold this stream" }],
    })
}

/// One client's stream read to its end and compared with what the upstream sent.
async fn stream_to_end(gateway: SocketAddr, number: usize, expected: Arc<Vec<u8>>) -> Result<(), String> {
    let (mut sender, connection) = connect(gateway).await?;
    let response = sender.send_request(chat(gateway, &stream_body("hold", number), "hold")).await;
    let response = response.map_err(|e| format!("stream {number}: {e}"))?;
    if response.status() != 200 {
        return Err(format!("stream {number}: status {}", response.status()));
    }
    let mut body = response.into_body();
    let mut at = 0;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| format!("stream {number} broke at byte {at}: {e}"))?;
        if let Some(data) = frame.data_ref() {
            if expected.get(at..at + data.len()) != Some(&data[..]) {
                return Err(format!("stream {number} differs from byte {at}: {:?}", String::from_utf8_lossy(data)));
            }
            at += data.len();
        }
    }
    connection.abort();
    if at == expected.len() {
        Ok(())
    } else {
        Err(format!("stream {number} ended at byte {at} of {}", expected.len()))
    }
}

/// One client that reads a few events, waits for the others, then leaves;
/// gives the instant it closed its connection.
async fn stream_and_leave(gateway: SocketAddr, number: usize, everyone: Arc<Barrier>) -> Result<Instant, String> {
    let outcome = async {
        let (mut sender, connection) = connect(gateway).await?;
        let request = chat(gateway, &stream_body("leave", number), "leave");
        let response = sender.send_request(request).await.map_err(|e| format!("stream {number}: {e}"))?;
        if response.status() != 200 {
            return Err(format!("stream {number}: status {}", response.status()));
        }
        let mut body = response.into_body();
        let wanted = READ_BEFORE_LEAVING * event(0).len();
        let mut read = 0;
        while read < wanted {
            match body.frame().await {
                Some(Ok(frame)) => read += frame.data_ref().map_or(0, |d| d.len()),
                Some(Err(e)) => return Err(format!("stream {number} broke: {e}")),
                None => return Err(format!("stream {number} ended after {read} bytes")),
            }
        }
        Ok((body, sender, connection))
    }
    .await;
    // Every client waits here, read or failed, so that they leave together.
    everyone.wait().await;
    let left = Instant::now();
    let (body, sender, connection) = outcome?;
    connection.abort();
    drop((body, sender));
    Ok(left)
}

/// Latencies of sequential plain requests on one kept-alive connection:
/// `count` of them, or as many as fit until `until` is set.
async fn plain_latencies(gateway: SocketAddr, count: Option<usize>, until: Arc<AtomicBool>) -> Vec<f64> {
    let (mut sender, connection) = connect(gateway).await.unwrap();
    let body = json!({ "model": "plain", "messages": [{ "role": "user", "content": "Say hello" }] });
    let mut times = Vec::new();
    while count.is_none_or(|n| times.len() < n) && !until.load(Ordering::Relaxed) {
        let started = Instant::now();
        let response = sender.send_request(chat(gateway, &body, "plain")).await.unwrap();
        assert_eq!(response.status(), 200);
        response.into_body().collect().await.unwrap();
        times.push(started.elapsed().as_secs_f64() * 1000.0);
        sender.ready().await.unwrap();
    }
    connection.abort();
    times
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn summary(mut times: Vec<f64>) -> Value {
    times.sort_by(f64::total_cmp);
    json!({ "n": times.len(), "p50_ms": percentile(&times, 0.5), "p99_ms": percentile(&times, 0.99) })
}

/// The gateway under test: this process's, or the release binary's.
trait Measured {
    fn addr(&self) -> SocketAddr;
    /// Resident memory now and at its peak, KiB, when it is a process of its own.
    fn memory_kib(&self) -> Option<(u64, u64)>;
    /// CPU time it has used, seconds, when it is a process of its own.
    fn cpu_seconds(&self) -> Option<f64>;
}

impl Measured for TestGateway {
    fn addr(&self) -> SocketAddr {
        self.addr
    }
    fn memory_kib(&self) -> Option<(u64, u64)> {
        None
    }
    fn cpu_seconds(&self) -> Option<f64> {
        None
    }
}

/// A proxy under test in a process of its own (the release binary, or
/// nginx), serving on a port of its own from a directory of its own; read
/// from /proc, killed when dropped.
struct Process {
    addr: SocketAddr,
    child: Child,
    _dir: tempfile::TempDir,
}

/// A loopback address no one listens on now, for a process to bind.
fn free_addr() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}

impl Process {
    /// The release binary, serving on a port of its own with its own data dir.
    async fn binary(path: &str, config: &str) -> Process {
        let dir = tempfile::tempdir().unwrap();
        let addr = free_addr();
        let config = config.replacen("[server]\n", &format!("[server]\nlisten = \"{addr}\"\n"), 1);
        std::fs::write(dir.path().join("switchyard.toml"), config).unwrap();
        let child = Command::new(path)
            .args(["serve", "--config"])
            .arg(dir.path().join("switchyard.toml"))
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .args(["--log-format", "json"])
            .env("SWITCHYARD_ADMIN_TOKEN", ADMIN_TOKEN)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        let binary = Process { addr, child, _dir: dir };
        let started = Instant::now();
        while http().get(format!("http://{addr}/healthz")).send().await.is_err() {
            assert!(started.elapsed() < Duration::from_secs(20), "{path} did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        binary
    }
}

impl Process {
    /// The floor: nginx as a plain reverse proxy in front of the same upstream
    /// (kept-alive upstream connections, nothing buffered), one process as
    /// the gateway is, sending a request where its correlation id says.
    async fn nginx(nginx: &str, holder: &Holder, events: u32) -> Process {
        let dir = tempfile::tempdir().unwrap();
        let addr = free_addr();
        let d = dir.path().display();
        let conf = format!(
            "master_process off;\ndaemon off;\npid {d}/nginx.pid;\nerror_log {d}/error.log warn;\n\
             worker_rlimit_nofile 20000;\nevents {{ worker_connections 16384; }}\n\
             http {{\n  access_log off;\n  keepalive_requests 1000000;\n  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n\
               upstream holder {{ server {}; keepalive 64; keepalive_requests 1000000; }}\n\
               map $http_x_correlation_id $target {{ plain /plain/v1/chat/completions; default /hold/{events}/v1/chat/completions; }}\n\
               server {{\n    listen {addr};\n    location / {{\n      proxy_pass http://holder$target;\n\
                 proxy_http_version 1.1;\n      proxy_set_header Connection \"\";\n      proxy_buffering off;\n\
                 proxy_request_buffering off;\n    }}\n  }}\n}}\n",
            holder.addr
        );
        std::fs::write(dir.path().join("nginx.conf"), conf).unwrap();
        let child = Command::new(nginx)
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(dir.path().join("nginx.conf"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{nginx}: {e}"));
        let started = Instant::now();
        while TcpStream::connect(addr).await.is_err() {
            assert!(started.elapsed() < Duration::from_secs(10), "nginx did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Process { addr, child, _dir: dir }
    }
}

/// A process's resident memory now and at its peak, KiB, from /proc.
fn process_memory_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| -> u64 {
        let line = status.lines().find(|l| l.starts_with(name)).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// The CPU time a process has used, user and system, in seconds.
fn process_cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name, which is in parentheses: utime is
    // the 14th field of the line, stime the 15th, in clock ticks (100/s).
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    ticks as f64 / 100.0
}

impl Measured for Process {
    fn addr(&self) -> SocketAddr {
        self.addr
    }
    fn memory_kib(&self) -> Option<(u64, u64)> {
        Some(process_memory_kib(self.child.id()))
    }
    fn cpu_seconds(&self) -> Option<f64> {
        Some(process_cpu_seconds(self.child.id()))
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn providers(holder: &Holder, events: u32) -> ConfigText {
    ConfigText::new()
        .raw("[server]\nrate_limit_per_minute = 100000000\nmax_connections = 16384\n\n[policy]\nmax_retries = 0\n")
        .provider_at("holder", &holder.base_url(events), "openai", &["hold=m"])
        .raw("auth = \"none\"\nprobe = false")
        .provider_at("leaver", &holder.base_url(LEAVE_EVENTS), "openai", &["leave=m"])
        .raw("auth = \"none\"\nprobe = false")
        .provider_at("plain", &holder.plain_url(), "openai", &["plain=m"])
        .raw("auth = \"none\"\nprobe = false")
}

/// `n` streams of `events` events held open at once, every one compared
/// byte for byte; CPU and memory read while all are open, plain requests
/// timed before, during and after.
async fn hold_phase(gateway: &impl Measured, holder: &Holder, n: usize, events: u32) -> Value {
    let addr = gateway.addr();
    let stop = Arc::new(AtomicBool::new(false));
    // Warmed up first: a fresh process's first requests are slower.
    plain_latencies(addr, Some(200), stop.clone()).await;
    let before = summary(plain_latencies(addr, Some(500), stop.clone()).await);
    let idle = gateway.memory_kib();
    let expected = Arc::new(whole_stream(events));
    let completed_before = holder.shared.completed.load(Ordering::Relaxed);
    let started = Instant::now();
    let streams: Vec<_> = (0..n).map(|i| tokio::spawn(stream_to_end(addr, i, expected.clone()))).collect();
    // Measured once every stream is open and before the first ends, in the
    // middle half of the run: first the gateway's CPU with nothing but the
    // streams, then plain requests one after another.
    let run = holder.shared.interval * events;
    tokio::time::sleep(run / 4).await;
    let (cpu_from, sent_from) = (gateway.cpu_seconds(), holder.shared.sent.load(Ordering::Relaxed));
    tokio::time::sleep(run / 4).await;
    let (cpu_to, sent_to) = (gateway.cpu_seconds(), holder.shared.sent.load(Ordering::Relaxed));
    let during = tokio::spawn(plain_latencies(addr, None, stop.clone()));
    tokio::time::sleep(run / 4).await;
    let open_rss = gateway.memory_kib();
    stop.store(true, Ordering::Relaxed);
    let during = summary(during.await.unwrap());
    let mut failures = Vec::new();
    for stream in streams {
        if let Err(e) = stream.await.unwrap() {
            failures.push(e);
        }
    }
    let took = started.elapsed();
    assert!(failures.is_empty(), "{} of {n} streams failed, first: {}", failures.len(), failures[0]);
    let completed = holder.shared.completed.load(Ordering::Relaxed) - completed_before;
    assert_eq!(completed, n, "every upstream stream ran to its end");
    let after = summary(plain_latencies(addr, Some(500), Arc::new(AtomicBool::new(false))).await);
    let events_in_window = sent_to - sent_from;
    let mut report = json!({
        "streams": n,
        "intact": n - failures.len(),
        "events_per_stream": events,
        "interval_ms": holder.shared.interval.as_millis(),
        "seconds": took.as_secs_f64(),
        "plain_before": before,
        "plain_during": during,
        "plain_after": after,
        "events_in_window": events_in_window,
    });
    if let (Some((idle_rss, _)), Some((open_now, peak))) = (idle, open_rss) {
        report["idle_rss_kib"] = json!(idle_rss);
        report["open_rss_kib"] = json!(open_now);
        report["peak_rss_kib"] = json!(peak);
        report["kib_per_stream"] = json!((peak.saturating_sub(idle_rss)) as f64 / n as f64);
    }
    if let (Some(from), Some(to)) = (cpu_from, cpu_to) {
        report["cpu_seconds_in_window"] = json!(to - from);
        report["us_per_event"] = json!((to - from) * 1e6 / events_in_window as f64);
    }
    report
}

/// `n` clients that read a few events and leave at once: how soon after
/// each left its upstream connection closed, and what history recorded.
async fn leave_phase(gateway: &impl Measured, holder: &Holder, n: usize) -> Value {
    let addr = gateway.addr();
    let everyone = Arc::new(Barrier::new(n));
    let clients: Vec<_> = (0..n).map(|i| tokio::spawn(stream_and_leave(addr, i, everyone.clone()))).collect();
    let mut left = Vec::with_capacity(n);
    for (i, client) in clients.into_iter().enumerate() {
        left.push((i as u32, client.await.unwrap().unwrap_or_else(|e| panic!("{e}"))));
    }
    let waited = Instant::now();
    while holder.closed().len() < n && waited.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let closed = holder.closed();
    let mut lags: Vec<f64> = Vec::with_capacity(n);
    for (number, at) in &left {
        let close = closed.get(number).unwrap_or_else(|| panic!("stream {number}: the upstream was never closed"));
        lags.push(close.saturating_duration_since(*at).as_secs_f64() * 1000.0);
    }
    lags.sort_by(f64::total_cmp);
    let canceled = canceled_attempts(addr, n).await;
    assert_eq!(canceled, n, "every attempt the clients left is on record as canceled");
    json!({
        "streams": n,
        "read_before_leaving": READ_BEFORE_LEAVING,
        "close_p50_ms": percentile(&lags, 0.5),
        "close_p99_ms": percentile(&lags, 0.99),
        "close_max_ms": lags.last().copied().unwrap_or(f64::NAN),
        "canceled_on_record": canceled,
    })
}

/// Waits for the leaving clients' requests on record, and counts their
/// attempts recorded as canceled (one each: nothing to retry).
async fn canceled_attempts(addr: SocketAddr, n: usize) -> usize {
    let admin = |path: String| async move {
        let r = http().get(format!("http://{addr}{path}")).bearer_auth(ADMIN_TOKEN).send().await.unwrap();
        assert!(r.status().is_success(), "{path}: {}", r.status());
        r.json::<Value>().await.unwrap()
    };
    let mut ids = Vec::new();
    let waited = Instant::now();
    while ids.len() < n {
        ids.clear();
        let mut cursor = String::new();
        loop {
            let page = admin(format!("/admin/requests?correlation_id=leave&limit=200{cursor}")).await;
            ids.extend(page["requests"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap().to_string()));
            match page["next_cursor"].as_str() {
                Some(c) => cursor = format!("&cursor={c}"),
                None => break,
            }
        }
        assert!(waited.elapsed() < Duration::from_secs(10), "{} of {n} left requests on record", ids.len());
        if ids.len() < n {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let mut canceled = 0;
    for id in ids {
        let detail = admin(format!("/admin/requests/{id}")).await;
        assert_eq!(detail["outcome"], "canceled", "{detail}");
        let attempts = detail["attempts"].as_array().unwrap();
        assert_eq!(attempts.len(), 1, "{detail}");
        canceled += usize::from(attempts[0]["outcome"] == "canceled");
    }
    canceled
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_held_open_arrive_intact_and_streams_left_close_upstream() {
    let holder = Holder::start(Duration::from_millis(20)).await;
    let gateway = TestGateway::start(providers(&holder, 10).build(), Default::default()).await;
    let held = hold_phase(&gateway, &holder, 50, 10).await;
    assert_eq!(held["plain_before"]["n"], 500);
    let left = leave_phase(&gateway, &holder, 50).await;
    assert_eq!(left["canceled_on_record"], 50, "{left}");
    println!("{held}\n{left}");
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: bench/run runs it against the release binary"]
async fn benchmark() {
    let bin = std::env::var("STREAMS_BIN").expect("STREAMS_BIN: the switchyard binary to measure");
    // A relative path is the workspace's, as `bench/run` and the command above give it.
    let bin = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(bin);
    let bin = bin.to_str().unwrap();
    let n: usize = env_or("STREAMS", 2000);
    let seconds: u32 = env_or("STREAM_SECONDS", 30);
    let interval = Duration::from_millis(100);
    let holder = Holder::start(interval).await;
    let events = seconds * 10;
    let gateway = Process::binary(bin, providers(&holder, events).build()).await;
    let held = hold_phase(&gateway, &holder, n, events).await;
    let left = leave_phase(&gateway, &holder, n).await;
    drop(gateway);
    // The floor, on the same upstream and clients, after the gateway has stopped.
    let nginx = std::env::var("STREAMS_NGINX").unwrap_or_else(|_| "/usr/sbin/nginx".into());
    let floor = Process::nginx(&nginx, &holder, events).await;
    let floor = hold_phase(&floor, &holder, n, events).await;
    println!("STREAMS_BENCH {}", json!({ "held": held, "left": left, "floor": floor }));
}
