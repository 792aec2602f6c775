//! Header names the gateway reads or sets, and which of them carry a
//! credential: the words every layer uses, in one place.

use axum::http::header::{self, HeaderName};

/// Names looked up or set on every request, parsed once: a name given as
/// text is validated and parsed again at each lookup.
pub mod name {
    use axum::http::HeaderName;

    pub const X_API_KEY: HeaderName = HeaderName::from_static("x-api-key");
    /// W3C Trace Context: the parent span, and vendors' trace state.
    pub const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
    pub const TRACESTATE: HeaderName = HeaderName::from_static("tracestate");
    /// Azure OpenAI's key header.
    pub const API_KEY: HeaderName = HeaderName::from_static("api-key");
    /// Google's key header (Gemini, Vertex).
    pub const X_GOOG_API_KEY: HeaderName = HeaderName::from_static("x-goog-api-key");
    pub const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
    pub const X_CORRELATION_ID: HeaderName = HeaderName::from_static("x-correlation-id");
    pub const X_UPSTREAM_REQUEST_ID: HeaderName = HeaderName::from_static("x-upstream-request-id");
    pub const ANTHROPIC_VERSION: HeaderName = HeaderName::from_static("anthropic-version");
    pub const ANTHROPIC_BETA: HeaderName = HeaderName::from_static("anthropic-beta");
    pub const X_SWITCHYARD_TIMEOUT_MS: HeaderName = HeaderName::from_static("x-switchyard-timeout-ms");
    pub const X_STAINLESS_TIMEOUT: HeaderName = HeaderName::from_static("x-stainless-timeout");
    pub const RETRY_AFTER_MS: HeaderName = HeaderName::from_static("retry-after-ms");
    pub const X_RATELIMIT_RESET_REQUESTS: HeaderName = HeaderName::from_static("x-ratelimit-reset-requests");
    pub const X_RATELIMIT_RESET_TOKENS: HeaderName = HeaderName::from_static("x-ratelimit-reset-tokens");
    pub const X_SWITCHYARD_PROVIDER: HeaderName = HeaderName::from_static("x-switchyard-provider");
    pub const X_SWITCHYARD_INSTANCE: HeaderName = HeaderName::from_static("x-switchyard-instance");
    /// A dashboard session, for a client that cannot keep a cookie.
    pub const X_SWITCHYARD_SESSION: HeaderName = HeaderName::from_static("x-switchyard-session");
    pub const X_SWITCHYARD_ATTEMPTS: HeaderName = HeaderName::from_static("x-switchyard-attempts");
    /// The gateway's error code on an error it answers (`budget_exceeded`).
    pub const X_SWITCHYARD_ERROR: HeaderName = HeaderName::from_static("x-switchyard-error");
    /// The device a joined gateway sends for, named to the team's gateway.
    pub const X_SWITCHYARD_DEVICE: HeaderName = HeaderName::from_static("x-switchyard-device");
    /// The team's word to a member's joined gateway ([`crate::config::MembersConfig`]).
    pub const X_SWITCHYARD_ALLOW_LOCAL_FALLBACK: HeaderName =
        HeaderName::from_static("x-switchyard-allow-local-fallback");
    pub const X_RATELIMIT_REMAINING_REQUESTS: HeaderName = HeaderName::from_static("x-ratelimit-remaining-requests");
    pub const X_RATELIMIT_REMAINING_TOKENS: HeaderName = HeaderName::from_static("x-ratelimit-remaining-tokens");
    pub const ANTHROPIC_RATELIMIT_REQUESTS_REMAINING: HeaderName =
        HeaderName::from_static("anthropic-ratelimit-requests-remaining");
    pub const ANTHROPIC_RATELIMIT_TOKENS_REMAINING: HeaderName =
        HeaderName::from_static("anthropic-ratelimit-tokens-remaining");
    pub const ANTHROPIC_RATELIMIT_INPUT_TOKENS_REMAINING: HeaderName =
        HeaderName::from_static("anthropic-ratelimit-input-tokens-remaining");
}

/// Every header the gateway knows to carry a credential. None a client
/// sends is forwarded to a provider (the provider's own key is injected
/// instead), and none is fit for a log or a trace.
pub const CREDENTIALS: [HeaderName; 7] = [
    header::AUTHORIZATION,
    header::PROXY_AUTHORIZATION,
    name::X_API_KEY,
    name::API_KEY,
    name::X_GOOG_API_KEY,
    header::COOKIE,
    name::X_SWITCHYARD_SESSION,
];

/// Query parameters that carry a credential (Gemini clients send `?key=`).
pub const CREDENTIAL_PARAMS: [&str; 3] = ["key", "api_key", "api-key"];

/// The client's query string as it may go to a provider: without any
/// [`CREDENTIAL_PARAMS`] (the provider gets its own key, in its header).
pub fn forwarded_query(query: &str) -> std::borrow::Cow<'_, str> {
    let is_credential = |pair: &str| {
        url::form_urlencoded::parse(pair.as_bytes()).next().is_some_and(|(n, _)| CREDENTIAL_PARAMS.contains(&&*n))
    };
    if !query.split('&').any(is_credential) {
        return std::borrow::Cow::Borrowed(query);
    }
    std::borrow::Cow::Owned(query.split('&').filter(|pair| !is_credential(pair)).collect::<Vec<_>>().join("&"))
}

/// Whether `name` is one of [`CREDENTIALS`].
pub fn is_credential(name: &HeaderName) -> bool {
    CREDENTIALS.contains(name)
}

/// The Anthropic API version sent when the client did not name one.
pub const DEFAULT_ANTHROPIC_VERSION: &str = "2023-06-01";
