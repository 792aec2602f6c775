//! `[[budgets]]` and `[alerts]`: spend limits per scope and period, and how
//! often an alert about one thing may go out.

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::{ConfigError, ProviderConfig, Validator};
use crate::policy::budget::{Budget, BudgetAction, BudgetPeriod, BudgetScope};

/// A `[[budgets]]` entry as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBudget {
    name: Option<Spanned<String>>,
    scope: Spanned<String>,
    period: Spanned<String>,
    limit_usd: Spanned<f64>,
    action: Option<Spanned<String>>,
}

/// `[alerts]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAlerts {
    /// More fallbacks than this in a minute is a storm worth an alert.
    fallback_storm: Option<Spanned<i64>>,
    /// At most one alert per kind and subject this often.
    every: Option<Spanned<String>>,
}

impl Validator<'_> {
    pub(super) fn budgets(
        &self,
        raw: Vec<RawBudget>,
        providers: &[ProviderConfig],
    ) -> Result<Vec<Budget>, ConfigError> {
        let mut budgets: Vec<Budget> = Vec::with_capacity(raw.len());
        for (i, b) in raw.into_iter().enumerate() {
            // Names tell budgets apart in alerts and on the dashboard.
            let (span, field) = match &b.name {
                Some(n) => (n.span(), format!("budgets[{i}].name")),
                None => (b.scope.span(), format!("budgets[{i}].scope")),
            };
            let budget = self.budget(i, b, providers)?;
            if budgets.iter().any(|e| e.name == budget.name) {
                return self.error(span, field, format!("a budget named {:?} is defined twice", budget.name));
            }
            budgets.push(budget);
        }
        Ok(budgets)
    }

    fn budget(&self, i: usize, raw: RawBudget, providers: &[ProviderConfig]) -> Result<Budget, ConfigError> {
        let field = |f: &str| format!("budgets[{i}].{f}");
        let scope = match raw.scope.get_ref().split_once(':') {
            None if raw.scope.get_ref() == "all" => BudgetScope::All,
            Some(("provider", name)) => {
                if !providers.iter().any(|p| p.name == name) {
                    return self.error(raw.scope.span(), field("scope"), format!("no provider is named {name:?}"));
                }
                BudgetScope::Provider(name.to_string())
            }
            Some(("model", name)) if !name.is_empty() => BudgetScope::Model(name.to_string()),
            _ => {
                return self.error(
                    raw.scope.span(),
                    field("scope"),
                    format!("{:?} is not \"all\", \"provider:NAME\" or \"model:NAME\"", raw.scope.get_ref()),
                )
            }
        };
        let period = match raw.period.get_ref().as_str() {
            "day" => BudgetPeriod::Day,
            "week" => BudgetPeriod::Week,
            "month" => BudgetPeriod::Month,
            other => {
                return self.error(
                    raw.period.span(),
                    field("period"),
                    format!("{other:?} is not \"day\", \"week\" or \"month\""),
                )
            }
        };
        let limit_usd = *raw.limit_usd.get_ref();
        if !limit_usd.is_finite() || limit_usd <= 0.0 {
            return self.error(raw.limit_usd.span(), field("limit_usd"), "must be more than 0 (USD)");
        }
        let action = match raw.action.as_ref().map(|a| a.get_ref().as_str()) {
            None | Some("warn") => BudgetAction::Warn,
            Some("block") => BudgetAction::Block,
            Some(other) => {
                let span = raw.action.as_ref().map_or(0..0, Spanned::span);
                return self.error(span, field("action"), format!("{other:?} is not \"warn\" or \"block\""));
            }
        };
        let name = match raw.name {
            Some(n) if n.get_ref().trim().is_empty() => {
                return self.error(n.span(), field("name"), "must not be empty")
            }
            Some(n) => n.into_inner(),
            None => format!("{scope} per {}", period.as_str()),
        };
        Ok(Budget { name, scope, period, limit_usd, action })
    }

    pub(super) fn alerts(&self, raw: RawAlerts) -> Result<AlertPolicy, ConfigError> {
        let mut policy = AlertPolicy::default();
        if let Some(n) = raw.fallback_storm {
            match u32::try_from(*n.get_ref()) {
                Ok(n) if n >= 1 => policy.fallback_storm = n,
                _ => return self.error(n.span(), "alerts.fallback_storm", "must be a whole number of at least 1"),
            }
        }
        if let Some(every) = raw.every {
            match humantime::parse_duration(every.get_ref()) {
                Ok(d) if d >= Duration::from_secs(1) => policy.every = d,
                _ => {
                    return self.error(
                        every.span(),
                        "alerts.every",
                        format!("{:?} is not a duration of a second or more, such as \"10m\"", every.get_ref()),
                    )
                }
            }
        }
        Ok(policy)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::{Config, ConfigError};
    use crate::policy::budget::{BudgetAction, BudgetPeriod, BudgetScope};

    const PROVIDER: &str = "[[providers]]\nname = \"a\"\nkind = \"openai\"\nbase_url = \"http://x/v1\"\n";

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(&format!("{PROVIDER}{text}"), Path::new("test.toml"))
    }

    fn invalid(text: &str) -> (usize, String, String) {
        match parse(text) {
            Err(ConfigError::Invalid { line, field, message, .. }) => (line, field, message),
            other => panic!("expected an invalid config, got {other:?}"),
        }
    }

    #[test]
    fn budgets_parse_with_defaults_and_names() {
        let config = parse(
            "[[budgets]]\nscope = \"provider:a\"\nperiod = \"day\"\nlimit_usd = 20\naction = \"block\"\n\
             [[budgets]]\nname = \"gpt\"\nscope = \"model:gpt-4o\"\nperiod = \"month\"\nlimit_usd = 2.5\n\
             [[budgets]]\nscope = \"all\"\nperiod = \"week\"\nlimit_usd = 100.0\n",
        )
        .unwrap();
        let b = &config.budgets;
        assert_eq!(
            (b[0].name.as_str(), &b[0].scope, b[0].period, b[0].limit_usd, b[0].action),
            ("provider:a per day", &BudgetScope::Provider("a".into()), BudgetPeriod::Day, 20.0, BudgetAction::Block)
        );
        assert_eq!((b[1].name.as_str(), b[1].action), ("gpt", BudgetAction::Warn), "warn unless told");
        assert_eq!((&b[2].scope, b[2].period), (&BudgetScope::All, BudgetPeriod::Week));
        assert_eq!(config.alerts.fallback_storm, 20, "the default");
    }

    #[test]
    fn budget_errors_name_the_file_line_and_field() {
        let (line, field, message) =
            invalid("[[budgets]]\nscope = \"provider:nope\"\nperiod = \"day\"\nlimit_usd = 1\n");
        assert_eq!((line, field.as_str()), (6, "budgets[0].scope"));
        assert!(message.contains("\"nope\""), "{message}");
        let (line, field, _) = invalid("[[budgets]]\nscope = \"all\"\nperiod = \"fortnight\"\nlimit_usd = 1\n");
        assert_eq!((line, field.as_str()), (7, "budgets[0].period"));
        let (_, field, _) = invalid("[[budgets]]\nscope = \"team:x\"\nperiod = \"day\"\nlimit_usd = 1\n");
        assert_eq!(field, "budgets[0].scope");
        let (line, field, _) = invalid("[[budgets]]\nscope = \"all\"\nperiod = \"day\"\nlimit_usd = 0\n");
        assert_eq!((line, field.as_str()), (8, "budgets[0].limit_usd"));
        let (_, field, _) =
            invalid("[[budgets]]\nscope = \"all\"\nperiod = \"day\"\nlimit_usd = 1\naction = \"shout\"\n");
        assert_eq!(field, "budgets[0].action");
        let (_, field, _) = invalid("[[budgets]]\nscope = \"all\"\nperiod = \"day\"\n");
        assert_eq!(field, "limit_usd");
        let twice = "[[budgets]]\nscope = \"all\"\nperiod = \"day\"\nlimit_usd = 1\n";
        let (line, field, message) = invalid(&format!("{twice}{twice}"));
        assert_eq!((line, field.as_str()), (10, "budgets[1].scope"));
        assert!(message.contains("twice"), "{message}");
    }

    #[test]
    fn alerts_are_validated() {
        let config = parse("[alerts]\nfallback_storm = 5\nevery = \"30m\"\n").unwrap();
        assert_eq!((config.alerts.fallback_storm, config.alerts.every.as_secs()), (5, 1800));
        let (_, field, _) = invalid("[alerts]\nfallback_storm = 0\n");
        assert_eq!(field, "alerts.fallback_storm");
        let (_, field, _) = invalid("[alerts]\nevery = \"often\"\n");
        assert_eq!(field, "alerts.every");
    }
}

/// `[alerts]`.
#[derive(Debug, Clone, PartialEq)]
pub struct AlertPolicy {
    /// More fallbacks than this in a minute is a storm.
    pub fallback_storm: u32,
    /// At most one alert per kind and subject this often.
    pub every: std::time::Duration,
}

impl Default for AlertPolicy {
    fn default() -> AlertPolicy {
        AlertPolicy { fallback_storm: 20, every: std::time::Duration::from_secs(600) }
    }
}
