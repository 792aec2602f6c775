//! `switchyard connect|disconnect <tool>`, `switchyard tools` and
//! `switchyard env`: the command-line side of [`crate::tools`].

use crate::paths;
use crate::remote::{reachable, RemoteArgs};
use crate::tools::{self, Backups, Env, Target};
use anyhow::Result;

#[derive(Debug, clap::Args)]
pub struct ConnectArgs {
    /// claude, codex, gemini, aider or opencode.
    tool: String,
    /// The model the tool should ask for (else the tool's own default, which a route must name).
    #[arg(long)]
    model: Option<String>,
    /// Write a team member's key (`sy-m-…`) instead of the access token:
    /// read from `SWITCHYARD_MEMBER_KEY`, else from standard input, so it
    /// stays out of the shell's history.
    #[arg(long)]
    member_key: bool,
    /// Claude Code only: also draw its status line with `switchyard statusline`
    /// (the provider and model serving the session, its cost and cache hit rate).
    #[arg(long)]
    statusline: bool,
    #[command(flatten)]
    remote: RemoteArgs,
}

#[derive(Debug, clap::Args)]
pub struct DisconnectArgs {
    tool: String,
    /// Restore the files from before `connect` even if they were changed since.
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    remote: RemoteArgs,
}

#[derive(Debug, clap::Args)]
pub struct ToolsArgs {
    /// As JSON instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    remote: RemoteArgs,
}

#[derive(Debug, clap::Args)]
pub struct EnvArgs {
    /// The model to export as well (`OPENAI_MODEL`, `ANTHROPIC_MODEL`).
    #[arg(long)]
    model: Option<String>,
    #[command(flatten)]
    remote: RemoteArgs,
}

/// Where the gateway of these args is, and the access token when it requires one.
pub fn target(remote: &RemoteArgs, model: Option<String>) -> Result<(std::path::PathBuf, Target)> {
    let (dir, config) = remote.resolve()?;
    let token = config.server.access_token.then(|| paths::access_token(&dir)).transpose()?;
    let base = format!("http://{}", reachable(config.server.listen));
    Ok((dir, Target { base, token, model, status_line: None }))
}

fn tool(id: &str) -> Result<&'static tools::Tool> {
    Ok(tools::find(id).ok_or_else(|| tools::ToolError::Unknown(id.to_string()))?)
}

/// A member's key, from `SWITCHYARD_MEMBER_KEY` or the first line of standard input.
fn member_key() -> Result<secrecy::SecretString> {
    let key = match std::env::var("SWITCHYARD_MEMBER_KEY") {
        Ok(key) if !key.trim().is_empty() => key,
        _ => {
            let mut line = String::new();
            std::io::stdin().read_line(&mut line)?;
            line
        }
    };
    let key = key.trim();
    if !key.starts_with(switchyard_core::members::KEY_PREFIX) {
        anyhow::bail!(
            "a member's key starts with {}: `switchyard members add NAME` prints one",
            switchyard_core::members::KEY_PREFIX
        );
    }
    Ok(secrecy::SecretString::from(key.to_string()))
}

pub fn connect(args: ConnectArgs) -> Result<()> {
    let tool = tool(&args.tool)?;
    let (dir, mut target) = target(&args.remote, args.model)?;
    if args.member_key {
        target.token = Some(member_key()?);
    }
    if args.statusline {
        if tool.id != "claude" {
            anyhow::bail!("--statusline is for Claude Code (`switchyard connect claude --statusline`)");
        }
        target.status_line = Some(statusline_command()?);
    }
    let changed = tools::connect(tool, &Env::from_process()?, &target, &Backups::new(&dir))?;
    for file in &changed.files {
        println!("{}: {} now uses {}", file.display(), tool.name, target.base);
    }
    if let Some(note) = changed.note {
        println!("note: {note}");
    }
    println!("`switchyard disconnect {}` puts the files back as they were", tool.id);
    Ok(())
}

/// This program, run as Claude Code's status-line command.
fn statusline_command() -> Result<String> {
    let exe = std::env::current_exe()?;
    let exe = exe.to_string_lossy();
    // Claude Code runs the command through a shell: a path with spaces is quoted.
    if exe.contains(|c: char| c.is_whitespace() || "'\"$`\\".contains(c)) {
        Ok(format!("'{}' statusline", exe.replace('\'', "'\\''")))
    } else {
        Ok(format!("{exe} statusline"))
    }
}

pub fn disconnect(args: DisconnectArgs) -> Result<()> {
    let tool = tool(&args.tool)?;
    let (dir, _) = args.remote.resolve()?;
    let changed = tools::disconnect(tool, &Backups::new(&dir), args.force)?;
    for file in &changed.files {
        println!("{}: restored", file.display());
    }
    Ok(())
}

pub fn list(args: ToolsArgs) -> Result<()> {
    let (dir, _) = args.remote.resolve()?;
    let statuses = tools::statuses(&Env::from_process()?, &Backups::new(&dir));
    if args.json {
        println!("{}", serde_json::to_string_pretty(&statuses)?);
        return Ok(());
    }
    println!("{:<10} {:<10} {:<10} BASE URL", "TOOL", "INSTALLED", "CONNECTED");
    for s in &statuses {
        let connected = match (s.connected, s.changed) {
            (true, true) => "changed",
            (true, false) => "yes",
            _ => "no",
        };
        let installed = if s.installed.is_some() { "yes" } else { "no" };
        println!("{:<10} {:<10} {:<10} {}", s.id, installed, connected, s.base_url.as_deref().unwrap_or("-"));
    }
    Ok(())
}

/// The variables most tools read, as `export` lines for a shell.
pub fn env(args: EnvArgs) -> Result<()> {
    let (_, target) = target(&args.remote, args.model)?;
    print!("{}", exports(&target));
    Ok(())
}

fn exports(target: &Target) -> String {
    let key = target.key();
    let mut vars = vec![
        ("OPENAI_BASE_URL", target.openai_base()),
        ("OPENAI_API_BASE", target.openai_base()),
        ("OPENAI_API_KEY", key.clone()),
        ("ANTHROPIC_BASE_URL", target.base.clone()),
        ("ANTHROPIC_API_KEY", key.clone()),
        ("GOOGLE_GEMINI_BASE_URL", target.base.clone()),
        ("GEMINI_API_KEY", key),
    ];
    if let Some(model) = &target.model {
        vars.push(("OPENAI_MODEL", model.clone()));
        vars.push(("ANTHROPIC_MODEL", model.clone()));
    }
    vars.iter().map(|(k, v)| format!("export {k}='{}'\n", v.replace('\'', "'\\''"))).collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn exports_are_shell_quoted_and_carry_the_token() {
        let target = Target {
            base: "http://127.0.0.1:4141".into(),
            token: Some(secrecy::SecretString::from("sy-a'b".to_string())),
            model: None,
            status_line: None,
        };
        let text = exports(&target);
        assert!(text.contains("export OPENAI_BASE_URL='http://127.0.0.1:4141/v1'\n"), "{text}");
        assert!(text.contains("export ANTHROPIC_API_KEY='sy-a'\\''b'\n"), "{text}");
    }
}
