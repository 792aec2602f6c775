//! The `[desktop]` table: settings of the desktop app, kept in the gateway's
//! file so a user edits one file. The gateway reads none of them; the CLI
//! accepts the table so one file serves both.

use serde::Deserialize;
use toml::Spanned;
use url::Url;

use super::{ConfigError, Validator};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDesktop {
    update_endpoint: Option<Spanned<String>>,
}

/// What the desktop app does beyond the gateway.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DesktopConfig {
    /// Where the app looks for updates: a Tauri updater manifest
    /// (`latest.json`). `None`, the default, means the app never checks:
    /// there is no release channel until one is configured.
    pub update_endpoint: Option<Url>,
}

impl Validator<'_> {
    pub(super) fn desktop(&self, raw: RawDesktop) -> Result<DesktopConfig, ConfigError> {
        let Some(endpoint) = raw.update_endpoint else { return Ok(DesktopConfig::default()) };
        let field = "desktop.update_endpoint";
        let url = match Url::parse(endpoint.get_ref()) {
            Ok(url) => url,
            Err(e) => return self.error(endpoint.span(), field, format!("{:?} is not a URL: {e}", endpoint.get_ref())),
        };
        // The manifest is not signed, only the artifacts are: TLS is what keeps
        // a network attacker from announcing a version. Plain HTTP only on this
        // machine (a local mirror, the tests); release builds of the updater
        // refuse it even there.
        if url.scheme() != "https" && !(url.scheme() == "http" && super::is_local(&url)) {
            return self.error(endpoint.span(), field, "must be an https:// URL (http:// only to this machine)");
        }
        Ok(DesktopConfig { update_endpoint: Some(url) })
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::{Config, ConfigError};

    fn endpoint(text: &str) -> Result<Option<String>, String> {
        match Config::parse(text, Path::new("test.toml")) {
            Ok(config) => Ok(config.desktop.update_endpoint.map(|u| u.to_string())),
            Err(ConfigError::Invalid { line, field, message, .. }) => Err(format!("{line}: {field}: {message}")),
            Err(e) => Err(e.to_string()),
        }
    }

    #[test]
    fn no_endpoint_by_default() {
        assert_eq!(endpoint(""), Ok(None));
        assert_eq!(endpoint("[desktop]\n"), Ok(None));
        assert_eq!(Config::embedded_default().unwrap().desktop.update_endpoint, None);
    }

    #[test]
    fn an_https_endpoint_with_the_updaters_placeholders() {
        let url = "https://releases.example.com/switchyard/{{target}}/{{arch}}/latest.json";
        let parsed = endpoint(&format!("[desktop]\nupdate_endpoint = \"{url}\"\n")).unwrap().unwrap();
        assert!(parsed.starts_with("https://releases.example.com/switchyard/"), "{parsed}");
        assert_eq!(
            endpoint("[desktop]\nupdate_endpoint = \"http://127.0.0.1:8080/latest.json\"\n").map(|u| u.is_some()),
            Ok(true)
        );
    }

    #[test]
    fn plain_http_elsewhere_and_non_urls_are_refused_with_the_line() {
        let err = endpoint("[server]\n\n[desktop]\nupdate_endpoint = \"http://releases.example.com/latest.json\"\n")
            .unwrap_err();
        assert!(err.starts_with("4: desktop.update_endpoint: must be an https:// URL"), "{err}");
        let err = endpoint("[desktop]\nupdate_endpoint = \"releases\"\n").unwrap_err();
        assert!(err.starts_with("2: desktop.update_endpoint: \"releases\" is not a URL"), "{err}");
        let err = endpoint("[desktop]\nupdate_url = \"https://x\"\n").unwrap_err();
        assert!(err.contains("update_url"), "{err}");
    }
}
