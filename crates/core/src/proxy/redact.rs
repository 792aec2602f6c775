//! `[server] redact_outgoing`: what a prompt must not carry to a provider.
//! The secrets the gateway knows (its provider keys and tokens) and common
//! credential shapes — cloud access key ids, tokens with well-known
//! prefixes, private-key blocks — are replaced with `[redacted]` before the
//! request leaves. A user pasting a `.env` into an agent does not ship its
//! keys. The same shapes are searched for in a bug report.
//!
//! Shapes are matched by hand, not by a pattern engine: a few prefixes and
//! character classes, one pass over the text. The replacement holds no
//! quote or backslash, so a JSON body stays JSON.

use super::scrub::{Scrubber, REDACTED};

/// Token prefixes and the fewest token characters that must follow.
const PREFIXES: [(&str, usize); 12] = [
    ("sk-ant-", 16),
    ("sk-proj-", 16),
    ("sk-", 20),
    ("ghp_", 30),
    ("gho_", 30),
    ("ghs_", 30),
    ("ghu_", 30),
    ("github_pat_", 30),
    ("xoxb-", 16),
    ("xoxp-", 16),
    ("xoxa-", 16),
    ("glpat-", 20),
];

/// AWS access key ids: one of these, then 16 upper-case letters or digits.
const AWS_PREFIXES: [&str; 2] = ["AKIA", "ASIA"];

const PEM_BEGIN: &str = "-----BEGIN ";
const PEM_END: &str = "-----END ";
const PEM_DASHES: &str = "-----";

fn token_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// Whether a token may start at `i`: not inside a longer word. A JSON
/// escape (`\n`, `\t`, `\r`) before it ends a word as the character it
/// stands for does: a key on its own line in a prompt is one line of a JSON
/// string.
fn starts_word(bytes: &[u8], i: usize) -> bool {
    match i {
        0 => true,
        1 => !token_char(bytes[0]),
        _ => !token_char(bytes[i - 1]) || (bytes[i - 2] == b'\\' && matches!(bytes[i - 1], b'n' | b't' | b'r')),
    }
}

/// `text` with credential shapes replaced, and how many there were.
pub fn shapes(text: &str) -> (String, usize) {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let (mut i, mut copied, mut count) = (0, 0, 0);
    while i < bytes.len() {
        // Only where a character starts: a prompt is any UTF-8.
        let end = if text.is_char_boundary(i) && starts_word(bytes, i) { shape_at(text, i) } else { None };
        match end {
            Some(end) => {
                out.push_str(&text[copied..i]);
                out.push_str(REDACTED);
                count += 1;
                i = end;
                copied = end;
            }
            None => i += 1,
        }
    }
    out.push_str(&text[copied..]);
    (out, count)
}

/// Where a credential that starts at `i` ends, if one does.
fn shape_at(text: &str, i: usize) -> Option<usize> {
    let rest = &text[i..];
    if rest.starts_with(PEM_BEGIN) {
        return pem_end(rest).map(|n| i + n);
    }
    let run = |from: usize| rest.as_bytes()[from..].iter().take_while(|b| token_char(**b)).count();
    for aws in AWS_PREFIXES {
        if rest.starts_with(aws) {
            let id = rest.as_bytes()[4..].iter().take_while(|b| b.is_ascii_uppercase() || b.is_ascii_digit()).count();
            if id >= 16 {
                return Some(i + 4 + id);
            }
        }
    }
    for (prefix, min) in PREFIXES {
        if rest.starts_with(prefix) {
            let n = run(prefix.len());
            return (n >= min).then_some(i + prefix.len() + n);
        }
    }
    None
}

/// The end of a private-key block starting `rest`: through the END line's
/// closing dashes. Only private keys: a certificate is public.
fn pem_end(rest: &str) -> Option<usize> {
    let label_end = rest[PEM_BEGIN.len()..].find(PEM_DASHES)? + PEM_BEGIN.len();
    let label = &rest[PEM_BEGIN.len()..label_end];
    if !label.ends_with("PRIVATE KEY") || label.len() > 40 {
        return None;
    }
    let end_at = rest.find(PEM_END)?;
    let close = rest[end_at + PEM_END.len()..].find(PEM_DASHES)? + end_at + PEM_END.len() + PEM_DASHES.len();
    Some(close)
}

/// A JSON text with credential shapes replaced (a bug report): the same
/// scan, which leaves the JSON valid.
pub fn shapes_in_json(text: &str) -> (String, usize) {
    shapes(text)
}

/// The body to send with every known secret and credential shape taken
/// out, and how many were; `None` when there was nothing to take out.
pub fn outgoing(known: &Scrubber, body: &[u8]) -> Option<(Vec<u8>, usize)> {
    let text = std::str::from_utf8(body).ok()?;
    let known_count = known.count(text.as_bytes());
    let text = known.text(text);
    let (text, shaped) = shapes(&text);
    let count = known_count + shaped;
    (count > 0).then(|| (text.into_bytes(), count))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_shapes_are_replaced_and_counted() {
        let pem = "-----BEGIN RSA PRIVATE KEY-----\\nMIIEow\\n-----END RSA PRIVATE KEY-----";
        let text = format!(
            r#"{{"p":"AKIAIOSFODNN7EXAMPLE and ghp_abcdefghijklmnopqrstuvwxyz0123456789 and {pem} and sk-ant-api03-abcdefghijklmnop done"}}"#
        );
        let (out, n) = shapes(&text);
        assert_eq!(n, 4, "{out}");
        assert_eq!(out, r#"{"p":"[redacted] and [redacted] and [redacted] and [redacted] done"}"#);
        assert!(serde_json::from_str::<serde_json::Value>(&out).is_ok());
    }

    #[test]
    fn a_key_on_its_own_line_of_a_json_string_is_found() {
        let text = r#"{"p":"env:\nAKIAIOSFODNN7EXAMPLE\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl\n-----END OPENSSH PRIVATE KEY-----\nok"}"#;
        let (out, n) = shapes(text);
        assert_eq!(n, 2, "{out}");
        assert_eq!(out, r#"{"p":"env:\n[redacted]\n[redacted]\nok"}"#);
    }

    #[test]
    fn text_in_any_script_is_scanned_whole() {
        let (out, n) = shapes("clé: ghp_abcdefghijklmnopqrstuvwxyz0123456789 — 日本語 sk-é");
        assert_eq!((out.as_str(), n), ("clé: [redacted] — 日本語 sk-é", 1));
    }

    #[test]
    fn ordinary_words_and_public_blocks_stay() {
        let text = "task-manager sk-short AKIA1 ask-anthing -----BEGIN CERTIFICATE-----x-----END CERTIFICATE-----";
        assert_eq!(shapes(text), (text.to_string(), 0));
    }

    #[test]
    fn known_secrets_are_counted_with_the_shapes() {
        let mut known = Scrubber::new();
        known.add("provider-key-0123456789");
        let body = br#"{"m":"my key is provider-key-0123456789 and AKIAIOSFODNN7EXAMPLE"}"#;
        let (out, n) = outgoing(&known, body).unwrap();
        assert_eq!(n, 2);
        let out = String::from_utf8(out).unwrap();
        assert!(!out.contains("provider-key") && !out.contains("AKIA"), "{out}");
        assert!(outgoing(&known, br#"{"m":"nothing here"}"#).is_none());
    }
}
