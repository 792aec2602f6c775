//! What depends on the model rather than the provider, as data: OpenAI's
//! reasoning models reject `temperature`/`top_p` other than the default;
//! newer Claude models reject `thinking.type = enabled` and want adaptive
//! thinking with an effort, while Claude Haiku 4.5 rejects adaptive.
//!
//! A rule names a model pattern and the profile fields it sets. The
//! built-in rules ([`BUILTIN`]) apply to every provider, since the same
//! model has the same limits wherever it is served (OpenAI, Azure,
//! OpenRouter's `openai/gpt-5`); a profile's own `models` rules apply after
//! them and win. In TOML:
//!
//! ```toml
//! profile = { models = [{ match = "my-reasoner-*", sampling = false }] }
//! ```

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use super::profile::{MaxTokensField, Profile, ThinkingStyle};

/// Profile fields set for the models a pattern matches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub struct ModelRule {
    /// The model, with `*` for any run of characters, compared without
    /// case to the whole name and to the part after its last `/`
    /// (`openai/gpt-5` matches `gpt-5*`).
    #[serde(rename = "match")]
    pub pattern: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_style: Option<ThinkingStyle>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens_field: Option<MaxTokensField>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
}

/// A built-in rule: a pattern and what it sets.
#[derive(Debug, Clone, Copy)]
pub struct Builtin {
    pub pattern: &'static str,
    pub sampling: Option<bool>,
    pub thinking_style: Option<ThinkingStyle>,
    pub why: &'static str,
}

const REASONING_SAMPLING: &str = "OpenAI reasoning models reject temperature and top_p other than the default";
const ADAPTIVE_ONLY: &str = "newer Claude models reject thinking.type = enabled; they take adaptive with an effort";

const fn no_sampling(pattern: &'static str) -> Builtin {
    Builtin { pattern, sampling: Some(false), thinking_style: None, why: REASONING_SAMPLING }
}

const fn thinking(pattern: &'static str, style: ThinkingStyle, why: &'static str) -> Builtin {
    Builtin { pattern, sampling: None, thinking_style: Some(style), why }
}

/// The rules every profile starts from, in order (a later match wins).
pub const BUILTIN: &[Builtin] = &[
    no_sampling("gpt-5*"),
    no_sampling("o1*"),
    no_sampling("o3*"),
    no_sampling("o4*"),
    // The chat-tuned GPT-5 is not a reasoning model and takes sampling.
    Builtin { pattern: "gpt-5*-chat*", sampling: Some(true), thinking_style: None, why: "not a reasoning model" },
    thinking("claude-opus-4-6*", ThinkingStyle::Adaptive, ADAPTIVE_ONLY),
    thinking("claude-sonnet-4-6*", ThinkingStyle::Adaptive, ADAPTIVE_ONLY),
    // Opus 4.7 and later take adaptive thinking only, and refuse sampling
    // parameters other than the default.
    Builtin {
        pattern: "claude-opus-4-7*",
        sampling: Some(false),
        thinking_style: Some(ThinkingStyle::Adaptive),
        why: ADAPTIVE_ONLY,
    },
    Builtin {
        pattern: "claude-opus-4-8*",
        sampling: Some(false),
        thinking_style: Some(ThinkingStyle::Adaptive),
        why: ADAPTIVE_ONLY,
    },
    thinking("claude-sonnet-5*", ThinkingStyle::Adaptive, ADAPTIVE_ONLY),
    thinking(
        "claude-haiku-4-5*",
        ThinkingStyle::Enabled,
        "Claude Haiku 4.5 rejects adaptive thinking; it takes a budget",
    ),
];

/// The most output tokens each model takes, as its maker documents it: a
/// client written for one model (Claude Code asks Opus for 32,000) falls
/// back to another that refuses such a limit outright. Later matches win.
pub const OUTPUT_LIMITS: &[(&str, u32)] = &[
    ("gpt-4o*", 16_384),
    ("gpt-4o-mini*", 16_384),
    ("gpt-4.1*", 32_768),
    ("gpt-5*", 128_000),
    ("gpt-5*-chat*", 16_384),
    ("o1*", 100_000),
    ("o3*", 100_000),
    ("o4-mini*", 100_000),
    ("gpt-3.5-turbo*", 4_096),
    ("claude-3-5-haiku*", 8_192),
    ("claude-3-7-sonnet*", 64_000),
    ("claude-sonnet-4*", 64_000),
    ("claude-opus-4*", 32_000),
    ("claude-haiku-4-5*", 64_000),
    ("gemini-2.0-flash*", 8_192),
    ("gemini-2.5-*", 65_536),
    ("deepseek-chat*", 8_192),
    ("deepseek-reasoner*", 65_536),
];

/// The built-in output limit of `model`, if the table knows it.
pub fn output_limit(model: &str) -> Option<u32> {
    OUTPUT_LIMITS.iter().rev().find(|(pattern, _)| matches(pattern, model)).map(|(_, n)| *n)
}

/// The output limit `profile` gives `model`: its own rules' (the last that
/// matches), else its own, else the built-in table's. No profile is copied.
pub fn output_limit_for(profile: &Profile, model: &str) -> Option<u32> {
    let ruled = profile.models.iter().rev().filter(|r| matches(&r.pattern, model)).find_map(|r| r.max_output_tokens);
    ruled.or(profile.max_output_tokens).or_else(|| output_limit(model))
}

/// Sets a field when a rule names a value other than the one in place,
/// copying the profile only then.
macro_rules! set {
    ($out:ident, $value:expr, $field:ident) => {
        if let Some(v) = $value {
            if $out.$field != v {
                $out.to_mut().$field = v;
            }
        }
    };
}

/// `profile` corrected for `model`: the built-in rules, then its own.
pub(crate) fn apply<'a>(profile: &'a Profile, model: &str) -> Cow<'a, Profile> {
    let mut out = Cow::Borrowed(profile);
    for rule in BUILTIN.iter().filter(|r| matches(r.pattern, model)) {
        set!(out, rule.sampling, sampling);
        set!(out, rule.thinking_style, thinking_style);
    }
    for rule in profile.models.iter().filter(|r| matches(&r.pattern, model)) {
        set!(out, rule.sampling, sampling);
        set!(out, rule.thinking_style, thinking_style);
        set!(out, rule.max_tokens_field, max_tokens_field);
        set!(out, rule.reasoning_effort, reasoning_effort);
        set!(out, rule.max_output_tokens.map(Some), max_output_tokens);
    }
    out
}

/// Whether `pattern` matches `model` or the part of it after the last `/`.
pub fn matches(pattern: &str, model: &str) -> bool {
    let tail = model.rsplit('/').next().unwrap_or(model);
    glob(pattern.as_bytes(), model.as_bytes()) || glob(pattern.as_bytes(), tail.as_bytes())
}

/// `*`-only glob, ASCII case-insensitive.
fn glob(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    // Where the last `*` was, and the text position it currently covers up to.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if p < pattern.len() && pattern[p].eq_ignore_ascii_case(&text[t]) {
            p += 1;
            t += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn patterns_match_without_case_and_after_a_vendor_prefix() {
        assert!(matches("gpt-5*", "gpt-5"));
        assert!(matches("gpt-5*", "GPT-5-mini"));
        assert!(matches("gpt-5*", "openai/gpt-5"));
        assert!(matches("gpt-5*-chat*", "gpt-5-chat-latest"));
        assert!(matches("o3*", "o3-pro"));
        assert!(!matches("o3*", "gpt-4o3"));
        assert!(!matches("gpt-5*", "gpt-4.1"));
        assert!(matches("*", "anything"));
        assert!(matches("a*b*c", "aXXbYYc"));
        assert!(!matches("a*b*c", "aXXbYY"));
    }

    #[test]
    fn reasoning_models_take_no_sampling_and_claude_models_their_thinking_style() {
        let base = Profile::default();
        for model in ["gpt-5", "gpt-5-mini", "o1", "o3-mini", "o4-mini", "openai/gpt-5"] {
            assert!(!base.for_model(model).sampling, "{model}");
        }
        for model in ["gpt-4.1", "gpt-4o", "gpt-5-chat-latest", "deepseek-chat"] {
            assert!(base.for_model(model).sampling, "{model}");
        }
        assert!(matches!(base.for_model("gpt-4.1"), Cow::Borrowed(_)), "no copy where no rule applies");
        assert_eq!(base.for_model("claude-opus-4-6").thinking_style, ThinkingStyle::Adaptive);
        assert_eq!(base.for_model("claude-sonnet-4-6-20260217").thinking_style, ThinkingStyle::Adaptive);
        assert_eq!(base.for_model("claude-sonnet-4-5").thinking_style, ThinkingStyle::Enabled);
        let opus = base.for_model("claude-opus-4-7");
        assert!(!opus.sampling && opus.thinking_style == ThinkingStyle::Adaptive);
        assert!(!base.for_model("claude-opus-4-8-20260501").sampling);
        assert!(base.for_model("claude-opus-4-6").sampling, "Opus 4.6 still takes sampling");
        let adaptive = Profile { thinking_style: ThinkingStyle::Adaptive, ..Profile::default() };
        assert_eq!(adaptive.for_model("claude-haiku-4-5").thinking_style, ThinkingStyle::Enabled);
    }

    #[test]
    fn a_profile_s_own_rules_come_last_and_win() {
        let p: Profile = toml::from_str(
            "models = [{ match = \"gpt-5*\", sampling = true }, { match = \"local-*\", reasoning_effort = false, \
             max_tokens_field = \"max_completion_tokens\" }]",
        )
        .unwrap();
        assert!(p.for_model("gpt-5").sampling, "the profile overrides the built-in rule");
        let local = p.for_model("local-qwen");
        assert!(!local.reasoning_effort);
        assert_eq!(local.max_tokens_field, MaxTokensField::MaxCompletionTokens);
        assert!(toml::from_str::<Profile>("models = [{ match = \"x\", nope = 1 }]").is_err());
    }
}
