//! Token counts as streams report them (translation.md §C.3): read, merged
//! across events, and converted to Anthropic's convention.

use serde_json::Value;

use crate::protocol::translate::ir::Tokens;

/// A token count at `key`: a non-negative integer, or "did not say" for
/// anything else a provider puts there (null, a string, a float).
pub fn count(usage: &Value, key: &str) -> Option<u64> {
    usage.get(key).and_then(Value::as_u64)
}

/// A count nested one object down (`prompt_tokens_details.cached_tokens`).
pub fn count_in(usage: &Value, object: &str, key: &str) -> Option<u64> {
    usage.get(object).and_then(|o| count(o, key))
}

/// Later readings win field by field: Anthropic sends input first and
/// output last, and some providers repeat cumulative usage on every chunk.
pub fn merge(earlier: Tokens, later: Tokens) -> Tokens {
    Tokens {
        input: later.input.or(earlier.input),
        output: later.output.or(earlier.output),
        cache_read: later.cache_read.or(earlier.cache_read),
        cache_write: later.cache_write.or(earlier.cache_write),
        reasoning: later.reasoning.or(earlier.reasoning),
    }
}

/// Input tokens without the cached ones, as Anthropic counts them.
pub fn uncached_input(tokens: &Tokens) -> u64 {
    tokens
        .input
        .unwrap_or(0)
        .saturating_sub(tokens.cache_read.unwrap_or(0))
        .saturating_sub(tokens.cache_write.unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anthropic_input_excludes_cache_and_saturates() {
        let t = Tokens { input: Some(100), cache_read: Some(90), cache_write: Some(5), ..Tokens::default() };
        assert_eq!(uncached_input(&t), 5);
        let odd = Tokens { input: Some(1), cache_read: Some(90), ..Tokens::default() };
        assert_eq!(uncached_input(&odd), 0);
    }
}
