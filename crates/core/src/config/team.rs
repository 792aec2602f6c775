//! The `[team]` table: several gateways acting as one through Redis.
//!
//! Without it nothing is shared and no Redis is contacted. The URL may hold
//! a password, so it is kept as a secret and shown only redacted.

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use toml::Spanned;
use url::Url;

use super::{ConfigError, Validator};

/// The key prefix when none is set.
pub const DEFAULT_NAMESPACE: &str = "switchyard";

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTeam {
    redis: Option<Spanned<String>>,
    namespace: Option<Spanned<String>>,
    instance: Option<Spanned<String>>,
    lease_ttl: Option<Spanned<String>>,
}

/// How this gateway joins its team.
#[derive(Debug, Clone)]
pub struct TeamConfig {
    /// `redis://` or `rediss://`, possibly with a password.
    pub redis: SecretString,
    /// Prefix of every key and channel, so teams can share one Redis.
    pub namespace: String,
    /// This instance's name; `None`: the host name and listening port.
    pub instance: Option<String>,
    /// How long a team-wide concurrency lease lives unless renewed: how
    /// soon the places an instance held are free after it dies.
    pub lease_ttl: std::time::Duration,
}

/// A lease's life when `lease_ttl` is not set.
pub const DEFAULT_LEASE_TTL: std::time::Duration = std::time::Duration::from_secs(10);

impl PartialEq for TeamConfig {
    fn eq(&self, other: &TeamConfig) -> bool {
        self.redis.expose_secret() == other.redis.expose_secret()
            && self.namespace == other.namespace
            && self.instance == other.instance
            && self.lease_ttl == other.lease_ttl
    }
}

impl TeamConfig {
    /// A team on `url` with the default namespace.
    pub fn on(url: &str) -> Result<TeamConfig, String> {
        check_url(url)?;
        Ok(TeamConfig {
            redis: SecretString::from(url.to_owned()),
            namespace: DEFAULT_NAMESPACE.into(),
            instance: None,
            lease_ttl: DEFAULT_LEASE_TTL,
        })
    }

    /// The Redis URL with any password replaced, for logs and `/admin`.
    pub fn redis_redacted(&self) -> String {
        redact(self.redis.expose_secret())
    }
}

/// A Redis URL as it may be shown: the password (and a user name beside
/// it) replaced by `***`.
pub fn redact(url: &str) -> String {
    match Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        Ok(u) => u.to_string(),
        Err(_) => "(not a URL)".into(),
    }
}

/// Why a Redis URL is refused, or nothing.
fn check_url(url: &str) -> Result<(), String> {
    let parsed = Url::parse(url).map_err(|e| format!("is not a URL: {e}"))?;
    match parsed.scheme() {
        "redis" | "rediss" if parsed.host_str().is_some_and(|h| !h.is_empty()) => Ok(()),
        "redis" | "rediss" => Err("names no host".into()),
        other => Err(format!("must be a redis:// or rediss:// URL, not {other}://")),
    }
}

impl Validator<'_> {
    pub(super) fn team(&self, raw: Option<Spanned<RawTeam>>) -> Result<Option<TeamConfig>, ConfigError> {
        let Some(raw) = raw else { return Ok(None) };
        let span = raw.span();
        let raw = raw.into_inner();
        let Some(redis) = raw.redis else {
            return self.error(span, "team.redis", "is required in [team] (a redis:// or rediss:// URL)");
        };
        if let Err(why) = check_url(redis.get_ref()) {
            // The URL itself may hold a password: the message names the field, not the value.
            return self.error(redis.span(), "team.redis", why);
        }
        let namespace = match raw.namespace {
            None => DEFAULT_NAMESPACE.to_owned(),
            Some(n) if valid_name(n.get_ref()) => n.into_inner(),
            Some(n) => return self.error(n.span(), "team.namespace", "must be 1–64 letters, digits, `-`, `_` or `.`"),
        };
        let instance = match raw.instance {
            None => None,
            Some(n) if valid_name(n.get_ref()) => Some(n.into_inner()),
            Some(n) => return self.error(n.span(), "team.instance", "must be 1–64 letters, digits, `-`, `_` or `.`"),
        };
        let lease_ttl = match raw.lease_ttl {
            None => DEFAULT_LEASE_TTL,
            Some(t) => match humantime::parse_duration(t.get_ref()) {
                Ok(d) if d >= std::time::Duration::from_millis(300) && d <= std::time::Duration::from_secs(3600) => d,
                _ => {
                    return self.error(
                        t.span(),
                        "team.lease_ttl",
                        "must be a duration from 300ms to 1h, such as \"10s\"",
                    )
                }
            },
        };
        Ok(Some(TeamConfig { redis: SecretString::from(redis.into_inner()), namespace, instance, lease_ttl }))
    }
}

fn valid_name(s: &str) -> bool {
    (1..=64).contains(&s.len()) && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use secrecy::ExposeSecret;

    use crate::config::{Config, ConfigError};

    fn team(text: &str) -> Result<Option<(String, String, Option<String>)>, String> {
        match Config::parse(text, Path::new("test.toml")) {
            Ok(c) => Ok(c.team.map(|t| (t.redis.expose_secret().to_owned(), t.namespace, t.instance))),
            Err(ConfigError::Invalid { line, field, message, .. }) => Err(format!("{line}: {field}: {message}")),
            Err(e) => Err(e.to_string()),
        }
    }

    #[test]
    fn no_team_table_means_no_team() {
        assert_eq!(team(""), Ok(None));
    }

    #[test]
    fn a_team_needs_a_redis_url_and_takes_a_namespace_and_a_name() {
        let t = team("[team]\nredis = \"redis://127.0.0.1:6379/0\"\n").unwrap().unwrap();
        assert_eq!(t, ("redis://127.0.0.1:6379/0".into(), "switchyard".into(), None));
        let t =
            team("[team]\nredis = \"rediss://h:6380\"\nnamespace = \"acme\"\ninstance = \"gw-1\"\n").unwrap().unwrap();
        assert_eq!((t.1.as_str(), t.2.as_deref()), ("acme", Some("gw-1")));
        assert_eq!(
            team("[team]\nnamespace = \"x\"\n"),
            Err("1: team.redis: is required in [team] (a redis:// or rediss:// URL)".into())
        );
        let e = team("[team]\nredis = \"http://user:hunter2@h\"\n").unwrap_err();
        assert!(e.starts_with("2: team.redis: must be a redis://"), "{e}");
        assert!(!e.contains("hunter2"), "the password is never repeated: {e}");
        assert!(team("[team]\nredis = \"redis://h\"\nnamespace = \"a b\"\n").unwrap_err().contains("team.namespace"));
    }

    #[test]
    fn a_password_is_shown_redacted() {
        assert_eq!(super::redact("redis://:hunter2@10.0.0.1:6379/0"), "redis://:***@10.0.0.1:6379/0");
        assert_eq!(super::redact("rediss://app:hunter2@h/1"), "rediss://app:***@h/1");
        assert_eq!(super::redact("redis://h:6379"), "redis://h:6379");
    }
}
