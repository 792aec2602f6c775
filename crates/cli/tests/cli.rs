//! The `switchyard` binary as a user runs it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

mod support;

use support::switchyard;

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn broken_config_names_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        &dir,
        "broken.toml",
        "[server]\nlisten = \"127.0.0.1:4141\"\n\n[[providers]]\nname = \"a\"\nkind = \"openia\"\nbase_url = \"http://x/v1\"\n",
    );
    for args in [vec!["config", "check"], vec!["serve", "--config"]] {
        let out = switchyard().args(&args).arg(&path).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        let expected = format!("{}:6:8: providers[0].kind", path.display());
        assert!(err.contains(&expected), "{args:?}: {err}");
        assert!(err.contains("openia"), "{err}");
    }
    let missing = switchyard().args(["config", "check", "/nonexistent/switchyard.toml"]).output().unwrap();
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("/nonexistent/switchyard.toml: cannot read"));
}

#[test]
fn valid_config_and_embedded_default_check_out() {
    let out = switchyard().args(["config", "default"]).output().unwrap();
    assert!(out.status.success());
    let dir = tempfile::tempdir().unwrap();
    let path = write(&dir, "default.toml", &String::from_utf8(out.stdout).unwrap());
    let out = switchyard().args(["config", "check"]).arg(&path).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains(": ok ("));
}

#[test]
fn port_in_use_says_so_and_how_to_fix_it() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let out = switchyard().args(["serve", "--listen", &addr, "--data-dir"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("cannot listen on {addr}")), "{err}");
    assert!(err.contains("--listen"), "{err}");
}

#[test]
fn serve_answers_and_stops_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = switchyard()
        .args(["serve", "--listen", "127.0.0.1:0", "--log-format", "json", "--data-dir"])
        .arg(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines.next().expect("serve exited before listening").unwrap();
        let json: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|_| panic!("not JSON: {line}"));
        if let Some(rest) = json["message"].as_str().and_then(|m| m.strip_prefix("listening on http://")) {
            break rest.to_string();
        }
    };
    let mut conn = std::net::TcpStream::connect(&addr).unwrap();
    conn.write_all(b"GET /healthz HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n").unwrap();
    let mut reply = String::new();
    conn.read_to_string(&mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(reply.ends_with("{\"status\":\"ok\"}"), "{reply}");
    Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "serve did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
}

/// The README's first command stops on Ctrl-C: its traffic with it, within
/// the gateway's grace period, and without a shower of failed requests.
#[test]
fn the_demo_exits_on_ctrl_c() {
    let dir = tempfile::tempdir().unwrap();
    let mut demo = switchyard()
        .args(["demo", "--listen", "127.0.0.1:0", "--rate", "20", "--data-dir"])
        .arg(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(demo.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    while seen.iter().filter(|l: &&String| l.contains(" attempts ")).count() < 3 {
        seen.push(lines.next().expect("the demo stopped before sending traffic").unwrap());
    }
    Command::new("kill").args(["-INT", &demo.id().to_string()]).status().unwrap();
    let asked = std::time::Instant::now();
    // The gateway's grace period for in-flight requests.
    let grace = Duration::from_secs(10);
    let status = loop {
        if let Some(status) = demo.try_wait().unwrap() {
            break status;
        }
        if asked.elapsed() > grace {
            let _ = demo.kill();
            panic!("the demo still runs {grace:?} after Ctrl-C");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");
    let after: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(!after.iter().any(|l| l.starts_with("ERR")), "requests went on after Ctrl-C: {after:?}");
    for line in seen.iter().chain(&after).filter(|l| l.contains("← fallback")) {
        assert!(!line.contains("via demo-openai ") && !line.contains("via demo-anthropic "), "not a fallback: {line}");
    }
}

#[test]
fn the_demo_s_console_is_its_request_log_not_warnings_about_the_faults_it_makes() {
    let dir = tempfile::tempdir().unwrap();
    let demo = switchyard()
        .args(["demo", "--listen", "127.0.0.1:0", "--requests", "20", "--rate", "200", "--data-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(demo.status.success(), "{}", String::from_utf8_lossy(&demo.stderr));
    let (out, log) = (String::from_utf8_lossy(&demo.stdout), String::from_utf8_lossy(&demo.stderr));
    let faults = out.lines().filter(|l| l.contains('←')).count();
    eprintln!("the demo's providers failed {faults} of 20 requests' first attempts on purpose");
    assert!(!log.contains(" WARN "), "the faults show in the request lines, not as warnings: {log}");
}

#[test]
fn the_demo_records_history_that_the_history_command_reads() {
    let dir = tempfile::tempdir().unwrap();
    let demo = switchyard()
        .args(["demo", "--listen", "127.0.0.1:0", "--requests", "6", "--rate", "50", "--data-dir"])
        .arg(dir.path())
        .env("RUST_LOG", "info")
        .output()
        .unwrap();
    assert!(demo.status.success(), "{}", String::from_utf8_lossy(&demo.stderr));
    assert_eq!(String::from_utf8_lossy(&demo.stdout).lines().filter(|l| l.starts_with("200 ")).count(), 6);
    let log = String::from_utf8_lossy(&demo.stderr);
    assert!(log.contains("demo:") && !log.contains('\x1b'), "no colour codes in a log that is not a terminal: {log:?}");

    let out = switchyard().args(["history", "--json", "--data-dir"]).arg(dir.path()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let page: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let requests = page["requests"].as_array().unwrap();
    assert_eq!(requests.len(), 6);
    let id = requests[0]["id"].as_str().unwrap();

    let out = switchyard().args(["history", "show", id, "--data-dir"]).arg(dir.path()).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with(id) && text.contains("#1 "), "{text}");

    let table = switchyard().args(["history", "--data-dir"]).arg(dir.path()).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&table.stdout).lines().count(), 7, "a header and six rows");

    let rebuilt = switchyard().args(["history", "rebuild", "--data-dir"]).arg(dir.path()).output().unwrap();
    assert!(rebuilt.status.success(), "{}", String::from_utf8_lossy(&rebuilt.stderr));
    let text = String::from_utf8_lossy(&rebuilt.stdout);
    assert!(text.starts_with("rebuilt the rollups and filter entries of 6 requests"), "{text}");
    // The gateway opened its response cache beside the history: purged with it.
    assert!(dir.path().join("switchyard.cache.db").exists());
    let purged = switchyard().args(["history", "purge", "--data-dir"]).arg(dir.path()).output().unwrap();
    assert!(purged.status.success(), "{}", String::from_utf8_lossy(&purged.stderr));
    assert_eq!(String::from_utf8_lossy(&purged.stdout).trim(), "deleted 6 requests and 0 cached answers");
    let table = switchyard().args(["history", "--data-dir"]).arg(dir.path()).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&table.stdout).lines().count(), 1, "only the header");
    let token = std::fs::read_to_string(dir.path().join("admin-token")).unwrap();
    assert!(token.starts_with("sya-") && token.len() == 68);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("admin-token")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
