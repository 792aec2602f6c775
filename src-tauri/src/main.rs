//! Switchyard on the desktop: the gateway in-process, a tray menu that
//! reflects it, and the dashboard in a window of its own process. A closed
//! window is gone, not hidden: its process, WebKit's processes and the
//! libraries they loaded exit, and the tray opens a new one on the view the
//! old one was on.

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
mod menu;
mod tools;
mod tray;
mod update;
mod window;
mod window_process;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tauri::{AppHandle, Manager, RunEvent};
use tauri_plugin_autostart::{MacosLauncher, ManagerExt as _};
use tauri_plugin_clipboard_manager::ClipboardExt as _;

use host::{Host, Options};
use menu::ids::{self, Command};
use tray::{Prefs, Tray};
use update::Updates;
use window::Windows;

/// Redraws the tray menu from the current state.
pub fn redraw(app: &AppHandle) {
    if let (Some(host), Some(prefs)) = (app.try_state::<Arc<Host>>(), app.try_state::<Arc<Prefs>>()) {
        let _stale_in = tray::redraw(app, &host, &prefs);
    }
}

/// Shows the dashboard: raises its window, or starts the window process.
fn show_window(app: &AppHandle) {
    if let Some(windows) = app.try_state::<Arc<Windows>>() {
        windows.show(app);
    }
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
        let _stale_in = tray::redraw(&app, &host, &prefs);
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

/// GTK opens the display with a GL probe (GLX through libepoxy) that loads
/// Mesa's driver, and with software GL that is llvmpipe: libLLVM and
/// swrast, some 47 MB that stay resident all day in a process that draws
/// no window (measured: 168 MB with the probe, 116 MB without, debug
/// build). The tray process turns the probe off; the window process gets
/// the user's setting back ([`Windows`]). True when it was set here. Runs
/// before any thread.
#[cfg(target_os = "linux")]
fn tray_without_gl() -> bool {
    const VAR: &str = "GDK_GL";
    if std::env::var_os(VAR).is_some() {
        return false;
    }
    std::env::set_var(VAR, "disable");
    true
}

/// The app's configuration and assets, for either process: one expansion,
/// so the dashboard's files are embedded in the binary once.
fn context() -> tauri::Context<tauri::Wry> {
    tauri::generate_context!()
}

fn main() {
    page_language();
    #[cfg(target_os = "linux")]
    page_compositing();
    switchyard_host::logging::init(switchyard_host::logging::LogFormat::Human, "info");
    if std::env::args().any(|a| a == window::WINDOW_FLAG) {
        if let Err(e) = window_process::run(context()) {
            eprintln!("switchyard-desktop: the window cannot start: {e}");
            std::process::exit(1);
        }
        return;
    }
    run_tray();
}

/// The app the user starts: the gateway, the tray, and the window process
/// on demand. It never builds a webview itself (see [`window`]).
fn run_tray() {
    #[cfg(target_os = "linux")]
    let gl_set_here = tray_without_gl();
    #[cfg(not(target_os = "linux"))]
    let gl_set_here = false;
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
    let windows = Arc::new(Windows::new(setup.config.server.listen, gl_set_here));
    let updates = Arc::new(Updates::new(setup.config.desktop.update_endpoint.clone()));
    let app = tauri::Builder::default()
        .plugin(tauri_plugin_single_instance::init(|app, _args, _cwd| show_window(app)))
        .plugin(tauri_plugin_autostart::init(MacosLauncher::LaunchAgent, Some(vec!["--hidden"])))
        .plugin(tauri_plugin_clipboard_manager::init())
        .plugin(tauri_plugin_notification::init())
        .plugin(tauri_plugin_updater::Builder::new().build())
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
            app.manage(windows);
            tauri::async_runtime::spawn(tray::follow(handle.clone(), host, prefs));
            if let Some(updates) = check {
                tauri::async_runtime::spawn(update::check_and_tell(handle.clone(), updates, true));
            }
            if !hidden {
                show_window(&handle);
            }
            Ok(())
        })
        .build(context());
    match app {
        Ok(app) => app.run(|_app, event| {
            if let RunEvent::ExitRequested { api, code: None, .. } = event {
                // No window here is no reason to stop: the tray keeps the app.
                api.prevent_exit();
            }
        }),
        Err(e) => {
            eprintln!("switchyard-desktop: cannot start: {e}");
            std::process::exit(1);
        }
    }
}
