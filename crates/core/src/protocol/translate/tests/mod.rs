//! Golden and property tests of translation across formats.
