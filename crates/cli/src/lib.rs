//! `switchyard`: the gateway headless, the demo, and config checks. A
//! library too, so the desktop app hosts the gateway the same way `serve` does.

mod connect;
mod demo;
mod history;
mod inspect;
mod join;
mod keys;
mod list;
mod members;
mod open;
pub mod paths;
pub mod remote;
pub mod serve;
mod sessions;
mod status;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use switchyard_host::logging;
pub use switchyard_host::tools;

#[derive(Debug, Parser)]
#[command(name = "switchyard", version, about = "A local LLM gateway: one base URL, every provider, honest failover")]
struct Cli {
    /// Log format: human-readable lines or one JSON object per line.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Human, env = "SWITCHYARD_LOG_FORMAT")]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Human,
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the gateway headless.
    Serve(serve::ServeArgs),
    /// Run the gateway in front of simulated providers with generated traffic; no keys needed.
    Demo(demo::DemoArgs),
    /// Recorded requests: a table, one request's attempt timeline (`history show ID`), `history rebuild`, or `history purge`.
    History(history::HistoryArgs),
    /// Coding agents' sessions on the running gateway: a table, or one session (`sessions show ID`).
    Sessions(sessions::SessionsArgs),
    /// Claude Code's status line for the session it names on stdin; prints nothing when the gateway is down.
    Statusline(sessions::StatuslineArgs),
    /// Follow requests as they are recorded, one line each with its attempts.
    Tail(history::TailArgs),
    /// The running gateway's providers: state, success rate, latency, spend today.
    Status(status::StatusArgs),
    /// Open the running gateway's dashboard in the browser, signed in.
    Open(open::OpenArgs),
    /// Enable or disable a provider on the running gateway.
    Providers(status::ProvidersArgs),
    /// Provider keys in the OS keychain: set, list, rm.
    Keys(keys::KeysArgs),
    /// Team members with keys of their own: add, list, show, rotate, revoke, remove.
    Members(members::MembersArgs),
    /// Join a team's gateway as a member: the member key (read from stdin) to the keychain, the team first in the chain.
    Join(join::JoinArgs),
    /// Leave the team's gateway: the config back as it was, the member key removed.
    Leave(join::LeaveArgs),
    /// Point a coding tool at the gateway by editing its own settings (claude, codex, gemini, aider, opencode).
    Connect(connect::ConnectArgs),
    /// Put a connected tool's settings back as they were before `connect`.
    Disconnect(connect::DisconnectArgs),
    /// The tools `connect` knows: installed, connected, the base URL they use.
    Tools(connect::ToolsArgs),
    /// `export` lines pointing any other tool at the gateway: `eval "$(switchyard env)"`.
    Env(connect::EnvArgs),
    /// Configuration files.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Validate a config file; errors name the file, line and field.
    Check { file: PathBuf },
    /// Print the embedded default configuration.
    Default,
}

/// Options shared by commands that run a gateway.
#[derive(Debug, Clone, clap::Args)]
pub struct ListenArgs {
    /// Address to listen on, overriding the config's `server.listen`.
    #[arg(long, env = "SWITCHYARD_LISTEN")]
    listen: Option<SocketAddr>,
}

/// Runs the command line in `std::env::args`.
pub fn run() -> ExitCode {
    let cli = Cli::parse();
    // The demo prints one line per request; gateway logs would drown them,
    // and the faults its providers make on purpose (errors, rate limits,
    // a breaker tripping) show in those lines as a retry or a fallback, not
    // as warnings about an upstream.
    let default_level = if matches!(cli.command, Command::Demo(_)) {
        "warn,switchyard_core::proxy=error,switchyard_core::upstream=error"
    } else {
        "info"
    };
    let format = match cli.log_format {
        LogFormat::Human => logging::LogFormat::Human,
        LogFormat::Json => logging::LogFormat::Json,
    };
    logging::init(format, default_level);
    // One thread runs the gateway: measured on 2 cores it costs a fifth less
    // CPU per request and serves a fifth more requests a second than a
    // work-stealing pool (bench/run, docs/benchmarks.md), and a local gateway
    // is I/O-bound. Blocking work (keychain, config files) goes to
    // spawn_blocking; SQLite runs on its own threads.
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("switchyard: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Serve(args) => serve::run(args).await,
            Command::Demo(args) => demo::run(args).await,
            Command::History(args) => history::run(args).await,
            Command::Tail(args) => history::tail(args).await,
            Command::Sessions(args) => sessions::run(args).await,
            Command::Statusline(args) => sessions::statusline(args).await,
            Command::Keys(args) => keys::run(args).await,
            Command::Members(args) => members::run(args).await,
            Command::Status(args) => status::status(args).await,
            Command::Providers(args) => status::providers(args).await,
            Command::Open(args) => open::run(args).await,
            Command::Join(args) => join::join(args).await,
            Command::Leave(args) => join::leave(args),
            Command::Connect(args) => connect::connect(args),
            Command::Disconnect(args) => connect::disconnect(args),
            Command::Tools(args) => connect::list(args),
            Command::Env(args) => connect::env(args),
            Command::Config { command: ConfigCommand::Check { file } } => serve::check(&file),
            Command::Config { command: ConfigCommand::Default } => {
                print!("{}", switchyard_core::config::EMBEDDED_DEFAULT);
                Ok(())
            }
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("switchyard: {e:#}");
            ExitCode::from(2)
        }
    }
}
