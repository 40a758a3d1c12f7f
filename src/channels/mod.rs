//! Channels: where messages come from and where replies go.
//!
//! - [`http`]: the HTTP API (operator routes and the `/v1` message API).
//! - [`terminal`]: `squidbot agent`, the interactive REPL and the one-shot `-m` mode.

pub mod http;
pub mod terminal;
