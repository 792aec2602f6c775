//! `[history] url`: the PostgreSQL database that holds the record instead
//! of the SQLite file in the data directory (also `SWITCHYARD_HISTORY_URL`).
//!
//! The URL may carry a password (in its user part or as `?password=`), so
//! it is held as a secret: its `Debug` and [`HistoryUrl::redacted`] show
//! `***` in the password's place, and no error quotes the value. TLS is
//! the URL's `sslmode` (`disable` … `verify-full`), with certificates by
//! path (`sslrootcert`, `sslcert`, `sslkey`), as libpq reads them.

use secrecy::{ExposeSecret, SecretString};
use url::Url;

/// The `sslmode` values PostgreSQL clients know.
const SSL_MODES: [&str; 6] = ["disable", "allow", "prefer", "require", "verify-ca", "verify-full"];

/// A PostgreSQL URL, checked, that prints only redacted.
#[derive(Clone)]
pub struct HistoryUrl(SecretString);

impl HistoryUrl {
    /// Checks `url`; the error says what is wrong without quoting it.
    pub fn parse(url: &str) -> Result<HistoryUrl, String> {
        let parsed = Url::parse(url).map_err(|e| format!("is not a URL ({e})"))?;
        match parsed.scheme() {
            "postgres" | "postgresql" => {}
            other => return Err(format!("must be a postgres:// URL, not {other}://")),
        }
        if parsed.host_str().is_none_or(str::is_empty) && !parsed.query_pairs().any(|(k, _)| k == "host") {
            return Err("names no host (postgres://user@host:5432/database)".into());
        }
        if let Some((_, mode)) = parsed.query_pairs().find(|(k, _)| k == "sslmode") {
            if !SSL_MODES.contains(&mode.as_ref()) {
                return Err(format!("sslmode {mode:?} is not one of {}", SSL_MODES.join(", ")));
            }
        }
        Ok(HistoryUrl(SecretString::from(url.to_owned())))
    }

    /// The URL with its password, for the driver only.
    pub fn expose(&self) -> &str {
        self.0.expose_secret()
    }

    /// The URL as it may be shown: any password replaced by `***`.
    pub fn redacted(&self) -> String {
        redact(self.expose())
    }
}

/// `url` with the password in its user part and any `password` query
/// parameter replaced by `***`; something that is not a URL shows as none.
pub fn redact(url: &str) -> String {
    let Ok(mut u) = Url::parse(url) else { return "(not a URL)".into() };
    if u.password().is_some() {
        let _ = u.set_password(Some("***"));
    }
    if u.query_pairs().any(|(k, _)| k == "password") {
        let pairs: Vec<(String, String)> = u
            .query_pairs()
            .map(|(k, v)| {
                let v = if k == "password" { "***".to_string() } else { v.into_owned() };
                (k.into_owned(), v)
            })
            .collect();
        u.query_pairs_mut().clear().extend_pairs(pairs);
    }
    u.to_string()
}

impl std::fmt::Debug for HistoryUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("HistoryUrl").field(&self.redacted()).finish()
    }
}

impl PartialEq for HistoryUrl {
    fn eq(&self, other: &HistoryUrl) -> bool {
        self.expose() == other.expose()
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::{Config, ConfigError};

    fn url(text: &str) -> Result<Option<String>, String> {
        match Config::parse(text, Path::new("test.toml")) {
            Ok(c) => Ok(c.history.url.map(|u| u.expose().to_owned())),
            Err(ConfigError::Invalid { line, field, message, .. }) => Err(format!("{line}: {field}: {message}")),
            Err(e) => Err(e.to_string()),
        }
    }

    #[test]
    fn a_postgres_url_is_taken_and_others_are_refused_without_quoting_them() {
        assert_eq!(url("").unwrap(), None, "no url: SQLite in the data directory");
        let good = "postgres://sy:hunter2@db.internal:5432/history?sslmode=verify-full&sslrootcert=/etc/ca.pem";
        assert_eq!(url(&format!("[history]\nurl = {good:?}\n")).unwrap().as_deref(), Some(good));
        for (bad, why) in [
            ("mysql://sy:hunter2@db/history", "history.url: must be a postgres:// URL, not mysql://"),
            ("postgres://sy:hunter2@db/h?sslmode=always", "history.url: sslmode \"always\" is not one of"),
            ("not a url hunter2", "history.url: is not a URL"),
            ("postgres:///history?password=hunter2", "history.url: names no host"),
        ] {
            let error = url(&format!("[history]\nurl = {bad:?}\n")).unwrap_err();
            assert!(error.starts_with(&format!("2: {why}")), "{bad}: {error}");
            assert!(!error.contains("hunter2"), "the password leaked: {error}");
        }
    }

    #[test]
    fn the_password_never_shows() {
        let u = HistoryUrl::parse("postgres://sy:hunter2@db:5432/history?sslmode=require").unwrap();
        assert_eq!(u.redacted(), "postgres://sy:***@db:5432/history?sslmode=require");
        assert!(!format!("{u:?}").contains("hunter2"), "{u:?}");
        let q = HistoryUrl::parse("postgresql://db/history?user=sy&password=hunter2").unwrap();
        assert_eq!(q.redacted(), "postgresql://db/history?user=sy&password=***");
        assert_eq!(HistoryUrl::parse("postgres://sy@db/h").unwrap().redacted(), "postgres://sy@db/h");
    }

    #[test]
    fn the_environment_overrides_the_file_and_names_itself_when_wrong() {
        let mut config = Config::parse("[history]\nurl = \"postgres://a@one/h\"\n", Path::new("t.toml")).unwrap();
        config.override_history_url("postgres://b:pw@two/h", "SWITCHYARD_HISTORY_URL").unwrap();
        assert_eq!(config.history.url.as_ref().map(HistoryUrl::expose), Some("postgres://b:pw@two/h"));
        let error = config.override_history_url("http://b:pw@two/h", "SWITCHYARD_HISTORY_URL").unwrap_err();
        assert_eq!(error.to_string(), "SWITCHYARD_HISTORY_URL: history.url: must be a postgres:// URL, not http://");
    }
}
