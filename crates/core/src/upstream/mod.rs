//! The HTTP client for providers: hyper's connections over rustls, with
//! HTTP/2 where a provider offers it, the system's root certificates, and a
//! [pool](pool) of its own.
//!
//! It is hyper itself rather than a convenience client on top: the gateway
//! builds every upstream request from parts it has already parsed (a URI
//! made once per provider, headers it has filtered, a body it holds whole),
//! so a richer client would only parse and copy them again on every call.
//! The pool is its own for the same reason: it finds a connection by
//! comparing the origin with the few it knows, and takes a connection back
//! when its response body ends, instead of hashing a key per request and
//! spawning a task per request to wait for the connection to be free.
//! Redirects are not followed (they would resend the provider key to
//! wherever they point) and proxies from the environment are not used.

pub(crate) mod keys;
pub(crate) mod provider;
pub mod recent;
pub(crate) mod routing;
pub mod strategy;

mod pool;

use std::sync::Arc;
use std::time::Duration;

use axum::http::header::Entry;
use axum::http::uri::PathAndQuery;
use axum::http::{header, HeaderMap, HeaderValue, Method, Request, Response, Uri};
use bytes::Bytes;
use http_body_util::Full;
use hyper::client::conn::{http1, http2};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder, MaybeHttpsStream};
use hyper_util::client::legacy::connect::{Connection, HttpConnector};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tower::ServiceExt;
use tracing::debug;

pub use pool::Body;
use pool::{Lent, Origin, Pool};

/// How long to wait for a TCP (and TLS) connection to a provider.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

const USER_AGENT: &str = concat!("switchyard/", env!("CARGO_PKG_VERSION"));

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why a request got no response.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No connection: nothing was sent.
    #[error("cannot connect to {origin}")]
    Connect {
        origin: String,
        #[source]
        source: BoxError,
    },
    /// The request URI names no provider to connect to.
    #[error("the request URI {0} is not absolute")]
    NotAbsolute(Uri),
    #[error(transparent)]
    BadHost(#[from] pool::BadHost),
    /// The connection failed during the exchange.
    #[error("the exchange with the provider failed")]
    Exchange(#[source] hyper::Error),
}

impl Error {
    /// Whether nothing reached the provider.
    pub fn is_connect(&self) -> bool {
        matches!(self, Error::Connect { .. })
    }

    fn connect(origin: &Origin, source: impl Into<BoxError>) -> Error {
        Error::Connect { origin: format!("{}://{}", origin.scheme, origin.authority), source: source.into() }
    }
}

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

/// One client for every upstream call, with its connections; cheap to clone.
#[derive(Debug, Clone)]
pub struct Client {
    connector: HttpsConnector<HttpConnector>,
    pool: Arc<Pool>,
}

/// A connection that can take a request now.
struct Ready {
    conn: Lent,
    /// The `Host` header for HTTP/1 requests to its origin.
    host: HeaderValue,
    /// Whether it came from the pool, and so may have been closed by the
    /// provider since its last exchange.
    pooled: bool,
}

/// A request that a connection did not take.
struct Refused {
    error: hyper::Error,
    /// The request, when it was never written.
    unsent: Option<Request<Full<Bytes>>>,
}

impl From<hyper::client::conn::TrySendError<Request<Full<Bytes>>>> for Refused {
    fn from(mut e: hyper::client::conn::TrySendError<Request<Full<Bytes>>>) -> Refused {
        let unsent = e.take_message();
        Refused { error: e.into_error(), unsent }
    }
}

impl Client {
    /// A client that trusts the system's root certificates.
    pub fn new() -> Result<Client, ClientError> {
        Client::with_roots(crate::ground::roots::system_roots())
    }

    /// A client that trusts `roots`, for providers behind a private
    /// certificate authority.
    pub fn with_roots(roots: rustls::RootCertStore) -> Result<Client, ClientError> {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(CONNECT_TIMEOUT));
        let tls = crate::ground::roots::client_config(roots)?;
        let connector = HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .enable_http2()
            .wrap_connector(http);
        Ok(Client { connector, pool: Arc::default() })
    }

    /// Sends a request and waits for the response head. The body streams
    /// after; dropping it before its end closes the connection rather than
    /// pooling it.
    ///
    /// A pooled connection found closed before the request went out is
    /// given up for another, or a new one: nothing was sent on it, so
    /// sending again is safe. A request that did go out is never resent
    /// here; retries are the policy's to decide.
    pub async fn send(&self, mut request: Request<Full<Bytes>>) -> Result<Response<Body>, Error> {
        if !request.headers().contains_key(header::USER_AGENT) {
            request.headers_mut().insert(header::USER_AGENT, HeaderValue::from_static(USER_AGENT));
        }
        let origin = match (request.uri().scheme(), request.uri().authority()) {
            (Some(scheme), Some(authority)) => Origin { scheme: scheme.clone(), authority: authority.clone() },
            _ => return Err(Error::NotAbsolute(request.uri().clone())),
        };
        loop {
            let Ready { conn, host, pooled } = self.ready(&origin).await?;
            let sent = match conn {
                Lent::Http1(conn) => self.send_http1(&origin, conn, host, request).await,
                Lent::Http2(mut conn) => match conn.try_send_request(request).await {
                    Ok(response) => Ok(response.map(Body::shared)),
                    Err(refused) => {
                        self.pool.unshare(&origin);
                        Err(Refused::from(refused))
                    }
                },
            };
            match sent {
                Ok(response) => return Ok(response),
                Err(Refused { unsent: Some(unsent), .. }) if pooled => request = unsent,
                Err(Refused { error, .. }) => return Err(Error::Exchange(error)),
            }
        }
    }

    /// Sends on an HTTP/1 connection, which wants the path alone in the
    /// request line and the origin in a `Host` header.
    async fn send_http1(
        &self,
        origin: &Origin,
        mut conn: pool::Http1,
        host: HeaderValue,
        mut request: Request<Full<Bytes>>,
    ) -> Result<Response<Body>, Refused> {
        let path = request.uri().path_and_query().cloned().unwrap_or_else(|| PathAndQuery::from_static("/"));
        let absolute = std::mem::replace(request.uri_mut(), Uri::from(path));
        let added_host = match request.headers_mut().entry(header::HOST) {
            Entry::Vacant(entry) => {
                entry.insert(host);
                true
            }
            Entry::Occupied(_) => false,
        };
        match conn.try_send_request(request).await {
            Ok(response) => Ok(response.map(|body| Body::returning(body, self.pool.clone(), origin.clone(), conn))),
            Err(refused) => {
                let mut refused = Refused::from(refused);
                // As it came, for whichever connection takes it next.
                if let Some(unsent) = &mut refused.unsent {
                    *unsent.uri_mut() = absolute;
                    if added_host {
                        unsent.headers_mut().remove(header::HOST);
                    }
                }
                Err(refused)
            }
        }
    }

    /// A connection to `origin` that can take a request now: an idle one
    /// from the pool, or a new one.
    async fn ready(&self, origin: &Origin) -> Result<Ready, Error> {
        loop {
            let (lent, host) = self.pool.checkout(origin)?;
            let conn = match lent {
                // Put back at the end of its last response, it may still be
                // finishing that exchange; or it may have closed since.
                Some(Lent::Http1(mut conn)) => conn.ready().await.is_ok().then_some(Lent::Http1(conn)),
                Some(Lent::Http2(mut conn)) => match conn.ready().await {
                    Ok(()) => Some(Lent::Http2(conn)),
                    Err(_) => {
                        self.pool.unshare(origin);
                        None
                    }
                },
                // Boxed: the connecting future is large (TLS and HTTP/2
                // handshakes), and inline it would be copied along with
                // every request's future although few requests connect.
                None => return Ok(Ready { conn: Box::pin(self.connect(origin)).await?, host, pooled: false }),
            };
            if let Some(conn) = conn {
                return Ok(Ready { conn, host, pooled: true });
            }
        }
    }

    /// Opens a connection, HTTP/2 if the provider's TLS offers it, and
    /// starts the task that drives it.
    async fn connect(&self, origin: &Origin) -> Result<Lent, Error> {
        let uri = Uri::builder()
            .scheme(origin.scheme.clone())
            .authority(origin.authority.clone())
            .path_and_query("/")
            .build()
            .map_err(|e| Error::connect(origin, e))?;
        let io: MaybeHttpsStream<TokioIo<tokio::net::TcpStream>> =
            self.connector.clone().oneshot(uri).await.map_err(|e| Error::connect(origin, e))?;
        if io.connected().is_negotiated_h2() {
            let (conn, driver) = http2::Builder::new(TokioExecutor::new())
                .timer(TokioTimer::new())
                .handshake(io)
                .await
                .map_err(|e| Error::connect(origin, e))?;
            drive(driver);
            self.pool.share(origin, conn.clone());
            Ok(Lent::Http2(conn))
        } else {
            let (conn, driver) = http1::handshake(io).await.map_err(|e| Error::connect(origin, e))?;
            drive(driver);
            Ok(Lent::Http1(conn))
        }
    }
}

/// Runs a connection's I/O until it closes. It ends by itself once every
/// handle to it is dropped and it is idle.
fn drive(driver: impl std::future::Future<Output = Result<(), hyper::Error>> + Send + 'static) {
    tokio::spawn(async move {
        if let Err(e) = driver.await {
            debug!("provider connection closed: {e}");
        }
    });
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use http_body_util::BodyExt;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    /// A provider that answers every request on a connection with `reply`,
    /// keeping the connection open, and counts the connections it accepts.
    async fn provider(reply: &'static str) -> (String, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            loop {
                let (mut socket, _) = listener.accept().await.unwrap();
                count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut seen = Vec::new();
                    let mut buf = [0; 4096];
                    while let Ok(n @ 1..) = socket.read(&mut buf).await {
                        seen.extend_from_slice(&buf[..n]);
                        // Bodiless requests: one head, one reply.
                        while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                            seen.drain(..end + 4);
                            if socket.write_all(reply.as_bytes()).await.is_err() {
                                return;
                            }
                        }
                    }
                });
            }
        });
        (base, accepted)
    }

    const OK: &str = "HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello";

    fn get(base: &str) -> Request<Full<Bytes>> {
        request(Method::GET, format!("{base}/v1/models").parse().unwrap(), HeaderMap::new(), Bytes::new())
    }

    async fn read(client: &Client, base: &str) -> Bytes {
        let response = client.send(get(base)).await.unwrap();
        response.into_body().collect().await.unwrap().to_bytes()
    }

    /// The connections a provider answering `reply` accepts for three
    /// requests, one after another, each read to its end.
    async fn connections_for_three(reply: &'static str) -> usize {
        let (base, accepted) = provider(reply).await;
        let client = Client::new().unwrap();
        for _ in 0..3 {
            assert_eq!(read(&client, &base).await, "hello");
        }
        accepted.load(Ordering::SeqCst)
    }

    #[tokio::test]
    async fn requests_one_after_another_share_one_connection() {
        assert_eq!(connections_for_three(OK).await, 1);
    }

    #[tokio::test]
    async fn a_body_read_to_its_last_frame_frees_its_connection_while_still_held() {
        let (base, accepted) = provider(OK).await;
        let client = Client::new().unwrap();
        let mut held = client.send(get(&base)).await.unwrap().into_body();
        let frame = held.frame().await.unwrap().unwrap();
        assert_eq!(frame.into_data().unwrap(), "hello");
        assert!(hyper::body::Body::is_end_stream(&held));
        // Not polled to its end nor dropped: the next request still goes on
        // the same connection, without waiting for it.
        let next = tokio::time::timeout(Duration::from_secs(5), read(&client, &base)).await.unwrap();
        assert_eq!(next, "hello");
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
        drop(held);
    }

    #[tokio::test]
    async fn requests_at_once_each_get_a_connection_then_reuse_them() {
        let (base, accepted) = provider(OK).await;
        let client = Client::new().unwrap();
        let both = || async { tokio::join!(read(&client, &base), read(&client, &base)) };
        assert_eq!(both().await, (Bytes::from("hello"), Bytes::from("hello")));
        assert_eq!(both().await, (Bytes::from("hello"), Bytes::from("hello")));
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_body_left_unread_closes_its_connection_instead_of_pooling_it() {
        let (base, accepted) = provider(OK).await;
        let client = Client::new().unwrap();
        let response = client.send(get(&base)).await.unwrap();
        drop(response);
        assert_eq!(read(&client, &base).await, "hello");
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_connection_the_provider_closes_is_replaced() {
        let closing = "HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello";
        assert_eq!(connections_for_three(closing).await, 3);
    }

    #[tokio::test]
    async fn http1_requests_carry_the_path_and_a_host_header() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let head = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut seen = Vec::new();
            let mut buf = [0; 4096];
            while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = socket.read(&mut buf).await.unwrap();
                seen.extend_from_slice(&buf[..n]);
            }
            socket.write_all(OK.as_bytes()).await.unwrap();
            String::from_utf8(seen).unwrap()
        });
        let client = Client::new().unwrap();
        assert_eq!(read(&client, &format!("http://{address}")).await, "hello");
        let head = head.await.unwrap();
        assert!(head.starts_with("GET /v1/models HTTP/1.1\r\n"), "{head}");
        assert!(head.contains(&format!("host: {address}\r\n")), "{head}");
        assert!(head.contains(&format!("user-agent: {USER_AGENT}\r\n")), "{head}");
    }

    #[tokio::test]
    async fn nothing_listening_is_a_connect_error() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        drop(listener);
        let client = Client::new().unwrap();
        let error = client.send(get(&format!("http://{address}"))).await.unwrap_err();
        assert!(error.is_connect(), "{error:?}");
        assert!(error.to_string().contains(&address.to_string()), "{error}");
    }

    #[tokio::test]
    async fn a_relative_uri_is_refused_before_any_connection() {
        let client = Client::new().unwrap();
        let request = request(Method::GET, Uri::from_static("/v1/models"), HeaderMap::new(), Bytes::new());
        assert!(matches!(client.send(request).await, Err(Error::NotAbsolute(_))));
    }

    mod tls {
        use std::convert::Infallible;

        use hyper::service::service_fn;
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        use tokio_rustls::TlsAcceptor;

        use super::*;

        const CERT: &[u8] = include_bytes!("testdata/localhost.crt");
        const KEY: &[u8] = include_bytes!("testdata/localhost.key");

        /// A provider on TLS offering `alpn`, answering "hello" on each
        /// request, counting the connections it accepts.
        async fn provider(alpn: &'static [u8]) -> (String, Arc<AtomicUsize>) {
            let mut config =
                rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                    .with_safe_default_protocol_versions()
                    .unwrap()
                    .with_no_client_auth()
                    .with_single_cert(
                        vec![CertificateDer::from_pem_slice(CERT).unwrap()],
                        PrivateKeyDer::from_pem_slice(KEY).unwrap(),
                    )
                    .unwrap();
            config.alpn_protocols = vec![alpn.to_vec()];
            let acceptor = TlsAcceptor::from(Arc::new(config));
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let base = format!("https://localhost:{}", listener.local_addr().unwrap().port());
            let accepted = Arc::new(AtomicUsize::new(0));
            let count = accepted.clone();
            tokio::spawn(async move {
                loop {
                    let (socket, _) = listener.accept().await.unwrap();
                    count.fetch_add(1, Ordering::SeqCst);
                    let acceptor = acceptor.clone();
                    tokio::spawn(async move {
                        let io = TokioIo::new(acceptor.accept(socket).await.unwrap());
                        let hello = service_fn(|_| async {
                            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from("hello"))))
                        });
                        if alpn == b"h2" {
                            let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                                .serve_connection(io, hello)
                                .await;
                        } else {
                            let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, hello).await;
                        }
                    });
                }
            });
            (base, accepted)
        }

        fn client() -> Client {
            let mut roots = rustls::RootCertStore::empty();
            roots.add(CertificateDer::from_pem_slice(CERT).unwrap()).unwrap();
            Client::with_roots(roots).unwrap()
        }

        async fn version_and_body(client: &Client, base: &str) -> (axum::http::Version, Bytes) {
            let response = client.send(get(base)).await.unwrap();
            let version = response.version();
            (version, response.into_body().collect().await.unwrap().to_bytes())
        }

        #[tokio::test]
        async fn http2_requests_share_one_connection_at_once_and_after() {
            let (base, accepted) = provider(b"h2").await;
            let client = client();
            let (a, b, c) = tokio::join!(
                version_and_body(&client, &base),
                version_and_body(&client, &base),
                version_and_body(&client, &base)
            );
            for answer in [a, b, c] {
                assert_eq!(answer, (axum::http::Version::HTTP_2, Bytes::from("hello")));
            }
            assert_eq!(version_and_body(&client, &base).await.1, "hello");
            // Concurrent first requests may each have connected before one
            // was shared; after that, one connection carries them all.
            let opened = accepted.load(Ordering::SeqCst);
            assert!((1..=3).contains(&opened), "{opened}");
            for _ in 0..3 {
                version_and_body(&client, &base).await;
            }
            assert_eq!(accepted.load(Ordering::SeqCst), opened);
        }

        #[tokio::test]
        async fn http1_over_tls_reuses_its_connection() {
            let (base, accepted) = provider(b"http/1.1").await;
            let client = client();
            for _ in 0..3 {
                assert_eq!(
                    version_and_body(&client, &base).await,
                    (axum::http::Version::HTTP_11, Bytes::from("hello"))
                );
            }
            assert_eq!(accepted.load(Ordering::SeqCst), 1);
        }

        #[tokio::test]
        async fn an_untrusted_certificate_is_a_connect_error() {
            let (base, _) = provider(b"h2").await;
            let client = Client::with_roots(rustls::RootCertStore::empty()).unwrap();
            let error = client.send(get(&base)).await.unwrap_err();
            assert!(error.is_connect(), "{error:?}");
            assert!(crate::proxy::attempt::error_chain(&error).contains("certificate"), "{error:?}");
        }
    }
}
