//! Which headers cross the gateway in each direction. The client's
//! credentials (every header in [`CREDENTIALS`]) never reach a provider; the
//! provider's key is injected in that provider's own form; hop-by-hop
//! headers stop here.

use axum::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use secrecy::ExposeSecret;

use crate::ground::headers::{is_credential, name, DEFAULT_ANTHROPIC_VERSION};
use crate::protocol::translate::Profile;
use crate::protocol::Protocol;
use crate::secrets::ProviderKey;

/// RFC 9110 §7.6.1 connection-specific headers, plus the legacy ones proxies drop.
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "upgrade",
];

/// Client headers, besides the credentials, that must not be forwarded upstream.
const CLIENT_ONLY: [&str; 7] = [
    "host",
    "content-length",
    "transfer-encoding",
    "origin",
    // The gateway reads bodies (usage, errors); upstream answers stay uncompressed.
    "accept-encoding",
    "x-request-id",
    "x-correlation-id",
];

/// Upstream response headers the gateway replaces or must not relay.
const UPSTREAM_ONLY: [&str; 5] =
    ["content-length", "transfer-encoding", "set-cookie", "x-request-id", "x-correlation-id"];

fn is_hop_by_hop(name: &HeaderName, connection: &Connection<'_>) -> bool {
    let n = name.as_str();
    HOP_BY_HOP.contains(&n) || connection.lists(n)
}

/// A message's `Connection` header, whose tokens name further
/// connection-specific headers. Read in place: it is usually one short
/// value.
struct Connection<'a> {
    values: header::GetAll<'a, HeaderValue>,
    /// Whether a token names a header that is not hop-by-hop anyway. It
    /// usually does not (`keep-alive`), and then no header is checked
    /// against the tokens; `close` counts, as a header could bear the name.
    names_others: bool,
}

impl<'a> Connection<'a> {
    fn of(headers: &'a HeaderMap) -> Connection<'a> {
        let values = headers.get_all(header::CONNECTION);
        let names_others = tokens(&values).any(|t| !HOP_BY_HOP.iter().any(|h| t.eq_ignore_ascii_case(h)));
        Connection { values, names_others }
    }

    /// Whether it names `name` (header names compare without case).
    fn lists(&self, name: &str) -> bool {
        self.names_others && tokens(&self.values).any(|token| token.eq_ignore_ascii_case(name))
    }
}

/// The comma-separated tokens of a header's values.
fn tokens<'a>(values: &header::GetAll<'a, HeaderValue>) -> impl Iterator<Item = &'a str> {
    values.iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(',')).map(str::trim)
}

/// Headers for an upstream request to a provider of `kind` under
/// `profile` (which says what `anthropic-beta` values it takes).
pub fn upstream_request(
    client: &HeaderMap,
    kind: Protocol,
    profile: &Profile,
    key: Option<&ProviderKey>,
    correlation_id: &str,
) -> HeaderMap {
    let connection = Connection::of(client);
    let mut out = HeaderMap::with_capacity(client.len() + 2);
    for (name, value) in client {
        let n = name.as_str();
        if is_credential(name)
            || is_hop_by_hop(name, &connection)
            || CLIENT_ONLY.contains(&n)
            || n.starts_with("x-switchyard-")
            || foreign(n, kind)
        {
            continue;
        }
        if name == name::ANTHROPIC_BETA {
            append_betas(&mut out, value, profile);
            continue;
        }
        out.append(name.clone(), value.clone());
    }
    if let Some(key) = key {
        inject_key(&mut out, kind, key);
    }
    if kind == Protocol::Anthropic && !out.contains_key(name::ANTHROPIC_VERSION) {
        out.insert(name::ANTHROPIC_VERSION, HeaderValue::from_static(DEFAULT_ANTHROPIC_VERSION));
    }
    if let Ok(v) = HeaderValue::from_str(correlation_id) {
        out.insert(name::X_CORRELATION_ID, v);
    }
    out
}

/// Headers for a joined team's gateway, over [`upstream_request`]'s: it
/// speaks every family's API, so the client's `anthropic-*`, `openai-*`
/// and `x-goog-*` headers go as they came; and the device is named.
pub fn to_team(client: &HeaderMap, out: &mut HeaderMap, device: &str) {
    for (name, value) in client {
        let n = name.as_str();
        let family = n.starts_with("anthropic-") || n.starts_with("openai-") || n.starts_with("x-goog-");
        if family && !is_credential(name) && !out.contains_key(name) {
            out.append(name.clone(), value.clone());
        }
    }
    if let Ok(device) = HeaderValue::from_str(device) {
        out.insert(name::X_SWITCHYARD_DEVICE, device);
    }
}

/// A header of another provider family's API (`anthropic-version`,
/// `anthropic-beta`, `openai-beta`, `x-goog-*`): a provider of `kind` did not
/// define it, and some reject what they do not know ("invalid beta flag").
fn foreign(name: &str, kind: Protocol) -> bool {
    let family = if name.starts_with("anthropic-") {
        Protocol::Anthropic
    } else if name.starts_with("openai-") {
        Protocol::OpenAi
    } else if name.starts_with("x-goog-") {
        Protocol::Gemini
    } else {
        return false;
    };
    family != kind
}

/// An `anthropic-beta` value as an Anthropic-kind provider may get it:
/// whole without an allowlist (Anthropic itself), else only the values
/// the allowlist's prefixes name, or nothing. Third parties reject betas
/// they do not know ("invalid beta flag").
fn append_betas(out: &mut HeaderMap, value: &HeaderValue, profile: &Profile) {
    if profile.anthropic_beta.is_none() {
        out.append(name::ANTHROPIC_BETA, value.clone());
        return;
    }
    let Ok(text) = value.to_str() else { return };
    if let Some(kept) = profile.filter_anthropic_beta(text) {
        if let Ok(v) = HeaderValue::from_str(&kept) {
            out.append(name::ANTHROPIC_BETA, v);
        }
    }
}

fn inject_key(out: &mut HeaderMap, kind: Protocol, key: &ProviderKey) {
    let secret = key.secret.expose_secret();
    let (name, value) = match kind {
        Protocol::OpenAi => (header::AUTHORIZATION, HeaderValue::from_str(&format!("Bearer {secret}"))),
        Protocol::Anthropic => (name::X_API_KEY, HeaderValue::from_str(secret)),
        Protocol::Gemini => (name::X_GOOG_API_KEY, HeaderValue::from_str(secret)),
    };
    // A key with bytes a header cannot carry is sent as nothing at all; the
    // provider's 401 then says so, without the key appearing in any message.
    if let Ok(mut value) = value {
        value.set_sensitive(true);
        out.insert(name, value);
    }
}

/// Headers of an upstream response, as relayed to the client.
pub fn client_response(upstream: &HeaderMap) -> HeaderMap {
    let connection = Connection::of(upstream);
    let mut out = HeaderMap::with_capacity(upstream.len() + 4);
    for (name, value) in upstream {
        if is_hop_by_hop(name, &connection) || UPSTREAM_ONLY.contains(&name.as_str()) {
            continue;
        }
        out.append(name.clone(), value.clone());
    }
    // Keep the provider's own id, under a name that does not clash with ours.
    if let Some(id) = upstream.get(name::X_REQUEST_ID) {
        out.insert(name::X_UPSTREAM_REQUEST_ID, id.clone());
    }
    out
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::ground::headers::CREDENTIALS;
    use secrecy::SecretString;

    /// Headers as a client or provider sends them, in order.
    pub(in crate::proxy) fn map(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        pairs.iter().map(|&(k, v)| (HeaderName::from_static(k), HeaderValue::from_static(v))).collect()
    }

    fn key() -> ProviderKey {
        ProviderKey { label: "main".into(), secret: SecretString::from("sk-provider".to_string()) }
    }

    fn client_headers() -> HeaderMap {
        map(&[
            ("authorization", "Bearer sk-client"),
            ("x-api-key", "sk-client"),
            ("connection", "keep-alive, X-Custom-Hop"),
            ("x-custom-hop", "1"),
            ("keep-alive", "timeout=5"),
            ("host", "127.0.0.1:4141"),
            ("anthropic-beta", "tools-2024"),
            ("x-stainless-lang", "python"),
            ("x-switchyard-timeout-ms", "100"),
        ])
    }

    #[test]
    fn openai_kind_gets_bearer_and_no_client_credentials() {
        let out = upstream_request(&client_headers(), Protocol::OpenAi, &Profile::default(), Some(&key()), "cid");
        assert_eq!(out["authorization"], "Bearer sk-provider");
        assert!(out["authorization"].is_sensitive());
        assert!(!out.contains_key("x-api-key"));
        for gone in ["connection", "keep-alive", "x-custom-hop", "host", "x-switchyard-timeout-ms"] {
            assert!(!out.contains_key(gone), "{gone} forwarded");
        }
        assert_eq!(out["x-stainless-lang"], "python");
        assert_eq!(out["x-correlation-id"], "cid");
        assert!(!out.contains_key("anthropic-version"));
        assert!(!out.contains_key("anthropic-beta"), "no anthropic-* header reaches another kind");
    }

    #[test]
    fn each_family_s_headers_reach_only_its_own_kind() {
        let mut client = client_headers();
        client.insert("openai-beta", HeaderValue::from_static("assistants=v2"));
        client.insert("x-goog-api-client", HeaderValue::from_static("genai-js"));
        let gemini = upstream_request(&client, Protocol::Gemini, &Profile::default(), Some(&key()), "cid");
        assert_eq!(gemini["x-goog-api-key"], "sk-provider");
        assert_eq!(gemini["x-goog-api-client"], "genai-js");
        for gone in ["anthropic-beta", "openai-beta", "authorization", "x-api-key"] {
            assert!(!gemini.contains_key(gone), "{gone} reached gemini");
        }
        let anthropic = upstream_request(&client, Protocol::Anthropic, &Profile::default(), None, "cid");
        assert!(!anthropic.contains_key("openai-beta") && !anthropic.contains_key("x-goog-api-client"));
    }

    #[test]
    fn anthropic_kind_gets_x_api_key_and_a_version() {
        let out = upstream_request(&client_headers(), Protocol::Anthropic, &Profile::default(), Some(&key()), "cid");
        assert_eq!(out["x-api-key"], "sk-provider");
        assert!(!out.contains_key("authorization"));
        assert_eq!(out["anthropic-beta"], "tools-2024");
        assert_eq!(out["anthropic-version"], DEFAULT_ANTHROPIC_VERSION);
    }

    #[test]
    fn anthropic_betas_reach_anthropic_whole_and_a_compatible_provider_only_as_allowed() {
        let mut client = client_headers();
        client.insert(
            "anthropic-beta",
            HeaderValue::from_static("context-1m-2025-08-07,interleaved-thinking-2025-05-14"),
        );
        client.append("anthropic-beta", HeaderValue::from_static("fine-grained-tool-streaming-2025-05-14"));
        let anthropic = upstream_request(&client, Protocol::Anthropic, &Profile::default(), None, "cid");
        let all: Vec<_> = anthropic.get_all("anthropic-beta").iter().collect();
        assert_eq!(
            all,
            ["context-1m-2025-08-07,interleaved-thinking-2025-05-14", "fine-grained-tool-streaming-2025-05-14"]
        );
        let allow = Profile { anthropic_beta: Some(vec!["interleaved-thinking-".into()]), ..Profile::default() };
        let third = upstream_request(&client, Protocol::Anthropic, &allow, None, "cid");
        let kept: Vec<_> = third.get_all("anthropic-beta").iter().collect();
        assert_eq!(kept, ["interleaved-thinking-2025-05-14"], "only allowed values, and no empty header");
        let none = Profile { anthropic_beta: Some(Vec::new()), ..Profile::default() };
        assert!(!upstream_request(&client, Protocol::Anthropic, &none, None, "cid").contains_key("anthropic-beta"));
        for kind in [Protocol::OpenAi, Protocol::Gemini] {
            assert!(!upstream_request(&client, kind, &allow, None, "cid").contains_key("anthropic-beta"), "{kind:?}");
        }
    }

    #[test]
    fn no_credential_header_of_the_client_is_forwarded() {
        let mut client = client_headers();
        for name in CREDENTIALS {
            client.append(name, HeaderValue::from_static("sk-client"));
        }
        for kind in [Protocol::OpenAi, Protocol::Anthropic] {
            let out = upstream_request(&client, kind, &Profile::default(), Some(&key()), "cid");
            let leaked: Vec<_> =
                out.iter().filter(|(_, v)| v.as_bytes().ends_with(b"sk-client")).map(|(n, _)| n.clone()).collect();
            assert!(leaked.is_empty(), "{kind:?} forwarded {leaked:?}");
            let injected = if kind == Protocol::OpenAi { "authorization" } else { "x-api-key" };
            assert_eq!(out.get_all(injected).iter().count(), 1, "only the provider's own key");
        }
    }

    #[test]
    fn keyless_provider_gets_no_credentials_at_all() {
        let out = upstream_request(&client_headers(), Protocol::OpenAi, &Profile::default(), None, "cid");
        assert!(!out.contains_key("authorization") && !out.contains_key("x-api-key"));
    }

    #[test]
    fn response_headers_drop_hop_by_hop_and_rename_upstream_id() {
        let up = map(&[
            ("content-type", "application/json"),
            ("content-length", "10"),
            ("set-cookie", "a=b"),
            ("x-request-id", "req_up"),
            ("x-ratelimit-remaining-requests", "9"),
        ]);
        let out = client_response(&up);
        assert_eq!(out["content-type"], "application/json");
        assert_eq!(out["x-upstream-request-id"], "req_up");
        assert_eq!(out["x-ratelimit-remaining-requests"], "9");
        assert!(
            !out.contains_key("content-length") && !out.contains_key("set-cookie") && !out.contains_key("x-request-id")
        );
    }

    #[test]
    fn a_response_connection_header_drops_what_it_names_and_only_that() {
        let mut up = HeaderMap::new();
        up.insert("x-kept", HeaderValue::from_static("1"));
        up.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        // Only standard options: nothing else goes.
        up.insert("connection", HeaderValue::from_static("Keep-Alive"));
        let out = client_response(&up);
        assert_eq!(out["x-kept"], "1");
        assert!(!out.contains_key("keep-alive") && !out.contains_key("connection"));
        // `close` is an option, but a header could bear the name too.
        up.insert("connection", HeaderValue::from_static("close, X-Kept"));
        up.insert("close", HeaderValue::from_static("x"));
        let out = client_response(&up);
        assert!(!out.contains_key("x-kept") && !out.contains_key("close"));
    }
}
