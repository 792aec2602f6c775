//! Connections kept open between requests, one list per origin (scheme and
//! authority).
//!
//! An HTTP/1 connection carries one exchange at a time: it is taken out of
//! the pool for a request and put back when the response body has been read
//! to its end ([`Body`]). A body dropped before its end never puts it back,
//! and hyper closes the connection, since what is left of the body would
//! otherwise come ahead of the next response. An HTTP/2 connection carries
//! many exchanges at once, so the pool lends out clones of one shared handle.
//!
//! A gateway talks to a handful of origins, so they sit in a short list,
//! found by comparing, not hashing. Idle connections are reused newest
//! first, which leaves the surplus of a burst at the old end, where it is
//! closed once idle for [`IDLE_TIMEOUT`] (checked when its origin is next
//! used; a provider closing an idle connection first closes it too).

use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::http::uri::{Authority, Scheme};
use axum::http::HeaderValue;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper::client::conn::{http1, http2};

/// Idle connections are closed after this long.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// Idle HTTP/1 connections kept per origin; more are closed when they finish.
const MAX_IDLE: usize = 256;

pub type Http1 = http1::SendRequest<Full<Bytes>>;
pub type Http2 = http2::SendRequest<Full<Bytes>>;

/// Where a connection goes: requests to the same origin share connections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub scheme: Scheme,
    pub authority: Authority,
}

/// A connection ready to be tried.
#[derive(Debug)]
pub enum Lent {
    Http1(Http1),
    Http2(Http2),
}

#[derive(Debug, Default)]
pub struct Pool {
    origins: Mutex<Vec<Slot>>,
}

#[derive(Debug)]
struct Slot {
    origin: Origin,
    /// The `Host` header HTTP/1 requests to this origin carry.
    host: HeaderValue,
    /// Oldest first.
    idle: Vec<(Http1, Instant)>,
    shared: Option<Http2>,
}

/// The authority of a request's URI that cannot be its `Host` header.
#[derive(Debug, thiserror::Error)]
#[error("{0} cannot be sent as a Host header")]
pub struct BadHost(String);

impl Pool {
    /// A connection to `origin` if one is open and free, and the `Host`
    /// header of requests to it.
    pub fn checkout(&self, origin: &Origin) -> Result<(Option<Lent>, HeaderValue), BadHost> {
        let mut origins = self.lock();
        let slot = match origins.iter().position(|s| s.origin == *origin) {
            Some(at) => &mut origins[at],
            None => {
                let host = HeaderValue::from_str(origin.authority.as_str())
                    .map_err(|_| BadHost(origin.authority.to_string()))?;
                origins.push(Slot { origin: origin.clone(), host, idle: Vec::new(), shared: None });
                let last = origins.len() - 1;
                &mut origins[last]
            }
        };
        let host = slot.host.clone();
        if let Some(shared) = &slot.shared {
            if !shared.is_closed() {
                return Ok((Some(Lent::Http2(shared.clone())), host));
            }
            slot.shared = None;
        }
        slot.close_expired(Instant::now());
        while let Some((conn, _)) = slot.idle.pop() {
            if !conn.is_closed() {
                return Ok((Some(Lent::Http1(conn)), host));
            }
        }
        Ok((None, host))
    }

    /// Takes back an HTTP/1 connection whose exchange is over.
    pub fn put(&self, origin: &Origin, conn: Http1) {
        if conn.is_closed() {
            return;
        }
        let now = Instant::now();
        let mut origins = self.lock();
        // Every origin has its slot from its first checkout.
        let Some(slot) = origins.iter_mut().find(|s| s.origin == *origin) else { return };
        slot.close_expired(now);
        if slot.idle.len() < MAX_IDLE {
            slot.idle.push((conn, now));
        }
    }

    /// Makes `conn` the connection that requests to `origin` share.
    pub fn share(&self, origin: &Origin, conn: Http2) {
        if let Some(slot) = self.lock().iter_mut().find(|s| s.origin == *origin) {
            slot.shared = Some(conn);
        }
    }

    /// Stops sharing the origin's HTTP/2 connection, which refused a request.
    pub fn unshare(&self, origin: &Origin) {
        if let Some(slot) = self.lock().iter_mut().find(|s| s.origin == *origin) {
            slot.shared = None;
        }
    }

    /// The lock guards plain lists that no panic can leave half-changed.
    fn lock(&self) -> MutexGuard<'_, Vec<Slot>> {
        self.origins.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Slot {
    /// Dropping a handle closes its idle connection.
    fn close_expired(&mut self, now: Instant) {
        let expired = self.idle.iter().take_while(|(_, since)| now.duration_since(*since) >= IDLE_TIMEOUT).count();
        self.idle.drain(..expired);
    }
}

/// A response body from a provider. Read to its end, it returns its HTTP/1
/// connection to the pool.
#[derive(Debug)]
pub struct Body {
    inner: Incoming,
    home: Option<Home>,
}

#[derive(Debug)]
struct Home {
    pool: Arc<Pool>,
    origin: Origin,
    conn: Http1,
}

impl Body {
    /// A body on a connection that goes back to `pool` after it.
    pub fn returning(inner: Incoming, pool: Arc<Pool>, origin: Origin, conn: Http1) -> Body {
        let mut body = Body { inner, home: Some(Home { pool, origin, conn }) };
        body.return_if_done();
        body
    }

    /// A body on a shared connection, which stays in the pool throughout.
    pub fn shared(inner: Incoming) -> Body {
        Body { inner, home: None }
    }

    fn return_if_done(&mut self) {
        if hyper::body::Body::is_end_stream(&self.inner) {
            self.go_home();
        }
    }

    /// The next chunk of data, passing over trailers; `None` at the end.
    pub async fn data(&mut self) -> Option<Result<Bytes, hyper::Error>> {
        loop {
            match http_body_util::BodyExt::frame(self).await? {
                Ok(frame) => {
                    if let Ok(data) = frame.into_data() {
                        return Some(Ok(data));
                    }
                }
                Err(e) => return Some(Err(e)),
            }
        }
    }

    /// Puts the connection back in the pool, once.
    fn go_home(&mut self) {
        if let Some(home) = self.home.take() {
            home.pool.put(&home.origin, home.conn);
        }
    }
}

impl hyper::body::Body for Body {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let frame = std::task::ready!(Pin::new(&mut self.inner).poll_frame(cx));
        match &frame {
            Some(Ok(_)) => self.return_if_done(),
            // The end, as a body without a known length tells it.
            None => self.go_home(),
            // A broken body leaves the connection unusable: it is dropped.
            Some(Err(_)) => self.home = None,
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
