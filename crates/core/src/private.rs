//! Files only their owner can read. The data directory holds the tokens, the
//! history (prompts' metadata, spend, error texts) and, when enabled, request
//! bodies: another user of the machine must read none of it, whatever the
//! umask of the process that created it. On Unix the directory is 0700 and
//! every file in it 0600, set explicitly rather than trusted to the umask,
//! and files left more open by an earlier run are tightened when the
//! directory is opened. (On Windows, files under the user's profile inherit
//! its owner-only ACL; nothing here changes ACLs.)

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Creates `dir` (and its parents) if missing and makes it owner-only,
/// with every file already in it.
pub fn dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    restrict(dir, 0o700)?;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            restrict(&entry.path(), 0o600)?;
        }
    }
    Ok(())
}

/// Open options that create a file owner-only (the mode applies only when
/// the file is created; [`file`] tightens an existing one).
pub fn options() -> OpenOptions {
    let mut options = OpenOptions::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options
}

/// Makes sure `path` exists and is owner-only. SQLite creates its `-wal`
/// and `-shm` files with the database file's permissions, so a database
/// created through this stays private with its companions.
pub fn file(path: &Path) -> std::io::Result<()> {
    options().create(true).truncate(false).write(true).open(path)?;
    restrict(path, 0o600)
}

/// `path` with `suffix` added to its file name (SQLite's `-wal` and `-shm`,
/// the spool's `.spool`).
pub fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(suffix);
    path.with_file_name(name)
}

/// A SQLite database's files: the database, and the `-wal` and `-shm`
/// SQLite keeps beside it.
pub fn database_files(path: &Path) -> [PathBuf; 3] {
    [path.to_path_buf(), with_suffix(path, "-wal"), with_suffix(path, "-shm")]
}

/// Makes a database owner-only before SQLite opens it: the file, created if
/// missing, and those of its companions that exist (SQLite gives new ones
/// the database file's permissions). An error names the file it was about.
pub fn database(path: &Path) -> Result<(), (PathBuf, std::io::Error)> {
    for f in database_files(path) {
        if f == path || f.exists() {
            file(&f).map_err(|e| (f, e))?;
        }
    }
    Ok(())
}

/// Writes `bytes` to `path` through an owner-only temporary file and a
/// rename, so a reader sees the old or the new content, never a part.
pub fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(".tmp");
    let tmp = path.with_file_name(tmp_name);
    let mut f: File = options().create(true).truncate(true).write(true).open(&tmp)?;
    restrict(&tmp, 0o600)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

#[cfg(unix)]
fn restrict(path: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

#[cfg(not(unix))]
fn restrict(_path: &Path, _mode: u32) -> std::io::Result<()> {
    Ok(())
}

#[cfg(all(test, unix))]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn the_directory_and_what_it_holds_become_owner_only() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("data");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let old = dir.join("switchyard.db");
        std::fs::write(&old, b"x").unwrap();
        std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o644)).unwrap();
        super::dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&old), 0o600);

        write(&dir.join("state.json"), b"{}").unwrap();
        assert_eq!(mode(&dir.join("state.json")), 0o600);
        assert_eq!(std::fs::read(dir.join("state.json")).unwrap(), b"{}");
        file(&dir.join("new.db")).unwrap();
        assert_eq!(mode(&dir.join("new.db")), 0o600);
    }
}
