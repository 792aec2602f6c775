//! Tool names and tool-call ids that a target would reject, made valid
//! deterministically.
//!
//! A name or id is kept verbatim when the target accepts it. Otherwise every
//! forbidden character becomes `_`, the result is cut to fit, and eight hex
//! digits of a hash of the original are appended, so two different originals
//! never meet in one name. The function is pure, so a call id and the result
//! that answers it, sanitised separately, still match; renamed tool names go
//! into [`Context::renamed_tools`](super::ir::Context) so the reply speaks the
//! client's names again.

use std::borrow::Cow;

use ring::digest;

use super::ir::Format;

/// Eight hex digits of SHA-256 of `s`.
pub fn hash8(s: &str) -> String {
    let d = digest::digest(&digest::SHA256, s.as_bytes());
    d.as_ref().iter().take(4).map(|b| format!("{b:02x}")).collect()
}

fn name_char_ok(format: Format, c: char) -> bool {
    match format {
        Format::Gemini => c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-'),
        _ => c.is_ascii_alphanumeric() || matches!(c, '_' | '-'),
    }
}

fn name_ok(format: Format, name: &str, max: usize) -> bool {
    let first_ok = match format {
        Format::Gemini => name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_'),
        _ => true,
    };
    !name.is_empty() && name.len() <= max && first_ok && name.chars().all(|c| name_char_ok(format, c))
}

/// `original` made to fit: forbidden characters replaced, cut to leave room
/// for `_` and the hash, which is appended.
fn mangle(original: &str, max: usize, char_ok: impl Fn(char) -> bool, prefix: &str) -> String {
    let cleaned: String = original.chars().map(|c| if char_ok(c) { c } else { '_' }).collect();
    let room = max.saturating_sub(9 + prefix.len()).max(1);
    let head: String = cleaned.chars().take(room).collect();
    format!("{prefix}{head}_{}", hash8(original))
}

/// A tool name the target accepts (`max` from the provider's profile).
pub fn tool_name(format: Format, name: &str, max: usize) -> Cow<'_, str> {
    if name_ok(format, name, max) {
        return Cow::Borrowed(name);
    }
    let prefix = match format {
        Format::Gemini if !name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') => "t",
        _ => "",
    };
    Cow::Owned(mangle(name, max, |c| name_char_ok(format, c), prefix))
}

/// A tool-call id every format accepts: `[A-Za-z0-9_-]`, at most `max` long
/// (Anthropic rejects `functions.Bash:0` and long `fc_…|…` ids).
pub fn call_id(id: &str, max: usize) -> Cow<'_, str> {
    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-');
    if !id.is_empty() && id.len() <= max && id.chars().all(ok) {
        return Cow::Borrowed(id);
    }
    Cow::Owned(mangle(id, max, ok, ""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_names_are_kept_and_others_are_hashed_to_fit() {
        assert_eq!(tool_name(Format::Messages, "Bash", 64), "Bash");
        let long = "mcp__github__".to_owned() + &"x".repeat(80);
        let short = tool_name(Format::Chat, &long, 64);
        assert_eq!(short.len(), 64);
        assert!(short.starts_with("mcp__github__x"));
        assert_ne!(tool_name(Format::Chat, &(long.clone() + "y"), 64), short);
        // A dot is fine for Gemini, not for the others.
        assert_eq!(tool_name(Format::Gemini, "ns.read", 64), "ns.read");
        let dotted = tool_name(Format::Messages, "ns.read", 64);
        assert!(dotted.starts_with("ns_read_") && dotted.len() == 16, "{dotted}");
        assert_ne!(dotted, tool_name(Format::Messages, "ns_read", 64));
        // Gemini names start with a letter or an underscore.
        let digit = tool_name(Format::Gemini, "3d-print", 64);
        assert!(digit.starts_with("t3d-print_"), "{digit}");
    }

    #[test]
    fn ids_are_sanitised_the_same_way_every_time() {
        let a = call_id("functions.Bash:0", 64);
        assert!(a.starts_with("functions_Bash_0_"));
        assert_eq!(a, call_id("functions.Bash:0", 64));
        let long = format!("fc_{}|{}", "a".repeat(40), "b".repeat(40));
        let b = call_id(&long, 64);
        assert!(b.len() <= 64 && b.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'));
        assert_eq!(call_id("toolu_01A09q90qw90lq917835lq9", 64), "toolu_01A09q90qw90lq917835lq9");
    }
}
