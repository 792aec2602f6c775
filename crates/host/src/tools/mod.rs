//! Pointing coding tools at the gateway: `switchyard connect <tool>` and
//! `disconnect`, shared with the desktop app.
//!
//! `connect` sets a few keys in the tool's own settings file, the way the
//! tool documents them, and leaves every other byte of the file alone. The
//! file as it was is saved first in `<data dir>/tools/`; `disconnect` puts
//! those bytes back (or removes a file `connect` created). A file changed
//! since `connect` is not overwritten unless asked: the changes would be lost.
//!
//! # Layout
//! - [`table`]: the tools, their files and the keys set in them.
//! - [`formats`] and [`json`]: in-place edits of each file format.
//! - this file: status, connect, disconnect and the backups.

pub mod formats;
pub mod json;
pub mod table;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

pub use table::{find, Tool, TOOLS};

/// Why a settings file could not be edited.
#[derive(Debug, thiserror::Error)]
pub enum EditError {
    #[error("not valid JSON here: {0}")]
    Json(String),
    #[error("not valid TOML here: {0}")]
    Toml(String),
    #[error("cannot write {0}")]
    Unsupported(&'static str),
}

/// Why connecting or disconnecting a tool failed; nothing was changed.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("unknown tool `{0}`: one of claude, codex, gemini, aider, opencode (`switchyard env` prints variables for any other)")]
    Unknown(String),
    #[error("no home folder to find the tools' settings in")]
    NoHome,
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: {source}; the file was left as it is")]
    Edit { path: PathBuf, source: EditError },
    #[error("{0} is not connected (by Switchyard)")]
    NotConnected(&'static str),
    #[error(
        "{path} changed since `connect`: restoring it would drop those changes. \
         The file from before `connect` is {backup}; `disconnect --force` restores it anyway"
    )]
    Changed { path: PathBuf, backup: String },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ToolError + '_ {
    move |source| ToolError::Io { path: path.to_path_buf(), source }
}

/// The home folder and the environment variables that move tools' folders
/// (`CODEX_HOME`, `CLAUDE_CONFIG_DIR`, `XDG_CONFIG_HOME`, `PATH`): passed in,
/// so tests and the desktop app decide what they are.
#[derive(Debug, Clone)]
pub struct Env {
    pub home: PathBuf,
    vars: BTreeMap<String, String>,
}

impl Env {
    pub fn new(home: PathBuf, vars: impl IntoIterator<Item = (String, String)>) -> Env {
        Env { home, vars: vars.into_iter().collect() }
    }

    /// This process's home folder and environment.
    pub fn from_process() -> Result<Env, ToolError> {
        let home = directories::BaseDirs::new().ok_or(ToolError::NoHome)?.home_dir().to_path_buf();
        Ok(Env::new(home, std::env::vars()))
    }

    /// A variable's value, when set and not empty.
    pub fn var(&self, name: &str) -> Option<String> {
        self.vars.get(name).filter(|v| !v.is_empty()).cloned()
    }

    /// Where `program` is on `PATH`, if it is.
    pub fn find_program(&self, program: &str) -> Option<PathBuf> {
        let path = self.var("PATH")?;
        std::env::split_paths(&path).map(|dir| dir.join(program)).find(|p| is_executable(p))
    }
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(path: &Path) -> bool {
    path.is_file() || path.with_extension("exe").is_file() || path.with_extension("cmd").is_file()
}

/// What a tool is pointed at.
#[derive(Debug, Clone)]
pub struct Target {
    /// The gateway's base URL without a path: `http://127.0.0.1:4141`.
    pub base: String,
    /// The local access token, when the gateway requires it; never a provider key.
    pub token: Option<SecretString>,
    /// The model to ask for, when the tool should not use its own default.
    pub model: Option<String>,
    /// The command that draws the tool's status line, for tools that have
    /// one (Claude Code's `statusLine`): `switchyard statusline`.
    pub status_line: Option<String>,
}

impl Target {
    pub fn openai_base(&self) -> String {
        format!("{}/v1", self.base)
    }

    /// What the tool sends as its key: the access token, or a placeholder
    /// for tools that refuse to start without one.
    pub fn key(&self) -> String {
        self.token.as_ref().map_or_else(|| "switchyard".to_string(), |t| t.expose_secret().to_string())
    }
}

/// Where `connect` keeps what it needs to undo itself: `<data dir>/tools`.
#[derive(Debug, Clone)]
pub struct Backups {
    dir: PathBuf,
}

/// What `connect` did to one file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
struct FileRecord {
    path: PathBuf,
    /// The saved original (a file name in the backups folder); none when `connect` created the file.
    backup: Option<String>,
    /// What `connect` wrote, to tell whether the file changed since.
    written: String,
    /// Folders `connect` created for the file, outermost first.
    created_dirs: Vec<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Manifest {
    files: Vec<FileRecord>,
}

impl Backups {
    pub fn new(data_dir: &Path) -> Backups {
        Backups { dir: data_dir.join("tools") }
    }

    fn manifest_path(&self, tool: &Tool) -> PathBuf {
        self.dir.join(format!("{}.json", tool.id))
    }

    fn manifest(&self, tool: &Tool) -> Result<Option<Manifest>, ToolError> {
        let path = self.manifest_path(tool);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| ToolError::Io { path, source: std::io::Error::other(e) }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(ToolError::Io { path, source: e }),
        }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

/// A tool as the Tools view and `switchyard tools` show it.
#[derive(Debug, Clone, Serialize)]
pub struct ToolStatus {
    pub id: &'static str,
    pub name: &'static str,
    /// Where the program is on `PATH`, if it is.
    pub installed: Option<PathBuf>,
    pub connected: bool,
    /// Connected, but a file was changed since (`disconnect` then needs `--force`).
    pub changed: bool,
    /// The base URL its settings name, if they name one.
    pub base_url: Option<String>,
    pub files: Vec<PathBuf>,
    pub user_agents: &'static [&'static str],
    pub note: Option<&'static str>,
}

/// Every tool's status, in the table's order.
pub fn statuses(env: &Env, backups: &Backups) -> Vec<ToolStatus> {
    TOOLS.iter().map(|tool| status(tool, env, backups)).collect()
}

pub fn status(tool: &'static Tool, env: &Env, backups: &Backups) -> ToolStatus {
    let files: Vec<PathBuf> = tool.files.iter().map(|f| f.place.path(env)).collect();
    let manifest = backups.manifest(tool).ok().flatten();
    let changed = manifest
        .as_ref()
        .is_some_and(|m| m.files.iter().any(|r| read(&r.path).ok().flatten().as_deref() != Some(r.written.as_str())));
    let (index, key) = tool.base_url_at;
    let base_url = tool.files.get(index).zip(files.get(index)).and_then(|(file, path)| {
        let text = read(path).ok().flatten()?;
        file.format.get(&text, key)
    });
    ToolStatus {
        id: tool.id,
        name: tool.name,
        installed: env.find_program(tool.program),
        connected: manifest.is_some(),
        changed,
        base_url,
        files,
        user_agents: tool.user_agents,
        note: tool.note,
    }
}

/// What `connect` or `disconnect` changed.
#[derive(Debug, Clone, Serialize)]
pub struct Changed {
    pub files: Vec<PathBuf>,
    pub note: Option<&'static str>,
}

/// Points `tool` at `target`. Connecting again (a new port, a new model)
/// edits the files again and keeps the backups from the first time.
pub fn connect(tool: &'static Tool, env: &Env, target: &Target, backups: &Backups) -> Result<Changed, ToolError> {
    let previous = backups.manifest(tool)?;
    // Every file is edited in memory first: one that cannot be parsed leaves all of them alone.
    let mut plans = Vec::new();
    for (index, file) in tool.files.iter().enumerate() {
        let path = settings_path(&file.place.path(env));
        let current = read(&path)?;
        let mut text = current.clone().unwrap_or_default();
        for edit in (file.edits)(target) {
            text = file
                .format
                .set(&text, edit.path, &edit.value)
                .map_err(|source| ToolError::Edit { path: path.clone(), source })?;
        }
        let earlier = previous.as_ref().and_then(|m| m.files.iter().find(|r| r.path == path)).cloned();
        plans.push((index, path, current, text, earlier));
    }
    switchyard_core::private::dir(&backups.dir).map_err(io(&backups.dir))?;
    let mut records = Vec::new();
    for (index, path, current, text, earlier) in plans {
        let record = match earlier {
            Some(r) => FileRecord { written: text.clone(), ..r },
            None => {
                let backup = match &current {
                    Some(original) => {
                        let name = format!("{}.{index}.orig", tool.id);
                        switchyard_core::private::write(&backups.file(&name), original.as_bytes())
                            .map_err(io(&backups.file(&name)))?;
                        Some(name)
                    }
                    None => None,
                };
                FileRecord { path: path.clone(), backup, written: text.clone(), created_dirs: missing_dirs(&path) }
            }
        };
        records.push(record);
        // The manifest is saved before the file changes, so a crash in between can still be undone.
        save_manifest(backups, tool, &records)?;
        write_keeping_mode(&path, &text)?;
    }
    Ok(Changed { files: records.into_iter().map(|r| r.path).collect(), note: tool.note })
}

/// Undoes `connect`: each file back as it was, byte for byte.
pub fn disconnect(tool: &'static Tool, backups: &Backups, force: bool) -> Result<Changed, ToolError> {
    let manifest = backups.manifest(tool)?.ok_or(ToolError::NotConnected(tool.name))?;
    if !force {
        for record in &manifest.files {
            if read(&record.path)?.as_deref() != Some(record.written.as_str()) {
                let backup = record.backup.as_ref().map_or_else(
                    || "none: connect created the file".to_string(),
                    |b| backups.file(b).display().to_string(),
                );
                return Err(ToolError::Changed { path: record.path.clone(), backup });
            }
        }
    }
    for record in &manifest.files {
        match &record.backup {
            Some(name) => {
                let original = std::fs::read(backups.file(name)).map_err(io(&backups.file(name)))?;
                write_keeping_mode(&record.path, &original)?;
            }
            None => match std::fs::remove_file(&record.path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(ToolError::Io { path: record.path.clone(), source: e })
                }
                _ => {
                    // Only folders left empty go; anything else in them stays.
                    for dir in record.created_dirs.iter().rev() {
                        let _ = std::fs::remove_dir(dir);
                    }
                }
            },
        }
    }
    for name in manifest.files.iter().filter_map(|r| r.backup.as_ref()) {
        let _ = std::fs::remove_file(backups.file(name));
    }
    let path = backups.manifest_path(tool);
    std::fs::remove_file(&path).map_err(io(&path))?;
    Ok(Changed { files: manifest.files.into_iter().map(|r| r.path).collect(), note: None })
}

/// The file edits go to: a symlinked settings file (a dotfiles repository)
/// is edited where it points, so the link stays a link.
fn settings_path(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

fn read(path: &Path) -> Result<Option<String>, ToolError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ToolError::Io { path: path.to_path_buf(), source: e }),
    }
}

/// The folders above `path` that do not exist yet, outermost first.
fn missing_dirs(path: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = path
        .ancestors()
        .skip(1)
        .take_while(|d| !d.as_os_str().is_empty() && !d.exists())
        .map(Path::to_path_buf)
        .collect();
    dirs.reverse();
    dirs
}

fn save_manifest(backups: &Backups, tool: &Tool, files: &[FileRecord]) -> Result<(), ToolError> {
    let path = backups.manifest_path(tool);
    let text = serde_json::to_string_pretty(&Manifest { files: files.to_vec() })
        .map_err(|e| ToolError::Io { path: path.clone(), source: std::io::Error::other(e) })?;
    switchyard_core::private::write(&path, text.as_bytes()).map_err(io(&path))
}

/// Replaces `path`'s contents in one step (a temporary file renamed over
/// it), with the old file's permissions; a new file is owner-only, as it
/// may hold the access token.
fn write_keeping_mode(path: &Path, contents: impl AsRef<[u8]>) -> Result<(), ToolError> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let mode = std::fs::metadata(path).ok().map(|m| m.permissions());
    let mut file = tempfile::NamedTempFile::new_in(dir).map_err(io(dir))?;
    file.write_all(contents.as_ref()).map_err(io(path))?;
    file.as_file().sync_all().map_err(io(path))?;
    if let Some(permissions) = mode {
        file.as_file().set_permissions(permissions).map_err(io(path))?;
    }
    file.persist(path).map_err(|e| ToolError::Io { path: path.to_path_buf(), source: e.error })?;
    Ok(())
}

#[cfg(test)]
mod tests;
