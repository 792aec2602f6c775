//! Embeds the migrations and the built dashboard (`ui/dist`) in the crate,
//! so a `switchyard` binary serves its dashboard with no files beside it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    // A new migration file must rebuild the crate that embeds them, for
    // either database.
    println!("cargo:rerun-if-changed=migrations");
    println!("cargo:rerun-if-changed=migrations-pg");
    // Read when the script runs, not when it was compiled: a build script
    // compiled for a copy of this tree elsewhere (a seeded target directory)
    // must still embed this tree's dashboard.
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_string());
    let dist = Path::new(&manifest).join("../../ui/dist");
    println!("cargo:rerun-if-changed={}", dist.display());
    let mut files = Vec::new();
    collect(&dist, &mut files);
    files.sort();
    let mut table = String::from("pub static ASSETS: &[(&str, &[u8])] = &[\n");
    for file in &files {
        println!("cargo:rerun-if-changed={}", file.display());
        let Ok(relative) = file.strip_prefix(&dist) else { continue };
        let name = relative.to_string_lossy().replace('\\', "/");
        let _ = writeln!(table, "    ({name:?}, include_bytes!({:?})),", file.display().to_string());
    }
    table.push_str("];\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_else(|_| ".".into())).join("ui_assets.rs");
    if let Err(e) = std::fs::write(&out, table) {
        println!("cargo:warning=cannot write {}: {e}", out.display());
    }
}

/// Every file under `dir`; nothing when the dashboard has not been built.
fn collect(dir: &Path, into: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            println!("cargo:rerun-if-changed={}", path.display());
            collect(&path, into);
        } else {
            into.push(path);
        }
    }
}
