//! The tray icon and its menu: `menu::build` decides, this module draws.
//! The menu is rebuilt from the live event stream (debounced, so a burst of
//! events is one rebuild) and every few seconds for timers and latencies.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

use switchyard_core::telemetry;
use switchyard_core::telemetry::GatewayEvent;
use tauri::image::Image;
use tauri::menu::{CheckMenuItem, IsMenuItem, Menu, MenuItem, PredefinedMenuItem, Submenu};
use tauri::tray::{TrayIcon, TrayIconBuilder};
use tauri::{AppHandle, Manager as _, Wry};
use tauri_plugin_autostart::ManagerExt as _;
use tauri_plugin_notification::NotificationExt as _;
use tokio::sync::broadcast::error::RecvError;

use crate::host::Host;
use crate::menu::{self, BudgetLine, Item, Overall, ProviderLine, ToolLine, TrayState};

/// Events closer together than this make one rebuild.
const DEBOUNCE: Duration = Duration::from_millis(300);
/// While requests flow, their latencies are drawn this often.
const TRAFFIC: Duration = menu::COUNTING;

/// Settings of the app itself (not the gateway's).
#[derive(Debug)]
pub struct Prefs {
    pub notify: AtomicBool,
}

pub struct Tray {
    icon: TrayIcon,
    menu: Menu<Wry>,
    shown: Mutex<Option<menu::Menu>>,
}

fn icon(overall: Overall) -> tauri::Result<Image<'static>> {
    let bytes: &'static [u8] = match overall {
        Overall::Healthy => include_bytes!("../icons/tray-healthy.png"),
        Overall::Degraded => include_bytes!("../icons/tray-degraded.png"),
        Overall::Down => include_bytes!("../icons/tray-down.png"),
        Overall::Paused => include_bytes!("../icons/tray-paused.png"),
    };
    Image::from_bytes(bytes)
}

/// The state the menu is drawn from.
pub fn state(app: &AppHandle, host: &Host, prefs: &Prefs) -> TrayState {
    let views = host.gateway().map(|g| telemetry::views(&g)).unwrap_or_default();
    let providers = views
        .into_iter()
        .map(|v| ProviderLine {
            name: v.name,
            enabled: v.enabled,
            state: v.state.state,
            latency_p50_ms: v.stats.m5.latency_p50_ms,
            until_ms: v.state.until_ms,
            probe_failed: v.last_probe.filter(|l| !l.ok).map(|l| (l.error.unwrap_or_default(), l.at_ms)),
        })
        .collect();
    let tools = crate::tools::statuses(host)
        .unwrap_or_default()
        .into_iter()
        .map(|t| ToolLine {
            id: t.id.to_string(),
            name: t.name.to_string(),
            installed: t.installed.is_some(),
            connected: t.connected,
        })
        .collect();
    let now_ms = switchyard_core::history::now_ms();
    let blocking = host
        .gateway()
        .map(|g| g.budgets().rows(now_ms))
        .unwrap_or_default()
        .into_iter()
        .filter(|b| b.blocking)
        .map(|b| BudgetLine { name: b.name, scope: b.scope, until_ms: b.resets_at_ms })
        .collect();
    TrayState {
        status: host.status(),
        providers,
        tools,
        autostart: app.autolaunch().is_enabled().unwrap_or(false),
        notify: prefs.notify.load(Ordering::Relaxed),
        blocking,
        now_ms,
        update: app.try_state::<Arc<crate::update::Updates>>().and_then(|u| u.phase()),
    }
}

impl Tray {
    pub fn install(app: &AppHandle, first: &TrayState) -> tauri::Result<Tray> {
        let model = menu::build(first);
        let menu = Menu::new(app)?;
        fill(app, &menu, &model)?;
        let icon = TrayIconBuilder::with_id("switchyard")
            .icon(icon(model.overall)?)
            .tooltip(&model.tooltip)
            .menu(&menu)
            .show_menu_on_left_click(true)
            .on_menu_event(|app, event| crate::on_menu(app, event.id().as_ref()))
            .build(app)?;
        Ok(Tray { icon, menu, shown: Mutex::new(Some(model)) })
    }

    /// Redraws what changed. On Linux a tray menu cannot be replaced, only
    /// its items: they are swapped in place.
    pub fn show(&self, app: &AppHandle, state: &TrayState) -> tauri::Result<()> {
        let model = menu::build(state);
        let mut shown = self.shown.lock().unwrap_or_else(|p| p.into_inner());
        if shown.as_ref() == Some(&model) {
            return Ok(());
        }
        if shown.as_ref().is_none_or(|old| old.items != model.items) {
            for item in self.menu.items()? {
                self.menu.remove(&item)?;
            }
            fill(app, &self.menu, &model)?;
        }
        if shown.as_ref().is_none_or(|old| old.overall != model.overall) {
            self.icon.set_icon(Some(icon(model.overall)?))?;
        }
        self.icon.set_tooltip(Some(&model.tooltip))?;
        *shown = Some(model);
        Ok(())
    }
}

fn fill(app: &AppHandle, menu: &Menu<Wry>, model: &menu::Menu) -> tauri::Result<()> {
    for item in &model.items {
        menu.append(&*native(app, item)?)?;
    }
    Ok(())
}

/// One menu item as Tauri draws it.
fn native(app: &AppHandle, item: &Item) -> tauri::Result<Box<dyn IsMenuItem<Wry>>> {
    Ok(match item {
        Item::Label { id, text } => Box::new(MenuItem::with_id(app, id, text, false, None::<&str>)?),
        Item::Action { id, text, enabled } => Box::new(MenuItem::with_id(app, id, text, *enabled, None::<&str>)?),
        Item::Check { id, text, checked, enabled } => {
            Box::new(CheckMenuItem::with_id(app, id, text, *enabled, *checked, None::<&str>)?)
        }
        Item::Separator => Box::new(PredefinedMenuItem::separator(app)?),
        Item::Submenu { id, text, items } => {
            let submenu = Submenu::with_id(app, id, text, true)?;
            for inner in items {
                submenu.append(&*native(app, inner)?)?;
            }
            Box::new(submenu)
        }
    })
}

/// Follows the gateway's events: rebuilds the menu (debounced) and shows
/// the gateway's alerts as desktop notifications, if asked to.
pub async fn follow(app: AppHandle, host: Arc<Host>, prefs: Arc<Prefs>) {
    let Some(gateway) = host.gateway() else { return };
    let mut events = gateway.telemetry().events.subscribe();
    // The subscription is all this task needs; the gateway itself stays with the host.
    drop(gateway);
    // Drawn again when an event calls for it, or when its words go stale by
    // the clock ("open · 42 s"), and no more: an idle app wakes once a
    // minute for its menu (measured in the desktop test's idle CPU).
    let mut next = Instant::now() + TRAFFIC;
    loop {
        let woke = tokio::time::timeout_at(next, events.recv()).await;
        match woke {
            Ok(Ok(envelope)) => {
                notice(&app, &prefs, &envelope.event);
                if matches!(envelope.event, GatewayEvent::RequestFinished { .. }) {
                    // Latencies move with traffic: drawn within a while,
                    // however steady the stream of requests.
                    next = next.min(Instant::now() + TRAFFIC);
                    continue;
                }
                // Let a burst settle, then draw once.
                tokio::time::sleep(DEBOUNCE).await;
                while let Ok(more) = events.try_recv() {
                    notice(&app, &prefs, &more.event);
                }
            }
            Ok(Err(RecvError::Lagged(_))) | Err(_) => {}
            Ok(Err(RecvError::Closed)) => return,
        }
        next = Instant::now() + redraw(&app, &host, &prefs);
    }
}

/// Draws the menu for the state now (menus belong to the main thread);
/// returns how soon its words go stale by the clock.
pub fn redraw(app: &AppHandle, host: &Host, prefs: &Prefs) -> Duration {
    let state = state(app, host, prefs);
    let stale_in = state.redraw_in();
    let handle = app.clone();
    let drawn = app.run_on_main_thread(move || {
        if let Some(tray) = handle.try_state::<Tray>() {
            if let Err(e) = tray.show(&handle, &state) {
                tracing::warn!("tray menu not updated: {e}");
            }
        }
    });
    if let Err(e) = drawn {
        tracing::warn!("tray menu not updated: {e}");
    }
    stale_in
}

/// The gateway's alerts (already rate-limited there) become desktop
/// notifications, when they are on.
fn notice(app: &AppHandle, prefs: &Prefs, event: &GatewayEvent) {
    let Some((title, body)) = menu::notification(event) else { return };
    if !prefs.notify.load(Ordering::Relaxed) {
        return;
    }
    if let Err(e) = app.notification().builder().title(title).body(body).show() {
        tracing::debug!("notification not shown: {e}");
    }
}
