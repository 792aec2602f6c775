//! The ground floor: what every layer of the gateway uses and nothing
//! here imports from above. The clock, how attempts and requests end,
//! header names and which carry credentials, comparing secrets, batching
//! off a channel, limits more than one layer knows, a team's limits
//! shared out among its instances, the system's TLS roots and the
//! host's name.

pub mod batch;
pub mod clock;
pub mod compare;
pub mod headers;
pub mod host;
pub mod limits;
pub mod money;
pub mod outcome;
pub mod roots;
pub mod share;
