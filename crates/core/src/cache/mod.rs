//! The exact response cache: a repeated deterministic request is answered
//! from SQLite without an upstream call, and an expired answer is the
//! chain's last resort when every provider has failed.
//!
//! - [`key`]: the canonical request and its SHA-256, and whether a request may be cached.

pub mod key;

pub use key::{CacheKey, Facts, Keyed, Wire};
