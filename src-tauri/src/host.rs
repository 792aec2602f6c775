//! The gateway inside the app: assembled as `switchyard serve` assembles it
//! (keychain then environment keys, history and toggles in the platform data
//! dir), served on the configured address, paused by closing its listener
//! and resumed by binding again. When the port is taken it attaches to the
//! Switchyard already serving there if that one proves it is this user's
//! ([`crate::attach`]), or says so with the fix.
//!
//! The window never holds the admin token: it gets the gateway's address
//! and a dashboard session, which expires when idle and can be revoked.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::Result;
use secrecy::SecretString;
use switchyard_core::Gateway;
use switchyard_host::assemble::{self as serve, Prepared, Setup};
use switchyard_host::gateway_client::reachable;
use switchyard_host::tools;
use tokio::sync::oneshot;
use tracing::{info, warn};

use crate::attach::{self, AttachError};
use crate::menu::Status;

/// Origins of the app's own window, allowed to call the admin API.
const WINDOW_ORIGINS: [&str; 2] = ["tauri://localhost", "http://tauri.localhost"];
/// How long a pause waits for in-flight requests before it reports paused.
const PAUSE_GRACE: Duration = Duration::from_secs(3);

/// Where the app takes its configuration from: `SWITCHYARD_CONFIG`,
/// `SWITCHYARD_DATA_DIR` and `SWITCHYARD_LISTEN`, as the CLI reads them.
#[derive(Debug, Default, Clone)]
pub struct Options {
    pub config: Option<PathBuf>,
    pub data_dir: Option<PathBuf>,
    pub listen: Option<SocketAddr>,
}

impl Options {
    pub fn from_env() -> Options {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        Options {
            config: var("SWITCHYARD_CONFIG").map(PathBuf::from),
            data_dir: var("SWITCHYARD_DATA_DIR").map(PathBuf::from),
            listen: var("SWITCHYARD_LISTEN").and_then(|v| v.to_str().and_then(|s| s.parse().ok())),
        }
    }
}

/// What the window needs to reach the gateway: its address and a dashboard
/// session id, which the window sends in `x-switchyard-session`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Connection {
    pub base: String,
    pub session: String,
}

/// The window's Content Security Policy: its own pages, the shell's IPC, and
/// connections to the gateway's address only (not every local port).
pub fn window_csp(gateway: SocketAddr) -> String {
    format!(
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; \
         connect-src ipc: http://ipc.localhost http://{}",
        reachable(gateway)
    )
}

/// A `{ code, message }` error for the window.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CommandError {
    pub code: &'static str,
    pub message: String,
}

enum Serving {
    Running { addr: SocketAddr, stop: oneshot::Sender<()>, task: tokio::task::JoinHandle<()> },
    Paused(SocketAddr),
    Attached(SocketAddr),
    Failed(String),
}

pub struct Host {
    /// The gateway and its history; taken at shutdown. No other long-lived
    /// clone of the gateway is kept, so history closes without waiting.
    prepared: Mutex<Option<Prepared>>,
    listen: SocketAddr,
    admin_token: SecretString,
    /// What `connect` writes into tools' settings: where the backups go, and
    /// the local access token when the gateway requires it.
    data_dir: Option<PathBuf>,
    access_token: Option<SecretString>,
    /// The window's dashboard session, reused while the gateway knows it.
    window_session: tokio::sync::Mutex<Option<String>>,
    serving: tokio::sync::Mutex<Serving>,
    /// A copy of the status for synchronous readers (the tray, commands).
    status: Mutex<Status>,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host").field("listen", &self.listen).finish_non_exhaustive()
    }
}

impl Host {
    /// Reads the configuration (the listen override applied), before the
    /// window exists: its policy names the address.
    pub fn plan(options: &Options) -> Result<Setup> {
        serve::setup(options.config.clone(), options.data_dir.as_deref(), options.listen)
    }

    /// Assembles the gateway and starts serving (or reports why it cannot).
    pub async fn start(setup: Setup) -> Result<Host> {
        let Setup { config, files, tokens } = setup;
        let listen = config.server.listen;
        let admin_token = tokens.admin.clone();
        let (data_dir, access_token) = (files.data_dir.clone(), tokens.access.clone());
        let prepared = serve::prepare(config, serve::secret_stores(), files, tokens, |mut b| {
            for origin in WINDOW_ORIGINS {
                b = b.trusted_origin(origin);
            }
            b
        })
        .await?;
        let host = Host {
            prepared: Mutex::new(Some(prepared)),
            listen,
            admin_token,
            data_dir,
            access_token,
            window_session: tokio::sync::Mutex::new(None),
            serving: tokio::sync::Mutex::new(Serving::Failed("not started".into())),
            status: Mutex::new(Status::Starting),
        };
        host.resume().await;
        Ok(host)
    }

    /// The gateway, until the app shuts down.
    pub fn gateway(&self) -> Option<Gateway> {
        self.prepared.lock().unwrap_or_else(|p| p.into_inner()).as_ref().map(|p| p.gateway.clone())
    }

    pub fn status(&self) -> Status {
        self.status.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn set(&self, serving: &Serving) {
        let status = match serving {
            Serving::Running { addr, .. } => Status::Listening(*addr),
            Serving::Paused(addr) => Status::Paused(*addr),
            Serving::Attached(addr) => Status::Attached(*addr),
            Serving::Failed(reason) => Status::Failed(reason.clone()),
        };
        *self.status.lock().unwrap_or_else(|p| p.into_inner()) = status;
    }

    /// Binds the address and serves; a taken port attaches or explains.
    pub async fn resume(&self) {
        let mut serving = self.serving.lock().await;
        if matches!(*serving, Serving::Running { .. }) {
            return;
        }
        let Some(gateway) = self.gateway() else { return };
        *serving = match tokio::net::TcpListener::bind(self.listen).await {
            Ok(listener) => {
                let addr = listener.local_addr().unwrap_or(self.listen);
                let (stop, stopped) = oneshot::channel::<()>();
                let task = tokio::spawn(async move {
                    let shutdown = async move {
                        let _ = stopped.await;
                    };
                    if let Err(e) = switchyard_core::serve(listener, gateway, shutdown).await {
                        warn!("the gateway stopped serving: {e}");
                    }
                });
                info!("listening on http://{addr}");
                Serving::Running { addr, stop, task }
            }
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => self.taken().await,
            Err(e) => Serving::Failed(format!("Cannot listen on {}: {e}", self.listen)),
        };
        self.set(&serving);
    }

    /// The port is taken: our own Switchyard (same data dir, same admin
    /// token) is attached to once it has proved it holds the token; anything
    /// else is explained with the fix, and was sent nothing secret.
    async fn taken(&self) -> Serving {
        let addr = reachable(self.listen);
        match attach::verify(addr, &self.admin_token).await {
            Ok(_) => {
                info!("another Switchyard serves {addr}: attaching to it");
                Serving::Attached(addr)
            }
            Err(e) => {
                warn!("not attaching to {addr}: {e}");
                Serving::Failed(format!(
                    "Port {} is in use by another program, not your Switchyard (it could not prove it holds your \
                     admin token, and was sent nothing secret): change [server] listen (or SWITCHYARD_LISTEN), \
                     or stop that program",
                    self.listen.port()
                ))
            }
        }
    }

    /// Stops accepting connections; requests in flight get a short grace.
    pub async fn pause(&self) {
        let mut serving = self.serving.lock().await;
        let Serving::Running { addr, .. } = &*serving else { return };
        let addr = *addr;
        if let Serving::Running { stop, mut task, .. } = std::mem::replace(&mut *serving, Serving::Paused(addr)) {
            let _ = stop.send(());
            if tokio::time::timeout(PAUSE_GRACE, &mut task).await.is_err() {
                // Dropping the server cuts what is still open (streams, idle keep-alives).
                task.abort();
                warn!("paused: cut the connections still open after {}s", PAUSE_GRACE.as_secs());
            }
        }
        info!("paused");
        self.set(&serving);
    }

    pub async fn toggle_pause(&self) {
        if matches!(self.status(), Status::Paused(_)) {
            self.resume().await;
        } else {
            self.pause().await;
        }
    }

    /// Where `connect` points tools, and where it keeps their backups.
    pub fn tools_target(&self) -> Option<(tools::Backups, tools::Target)> {
        let backups = tools::Backups::new(self.data_dir.as_deref()?);
        let base = format!("http://{}", reachable(self.address().unwrap_or(self.listen)));
        Some((backups, tools::Target { base, token: self.access_token.clone(), model: None, status_line: None }))
    }

    /// The address clients use, whenever one is known (paused included).
    pub fn address(&self) -> Option<SocketAddr> {
        match self.status() {
            Status::Listening(a) | Status::Paused(a) | Status::Attached(a) => Some(a),
            Status::Starting | Status::Failed(_) => None,
        }
    }

    /// The window's connection: the gateway's address and a dashboard
    /// session (kept while the gateway knows it), never the admin token.
    pub async fn connection(&self) -> Result<Connection, CommandError> {
        let status = self.status();
        let (addr, attached) = match status {
            Status::Listening(addr) => (reachable(addr), false),
            Status::Attached(addr) => (addr, true),
            Status::Paused(_) => {
                return Err(CommandError {
                    code: "paused",
                    message: "the gateway is paused: resume it from the tray".into(),
                })
            }
            Status::Starting => {
                return Err(CommandError { code: "starting", message: "the gateway is starting".into() })
            }
            Status::Failed(reason) => return Err(CommandError { code: "not_serving", message: reason }),
        };
        let mut kept = self.window_session.lock().await;
        let session =
            if attached { self.remote_session(addr, kept.take()).await? } else { self.own_session(kept.take())? };
        *kept = Some(session.clone());
        Ok(Connection { base: format!("http://{addr}"), session })
    }

    /// A session at the gateway in this process.
    fn own_session(&self, kept: Option<String>) -> Result<String, CommandError> {
        let gateway = self
            .gateway()
            .ok_or_else(|| CommandError { code: "not_serving", message: "the gateway has shut down".into() })?;
        let sessions = gateway.sessions();
        Ok(kept.filter(|id| sessions.check(id)).unwrap_or_else(|| sessions.login()))
    }

    /// A session at the Switchyard attached to, checked again first: the
    /// port may have changed hands since.
    async fn remote_session(&self, addr: SocketAddr, kept: Option<String>) -> Result<String, CommandError> {
        let failed = |e: AttachError| CommandError { code: "not_serving", message: e.to_string() };
        let verified = attach::verify(addr, &self.admin_token).await.map_err(failed)?;
        verified.session(&self.admin_token, kept).await.map_err(failed)
    }

    /// Stops serving and writes out the last history records.
    pub async fn shutdown(&self) {
        self.pause().await;
        let prepared = self.prepared.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(p) = prepared {
            p.close().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::sync::{Arc, Mutex};

    use super::*;

    fn options(data_dir: &std::path::Path, listen: SocketAddr) -> Options {
        // No config file in the data dir: the embedded default with its providers.
        Options { config: None, data_dir: Some(data_dir.to_path_buf()), listen: Some(listen) }
    }

    async fn start(data_dir: &std::path::Path, listen: SocketAddr) -> Host {
        Host::start(Host::plan(&options(data_dir, listen)).unwrap()).await.unwrap()
    }

    /// The admin token the apps on `data_dir` share.
    fn admin_token(data_dir: &std::path::Path) -> String {
        use secrecy::ExposeSecret;
        switchyard_host::paths::admin_token(data_dir).unwrap().expose_secret().to_string()
    }

    /// A program holding a port that answers every HTTP request with 200
    /// and a made-up proof, and keeps every byte it was sent.
    fn impostor() -> (SocketAddr, Arc<Mutex<Vec<u8>>>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut buf = [0u8; 4096];
                let n = stream.read(&mut buf).unwrap_or(0);
                log.lock().unwrap().extend_from_slice(&buf[..n]);
                let body = r#"{"proof":"0000000000000000000000000000000000000000000000000000000000000000"}"#;
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(answer.as_bytes());
            }
        });
        (addr, seen)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_port_held_by_another_program_is_explained_with_the_fix() {
        let squatter = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = squatter.local_addr().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let host = start(dir.path(), addr).await;
        let Status::Failed(reason) = host.status() else { panic!("{:?}", host.status()) };
        assert!(reason.contains(&format!("Port {} is in use", addr.port())), "{reason}");
        assert!(reason.contains("change [server] listen"), "{reason}");
        let refused = host.connection().await.unwrap_err();
        assert_eq!(refused.code, "not_serving");
        host.shutdown().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_impostor_on_the_port_is_not_attached_and_never_sees_the_token() {
        let (addr, seen) = impostor();
        let dir = tempfile::tempdir().unwrap();
        let host = start(dir.path(), addr).await;
        let Status::Failed(reason) = host.status() else { panic!("attached to an impostor: {:?}", host.status()) };
        assert!(reason.contains("not your Switchyard"), "{reason}");
        assert!(reason.contains(&format!("Port {} is in use by another program", addr.port())), "{reason}");
        assert_eq!(host.connection().await.unwrap_err().code, "not_serving");
        host.shutdown().await;

        let seen = String::from_utf8_lossy(&seen.lock().unwrap()).to_string();
        assert!(seen.contains("GET /"), "it was asked to prove itself: {seen:?}");
        let token = admin_token(dir.path());
        assert!(!seen.contains(&token), "the impostor received the admin token: {seen:?}");
        assert!(!seen.to_ascii_lowercase().contains("authorization"), "nothing secret was sent: {seen:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_window_gets_a_session_at_its_gateway_never_the_admin_token() {
        let dir = tempfile::tempdir().unwrap();
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let host = start(dir.path(), free).await;
        let connection = host.connection().await.unwrap();
        let token = admin_token(dir.path());
        let answer = serde_json::to_string(&connection).unwrap();
        assert!(!answer.contains(&token), "the window's answer holds the admin token: {answer}");
        assert_eq!(connection.base, format!("http://{free}"));
        let gateway = host.gateway().unwrap();
        assert!(gateway.sessions().check(&connection.session), "a live dashboard session");
        assert_eq!(host.connection().await.unwrap().session, connection.session, "kept while it lives");
        gateway.sessions().logout(&connection.session);
        let renewed = host.connection().await.unwrap().session;
        assert_ne!(renewed, connection.session, "a revoked session is replaced");
        assert!(gateway.sessions().check(&renewed));
        host.shutdown().await;
    }

    #[test]
    fn the_window_policy_names_only_the_gateway() {
        let csp = window_csp("127.0.0.1:4242".parse().unwrap());
        let connect = csp.split(';').map(str::trim).find(|d| d.starts_with("connect-src")).unwrap();
        assert_eq!(connect, "connect-src ipc: http://ipc.localhost http://127.0.0.1:4242");
        assert!(!csp.contains('*'), "{csp}");
        let any = window_csp("0.0.0.0:4242".parse().unwrap());
        assert!(any.ends_with("http://127.0.0.1:4242"), "an unspecified address is reached on loopback: {any}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_second_app_on_the_same_data_attaches_and_pause_resume_rebinds() {
        let dir = tempfile::tempdir().unwrap();
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let first = start(dir.path(), free).await;
        assert_eq!(first.status(), Status::Listening(free));
        let connection = first.connection().await.unwrap();
        assert_eq!(connection.base, format!("http://{free}"));

        let second = start(dir.path(), free).await;
        assert_eq!(second.status(), Status::Attached(free));
        let attached = second.connection().await.unwrap();
        assert_eq!(attached.base, connection.base, "the window reaches the running one");
        let sessions = first.gateway().unwrap();
        assert!(sessions.sessions().check(&attached.session), "with a session the running one opened");
        assert!(!attached.session.contains(&admin_token(dir.path())));
        assert_eq!(second.connection().await.unwrap().session, attached.session, "kept while it lives");
        second.shutdown().await;

        first.pause().await;
        assert_eq!(first.status(), Status::Paused(free));
        assert!(tokio::net::TcpStream::connect(free).await.is_err(), "paused: nothing listens");
        assert_eq!(first.connection().await.unwrap_err().code, "paused");
        first.resume().await;
        assert_eq!(first.status(), Status::Listening(free));
        assert!(tokio::net::TcpStream::connect(free).await.is_ok());
        first.shutdown().await;
    }
}
