//! Translation between the four wire formats, hub and spoke: every format
//! decodes into the typed intermediate form in [`ir`] and encodes out of it,
//! so four formats cost four codecs each way instead of twelve translators.
//!
//! Passthrough is not done here: when a provider speaks the client's own
//! format the body crosses byte for byte and none of this runs.
//!
//! - [`ir`]: the intermediate form of requests, replies and stream events.
//! - [`stream`]: reply streams, decoded and encoded event by event.

pub mod ir;
pub mod stream;
