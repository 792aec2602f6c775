//! Hosting a Switchyard gateway: what the `switchyard` command and the
//! desktop app both do, in one place, without a command line parser, a
//! password prompt or the demo's simulator.
//!
//! - [`paths`]: the data directory, the config file, the tokens.
//! - [`assemble`]: a gateway with its keys, history and config watcher.
//! - [`gateway_client`]: reaching a running gateway, after it proves it is ours.
//! - [`tools`]: pointing a developer's tools at the gateway and back.
//! - [`logging`]: tracing set up the same way for both.

pub mod assemble;
pub mod gateway_client;
pub mod logging;
pub mod paths;
pub mod tools;
