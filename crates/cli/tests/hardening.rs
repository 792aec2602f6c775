//! The promises of the local endpoint that hold at the process boundary:
//! overrides cannot open the port to the network, the CLI never hands the
//! admin token to a process that merely holds the port, and the data
//! directory is owner-only whatever the umask.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

mod support;

use support::{switchyard, Served};

/// A process that holds a port and keeps every byte it is sent. With a
/// `relay_to`, it passes each connection on to that address (a real
/// gateway elsewhere) and its answers back, as a man in the middle would.
struct Squatter {
    addr: std::net::SocketAddr,
    seen: Arc<Mutex<Vec<u8>>>,
}

impl Squatter {
    fn start(relay_to: Option<String>) -> Squatter {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let seen: Arc<Mutex<Vec<u8>>> = Arc::default();
        let log = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(client) = stream else { continue };
                let (log, relay_to) = (log.clone(), relay_to.clone());
                std::thread::spawn(move || match relay_to {
                    Some(target) => relay(client, &target, &log),
                    None => answer_anything(client, &log),
                });
            }
        });
        Squatter { addr, seen }
    }

    fn saw(&self, needle: &str) -> bool {
        let seen = self.seen.lock().unwrap();
        String::from_utf8_lossy(&seen).contains(needle)
    }

    fn saw_anything(&self) -> bool {
        !self.seen.lock().unwrap().is_empty()
    }
}

/// Answers every request 200 with a made-up proof, as an impostor would.
fn answer_anything(mut client: TcpStream, log: &Mutex<Vec<u8>>) {
    let mut buf = [0u8; 8192];
    while let Ok(n) = client.read(&mut buf) {
        if n == 0 {
            return;
        }
        log.lock().unwrap().extend_from_slice(&buf[..n]);
        let body = r#"{"proof":"00","ticket":"t","path":"/ui/login?ticket=t"}"#;
        let head =
            format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n", body.len());
        if client.write_all(head.as_bytes()).and_then(|()| client.write_all(body.as_bytes())).is_err() {
            return;
        }
    }
}

fn relay(client: TcpStream, target: &str, log: &Arc<Mutex<Vec<u8>>>) {
    let Ok(server) = TcpStream::connect(target) else { return };
    let (mut c_read, mut s_write) = (client.try_clone().unwrap(), server.try_clone().unwrap());
    let upstream_log = log.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        while let Ok(n) = c_read.read(&mut buf) {
            // Kept before it is passed on: once passed on, the answer can
            // reach the client, and the test look, before this thread runs.
            upstream_log.lock().unwrap().extend_from_slice(&buf[..n]);
            if n == 0 || s_write.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = s_write.shutdown(std::net::Shutdown::Write);
    });
    let (mut s_read, mut c_write) = (server, client);
    let _ = std::io::copy(&mut s_read, &mut c_write);
}

fn admin_token(data: &std::path::Path) -> String {
    std::fs::read_to_string(data.join("admin-token")).unwrap().trim().to_string()
}

fn empty_config(dir: &tempfile::TempDir) -> std::path::PathBuf {
    let path = dir.path().join("switchyard.toml");
    std::fs::write(&path, "").unwrap();
    path
}

#[test]
fn the_cli_sends_its_token_to_no_impostor() {
    let data = tempfile::tempdir().unwrap();
    let squatter = Squatter::start(None);
    for args in [vec!["status"], vec!["open", "--print"], vec!["providers", "disable", "openai"]] {
        let out = switchyard()
            .args(&args)
            .args(["--listen", &squatter.addr.to_string(), "--data-dir"])
            .arg(data.path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("is not this user's Switchyard"), "{args:?}: {err}");
        assert!(err.contains("the token was not sent"), "{args:?}: {err}");
    }
    assert!(squatter.saw("/admin/whoami"), "the challenge went out");
    assert!(!squatter.saw(&admin_token(data.path())), "the impostor never saw the admin token");
    assert!(!squatter.saw("authorization"), "nor any credential header");
}

#[test]
fn a_relay_to_the_real_gateway_does_not_pass_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = empty_config(&dir);
    let data = dir.path().join("data");
    let served = Served::start(&config, &data, &[]);
    let squatter = Squatter::start(Some(served.addr.clone()));
    let out = switchyard()
        .args(["status", "--listen", &squatter.addr.to_string(), "--data-dir"])
        .arg(&data)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("is not this user's Switchyard"), "{err}");
    assert!(squatter.saw_anything(), "the relay carried the challenge");
    assert!(!squatter.saw(&admin_token(&data)), "the relay never saw the admin token");

    // The same command straight at the gateway proves it and gets its answer.
    let out = switchyard().args(["status", "--listen", &served.addr, "--data-dir"]).arg(&data).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("provider"));
    served.stop();
}

#[test]
fn a_listen_override_off_loopback_needs_the_access_token() {
    let dir = tempfile::tempdir().unwrap();
    let config = empty_config(&dir);
    let refused = |cmd: &mut std::process::Command, addr: &str| {
        let out = cmd.arg("--config").arg(&config).arg("--data-dir").arg(dir.path()).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(&format!("server.listen: {addr} is reachable from other machines")), "{err}");
        assert!(err.contains("set [server] access_token = true"), "{err}");
    };
    refused(switchyard().args(["serve", "--listen", "0.0.0.0:0"]), "0.0.0.0:0");
    refused(switchyard().arg("serve").env("SWITCHYARD_LISTEN", "0.0.0.0:0"), "0.0.0.0:0");
    refused(switchyard().args(["serve", "--listen", "[::]:0"]).env("SWITCHYARD_LISTEN", "127.0.0.1:0"), "[::]:0");
    // The file's own check says the same of the same address.
    let file = dir.path().join("open.toml");
    std::fs::write(&file, "[server]\nlisten = \"0.0.0.0:0\"\n").unwrap();
    let out = switchyard().args(["config", "check"]).arg(&file).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("0.0.0.0:0 is reachable from other machines"));

    // With the access token required, the override is allowed.
    let guarded = dir.path().join("guarded.toml");
    std::fs::write(&guarded, "[server]\naccess_token = true\n").unwrap();
    let mut child = switchyard()
        .args(["serve", "--listen", "0.0.0.0:0", "--config"])
        .arg(&guarded)
        .arg("--data-dir")
        .arg(dir.path())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(child.stderr.take().unwrap()));
    assert!(lines.any(|l| l.unwrap().contains("listening on")), "serves once the token is required");
    child.kill().unwrap();
    let _ = child.wait();
}

#[cfg(unix)]
#[test]
fn the_data_directory_is_owner_only_whatever_the_umask() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let config = empty_config(&dir);
    let data = dir.path().join("data");
    // An earlier run's file, left readable by everyone.
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("state.json"), "{\"enabled\":{}}").unwrap();
    std::fs::set_permissions(data.join("state.json"), std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();

    // `serve` under a permissive umask, through a shell that sets it.
    let mut cmd = std::process::Command::new("sh");
    cmd.arg("-c")
        .arg("umask 000; exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_switchyard"))
        .args(["serve", "--listen", "127.0.0.1:0", "--log-format", "json", "--config"])
        .arg(&config)
        .arg("--data-dir")
        .arg(&data)
        .env_remove("SWITCHYARD_LISTEN")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(child.stderr.take().unwrap()));
    let addr = lines
        .find_map(|l| l.unwrap().split("listening on http://").nth(1).map(|a| a.trim_end_matches('"').to_string()))
        .map(|a| a.split('"').next().unwrap().to_string())
        .unwrap();
    // A request, so history writes its database and WAL.
    let _ = TcpStream::connect(&addr).and_then(|mut s| {
        s.write_all(b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n")?;
        let mut sink = Vec::new();
        s.read_to_end(&mut sink)
    });
    let status = switchyard().args(["status", "--listen", &addr, "--data-dir"]).arg(&data).output().unwrap();
    assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
    std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    let _ = child.wait();

    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&data), 0o700, "data dir");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&data).unwrap() {
        let path = entry.unwrap().path();
        files.push(path.file_name().unwrap().to_string_lossy().to_string());
        assert_eq!(mode(&path), 0o600, "{}", path.display());
    }
    for expected in ["admin-token", "switchyard.db", "state.json", "switchyard.db.spool.lock"] {
        assert!(files.iter().any(|f| f == expected), "{expected} in {files:?}");
    }
}
