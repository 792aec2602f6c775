//! What the `history` and `sessions` lists are narrowed by, and how they
//! are shown: the flags both take.

/// The filters and form both lists share.
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// Only those this provider answered or was tried for.
    #[arg(long)]
    pub provider: Option<String>,
    #[arg(long)]
    pub model: Option<String>,
    /// Only those made with this team member's key.
    #[arg(long)]
    pub member: Option<String>,
    /// Since when: a duration ago (`1h`, `2days`), RFC 3339, or Unix milliseconds.
    #[arg(long)]
    pub since: Option<String>,
    #[arg(long, default_value_t = 50)]
    pub limit: u32,
    /// One JSON document instead of a table.
    #[arg(long)]
    pub json: bool,
}
