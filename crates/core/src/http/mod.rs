//! The gateway's HTTP face: the listener and its connection limits, the
//! guard every request passes first, correlation ids, dashboard sessions and
//! the proof of identity the CLI checks before it sends a token.

pub(crate) mod challenge;
pub(crate) mod correlation;
pub(crate) mod guard;
pub(crate) mod server;
pub(crate) mod session;

pub use challenge::{verify as verify_proof, PATH as WHOAMI_PATH};
pub use server::serve;
pub use session::{cookie, cookie_name, SESSION_HEADER};
