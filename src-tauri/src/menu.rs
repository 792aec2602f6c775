//! The tray menu as data: a pure function of the gateway's state, so every
//! state is tested without a display. `tray.rs` turns it into the real menu.
//! Menu ids and their meanings are defined here and nowhere else.

use std::net::SocketAddr;
use std::time::Duration;

use switchyard_core::telemetry::GatewayEvent;
use switchyard_core::telemetry::ProviderStateName::{
    self, Degraded, Disabled, Healthy, NoKey, Open, RateLimited, Unknown, Unreachable,
};

use crate::update::Phase;

/// Menu item ids, and the commands they stand for.
pub mod ids {
    pub const STATUS: &str = "status";
    pub const COPY_OPENAI: &str = "copy-openai";
    pub const COPY_ANTHROPIC: &str = "copy-anthropic";
    pub const PAUSE: &str = "pause";
    pub const OPEN: &str = "open-dashboard";
    pub const AUTOSTART: &str = "autostart";
    pub const NOTIFY: &str = "notify";
    pub const QUIT: &str = "quit";
    pub const TOOLS: &str = "tools";
    pub const UPDATE_CHECK: &str = "update-check";
    pub const UPDATE_INSTALL: &str = "update-install";
    const PROVIDER: &str = "provider:";
    const TOOL: &str = "tool:";
    const BUDGET: &str = "budget:";

    /// The label of a budget that blocks.
    pub fn budget(name: &str) -> String {
        format!("{BUDGET}{name}")
    }

    /// The check item of one coding tool (connected to the gateway or not).
    pub fn tool(id: &str) -> String {
        format!("{TOOL}{id}")
    }

    /// The check item of one provider.
    pub fn provider(name: &str) -> String {
        format!("{PROVIDER}{name}")
    }

    /// What a clicked item asks for.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum Command {
        CopyOpenAi,
        CopyAnthropic,
        TogglePause,
        OpenDashboard,
        ToggleAutostart,
        ToggleNotify,
        Quit,
        ToggleProvider(String),
        /// Connect or disconnect a coding tool (`switchyard connect`).
        ToggleTool(String),
        CheckUpdates,
        InstallUpdate,
    }

    pub fn command(id: &str) -> Option<Command> {
        Some(match id {
            COPY_OPENAI => Command::CopyOpenAi,
            COPY_ANTHROPIC => Command::CopyAnthropic,
            PAUSE => Command::TogglePause,
            OPEN => Command::OpenDashboard,
            AUTOSTART => Command::ToggleAutostart,
            NOTIFY => Command::ToggleNotify,
            QUIT => Command::Quit,
            UPDATE_CHECK => Command::CheckUpdates,
            UPDATE_INSTALL => Command::InstallUpdate,
            other => match other.strip_prefix(TOOL) {
                Some(tool) => Command::ToggleTool(tool.to_string()),
                None => Command::ToggleProvider(other.strip_prefix(PROVIDER)?.to_string()),
            },
        })
    }
}

/// Whether the gateway is serving.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    Starting,
    Listening(SocketAddr),
    Paused(SocketAddr),
    /// Another Switchyard already serves this address; the window shows it.
    Attached(SocketAddr),
    /// Could not serve: the reason and the fix, in words.
    Failed(String),
}

/// One provider as the menu shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderLine {
    pub name: String,
    pub enabled: bool,
    pub state: ProviderStateName,
    pub latency_p50_ms: Option<u64>,
    /// When a rate limit or an open breaker ends (Unix ms).
    pub until_ms: Option<i64>,
    /// The last failed probe's error and when it was sent (Unix ms).
    pub probe_failed: Option<(String, i64)>,
}

/// One coding tool as the "Connect tools" submenu shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolLine {
    pub id: String,
    pub name: String,
    pub installed: bool,
    pub connected: bool,
}

/// A `block` budget past its limit, as the menu shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetLine {
    pub name: String,
    pub scope: String,
    /// When its period ends (Unix ms).
    pub until_ms: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TrayState {
    pub status: Status,
    pub providers: Vec<ProviderLine>,
    pub tools: Vec<ToolLine>,
    pub autostart: bool,
    /// Desktop notifications for the gateway's alerts.
    pub notify: bool,
    /// Budgets that refuse requests now.
    pub blocking: Vec<BudgetLine>,
    pub now_ms: i64,
    /// Updates; `None` when no update endpoint is configured.
    pub update: Option<Phase>,
}

impl TrayState {
    /// How soon the menu's words go stale by the clock alone: a countdown
    /// or an "ago" shown in seconds changes every few seconds, one in
    /// minutes every half minute; without either, only events change it
    /// (and tools installed or connected outside the app, looked at once
    /// a minute). Traffic's latencies are the caller's to add.
    pub fn redraw_in(&self) -> Duration {
        let moments = self
            .providers
            .iter()
            .filter_map(|p| match (p.state, p.until_ms, &p.probe_failed) {
                (RateLimited | Open, Some(until), _) => Some(until - self.now_ms),
                (Unreachable, _, Some((_, at_ms))) => Some(self.now_ms - at_ms),
                _ => None,
            })
            .chain(self.blocking.iter().map(|b| b.until_ms - self.now_ms));
        let soonest = moments.map(|ms| ms.max(0).div_euclid(1000)).min();
        match soonest {
            Some(0..=89) => COUNTING,
            Some(90..=5399) => Duration::from_secs(30),
            _ => IDLE,
        }
    }
}

/// How often the menu is drawn while it shows seconds counting.
pub const COUNTING: Duration = Duration::from_secs(5);
/// How often it is drawn when nothing on it moves by itself.
pub const IDLE: Duration = Duration::from_secs(60);

/// The tray icon's overall health.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overall {
    Healthy,
    Degraded,
    Down,
    Paused,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// Text that does nothing when clicked.
    Label {
        id: String,
        text: String,
    },
    Action {
        id: String,
        text: String,
        enabled: bool,
    },
    Check {
        id: String,
        text: String,
        checked: bool,
        enabled: bool,
    },
    Separator,
    Submenu {
        id: String,
        text: String,
        items: Vec<Item>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Menu {
    pub items: Vec<Item>,
    pub overall: Overall,
    pub tooltip: String,
}

fn glyph(state: ProviderStateName) -> &'static str {
    match state {
        Healthy => "●",
        Degraded => "◐",
        RateLimited => "◔",
        Open => "✕",
        NoKey => "⚠",
        Disabled => "○",
        Unknown => "◌",
        Unreachable => "✕",
    }
}

/// "42 s", "3 min", "2 h".
fn left(until_ms: i64, now_ms: i64) -> String {
    let s = (until_ms - now_ms).max(0).div_euclid(1000);
    match s {
        0..=89 => format!("{s} s"),
        90..=5399 => format!("{} min", (s + 30) / 60),
        _ => format!("{} h", (s + 1800) / 3600),
    }
}

/// "openai — healthy · 320 ms", "groq — breaker open · 42 s",
/// "ollama — unreachable · connection refused, 12 s ago".
pub fn provider_label(p: &ProviderLine, now_ms: i64) -> String {
    let words = match p.state {
        Healthy => "healthy",
        Degraded => "degraded",
        RateLimited => "rate-limited",
        Open => "breaker open",
        NoKey => "no key",
        Disabled => "disabled",
        Unknown => "not checked yet",
        Unreachable => "unreachable",
    };
    let detail = match (p.state, p.until_ms, p.latency_p50_ms) {
        (RateLimited | Open, Some(until), _) => format!(" · {}", left(until, now_ms)),
        (Unreachable, _, _) => match &p.probe_failed {
            Some((error, at_ms)) => format!(" · {error}, {} ago", left(now_ms, *at_ms)),
            None => String::new(),
        },
        (Healthy | Degraded, _, Some(ms)) => format!(" · {ms} ms"),
        _ => String::new(),
    };
    format!("{} {} — {words}{detail}", glyph(p.state), p.name)
}

pub fn overall(state: &TrayState) -> Overall {
    match state.status {
        Status::Paused(_) => return Overall::Paused,
        Status::Failed(_) => return Overall::Down,
        Status::Starting | Status::Listening(_) | Status::Attached(_) => {}
    }
    let enabled: Vec<&ProviderLine> = state.providers.iter().filter(|p| p.enabled).collect();
    let serving = enabled.iter().filter(|p| p.state.serving()).count();
    if serving == 0 && !matches!(state.status, Status::Starting | Status::Attached(_)) {
        Overall::Down
    } else if enabled.iter().any(|p| !matches!(p.state, Healthy | Unknown)) || !state.blocking.is_empty() {
        Overall::Degraded
    } else {
        Overall::Healthy
    }
}

fn status_line(status: &Status) -> String {
    match status {
        Status::Starting => "Starting…".to_string(),
        Status::Listening(addr) => format!("Listening on {addr}"),
        Status::Paused(addr) => format!("Paused (was on {addr})"),
        Status::Attached(addr) => format!("Attached to the Switchyard on {addr}"),
        Status::Failed(reason) => reason.clone(),
    }
}

fn tooltip(state: &TrayState, overall: Overall) -> String {
    let health = match overall {
        Overall::Healthy => "all providers healthy".to_string(),
        Overall::Paused => "paused".to_string(),
        Overall::Down => "no provider can serve".to_string(),
        Overall::Degraded => {
            let troubled = state.providers.iter().filter(|p| p.enabled && p.state != Healthy).count();
            match troubled {
                // Degraded by a budget that blocks, named after this.
                0 => "all providers healthy".to_string(),
                n => format!("{n} provider{} degraded or down", if n == 1 { "" } else { "s" }),
            }
        }
    };
    let budgets: String = state.blocking.iter().map(|b| format!(" — {}", budget_label(b, state.now_ms))).collect();
    match &state.status {
        Status::Failed(reason) => format!("Switchyard — {reason}"),
        status => format!("Switchyard — {} — {health}{budgets}", status_line(status)),
    }
}

/// "budget “daily” blocks provider:openai · 3 h".
pub fn budget_label(b: &BudgetLine, now_ms: i64) -> String {
    format!("budget “{}” blocks {} · {}", b.name, b.scope, left(b.until_ms, now_ms))
}

/// The desktop notification an event calls for: the gateway's alerts,
/// already rate-limited by the gateway (title, body).
pub fn notification(event: &GatewayEvent) -> Option<(String, String)> {
    let GatewayEvent::Alert { title, message, suppressed, .. } = event else { return None };
    let more = match suppressed {
        0 => String::new(),
        n => format!(" ({n} more like it since the last notice.)"),
    };
    Some((format!("Switchyard: {title}"), format!("{message}{more}")))
}

/// A check per tool: checked when its settings point at Switchyard.
fn tool_items(state: &TrayState, address: Option<SocketAddr>) -> Vec<Item> {
    state
        .tools
        .iter()
        .map(|t| Item::Check {
            id: ids::tool(&t.id),
            text: if t.installed { t.name.clone() } else { format!("{} (not installed)", t.name) },
            checked: t.connected,
            // Disconnecting needs no address; connecting does.
            enabled: t.connected || address.is_some(),
        })
        .collect()
}

/// "Check for updates…", or the update found and what is being done with it.
fn update_item(phase: &Phase) -> Item {
    let (id, text, enabled) = match phase {
        Phase::Idle => (ids::UPDATE_CHECK, "Check for updates…".to_string(), true),
        Phase::Checking => (ids::UPDATE_CHECK, "Checking for updates…".to_string(), false),
        Phase::Available(v) => (ids::UPDATE_INSTALL, format!("Install Switchyard {v} and restart"), true),
        Phase::Installing(v) => (ids::UPDATE_INSTALL, format!("Installing Switchyard {v}…"), false),
    };
    Item::Action { id: id.into(), text, enabled }
}

/// The whole menu for `state`.
pub fn build(state: &TrayState) -> Menu {
    let address = match &state.status {
        Status::Listening(a) | Status::Paused(a) | Status::Attached(a) => Some(*a),
        Status::Starting | Status::Failed(_) => None,
    };
    let own = !matches!(state.status, Status::Attached(_));
    let mut items = vec![Item::Label { id: ids::STATUS.into(), text: status_line(&state.status) }];
    for b in &state.blocking {
        items.push(Item::Label { id: ids::budget(&b.name), text: format!("⛔ {}", budget_label(b, state.now_ms)) });
    }
    items.push(Item::Separator);
    items.push(Item::Action {
        id: ids::COPY_OPENAI.into(),
        text: "Copy OpenAI base URL".into(),
        enabled: address.is_some(),
    });
    items.push(Item::Action {
        id: ids::COPY_ANTHROPIC.into(),
        text: "Copy Anthropic base URL".into(),
        enabled: address.is_some(),
    });
    if !state.tools.is_empty() {
        items.push(Item::Submenu {
            id: ids::TOOLS.into(),
            text: "Connect tools".into(),
            items: tool_items(state, address),
        });
    }
    if own && !state.providers.is_empty() {
        items.push(Item::Separator);
        for p in &state.providers {
            items.push(Item::Check {
                id: ids::provider(&p.name),
                text: provider_label(p, state.now_ms),
                checked: p.enabled,
                enabled: true,
            });
        }
    }
    items.push(Item::Separator);
    if own {
        let paused = matches!(state.status, Status::Paused(_));
        items.push(Item::Action {
            id: ids::PAUSE.into(),
            text: if paused { "Resume gateway" } else { "Pause gateway" }.into(),
            enabled: matches!(state.status, Status::Listening(_) | Status::Paused(_)),
        });
    }
    items.push(Item::Action { id: ids::OPEN.into(), text: "Open dashboard".into(), enabled: true });
    items.push(Item::Check {
        id: ids::AUTOSTART.into(),
        text: "Start at login".into(),
        checked: state.autostart,
        enabled: true,
    });
    items.push(Item::Check {
        id: ids::NOTIFY.into(),
        text: "Notify of alerts".into(),
        checked: state.notify,
        enabled: true,
    });
    items.extend(state.update.as_ref().map(update_item));
    items.push(Item::Separator);
    items.push(Item::Action { id: ids::QUIT.into(), text: "Quit Switchyard".into(), enabled: true });
    let overall = overall(state);
    Menu { tooltip: tooltip(state, overall), items, overall }
}

#[cfg(test)]
mod tests {
    use super::ids::Command;
    use super::*;

    const NOW: i64 = 1_800_000_000_000;

    fn addr() -> SocketAddr {
        "127.0.0.1:4141".parse().unwrap()
    }

    fn line(name: &str, state: &str) -> ProviderLine {
        ProviderLine {
            name: name.into(),
            enabled: state != "disabled",
            // The names the admin API sends.
            state: serde_json::from_value(serde_json::Value::from(state)).unwrap(),
            latency_p50_ms: Some(320),
            until_ms: None,
            probe_failed: None,
        }
    }

    fn tray(status: Status, providers: Vec<ProviderLine>) -> TrayState {
        TrayState {
            status,
            providers,
            tools: Vec::new(),
            autostart: false,
            notify: true,
            blocking: Vec::new(),
            now_ms: NOW,
            update: None,
        }
    }

    fn texts(menu: &Menu) -> Vec<String> {
        menu.items
            .iter()
            .map(|i| match i {
                Item::Label { text, .. } | Item::Action { text, .. } | Item::Check { text, .. } => text.clone(),
                Item::Separator => "---".into(),
                Item::Submenu { text, .. } => format!("{text} >"),
            })
            .collect()
    }

    #[test]
    fn a_healthy_gateway_lists_everything_in_order() {
        let menu = build(&tray(Status::Listening(addr()), vec![line("openai", "healthy"), line("groq", "healthy")]));
        assert_eq!(
            texts(&menu),
            [
                "Listening on 127.0.0.1:4141",
                "---",
                "Copy OpenAI base URL",
                "Copy Anthropic base URL",
                "---",
                "● openai — healthy · 320 ms",
                "● groq — healthy · 320 ms",
                "---",
                "Pause gateway",
                "Open dashboard",
                "Start at login",
                "Notify of alerts",
                "---",
                "Quit Switchyard",
            ]
        );
        assert_eq!(menu.overall, Overall::Healthy);
        assert_eq!(menu.tooltip, "Switchyard — Listening on 127.0.0.1:4141 — all providers healthy");
    }

    #[test]
    fn every_provider_state_has_its_glyph_words_and_detail() {
        let mut open = line("groq", "open");
        open.until_ms = Some(NOW + 42_000);
        let mut limited = line("anthropic", "rate_limited");
        limited.until_ms = Some(NOW + 600_000);
        let mut down = line("ollama", "unreachable");
        down.probe_failed = Some(("connection refused".into(), NOW - 12_000));
        let cases = [
            (line("a", "healthy"), "● a — healthy · 320 ms"),
            (line("b", "degraded"), "◐ b — degraded · 320 ms"),
            (limited, "◔ anthropic — rate-limited · 10 min"),
            (open, "✕ groq — breaker open · 42 s"),
            (line("c", "no_key"), "⚠ c — no key"),
            (line("d", "disabled"), "○ d — disabled"),
            (down, "✕ ollama — unreachable · connection refused, 12 s ago"),
            (line("f", "unknown"), "◌ f — not checked yet"),
        ];
        for (p, want) in cases {
            assert_eq!(provider_label(&p, NOW), want);
        }
        let mut quiet = line("e", "healthy");
        quiet.latency_p50_ms = None;
        assert_eq!(provider_label(&quiet, NOW), "● e — healthy");
    }

    #[test]
    fn check_items_follow_the_toggles() {
        let menu = build(&tray(Status::Listening(addr()), vec![line("a", "healthy"), line("b", "disabled")]));
        let checks: Vec<(String, bool)> = menu
            .items
            .iter()
            .filter_map(|i| match i {
                Item::Check { id, checked, .. } => Some((id.clone(), *checked)),
                _ => None,
            })
            .collect();
        assert_eq!(
            checks,
            [
                ("provider:a".into(), true),
                ("provider:b".into(), false),
                ("autostart".into(), false),
                ("notify".into(), true)
            ]
        );
    }

    #[test]
    fn overall_health_drives_the_icon() {
        let listening = |ps| overall(&tray(Status::Listening(addr()), ps));
        assert_eq!(listening(vec![line("a", "healthy"), line("b", "disabled")]), Overall::Healthy);
        assert_eq!(listening(vec![line("a", "healthy"), line("b", "open")]), Overall::Degraded);
        assert_eq!(listening(vec![line("a", "degraded")]), Overall::Degraded);
        assert_eq!(listening(vec![line("a", "open"), line("b", "no_key")]), Overall::Down);
        assert_eq!(listening(vec![line("a", "disabled")]), Overall::Down);
        // Nothing known yet is no trouble; a dead server is.
        assert_eq!(listening(vec![line("a", "healthy"), line("b", "unknown")]), Overall::Healthy);
        assert_eq!(listening(vec![line("a", "healthy"), line("b", "unreachable")]), Overall::Degraded);
        assert_eq!(listening(vec![line("a", "unreachable")]), Overall::Down);
        assert_eq!(listening(vec![]), Overall::Down);
        assert_eq!(overall(&tray(Status::Paused(addr()), vec![line("a", "healthy")])), Overall::Paused);
        assert_eq!(overall(&tray(Status::Failed("x".into()), vec![])), Overall::Down);
        assert_eq!(overall(&tray(Status::Starting, vec![])), Overall::Healthy);
    }

    #[test]
    fn paused_offers_resume_and_says_where_it_was() {
        let menu = build(&tray(Status::Paused(addr()), vec![line("a", "healthy")]));
        let t = texts(&menu);
        assert_eq!(t[0], "Paused (was on 127.0.0.1:4141)");
        assert!(t.contains(&"Resume gateway".to_string()));
        assert_eq!(menu.overall, Overall::Paused);
        assert!(menu.tooltip.contains("paused"), "{}", menu.tooltip);
    }

    #[test]
    fn a_port_in_use_says_so_and_disables_what_needs_an_address() {
        let reason = "Port 4141 is in use: change [server] listen, or quit the other program".to_string();
        let menu = build(&tray(Status::Failed(reason.clone()), vec![line("a", "healthy")]));
        assert_eq!(menu.items[0], Item::Label { id: ids::STATUS.into(), text: reason.clone() });
        let disabled: Vec<&str> = menu
            .items
            .iter()
            .filter_map(|i| match i {
                Item::Action { id, enabled: false, .. } => Some(id.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(disabled, [ids::COPY_OPENAI, ids::COPY_ANTHROPIC, ids::PAUSE]);
        assert_eq!(menu.tooltip, format!("Switchyard — {reason}"));
        assert_eq!(menu.overall, Overall::Down);
    }

    #[test]
    fn attached_shows_no_controls_it_does_not_own() {
        let menu = build(&tray(Status::Attached(addr()), vec![line("a", "healthy")]));
        let t = texts(&menu);
        assert_eq!(t[0], "Attached to the Switchyard on 127.0.0.1:4141");
        assert!(!t.iter().any(|x| x.contains("Pause") || x.contains("— healthy")), "{t:?}");
        assert!(t.contains(&"Open dashboard".to_string()));
    }

    #[test]
    fn starting_and_autostart() {
        let mut state = tray(Status::Starting, vec![]);
        state.autostart = true;
        let menu = build(&state);
        assert_eq!(texts(&menu)[0], "Starting…");
        assert!(menu.items.contains(&Item::Check {
            id: ids::AUTOSTART.into(),
            text: "Start at login".into(),
            checked: true,
            enabled: true
        }));
    }

    fn tool(id: &str, installed: bool, connected: bool) -> ToolLine {
        ToolLine { id: id.into(), name: id.to_uppercase(), installed, connected }
    }

    #[test]
    fn the_tools_submenu_checks_connected_tools_and_names_missing_ones() {
        let mut state = tray(Status::Listening(addr()), vec![line("a", "healthy")]);
        state.tools = vec![tool("claude", true, true), tool("codex", false, false)];
        let menu = build(&state);
        assert_eq!(texts(&menu)[4], "Connect tools >");
        let Item::Submenu { id, items, .. } = &menu.items[4] else { panic!("{:?}", menu.items[4]) };
        assert_eq!(id, ids::TOOLS);
        assert_eq!(
            items,
            &[
                Item::Check { id: "tool:claude".into(), text: "CLAUDE".into(), checked: true, enabled: true },
                Item::Check {
                    id: "tool:codex".into(),
                    text: "CODEX (not installed)".into(),
                    checked: false,
                    enabled: true
                },
            ]
        );
        assert_eq!(ids::command("tool:codex"), Some(Command::ToggleTool("codex".into())));
        // No address to point a tool at: only disconnecting is offered.
        state.status = Status::Failed("port taken".into());
        let Item::Submenu { items, .. } = &build(&state).items[4] else { panic!() };
        assert!(
            matches!(&items[0], Item::Check { enabled: true, .. })
                && matches!(&items[1], Item::Check { enabled: false, .. })
        );
    }

    #[test]
    fn a_blocking_budget_shows_in_the_menu_tooltip_and_icon() {
        let mut state = tray(Status::Listening(addr()), vec![line("openai", "healthy")]);
        state.blocking =
            vec![BudgetLine { name: "daily".into(), scope: "provider:openai".into(), until_ms: NOW + 3 * 3_600_000 }];
        let menu = build(&state);
        assert_eq!(texts(&menu)[1], "⛔ budget “daily” blocks provider:openai · 3 h");
        assert_eq!(menu.overall, Overall::Degraded);
        assert!(
            menu.tooltip.ends_with("all providers healthy — budget “daily” blocks provider:openai · 3 h"),
            "{}",
            menu.tooltip
        );
        assert_eq!(ids::command(&ids::budget("daily")), None, "a label, not a command");
    }

    #[test]
    fn alerts_become_notifications_and_nothing_else_does() {
        let alert = |suppressed| GatewayEvent::Alert {
            kind: switchyard_core::telemetry::AlertKind::BreakerOpen,
            subject: "groq".into(),
            title: "groq: breaker open".into(),
            message: "5 failures in a row.".into(),
            suppressed,
        };
        assert_eq!(
            notification(&alert(0)),
            Some(("Switchyard: groq: breaker open".into(), "5 failures in a row.".into()))
        );
        assert!(notification(&alert(4)).unwrap().1.ends_with("(4 more like it since the last notice.)"));
        assert_eq!(notification(&GatewayEvent::ProviderToggled { provider: "p".into(), enabled: true }), None);
    }

    #[test]
    fn updates_show_only_when_configured_and_install_only_what_was_found() {
        let mut state = tray(Status::Listening(addr()), vec![line("a", "healthy")]);
        let off = texts(&build(&state));
        assert!(!off.iter().any(|t| t.contains("update") || t.contains("Install")), "{off:?}");
        let mut item = |phase: Phase| {
            state.update = Some(phase);
            let menu = build(&state);
            let n = menu.items.len();
            // Just above the separator before "Quit Switchyard".
            menu.items[n - 3].clone()
        };
        let action = |id: &str, text: &str, enabled| Item::Action { id: id.into(), text: text.into(), enabled };
        assert_eq!(item(Phase::Idle), action(ids::UPDATE_CHECK, "Check for updates…", true));
        assert_eq!(item(Phase::Checking), action(ids::UPDATE_CHECK, "Checking for updates…", false));
        assert_eq!(
            item(Phase::Available("0.2.0".into())),
            action(ids::UPDATE_INSTALL, "Install Switchyard 0.2.0 and restart", true)
        );
        assert_eq!(
            item(Phase::Installing("0.2.0".into())),
            action(ids::UPDATE_INSTALL, "Installing Switchyard 0.2.0…", false)
        );
        assert_eq!(ids::command(ids::UPDATE_CHECK), Some(Command::CheckUpdates));
        assert_eq!(ids::command(ids::UPDATE_INSTALL), Some(Command::InstallUpdate));
    }

    #[test]
    fn the_menu_is_drawn_as_often_as_its_words_change_by_the_clock() {
        let quiet = tray(Status::Listening(addr()), vec![line("openai", "healthy")]);
        assert_eq!(quiet.redraw_in(), IDLE, "nothing counts: events alone redraw it");
        let mut open = line("groq", "open");
        open.until_ms = Some(NOW + 42_000);
        assert_eq!(tray(Status::Listening(addr()), vec![open.clone()]).redraw_in(), COUNTING);
        open.until_ms = Some(NOW + 20 * 60_000);
        assert_eq!(tray(Status::Listening(addr()), vec![open]).redraw_in(), Duration::from_secs(30));
        let mut down = line("ollama", "unreachable");
        down.probe_failed = Some(("connection refused".into(), NOW - 12_000));
        assert_eq!(tray(Status::Listening(addr()), vec![down.clone()]).redraw_in(), COUNTING);
        down.probe_failed = Some(("connection refused".into(), NOW - 3 * 3_600_000));
        assert_eq!(tray(Status::Listening(addr()), vec![down]).redraw_in(), IDLE);
        let mut blocked = quiet.clone();
        blocked.blocking.push(BudgetLine { name: "daily".into(), scope: "all".into(), until_ms: NOW + 30_000 });
        assert_eq!(blocked.redraw_in(), COUNTING);
    }

    #[test]
    fn ids_map_to_commands_and_back() {
        assert_eq!(ids::command(ids::QUIT), Some(Command::Quit));
        assert_eq!(ids::command(ids::PAUSE), Some(Command::TogglePause));
        assert_eq!(ids::command(&ids::provider("my-groq")), Some(Command::ToggleProvider("my-groq".into())));
        assert_eq!(ids::command(ids::STATUS), None);
        assert_eq!(ids::command("nonsense"), None);
        for item in build(&tray(Status::Listening(addr()), vec![line("a", "healthy")])).items {
            if let Item::Action { id, .. } | Item::Check { id, .. } = item {
                assert!(ids::command(&id).is_some(), "{id} has a command");
            }
        }
    }
}
