//! The gateway's HTTP face: the listener and its connection limits, the
//! guard every request passes first, correlation ids. Dashboard sessions
//! are the gateway's ([`crate::gateway::sessions`]); the proof of identity
//! the CLI checks before it sends a token is an admin route
//! ([`crate::admin::whoami`]).

pub(crate) mod correlation;
pub(crate) mod guard;
pub(crate) mod server;

pub use crate::gateway::sessions::{cookie, cookie_name, SESSION_HEADER};
pub use server::serve;
