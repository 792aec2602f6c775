//! Limits more than one layer sets or checks.

/// The spool's default bound (`[history] spool_max_size_mb`).
pub const SPOOL_BYTES: u64 = 256 * 1024 * 1024;
