//! Switchyard's gateway as a library: no GUI, no choice of keychain backend.
//!
//! A caller (the `switchyard` CLI, the desktop app, a test) builds a
//! [`Config`], picks a [`SecretStore`], binds a listener and calls [`serve`].
//!
//! # Layout
//! Each folder has one public entry (its `mod.rs`); the modules inside are
//! crate-private, and the entry re-exports what other crates use.
//! - [`http`]: the listener, the one pipeline every request takes, the guard,
//!   correlation ids, dashboard sessions, the gateway's proof of identity.
//! - [`proxy`]: a proxied request from body to answer: attempts, relaying,
//!   the journal that becomes its history row, headers, secret scrubbing.
//! - [`protocol`]: everything that knows a wire format: endpoints, error
//!   bodies, event streams, usage shapes, translation between formats.
//! - [`upstream`]: the providers: HTTP client, per-provider state, key pool,
//!   which providers may serve a model and in what order.
//! - [`policy`]: retry, breaker, deadline, limits, fallback share; the judge
//!   of an outcome ([`policy`]'s `classify`) and what to do next (`step`).
//! - [`admin`]: the admin API, the live stream, the dashboard and its sign-in.
//! - [`telemetry`]: events, statistics, metrics, provider health and probes.
//! - [`cache`]: the exact response cache (canonical key, store, replay),
//!   and the static and problem-document fallbacks.
//! - [`history`]: the SQLite record of every request and attempt.
//! - [`config`]: TOML parsing and validation with file/line/field errors.
//! - [`secrets`]: the key-store trait and the environment and memory stores.
//! - [`gateway`]: the shared state every handler reads, and its builder.
//! - [`private`]: owner-only files and directories.
//! - [`team`]: team mode's seam: the verdicts instances share.
//!
//! # The path of one request
//! From accept to history row, each step one call from the last:
//! 1. `http::server::serve` accepts the connection and serves it with a `Front`.
//! 2. `Front::call` gives the request its ids (`Correlated::begin`);
//!    `Front::serve` runs the guard (`http::guard::admit`).
//! 3. `Front::serve` then hands a proxy endpoint's `POST` to `proxy::handle`
//!    (anything else to the admin and dashboard routes).
//! 4. `proxy::handle` opens the request's `Journal`; `proxy::serve` reads
//!    the body (`read_body`, `body::inspect`) and plans the providers
//!    (`upstream::routing::plan`).
//! 5. `Run::provider` asks the provider for capacity (`Provider::gate`) and
//!    the policy for the next step (`policy::step::next`).
//! 6. `proxy::attempt::run` sends the attempt and waits for its first content.
//! 7. `policy::classify::decide` judges the outcome; `Journal::end` records
//!    the attempt.
//! 8. `proxy::relay::respond` relays the answer to the client and, when it
//!    ends, calls `Journal::finish_delivery`.
//! 9. `Journal::send` hands the record to `history::Recorder::complete`,
//!    which spools it first: a request the client saw end is on record.
//! 10. The writer thread (`history::writer::spawn`) inserts it
//!     (`history::insert::Inserter::write`): the history row.

pub mod admin;
pub mod cache;
pub mod config;
#[cfg(test)]
mod contract;
pub mod gateway;
pub mod ground;
pub mod history;
pub mod http;
pub mod members;
pub mod policy;
pub mod private;
pub mod protocol;
pub mod proxy;
pub mod secrets;
pub mod session;
pub mod team;
pub mod telemetry;
pub mod upstream;

/// What the fuzz targets drive: the parsers that read untrusted bytes. Not
/// an API; it exists so the targets reach them without making them public.
#[doc(hidden)]
pub mod fuzzing {
    pub use crate::protocol::sse::{classify, error_event, parse, Kind, Splitter};
    pub use crate::protocol::usage::{from_body, Tap};
    pub use crate::protocol::Endpoint;
    pub use crate::proxy::body::inspect;

    /// Every endpoint whose bodies and streams the gateway reads.
    pub const ENDPOINTS: [Endpoint; 9] = Endpoint::ALL;
}

pub use config::Config;
pub use gateway::{Gateway, InitError};
pub use http::serve;
pub use secrets::SecretStore;
