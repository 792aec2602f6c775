//! `switchyard open`: the running gateway's dashboard in the browser,
//! already signed in. The link carries a one-time ticket that the gateway
//! trades for an HttpOnly cookie before redirecting to a clean `/ui/`.

use anyhow::{Context, Result};

use crate::remote::{Remote, RemoteArgs};

#[derive(Debug, clap::Args)]
pub struct OpenArgs {
    #[command(flatten)]
    remote: RemoteArgs,
    /// Print the sign-in link (valid once, for two minutes) instead of opening a browser.
    #[arg(long)]
    print: bool,
}

pub async fn run(args: OpenArgs) -> Result<()> {
    let remote = Remote::connect(&args.remote).await?;
    let answer: serde_json::Value = remote.post_json("/admin/session").await?;
    let path = answer["path"].as_str().context("the gateway gave no sign-in link")?;
    let link = format!("{}{path}", remote.base);
    if args.print {
        println!("{link}");
        return Ok(());
    }
    match launch(&link) {
        Ok(()) => println!("opened the dashboard at {}/ui/", remote.base),
        Err(e) => {
            eprintln!("could not start a browser ({e}); open this link yourself (it works once, for two minutes):");
            println!("{link}");
        }
    }
    Ok(())
}

/// Hands the link to the desktop's browser.
fn launch(link: &str) -> std::io::Result<()> {
    let mut command = if cfg!(target_os = "macos") {
        std::process::Command::new("open")
    } else if cfg!(windows) {
        let mut c = std::process::Command::new("cmd");
        c.args(["/C", "start", ""]);
        c
    } else {
        std::process::Command::new("xdg-open")
    };
    command
        .arg(link)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map(drop)
}
