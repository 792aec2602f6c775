//! Carrying out a [`Repair`] that [`crate::policy::step`] asked for: the
//! refusal read from the provider's error body, and the request changed as
//! it says. Nothing here runs unless an attempt ended in a client error a
//! repair answers, so passthrough pays nothing for it.

use bytes::Bytes;
use serde_json::Value;

use crate::policy::classify::{self, Outcome, Repair};
use crate::policy::step::Repairs;
use crate::protocol::translate::passthrough::Scrub;
use crate::protocol::translate::Format;
use crate::protocol::{Endpoint, Protocol};
use crate::proxy::attempt::Attempted;
use crate::proxy::body::RequestHead;
use crate::proxy::wire::{self, Translated};
use crate::upstream::provider::Provider;

/// The most of an error body read to judge it.
const ERROR_BODY_MAX: usize = 64 * 1024;

/// What goes to one provider: a translated body, or the client's own as
/// it was scrubbed (`native`; `None` is the client's body untouched).
#[derive(Debug, Clone, Default)]
pub(crate) struct Outgoing {
    pub translated: Option<Translated>,
    pub native: Option<(Bytes, RequestHead)>,
    /// What the gateway took out of a native body before sending, as the
    /// attempt's dropped fields say it (`field: reason`).
    pub removed: Vec<String>,
}

/// The repairs a request may make on `provider`.
pub(crate) fn allowed(provider: &Provider) -> Repairs {
    // A joined team's gateway mends requests for its own providers.
    if provider.config.joined.is_some() {
        return Repairs::default();
    }
    let mut allowed = Vec::with_capacity(2);
    match provider.config.kind {
        Protocol::Anthropic => allowed.push(Repair::StripThinking),
        Protocol::OpenAi if provider.probes_stream_options() => allowed.push(Repair::WithoutStreamOptions),
        Protocol::OpenAi | Protocol::Gemini => {}
    }
    Repairs::of(&allowed)
}

/// The repair the provider's error asks for, among those `left`. The
/// error body is read whole (it stays held, to be relayed or translated
/// as before) only when its status is one a repair answers.
pub(crate) async fn refusal(provider: &Provider, attempted: &mut Attempted, left: Repairs) -> Option<Repair> {
    let kind = provider.config.kind;
    let Outcome::Status(status) = attempted.outcome else { return None };
    if left == Repairs::default() || !classify::may_repair(kind, status) {
        return None;
    }
    let text = attempted.upstream.as_mut()?.hold_error(ERROR_BODY_MAX).await;
    classify::repair(kind, status, &text).filter(|r| left.has(*r))
}

/// What the request to a provider becomes after `repair`, or `None` when
/// the repair would change nothing (no thinking to strip, no
/// `stream_options` sent): sending the same request again cannot help.
pub(crate) fn mend(
    repair: Repair,
    out: &Outgoing,
    client: (Endpoint, Option<&str>, &Bytes, &RequestHead),
    usage_added: bool,
) -> Option<Outgoing> {
    let (endpoint, path_model, body, head) = client;
    let (body, head) = out.native.as_ref().map_or((body, head), |(b, h)| (b, h));
    match (repair, &out.translated) {
        (Repair::StripThinking, Some(t)) => {
            let body = translated_body(t, Format::Messages, |b| {
                crate::protocol::translate::passthrough::scrub(Format::Messages, b, Scrub::AllReasoning)
            })?;
            Some(Outgoing { translated: Some(Translated { body, ..t.clone() }), ..Outgoing::default() })
        }
        (Repair::StripThinking, None) => {
            let native = wire::scrubbed(endpoint, path_model, body, Scrub::AllReasoning)?;
            Some(Outgoing { native: Some(native), ..Outgoing::default() })
        }
        (Repair::WithoutStreamOptions, Some(t)) => {
            let body = translated_body(t, Format::Chat, without_stream_options)?;
            Some(Outgoing { translated: Some(Translated { body, ..t.clone() }), ..Outgoing::default() })
        }
        // Only a Chat request carries it for usage.
        (Repair::WithoutStreamOptions, None) if endpoint != Endpoint::ChatCompletions => None,
        // The gateway added it: the provider, now known to reject it, is
        // not sent it again.
        (Repair::WithoutStreamOptions, None) if usage_added => Some(out.clone()),
        (Repair::WithoutStreamOptions, None) if head.has_stream_options => {
            let clean = without_stream_options(body)?;
            let head = crate::proxy::body::inspect(&clean).ok()?;
            Some(Outgoing { native: Some((Bytes::from(clean), head)), ..Outgoing::default() })
        }
        (Repair::WithoutStreamOptions, None) => None,
    }
}

/// What a repair does, for the request's notes.
pub(crate) fn described(repair: Repair) -> &'static str {
    match repair {
        Repair::StripThinking => "retrying once without thinking blocks (a signature was rejected)",
        Repair::WithoutStreamOptions => {
            "retrying once without stream_options, and not sending it to this provider again"
        }
    }
}

/// A translated body in `format`, changed by `change`.
fn translated_body(t: &Translated, format: Format, change: impl Fn(&[u8]) -> Option<Vec<u8>>) -> Option<Bytes> {
    (t.upstream == format).then(|| change(&t.body)).flatten().map(Bytes::from)
}

/// A Chat body without its `stream_options`, or `None` when it has none.
fn without_stream_options(body: &[u8]) -> Option<Vec<u8>> {
    let mut v: Value = serde_json::from_slice(body).ok()?;
    v.as_object_mut()?.remove("stream_options")?;
    serde_json::to_vec(&v).ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn client(body: &Bytes) -> (Endpoint, Option<&str>, &Bytes, RequestHead) {
        (Endpoint::ChatCompletions, None, body, crate::proxy::body::inspect(body).unwrap())
    }

    #[test]
    fn a_client_s_own_stream_options_go_and_what_the_gateway_added_is_not_sent_again() {
        let own = Bytes::from_static(br#"{"model":"m","stream":true,"stream_options":{"include_usage":true}}"#);
        let (endpoint, path, body, head) = client(&own);
        let mended = mend(Repair::WithoutStreamOptions, &Outgoing::default(), (endpoint, path, body, &head), false);
        let (sent, head) = mended.unwrap().native.unwrap();
        assert_eq!(&sent[..], br#"{"model":"m","stream":true}"#);
        assert!(!head.has_stream_options);

        let plain = Bytes::from_static(br#"{"model":"m","stream":true}"#);
        let (endpoint, path, body, head) = client(&plain);
        let out = Outgoing::default();
        assert!(mend(Repair::WithoutStreamOptions, &out, (endpoint, path, body, &head), true).is_some());
        assert!(
            mend(Repair::WithoutStreamOptions, &out, (endpoint, path, body, &head), false).is_none(),
            "nothing to take out"
        );
        let responses =
            Bytes::from_static(br#"{"model":"m","input":"hi","stream_options":{"include_obfuscation":false}}"#);
        let head = crate::proxy::body::inspect(&responses).unwrap();
        let client = (Endpoint::Responses, None, &responses, &head);
        assert!(mend(Repair::WithoutStreamOptions, &out, client, false).is_none(), "only Chat asks for usage with it");
    }

    #[test]
    fn thinking_is_stripped_from_a_native_body_and_nothing_else_is_repaired_for_nothing() {
        let body = Bytes::from(
            serde_json::json!({"model": "claude", "max_tokens": 10, "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "bad"},
                                                  {"type": "text", "text": "hello"}]},
                {"role": "user", "content": "and?"}]})
            .to_string(),
        );
        let head = crate::proxy::body::inspect(&body).unwrap();
        let mended = mend(Repair::StripThinking, &Outgoing::default(), (Endpoint::Messages, None, &body, &head), false);
        let (sent, _) = mended.unwrap().native.unwrap();
        let sent: Value = serde_json::from_slice(&sent).unwrap();
        assert_eq!(sent["messages"][1]["content"], serde_json::json!([{"type": "text", "text": "hello"}]));
        let plain =
            Bytes::from_static(br#"{"model":"claude","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}"#);
        let head = crate::proxy::body::inspect(&plain).unwrap();
        let same = mend(Repair::StripThinking, &Outgoing::default(), (Endpoint::Messages, None, &plain, &head), false);
        assert!(same.is_none(), "a body without thinking is not sent again");
    }
}
