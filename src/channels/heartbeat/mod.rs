//! The heartbeat channel: the agent checks in on its own, on a timer, within active hours.
//!
//! Every `interval_minutes` (sleep first, then tick), inside the active hours read in the
//! configured IANA zone (overnight windows such as 22:00–06:00 work), and only when
//! `<workspace>/HEARTBEAT.md` asks for something, the channel submits the configured prompt as
//! a turn of the target session: the configured `target`, else the last session a person
//! talked in (the [`ActivityLog`](crate::core::ports::channel::ActivityLog), which survives
//! restarts). The turn runs with the heartbeat's own LLM pool and is persisted with sender
//! `heartbeat`, so history never shows the owner saying it. A reply meaning "nothing to
//! report" (`HEARTBEAT_OK`) is never delivered, on any path; anything else goes to the target's
//! outbox.
//!
//! - [`window`]: [`ActiveHours`] and [`Zone`], the daily window and its time zone.
//! - [`checklist`]: the HEARTBEAT.md emptiness rule and the `HEARTBEAT_OK` rule.
//! - [`config`]: its settings (`agents.heartbeat`) and their checks.
//! - [`channel`]: [`HeartbeatChannel`], the running task, and its [`HeartbeatStatus`].
//! - [`plugin`]: [`HeartbeatPlugin`], the heartbeat on the list of channel plug-ins.

pub mod channel;
pub mod checklist;
pub mod config;
pub mod plugin;
pub mod window;

#[cfg(test)]
mod tests;

pub use channel::{HeartbeatChannel, HeartbeatStatus, TickOutcome};
pub use plugin::HeartbeatPlugin;
pub use window::{ActiveHours, Zone, parse_zone};

/// Why the heartbeat could not be set up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeartbeatError {
    /// The time zone is not `local`, `UTC`, `±HH:MM` or a known IANA name.
    #[error("unknown time zone {0:?} (use an IANA name like Europe/Berlin, UTC, local or +02:00)")]
    UnknownZone(String),
    /// The active hours are out of range (start 0 to 1439, end 0 to 1440 minutes).
    #[error("active hours out of range: start {start} min, end {end} min")]
    BadHours {
        /// The start, in minutes after midnight.
        start: u32,
        /// The end, in minutes after midnight.
        end: u32,
    },
    /// The configured target is not a session id.
    #[error("agents.heartbeat.target {target:?} is not a session id: {error}")]
    BadTarget {
        /// The configured value.
        target: String,
        /// Why it does not parse.
        error: crate::core::session::SessionIdError,
    },
}
