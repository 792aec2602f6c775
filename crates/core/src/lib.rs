//! Switchyard's gateway as a library: no GUI, no choice of keychain backend.
//!
//! A caller (the `switchyard` CLI, the desktop app, a test) builds a
//! [`Config`], picks a [`SecretStore`], binds a listener and calls [`serve`].
//!
//! # Layout
//! - [`config`]: TOML parsing and validation with file/line/field errors.
//! - [`secrets`]: the key-store trait and the environment and memory stores.
//! - [`provider`], [`routing`]: which providers may serve a model, in order.
//! - [`proxy`]: the request path; [`classify`] decides what an outcome means,
//!   [`policy::step`] what the request does next.
//! - [`headers`], [`body`]: what crosses the gateway, byte-for-byte where it can.
//! - [`scrub`]: secrets taken out of upstream error text before anyone sees it.
//! - [`server`]: routes, correlation ids, `serve`.

pub mod admin;
pub mod attempt;
pub mod body;
pub mod challenge;
pub mod classify;
pub mod config;
pub mod config_api;
#[cfg(test)]
mod contract;
pub mod correlation;
pub mod error;
pub mod events;
pub mod gateway;
pub mod guard;
pub mod headers;
pub mod health;
pub mod history;
pub mod journal;
pub mod keys;
pub mod live_api;
pub mod metrics;
pub mod policy;
pub mod private;
pub mod protocol;
pub mod provider;
pub mod proxy;
pub mod relay;
pub mod routing;
pub mod scrub;
pub mod secrets;
pub mod server;
pub mod session;
pub mod sse;
pub mod stats;
pub mod telemetry;
pub mod tools_api;
pub mod ui;
pub mod upstream;
pub mod usage;

pub use config::Config;
pub use gateway::{Gateway, InitError};
pub use secrets::SecretStore;
pub use server::{router, serve};
