//! A test OpenTelemetry collector on `127.0.0.1:0`: it takes OTLP over
//! HTTP/protobuf (`POST /v1/traces`) or gRPC (`TraceService/Export`),
//! decodes each export with the official protobuf definitions
//! (`opentelemetry-proto`) and keeps every span with its resource.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::StatusCode;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
use prost::Message;
use serde_json::Value;
use tokio::net::TcpListener;

/// One span as the collector received it; ids in lowercase hex.
#[derive(Debug, Clone)]
pub struct Received {
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root span.
    pub parent_span_id: String,
    pub name: String,
    /// OTLP's `SpanKind`: 2 server, 3 client, 1 internal.
    pub kind: i32,
    pub start_ns: u64,
    pub end_ns: u64,
    pub attributes: BTreeMap<String, Value>,
    pub events: Vec<(String, BTreeMap<String, Value>)>,
    /// OTLP's status code: 0 unset, 1 ok, 2 error.
    pub status: i32,
    pub status_message: String,
    pub resource: BTreeMap<String, Value>,
    pub scope: String,
}

impl Received {
    pub fn attr(&self, key: &str) -> &Value {
        self.attributes.get(key).unwrap_or(&Value::Null)
    }

    pub fn event(&self, name: &str) -> Option<&BTreeMap<String, Value>> {
        self.events.iter().find(|(n, _)| n == name).map(|(_, a)| a)
    }
}

#[derive(Debug, Default)]
struct Shared {
    spans: Mutex<Vec<Received>>,
    /// Answer every export with 503 (HTTP) or `Unavailable` (gRPC).
    refuse: AtomicBool,
    exports: std::sync::atomic::AtomicUsize,
    /// The headers (or gRPC metadata) of the last export.
    headers: Mutex<BTreeMap<String, String>>,
}

/// A collector serving until dropped.
#[derive(Debug)]
pub struct Collector {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Collector {
    /// OTLP over HTTP/protobuf, at `/v1/traces`.
    pub async fn http() -> Collector {
        let shared = Arc::new(Shared::default());
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let state = shared.clone();
        let app = axum::Router::new().route(
            "/v1/traces",
            axum::routing::post(move |headers: axum::http::HeaderMap, body: Bytes| {
                let state = state.clone();
                async move {
                    let protobuf = headers.get("content-type").is_some_and(|v| v == "application/x-protobuf");
                    if !protobuf {
                        return (StatusCode::UNSUPPORTED_MEDIA_TYPE, Vec::new());
                    }
                    state.exports.fetch_add(1, Ordering::SeqCst);
                    state.keep_headers(&headers);
                    if state.refuse.load(Ordering::SeqCst) {
                        return (StatusCode::SERVICE_UNAVAILABLE, Vec::new());
                    }
                    let Ok(request) = ExportTraceServiceRequest::decode(body) else {
                        return (StatusCode::BAD_REQUEST, Vec::new());
                    };
                    state.take(request);
                    (StatusCode::OK, ExportTraceServiceResponse::default().encode_to_vec())
                }
            }),
        );
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Collector { addr, shared, task }
    }

    /// OTLP over gRPC.
    pub async fn grpc() -> Collector {
        let shared = Arc::new(Shared::default());
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let service = TraceServiceServer::new(Grpc(shared.clone()));
        let incoming = tonic::transport::server::TcpIncoming::from(listener);
        let task = tokio::spawn(async move {
            let _ = tonic::transport::Server::builder().add_service(service).serve_with_incoming(incoming).await;
        });
        Collector { addr, shared, task }
    }

    /// `http://127.0.0.1:<port>`, the base an exporter is given.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Makes every export fail (or succeed again).
    pub fn refuse(&self, refuse: bool) {
        self.shared.refuse.store(refuse, Ordering::SeqCst);
    }

    /// Exports received (refused ones included).
    pub fn exports(&self) -> usize {
        self.shared.exports.load(Ordering::SeqCst)
    }

    /// The headers (or gRPC metadata) the last export came with.
    pub fn headers(&self) -> BTreeMap<String, String> {
        self.shared.headers.lock().expect("headers").clone()
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<Received> {
        self.shared.spans.lock().expect("spans").clone()
    }

    /// Waits until at least `n` spans have come (the exporter batches for
    /// a second), and returns them all.
    pub async fn wait_for(&self, n: usize) -> Vec<Received> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let spans = self.spans();
            if spans.len() >= n {
                return spans;
            }
            assert!(tokio::time::Instant::now() < deadline, "{} of {n} spans came: {spans:#?}", spans.len());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Shared {
    fn keep_headers(&self, headers: &axum::http::HeaderMap) {
        let seen = headers.iter().map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string())).collect();
        *self.headers.lock().expect("headers") = seen;
    }

    fn take(&self, request: ExportTraceServiceRequest) {
        let mut out = self.spans.lock().expect("spans");
        for rs in request.resource_spans {
            let resource = rs.resource.map(|r| attributes(&r.attributes)).unwrap_or_default();
            for ss in rs.scope_spans {
                let scope = ss.scope.map(|s| s.name).unwrap_or_default();
                for span in ss.spans {
                    let status = span.status.unwrap_or_default();
                    out.push(Received {
                        trace_id: hex(&span.trace_id),
                        span_id: hex(&span.span_id),
                        parent_span_id: hex(&span.parent_span_id),
                        name: span.name,
                        kind: span.kind,
                        start_ns: span.start_time_unix_nano,
                        end_ns: span.end_time_unix_nano,
                        attributes: attributes(&span.attributes),
                        events: span.events.iter().map(|e| (e.name.clone(), attributes(&e.attributes))).collect(),
                        status: status.code,
                        status_message: status.message,
                        resource: resource.clone(),
                        scope: scope.clone(),
                    });
                }
            }
        }
    }
}

struct Grpc(Arc<Shared>);

#[tonic::async_trait]
impl TraceService for Grpc {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.0.exports.fetch_add(1, Ordering::SeqCst);
        self.0.keep_headers(&request.metadata().clone().into_headers());
        if self.0.refuse.load(Ordering::SeqCst) {
            return Err(tonic::Status::unavailable("refusing"));
        }
        self.0.take(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn attributes(kvs: &[KeyValue]) -> BTreeMap<String, Value> {
    kvs.iter().map(|kv| (kv.key.clone(), value(kv.value.as_ref()))).collect()
}

fn value(v: Option<&AnyValue>) -> Value {
    match v.and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => Value::from(s.clone()),
        Some(any_value::Value::BoolValue(b)) => Value::from(*b),
        Some(any_value::Value::IntValue(i)) => Value::from(*i),
        Some(any_value::Value::DoubleValue(d)) => Value::from(*d),
        Some(any_value::Value::ArrayValue(a)) => Value::Array(a.values.iter().map(|v| value(Some(v))).collect()),
        Some(other) => Value::from(format!("{other:?}")),
        None => Value::Null,
    }
}
