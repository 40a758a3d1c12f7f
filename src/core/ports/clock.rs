//! **API Boundary.** The clock port: where "now" comes from.
//!
//! Timestamps go through a trait so tests can pin them and so every record carries the local
//! offset rather than a naive time.

use chrono::{DateTime, FixedOffset, Local};

/// A source of the current time.
pub trait Clock: Send + Sync {
    /// The current time with the local offset.
    fn now(&self) -> DateTime<FixedOffset>;
}

/// The system clock in the host's local zone.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<FixedOffset> {
        Local::now().fixed_offset()
    }
}
