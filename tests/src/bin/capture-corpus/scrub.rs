//! Scrubbing a captured request before it goes into the repository: no
//! credential, nothing naming this machine (paths, user, kernel), and
//! nothing that changes on every run (ids, dates, ports), so that a
//! re-capture shows a diff a reviewer can read.

use std::collections::HashMap;

use serde_json::Value;

/// What every credential becomes.
pub const REDACTED: &str = "REDACTED";

/// Headers that carry a credential, whatever the format.
const CREDENTIAL_HEADERS: &[&str] =
    &["authorization", "x-api-key", "x-goog-api-key", "cookie", "proxy-authorization", "api-key"];

/// Headers left out of a fixture: their value follows from the rest
/// (`content-length` no longer matches a scrubbed body) or from the transport.
pub const OMITTED_HEADERS: &[&str] = &["content-length", "connection", "accept-encoding"];

/// Rewrites one scenario's requests; ids keep their placeholders across the
/// scenario's fixtures, so a session id still equals itself everywhere.
#[derive(Debug)]
pub struct Scrubber {
    /// Literal text and its placeholder, longest first.
    literal: Vec<(String, String)>,
    /// Random ids seen so far, and the placeholder each became.
    ids: HashMap<String, String>,
}

impl Scrubber {
    /// For a run in a sandbox at `root` (its `home` and `project` beneath),
    /// talking to a provider on `port`.
    pub fn new(root: &str, port: u16, secrets: &[&str]) -> Scrubber {
        let mut literal = vec![
            (format!("{root}/project"), "/home/user/project".to_string()),
            (format!("{root}/home"), "/home/user".to_string()),
            (root.to_string(), "/tmp/sandbox".to_string()),
            // Claude Code names a project's folder by its path, `/` and `.` as `-`.
            (dashed(&format!("{root}/project")), dashed("/home/user/project")),
            (dashed(root), dashed("/tmp/sandbox")),
            (format!("127.0.0.1:{port}"), "127.0.0.1:4141".to_string()),
            (format!("localhost:{port}"), "localhost:4141".to_string()),
        ];
        literal.extend(secrets.iter().map(|s| (s.to_string(), REDACTED.to_string())));
        literal.extend(machine());
        literal.retain(|(from, _)| !from.is_empty());
        literal.sort_by_key(|(from, _)| std::cmp::Reverse(from.len()));
        Scrubber { literal, ids: HashMap::new() }
    }

    /// A header's value as the fixture keeps it.
    pub fn header(&mut self, name: &str, value: &str) -> String {
        if CREDENTIAL_HEADERS.contains(&name) {
            return match value.split_once(' ') {
                Some((scheme, _)) if scheme.eq_ignore_ascii_case("bearer") => format!("{scheme} {REDACTED}"),
                _ => REDACTED.to_string(),
            };
        }
        self.text(value)
    }

    /// The query string with any `key=` credential replaced.
    pub fn query(&mut self, query: &str) -> String {
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| if pair.starts_with("key=") { format!("key={REDACTED}") } else { self.text(pair) })
            .collect();
        pairs.join("&")
    }

    /// Every string in a JSON value, scrubbed (object keys too).
    pub fn json(&mut self, value: &Value) -> Value {
        match value {
            Value::String(s) => Value::String(self.text(s)),
            Value::Array(items) => Value::Array(items.iter().map(|v| self.json(v)).collect()),
            Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (self.text(k), self.json(v))).collect()),
            Value::Number(n) if epoch_ms(&n.to_string()) => Value::from(EPOCH_MS),
            other => other.clone(),
        }
    }

    /// One piece of text: literals, then ids, dates and Claude Code's
    /// per-request billing hash.
    pub fn text(&mut self, text: &str) -> String {
        let mut out = text.to_string();
        for (from, to) in &self.literal {
            if out.contains(from.as_str()) {
                out = out.replace(from.as_str(), to);
            }
        }
        let out = self.ids(&out);
        let out = self.words(&out);
        let out = fixed_after(&fixed_after(&out, "cch=", "00000"), "duration_ms: ", "0");
        fixed_after(&out, "Chunk ID: ", "000000")
    }

    /// Words that change on every run: epoch milliseconds (Codex's turn
    /// start, Gemini CLI's call ids) and Claude Code's agent ids
    /// (`a` and 16 hex digits).
    fn words(&mut self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut word = String::new();
        for c in text.chars().chain(std::iter::once('\0')) {
            if c.is_ascii_alphanumeric() {
                word.push(c);
                continue;
            }
            out.push_str(&self.word(&word));
            word.clear();
            if c != '\0' {
                out.push(c);
            }
        }
        out
    }

    fn word(&mut self, word: &str) -> String {
        if epoch_ms(word) {
            return EPOCH_MS.to_string();
        }
        let hex = word.strip_prefix('a').filter(|h| {
            h.len() == 16
                && h.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
                && h.bytes().any(|b| b.is_ascii_digit())
        });
        if hex.is_none() {
            return word.to_string();
        }
        let n = self.ids.len() + 1;
        self.ids.entry(word.to_string()).or_insert_with(|| format!("a{n:016}")).clone()
    }

    /// UUIDs and long hex strings (session, request and installation ids)
    /// become numbered placeholders of the same shape.
    fn ids(&mut self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some((start, len)) = next_id(rest) {
            out.push_str(&rest[..start]);
            let id = &rest[start..start + len];
            let n = self.ids.len() + 1;
            let placeholder = self.ids.entry(id.to_string()).or_insert_with(|| placeholder(id, n));
            out.push_str(placeholder);
            rest = &rest[start + len..];
        }
        out.push_str(rest);
        out
    }
}

/// A path as Claude Code turns it into a folder name.
fn dashed(path: &str) -> String {
    path.replace(['/', '.'], "-")
}

/// What names this machine, and what to write instead: the real home, the
/// kernel's release, today's date in the forms the CLIs write it.
fn machine() -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    if let Some(home) = std::env::var_os("HOME") {
        let home = home.to_string_lossy().to_string();
        if home.len() > 1 {
            pairs.push((format!("{home}/"), "/home/user/".to_string()));
            // Codex names its agent after the user's home, as a JSON string.
            pairs.push((format!("\"{home}\""), "\"/home/user\"".to_string()));
        }
    }
    let run = |program: &str, args: &[&str]| -> String {
        std::process::Command::new(program)
            .args(args)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default()
    };
    pairs.push((run("uname", &["-r"]), "6.0.0-generic".to_string()));
    pairs.push((run("uname", &["-v"]), "#1 SMP".to_string()));
    let host = run("uname", &["-n"]);
    // A short host name ("vm") is also a piece of ordinary words: only its
    // appearances as a whole field are scrubbed, in `Scrubber::header`'s callers.
    if host.len() >= 6 {
        pairs.push((host, "host".to_string()));
    }
    let dates =
        [("+%Y-%m-%d", "2025-01-15"), ("+%A, %B %-d, %Y", "Wednesday, January 15, 2025"), ("+%Y/%m/%d", "2025/01/15")];
    for (format, fixed) in dates {
        pairs.push((run("date", &[format]), fixed.to_string()));
    }
    pairs
}

/// Where the next id starts in `text`, and its length: a UUID, or a run of
/// 32 or more lower-case hex digits, standing alone (not inside a word).
fn next_id(text: &str) -> Option<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let alone = i == 0 || !bytes[i - 1].is_ascii_alphanumeric();
        if alone && bytes[i].is_ascii_hexdigit() {
            let len = id_len(&bytes[i..]);
            if len > 0 {
                return Some((i, len));
            }
        }
        i += 1;
    }
    None
}

fn id_len(bytes: &[u8]) -> usize {
    let hex = |b: &u8| b.is_ascii_digit() || (b'a'..=b'f').contains(b);
    let ends = |n: usize| bytes.get(n).is_none_or(|b| !b.is_ascii_alphanumeric());
    let uuid = bytes.len() >= 36
        && bytes[..36].iter().enumerate().all(|(i, b)| if [8, 13, 18, 23].contains(&i) { *b == b'-' } else { hex(b) });
    if uuid && ends(36) {
        return 36;
    }
    let run = bytes.iter().take_while(|b| hex(b)).count();
    if run >= 32
        && ends(run)
        && bytes[..run].iter().any(u8::is_ascii_digit)
        && bytes[..run].iter().any(|b| b.is_ascii_alphabetic())
    {
        run
    } else {
        0
    }
}

/// The `n`th id's placeholder, shaped like `id`.
fn placeholder(id: &str, n: usize) -> String {
    if id.len() == 36 && id.as_bytes()[8] == b'-' {
        return format!("00000000-0000-4000-8000-{n:012}");
    }
    format!("{n:0>width$}", width = id.len())
}

/// What every epoch-milliseconds timestamp becomes.
const EPOCH_MS: u64 = 1_736_899_200_000;

/// A time in epoch milliseconds between 2017 and 2039.
fn epoch_ms(word: &str) -> bool {
    word.len() == 13 && word.parse::<u64>().is_ok_and(|n| (1_500_000_000_000..2_200_000_000_000).contains(&n))
}

/// The value after each `key` replaced by `fixed`: Claude Code's
/// `x-anthropic-billing-header` changes its `cch=` hash on every request,
/// a subagent's report its `duration_ms`, Codex's shell output its `Chunk ID`.
fn fixed_after(text: &str, key: &str, fixed: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(key) {
        let value = &rest[at + key.len()..];
        let len = value.bytes().take_while(u8::is_ascii_alphanumeric).count();
        out.push_str(&rest[..at + key.len()]);
        out.push_str(if len > 0 { fixed } else { "" });
        rest = &value[len..];
    }
    out.push_str(rest);
    out
}

/// Whether `text` still holds something the scrubber should have removed.
pub fn leaks(text: &str, root: &str, secrets: &[&str]) -> Vec<String> {
    let token = root.rsplit('/').next().unwrap_or(root).trim_start_matches('.');
    let mut found: Vec<String> = secrets.iter().filter(|s| text.contains(*s)).map(|s| s.to_string()).collect();
    if !token.is_empty() && text.contains(token) {
        found.push(token.to_string());
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_become_stable_placeholders() {
        let mut s = Scrubber { literal: Vec::new(), ids: HashMap::new() };
        let a = "5f0e0f3c-7a3e-4c1b-9b7e-2d2f3f9e1a11";
        let out = s.text(&format!("session {a} and {a}; user_{}_x", "ab12".repeat(16)));
        assert_eq!(
            out,
            format!(
                "session 00000000-0000-4000-8000-000000000001 and 00000000-0000-4000-8000-000000000001; user_{}_x",
                "0".repeat(63) + "2"
            )
        );
    }

    #[test]
    fn billing_hash_is_fixed() {
        assert_eq!(fixed_after("cc_version=2.1; cch=1a2b3; x", "cch=", "00000"), "cc_version=2.1; cch=00000; x");
        let mut s = Scrubber { literal: Vec::new(), ids: HashMap::new() };
        assert_eq!(
            s.text("read_file_1796318687306_0 agentId: ab7c96bbe67263e2d"),
            "read_file_1736899200000_0 agentId: a0000000000000001"
        );
    }
}
