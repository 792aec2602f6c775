//! The gateway inside the app: assembled as `switchyard serve` assembles it
//! (keychain then environment keys, history and toggles in the platform data
//! dir), served on the configured address, paused by closing its listener
//! and resumed by binding again. When the port is taken it says so with the
//! fix, or attaches to the Switchyard already serving there.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::Result;
use secrecy::{ExposeSecret, SecretString};
use switchyard_cli::paths::DataDirArgs;
use switchyard_cli::serve::{self, Prepared, Setup};
use switchyard_core::Gateway;
use tokio::sync::oneshot;
use tracing::{info, warn};

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

/// What the window needs to reach the gateway.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Connection {
    pub base: String,
    pub token: String,
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
    /// Assembles the gateway and starts serving (or reports why it cannot).
    pub async fn start(options: Options) -> Result<Host> {
        let data = DataDirArgs { data_dir: options.data_dir.clone() };
        let Setup { config, files, tokens } = serve::setup(options.config.clone(), &data, options.listen)?;
        let listen = config.server.listen;
        let admin_token = tokens.admin.clone();
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
    /// token) is attached to; anything else is explained with the fix.
    async fn taken(&self) -> Serving {
        let url = format!("http://{}/admin/providers", self.listen);
        let client = reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(2)).build();
        let ours = match client {
            Ok(c) => c
                .get(url)
                .bearer_auth(self.admin_token.expose_secret())
                .send()
                .await
                .is_ok_and(|r| r.status().is_success()),
            Err(_) => false,
        };
        if ours {
            info!("another Switchyard serves {}: attaching to it", self.listen);
            Serving::Attached(self.listen)
        } else {
            Serving::Failed(format!(
                "Port {} is in use by another program: change [server] listen (or SWITCHYARD_LISTEN), or stop that program",
                self.listen.port()
            ))
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

    /// The address clients use, whenever one is known (paused included).
    pub fn address(&self) -> Option<SocketAddr> {
        match self.status() {
            Status::Listening(a) | Status::Paused(a) | Status::Attached(a) => Some(a),
            Status::Starting | Status::Failed(_) => None,
        }
    }

    /// The window's connection: the gateway's address and the admin token.
    pub fn connection(&self) -> Result<Connection, CommandError> {
        match self.status() {
            Status::Listening(addr) | Status::Attached(addr) => {
                Ok(Connection { base: format!("http://{addr}"), token: self.admin_token.expose_secret().to_string() })
            }
            Status::Paused(_) => {
                Err(CommandError { code: "paused", message: "the gateway is paused: resume it from the tray".into() })
            }
            Status::Starting => Err(CommandError { code: "starting", message: "the gateway is starting".into() }),
            Status::Failed(reason) => Err(CommandError { code: "not_serving", message: reason }),
        }
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
    use super::*;

    fn options(data_dir: &std::path::Path, listen: SocketAddr) -> Options {
        // No config file in the data dir: the embedded default with its providers.
        Options { config: None, data_dir: Some(data_dir.to_path_buf()), listen: Some(listen) }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_port_held_by_another_program_is_explained_with_the_fix() {
        let squatter = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = squatter.local_addr().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let host = Host::start(options(dir.path(), addr)).await.unwrap();
        let Status::Failed(reason) = host.status() else { panic!("{:?}", host.status()) };
        assert!(reason.contains(&format!("Port {} is in use", addr.port())), "{reason}");
        assert!(reason.contains("change [server] listen"), "{reason}");
        let refused = host.connection().unwrap_err();
        assert_eq!(refused.code, "not_serving");
        host.shutdown().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_second_app_on_the_same_data_attaches_and_pause_resume_rebinds() {
        let dir = tempfile::tempdir().unwrap();
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let first = Host::start(options(dir.path(), free)).await.unwrap();
        assert_eq!(first.status(), Status::Listening(free));
        let connection = first.connection().unwrap();
        assert_eq!(connection.base, format!("http://{free}"));

        let second = Host::start(options(dir.path(), free)).await.unwrap();
        assert_eq!(second.status(), Status::Attached(free));
        assert_eq!(second.connection().unwrap().token, connection.token, "the window reaches the running one");
        second.shutdown().await;

        first.pause().await;
        assert_eq!(first.status(), Status::Paused(free));
        assert!(tokio::net::TcpStream::connect(free).await.is_err(), "paused: nothing listens");
        assert_eq!(first.connection().unwrap_err().code, "paused");
        first.resume().await;
        assert_eq!(first.status(), Status::Listening(free));
        assert!(tokio::net::TcpStream::connect(free).await.is_ok());
        first.shutdown().await;
    }
}
