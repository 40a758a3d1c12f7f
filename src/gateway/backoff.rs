//! [`Backoff`]: the one exponential backoff every retry loop uses (channel restarts, Matrix
//! syncs, IMAP reconnects, queued mail, MCP servers down at start, LLM retries).
//!
//! The delay before attempt `n + 1` after `n` failures is `first · 2ⁿ`, capped at `max`, with
//! no overflow however many failures there were. Loops keep the failure count themselves (reset
//! on success), so a restart or a persisted attempt count gives the same delay.

use std::time::Duration;

/// An exponential backoff: `first`, doubling per failure, never more than `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    first: Duration,
    max: Duration,
}

impl Backoff {
    /// A backoff starting at `first` and capped at `max`.
    pub const fn new(first: Duration, max: Duration) -> Self {
        Self { first, max }
    }

    /// The pause before the next attempt after `failures` failed ones (0: `first`).
    pub fn delay(&self, failures: u32) -> Duration {
        let factor = 1u32.checked_shl(failures.min(31)).unwrap_or(u32::MAX);
        self.first.saturating_mul(factor).min(self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_from_first_and_stops_at_max() {
        let backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
        let delays: Vec<u64> = (0..9).map(|n| backoff.delay(n).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(backoff.delay(u32::MAX), Duration::from_secs(60));
        let slow = Backoff::new(Duration::from_secs(5), Duration::from_secs(600));
        assert_eq!(slow.delay(3), Duration::from_secs(40));
        assert_eq!(slow.delay(40), Duration::from_secs(600));
    }
}
