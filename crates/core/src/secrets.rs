//! Where provider keys come from. The core only knows the [`SecretStore`]
//! trait; the caller decides which stores exist and in what order.

use std::collections::HashMap;
use std::fmt;
use std::sync::RwLock;

use secrecy::{ExposeSecret, SecretString};

/// One key for a provider, with a label that is safe to show.
#[derive(Clone)]
pub struct ProviderKey {
    pub label: String,
    pub secret: SecretString,
}

impl fmt::Debug for ProviderKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProviderKey").field("label", &self.label).finish_non_exhaustive()
    }
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum SecretError {
    #[error("{store} unavailable: {reason}")]
    Unavailable { store: &'static str, reason: String },
    #[error("{store} is read-only: {hint}")]
    ReadOnly { store: &'static str, hint: &'static str },
}

/// The label of a provider's key when none is given.
pub const DEFAULT_LABEL: &str = "default";

/// A source of provider keys.
pub trait SecretStore: Send + Sync + fmt::Debug {
    /// A short name for messages ("environment", "keychain", ...).
    fn name(&self) -> &'static str;

    /// Every key held for `provider`; empty when there is none.
    fn keys(&self, provider: &str) -> Result<Vec<ProviderKey>, SecretError>;

    /// Stores (or replaces) the key `label` of `provider`.
    fn set(&self, provider: &str, label: &str, secret: &SecretString) -> Result<(), SecretError> {
        let _ = (provider, label, secret);
        Err(SecretError::ReadOnly { store: self.name(), hint: "keys come from elsewhere" })
    }

    /// Removes the key `label` of `provider`; `Ok(false)` if there was none.
    fn remove(&self, provider: &str, label: &str) -> Result<bool, SecretError> {
        let _ = (provider, label);
        Err(SecretError::ReadOnly { store: self.name(), hint: "keys come from elsewhere" })
    }
}

/// Keys from `SWITCHYARD_KEY_<PROVIDER>` environment variables (upper-cased,
/// `-` as `_`), for headless servers and CI.
#[derive(Debug, Clone, Default)]
pub struct EnvStore {
    /// Captured once so a store is a value, not a view of mutable process state.
    vars: HashMap<String, String>,
}

impl EnvStore {
    pub const PREFIX: &'static str = "SWITCHYARD_KEY_";

    pub fn from_process() -> EnvStore {
        EnvStore::from_vars(std::env::vars())
    }

    pub fn from_vars(vars: impl IntoIterator<Item = (String, String)>) -> EnvStore {
        let vars = vars.into_iter().filter(|(k, _)| k.starts_with(Self::PREFIX)).collect();
        EnvStore { vars }
    }

    pub fn variable_for(provider: &str) -> String {
        format!("{}{}", Self::PREFIX, provider.to_ascii_uppercase().replace('-', "_"))
    }
}

impl SecretStore for EnvStore {
    fn name(&self) -> &'static str {
        "environment"
    }

    fn set(&self, _: &str, _: &str, _: &SecretString) -> Result<(), SecretError> {
        Err(SecretError::ReadOnly { store: "environment", hint: "set SWITCHYARD_KEY_<PROVIDER> before starting" })
    }

    fn remove(&self, _: &str, _: &str) -> Result<bool, SecretError> {
        Err(SecretError::ReadOnly { store: "environment", hint: "unset SWITCHYARD_KEY_<PROVIDER> and restart" })
    }

    fn keys(&self, provider: &str) -> Result<Vec<ProviderKey>, SecretError> {
        Ok(self
            .vars
            .get(&Self::variable_for(provider))
            .filter(|v| !v.trim().is_empty())
            .map(|v| ProviderKey { label: "env".into(), secret: SecretString::from(v.trim().to_string()) })
            .into_iter()
            .collect())
    }
}

/// Keys held in memory only: for tests, the demo, and embedding callers.
#[derive(Debug, Default)]
pub struct MemoryStore {
    keys: RwLock<HashMap<String, Vec<ProviderKey>>>,
}

impl MemoryStore {
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    pub fn with(self, provider: &str, label: &str, secret: &str) -> MemoryStore {
        self.insert(provider, label, secret);
        self
    }

    pub fn insert(&self, provider: &str, label: &str, secret: &str) {
        let key = ProviderKey { label: label.to_string(), secret: SecretString::from(secret.to_string()) };
        let mut keys = self.keys.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        keys.entry(provider.to_string()).or_default().push(key);
    }
}

impl SecretStore for MemoryStore {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn keys(&self, provider: &str) -> Result<Vec<ProviderKey>, SecretError> {
        let keys = self.keys.read().unwrap_or_else(|poisoned| poisoned.into_inner());
        Ok(keys.get(provider).cloned().unwrap_or_default())
    }

    fn set(&self, provider: &str, label: &str, secret: &SecretString) -> Result<(), SecretError> {
        self.remove(provider, label)?;
        self.insert(provider, label, secret.expose_secret());
        Ok(())
    }

    fn remove(&self, provider: &str, label: &str) -> Result<bool, SecretError> {
        let mut keys = self.keys.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        let list = keys.entry(provider.to_string()).or_default();
        let before = list.len();
        list.retain(|k| k.label != label);
        Ok(list.len() != before)
    }
}

/// Stores consulted in order; the first that holds keys for a provider wins.
/// An unavailable store is reported but does not hide keys in later ones.
#[derive(Debug, Default)]
pub struct ChainStore {
    stores: Vec<Box<dyn SecretStore>>,
}

impl ChainStore {
    pub fn new(stores: Vec<Box<dyn SecretStore>>) -> ChainStore {
        ChainStore { stores }
    }
}

impl SecretStore for ChainStore {
    fn name(&self) -> &'static str {
        "chain"
    }

    fn keys(&self, provider: &str) -> Result<Vec<ProviderKey>, SecretError> {
        let mut first_error = None;
        for store in &self.stores {
            match store.keys(provider) {
                Ok(keys) if !keys.is_empty() => return Ok(keys),
                Ok(_) => {}
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(Vec::new()), Err)
    }

    /// Writes to the first store that takes writes (the keychain, in practice).
    fn set(&self, provider: &str, label: &str, secret: &SecretString) -> Result<(), SecretError> {
        let mut last = SecretError::ReadOnly { store: "chain", hint: "no store takes writes" };
        for store in &self.stores {
            match store.set(provider, label, secret) {
                Ok(()) => return Ok(()),
                Err(e @ SecretError::Unavailable { .. }) => return Err(e),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    fn remove(&self, provider: &str, label: &str) -> Result<bool, SecretError> {
        let mut removed = false;
        let mut writable = false;
        for store in &self.stores {
            match store.remove(provider, label) {
                Ok(r) => {
                    writable = true;
                    removed |= r;
                }
                Err(e @ SecretError::Unavailable { .. }) => return Err(e),
                Err(_) => {}
            }
        }
        if writable {
            Ok(removed)
        } else {
            Err(SecretError::ReadOnly { store: "chain", hint: "no store takes writes" })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_store_maps_provider_names() {
        assert_eq!(EnvStore::variable_for("my-groq"), "SWITCHYARD_KEY_MY_GROQ");
        let store = EnvStore::from_vars([
            ("SWITCHYARD_KEY_MY_GROQ".to_string(), " gsk-1 ".to_string()),
            ("SWITCHYARD_KEY_EMPTY".to_string(), "".to_string()),
            ("OTHER".to_string(), "x".to_string()),
        ]);
        let keys = store.keys("my-groq").unwrap();
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].secret.expose_secret(), "gsk-1");
        assert!(store.keys("empty").unwrap().is_empty());
    }

    #[test]
    fn chain_prefers_first_store_with_keys() {
        let chain = ChainStore::new(vec![
            Box::new(MemoryStore::new().with("a", "first", "k1")),
            Box::new(MemoryStore::new().with("a", "second", "k2").with("b", "only", "k3")),
        ]);
        assert_eq!(chain.keys("a").unwrap()[0].label, "first");
        assert_eq!(chain.keys("b").unwrap()[0].label, "only");
        assert!(chain.keys("c").unwrap().is_empty());
    }

    #[test]
    fn debug_never_prints_the_secret() {
        let store = MemoryStore::new().with("a", "main", "sk-very-secret");
        let printed = format!("{:?} {:?}", store, store.keys("a").unwrap());
        assert!(!printed.contains("sk-very-secret"), "{printed}");
    }
}
