//! [`Liveness`]: what a channel says about its own pulse, so an operator can tell a quiet
//! channel from a stuck one.
//!
//! A channel whose task is alive can still be dead to the world: a Matrix sync that hangs on a
//! half-open connection, an IMAP IDLE the server silently dropped. The supervisor only sees the
//! task, so each channel reports two things as they happen: an *inbound* event (a message
//! arrived) and a successful *round* (a sync came back, an IDLE or poll round ended). A channel
//! that reports rounds declares how long a healthy one may take ([`Liveness::expect_rounds`]);
//! when no round has succeeded for longer than that since the channel (re)started, it is
//! *stalled*, and `/readyz` says so. Quiet is not stalled: a channel with no inbound messages
//! for a day is fine as long as its rounds go on.
//!
//! The times are atomics (milliseconds since a shared origin), so reporting costs a store and
//! never takes a lock on the channel's hot path.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::core::ports::channel::Alive;

/// One channel's pulse, shared by the channel (writer) and the gateway's state (reader).
/// Cloning shares it.
#[derive(Debug, Clone)]
pub struct Liveness {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    origin: Instant,
    /// Milliseconds since `origin` plus one; 0 means never.
    last_inbound: AtomicU64,
    /// As `last_inbound`.
    last_round: AtomicU64,
    /// When the channel's current run began, as `last_inbound`.
    run_started: AtomicU64,
    /// The longest a healthy round may take, in milliseconds; 0 means the channel has no
    /// rounds (HTTP, heartbeat, cron) and is never stalled.
    stall_after: AtomicU64,
}

/// A reading of a [`Liveness`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pulse {
    /// How long ago the last inbound event arrived, if one did since start.
    pub last_inbound: Option<Duration>,
    /// How long ago the last round succeeded, if one did since start.
    pub last_round: Option<Duration>,
    /// The declared limit for a round, if the channel has rounds.
    pub stall_after: Option<Duration>,
    /// Whether no round succeeded within `stall_after` since the current run began.
    pub stalled: bool,
}

impl Alive for Liveness {
    fn expect_rounds(&self, limit: Duration) {
        Liveness::expect_rounds(self, limit);
    }

    fn inbound(&self) {
        Liveness::inbound(self);
    }

    fn round(&self) {
        Liveness::round(self);
    }
}

impl Default for Liveness {
    fn default() -> Self {
        Self::new()
    }
}

impl Liveness {
    /// A pulse with nothing reported yet.
    pub fn new() -> Self {
        Self {
            inner: Arc::new(Inner {
                origin: Instant::now(),
                last_inbound: AtomicU64::new(0),
                last_round: AtomicU64::new(0),
                run_started: AtomicU64::new(0),
                stall_after: AtomicU64::new(0),
            }),
        }
    }

    fn stamp(&self) -> u64 {
        u64::try_from(self.inner.origin.elapsed().as_millis())
            .unwrap_or(u64::MAX - 1)
            .saturating_add(1)
    }

    /// Declares that a healthy round of this channel ends within `limit` (a sync's long-poll
    /// timeout plus slack, an IDLE's re-arm period plus slack).
    pub fn expect_rounds(&self, limit: Duration) {
        let millis = u64::try_from(limit.as_millis()).unwrap_or(u64::MAX).max(1);
        self.inner.stall_after.store(millis, Ordering::Relaxed);
    }

    /// Records that a message arrived.
    pub fn inbound(&self) {
        self.inner
            .last_inbound
            .store(self.stamp(), Ordering::Relaxed);
    }

    /// Records that a round succeeded.
    pub fn round(&self) {
        self.inner.last_round.store(self.stamp(), Ordering::Relaxed);
    }

    /// Records that the channel's task (re)started: a stall is counted from here until its
    /// first round.
    pub fn run_started(&self) {
        self.inner
            .run_started
            .store(self.stamp(), Ordering::Relaxed);
    }

    /// The current reading.
    pub fn pulse(&self) -> Pulse {
        let now = self.stamp();
        let last_round = self.inner.last_round.load(Ordering::Relaxed);
        let run_started = self.inner.run_started.load(Ordering::Relaxed);
        let stall_after = match self.inner.stall_after.load(Ordering::Relaxed) {
            0 => None,
            millis => Some(Duration::from_millis(millis)),
        };
        // Since the later of the last round and the current run's start.
        let quiet_since = last_round.max(run_started);
        let stalled = stall_after.is_some_and(|limit| {
            quiet_since != 0 && Duration::from_millis(now.saturating_sub(quiet_since)) > limit
        });
        Pulse {
            last_inbound: age(self.inner.last_inbound.load(Ordering::Relaxed), now),
            last_round: age(last_round, now),
            stall_after,
            stalled,
        }
    }
}

/// How long before `now` a stamp was taken; `None` for 0 (never).
fn age(stamp: u64, now: u64) -> Option<Duration> {
    (stamp != 0).then(|| Duration::from_millis(now.saturating_sub(stamp)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_channel_without_rounds_is_never_stalled() {
        let liveness = Liveness::new();
        liveness.run_started();
        std::thread::sleep(Duration::from_millis(5));
        let pulse = liveness.pulse();
        assert!(!pulse.stalled);
        assert_eq!(pulse.last_round, None);
        assert_eq!(pulse.last_inbound, None);
    }

    #[test]
    fn rounds_keep_a_channel_alive_and_their_absence_stalls_it() {
        let liveness = Liveness::new();
        liveness.expect_rounds(Duration::from_millis(200));
        liveness.run_started();
        assert!(!liveness.pulse().stalled, "just started");
        std::thread::sleep(Duration::from_millis(250));
        assert!(liveness.pulse().stalled, "no round since the start");
        liveness.round();
        liveness.inbound();
        let pulse = liveness.pulse();
        assert!(!pulse.stalled, "a round just succeeded");
        assert!(pulse.last_round.is_some());
        assert!(pulse.last_inbound.is_some());
        std::thread::sleep(Duration::from_millis(250));
        assert!(liveness.pulse().stalled, "the last round is too old");
        liveness.run_started();
        assert!(
            !liveness.pulse().stalled,
            "a restart starts the count again"
        );
    }
}
