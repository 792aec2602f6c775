//! A closed window leaves no WebKit process behind. The web process exits
//! with its webview; the network process serves the app's web context,
//! which Tauri keeps for the next window, so it would idle at some 66 MB all
//! day. It is stopped once no window is left, and WebKit starts a new one
//! when the next window loads (as it does after any network process crash).

use std::time::Duration;

use tauri::{AppHandle, Manager};

/// How long after the last window closed: its web process ends first.
const SETTLE: Duration = Duration::from_secs(2);

/// WebKit's network process, as `/proc/<pid>/stat` names it (15 bytes at most).
const NETWORK_PROCESS: &str = "WebKitNetworkPr";

/// Stops WebKit's network process once no window is left.
pub fn after_last_window(app: &AppHandle) {
    let app = app.clone();
    tauri::async_runtime::spawn(async move {
        tokio::time::sleep(SETTLE).await;
        if app.webview_windows().is_empty() {
            stop_children(NETWORK_PROCESS);
        }
    });
}

/// Sends SIGTERM to this process's children called `name`.
fn stop_children(name: &str) {
    for pid in children(std::process::id(), name) {
        let stopped = std::process::Command::new("kill").arg("-TERM").arg(pid.to_string()).status();
        match stopped {
            Ok(s) if s.success() => tracing::debug!(pid, "stopped {name}: no window is left"),
            Ok(s) => tracing::warn!(pid, "cannot stop {name}: kill exited {s}"),
            Err(e) => tracing::warn!(pid, "cannot stop {name}: {e}"),
        }
    }
}

/// The children of `parent` whose command is `name`, from `/proc` (Linux;
/// elsewhere there is no `/proc` and nothing is found).
fn children(parent: u32, name: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .is_some_and(|stat| parse_stat(&stat).is_some_and(|(comm, ppid)| ppid == parent && comm == name))
        })
        .collect()
}

/// `(comm, ppid)` from a `/proc/<pid>/stat` line: `pid (comm) state ppid …`,
/// where comm may itself hold spaces and parentheses.
fn parse_stat(stat: &str) -> Option<(&str, u32)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat.get(open + 1..close)?;
    let mut rest = stat.get(close + 1..)?.split_whitespace();
    let _state = rest.next()?;
    Some((comm, rest.next()?.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_gives_its_command_and_parent_even_with_odd_names() {
        let stat = "27047 (WebKitNetworkPr) S 22080 22077 22077 0 -1 4194560 4096 0 0 0 12 3";
        assert_eq!(parse_stat(stat), Some(("WebKitNetworkPr", 22080)));
        assert_eq!(parse_stat("9 (a (b) c) R 1 9 9"), Some(("a (b) c", 1)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn this_test_s_own_child_is_found_by_name_and_others_are_not() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let found = children(std::process::id(), "sleep");
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(found, vec![child.id()]);
        assert!(children(std::process::id(), NETWORK_PROCESS).is_empty());
    }
}
