//! Golden and property tests of the stream translation.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
