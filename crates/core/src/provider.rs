//! A provider as the gateway runs it: its configuration plus the keys it was
//! able to load.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::config::{Auth, ProviderConfig};
use crate::secrets::{ProviderKey, SecretStore};

/// The keys a provider can use right now.
#[derive(Debug)]
pub enum KeyState {
    /// The provider takes no key (a local server).
    NotNeeded,
    Ready(Vec<ProviderKey>),
    /// No store holds a key for this provider.
    Missing,
    /// The stores could not be read.
    Unavailable(String),
}

#[derive(Debug)]
pub struct Provider {
    pub config: ProviderConfig,
    pub keys: KeyState,
    next_key: AtomicUsize,
}

impl Provider {
    pub fn load(config: ProviderConfig, store: &dyn SecretStore) -> Provider {
        let keys = match config.auth {
            Auth::None => KeyState::NotNeeded,
            Auth::Key => match store.keys(&config.name) {
                Ok(keys) if keys.is_empty() => KeyState::Missing,
                Ok(keys) => KeyState::Ready(keys),
                Err(e) => KeyState::Unavailable(e.to_string()),
            },
        };
        Provider { config, keys, next_key: AtomicUsize::new(0) }
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// The next key to use, round-robin over the pool. `Ok(None)` means the
    /// provider needs no key; `Err` says why it cannot be used.
    pub fn pick_key(&self) -> Result<Option<&ProviderKey>, String> {
        match &self.keys {
            KeyState::NotNeeded => Ok(None),
            KeyState::Ready(keys) if !keys.is_empty() => {
                let i = self.next_key.fetch_add(1, Ordering::Relaxed) % keys.len();
                Ok(keys.get(i))
            }
            KeyState::Ready(_) | KeyState::Missing => Err(format!(
                "no key for {} (set one with `switchyard keys set {}` or {})",
                self.config.name,
                self.config.name,
                crate::secrets::EnvStore::variable_for(&self.config.name)
            )),
            KeyState::Unavailable(reason) => Err(format!("key for {} cannot be read: {reason}", self.config.name)),
        }
    }
}
