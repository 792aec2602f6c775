//! The HTTP client for providers: hyper's pooled client over rustls, with
//! HTTP/2 where a provider offers it, and the system's root certificates.
//!
//! It is hyper itself rather than a convenience client on top: the gateway
//! builds every upstream request from parts it has already parsed (a URI
//! made once per provider, headers it has filtered, a body it holds whole),
//! so a richer client would only parse and copy them again on every call.
//! Redirects are not followed (they would resend the provider key to
//! wherever they point) and proxies from the environment are not used.

use std::sync::Arc;
use std::time::Duration;

use axum::http::{header, HeaderMap, HeaderValue, Method, Request, Response, Uri};
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tracing::warn;

/// How long to wait for a TCP (and TLS) connection to a provider.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Idle pooled connections are closed after this long.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

const USER_AGENT: &str = concat!("switchyard/", env!("CARGO_PKG_VERSION"));

pub type Error = hyper_util::client::legacy::Error;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot set up TLS for provider connections: {0}")]
    Tls(#[from] rustls::Error),
}

/// An upstream request from parts the gateway has already made.
pub fn request(method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Request<Full<Bytes>> {
    let mut request = Request::new(Full::new(body));
    *request.method_mut() = method;
    *request.uri_mut() = uri;
    *request.headers_mut() = headers;
    request
}

/// One pooled client for every upstream call; cheap to clone.
#[derive(Debug, Clone)]
pub struct Client {
    inner: hyper_util::client::legacy::Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
}

impl Client {
    pub fn new() -> Result<Client, ClientError> {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(CONNECT_TIMEOUT));
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()?
            .with_root_certificates(system_roots())
            .with_no_client_auth();
        let https = HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .enable_http2()
            .wrap_connector(http);
        let inner = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new())
            .build(https);
        Ok(Client { inner })
    }

    /// Sends a request and waits for the response head. The body streams
    /// after; dropping it closes the connection rather than pooling it.
    pub async fn send(&self, mut request: Request<Full<Bytes>>) -> Result<Response<Incoming>, Error> {
        if !request.headers().contains_key(header::USER_AGENT) {
            request.headers_mut().insert(header::USER_AGENT, HeaderValue::from_static(USER_AGENT));
        }
        self.inner.request(request).await
    }
}

/// The system's trusted roots. Certificates that fail to load are skipped
/// (and said so), as a browser would: a provider whose chain needs one of
/// them fails its own requests, with the TLS error, instead of every
/// provider failing at start.
fn system_roots() -> rustls::RootCertStore {
    let found = rustls_native_certs::load_native_certs();
    for error in &found.errors {
        warn!("a system root certificate could not be loaded: {error}");
    }
    let mut roots = rustls::RootCertStore::empty();
    let (_, ignored) = roots.add_parsable_certificates(found.certs);
    if ignored > 0 {
        warn!("{ignored} system root certificates could not be parsed and are not trusted");
    }
    roots
}
