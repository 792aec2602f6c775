//! The spans' way out: a bounded queue the request path only ever
//! `try_send`s to, and a thread of its own that batches what is queued and
//! hands it to the OTLP exporter of `opentelemetry-otlp` (HTTP/protobuf or
//! gRPC). A collector that is down, slow or refusing fills the queue, and
//! what does not fit is counted and dropped: no request waits, and no
//! memory is held beyond the queue's bound.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig, WithTonicConfig};
use opentelemetry_sdk::trace::{SpanData, SpanExporter as _};
use opentelemetry_sdk::Resource;
use tokio::sync::{mpsc, oneshot};
use tracing::{info, warn};

use super::settings::{TraceSettings, Transport};
use super::SpanCounters;
use crate::telemetry::metrics::DropLabel;

use super::settings::Batch;

/// The exporter could not be built (its URL, its thread).
#[derive(Debug, thiserror::Error)]
#[error("traces to {endpoint}: {message}")]
pub struct ExportError {
    endpoint: String,
    message: String,
}

enum Message {
    Spans(Vec<SpanData>),
    Flush(oneshot::Sender<()>),
}

pub(super) struct Queue {
    tx: mpsc::Sender<Message>,
    /// Spans the queue holds now; `tx`'s capacity counts messages, and a
    /// request's spans go as one.
    held: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    counters: SpanCounters,
    max_queue: usize,
    /// Whether dropping has been said in the log (once, until the exporter empties the queue).
    said_full: std::sync::Arc<AtomicBool>,
}

impl Queue {
    pub(super) fn start(
        settings: &TraceSettings,
        instance: &str,
        counters: SpanCounters,
    ) -> Result<Queue, ExportError> {
        let batch = settings.batch;
        let (tx, rx) = mpsc::channel(batch.max_queue.max(1));
        let (built_tx, built_rx) = std::sync::mpsc::channel();
        let resource = resource(settings, instance);
        let settings = settings.clone();
        let held = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let said_full = std::sync::Arc::new(AtomicBool::new(false));
        let (thread_held, thread_counters, thread_said) = (held.clone(), counters.clone(), said_full.clone());
        let endpoint = settings.endpoint.clone();
        let failed = |message: String| ExportError { endpoint: endpoint.clone(), message };
        std::thread::Builder::new()
            .name("switchyard-traces".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                    Ok(r) => r,
                    Err(e) => {
                        let _ = built_tx.send(Err(e.to_string()));
                        return;
                    }
                };
                runtime.block_on(async move {
                    // Built inside the runtime: a gRPC channel belongs to the one it is made in.
                    let mut exporter = match exporter(&settings) {
                        Ok(e) => e,
                        Err(e) => {
                            let _ = built_tx.send(Err(e));
                            return;
                        }
                    };
                    exporter.set_resource(&resource);
                    let _ = built_tx.send(Ok(()));
                    run(rx, exporter, batch, Queued { held: thread_held, said_full: thread_said }, thread_counters)
                        .await;
                });
            })
            .map_err(|e| failed(e.to_string()))?;
        match built_rx.recv() {
            Ok(Ok(())) => Ok(Queue { tx, held, counters, max_queue: batch.max_queue, said_full }),
            Ok(Err(message)) => Err(ExportError { endpoint, message }),
            Err(_) => Err(ExportError { endpoint, message: "the exporter's thread ended".into() }),
        }
    }

    /// Queues a request's spans, or counts them dropped when the queue is full.
    pub(super) fn push(&self, spans: Vec<SpanData>) {
        let n = spans.len();
        let room = self.held.fetch_add(n, Ordering::AcqRel) + n <= self.max_queue;
        let refused = if room {
            match self.tx.try_send(Message::Spans(spans)) {
                Ok(()) => return,
                Err(mpsc::error::TrySendError::Full(_)) => "queue_full",
                // The exporter's thread is gone (it panicked): nothing will send them.
                Err(mpsc::error::TrySendError::Closed(_)) => "export_failed",
            }
        } else {
            "queue_full"
        };
        self.held.fetch_sub(n, Ordering::AcqRel);
        self.counters.dropped.get_or_create(&DropLabel { reason: refused }).inc_by(n as u64);
        // Said once until the exporter has emptied the queue (it clears the flag).
        if !self.said_full.swap(true, Ordering::Relaxed) {
            warn!(
                queue = self.max_queue,
                "traces: spans are dropped ({refused}); counted in switchyard_trace_spans_dropped_total"
            );
        }
    }

    /// Sends what is queued now, waiting at most `timeout`.
    pub(super) async fn flush(&self, timeout: Duration) {
        let (done, wait) = oneshot::channel();
        if self.tx.send_timeout(Message::Flush(done), timeout).await.is_ok() {
            let _ = tokio::time::timeout(timeout, wait).await;
        }
    }
}

fn resource(settings: &TraceSettings, instance: &str) -> Resource {
    let mut attributes: Vec<KeyValue> =
        settings.resource.iter().map(|(k, v)| KeyValue::new(k.clone(), v.clone())).collect();
    // The gateway's own, unless the user named them.
    let own = [("service.instance.id", instance), ("service.version", env!("CARGO_PKG_VERSION"))];
    for (key, value) in own.into_iter().filter(|(k, _)| !settings.resource.contains_key(*k)) {
        attributes.push(KeyValue::new(key, value.to_string()));
    }
    Resource::builder_empty()
        .with_detector(Box::new(opentelemetry_sdk::resource::TelemetryResourceDetector))
        .with_service_name(settings.service_name.clone())
        .with_attributes(attributes)
        .build()
}

fn exporter(settings: &TraceSettings) -> Result<opentelemetry_otlp::SpanExporter, String> {
    let built = match settings.transport {
        Transport::HttpProtobuf => {
            // The system's roots, as the gateway's own client takes them: a
            // machine without any can still send to an http:// collector.
            let roots = crate::ground::roots::system_roots();
            let tls = crate::ground::roots::client_config(roots).map_err(|e| e.to_string())?;
            let https =
                hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(tls).https_or_http().enable_http1().build();
            let client = opentelemetry_http::hyper::HyperClient::new(https, settings.batch.exporter_timeout, None);
            opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_protocol(Protocol::HttpBinary)
                .with_endpoint(settings.endpoint.clone())
                .with_timeout(settings.batch.exporter_timeout)
                .with_headers(settings.headers.clone().into_iter().collect())
                .with_http_client(client)
                .build()
        }
        Transport::Grpc => {
            let builder = opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .with_endpoint(settings.endpoint.clone())
                .with_timeout(settings.batch.exporter_timeout)
                .with_metadata(tonic_metadata(&settings.headers)?);
            // Left to itself, the exporter would trust no root at all over https.
            let builder = if settings.endpoint.starts_with("https://") {
                let tls = opentelemetry_otlp::tonic_types::transport::ClientTlsConfig::new().with_native_roots();
                builder.with_tls_config(tls)
            } else {
                builder
            };
            builder.build()
        }
    };
    built.map_err(|e| e.to_string())
}

fn tonic_metadata(
    headers: &std::collections::BTreeMap<String, String>,
) -> Result<opentelemetry_otlp::tonic_types::metadata::MetadataMap, String> {
    let mut map = http::HeaderMap::new();
    for (k, v) in headers {
        let name =
            http::HeaderName::from_bytes(k.as_bytes()).map_err(|_| format!("header {k:?} is not a header name"))?;
        let value = http::HeaderValue::from_str(v).map_err(|_| format!("header {k:?}: its value is not a header's"))?;
        map.insert(name, value);
    }
    Ok(opentelemetry_otlp::tonic_types::metadata::MetadataMap::from_headers(map))
}

/// What the queue and its exporter share: how many spans wait, and
/// whether dropping them has been said.
struct Queued {
    held: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    said_full: std::sync::Arc<AtomicBool>,
}

/// The exporter's loop: a batch goes when it is full, when its first span
/// has waited the batch's delay, when asked to flush, and when the gateway is gone.
async fn run(
    mut rx: mpsc::Receiver<Message>,
    exporter: opentelemetry_otlp::SpanExporter,
    limits: Batch,
    queued: Queued,
    counters: SpanCounters,
) {
    let mut batch: Vec<SpanData> = Vec::new();
    let mut due = None;
    let mut failing = false;
    loop {
        let next = match due {
            Some(at) => tokio::time::timeout_at(at, rx.recv()).await,
            None => Ok(rx.recv().await),
        };
        let flushed = match next {
            Ok(Some(Message::Spans(spans))) => {
                if queued.held.fetch_sub(spans.len(), Ordering::AcqRel) == spans.len() {
                    // The queue is empty again: a next drop is worth saying.
                    queued.said_full.store(false, Ordering::Relaxed);
                }
                batch.extend(spans);
                due.get_or_insert_with(|| tokio::time::Instant::now() + limits.delay);
                if batch.len() < limits.max_batch {
                    continue;
                }
                None
            }
            Ok(Some(Message::Flush(done))) => Some(done),
            Ok(None) => {
                send(&exporter, &mut batch, limits, &counters, &mut failing).await;
                break;
            }
            Err(_lingered) => None,
        };
        send(&exporter, &mut batch, limits, &counters, &mut failing).await;
        due = None;
        if let Some(done) = flushed {
            let _ = done.send(());
        }
    }
    let _ = exporter.shutdown();
}

async fn send(
    exporter: &opentelemetry_otlp::SpanExporter,
    batch: &mut Vec<SpanData>,
    limits: Batch,
    counters: &SpanCounters,
    failing: &mut bool,
) {
    while !batch.is_empty() {
        let part: Vec<SpanData> = batch.drain(..batch.len().min(limits.max_batch)).collect();
        let n = part.len() as u64;
        let result = tokio::time::timeout(limits.timeout, exporter.export(part)).await;
        match result {
            Ok(Ok(())) => {
                counters.exported.inc_by(n);
                if std::mem::take(failing) {
                    info!("traces: the collector takes spans again");
                }
            }
            Ok(Err(e)) => dropped(counters, n, failing, &e.to_string()),
            Err(_) => dropped(counters, n, failing, "timed out"),
        }
    }
}

fn dropped(counters: &SpanCounters, n: u64, failing: &mut bool, why: &str) {
    counters.dropped.get_or_create(&DropLabel { reason: "export_failed" }).inc_by(n);
    if !std::mem::replace(failing, true) {
        warn!("traces: the collector did not take {n} spans ({why}); until it does, failed exports are counted in switchyard_trace_spans_dropped_total");
    }
}
