//! A PostgreSQL database of a test's own on the machine's server
//! (127.0.0.1:5432, trust auth, database `test`: `.ci/run` sets it up).
//! A missing server fails the test that asked for one: it never skips.

use std::process::Command;

/// Created fresh, dropped (with any connection still open) when this is.
#[derive(Debug)]
pub struct PgDatabase {
    name: String,
}

impl PgDatabase {
    pub fn create() -> PgDatabase {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let name = format!("sy_test_{}_{nanos}", std::process::id());
        psql("test", &format!("CREATE DATABASE {name}"));
        PgDatabase { name }
    }

    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:5432/{}", self.name)
    }

    /// Runs `sql` in this database; returns what psql printed (unaligned, tuples only).
    pub fn query(&self, sql: &str) -> String {
        psql(&self.name, sql)
    }
}

impl Drop for PgDatabase {
    fn drop(&mut self) {
        let _ = Command::new("psql")
            .args(["-h", "127.0.0.1", "-U", "postgres", "-d", "test", "-qAtc"])
            .arg(format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name))
            .output();
    }
}

fn psql(db: &str, sql: &str) -> String {
    let out = Command::new("psql")
        .args(["-h", "127.0.0.1", "-U", "postgres", "-d", db, "-qAtc", sql])
        .output()
        .unwrap_or_else(|e| panic!("psql (Debian's postgresql-client) must be installed; .ci/run installs it: {e}"));
    assert!(
        out.status.success(),
        "PostgreSQL must run on 127.0.0.1:5432 with trust auth (.ci/run starts it): {sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}
