//! Channels: where messages come from and where replies go.
//!
//! - [`cron`]: scheduled jobs from `cron/jobs.json`, fired as agent turns ([`CronChannel`]).
//! - [`terminal`]: `squidbot agent`, the interactive REPL and the one-shot `-m` mode.

pub mod cron;
pub mod terminal;

pub use cron::CronChannel;
