//! The dashboard window lives in its own process. A process that once built
//! a webview keeps WebKit's libraries and the GL driver its EGL display
//! loaded (libLLVM alone is 43 MB) mapped and resident for good, even after
//! the window and WebKit's own processes are gone; so the tray process,
//! which runs all day, never builds one. "Open dashboard" starts this same
//! executable with [`WINDOW_FLAG`] ([`crate::window_process`]), and the
//! whole window, libraries included, goes when that process exits.
//!
//! The two talk in JSON lines over the child's pipes, never its command
//! line (which any local user can read in `/proc`): the tray process writes
//! [`ToWindow`] to the child's stdin, the window process writes
//! [`FromWindow`] to its stdout. The window's commands are answered here,
//! by the tray process's [`Host`], so the window process holds no admin
//! token and no gateway, only the dashboard session `connect` hands it. The
//! child's stdin closing (this process exited, or was killed) closes the
//! window, so the window never outlives the tray.

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tauri::{AppHandle, Manager};

use crate::host::{CommandError, Host};
use crate::menu::Status;

/// The internal flag that starts the executable as the window process.
pub const WINDOW_FLAG: &str = "--window";

/// What the tray process tells the window process, one line each.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ToWindow {
    /// The first line: the gateway's configured address (the window's
    /// policy lets the page reach it and no other port) and the dashboard
    /// route the last window was on.
    Start { gateway: SocketAddr, view: Option<String> },
    /// "Open dashboard" while the window is open: bring it forward.
    Raise,
    /// The answer to the window's call `id`, as the page will read it.
    Answer { id: u64, result: Result<Value, Failure> },
}

/// What the window process tells the tray process, one line each.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FromWindow {
    /// One of the page's commands, to be answered by the tray process.
    Call { id: u64, call: Call },
    /// The window is closing on this route; the next window opens on it.
    Closing { view: Option<String> },
}

/// The page's commands (the `invoke` names in `ui/src/lib`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum Call {
    Connect,
    GatewayState,
    Resume,
    ToolsStatus,
    ToolToggle { id: String },
}

/// A command's `{ code, message }` error as the page reads it; unlike
/// [`CommandError`] it can be read back from the pipe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    pub code: String,
    pub message: String,
}

impl From<CommandError> for Failure {
    fn from(e: CommandError) -> Failure {
        Failure { code: e.code.to_string(), message: e.message }
    }
}

impl Failure {
    /// The tray process did not answer: it exited, or the pipe broke.
    pub fn no_app(why: impl std::fmt::Display) -> Failure {
        Failure { code: "no_app".into(), message: format!("the Switchyard app did not answer: {why}") }
    }
}

/// Why the window process could not be started or told something.
#[derive(Debug, thiserror::Error)]
pub enum WindowError {
    #[error("cannot find this program to start the window: {0}")]
    Executable(std::io::Error),
    #[error("cannot start the window process: {0}")]
    Spawn(std::io::Error),
    #[error("the window process has no {0} pipe")]
    NoPipe(&'static str),
    #[error("cannot write to the window process: {0}")]
    Write(std::io::Error),
    #[error("cannot encode a message for the window process: {0}")]
    Encode(#[from] serde_json::Error),
}

/// Writes `message` as one JSON line and flushes it: the other side reads
/// line by line, and a message split over two writes could interleave.
pub fn write_line<W: Write, M: Serialize>(out: &mut W, message: &M) -> Result<(), WindowError> {
    let mut line = serde_json::to_vec(message)?;
    line.push(b'\n');
    out.write_all(&line).and_then(|()| out.flush()).map_err(WindowError::Write)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The window process while it runs: its pid (to tell it from the one
/// after it) and its stdin, shared by the tasks that answer its calls.
#[derive(Debug)]
struct Running {
    pid: u32,
    stdin: Arc<Mutex<ChildStdin>>,
}

/// The tray process's side: the window process, if one is open, and the
/// route the last one closed on.
#[derive(Debug)]
pub struct Windows {
    gateway: SocketAddr,
    /// `GDK_GL=disable` was set for the tray process alone: the window
    /// process starts without it, as the user's environment has it.
    gl_set_here: bool,
    running: Mutex<Option<Running>>,
    last_view: Mutex<Option<String>>,
}

impl Windows {
    pub fn new(gateway: SocketAddr, gl_set_here: bool) -> Windows {
        Windows { gateway, gl_set_here, running: Mutex::new(None), last_view: Mutex::new(None) }
    }

    /// Raises the open window, or starts a window process.
    pub fn show(self: &Arc<Self>, app: &AppHandle) {
        if self.raise() {
            return;
        }
        if let Err(e) = self.spawn(app) {
            tracing::warn!("cannot open the window: {e}");
        }
    }

    /// Tells the running window process to come forward; false if none
    /// runs or it no longer listens.
    fn raise(&self) -> bool {
        let running = lock(&self.running);
        let Some(running) = running.as_ref() else { return false };
        let told = write_line(&mut *lock(&running.stdin), &ToWindow::Raise);
        told.map_err(|e| tracing::debug!("the window process did not take the raise: {e}")).is_ok()
    }

    fn spawn(self: &Arc<Self>, app: &AppHandle) -> Result<(), WindowError> {
        // Where a reopen's time goes (the desktop test prints these lines):
        // the process starts, then builds its window and loads the page.
        let started = Instant::now();
        let exe = std::env::current_exe().map_err(WindowError::Executable)?;
        let mut command = Command::new(exe);
        if self.gl_set_here {
            command.env_remove("GDK_GL");
        }
        let mut child = command
            .arg(WINDOW_FLAG)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(WindowError::Spawn)?;
        let pid = child.id();
        let (stdin, stdout) = match (child.stdin.take(), child.stdout.take()) {
            (Some(stdin), Some(stdout)) => (Arc::new(Mutex::new(stdin)), stdout),
            _ => {
                stop(&mut child);
                return Err(WindowError::NoPipe("stdin or stdout"));
            }
        };
        let start = ToWindow::Start { gateway: self.gateway, view: lock(&self.last_view).clone() };
        if let Err(e) = write_line(&mut *lock(&stdin), &start) {
            stop(&mut child);
            return Err(e);
        }
        tracing::debug!(pid, ms = started.elapsed().as_millis(), "window: process started");
        *lock(&self.running) = Some(Running { pid, stdin: Arc::clone(&stdin) });
        let (windows, app) = (Arc::clone(self), app.clone());
        std::thread::Builder::new()
            .name("window-pipe".into())
            .spawn(move || windows.serve(&app, child, stdout, &stdin))
            .map_err(WindowError::Spawn)?;
        Ok(())
    }

    /// Reads the window process's lines until it exits, then reaps it.
    fn serve(&self, app: &AppHandle, mut child: Child, stdout: ChildStdout, stdin: &Arc<Mutex<ChildStdin>>) {
        let pid = child.id();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            match serde_json::from_str::<FromWindow>(&line) {
                Ok(FromWindow::Call { id, call }) => answer_later(app, Arc::clone(stdin), id, call),
                Ok(FromWindow::Closing { view }) => {
                    *lock(&self.last_view) = view;
                    // A click on "Open dashboard" from now on starts a new window.
                    self.forget(pid);
                }
                // Something else printed to the child's stdout (a library): not ours.
                Err(_) => tracing::debug!("window process: {line}"),
            }
        }
        self.forget(pid);
        match child.wait() {
            Ok(status) => tracing::debug!(pid, %status, "window: process exited"),
            Err(e) => tracing::warn!(pid, "cannot reap the window process: {e}"),
        }
    }

    /// Forgets the window process `pid`, unless a newer one replaced it.
    fn forget(&self, pid: u32) {
        let mut running = lock(&self.running);
        if running.as_ref().is_some_and(|r| r.pid == pid) {
            *running = None;
        }
    }
}

/// Ends a child that could not be set up, so it does not linger.
fn stop(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// Answers `call` off the pipe's thread: a resume waits for the listener.
fn answer_later(app: &AppHandle, stdin: Arc<Mutex<ChildStdin>>, id: u64, call: Call) {
    let app = app.clone();
    tauri::async_runtime::spawn(async move {
        let result = match app.try_state::<Arc<Host>>().map(|h| Arc::clone(&h)) {
            Some(host) => answer(&app, &host, call).await,
            None => Err(Failure::no_app("the gateway is not set up")),
        };
        if let Err(e) = write_line(&mut *lock(&stdin), &ToWindow::Answer { id, result }) {
            tracing::debug!("the window process is gone before its answer: {e}");
        }
    });
}

/// What the page's command returns, as JSON for the page.
async fn answer(app: &AppHandle, host: &Host, call: Call) -> Result<Value, Failure> {
    match call {
        Call::Connect => json(host.connection().await),
        Call::GatewayState => json(Ok(gateway_state(host))),
        Call::Resume => json(resume(app, host).await),
        Call::ToolsStatus => json(crate::tools::statuses(host)),
        Call::ToolToggle { id } => {
            let result = crate::tools::toggle(host, &id);
            crate::redraw(app);
            json(result)
        }
    }
}

fn json<T: Serialize>(result: Result<T, CommandError>) -> Result<Value, Failure> {
    let value = result.map_err(Failure::from)?;
    serde_json::to_value(value).map_err(|e| Failure { code: "encode".into(), message: e.to_string() })
}

/// Whether the app's gateway serves: `listening`, `paused`, `attached`,
/// `starting` or `failed`. The window asks when the gateway does not answer,
/// to say "paused" rather than "not running".
fn gateway_state(host: &Host) -> &'static str {
    match host.status() {
        Status::Starting => "starting",
        Status::Listening(_) => "listening",
        Status::Paused(_) => "paused",
        Status::Attached(_) => "attached",
        Status::Failed(_) => "failed",
    }
}

/// Resumes a paused gateway, as the tray's "Resume gateway" does.
async fn resume(app: &AppHandle, host: &Host) -> Result<(), CommandError> {
    host.resume().await;
    crate::redraw(app);
    match host.status() {
        Status::Listening(_) | Status::Attached(_) => Ok(()),
        Status::Failed(reason) => Err(CommandError { code: "not_serving", message: reason }),
        _ => Err(CommandError { code: "not_serving", message: "the gateway did not resume".into() }),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn round_trip<M: Serialize + for<'de> Deserialize<'de>>(message: &M) -> M {
        let mut out = Vec::new();
        write_line(&mut out, message).unwrap();
        assert_eq!(out.iter().filter(|b| **b == b'\n').count(), 1, "one line: {}", String::from_utf8_lossy(&out));
        assert!(out.ends_with(b"\n"));
        serde_json::from_slice(&out).unwrap()
    }

    #[test]
    fn every_message_is_one_line_and_reads_back_the_same() {
        let start =
            ToWindow::Start { gateway: "127.0.0.1:4242".parse().unwrap(), view: Some("#/requests/a\nb".into()) };
        assert_eq!(round_trip(&start), start);
        assert_eq!(round_trip(&ToWindow::Raise), ToWindow::Raise);
        let failed = ToWindow::Answer { id: 7, result: Err(Failure { code: "paused".into(), message: "p".into() }) };
        assert_eq!(round_trip(&failed), failed);
        let ok = ToWindow::Answer { id: 8, result: Ok(serde_json::json!({ "base": "http://x", "session": "s" })) };
        assert_eq!(round_trip(&ok), ok);
        let call = FromWindow::Call { id: 9, call: Call::ToolToggle { id: "codex".into() } };
        assert_eq!(round_trip(&call), call);
        let closing = FromWindow::Closing { view: None };
        assert_eq!(round_trip(&closing), closing);
    }

    #[test]
    fn a_command_error_reaches_the_page_as_code_and_message() {
        let e = CommandError { code: "paused", message: "resume it from the tray".into() };
        let page = serde_json::to_value(Failure::from(e.clone())).unwrap();
        assert_eq!(page, serde_json::to_value(e).unwrap());
    }

    #[test]
    fn a_library_s_stray_output_is_no_message() {
        assert!(serde_json::from_str::<FromWindow>("Gtk-Message: something").is_err());
        assert!(serde_json::from_str::<FromWindow>(r#"{"kind":"unknown"}"#).is_err());
    }
}
