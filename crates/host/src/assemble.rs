//! A gateway assembled the way every host runs it: its config and tokens
//! found in the data directory, keys from the keychain then the environment,
//! history opened, the config file watched, and a graceful stop.

use std::future::Future;
use std::path::{Path, PathBuf};

use std::time::Duration;

use anyhow::{Context, Result};
use secrecy::SecretString;
use std::sync::Arc;
use switchyard_core::cache;
use switchyard_core::history::History;
use switchyard_core::secrets::{ChainStore, EnvStore};

use switchyard_core::gateway::Builder;
use switchyard_core::{Config, Gateway, SecretStore};
use switchyard_keychain::KeychainStore;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::paths;

/// How long in-flight requests get to finish after a shutdown signal.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// How long queued history records get to be written at shutdown.
const HISTORY_GRACE: Duration = Duration::from_secs(5);
/// How long a stopping gateway waits for its last spans to reach the collector.
const TRACE_GRACE: Duration = Duration::from_secs(3);

/// What a gateway host starts from: the configuration (with a listen
/// override), where its files go, and its tokens. Shared by `serve` and the
/// desktop app, so both find the same config and data the same way.
#[derive(Debug)]
pub struct Setup {
    pub config: Config,
    pub files: Files,
    pub tokens: Tokens,
}

/// Without a config file, `<data dir>/config.toml` when it exists (the
/// dashboard writes it), else the embedded default.
pub fn setup(config: Option<PathBuf>, data_dir: Option<&Path>, listen: Option<std::net::SocketAddr>) -> Result<Setup> {
    let data_dir = paths::data_dir(data_dir)?;
    let config_path = config.clone().unwrap_or_else(|| paths::config_file(&data_dir));
    let mut loaded = match &config {
        Some(path) => Config::load(path)?,
        None if config_path.exists() => Config::load(&config_path)?,
        None => {
            info!(
                "no --config given: using the embedded default (`switchyard config default` prints it); \
                 dashboard edits go to {}",
                config_path.display()
            );
            Config::embedded_default()?
        }
    };
    if let Some(listen) = listen {
        loaded.override_listen(listen, "--listen (or SWITCHYARD_LISTEN)")?;
    }
    if let Some(url) = std::env::var("SWITCHYARD_HISTORY_URL").ok().filter(|u| !u.trim().is_empty()) {
        loaded.override_history_url(url.trim(), "SWITCHYARD_HISTORY_URL")?;
    }
    if let Some(url) = std::env::var("SWITCHYARD_TEAM_REDIS").ok().filter(|u| !u.trim().is_empty()) {
        loaded.override_team_redis(url.trim(), "SWITCHYARD_TEAM_REDIS")?;
    }
    info!(data_dir = %data_dir.display(), "data directory");
    let admin = paths::admin_token(&data_dir)?;
    let access = loaded.server.access_token.then(|| paths::access_token(&data_dir)).transpose()?;
    Ok(Setup {
        config: loaded,
        files: Files { data_dir: Some(data_dir), config: Some(config_path) },
        tokens: Tokens { admin, access },
    })
}

/// Keys come from the OS keychain first, then from `SWITCHYARD_KEY_<PROVIDER>`.
/// An unreachable keychain is reported once and the environment still serves.
pub fn secret_stores() -> Arc<dyn SecretStore> {
    let keychain = KeychainStore::default();
    if let Err(e) = keychain.status() {
        warn!("{e}");
    }
    Arc::new(ChainStore::new(vec![Box::new(keychain), Box::new(EnvStore::from_process())]))
}

/// Where a gateway keeps its files: history and provider toggles in the data
/// dir, and the config file it watches for changes.
#[derive(Debug, Default)]
pub struct Files {
    pub data_dir: Option<PathBuf>,
    pub config: Option<PathBuf>,
}

/// The tokens a gateway checks.
#[derive(Debug)]
pub struct Tokens {
    pub admin: SecretString,
    /// Required from clients when `[server] access_token = true`.
    pub access: Option<SecretString>,
}

/// Binds the gateway's address, with a message that says how to fix a failure.
pub async fn bind(addr: std::net::SocketAddr) -> Result<TcpListener> {
    TcpListener::bind(addr).await.map_err(|e| bind_error(addr, e))
}

/// A gateway assembled with its history and config watcher: served by
/// [`Prepared::serve`] (again after a pause), then [`Prepared::close`]d.
#[derive(Debug)]
pub struct Prepared {
    pub gateway: Gateway,
    history: Option<History>,
    cache: Option<cache::Store>,
    watcher: Option<tokio::task::JoinHandle<()>>,
    /// Team mode's runner, and what stops it.
    team: Option<(tokio::task::JoinHandle<()>, CancellationToken)>,
}

/// Opens history in `data_dir` (when enabled), builds the gateway (after
/// `customize` has its say, e.g. trusted origins), reports what is usable
/// and starts watching the config file.
pub async fn prepare(
    config: Config,
    secrets: Arc<dyn SecretStore>,
    files: Files,
    tokens: Tokens,
    customize: impl FnOnce(Builder) -> Builder,
) -> Result<Prepared> {
    let history = match files.data_dir.as_deref().filter(|_| config.history.enabled) {
        Some(dir) => {
            let path = paths::database(dir);
            let history = History::open(&path, &config.history).await?;
            info!(database = %path.display(), "recording history");
            Some(history)
        }
        None => None,
    };
    let cache = match files.data_dir.as_deref().filter(|_| history.is_some()) {
        Some(dir) => open_cache(&paths::database(dir), &config).await,
        None => None,
    };
    let listen_off_loopback = !config.server.listen.ip().is_loopback();
    let (team_config, listen) = (config.team.clone(), config.server.listen);
    let mut builder = Gateway::builder(config, secrets).admin_token(tokens.admin);
    if let Some(dir) = &files.data_dir {
        builder = builder.state_file(dir.join("state.json"));
    }
    if let Some(path) = &files.config {
        builder = builder.config_path(path.clone());
    }
    if let Some(token) = tokens.access {
        builder = builder.access_token(token);
        info!("clients must send the local access token as their API key (in <data-dir>/access-token)");
    }
    if listen_off_loopback {
        warn!("listening beyond loopback: other machines can reach this gateway (the access token is required)");
    }
    if let Some(h) = &history {
        builder = builder.history(h);
    }
    if let Some(c) = &cache {
        builder = builder.cache(c.clone());
    }
    let runner = match &team_config {
        Some(team) => {
            let (team, runner) = switchyard_team::join(team, listen)?;
            builder = builder.team(team);
            Some(runner)
        }
        None => None,
    };
    let gateway = customize(builder).build()?;
    report_providers(&gateway);
    let watcher = files.config.clone().map(|path| tokio::spawn(watch_config(gateway.clone(), path)));
    let team = runner.map(|runner| {
        let stop = CancellationToken::new();
        (tokio::spawn(runner.run(gateway.inbound(), stop.clone())), stop)
    });
    Ok(Prepared { gateway, history, cache, watcher, team })
}

/// The response cache beside the history database. One that cannot be
/// opened leaves the gateway without a cache, not without a start: a cache
/// only saves calls.
async fn open_cache(history: &Path, config: &Config) -> Option<cache::Store> {
    let path = cache::path_beside(history);
    let limits = cache::Limits { max_bytes: config.history.cache_max_bytes, ..cache::Limits::default() };
    match cache::Store::open(&path, limits, Arc::default()).await {
        Ok(store) => Some(store),
        Err(e) => {
            warn!("{e}: answering without a response cache");
            None
        }
    }
}

impl Prepared {
    /// Serves until `shutdown`, then gives in-flight requests the grace period.
    pub async fn serve(
        &self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<()> {
        let addr = listener.local_addr()?;
        info!("listening on http://{addr}");
        info!("OpenAI base URL:    http://{addr}/v1");
        info!("Anthropic base URL: http://{addr}");
        let (stopping_tx, stopping_rx) = tokio::sync::oneshot::channel::<()>();
        let signal = async move {
            shutdown.await;
            info!("shutting down: finishing in-flight requests (up to {}s)", SHUTDOWN_GRACE.as_secs());
            let _ = stopping_tx.send(());
        };
        let server = switchyard_core::serve(listener, self.gateway.clone(), signal);
        // Boxed so it can be dropped (with its gateway and recorders) before history closes.
        let mut server = Box::pin(server);
        tokio::select! {
            result = &mut server => result.context("server failed")?,
            () = async {
                let _ = stopping_rx.await;
                tokio::time::sleep(SHUTDOWN_GRACE).await;
            } => warn!("in-flight requests did not finish in time; cutting them"),
        }
        Ok(())
    }

    /// Stops watching the config and writes out the last history records.
    /// Other clones of the gateway must be gone by now, or history waits for them.
    pub async fn close(self) {
        let Prepared { gateway, history, cache, watcher, team } = self;
        if let Some(w) = watcher {
            w.abort();
            let _ = w.await;
        }
        // Off the team's roll call before the history's last writes.
        if let Some((runner, stop)) = team {
            stop.cancel();
            let _ = runner.await;
        }
        // The last requests' spans, sent while the collector still waits for them.
        gateway.tracer().flush(TRACE_GRACE).await;
        drop(gateway);
        if let Some(cache) = cache {
            cache.close().await;
        }
        if let Some(history) = history {
            history.close(HISTORY_GRACE).await;
        }
        info!("stopped");
    }
}

/// Serves until `shutdown`, drains, and writes out the last records.
pub async fn run_gateway(
    listener: TcpListener,
    config: Config,
    secrets: Arc<dyn SecretStore>,
    files: Files,
    tokens: Tokens,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let mut config = config;
    // The address actually bound (a configured port 0 is now a real one):
    // the team knows the instance by it.
    config.server.listen = listener.local_addr()?;
    let prepared = prepare(config, secrets, files, tokens, |b| b).await?;
    let served = prepared.serve(listener, shutdown).await;
    prepared.close().await;
    served
}

fn bind_error(addr: std::net::SocketAddr, e: std::io::Error) -> anyhow::Error {
    let hint = match e.kind() {
        std::io::ErrorKind::AddrInUse => {
            " (another program, perhaps another Switchyard, is using it: stop it, or pick another port with --listen or [server].listen)"
        }
        std::io::ErrorKind::PermissionDenied => " (ports below 1024 need privileges: pick another port)",
        std::io::ErrorKind::AddrNotAvailable => " (that address does not belong to this machine)",
        _ => "",
    };
    anyhow::anyhow!("cannot listen on {addr}: {e}{hint}")
}

fn report_providers(gateway: &Gateway) {
    for provider in &gateway.live().providers {
        let c = &provider.config;
        let state = match (c.enabled, provider.keys.problem()) {
            (false, _) => "disabled".to_string(),
            (true, Some(problem)) => problem,
            (true, None) => format!("ready ({})", provider.keys.describe()),
        };
        info!(provider = %c.name, kind = %c.kind, base_url = %c.base_url, "{state}");
    }
}

/// How often the config file is checked for changes.
const CONFIG_POLL: Duration = Duration::from_secs(2);

/// Reloads the config when its file changes; a bad file is refused and the
/// configuration in force keeps serving.
async fn watch_config(gateway: Gateway, path: PathBuf) {
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let mut last = modified(&path);
    // SWITCHYARD_CONFIG_POLL (a duration such as "500ms") tunes how often.
    let every = std::env::var("SWITCHYARD_CONFIG_POLL")
        .ok()
        .and_then(|v| humantime::parse_duration(&v).ok())
        .filter(|d| !d.is_zero())
        .unwrap_or(CONFIG_POLL);
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        let now = modified(&path);
        if now == last {
            continue;
        }
        last = now;
        // Reading the file and the keychain blocks: off the runtime's thread.
        let (gw, file) = (gateway.clone(), path.clone());
        let outcome = tokio::task::spawn_blocking(move || match Config::load(&file) {
            Ok(config) => {
                gw.reload(config);
                Ok(())
            }
            Err(e) => Err(e.to_string()),
        })
        .await;
        match outcome {
            Ok(Ok(())) => info!(config = %path.display(), "config changed: reloaded"),
            Ok(Err(e)) => gateway.reload_refused(e),
            Err(e) => warn!("config reload failed: {e}"),
        }
    }
}

/// Resolves on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}
