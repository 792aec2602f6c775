//! What tokens cost: a shipped table of list prices per million tokens,
//! overridable in config. An unknown model has no cost (null), never zero.

use serde::Deserialize;

use crate::config::Price;
use crate::protocol::usage::Usage;

/// The shipped price table.
const EMBEDDED: &str = include_str!("prices.toml");

#[derive(Debug, Deserialize)]
struct Table {
    prices: Vec<Price>,
}

/// Prices in lookup order: config entries first, then the shipped ones.
#[derive(Debug, Clone, Default)]
pub struct Prices {
    entries: Vec<Price>,
}

impl Prices {
    /// The shipped table with `overrides` (from config) taking precedence.
    pub fn with_overrides(overrides: Vec<Price>) -> Prices {
        let shipped = toml::from_str::<Table>(EMBEDDED).map(|t| t.prices).unwrap_or_default();
        Prices { entries: overrides.into_iter().chain(shipped).collect() }
    }

    /// The price for a provider's model: exact provider match first, then any provider, then the provider's `"*"`.
    pub fn find(&self, provider: &str, model: &str) -> Option<&Price> {
        let exact = |p: &&Price| p.provider.as_deref() == Some(provider) && p.model == model;
        let any = |p: &&Price| p.provider.is_none() && p.model == model;
        let wildcard = |p: &&Price| p.provider.as_deref() == Some(provider) && p.model == "*";
        self.entries
            .iter()
            .find(exact)
            .or_else(|| self.entries.iter().find(any))
            .or_else(|| self.entries.iter().find(wildcard))
    }

    /// The cost of `usage`, if the model has a price and the usage is known.
    pub fn cost(&self, provider: &str, model: &str, usage: &Usage) -> Option<f64> {
        if !usage.is_known() {
            return None;
        }
        let price = self.find(provider, model)?;
        // Input counts cache reads and writes: each part at its own price.
        let input = usage.input_tokens.unwrap_or(0) as f64;
        let cached = (usage.cached_tokens.unwrap_or(0) as f64).min(input);
        let written = (usage.cache_write_tokens.unwrap_or(0) as f64).min(input - cached);
        let output = usage.output_tokens.unwrap_or(0) as f64;
        let cached_price = price.cached.unwrap_or(price.input);
        let write_price = price.cache_write.unwrap_or(price.input);
        let fresh = input - cached - written;
        Some(
            (fresh * price.input + cached * cached_price + written * write_price + output * price.output) / 1_000_000.0,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(i: u64, o: u64, c: Option<u64>) -> Usage {
        Usage { input_tokens: Some(i), output_tokens: Some(o), cached_tokens: c, cache_write_tokens: None }
    }

    #[test]
    fn cost_arithmetic_with_cached_input() {
        let prices = Prices::with_overrides(vec![Price {
            provider: None,
            model: "m".into(),
            input: 2.0,
            output: 8.0,
            cached: Some(0.5),
            cache_write: None,
        }]);
        // 1M input of which 400k cached, 250k output:
        // 600k × $2 + 400k × $0.5 + 250k × $8 = 1.2 + 0.2 + 2.0
        let cost = prices.cost("any", "m", &usage(1_000_000, 250_000, Some(400_000))).unwrap();
        assert!((cost - 3.4).abs() < 1e-9, "{cost}");
        let cost = prices.cost("any", "m", &usage(1000, 0, None)).unwrap();
        assert!((cost - 0.002).abs() < 1e-12);
    }

    /// Anthropic bills a prompt-cache write above the input price: a
    /// request that writes its prefix costs more than one that neither
    /// reads nor writes it.
    #[test]
    fn cache_writes_cost_the_cache_write_price() {
        let prices = Prices::with_overrides(Vec::new());
        let price = prices.find("anthropic", "claude-sonnet-4-5").unwrap();
        assert_eq!((price.input, price.cache_write), (3.0, Some(3.75)), "1.25 times the input price");
        // 1M input: 100k fresh, 300k read, 600k written; 10k output:
        // 0.1 × $3 + 0.3 × $0.30 + 0.6 × $3.75 + 0.01 × $15
        let u = Usage {
            input_tokens: Some(1_000_000),
            output_tokens: Some(10_000),
            cached_tokens: Some(300_000),
            cache_write_tokens: Some(600_000),
        };
        let cost = prices.cost("anthropic", "claude-sonnet-4-5", &u).unwrap();
        assert!((cost - (0.3 + 0.09 + 2.25 + 0.15)).abs() < 1e-9, "{cost}");
        // Writes beyond the input the provider counted are not billed twice.
        let odd = Usage { input_tokens: Some(100), cache_write_tokens: Some(1_000), ..u };
        let cost = prices.cost("anthropic", "claude-sonnet-4-5", &odd).unwrap();
        assert!(cost <= (100.0 * 3.75 + 10_000.0 * 15.0) / 1e6 + 1e-12, "{cost}");
        // Without a write price, writes cost what input does.
        let plain =
            Price { provider: None, model: "m".into(), input: 2.0, output: 0.0, cached: None, cache_write: None };
        let u = Usage {
            input_tokens: Some(1_000_000),
            output_tokens: Some(0),
            cached_tokens: None,
            cache_write_tokens: Some(1_000_000),
        };
        assert_eq!(Prices::with_overrides(vec![plain]).cost("x", "m", &u), Some(2.0));
    }

    #[test]
    fn unknown_model_or_usage_has_no_cost() {
        let prices = Prices::with_overrides(Vec::new());
        assert_eq!(prices.cost("openai", "no-such-model", &usage(10, 10, None)), None);
        assert_eq!(prices.cost("openai", "gpt-4o-mini", &Usage::default()), None);
        assert!(prices.cost("openai", "gpt-4o-mini", &usage(10, 10, None)).is_some());
    }

    #[test]
    fn overrides_and_provider_specific_prices_win() {
        let prices = Prices::with_overrides(vec![Price {
            provider: Some("groq".into()),
            model: "gpt-4o-mini".into(),
            input: 0.0,
            output: 0.0,
            cached: None,
            cache_write: None,
        }]);
        assert_eq!(prices.cost("groq", "gpt-4o-mini", &usage(1000, 1000, None)), Some(0.0));
        assert!(prices.cost("openai", "gpt-4o-mini", &usage(1000, 1000, None)).unwrap() > 0.0);
        assert_eq!(prices.cost("ollama", "llama3.2", &usage(1000, 1000, None)), Some(0.0), "local models are free");
    }
}
