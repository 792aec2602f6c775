//! A private `redis-server` per test, on a free port, keeping nothing on
//! disk: started, killed, frozen and started again empty as the tests of
//! team mode need. Without Debian's `redis-server` the tests fail.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A private Redis; killed when dropped.
pub struct Redis {
    child: Child,
    pub port: u16,
}

impl Redis {
    pub fn start() -> Redis {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        Redis::on(port)
    }

    fn on(port: u16) -> Redis {
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server (Debian's redis-server package) must be installed for team mode's tests");
        let redis = Redis { child, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "redis-server did not start on port {port}");
            std::thread::sleep(Duration::from_millis(20));
        }
        redis
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// Killed and started again, empty, on the same port: what a Redis
    /// restart without persistence leaves.
    pub fn restart(&mut self) {
        self.kill();
        self.start_again();
    }

    /// Killed, as a crash would; [`Redis::start_again`] brings it back empty.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn start_again(&mut self) {
        let fresh = Redis::on(self.port);
        let old = std::mem::replace(self, fresh);
        std::mem::forget(old);
    }

    /// SIGSTOP or SIGCONT: Redis frozen (out of reach) or back.
    pub fn signal(&self, signal: &str) {
        Command::new("kill").args([signal, &self.child.id().to_string()]).status().unwrap();
    }

    /// Leases on `provider` in namespace `ns` now (expired ones included).
    pub fn leases(&self, ns: &str, provider: &str) -> usize {
        let out = Command::new("redis-cli")
            .args(["-p", &self.port.to_string(), "ZCARD", &format!("{ns}:{{{provider}}}:leases")])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(usize::MAX)
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
