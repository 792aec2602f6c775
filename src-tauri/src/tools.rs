//! Connecting coding tools from the app: the window's Tools view (its
//! commands answered by `crate::window`) and the tray's "Connect tools"
//! submenu both call `switchyard_host::tools`, which edits the tools' own
//! settings files as `switchyard connect` does.

use switchyard_host::tools::{self, Env, ToolStatus};

use crate::host::{CommandError, Host};

fn failed(e: tools::ToolError) -> CommandError {
    let code = match e {
        tools::ToolError::Unknown(_) => "unknown_tool",
        tools::ToolError::NotConnected(_) => "not_connected",
        tools::ToolError::Changed { .. } => "changed_since_connect",
        tools::ToolError::Edit { .. } => "unreadable_settings",
        tools::ToolError::NoHome | tools::ToolError::Io { .. } => "io",
    };
    CommandError { code, message: e.to_string() }
}

fn no_data_dir() -> CommandError {
    CommandError { code: "no_data_dir", message: "the app has no data directory for the tools' backups".into() }
}

/// Every tool's status, for this user's home and `PATH`.
pub fn statuses(host: &Host) -> Result<Vec<ToolStatus>, CommandError> {
    let (backups, _) = host.tools_target().ok_or_else(no_data_dir)?;
    Ok(tools::statuses(&Env::from_process().map_err(failed)?, &backups))
}

/// Connects `id` if it is not, disconnects it if it is.
pub fn toggle(host: &Host, id: &str) -> Result<Vec<ToolStatus>, CommandError> {
    let tool = tools::find(id).ok_or_else(|| failed(tools::ToolError::Unknown(id.to_string())))?;
    let (backups, target) = host.tools_target().ok_or_else(no_data_dir)?;
    let env = Env::from_process().map_err(failed)?;
    if tools::status(tool, &env, &backups).connected {
        tools::disconnect(tool, &backups, false).map_err(failed)?;
    } else {
        tools::connect(tool, &env, &target, &backups).map_err(failed)?;
    }
    Ok(tools::statuses(&env, &backups))
}
