//! Channels: where messages come from and where replies go.
//!
//! - [`terminal`]: `squidbot agent`, the interactive REPL and the one-shot `-m` mode.

pub mod terminal;
