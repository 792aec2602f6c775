//! Scrubbing secrets out of upstream text. A provider's error body, an error
//! event in its stream or a transport error can echo what the gateway sent
//! it (a hostile base URL answers with the `Authorization` header it got).
//! Before such text is stored, logged, published or returned, every provider
//! key the gateway holds, the client's own credential and the gateway's
//! tokens are replaced by [`REDACTED`].
//!
//! Only failures are scrubbed: a successful answer streams through as it
//! came, so the hot path pays nothing. A request's [`Scrubber`] is gathered
//! the first time one of its attempts fails ([`OnDemand`]), and
//! [`crate::proxy::attempt`] applies it where upstream text enters the gateway.
//!
//! What counts as a match: a secret's exact bytes (case matters; JSON and
//! URL encodings of a secret are matched too, where they differ), and at
//! the very end of a text, a secret's first [`MIN_PARTIAL`] bytes or more:
//! text cut off by a read limit must not keep a usable prefix.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::{Arc, OnceLock};

use axum::http::{header, HeaderMap, HeaderValue};
use bytes::{Bytes, BytesMut};
use memchr::memmem;
use secrecy::ExposeSecret;

use crate::gateway::Gateway;
use crate::ground::headers;

use crate::upstream::provider::Provider;

/// What a secret is replaced by.
pub const REDACTED: &str = "[redacted]";
/// Shorter secrets are not scrubbed: they are placeholders (`none`, `x`) for
/// keyless local servers, and scrubbing them would only garble messages.
pub const MIN_SECRET: usize = 4;
/// A text that ends with this many bytes of a secret, or more, has that end
/// redacted too.
pub const MIN_PARTIAL: usize = 8;

/// The secrets to scrub from one request's upstream text.
#[derive(Default, Clone)]
pub struct Scrubber {
    /// Every form of every secret, each once.
    needles: Vec<Box<[u8]>>,
}

impl std::fmt::Debug for Scrubber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scrubber").field("needles", &self.needles.len()).finish()
    }
}

impl Scrubber {
    /// A scrubber of nothing yet.
    pub fn new() -> Scrubber {
        Scrubber::default()
    }

    /// The scrubber for a request: every key of every provider in force
    /// (revoked or cooling ones too), the gateway's access and admin
    /// tokens, and the credentials the client sent.
    pub fn for_request(
        gateway: &Gateway,
        providers: &[Arc<Provider>],
        client: &HeaderMap,
        query: Option<&str>,
    ) -> Scrubber {
        let mut s = Scrubber::new();
        for provider in providers {
            provider.keys.each_secret(|secret| s.add(secret));
        }
        for token in [gateway.access_token(), gateway.admin_token()].into_iter().flatten() {
            s.add(token.expose_secret());
        }
        s.add_client(client, query);
        s
    }

    /// Adds the credentials a client sent: the value of each credential
    /// header (a scheme such as `Bearer` left out, each cookie's value on
    /// its own) and `key` / `api_key` query parameters, as Gemini clients send.
    pub fn add_client(&mut self, client: &HeaderMap, query: Option<&str>) {
        for name in headers::CREDENTIALS {
            for value in client.get_all(&name) {
                let Ok(text) = value.to_str().map(str::trim) else { continue };
                if name == header::COOKIE {
                    for cookie in text.split(';') {
                        self.add(cookie.split_once('=').map_or(cookie, |(_, v)| v));
                    }
                } else {
                    self.add(text.rsplit_once(' ').map_or(text, |(_, token)| token));
                }
            }
        }
        let params = url::form_urlencoded::parse(query.unwrap_or("").as_bytes());
        for (_, value) in params.filter(|(n, _)| headers::CREDENTIAL_PARAMS.contains(&n.as_ref())) {
            self.add(&value);
        }
    }

    /// Adds a secret, in each form it may take in a text.
    pub fn add(&mut self, secret: &str) {
        let secret = secret.trim();
        if secret.len() < MIN_SECRET {
            return;
        }
        for form in forms(secret) {
            if !self.needles.iter().any(|n| **n == *form.as_bytes()) {
                self.needles.push(form.into_bytes().into_boxed_slice());
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.needles.is_empty()
    }

    /// How many secrets `input` holds.
    pub fn count(&self, input: &[u8]) -> usize {
        self.matches(input).len()
    }

    /// `input` without its secrets.
    pub fn bytes<'a>(&self, input: &'a [u8]) -> Cow<'a, [u8]> {
        let mut cuts = self.matches(input);
        let tail_from = cuts.last().map_or(0, |c| c.end);
        if let Some(start) = self.partial_tail(input, tail_from).filter(|s| input.len() - s >= MIN_PARTIAL) {
            cuts.push(start..input.len());
        }
        redact(input, &cuts)
    }

    /// `input` without its secrets.
    pub fn text<'a>(&self, input: &'a str) -> Cow<'a, str> {
        match self.bytes(input.as_bytes()) {
            Cow::Borrowed(_) => Cow::Borrowed(input),
            // A secret is UTF-8, so a match starts and ends on character
            // boundaries and the rest stays valid.
            Cow::Owned(bytes) => Cow::Owned(String::from_utf8_lossy(&bytes).into_owned()),
        }
    }

    /// Scrubs header values in place; a value that cannot be rebuilt is
    /// replaced whole.
    pub fn headers(&self, headers: &mut HeaderMap) {
        if self.is_empty() {
            return;
        }
        for value in headers.values_mut() {
            if let Cow::Owned(clean) = self.bytes(value.as_bytes()) {
                *value = HeaderValue::from_bytes(&clean).unwrap_or(HeaderValue::from_static(REDACTED));
            }
        }
    }

    /// Where secrets occur whole, in order, overlapping ones merged.
    fn matches(&self, input: &[u8]) -> Vec<Range<usize>> {
        let mut found: Vec<Range<usize>> = Vec::new();
        for needle in &self.needles {
            found.extend(memmem::find_iter(input, needle).map(|at| at..at + needle.len()));
        }
        found.sort_by_key(|r| r.start);
        let mut merged: Vec<Range<usize>> = Vec::with_capacity(found.len());
        for r in found {
            match merged.last_mut() {
                Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
                _ => merged.push(r),
            }
        }
        merged
    }

    /// Where the longest end of `input[from..]` that is the start of a
    /// secret (but not all of it) begins.
    fn partial_tail(&self, input: &[u8], from: usize) -> Option<usize> {
        let room = input.len().saturating_sub(from);
        self.needles
            .iter()
            .filter_map(|needle| {
                let longest = room.min(needle.len().saturating_sub(1));
                (1..=longest).rev().find(|&n| input.ends_with(&needle[..n])).map(|n| input.len() - n)
            })
            .min()
    }
}

/// The forms a secret takes in text: as is, JSON-escaped (also with `\/`),
/// and URL-encoded, where those differ.
fn forms(secret: &str) -> Vec<String> {
    let mut forms = vec![secret.to_string()];
    let json = serde_json::to_string(secret).unwrap_or_default();
    let json = json.get(1..json.len().saturating_sub(1)).unwrap_or_default().to_string();
    forms.push(json.replace('/', "\\/"));
    forms.push(json);
    forms.push(url::form_urlencoded::byte_serialize(secret.as_bytes()).collect());
    forms.retain(|f| !f.is_empty());
    forms.dedup();
    forms
}

/// `input` with each range replaced by [`REDACTED`].
fn redact<'a>(input: &'a [u8], cuts: &[Range<usize>]) -> Cow<'a, [u8]> {
    if cuts.is_empty() {
        return Cow::Borrowed(input);
    }
    let mut out = Vec::with_capacity(input.len());
    let mut at = 0;
    for cut in cuts {
        out.extend_from_slice(&input[at..cut.start]);
        out.extend_from_slice(REDACTED.as_bytes());
        at = cut.end;
    }
    out.extend_from_slice(&input[at..]);
    Cow::Owned(out)
}

/// Scrubs a body that arrives in chunks: the end of a chunk that could be
/// the start of a secret is held back until the next chunk shows whether it is.
#[derive(Debug)]
pub struct Stream {
    scrubber: Arc<Scrubber>,
    pending: BytesMut,
}

impl Stream {
    pub fn new(scrubber: Arc<Scrubber>) -> Stream {
        Stream { scrubber, pending: BytesMut::new() }
    }

    /// The scrubbed bytes that can be passed on now.
    pub fn push(&mut self, chunk: Bytes) -> Bytes {
        if self.scrubber.is_empty() {
            return chunk;
        }
        let buf = if self.pending.is_empty() {
            chunk
        } else {
            self.pending.extend_from_slice(&chunk);
            self.pending.split().freeze()
        };
        let cuts = self.scrubber.matches(&buf);
        let tail_from = cuts.last().map_or(0, |c| c.end);
        let hold = self.scrubber.partial_tail(&buf, tail_from).unwrap_or(buf.len());
        self.pending.extend_from_slice(&buf[hold..]);
        match redact(&buf[..hold], &cuts) {
            Cow::Borrowed(_) => buf.slice(..hold),
            Cow::Owned(clean) => Bytes::from(clean),
        }
    }

    /// The body ended: what was held back, scrubbed.
    pub fn finish(&mut self) -> Bytes {
        let rest = self.pending.split().freeze();
        match self.scrubber.bytes(&rest) {
            Cow::Borrowed(_) => rest,
            Cow::Owned(clean) => Bytes::from(clean),
        }
    }
}

/// A request's scrubber, gathered the first time one of its attempts fails:
/// requests that succeed never pay for it.
#[derive(Debug)]
pub struct OnDemand<'a> {
    gateway: &'a Gateway,
    providers: &'a [Arc<Provider>],
    client: &'a HeaderMap,
    query: Option<&'a str>,
    built: OnceLock<Arc<Scrubber>>,
}

impl<'a> OnDemand<'a> {
    pub fn new(
        gateway: &'a Gateway,
        providers: &'a [Arc<Provider>],
        client: &'a HeaderMap,
        query: Option<&'a str>,
    ) -> OnDemand<'a> {
        OnDemand { gateway, providers, client, query, built: OnceLock::new() }
    }

    /// Another of the same request's, built on its own when needed: for
    /// attempts that run side by side.
    pub fn another(&self) -> OnDemand<'a> {
        OnDemand::new(self.gateway, self.providers, self.client, self.query)
    }

    pub fn get(&self) -> &Arc<Scrubber> {
        self.built
            .get_or_init(|| Arc::new(Scrubber::for_request(self.gateway, self.providers, self.client, self.query)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk-live-0123456789abcdef";

    fn scrubber(secrets: &[&str]) -> Scrubber {
        let mut s = Scrubber::new();
        for secret in secrets {
            s.add(secret);
        }
        s
    }

    #[test]
    fn whole_secrets_go_wherever_they_are() {
        let s = scrubber(&[KEY, "sy-local-token"]);
        let text = format!("{{\"echo\":\"Bearer {KEY}\",\"x\":\"{KEY}{KEY}\",\"t\":\"sy-local-token\"}}");
        let clean = s.text(&text);
        assert!(!clean.contains("0123456789"), "{clean}");
        assert!(!clean.contains("sy-local"), "{clean}");
        assert_eq!(clean, "{\"echo\":\"Bearer [redacted]\",\"x\":\"[redacted]\",\"t\":\"[redacted]\"}");
        assert!(matches!(s.text("nothing here"), Cow::Borrowed(_)));
    }

    #[test]
    fn case_is_exact_and_short_placeholders_are_left_alone() {
        let s = scrubber(&[KEY, "x", "abc"]);
        assert_eq!(s.text(&KEY.to_uppercase()), KEY.to_uppercase());
        assert_eq!(s.text("x abc"), "x abc");
    }

    #[test]
    fn escaped_and_encoded_forms_are_the_same_secret() {
        let odd = "k/ey+with\"quote=";
        let s = scrubber(&[odd]);
        for form in ["k\\/ey+with\\\"quote=", "k/ey+with\\\"quote=", "k%2Fey%2Bwith%22quote%3D"] {
            assert_eq!(s.text(&format!("a {form} b")), "a [redacted] b", "{form}");
        }
    }

    #[test]
    fn a_secret_cut_off_at_the_end_is_redacted_from_eight_bytes() {
        let s = scrubber(&[KEY]);
        assert_eq!(s.text(&format!("echo: {}", &KEY[..12])), "echo: [redacted]");
        assert_eq!(s.text(&format!("echo: {}", &KEY[..8])), "echo: [redacted]");
        // Seven bytes are not a usable key (here, its public prefix).
        assert_eq!(s.text(&format!("echo: {}", &KEY[..7])), format!("echo: {}", &KEY[..7]));
        // Not at the end: not a secret.
        assert_eq!(s.text(&format!("{} tail", &KEY[..12])), format!("{} tail", &KEY[..12]));
    }

    #[test]
    fn client_credentials_from_every_header_and_the_query() {
        let h = crate::proxy::headers::tests::map(&[
            ("authorization", "Bearer cli-bearer-1"),
            ("x-api-key", "cli-xkey-2"),
            ("api-key", "cli-azure-3"),
            ("x-goog-api-key", "cli-goog-4"),
            ("cookie", "a=cli-cookie-5; b=cli-cookie-6"),
        ]);
        let mut s = Scrubber::new();
        s.add_client(&h, Some("alt=sse&key=cli-query-7"));
        let text = "Bearer cli-bearer-1 cli-xkey-2 cli-azure-3 cli-goog-4 cli-cookie-5 cli-cookie-6 cli-query-7";
        assert_eq!(s.text(text), "Bearer [redacted] [redacted] [redacted] [redacted] [redacted] [redacted] [redacted]");
    }

    #[test]
    fn headers_are_scrubbed_in_place() {
        let s = scrubber(&[KEY]);
        let mut h = HeaderMap::new();
        h.insert("x-echo", HeaderValue::from_str(&format!("Bearer {KEY}")).unwrap());
        h.insert("x-fine", HeaderValue::from_static("1"));
        s.headers(&mut h);
        assert_eq!(h["x-echo"], "Bearer [redacted]");
        assert_eq!(h["x-fine"], "1");
    }

    #[test]
    fn a_stream_never_lets_a_secret_through_whatever_the_chunking() {
        let s = Arc::new(scrubber(&[KEY, "sy-local-token"]));
        let body = format!("{{\"error\":\"bad key {KEY}\",\"seen\":\"sy-local-token\",\"again\":\"{KEY}\"}}");
        let expected = s.text(&body).into_owned();
        let bytes = body.as_bytes();
        for size in 1..bytes.len() {
            let mut stream = Stream::new(s.clone());
            let mut out = Vec::new();
            for chunk in bytes.chunks(size) {
                out.extend_from_slice(&stream.push(Bytes::copy_from_slice(chunk)));
            }
            out.extend_from_slice(&stream.finish());
            assert_eq!(String::from_utf8(out).unwrap(), expected, "chunks of {size}");
        }
    }

    #[test]
    fn a_stream_cut_off_mid_secret_keeps_no_usable_prefix() {
        let s = Arc::new(scrubber(&[KEY]));
        let mut stream = Stream::new(s);
        let first = stream.push(Bytes::from(format!("echo {}", &KEY[..10])));
        assert_eq!(first, "echo ");
        assert_eq!(stream.finish(), "[redacted]");
    }

    #[test]
    fn debug_shows_no_secret() {
        let s = scrubber(&[KEY]);
        assert!(!format!("{s:?}").contains("0123"));
    }
}
