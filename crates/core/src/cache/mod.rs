//! The exact response cache: a repeated deterministic request is answered
//! from SQLite without an upstream call, and an expired answer is the
//! chain's last resort when every provider has failed.
//!
//! - [`key`]: the canonical request and its SHA-256, and whether a request may be cached.
//! - [`store`]: the entries in SQLite, their size cap and their lifetimes.
//! - [`replay`]: a stored answer in the form the client asked for, with the
//!   cache's headers; [`reframe`] tells a JSON answer as a stream, [`fold`] a
//!   stream as JSON.
//! - [`metrics`]: counters for the metrics endpoint and the dashboard.

pub mod fold;
pub mod key;
pub mod metrics;
pub mod reframe;
pub mod replay;
pub mod store;

pub use key::{CacheKey, Facts, Keyed, Wire};
pub use metrics::{CacheCounters, CacheStats, CacheStatus};
pub use store::{Entry, Form, Freshness, Hit, Lifetime, Store};
