//! The two wire protocols Switchyard speaks and the endpoints of each.

pub(crate) mod error;
pub(crate) mod sse;
pub(crate) mod usage;

pub use usage::Usage;

use std::fmt;

/// A wire protocol: what a client speaks, and what a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    OpenAi,
    Anthropic,
}

impl Protocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::OpenAi => "openai",
            Protocol::Anthropic => "anthropic",
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A proxied endpoint. Paths are relative to a provider's `base_url`, which
/// ends in the API version (`.../v1`), so both protocols join the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endpoint {
    ChatCompletions,
    Completions,
    Embeddings,
    Responses,
    Messages,
    CountTokens,
}

impl Endpoint {
    pub const ALL: [Endpoint; 6] = [
        Endpoint::ChatCompletions,
        Endpoint::Completions,
        Endpoint::Embeddings,
        Endpoint::Responses,
        Endpoint::Messages,
        Endpoint::CountTokens,
    ];

    pub fn protocol(self) -> Protocol {
        match self {
            Endpoint::ChatCompletions | Endpoint::Completions | Endpoint::Embeddings | Endpoint::Responses => {
                Protocol::OpenAi
            }
            Endpoint::Messages | Endpoint::CountTokens => Protocol::Anthropic,
        }
    }

    /// The path clients call on the gateway.
    pub fn gateway_path(self) -> &'static str {
        match self {
            Endpoint::ChatCompletions => "/v1/chat/completions",
            Endpoint::Completions => "/v1/completions",
            Endpoint::Embeddings => "/v1/embeddings",
            Endpoint::Responses => "/v1/responses",
            Endpoint::Messages => "/v1/messages",
            Endpoint::CountTokens => "/v1/messages/count_tokens",
        }
    }

    /// The path below a provider's base URL.
    pub fn upstream_path(self) -> &'static str {
        // Both protocols put their version segment in base_url.
        self.gateway_path().trim_start_matches("/v1/")
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.gateway_path())
    }
}

// Not yet on the request path: the proxy will call it for a provider that
// does not speak the client's format.
#[allow(dead_code)]
pub(crate) mod translate;
