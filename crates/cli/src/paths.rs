//! `--data-dir`, and where Switchyard keeps its files.

use std::path::PathBuf;

use anyhow::Result;
pub use switchyard_host::paths::*;

/// `--data-dir`, shared by every command that touches Switchyard's files.
#[derive(Debug, Clone, clap::Args)]
pub struct DataDirArgs {
    /// Where Switchyard keeps its data (defaults to the platform's app-data folder).
    #[arg(long, env = "SWITCHYARD_DATA_DIR", global = true)]
    pub data_dir: Option<PathBuf>,
}

impl DataDirArgs {
    /// The data directory, created if missing.
    pub fn resolve(&self) -> Result<PathBuf> {
        data_dir(self.data_dir.as_deref())
    }
}
