//! Switchyard's gateway as a library: no GUI, no choice of keychain backend.
//!
//! A caller (the `switchyard` CLI, the desktop app, a test) builds a
//! [`Config`], picks a [`SecretStore`], binds a listener and calls [`serve`].
//!
//! # Layout
//! The modules stand in layers, lowest first; a module imports its own
//! layer and those below, never above (`dev/imports` checks it, and
//! docs/architecture.md draws it).
//! 1. [`ground`]: the clock, outcomes, header names, constant-time
//!    compare, money, shared limits. Imports nothing else of the core.
//! 2. [`protocol`] (wire formats: endpoints, errors, streams, usage,
//!    translation), [`session`] (a coding agent's conversation, from its
//!    request), [`secrets`] (the key-store trait), [`private`] (owner-only
//!    files).
//! 3. [`policy`]: retry, breaker, deadline, limits and queues, budgets,
//!    the fallback share; the judge of an outcome (`classify`) and the next
//!    step (`step`); a route's configured order (`order`).
//! 4. [`config`]: TOML parsing and validation with file/line/field errors.
//! 5. [`history`]: every request and attempt on record, behind one
//!    [`history::Store`] over SQLite or PostgreSQL, with the spool and the
//!    writer thread; the members' records ([`members`]'s entry) beside it.
//! 6. [`team`]: the seam a gateway shares state through, and [`team::Solo`],
//!    a gateway alone as a team of one.
//! 7. [`cache`]: the exact response cache and the static fallbacks.
//! 8. [`telemetry`]: events, statistics, metrics, alerts.
//! 9. [`upstream`]: the providers: HTTP client, per-provider state, key
//!    pool, routing and the strategies that order a chain.
//! 10. [`members`]: members' keys, limits and budgets on the request path.
//! 11. [`gateway`]: the shared state every handler reads, its builder,
//!     dashboard sessions, the capture switch, and its side of the team
//!     seam ([`gateway::Inbound`], what the team's runner drives).
//! 12. [`http`]: the guard every request passes, correlation ids.
//! 13. [`proxy`]: a proxied request from body to answer, in stages.
//! 14. [`admin`]: the admin API, the live stream, the dashboard; and
//!     `telemetry::health`'s probes, which send requests as the proxy does.
//! 15. `http::server`: the listener, routing each request to the proxy or
//!     the admin API.
//!
//! # The path of one request
//! Each stage is a file of [`proxy`] with one entry, in this order:
//! 1. `http::server::serve` accepts the connection; `Front::call` gives
//!    the request its ids and runs the guard (`http::guard::admit`), then
//!    hands a proxy endpoint's `POST` to `proxy::handle`.
//! 2. **admit** (`proxy/admit.rs`): who sends it (`identify`), the body
//!    read within the limits and looked at, a member's limits and budget
//!    taken (`request`).
//! 3. **plan** (`proxy/plan.rs`): a token count answered here, a cached
//!    answer, or the chain in the strategy's order (`chain`).
//! 4. **chain** (`proxy/chain.rs`): each candidate in order within the
//!    fallback share, then the busy ones' queues (`Run::chain`).
//! 5. **provider** (`proxy/provider.rs`): the provider's gate and the
//!    team's, then attempts, retries and repairs (`Run::provider`).
//! 6. **attempt** (`proxy/attempt.rs`): one attempt on the wire, up to
//!    its first content (`run`); hedged by the chain's next when its first
//!    byte is late (`proxy/hedge.rs`).
//! 7. **deliver** (`proxy/relay.rs`): the answer relayed, translated back
//!    and tapped as it goes (`respond`); a stream that breaks after text
//!    finished elsewhere (`proxy/resume.rs`).
//! 8. **record** (`proxy/journal.rs`): the journal that becomes the
//!    history row, handed to `history::Recorder::complete`, which spools it
//!    first: a request the client saw end is on record. The writer thread
//!    (`history::writer`) inserts it.

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
