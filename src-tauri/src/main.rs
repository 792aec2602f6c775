//! Switchyard on the desktop: the gateway in-process, a tray menu that
//! reflects it, and the dashboard in a window. A closed window is gone, not
//! hidden: its webview and WebKit's processes (some 350 MB) exit, and the
//! tray opens a new one on the view the old one was on.

// No console window on Windows release builds.
#![cfg_attr(not(debug_assertions), windows_subsystem = "windows")]

/// The gateway allocates a few dozen small objects per request, and its
/// history writer frees on one thread what the request path allocated on
/// another; mimalloc does both with fewer instructions than the system
/// allocator (9% fewer instructions per request under load: bench/instructions).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod attach;
mod host;
mod light;
mod menu;
mod tools;
mod tray;
mod update;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tauri::{AppHandle, Manager, RunEvent, WindowEvent};
use tauri_plugin_autostart::{MacosLauncher, ManagerExt as _};
use tauri_plugin_clipboard_manager::ClipboardExt as _;

use host::{CommandError, Connection, Host, Options};
use menu::ids::{self, Command};
use tray::{Prefs, Tray};
use update::Updates;

/// The window's one command: where the gateway is and a dashboard session.
#[tauri::command]
async fn connect(host: tauri::State<'_, Arc<Host>>) -> Result<Connection, CommandError> {
    // The page's first command: its script has loaded and run.
    tracing::debug!("window: connect asked");
    host.connection().await
}

/// Whether the app's gateway serves: `listening`, `paused`, `attached`,
/// `starting` or `failed`. The window asks when the gateway does not answer,
/// to say "paused" rather than "not running".
#[tauri::command]
fn gateway_state(host: tauri::State<'_, Arc<Host>>) -> &'static str {
    match host.status() {
        menu::Status::Starting => "starting",
        menu::Status::Listening(_) => "listening",
        menu::Status::Paused(_) => "paused",
        menu::Status::Attached(_) => "attached",
        menu::Status::Failed(_) => "failed",
    }
}

/// Resumes a paused gateway, as the tray's "Resume gateway" does.
#[tauri::command]
async fn resume(app: AppHandle, host: tauri::State<'_, Arc<Host>>) -> Result<(), CommandError> {
    host.resume().await;
    redraw(&app);
    match host.status() {
        menu::Status::Listening(_) | menu::Status::Attached(_) => Ok(()),
        menu::Status::Failed(reason) => Err(CommandError { code: "not_serving", message: reason }),
        _ => Err(CommandError { code: "not_serving", message: "the gateway did not resume".into() }),
    }
}

/// Redraws the tray menu from the current state.
pub fn redraw(app: &AppHandle) {
    if let (Some(host), Some(prefs)) = (app.try_state::<Arc<Host>>(), app.try_state::<Arc<Prefs>>()) {
        tray::redraw(app, &host, &prefs);
    }
}

/// The window's label in `tauri.conf.json`, whose settings every new window takes.
const WINDOW: &str = "main";
/// The longest dashboard route (`#/requests/<id>?…`) kept for the next window.
const MAX_VIEW_LEN: usize = 512;

/// The dashboard route (`#/…`) the last window was on when it closed.
#[derive(Default)]
struct LastView(Mutex<Option<String>>);

impl LastView {
    fn set(&self, view: Option<String>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = view;
    }

    fn get(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// Shows the window, opening a new one when it was closed.
fn show_window(app: &AppHandle) {
    if let Some(window) = app.get_webview_window(WINDOW) {
        let _ = window.show();
        let _ = window.unminimize();
        let _ = window.set_focus();
        return;
    }
    if let Err(e) = open_window(app) {
        tracing::warn!("cannot open the window: {e}");
    }
}

/// A new window on the route the last one was on. It signs in by itself
/// (its `connect` command), so only the route needs carrying over.
fn open_window(app: &AppHandle) -> tauri::Result<()> {
    let Some(config) = app.config().app.windows.iter().find(|w| w.label == WINDOW).cloned() else {
        return Ok(());
    };
    // Where a reopen's time goes, from the window's start (the desktop test
    // prints these): building it, then WebKit starting the page's load.
    let started = std::time::Instant::now();
    let mut builder = tauri::WebviewWindowBuilder::from_config(app, &config)?.on_page_load(move |_, payload| {
        tracing::debug!(event = ?payload.event(), ms = started.elapsed().as_millis(), "window: page load");
    });
    if let Some(view) = app.try_state::<LastView>().and_then(|v| v.get()) {
        // Runs before the page's scripts, so the router starts on it.
        builder = builder.initialization_script(format!(
            "if (!location.hash) location.hash = {};",
            serde_json::to_string(&view).map_err(tauri::Error::Json)?
        ));
    }
    let window = builder.build()?;
    tracing::debug!(ms = started.elapsed().as_millis(), "window: built");
    window.show()?;
    window.set_focus()
}

/// The dashboard route a window shows, if it is one worth opening on again.
fn route_of(window: &tauri::Window) -> Option<String> {
    let url = window.app_handle().get_webview_window(window.label())?.url().ok()?;
    let route = url.fragment().filter(|f| f.starts_with('/') && f.len() < MAX_VIEW_LEN)?;
    (!route.starts_with("/login")).then(|| format!("#{route}"))
}

fn copy(app: &AppHandle, host: &Host, path: &str) {
    if let Some(addr) = host.address() {
        if let Err(e) = app.clipboard().write_text(format!("http://{addr}{path}")) {
            tracing::warn!("cannot copy to the clipboard: {e}");
        }
    }
}

/// A tray menu click.
pub fn on_menu(app: &AppHandle, id: &str) {
    let Some(command) = ids::command(id) else { return };
    let (Some(host), Some(prefs)) = (app.try_state::<Arc<Host>>(), app.try_state::<Arc<Prefs>>()) else { return };
    let (host, prefs) = (Arc::clone(&host), Arc::clone(&prefs));
    let app = app.clone();
    // Every command may wait (a pause drains requests): off the main thread.
    tauri::async_runtime::spawn(async move {
        match command {
            Command::CopyOpenAi => copy(&app, &host, "/v1"),
            Command::CopyAnthropic => copy(&app, &host, ""),
            Command::TogglePause => host.toggle_pause().await,
            Command::OpenDashboard => {
                let handle = app.clone();
                let _ = app.run_on_main_thread(move || show_window(&handle));
            }
            Command::ToggleAutostart => {
                let launcher = app.autolaunch();
                let changed =
                    if launcher.is_enabled().unwrap_or(false) { launcher.disable() } else { launcher.enable() };
                if let Err(e) = changed {
                    tracing::warn!("cannot change start at login: {e}");
                }
            }
            Command::ToggleNotify => {
                prefs.notify.fetch_xor(true, Ordering::Relaxed);
            }
            Command::ToggleProvider(name) => {
                if let Some(gateway) = host.gateway() {
                    let enabled = gateway.live().provider(&name).is_some_and(|p| p.is_enabled());
                    if let Err(e) = gateway.set_enabled(&name, !enabled) {
                        tracing::warn!("{e}");
                    }
                }
            }
            Command::ToggleTool(id) => {
                if let Err(e) = tools::toggle(&host, &id) {
                    tracing::warn!("{}", e.message);
                }
            }
            Command::CheckUpdates | Command::InstallUpdate => {
                let Some(updates) = app.try_state::<Arc<Updates>>().map(|u| Arc::clone(&u)) else { return };
                if command == Command::CheckUpdates {
                    update::check_and_tell(app.clone(), updates, false).await;
                } else {
                    update::install(app.clone(), Arc::clone(&host), updates).await;
                }
            }
            Command::Quit => {
                host.shutdown().await;
                app.exit(0);
                return;
            }
        }
        tray::redraw(&app, &host, &prefs);
    });
}

/// WebKit takes the page's language from the locale variables. Under the
/// "C" or "POSIX" locale that is not a language tag, and the page's date
/// formatting throws: the window then speaks English. Runs before any thread.
fn page_language() {
    let mut any = false;
    for var in ["LC_ALL", "LC_MESSAGES", "LANG"] {
        let Some(value) = std::env::var(var).ok().filter(|v| !v.is_empty()) else { continue };
        any = true;
        let base = value.split(['.', '@']).next().unwrap_or("");
        if base == "C" || base == "POSIX" {
            std::env::set_var(var, "en_US.UTF-8");
        }
    }
    // No locale at all is the "C" locale too.
    if !any {
        std::env::set_var("LANG", "en_US.UTF-8");
    }
}

/// The window draws its page without WebKit's GPU compositing. A new
/// window's first paint then waits for no GL context in its web process
/// (debug build, software GL, a loaded machine: the Overview painted 1.2 to
/// 1.7 s after a tray click in six runs of seven, against 2.1 to 3.1 s in
/// nine runs composited), and the web process holds less while open
/// (180 MB RSS instead of 260 MB). The dashboard is text, tables and 2D
/// canvases, which WebKit paints on the CPU anyway. A value the user set
/// (`0` to turn compositing back on) wins. Runs before any thread.
#[cfg(target_os = "linux")]
fn page_compositing() {
    const VAR: &str = "WEBKIT_DISABLE_COMPOSITING_MODE";
    if std::env::var_os(VAR).is_none() {
        std::env::set_var(VAR, "1");
    }
}

fn main() {
    page_language();
    #[cfg(target_os = "linux")]
    page_compositing();
    switchyard_host::logging::init(switchyard_host::logging::LogFormat::Human, "info");
    // Started at login, the app waits in the tray; started by hand it shows its window.
    let hidden = std::env::args().any(|a| a == "--hidden");
    // The configuration first: the window's policy names the gateway's address.
    let setup = match Host::plan(&Options::from_env()) {
        Ok(setup) => setup,
        Err(e) => {
            eprintln!("switchyard-desktop: cannot start: {e:#}");
            std::process::exit(1);
        }
    };
    let mut context = tauri::generate_context!();
    let csp = host::window_csp(setup.config.server.listen);
    let updates = Arc::new(Updates::new(setup.config.desktop.update_endpoint.clone()));
    context.config_mut().app.security.csp = Some(tauri::utils::config::Csp::Policy(csp));
    let app = tauri::Builder::default()
        .plugin(tauri_plugin_single_instance::init(|app, _args, _cwd| show_window(app)))
        .plugin(tauri_plugin_autostart::init(MacosLauncher::LaunchAgent, Some(vec!["--hidden"])))
        .plugin(tauri_plugin_clipboard_manager::init())
        .plugin(tauri_plugin_notification::init())
        .plugin(tauri_plugin_updater::Builder::new().build())
        .invoke_handler(tauri::generate_handler![
            connect,
            gateway_state,
            resume,
            tools::tools_status,
            tools::tool_toggle
        ])
        .setup(move |app| {
            let host = Arc::new(tauri::async_runtime::block_on(Host::start(setup))?);
            let prefs = Arc::new(Prefs { notify: AtomicBool::new(true) });
            let handle = app.handle().clone();
            // Updates are managed before the tray is drawn, which shows them.
            let check = updates.enabled().then(|| Arc::clone(&updates));
            app.manage(updates);
            let tray = Tray::install(&handle, &tray::state(&handle, &host, &prefs))?;
            app.manage(tray);
            app.manage(Arc::clone(&host));
            app.manage(Arc::clone(&prefs));
            app.manage(LastView::default());
            tauri::async_runtime::spawn(tray::follow(handle.clone(), host, prefs));
            if let Some(updates) = check {
                tauri::async_runtime::spawn(update::check_and_tell(handle.clone(), updates, true));
            }
            if !hidden {
                show_window(&handle);
            }
            Ok(())
        })
        .on_window_event(|window, event| {
            // Closing the window destroys it (the gateway and the tray stay);
            // the next one opens where this one was.
            match event {
                WindowEvent::CloseRequested { .. } => {
                    if let Some(last) = window.app_handle().try_state::<LastView>() {
                        last.set(route_of(window));
                    }
                }
                WindowEvent::Destroyed => light::after_last_window(window.app_handle()),
                _ => {}
            }
        })
        .build(context);
    match app {
        Ok(app) => app.run(|_app, event| {
            if let RunEvent::ExitRequested { api, code: None, .. } = event {
                // No window left is no reason to stop: the tray keeps the app.
                api.prevent_exit();
            }
        }),
        Err(e) => {
            eprintln!("switchyard-desktop: cannot start: {e}");
            std::process::exit(1);
        }
    }
}
