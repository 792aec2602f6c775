//! The config parser: TOML text from the config file (written by the user,
//! by the dashboard's edits, or by anyone who can write the file) into a
//! validated config.
//!
//! Input: the text (bytes that are not UTF-8 are skipped: reading the file
//! fails before parsing).
//! Checked: parsing either succeeds or names a place inside the text (a line
//! that exists, a column within that line or just past its end); an
//! accepted config never listens off loopback without the access token (the
//! promise docs/security.md makes) and keeps every number at least the minimum its check
//! asks for, so no large number wrapped or was cut on its way in.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use switchyard_core::config::{Config, ConfigError};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match Config::parse(text, Path::new("fuzz.toml")) {
        Ok(config) => {
            let server = &config.server;
            assert!(server.listen.ip().is_loopback() || server.access_token, "off loopback only with the token");
            assert!(server.max_body_bytes >= 1024 && server.max_header_bytes >= 1024);
            assert!(server.max_connections >= 1 && server.rate_limit_per_minute >= 1);
            assert!(config.history.max_size_bytes >= 1024 * 1024 && config.history.body_limit >= 1);
        }
        Err(e @ ConfigError::Invalid { line, column, .. }) => {
            let lines: Vec<&str> = text.split('\n').collect();
            assert!((1..=lines.len()).contains(&line), "line {line} of {}", lines.len());
            let width = lines[line - 1].len();
            assert!((1..=width + 1).contains(&column), "column {column} of a {width}-byte line");
            assert!(e.to_string().starts_with(&format!("fuzz.toml:{line}:{column}: ")));
        }
        Err(e) => panic!("parsing text gave an error about no place in it: {e}"),
    }
});
