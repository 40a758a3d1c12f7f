//! Channels: where messages come from and where replies go.
//!
//! - [`attachments`]: received files saved inside the workspace for the agent to open.
//! - [`format`]: Markdown to HTML and splitting long replies, for Matrix and email.
//! - [`email`]: mail in over IMAP, threaded answers out over SMTP ([`EmailChannel`]).
//! - [`heartbeat`]: the agent checks in on its own, on a timer, within active hours.
//! - [`http`]: the HTTP API (operator routes and the `/v1` message API).
//! - [`matrix`]: Matrix rooms (encrypted ones too), through matrix-sdk.
//! - [`owner`]: who the owner is on each channel, decided at the channel's edge.
//! - [`plugin`]: [`ChannelPlugin`](plugin::ChannelPlugin), all a channel brings, built from
//!   one context; each channel's folder has its own.
//! - [`registry`]: [`plugins`], the one list of channel plug-ins, and what is asked of all.
//! - [`terminal`]: `squidbot agent`, the interactive REPL and the one-shot `-m` mode.
//! - [`voice`]: voice notes transcribed once and told as the person's words (Matrix, email).
//!
//! `email` and `matrix` are cargo features (both on by default), so an owner can build without
//! the channels they do not use; the list of plug-ins names them either way, and their settings
//! (`<name>/config.rs`) are compiled either way, so the same file is read and checked alike.

pub mod attachments;
#[cfg(feature = "email")]
pub mod email;
/// A build without the email channel still reads and checks its settings.
#[cfg(not(feature = "email"))]
pub mod email {
    pub mod config;
}
pub mod format;
pub mod heartbeat;
pub mod http;
#[cfg(feature = "matrix")]
pub mod matrix;
/// A build without the Matrix channel still reads and checks its settings.
#[cfg(not(feature = "matrix"))]
pub mod matrix {
    pub mod config;
}
pub mod owner;
pub mod plugin;
pub mod registry;
pub mod terminal;
pub mod voice;

#[cfg(feature = "email")]
pub use email::EmailChannel;
pub use registry::{Routes, owner_target, plugins};
