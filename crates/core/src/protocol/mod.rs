//! The wire protocols Switchyard speaks, the endpoints of each, and
//! everything that knows a format: error bodies, event streams, usage
//! shapes, and translation between formats.

pub(crate) mod error;
pub(crate) mod sse;
pub(crate) mod usage;

pub use translate::{Format, Profile};
pub use usage::Usage;

use std::fmt;

/// A wire protocol: what a client speaks, and what a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    OpenAi,
    Anthropic,
    Gemini,
}

impl Protocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::OpenAi => "openai",
            Protocol::Anthropic => "anthropic",
            Protocol::Gemini => "gemini",
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A proxied endpoint. Paths are relative to a provider's `base_url`, which
/// ends in the API version (`.../v1`, `.../v1beta`), so every protocol
/// joins the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endpoint {
    ChatCompletions,
    Completions,
    Embeddings,
    Responses,
    Messages,
    CountTokens,
    /// Gemini's `models/{model}:generateContent`.
    GeminiGenerate,
    /// Gemini's `models/{model}:streamGenerateContent` (with `alt=sse`).
    GeminiStream,
    /// Gemini's `models/{model}:countTokens`.
    GeminiCountTokens,
}

impl Endpoint {
    /// The endpoints at a fixed path; Gemini's name the model in theirs.
    pub const FIXED: [Endpoint; 6] = [
        Endpoint::ChatCompletions,
        Endpoint::Completions,
        Endpoint::Embeddings,
        Endpoint::Responses,
        Endpoint::Messages,
        Endpoint::CountTokens,
    ];

    pub const GEMINI: [Endpoint; 3] = [Endpoint::GeminiGenerate, Endpoint::GeminiStream, Endpoint::GeminiCountTokens];

    /// Every endpoint: the fixed ones, then Gemini's.
    pub const ALL: [Endpoint; 9] = {
        let mut all = [Endpoint::ChatCompletions; 9];
        let mut i = 0;
        while i < all.len() {
            all[i] = if i < Self::FIXED.len() { Self::FIXED[i] } else { Self::GEMINI[i - Self::FIXED.len()] };
            i += 1;
        }
        all
    };

    pub fn protocol(self) -> Protocol {
        match self {
            Endpoint::ChatCompletions | Endpoint::Completions | Endpoint::Embeddings | Endpoint::Responses => {
                Protocol::OpenAi
            }
            Endpoint::Messages | Endpoint::CountTokens => Protocol::Anthropic,
            Endpoint::GeminiGenerate | Endpoint::GeminiStream | Endpoint::GeminiCountTokens => Protocol::Gemini,
        }
    }

    /// The path clients call on the gateway; for Gemini's, with `{model}`
    /// standing for the model, as history records it.
    pub fn gateway_path(self) -> &'static str {
        match self {
            Endpoint::ChatCompletions => "/v1/chat/completions",
            Endpoint::Completions => "/v1/completions",
            Endpoint::Embeddings => "/v1/embeddings",
            Endpoint::Responses => "/v1/responses",
            Endpoint::Messages => "/v1/messages",
            Endpoint::CountTokens => "/v1/messages/count_tokens",
            Endpoint::GeminiGenerate => "/v1beta/models/{model}:generateContent",
            Endpoint::GeminiStream => "/v1beta/models/{model}:streamGenerateContent",
            Endpoint::GeminiCountTokens => "/v1beta/models/{model}:countTokens",
        }
    }

    /// Gemini's method name, after the model in its path.
    fn gemini_method(self) -> Option<&'static str> {
        match self {
            Endpoint::GeminiGenerate => Some("generateContent"),
            Endpoint::GeminiStream => Some("streamGenerateContent"),
            Endpoint::GeminiCountTokens => Some("countTokens"),
            _ => None,
        }
    }

    /// The endpoint a gateway path names, and the model when the path
    /// carries one (Gemini's `/v1beta/models/{model}:method`).
    pub fn of_path(path: &str) -> Option<(Endpoint, Option<&str>)> {
        if let Some(e) = Endpoint::FIXED.into_iter().find(|e| e.gateway_path() == path) {
            return Some((e, None));
        }
        let (model, method) = path.strip_prefix("/v1beta/models/")?.rsplit_once(':')?;
        let endpoint = Endpoint::GEMINI.into_iter().find(|e| e.gemini_method() == Some(method))?;
        let plain = !model.is_empty() && !model.contains('/');
        plain.then_some((endpoint, Some(model)))
    }

    /// The path below a provider's base URL. Every protocol puts its version
    /// segment in `base_url`; Gemini's paths name the provider's model.
    pub fn upstream_path(self, model: &str) -> std::borrow::Cow<'static, str> {
        match self.gemini_method() {
            Some(method) => format!("models/{model}:{method}").into(),
            None => self.gateway_path().trim_start_matches("/v1/").into(),
        }
    }

    /// The request's wire format, when the gateway can translate it to
    /// another (the side endpoints are served only by their own kind).
    pub fn format(self) -> Option<Format> {
        match self {
            Endpoint::ChatCompletions => Some(Format::Chat),
            Endpoint::Responses => Some(Format::Responses),
            Endpoint::Messages => Some(Format::Messages),
            Endpoint::GeminiGenerate | Endpoint::GeminiStream => Some(Format::Gemini),
            Endpoint::Completions | Endpoint::Embeddings | Endpoint::CountTokens | Endpoint::GeminiCountTokens => None,
        }
    }

    /// Whether the client asked for a stream by the endpoint itself.
    pub fn streams(self) -> bool {
        self == Endpoint::GeminiStream
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gemini_paths_name_their_model_and_method() {
        assert_eq!(
            Endpoint::of_path("/v1beta/models/gemini-2.5-pro:streamGenerateContent"),
            Some((Endpoint::GeminiStream, Some("gemini-2.5-pro")))
        );
        assert_eq!(Endpoint::of_path("/v1beta/models/m:countTokens"), Some((Endpoint::GeminiCountTokens, Some("m"))));
        assert_eq!(Endpoint::of_path("/v1/messages"), Some((Endpoint::Messages, None)));
        for odd in ["/v1beta/models/:generateContent", "/v1beta/models/a/b:generateContent", "/v1beta/models/m:embed"] {
            assert_eq!(Endpoint::of_path(odd), None, "{odd}");
        }
        assert_eq!(Endpoint::GeminiGenerate.upstream_path("m"), "models/m:generateContent");
        assert_eq!(Endpoint::ChatCompletions.upstream_path("m"), "chat/completions");
    }
}
