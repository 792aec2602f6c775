//! A PostgreSQL database of a test's own on the machine's server
//! (127.0.0.1:5432, trust auth, created from the database `test`), dropped
//! with it. Without the server the tests fail; `.ci/run` starts it.

use std::process::Command;

pub struct Db {
    pub name: String,
}

impl Db {
    /// A new database named from `prefix`, this process and the clock.
    pub fn create(prefix: &str) -> Db {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
        let name = format!("{prefix}_{}_{nanos}", std::process::id());
        psql("test", &format!("CREATE DATABASE {name}"));
        Db { name }
    }

    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:5432/{}", self.name)
    }

    /// Runs `sql` here; what psql printed (unaligned, tuples only).
    pub fn query(&self, sql: &str) -> String {
        psql(&self.name, sql)
    }

    /// Out of reach (every connection ended, new ones refused) or back:
    /// what a restart looks like to the gateway, without stopping the
    /// server other tests share.
    pub fn reachable(&self, yes: bool) {
        psql("test", &format!("ALTER DATABASE {} ALLOW_CONNECTIONS {yes}", self.name));
        if !yes {
            psql(
                "test",
                &format!("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{}'", self.name),
            );
        }
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let _ = Command::new("psql")
            .args(["-h", "127.0.0.1", "-U", "postgres", "-d", "test", "-qAtc"])
            .arg(format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name))
            .output();
    }
}

pub fn psql(db: &str, sql: &str) -> String {
    let out = Command::new("psql")
        .args(["-h", "127.0.0.1", "-U", "postgres", "-d", db, "-qAtc", sql])
        .output()
        .expect("psql (Debian's postgresql-client) must be installed; .ci/run installs PostgreSQL");
    assert!(
        out.status.success(),
        "PostgreSQL must run on 127.0.0.1:5432 with trust auth (.ci/run starts it): {sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}
