//! Updates from `[desktop] update_endpoint`, through Tauri's updater plugin.
//! The endpoint serves a manifest (`latest.json`) that names each
//! platform's artifact and its minisign signature. The plugin downloads the
//! artifact and checks it against the public key in `tauri.conf.json`
//! (`plugins.updater.pubkey`), and that the version it was signed as (in
//! the signature's trusted comment) is the version the manifest announces:
//! the manifest itself is not signed, so without that an old, validly signed
//! release could be announced as a new one. `requireSignedVersion` there
//! refuses signatures that name no version at all.
//!
//! No endpoint, no check: the app asks nothing of the network until a
//! release channel is configured. A found update is announced (a
//! notification and a tray item) and installed only when the user picks
//! that item. The window cannot reach the plugin: its capability grants
//! none of the plugin's commands.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tauri::{AppHandle, Runtime, Url};
use tauri_plugin_notification::NotificationExt as _;
use tauri_plugin_updater::{Update, UpdaterExt as _};

use crate::host::Host;

/// A manifest that takes longer than this to arrive has failed (the
/// artifact's download has no limit: it may be large and the link slow).
const CHECK_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the app is with updates, as the tray shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// Nothing found yet, or the last check found nothing newer.
    Idle,
    Checking,
    /// A newer version, waiting for the user to install it.
    Available(String),
    /// Downloading, verifying and installing that version.
    Installing(String),
}

#[derive(Debug, thiserror::Error)]
pub enum UpdateError {
    #[error("no update endpoint is configured ([desktop] update_endpoint)")]
    NotConfigured,
    #[error("no update to install: check for updates first")]
    NothingFound,
    #[error("a check or an installation is already under way")]
    Busy,
    #[error("cannot check for updates: {0}")]
    Check(tauri_plugin_updater::Error),
    /// The download failed, or its signature did not verify.
    #[error("the update was not installed: {0}")]
    Download(tauri_plugin_updater::Error),
    #[error("the update was downloaded and verified but not installed: {0}")]
    Install(tauri_plugin_updater::Error),
}

/// The update state of the app: its endpoint, and what was found there.
pub struct Updates {
    endpoint: Option<Url>,
    phase: Mutex<Phase>,
    found: Mutex<Option<Update>>,
}

impl std::fmt::Debug for Updates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Updates").field("endpoint", &self.endpoint).field("phase", &self.phase).finish_non_exhaustive()
    }
}

impl Updates {
    pub fn new(endpoint: Option<Url>) -> Updates {
        Updates { endpoint, phase: Mutex::new(Phase::Idle), found: Mutex::new(None) }
    }

    pub fn enabled(&self) -> bool {
        self.endpoint.is_some()
    }

    /// What the tray shows; `None` when updates are off.
    pub fn phase(&self) -> Option<Phase> {
        self.endpoint.as_ref().map(|_| self.phase.lock().unwrap_or_else(|p| p.into_inner()).clone())
    }

    fn set(&self, phase: Phase, found: Option<Update>) {
        *self.found.lock().unwrap_or_else(|p| p.into_inner()) = found;
        *self.phase.lock().unwrap_or_else(|p| p.into_inner()) = phase;
    }

    /// Moves to `next` unless a check or an installation is under way.
    fn begin(&self, next: Phase) -> Result<(), UpdateError> {
        let mut phase = self.phase.lock().unwrap_or_else(|p| p.into_inner());
        match (&*phase, &next) {
            (Phase::Idle | Phase::Available(_), Phase::Checking) | (Phase::Available(_), Phase::Installing(_)) => {
                *phase = next;
                Ok(())
            }
            _ => Err(UpdateError::Busy),
        }
    }

    /// Asks the endpoint for a newer version than this one: the version
    /// found, kept for [`Updates::download`].
    pub async fn check<R: Runtime>(&self, app: &AppHandle<R>) -> Result<Option<String>, UpdateError> {
        let endpoint = self.endpoint.as_ref().ok_or(UpdateError::NotConfigured)?;
        self.begin(Phase::Checking)?;
        let asked = app
            .updater_builder()
            .endpoints(vec![endpoint.clone()])
            .and_then(|b| b.timeout(CHECK_TIMEOUT).build())
            .map(|updater| async move { updater.check().await });
        let found = match asked {
            Ok(check) => check.await,
            Err(e) => Err(e),
        };
        match found {
            Ok(Some(update)) => {
                let version = update.version.clone();
                self.set(Phase::Available(version.clone()), Some(update));
                Ok(Some(version))
            }
            Ok(None) => {
                self.set(Phase::Idle, None);
                Ok(None)
            }
            Err(e) => {
                self.set(Phase::Idle, None);
                Err(UpdateError::Check(e))
            }
        }
    }

    /// Downloads the update found and verifies its signature: the verified
    /// bytes, to install. A download that does not verify is dropped: the
    /// user checks again rather than retrying what was refused.
    pub async fn download(&self) -> Result<(Update, Vec<u8>), UpdateError> {
        let update = self.found.lock().unwrap_or_else(|p| p.into_inner()).clone().ok_or(UpdateError::NothingFound)?;
        self.begin(Phase::Installing(update.version.clone()))?;
        match update.download(|_, _| {}, || {}).await {
            Ok(bytes) => Ok((update, bytes)),
            Err(e) => {
                self.set(Phase::Idle, None);
                Err(UpdateError::Download(e))
            }
        }
    }

    /// An installation that failed after the download: offered again.
    fn reoffer(&self, update: Update) {
        self.set(Phase::Available(update.version.clone()), Some(update));
    }
}

fn tell<R: Runtime>(app: &AppHandle<R>, title: &str, body: &str) {
    if let Err(e) = app.notification().builder().title(title).body(body).show() {
        tracing::debug!("notification not shown: {e}");
    }
}

/// The check at start-up (`quiet`: only a found update is worth saying) or
/// the tray's "Check for updates…", which says what came of it either way.
pub async fn check_and_tell(app: AppHandle, updates: Arc<Updates>, quiet: bool) {
    let checked = updates.check(&app).await;
    crate::redraw(&app);
    match checked {
        Ok(Some(version)) => tell(
            &app,
            &format!("Switchyard {version} is available"),
            &format!("Choose \u{201c}Install Switchyard {version} and restart\u{201d} in the tray menu."),
        ),
        Ok(None) if !quiet => {
            tell(&app, "Switchyard is up to date", &format!("{} is the latest version.", app.package_info().version))
        }
        Ok(None) => {}
        Err(e) => {
            tracing::warn!("{e}");
            if !quiet {
                tell(&app, "Switchyard: update check failed", &e.to_string());
            }
        }
    }
}

/// The tray's "Install Switchyard X and restart": download, verify,
/// install, restart. On Windows the installer replaces the running app and
/// exits it, so the gateway stops first (and a failed installer restarts
/// the app to serve again); elsewhere it stops only once the new version is
/// in place, so a refused installation (a cancelled password prompt) leaves
/// it serving.
pub async fn install(app: AppHandle, host: Arc<Host>, updates: Arc<Updates>) {
    crate::redraw(&app);
    let (update, bytes) = match updates.download().await {
        Ok(downloaded) => downloaded,
        Err(e) => return failed(&app, &e),
    };
    crate::redraw(&app);
    if cfg!(windows) {
        host.shutdown().await;
    }
    if let Err(e) = update.install(&bytes) {
        failed(&app, &UpdateError::Install(e));
        if cfg!(windows) {
            app.restart();
        }
        updates.reoffer(update);
        return crate::redraw(&app);
    }
    host.shutdown().await;
    app.restart();
}

fn failed(app: &AppHandle, e: &UpdateError) {
    tracing::warn!("{e}");
    crate::redraw(app);
    tell(app, "Switchyard: update not installed", &e.to_string());
}

#[cfg(test)]
#[path = "update_tests.rs"]
mod tests;
