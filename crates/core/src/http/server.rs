//! The HTTP surface: the listener, the one pipeline every request takes
//! ([`Front`]), and the routes beside the proxy.

use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::body::Body;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, Uri};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::{Json, Router};
use futures_util::future::BoxFuture;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder as ConnectionBuilder;
use hyper_util::server::graceful::GracefulShutdown;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::task::AbortOnDropHandle;
use tower::ServiceExt;
use tracing::{debug, debug_span, warn, Instrument};

use crate::gateway::Gateway;
use crate::ground::headers::name;
use crate::http::correlation::RequestIds;
use crate::members::Member;
use crate::protocol::error::{ApiError, ErrorCode};
use crate::protocol::{Endpoint, Protocol};
use crate::proxy::{self, Inbound};
use crate::upstream::routing;

/// Every route but the proxy endpoints' `POST`, which [`Front`] hands to the
/// proxy itself. It has no guard or correlation of its own: [`Front`] applies
/// both before a request reaches it, so there is one pipeline, not two.
fn routes(gateway: Gateway) -> Router {
    let mut router = Router::new()
        .route("/", get(root))
        .route("/healthz", get(healthz))
        .route("/metrics", get(crate::admin::live::metrics))
        .route(crate::admin::whoami::PATH, get(crate::admin::whoami::whoami))
        .route("/v1/models", get(list_models))
        .route("/v1/models/{*id}", get(get_model))
        .route("/v1beta/models", get(list_gemini_models))
        .route("/v1beta/models/{*id}", get(get_gemini_model));
    for endpoint in Endpoint::FIXED {
        let protocol = endpoint.protocol();
        router = router.route(endpoint.gateway_path(), any(move || async move { method_not_allowed(protocol) }));
    }
    router
        .merge(crate::admin::router(gateway.clone()))
        .merge(crate::admin::ui::routes())
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(gateway.clone(), bounded_body))
        .with_state(gateway)
}

/// Serves until `shutdown` resolves, then lets in-flight requests finish.
/// The caller binds the listener (port 0 in tests).
///
/// Each connection is served by hyper with the configured limits: at most
/// `max_connections` at once (more are closed on accept), a first request
/// head within `header_timeout` of accept (HTTP/1 and HTTP/2: a socket that
/// stays silent, or sends only the HTTP/2 preface, is closed), each later
/// HTTP/1 head within hyper's `header_read_timeout` (slow-loris), and a
/// bounded header buffer.
///
/// After `shutdown`, open connections finish their requests; dropping the
/// returned future (a caller's grace period ran out) cuts them, and stops
/// the probes, so nothing keeps serving behind the caller's back.
pub async fn serve(
    listener: TcpListener,
    gateway: Gateway,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let limits = gateway.live().config.server.clone();
    // Before the first request: spend on record, so budgets survive a restart.
    if let Err(e) = gateway.seed_budgets().await {
        warn!("budgets count from zero: the spend on record could not be read: {e}");
    }
    // Active probes for the providers that want them; ended with the server.
    let _probes = AbortOnDropHandle::new(tokio::spawn(crate::telemetry::health::probe_forever(
        gateway.clone(),
        limits.probe_every,
    )));
    let app = routes(gateway.clone());
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    // Connection tasks live in the set: dropped with it, they end.
    let mut connections = tokio::task::JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    // Out of file descriptors and the like: back off, keep serving.
                    warn!("accept failed: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            warn!(%peer, "connection refused: {} connections already open (server.max_connections)", limits.max_connections);
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let local = stream.local_addr().ok();
        let arrived = Arc::new(tokio::sync::Notify::new());
        let service = Front { gateway: gateway.clone(), app: app.clone(), peer, local, arrived: arrived.clone() };
        let mut builder = ConnectionBuilder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_timeout)
            .max_buf_size((limits.max_header_bytes * 2).max(16 * 1024));
        builder.http2().max_header_list_size(u32::try_from(limits.max_header_bytes * 2).unwrap_or(u32::MAX));
        let connection = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
        let connection = graceful.watch(connection.into_owned());
        let header_timeout = limits.header_timeout;
        connections.spawn(async move {
            if let Err(e) = first_request_within(connection, &arrived, header_timeout).await {
                tracing::debug!(%peer, "connection ended: {e}");
            }
            drop(slot);
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// Serves `connection`, but closes it if no request head has arrived within
/// `limit` of accept. hyper's own header timeout runs from a head's first
/// byte, so without this a socket that never sends one (or an HTTP/2 client
/// that sends the preface and stops) would hold a connection slot forever.
async fn first_request_within<F, E>(connection: F, arrived: &tokio::sync::Notify, limit: Duration) -> Result<(), E>
where
    F: Future<Output = Result<(), E>>,
{
    let mut connection = std::pin::pin!(connection);
    tokio::select! {
        result = connection.as_mut() => return result,
        first = tokio::time::timeout(limit, arrived.notified()) => {
            if first.is_err() {
                debug!("closed a connection that sent no request within server.header_timeout");
                return Ok(());
            }
        }
    }
    connection.await
}

/// Largest body the routes other than the proxy endpoints read (the admin
/// API's config and keys, the dashboard's login).
const MAX_ADMIN_BODY: usize = 1024 * 1024;

/// Reads the body of every request the router serves, other than the
/// proxy endpoints (which read their own, under `max_body_bytes`), within
/// `server.body_timeout` and [`MAX_ADMIN_BODY`]: a client that sends a
/// body slowly, or never finishes it, is answered 408 instead of holding
/// the connection and a task forever.
async fn bounded_body(State(gw): State<Gateway>, request: Request, next: Next) -> Response {
    if hyper::body::Body::size_hint(request.body()).exact() == Some(0) {
        return next.run(request).await;
    }
    let (limit, within) = {
        let live = gw.live();
        (MAX_ADMIN_BODY.min(live.config.server.max_body_bytes), live.config.server.body_timeout)
    };
    let (head, body) = request.into_parts();
    match proxy::read_body(body, &head.headers, limit, within).await {
        Ok(bytes) => next.run(Request::from_parts(head, Body::from(bytes))).await,
        Err(e) => e.in_protocol(crate::http::guard::protocol_of(head.uri.path())).into_response(),
    }
}

/// The proxy endpoint a request is for (a `POST` to one of their paths),
/// with the model a Gemini path names.
fn proxy_endpoint<B>(request: &axum::http::Request<B>) -> Option<(Endpoint, Option<String>)> {
    if request.method() != axum::http::Method::POST {
        return None;
    }
    Endpoint::of_path(request.uri().path()).map(|(e, model)| (e, model.map(str::to_string)))
}

/// A request's ids, and a debug-level span that carries them onto every
/// line logged for it at debug level. Warnings about a request name its ids
/// themselves, so at the default level no span is made per request; the
/// request itself is on record in history, and its own line is debug.
struct Correlated {
    ids: RequestIds,
    span: tracing::Span,
    started: Instant,
    /// Method and path, kept only when the debug line will be written.
    access: Option<(axum::http::Method, String)>,
}

impl Correlated {
    fn begin(headers: &HeaderMap, method: &axum::http::Method, uri: &Uri) -> Correlated {
        let ids = RequestIds::from_headers(headers);
        let span = debug_span!(
            "request",
            request_id = %ids.request_id,
            correlation_id = %ids.correlation_id,
            trace_id = tracing::field::Empty,
            span_id = tracing::field::Empty,
        );
        let access = tracing::enabled!(tracing::Level::DEBUG).then(|| (method.clone(), uri.path().to_string()));
        Correlated { ids, span, started: Instant::now(), access }
    }

    fn end(self, mut response: Response) -> Response {
        let headers = response.headers_mut();
        for (header, value) in
            [(name::X_REQUEST_ID, &self.ids.request_id), (name::X_CORRELATION_ID, &self.ids.correlation_id)]
        {
            if let Ok(v) = HeaderValue::from_str(value) {
                headers.insert(header, v);
            }
        }
        if let Some((method, path)) = self.access {
            self.span.in_scope(|| {
                let provider =
                    response.headers().get(name::X_SWITCHYARD_PROVIDER).and_then(|v| v.to_str().ok()).unwrap_or("-");
                debug!(
                    method = %method,
                    path = %path,
                    status = response.status().as_u16(),
                    provider,
                    head_ms = self.started.elapsed().as_millis() as u64,
                    "response"
                );
            });
        }
        response
    }
}

/// What each connection is served by, for every request: correlation ids
/// and the guard as plain calls, then the proxy endpoints, the hot path,
/// straight to the proxy (no middleware layers boxing futures, no
/// extractors cloning headers, no routing table) and everything else to
/// [`routes`].
#[derive(Clone)]
struct Front {
    gateway: Gateway,
    app: Router,
    peer: SocketAddr,
    /// The address the connection was accepted on, which the gateway's
    /// proof of identity names (`challenge`).
    local: Option<SocketAddr>,
    /// Told when the connection's first request head has arrived.
    arrived: Arc<tokio::sync::Notify>,
}

impl hyper::service::Service<axum::http::Request<Incoming>> for Front {
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = tracing::instrument::Instrumented<BoxFuture<'static, Result<Response, std::convert::Infallible>>>;

    fn call(&self, request: axum::http::Request<Incoming>) -> Self::Future {
        self.arrived.notify_one();
        let correlated = Correlated::begin(request.headers(), request.method(), request.uri());
        let span = correlated.span.clone();
        let serve: BoxFuture<'static, _> = Box::pin(self.clone().serve(request, correlated));
        serve.instrument(span)
    }
}

impl Front {
    /// The one pipeline: ids, then the guard, then the proxy or the routes.
    ///
    /// One `async fn` awaiting the proxy or the router directly, not a
    /// chain of wrappers around them: a request's future is several KB (the
    /// proxy's attempt and relay), and each wrapper it is created in and
    /// moved out of is another copy of all of it, per request.
    async fn serve(
        self,
        mut request: axum::http::Request<Incoming>,
        correlated: Correlated,
    ) -> Result<Response, std::convert::Infallible> {
        let admitted = match crate::http::guard::admit(&self.gateway, &mut request, Some(self.peer)) {
            Ok(admitted) => admitted,
            Err(refusal) => {
                let mut response = correlated.end(*refusal);
                if let Some(instance) = self.gateway.instance_header() {
                    response.headers_mut().insert(name::X_SWITCHYARD_INSTANCE, instance.clone());
                }
                return Ok(response);
            }
        };
        let response = match proxy_endpoint(&request) {
            Some((endpoint, path_model)) => {
                let (head, body) = request.into_parts();
                let inbound = Inbound {
                    endpoint,
                    path_model,
                    ids: correlated.ids.clone(),
                    headers: head.headers,
                    uri: head.uri,
                    peer: Some(self.peer.ip()),
                };
                // Boxed where it starts: the proxy's future is most of a
                // request's state, and this one is moved (copied whole)
                // several times on its way into hyper's connection task.
                // Behind a pointer it is copied once, into its box.
                Box::pin(proxy::handle(&self.gateway, inbound, Body::new(body))).await
            }
            None => {
                request.extensions_mut().insert(ConnectInfo(self.peer));
                if let Some(local) = self.local {
                    request.extensions_mut().insert(crate::admin::whoami::LocalAddr(local));
                }
                match self.app.clone().oneshot(request).await {
                    Ok(response) => response,
                    Err(never) => match never {},
                }
            }
        };
        let mut response = correlated.end(admitted.finish(response));
        if let Some(instance) = self.gateway.instance_header() {
            response.headers_mut().insert(name::X_SWITCHYARD_INSTANCE, instance.clone());
        }
        Ok(response)
    }
}

async fn root() -> &'static str {
    "Switchyard gateway\n"
}

async fn healthz() -> Json<Value> {
    Json(json!({ "status": "ok" }))
}

fn caller_protocol(headers: &HeaderMap) -> Protocol {
    if headers.contains_key("anthropic-version") {
        Protocol::Anthropic
    } else {
        Protocol::OpenAi
    }
}

/// Who asks for the models, in which protocol, and what they are
/// offered: a member the models it may ask for, anyone else every
/// routable one. A refused member key is the rejection, in the caller's
/// protocol.
struct Offer {
    protocol: Protocol,
    member: Option<Member>,
    models: Vec<(String, String)>,
}

impl axum::extract::FromRequestParts<Gateway> for Offer {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, gw: &Gateway) -> Result<Offer, Response> {
        let protocol =
            if parts.uri.path().starts_with("/v1beta/") { Protocol::Gemini } else { caller_protocol(&parts.headers) };
        let token = crate::http::guard::client_token(&parts.headers, parts.uri.query());
        let peer = parts.extensions.get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip());
        let now = crate::ground::clock::now_ms();
        let member = gw
            .members()
            .identify(gw.store(), token.as_deref(), gw.access_token(), peer, now)
            .await
            .map_err(|refusal| refusal.in_protocol(protocol).into_response())?;
        let models = routable_models(gw, protocol, member.as_ref());
        Ok(Offer { protocol, member, models })
    }
}

/// The models a member is offered, and the team's word on falling back
/// ([`crate::config::MembersConfig`]), told to the gateway it joined from.
fn offered(gw: &Gateway, mut response: Response, member: Option<&Member>) -> Response {
    if member.is_some() {
        let allow = gw.live().config.members.allow_local_fallback;
        response.headers_mut().insert(
            name::X_SWITCHYARD_ALLOW_LOCAL_FALLBACK,
            HeaderValue::from_static(if allow { "true" } else { "false" }),
        );
    }
    response
}

/// Client-facing model names the gateway can serve right now to a client
/// of `protocol`, natively or translated; a member's, those it may ask for.
fn routable_models(gw: &Gateway, protocol: Protocol, member: Option<&Member>) -> Vec<(String, String)> {
    let endpoint = match protocol {
        Protocol::OpenAi => Endpoint::ChatCompletions,
        Protocol::Anthropic => Endpoint::Messages,
        Protocol::Gemini => Endpoint::GeminiGenerate,
    };
    let live = gw.live();
    let config = &live.config;
    let names = config
        .routes
        .iter()
        .map(|r| r.model.as_str())
        .chain(config.providers.iter().flat_map(|p| p.models.client_names()));
    let mut seen = std::collections::HashSet::new();
    names
        .filter(|m| seen.insert(*m) && member.is_none_or(|member| member.allows(m)))
        .filter_map(|m| {
            let plan = routing::plan(&live.providers, &config.routes, endpoint, m).ok()?;
            let owner = plan.candidates.first()?.provider.name().to_string();
            Some((m.to_string(), owner))
        })
        .collect()
}

fn model_object(protocol: Protocol, id: &str, owner: &str) -> Value {
    match protocol {
        Protocol::OpenAi => json!({ "id": id, "object": "model", "created": 0, "owned_by": owner }),
        Protocol::Gemini => gemini_model(id),
        Protocol::Anthropic => json!({
            "type": "model", "id": id, "display_name": id, "created_at": "1970-01-01T00:00:00Z"
        }),
    }
}

async fn list_models(State(gw): State<Gateway>, offer: Offer) -> Response {
    let Offer { protocol, models, .. } = &offer;
    let protocol = *protocol;
    let data: Vec<Value> = models.iter().map(|(id, owner)| model_object(protocol, id, owner)).collect();
    let list = Json(match protocol {
        Protocol::OpenAi => json!({ "object": "list", "data": data }),
        Protocol::Gemini => json!({ "models": data }),
        Protocol::Anthropic => json!({
            "data": data,
            "has_more": false,
            "first_id": models.first().map(|m| &m.0),
            "last_id": models.last().map(|m| &m.0),
        }),
    });
    offered(&gw, list.into_response(), offer.member.as_ref())
}

async fn get_model(Path(id): Path<String>, offer: Offer) -> Response {
    match offer.models.into_iter().find(|(m, _)| *m == id) {
        Some((id, owner)) => Json(model_object(offer.protocol, &id, &owner)).into_response(),
        None => not_routed(offer.protocol, &id),
    }
}

fn not_routed(protocol: Protocol, id: &str) -> Response {
    ApiError::new(protocol, ErrorCode::ModelNotFound, format!("the model `{id}` is not routed by this gateway"))
        .into_response()
}

/// Gemini's `models/{id}` resource for a routable model.
fn gemini_model(id: &str) -> Value {
    json!({
        "name": format!("models/{id}"),
        "baseModelId": id,
        "displayName": id,
        "supportedGenerationMethods": ["generateContent", "streamGenerateContent", "countTokens"],
    })
}

async fn list_gemini_models(State(gw): State<Gateway>, offer: Offer) -> Response {
    let models: Vec<Value> = offer.models.iter().map(|(id, _)| gemini_model(id)).collect();
    offered(&gw, Json(json!({ "models": models })).into_response(), offer.member.as_ref())
}

async fn get_gemini_model(Path(id): Path<String>, offer: Offer) -> Response {
    let id = id.strip_prefix("models/").unwrap_or(&id);
    match offer.models.into_iter().find(|(m, _)| m == id) {
        Some((id, _)) => Json(gemini_model(&id)).into_response(),
        None => not_routed(Protocol::Gemini, id),
    }
}

async fn not_found(uri: Uri) -> ApiError {
    ApiError::new(Protocol::OpenAi, ErrorCode::NotFound, format!("no such endpoint: {}", uri.path()))
}

fn method_not_allowed(protocol: Protocol) -> ApiError {
    ApiError::new(protocol, ErrorCode::MethodNotAllowed, "this endpoint only accepts POST")
}
