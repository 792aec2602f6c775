//! Edits to the config file from the dashboard. The file stays the user's:
//! edits go through `toml_edit`, so comments, order and untouched values
//! survive, and every result is validated as a whole before it is written.

use serde::Deserialize;
use toml_edit::{value, Array, ArrayOfTables, DocumentMut, InlineTable, Item, Table, Value};

/// A provider as the dashboard's form describes it.
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct ProviderForm {
    pub kind: String,
    pub base_url: String,
    /// Client-facing name → the provider's own name (the same when not an alias).
    #[serde(default)]
    pub models: Vec<ModelAlias>,
    /// `"key"` (the default) or `"none"`.
    #[serde(default)]
    pub auth: Option<String>,
}

#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct ModelAlias {
    pub client: String,
    pub upstream: String,
}

/// A route as the dashboard changes it; what is left out stays as it is.
#[derive(Debug, Clone, Default, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct RouteForm {
    #[serde(default)]
    pub chain: Option<Vec<String>>,
    /// `"ordered"`, `"latency"`, `"least_busy"`, `"cheapest"` or `"weighted"`.
    #[serde(default)]
    pub strategy: Option<String>,
    /// A weight per chain entry (a weighted route), in chain order.
    #[serde(default)]
    pub weights: Option<Vec<u32>>,
}

#[derive(Debug, thiserror::Error)]
pub enum EditError {
    #[error("the config file is not valid TOML: {0}")]
    Parse(#[from] toml_edit::TomlError),
    #[error("[{0}] is not a table in the config file")]
    NotATable(String),
    #[error("{table}.{key}: settings take a string, a number, a true/false or null")]
    BadValue { table: String, key: String },
    #[error("{0:?} cannot be edited from here (only [server], [policy] and [history])")]
    Section(String),
    #[error("the route for {0:?} is new: give it a chain")]
    NoChain(String),
    #[error("{weights} weights for a chain of {chain}: give one per provider")]
    Weights { weights: usize, chain: usize },
}

/// Tables whose plain values the settings form may change.
const SETTING_TABLES: [&str; 3] = ["server", "policy", "history"];

#[derive(Debug)]
pub struct ConfigEdit {
    doc: DocumentMut,
}

impl ConfigEdit {
    pub fn parse(text: &str) -> Result<ConfigEdit, EditError> {
        Ok(ConfigEdit { doc: text.parse()? })
    }

    fn array(&mut self, name: &str) -> Result<&mut ArrayOfTables, EditError> {
        let item = self.doc.entry(name).or_insert_with(|| Item::ArrayOfTables(ArrayOfTables::new()));
        item.as_array_of_tables_mut().ok_or_else(|| EditError::NotATable(name.to_string()))
    }

    /// Index of the `[[name]]` entry whose `key` is `wanted`.
    fn position(&mut self, name: &str, key: &str, wanted: &str) -> Result<Option<usize>, EditError> {
        Ok(self.array(name)?.iter().position(|t| t.get(key).and_then(Item::as_str) == Some(wanted)))
    }

    /// Adds the provider, or changes an existing one's kind, URL, models
    /// and auth (its policy and other settings stay).
    pub fn upsert_provider(&mut self, name: &str, form: &ProviderForm) -> Result<(), EditError> {
        let at = self.position("providers", "name", name)?;
        let providers = self.array("providers")?;
        let table = match at.and_then(|i| providers.get_mut(i)) {
            Some(t) => t,
            None => {
                let mut t = Table::new();
                t.insert("name", value(name));
                providers.push(t);
                let last = providers.len() - 1;
                providers.get_mut(last).ok_or_else(|| EditError::NotATable("providers".into()))?
            }
        };
        table.insert("kind", value(form.kind.trim()));
        table.insert("base_url", value(form.base_url.trim()));
        table.insert("models", value(models_value(&form.models)));
        match form.auth.as_deref().map(str::trim) {
            Some("none") => {
                table.insert("auth", value("none"));
            }
            _ => {
                table.remove("auth");
            }
        }
        Ok(())
    }

    /// Removes the provider; `false` when there was none.
    pub fn remove_provider(&mut self, name: &str) -> Result<bool, EditError> {
        let at = self.position("providers", "name", name)?;
        Ok(at.map(|i| self.array("providers").map(|a| a.remove(i))).transpose()?.is_some())
    }

    /// Sets `model`'s route as `form` says, adding one when there is
    /// none. A chain given with weights is written as `{ provider, weight }`
    /// entries; given alone, as names. Whether the result is valid (a
    /// strategy that exists, weights on a weighted route) is the config
    /// validation's to say.
    pub fn set_route(&mut self, model: &str, form: &RouteForm) -> Result<(), EditError> {
        let at = self.position("routes", "model", model)?;
        let routes = self.array("routes")?;
        let table = match at.and_then(|i| routes.get_mut(i)) {
            Some(t) => t,
            None => {
                if form.chain.is_none() {
                    return Err(EditError::NoChain(model.to_string()));
                }
                let mut t = Table::new();
                t.insert("model", value(model));
                routes.push(t);
                let last = routes.len() - 1;
                routes.get_mut(last).ok_or_else(|| EditError::NotATable("routes".into()))?
            }
        };
        let unweighted = form.strategy.as_deref().is_some_and(|s| s.trim() != "weighted") && form.weights.is_none();
        let chain = match chain_value(table, form)? {
            Some(chain) => Some(chain),
            // Weights are only for a weighted route: they go with the strategy.
            None if unweighted => Some(names(table).iter().map(String::as_str).collect()),
            None => None,
        };
        if let Some(chain) = chain {
            table.insert("chain", value(chain));
        }
        if let Some(strategy) = &form.strategy {
            table.insert("strategy", value(strategy.trim()));
        }
        Ok(())
    }

    pub fn remove_route(&mut self, model: &str) -> Result<bool, EditError> {
        let at = self.position("routes", "model", model)?;
        Ok(at.map(|i| self.array("routes").map(|a| a.remove(i))).transpose()?.is_some())
    }

    /// Sets `[table] key = value`; `null` removes the key (back to its default).
    pub fn set(&mut self, table: &str, key: &str, json: &serde_json::Value) -> Result<(), EditError> {
        if !SETTING_TABLES.contains(&table) {
            return Err(EditError::Section(table.to_string()));
        }
        let bad = || EditError::BadValue { table: table.to_string(), key: key.to_string() };
        let new = match json {
            serde_json::Value::Null => None,
            serde_json::Value::Bool(b) => Some(Value::from(*b)),
            serde_json::Value::String(s) => Some(Value::from(s.trim())),
            serde_json::Value::Number(n) => match (n.as_i64(), n.as_f64()) {
                (Some(i), _) => Some(Value::from(i)),
                (None, Some(f)) => Some(Value::from(f)),
                _ => return Err(bad()),
            },
            _ => return Err(bad()),
        };
        let section = self.doc.entry(table).or_insert_with(|| Item::Table(Table::new()));
        let section = section.as_table_mut().ok_or_else(|| EditError::NotATable(table.to_string()))?;
        match new {
            Some(v) => {
                section.insert(key, Item::Value(v));
            }
            None => {
                section.remove(key);
            }
        }
        Ok(())
    }
}

impl std::fmt::Display for ConfigEdit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.doc.fmt(f)
    }
}

/// The chain `form` gives, with its weights; `None` when it changes
/// neither. Weights alone weigh the chain the file has.
fn chain_value(table: &Table, form: &RouteForm) -> Result<Option<Array>, EditError> {
    let names: Vec<String> = match (&form.chain, &form.weights) {
        (Some(chain), _) => chain.iter().map(|c| c.trim().to_string()).collect(),
        (None, None) => return Ok(None),
        (None, Some(_)) => names(table),
    };
    let Some(weights) = &form.weights else { return Ok(Some(names.iter().map(String::as_str).collect())) };
    if weights.len() != names.len() {
        return Err(EditError::Weights { weights: weights.len(), chain: names.len() });
    }
    let mut chain = Array::new();
    for (name, weight) in names.iter().zip(weights) {
        let mut entry = InlineTable::new();
        entry.insert("provider", Value::from(name.as_str()));
        entry.insert("weight", Value::from(i64::from(*weight)));
        chain.push(Value::InlineTable(entry));
    }
    Ok(Some(chain))
}

/// The providers of the chain the file has.
fn names(table: &Table) -> Vec<String> {
    table.get("chain").and_then(Item::as_array).map(|a| a.iter().filter_map(entry_name).collect()).unwrap_or_default()
}

/// The provider a chain entry names: a string, or `{ provider = ... }`.
fn entry_name(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.value().clone()),
        Value::InlineTable(t) => t.get("provider").and_then(Value::as_str).map(str::to_string),
        _ => None,
    }
}

/// A plain list when no model is renamed, else a `{ client = "upstream" }` map.
fn models_value(models: &[ModelAlias]) -> Value {
    let renamed = models.iter().any(|m| m.client.trim() != m.upstream.trim() && !m.upstream.trim().is_empty());
    if renamed {
        let mut map = InlineTable::new();
        for m in models {
            let upstream = if m.upstream.trim().is_empty() { m.client.trim() } else { m.upstream.trim() };
            map.insert(m.client.trim(), Value::from(upstream));
        }
        Value::InlineTable(map)
    } else {
        Value::Array(models.iter().map(|m| m.client.trim()).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use std::path::Path;

    const TEXT: &str = r#"# my gateway
[server]
listen = "127.0.0.1:4141" # keep this port

[[providers]]
name = "a"
kind = "openai"
base_url = "http://127.0.0.1:9/v1"
models = ["m"]
[providers.policy]
max_concurrency = 4
"#;

    fn form(models: &[(&str, &str)]) -> ProviderForm {
        ProviderForm {
            kind: "anthropic".into(),
            base_url: "http://127.0.0.1:10/v1".into(),
            models: models.iter().map(|(c, u)| ModelAlias { client: (*c).into(), upstream: (*u).into() }).collect(),
            auth: Some("none".into()),
        }
    }

    #[test]
    fn editing_a_provider_keeps_comments_and_its_policy() {
        let mut e = ConfigEdit::parse(TEXT).unwrap();
        e.upsert_provider("a", &form(&[("m", "m"), ("n", "n")])).unwrap();
        let text = e.to_string();
        assert!(text.contains("# my gateway") && text.contains("# keep this port"), "{text}");
        let config = Config::parse(&text, Path::new("t.toml")).unwrap();
        let a = config.provider("a").unwrap();
        assert_eq!(a.kind.to_string(), "anthropic");
        assert_eq!(a.policy.max_concurrency, Some(4));
        assert_eq!(a.models.client_names().collect::<Vec<_>>(), ["m", "n"]);
        assert_eq!(a.auth, crate::config::Auth::None);
    }

    #[test]
    fn aliases_become_a_map_and_new_providers_are_appended() {
        let mut e = ConfigEdit::parse(TEXT).unwrap();
        e.upsert_provider("b", &form(&[("fast", "claude-haiku-4-5")])).unwrap();
        let config = Config::parse(&e.to_string(), Path::new("t.toml")).unwrap();
        let b = config.provider("b").unwrap();
        assert_eq!(b.models.explicit("fast"), Some("claude-haiku-4-5"));
        assert_eq!(config.providers.len(), 2);
        assert!(e.remove_provider("b").unwrap());
        assert!(!e.remove_provider("b").unwrap());
    }

    #[test]
    fn routes_are_set_replaced_and_removed() {
        let mut e = ConfigEdit::parse(TEXT).unwrap();
        e.upsert_provider("b", &form(&[("m", "m")])).unwrap();
        e.set_route("m", &chain(&["a", "b"])).unwrap();
        e.set_route("m", &chain(&["b", "a"])).unwrap();
        let config = Config::parse(&e.to_string(), Path::new("t.toml")).unwrap();
        assert_eq!(config.routes.len(), 1);
        assert_eq!(config.routes[0].chain, ["b", "a"]);
        assert!(e.remove_route("m").unwrap());
        assert!(Config::parse(&e.to_string(), Path::new("t.toml")).unwrap().routes.is_empty());
    }

    fn chain(names: &[&str]) -> RouteForm {
        RouteForm { chain: Some(names.iter().map(|n| n.to_string()).collect()), ..RouteForm::default() }
    }

    #[test]
    fn a_route_takes_a_strategy_and_weights_and_keeps_what_is_left_out() {
        use crate::policy::order::Strategy;
        let mut e = ConfigEdit::parse(TEXT).unwrap();
        e.upsert_provider("b", &form(&[("m", "m")])).unwrap();
        assert!(matches!(e.set_route("m", &RouteForm::default()), Err(EditError::NoChain(_))));
        e.set_route("m", &chain(&["a", "b"])).unwrap();
        let strategy = |s: &str| RouteForm { strategy: Some(s.into()), ..RouteForm::default() };
        e.set_route("m", &strategy("latency")).unwrap();
        let config = Config::parse(&e.to_string(), Path::new("t.toml")).unwrap();
        assert_eq!(
            (config.routes[0].policy.strategy, &config.routes[0].chain[..]),
            (Strategy::Latency, &["a".to_string(), "b".to_string()][..])
        );
        let weights = RouteForm { weights: Some(vec![9, 1]), ..strategy("weighted") };
        e.set_route("m", &weights).unwrap();
        let config = Config::parse(&e.to_string(), Path::new("t.toml")).unwrap();
        let route = &config.routes[0];
        assert_eq!(route.policy.strategy, Strategy::Weighted);
        assert_eq!(route.schedule.as_ref().map(|s| s.weights().to_vec()), Some(vec![9, 1]));
        let short = RouteForm { weights: Some(vec![1]), ..RouteForm::default() };
        assert!(matches!(e.set_route("m", &short), Err(EditError::Weights { weights: 1, chain: 2 })));
        e.set_route("m", &strategy("least_busy")).unwrap();
        let config = Config::parse(&e.to_string(), Path::new("t.toml")).unwrap();
        assert_eq!(
            (config.routes[0].policy.strategy, config.routes[0].schedule.is_none()),
            (Strategy::LeastBusy, true),
            "the weights go with the strategy"
        );
        e.set_route("m", &strategy("fastest")).unwrap();
        let refused = Config::parse(&e.to_string(), Path::new("t.toml")).unwrap_err().to_string();
        assert!(refused.contains("routes[0].strategy"), "{refused}");
    }

    #[test]
    fn settings_set_and_reset_values_in_known_tables_only() {
        let mut e = ConfigEdit::parse(TEXT).unwrap();
        e.set("policy", "deadline", &serde_json::json!("45s")).unwrap();
        e.set("policy", "max_retries", &serde_json::json!(3)).unwrap();
        e.set("history", "store_bodies", &serde_json::json!(true)).unwrap();
        let config = Config::parse(&e.to_string(), Path::new("t.toml")).unwrap();
        assert_eq!(config.policy.deadline, std::time::Duration::from_secs(45));
        assert_eq!(config.policy.max_retries, 3);
        assert!(config.history.store_bodies);
        e.set("policy", "max_retries", &serde_json::Value::Null).unwrap();
        let config = Config::parse(&e.to_string(), Path::new("t.toml")).unwrap();
        assert_eq!(config.policy.max_retries, crate::policy::RequestPolicy::default().max_retries);
        assert!(matches!(e.set("providers", "x", &serde_json::json!(1)), Err(EditError::Section(_))));
        assert!(matches!(e.set("policy", "x", &serde_json::json!([1])), Err(EditError::BadValue { .. })));
    }
}
