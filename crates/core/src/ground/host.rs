//! This machine's name, as the gateway names itself to others: an
//! instance to its team, a device to the team's gateway it has joined.

/// The host's name: `$HOSTNAME`, else `/etc/hostname`, else `localhost`.
pub fn name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok().map(|h| h.trim().to_owned()))
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}
