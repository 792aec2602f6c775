//! Provider keys in the OS keychain, through the `keyring` crate: the macOS
//! Keychain, the Windows Credential Manager, or the Secret Service
//! (gnome-keyring, KWallet) on Linux.
//!
//! Entries use the service `switchyard` and the account `<provider>` (the
//! `default` key) or `<provider>/<label>`. The keychain cannot list entries
//! portably, so each provider also has an index entry, `#labels:<provider>`,
//! holding its labels (never a key).

use keyring::{Entry, Error};
use secrecy::{ExposeSecret, SecretString};
use switchyard_core::secrets::{ProviderKey, SecretError, SecretStore, DEFAULT_LABEL};

/// The keychain service Switchyard's entries live under.
pub const SERVICE: &str = "switchyard";
const INDEX_PREFIX: &str = "#labels:";

#[derive(Debug, Clone)]
pub struct KeychainStore {
    service: String,
}

impl Default for KeychainStore {
    fn default() -> KeychainStore {
        KeychainStore::new(SERVICE)
    }
}

/// Turns a keyring error into words that say what to do.
fn explain(error: &Error) -> SecretError {
    let reason = match error {
        Error::NoDefaultStore | Error::PlatformFailure(_) => format!(
            "{error}: no keychain service is reachable (on Linux, a Secret Service such as gnome-keyring on the session D-Bus); \
             keys can also come from SWITCHYARD_KEY_<PROVIDER>"
        ),
        Error::NoStorageAccess(_) => format!("{error}: the keychain is locked; unlock your login keyring and try again"),
        _ => error.to_string(),
    };
    SecretError::Unavailable { store: "keychain", reason }
}

impl KeychainStore {
    /// A store under another service name (tests use their own).
    pub fn new(service: impl Into<String>) -> KeychainStore {
        KeychainStore { service: service.into() }
    }

    pub fn account(provider: &str, label: &str) -> String {
        if label == DEFAULT_LABEL {
            provider.to_string()
        } else {
            format!("{provider}/{label}")
        }
    }

    fn entry(&self, account: &str) -> Result<Entry, SecretError> {
        Entry::new(&self.service, account).map_err(|e| explain(&e))
    }

    fn read(&self, account: &str) -> Result<Option<String>, SecretError> {
        match self.entry(account)?.get_password() {
            Ok(v) => Ok(Some(v)),
            Err(Error::NoEntry) => Ok(None),
            Err(e) => Err(explain(&e)),
        }
    }

    /// The labels of `provider`'s keys.
    pub fn labels(&self, provider: &str) -> Result<Vec<String>, SecretError> {
        match self.read(&format!("{INDEX_PREFIX}{provider}"))? {
            Some(json) => Ok(serde_json::from_str(&json).unwrap_or_default()),
            // No index yet: a key stored by hand under the bare account still counts.
            None => Ok(self.read(provider)?.map(|_| vec![DEFAULT_LABEL.to_string()]).unwrap_or_default()),
        }
    }

    fn write_labels(&self, provider: &str, labels: &[String]) -> Result<(), SecretError> {
        let entry = self.entry(&format!("{INDEX_PREFIX}{provider}"))?;
        if labels.is_empty() {
            return match entry.delete_credential() {
                Ok(()) | Err(Error::NoEntry) => Ok(()),
                Err(e) => Err(explain(&e)),
            };
        }
        let json = serde_json::to_string(labels).unwrap_or_else(|_| "[]".into());
        entry.set_password(&json).map_err(|e| explain(&e))
    }

    /// Whether the keychain can be reached at all.
    pub fn status(&self) -> Result<(), SecretError> {
        Entry::store_status().as_ref().map_err(explain)?;
        self.read(&format!("{INDEX_PREFIX}#probe")).map(|_| ())
    }
}

fn valid_label(label: &str) -> Result<(), SecretError> {
    let ok =
        !label.is_empty() && label.len() <= 64 && label.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if ok {
        Ok(())
    } else {
        Err(SecretError::Unavailable {
            store: "keychain",
            reason: format!("label {label:?}: use letters, digits, '-', '_' and '.'"),
        })
    }
}

impl SecretStore for KeychainStore {
    fn name(&self) -> &'static str {
        "keychain"
    }

    fn keys(&self, provider: &str) -> Result<Vec<ProviderKey>, SecretError> {
        let mut keys = Vec::new();
        for label in self.labels(provider)? {
            if let Some(secret) = self.read(&Self::account(provider, &label))? {
                keys.push(ProviderKey { label, secret: SecretString::from(secret) });
            }
        }
        Ok(keys)
    }

    fn set(&self, provider: &str, label: &str, secret: &SecretString) -> Result<(), SecretError> {
        valid_label(label)?;
        self.entry(&Self::account(provider, label))?.set_password(secret.expose_secret()).map_err(|e| explain(&e))?;
        let mut labels = self.labels(provider)?;
        if !labels.iter().any(|l| l == label) {
            labels.push(label.to_string());
            self.write_labels(provider, &labels)?;
        }
        Ok(())
    }

    fn remove(&self, provider: &str, label: &str) -> Result<bool, SecretError> {
        let removed = match self.entry(&Self::account(provider, label))?.delete_credential() {
            Ok(()) => true,
            Err(Error::NoEntry) => false,
            Err(e) => return Err(explain(&e)),
        };
        let mut labels = self.labels(provider)?;
        let before = labels.len();
        labels.retain(|l| l != label);
        if labels.len() != before {
            self.write_labels(provider, &labels)?;
        }
        Ok(removed)
    }
}
