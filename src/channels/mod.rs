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
//! - `list`: `channels!`, which writes each channel's module, plug-in and settings field from
//!   its one entry below.
//! - [`registry`]: [`plugins`], the plug-ins of that list (and cron), and what is asked of all.
//! - [`terminal`]: `squidbot agent`, the interactive REPL and the one-shot `-m` mode.
//! - [`voice`]: voice notes transcribed once and told as the person's words (Matrix, email).
//!
//! `email` and `matrix` are cargo features (both on by default), so an owner can build without
//! the channels they do not use; the list names them either way, and their settings
//! (`<name>/config.rs`) are compiled either way, so the same file is read and checked alike.
//! [`ChannelsConfig`], the `channels:` section of the configuration, is written here by the
//! list too (re-exported as `crate::config::ChannelsConfig`).

#[macro_use]
mod list;

pub mod attachments;
pub mod format;
pub mod owner;
pub mod plugin;
pub mod registry;
pub mod terminal;
pub mod voice;

// The one list of channels: each entry is a channel's module, its plug-in (in the order the
// gateway starts them; cron, not a channel folder, follows them, see `registry::plugins`) and,
// when it has one, its section under `channels:` (`list.rs` says what each entry writes).
channels! {
    /// The HTTP API (operator routes and the `/v1` message API).
    http => http::HttpPlugin;
    /// Matrix rooms (encrypted ones too), through matrix-sdk.
    matrix if "matrix" => matrix::MatrixPlugin, settings matrix::config::MatrixConfig;
    /// The agent checks in on its own, on a timer, within active hours.
    heartbeat => heartbeat::HeartbeatPlugin;
    /// Mail in over IMAP, threaded answers out over SMTP.
    email if "email" => email::EmailPlugin, settings email::config::EmailConfig;
}

#[cfg(feature = "email")]
pub use email::EmailChannel;
pub use registry::{Routes, owner_target, plugins};
