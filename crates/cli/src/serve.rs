//! `switchyard serve` and `switchyard config check`.

use std::path::{Path, PathBuf};

use anyhow::Result;
use switchyard_core::Config;
pub use switchyard_host::assemble::*;

use crate::paths::DataDirArgs;
use crate::ListenArgs;

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Config file (TOML). Without one, `<data-dir>/config.toml` is used when
    /// it exists (the dashboard writes it), else the embedded default.
    #[arg(long, short, env = "SWITCHYARD_CONFIG")]
    config: Option<PathBuf>,
    #[command(flatten)]
    listen: ListenArgs,
    #[command(flatten)]
    data: DataDirArgs,
}

pub fn check(file: &Path) -> Result<()> {
    let config = Config::load(file)?;
    println!(
        "{}: ok ({} providers, {} routes, listen {})",
        file.display(),
        config.providers.len(),
        config.routes.len(),
        config.server.listen
    );
    Ok(())
}

pub async fn run(args: ServeArgs) -> Result<()> {
    let Setup { config, files, tokens } = setup(args.config, args.data.data_dir.as_deref(), args.listen.listen)?;
    let listener = bind(config.server.listen).await?;
    run_gateway(listener, config, secret_stores(), files, tokens, shutdown_signal()).await
}
