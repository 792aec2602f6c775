//! Custom (freeform) tool input as it streams, both ways. A provider
//! without custom tools is sent Codex's `apply_patch` as a function taking
//! `{"input": string}` (translation.md §B.4); its argument deltas are
//! unwrapped here into the raw input the client expects, as they come,
//! escapes split across deltas included. The other way, raw input is
//! written as that JSON object delta by delta.

/// Writes raw input as the JSON arguments `{"input":"…"}`.
#[derive(Debug, Default)]
pub struct Wrapper {
    started: bool,
}

impl Wrapper {
    pub fn push(&mut self, raw: &str) -> String {
        let escaped = escape(raw);
        if self.started {
            escaped
        } else {
            self.started = true;
            format!("{{\"input\":\"{escaped}")
        }
    }

    pub fn finish(&mut self) -> String {
        if self.started {
            "\"}".to_string()
        } else {
            "{\"input\":\"\"}".to_string()
        }
    }
}

/// A string's JSON escaping, without the quotes.
fn escape(raw: &str) -> String {
    let quoted = serde_json::Value::from(raw).to_string();
    quoted[1..quoted.len() - 1].to_string()
}

/// Reads the raw input out of `{"input":"…"}` arguments as they stream.
#[derive(Debug, Default)]
pub struct Unwrapper {
    state: State,
    /// Everything seen before the string began, or everything, when the
    /// arguments were not in the expected shape (read whole at the end).
    held: String,
    /// An escape not yet complete (`\`, `\u12`, a high surrogate…).
    escape: String,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum State {
    #[default]
    Before,
    Inside,
    After,
    /// Not the expected shape: hold all and parse at the end.
    Whole,
}

const OPENING: &[&str] = &["{", "\"input\"", ":", "\""];

impl Unwrapper {
    /// The raw input these arguments add.
    pub fn push(&mut self, args: &str) -> String {
        let mut out = String::new();
        let mut rest = args;
        if self.state == State::Before {
            self.held.push_str(args);
            match opening_end(&self.held) {
                Some(Ok(end)) => {
                    self.state = State::Inside;
                    let held = std::mem::take(&mut self.held);
                    self.inside(&held[end..], &mut out);
                }
                Some(Err(())) => self.state = State::Whole,
                None => {}
            }
            return out;
        }
        if self.state == State::Whole {
            self.held.push_str(args);
            rest = "";
        }
        self.inside(rest, &mut out);
        out
    }

    /// The input not yet given out: all of it, when the arguments were not
    /// `{"input": string}` (then a string `input` member, or the text as is).
    pub fn finish(&mut self) -> String {
        match self.state {
            State::Inside | State::After => String::new(),
            State::Before | State::Whole => {
                let held = std::mem::take(&mut self.held);
                match serde_json::from_str::<serde_json::Value>(&held) {
                    Ok(v) => match v.get("input") {
                        Some(serde_json::Value::String(s)) => s.clone(),
                        _ => held,
                    },
                    Err(_) => held,
                }
            }
        }
    }

    fn inside(&mut self, text: &str, out: &mut String) {
        if self.state != State::Inside {
            return;
        }
        for c in text.chars() {
            if !self.escape.is_empty() {
                self.escape.push(c);
                self.escaped(out);
            } else if c == '\\' {
                self.escape.push(c);
            } else if c == '"' {
                self.state = State::After;
                return;
            } else {
                out.push(c);
            }
        }
    }

    /// Resolves the pending escape once it is complete.
    fn escaped(&mut self, out: &mut String) {
        let e = self.escape.as_str();
        let simple = match e {
            "\\n" => Some('\n'),
            "\\t" => Some('\t'),
            "\\r" => Some('\r'),
            "\\b" => Some('\u{8}'),
            "\\f" => Some('\u{c}'),
            "\\/" => Some('/'),
            "\\\\" => Some('\\'),
            "\\\"" => Some('"'),
            _ => None,
        };
        if let Some(c) = simple {
            out.push(c);
            self.escape.clear();
            return;
        }
        if !e.starts_with("\\u") {
            // Not JSON; keep the text as it was.
            out.push_str(e);
            self.escape.clear();
            return;
        }
        let units: Vec<u16> = match e.len() {
            6 => e.get(2..6).and_then(|h| u16::from_str_radix(h, 16).ok()).into_iter().collect(),
            12 => {
                [e.get(2..6), e.get(8..12)].iter().flatten().filter_map(|h| u16::from_str_radix(h, 16).ok()).collect()
            }
            _ => return, // not complete yet
        };
        let high = units.first().is_some_and(|u| (0xD800..0xDC00).contains(u));
        if e.len() == 6 && high {
            return; // wait for the low surrogate
        }
        if e.len() > 6 && e.get(6..8) != Some("\\u") {
            // A lone high surrogate followed by something else.
            out.push('\u{FFFD}');
            let tail = e[6..].to_string();
            self.escape.clear();
            for c in tail.chars() {
                self.inside_char(c, out);
            }
            return;
        }
        out.extend(char::decode_utf16(units).map(|r| r.unwrap_or('\u{FFFD}')));
        self.escape.clear();
    }

    fn inside_char(&mut self, c: char, out: &mut String) {
        let mut buf = [0u8; 4];
        self.inside(c.encode_utf8(&mut buf), out);
    }
}

/// Where the value's string begins in `held` (after its opening quote), an
/// error when `held` cannot be the expected shape, `None` while unsure.
fn opening_end(held: &str) -> Option<Result<usize, ()>> {
    let mut at = 0;
    for token in OPENING {
        at += held[at..].len() - held[at..].trim_start().len();
        let rest = &held[at..];
        if rest.len() < token.len() {
            return if token.starts_with(rest) { None } else { Some(Err(())) };
        }
        if !rest.starts_with(token) {
            return Some(Err(()));
        }
        at += token.len();
    }
    Some(Ok(at))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unwrap_in_pieces(args: &str, size: usize) -> String {
        let mut u = Unwrapper::default();
        let chars: Vec<char> = args.chars().collect();
        let mut out: String = chars.chunks(size).map(|c| u.push(&c.iter().collect::<String>())).collect();
        out.push_str(&u.finish());
        out
    }

    #[test]
    fn unwraps_input_split_anywhere_escapes_included() {
        let raw = "*** Begin Patch\n\"quoted\" \\ tab\t é 😀 </>\n*** End Patch";
        let args = serde_json::json!({ "input": raw }).to_string();
        let ascii = args.replace('é', "\\u00e9").replace('😀', "\\ud83d\\ude00");
        for text in [&args, &ascii, &format!(" {{ \"input\" :  {}}}", &args[9..])] {
            for size in 1..12 {
                assert_eq!(unwrap_in_pieces(text, size), raw, "{text} in pieces of {size}");
            }
        }
    }

    #[test]
    fn other_shapes_are_read_whole() {
        assert_eq!(unwrap_in_pieces(r#"{"other":1,"input":"x"}"#, 3), "x");
        assert_eq!(unwrap_in_pieces("not json", 2), "not json");
        assert_eq!(unwrap_in_pieces("", 1), "");
    }

    #[test]
    fn wrapping_round_trips() {
        let mut w = Wrapper::default();
        let json = [w.push("a\"b"), w.push("\nc"), w.finish()].concat();
        assert_eq!(serde_json::from_str::<serde_json::Value>(&json).unwrap(), serde_json::json!({"input": "a\"b\nc"}));
        assert_eq!(Wrapper::default().finish(), r#"{"input":""}"#);
    }
}
