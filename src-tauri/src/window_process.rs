//! The window process (`switchyard-desktop --window`): a Tauri app with the
//! dashboard window and nothing else, started by the tray process
//! ([`crate::window`]) and ended when its window closes. It has no gateway,
//! tray or single-instance lock (that plugin would hand it over to the tray
//! process and exit): the page's commands are relayed to the tray process
//! over the pipes, and a closed stdin (the tray process is gone) closes it.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Stdin};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tauri::{AppHandle, Manager, WindowEvent};
use tokio::sync::oneshot;

use crate::window::{write_line, Call, Failure, FromWindow, ToWindow};

/// The window's label in `tauri.conf.json`, whose settings it takes.
const WINDOW: &str = "main";
/// The longest dashboard route (`#/requests/<id>?…`) kept for the next window.
const MAX_VIEW_LEN: usize = 512;
/// How long the event loop has to close the window once the tray process
/// is gone, before this process ends without it.
const EXIT_GRACE: Duration = Duration::from_secs(5);

/// Why the window process could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("the app sent no start line: {0}")]
    NoStart(String),
    #[error("cannot build the window: {0}")]
    Tauri(#[from] tauri::Error),
}

/// The page's calls waiting for the tray process's answers.
#[derive(Debug, Default)]
struct Relay {
    next: AtomicU64,
    pending: Mutex<HashMap<u64, oneshot::Sender<Result<Value, Failure>>>>,
}

impl Relay {
    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<u64, oneshot::Sender<Result<Value, Failure>>>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Asks the tray process and waits for its answer.
    async fn ask(&self, call: Call) -> Result<Value, Failure> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending().insert(id, tx);
        if let Err(e) = write_line(&mut std::io::stdout().lock(), &FromWindow::Call { id, call }) {
            self.pending().remove(&id);
            return Err(Failure::no_app(e));
        }
        rx.await.map_err(|_| Failure::no_app("it exited"))?
    }

    fn answered(&self, id: u64, result: Result<Value, Failure>) {
        if let Some(waiting) = self.pending().remove(&id) {
            let _ = waiting.send(result);
        }
    }
}

type Answer = Result<Value, Failure>;

/// Where the gateway is and a dashboard session: the page's first command.
#[tauri::command]
async fn connect(relay: tauri::State<'_, Arc<Relay>>) -> Answer {
    // The page's script has loaded and run.
    tracing::debug!("window: connect asked");
    let asked = Instant::now();
    let answer = relay.ask(Call::Connect).await;
    tracing::debug!(ms = asked.elapsed().as_millis(), "window: connect answered");
    answer
}

#[tauri::command]
async fn gateway_state(relay: tauri::State<'_, Arc<Relay>>) -> Answer {
    relay.ask(Call::GatewayState).await
}

#[tauri::command]
async fn resume(relay: tauri::State<'_, Arc<Relay>>) -> Answer {
    relay.ask(Call::Resume).await
}

#[tauri::command]
async fn tools_status(relay: tauri::State<'_, Arc<Relay>>) -> Answer {
    relay.ask(Call::ToolsStatus).await
}

#[tauri::command]
async fn tool_toggle(relay: tauri::State<'_, Arc<Relay>>, id: String) -> Answer {
    relay.ask(Call::ToolToggle { id }).await
}

/// Reads the start line, then runs the window until it closes.
pub fn run(mut context: tauri::Context<tauri::Wry>) -> Result<(), StartError> {
    let started = Instant::now();
    let mut input = BufReader::new(std::io::stdin());
    let (gateway, view) = match read(&mut input) {
        Some(ToWindow::Start { gateway, view }) => (gateway, view),
        other => return Err(StartError::NoStart(format!("{other:?}"))),
    };
    let csp = crate::host::window_csp(gateway);
    context.config_mut().app.security.csp = Some(tauri::utils::config::Csp::Policy(csp));
    let relay = Arc::new(Relay::default());
    let app = tauri::Builder::default()
        .manage(Arc::clone(&relay))
        .invoke_handler(tauri::generate_handler![connect, gateway_state, resume, tools_status, tool_toggle])
        .setup(move |app| {
            open(app.handle(), view, started)?;
            let handle = app.handle().clone();
            std::thread::Builder::new().name("window-pipe".into()).spawn(move || listen(input, &handle, &relay))?;
            Ok(())
        })
        .on_window_event(|window, event| {
            if let WindowEvent::CloseRequested { .. } = event {
                let closing = FromWindow::Closing { view: route_of(window) };
                if let Err(e) = write_line(&mut std::io::stdout().lock(), &closing) {
                    tracing::debug!("the app did not hear the window close: {e}");
                }
            }
        })
        .build(context)?;
    // The last window closed ends the event loop, and so this process.
    app.run(|_, _| {});
    Ok(())
}

/// The next message from the tray process; `None` once its end is closed.
fn read(input: &mut BufReader<Stdin>) -> Option<ToWindow> {
    loop {
        let mut line = String::new();
        if input.read_line(&mut line).ok()? == 0 {
            return None;
        }
        match serde_json::from_str(&line) {
            Ok(message) => return Some(message),
            Err(e) => tracing::warn!("the app sent a line the window cannot read: {e}"),
        }
    }
}

/// Follows the tray process's messages; its end closing closes the window.
fn listen(mut input: BufReader<Stdin>, app: &AppHandle, relay: &Relay) {
    while let Some(message) = read(&mut input) {
        match message {
            ToWindow::Answer { id, result } => relay.answered(id, result),
            ToWindow::Raise => {
                let handle = app.clone();
                let _ = app.run_on_main_thread(move || raise(&handle));
            }
            ToWindow::Start { .. } => {}
        }
    }
    tracing::info!("the Switchyard app is gone: closing its window");
    app.exit(0);
    std::thread::sleep(EXIT_GRACE);
    std::process::exit(0);
}

fn raise(app: &AppHandle) {
    if let Some(window) = app.get_webview_window(WINDOW) {
        let _ = window.show();
        let _ = window.unminimize();
        let _ = window.set_focus();
    }
}

/// The window, on `view` when the last one closed on a route. It signs in
/// by itself (its `connect` command), so only the route needs carrying over.
fn open(app: &AppHandle, view: Option<String>, started: Instant) -> tauri::Result<()> {
    let Some(config) = app.config().app.windows.iter().find(|w| w.label == WINDOW).cloned() else {
        return Err(tauri::Error::WindowNotFound);
    };
    // Where a reopen's time goes, from this process's start (the desktop
    // test prints these): building the window, then WebKit loading the page.
    let mut builder = tauri::WebviewWindowBuilder::from_config(app, &config)?.on_page_load(move |_, payload| {
        tracing::debug!(event = ?payload.event(), ms = started.elapsed().as_millis(), "window: page load");
    });
    if let Some(view) = view.filter(|v| v.len() < MAX_VIEW_LEN) {
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
