//! [`HeartbeatChannel`]: the heartbeat's running task, one tick per interval.
//!
//! A tick: outside the active hours → skip; HEARTBEAT.md effectively empty or missing → skip;
//! no target (no configured `target`, nobody has talked yet) → skip; no running channel can
//! reach the target → skip with a warning. Otherwise the prompt is submitted as a turn of the
//! target session with sender `heartbeat`, the heartbeat's LLM pool and no `cron_add`; its
//! reply goes through [`AlertSink`], which drops `HEARTBEAT_OK` and forwards anything else to
//! the target's outbox. The sink never streams, so no partial text of an OK reply ever reaches
//! the user. A failed turn's user-facing error text is an alert like any other and is
//! delivered (as the original did), so the owner learns the heartbeat is broken.
//!
//! Time comes from two places: tokio's timer for the interval (paused in tests) and the
//! [`Clock`] port for the wall-clock time the active hours and the status are read in.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::channels::heartbeat::HeartbeatError;
use crate::channels::heartbeat::checklist::{is_effectively_empty, is_ok_reply};
use crate::channels::heartbeat::window::{ActiveHours, parse_zone};
use crate::config::HeartbeatConfig;
use crate::core::origin::Origin;
use crate::core::ports::channel::{
    ActivityLog, Channel, ChannelContext, ChannelError, DeliveryError, Inbound, Outbox, Outboxes,
    ReplySink, TurnResult,
};
use crate::core::ports::clock::{Clock, SystemClock};
use crate::core::ports::llm::LlmClient;
use crate::core::session::SessionId;
use crate::storage::beneath;

/// The channel's name, and the sender id of its turns.
pub const NAME: &str = "heartbeat";

/// How a tick ended; the last one is shown in `/status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TickOutcome {
    /// The tick fell outside the active hours.
    SkippedOutsideHours,
    /// HEARTBEAT.md is missing or effectively empty.
    SkippedEmpty,
    /// No target: none configured and nobody has talked yet.
    NoTarget,
    /// No running channel can deliver to the target.
    NoRoute,
    /// The agent had nothing to report; nothing was delivered.
    Ok,
    /// The agent reported something and it was delivered.
    AlertDelivered,
    /// The turn failed, was dropped, or its alert could not be delivered.
    Failed,
}

/// A snapshot of the heartbeat for `/status`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HeartbeatStatus {
    /// When the last tick ran.
    pub last_tick: Option<DateTime<Utc>>,
    /// How the last tick ended.
    pub last_outcome: Option<TickOutcome>,
    /// When the next tick is due.
    pub next_tick: Option<DateTime<Utc>>,
}

/// The heartbeat: a [`Channel`] that submits the heartbeat prompt on a timer.
pub struct HeartbeatChannel {
    interval: Duration,
    hours: ActiveHours,
    prompt: String,
    checklist: PathBuf,
    target: Option<SessionId>,
    activity: Arc<dyn ActivityLog>,
    outboxes: Arc<dyn Outboxes>,
    llm: Option<Arc<dyn LlmClient>>,
    clock: Arc<dyn Clock>,
    /// A std mutex: held only to copy or replace the snapshot, never across an await.
    status: Mutex<HeartbeatStatus>,
}

impl HeartbeatChannel {
    /// A heartbeat from `config`, reading `<workspace>/HEARTBEAT.md`, targeting the configured
    /// session or `activity`'s last one, delivering through `outboxes`, running turns with
    /// `llm` (the heartbeat pool; `None` = the default pool). Fails on an unknown time zone or
    /// a target that is not a session id.
    pub fn new(
        config: &HeartbeatConfig,
        workspace: PathBuf,
        activity: Arc<dyn ActivityLog>,
        outboxes: Arc<dyn Outboxes>,
        llm: Option<Arc<dyn LlmClient>>,
    ) -> Result<Self, HeartbeatError> {
        let (start, end) = config.active_minutes();
        let hours = ActiveHours::new(start, end, parse_zone(&config.timezone)?)?;
        let target = match config.target.trim() {
            "" => None,
            target => {
                Some(
                    SessionId::parse(target).map_err(|error| HeartbeatError::BadTarget {
                        target: target.to_owned(),
                        error,
                    })?,
                )
            }
        };
        Ok(Self {
            interval: Duration::from_secs(u64::from(config.interval_minutes.max(1)) * 60),
            hours,
            prompt: config.prompt.clone(),
            checklist: workspace.join("HEARTBEAT.md"),
            target,
            activity,
            outboxes,
            llm,
            clock: Arc::new(SystemClock),
            status: Mutex::new(HeartbeatStatus::default()),
        })
    }

    /// Reads wall-clock time from `clock` instead of the system clock (for tests).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The time between ticks.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// The active hours.
    pub fn active_hours(&self) -> &ActiveHours {
        &self.hours
    }

    /// The last tick, its outcome and the next tick, for `/status`.
    pub fn status(&self) -> HeartbeatStatus {
        self.lock_status().clone()
    }

    fn lock_status(&self) -> std::sync::MutexGuard<'_, HeartbeatStatus> {
        self.status.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn now(&self) -> DateTime<Utc> {
        self.clock.now().with_timezone(&Utc)
    }

    /// Runs one tick; `None` when shutdown interrupted it.
    async fn tick(&self, context: &ChannelContext) -> Option<TickOutcome> {
        let now = self.now();
        if !self.hours.is_active(now) {
            tracing::debug!(hours = %self.hours, "Heartbeat skipped outside active hours.");
            return Some(TickOutcome::SkippedOutsideHours);
        }
        // Read beneath the workspace: a HEARTBEAT.md linked out of it is refused, not read.
        let checklist = self.checklist.clone();
        let read = tokio::task::spawn_blocking(move || {
            let workspace = checklist.parent().unwrap_or(Path::new("."));
            let read = beneath::read_to_string(workspace, Path::new("HEARTBEAT.md"));
            if let Err(error) = &read {
                beneath::refused(&checklist, error);
            }
            read
        })
        .await
        .unwrap_or_else(|error| Err(std::io::Error::other(error)));
        match read {
            Ok(text) if !is_effectively_empty(&text) => {}
            Ok(_) => {
                tracing::debug!(path = %self.checklist.display(), "Heartbeat skipped: HEARTBEAT.md is effectively empty.");
                return Some(TickOutcome::SkippedEmpty);
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                tracing::debug!(path = %self.checklist.display(), "Heartbeat skipped: no HEARTBEAT.md.");
                return Some(TickOutcome::SkippedEmpty);
            }
            Err(error) => {
                tracing::warn!(path = %self.checklist.display(), error = %error, "Heartbeat skipped: cannot read HEARTBEAT.md.");
                return Some(TickOutcome::Failed);
            }
        }
        let Some((session, metadata)) = self.target() else {
            tracing::info!("Heartbeat skipped: no target session yet.");
            return Some(TickOutcome::NoTarget);
        };
        let outbox = match self.outboxes.outbox(&session, &metadata).await {
            Ok(outbox) => outbox,
            Err(no_route) => {
                tracing::warn!(session = %session, error = %no_route, "Heartbeat skipped: the target cannot be reached.");
                return Some(TickOutcome::NoRoute);
            }
        };
        self.run_turn(context, session, metadata, outbox).await
    }

    /// The configured target (with the activity log's metadata if it is the same session),
    /// else the last active session.
    fn target(&self) -> Option<(SessionId, Map<String, Value>)> {
        let last = self.activity.last();
        match &self.target {
            Some(target) => {
                let metadata = last
                    .filter(|(session, _)| session == target)
                    .map(|(_, metadata)| metadata)
                    .unwrap_or_default();
                Some((target.clone(), metadata))
            }
            None => last,
        }
    }

    async fn run_turn(
        &self,
        context: &ChannelContext,
        session: SessionId,
        metadata: Map<String, Value>,
        outbox: Outbox,
    ) -> Option<TickOutcome> {
        let sink = Arc::new(AlertSink::new(outbox.sink));
        // The target's readers: a check-in is private exactly when its session is.
        let mut inbound = Inbound::new(
            session.clone(),
            self.prompt.clone(),
            Origin::Heartbeat,
            Arc::clone(&sink) as Arc<dyn ReplySink>,
        )
        .read_by(outbox.readers);
        inbound.metadata = metadata;
        inbound.llm = self.llm.clone();
        let receiver = match context.dispatch.submit(inbound) {
            Ok(receiver) => receiver,
            Err(closed) => {
                tracing::info!(session = %session, error = %closed, "Heartbeat turn not accepted.");
                return Some(TickOutcome::Failed);
            }
        };
        tracing::debug!(session = %session, "Heartbeat turn submitted.");
        let result = tokio::select! {
            biased;
            () = context.shutdown.cancelled() => return None,
            result = receiver => result,
        };
        let outcome = match result {
            Ok(TurnResult::Replied(_)) => sink.outcome(),
            Ok(TurnResult::Failed(failure)) => {
                tracing::warn!(session = %session, kind = ?failure.kind, error = %failure.told, "Heartbeat turn failed.");
                TickOutcome::Failed
            }
            Ok(TurnResult::Dropped | TurnResult::Replaced) | Err(_) => {
                tracing::info!(session = %session, "Heartbeat turn dropped.");
                TickOutcome::Failed
            }
        };
        tracing::info!(session = %session, outcome = ?outcome, "Heartbeat tick done.");
        Some(outcome)
    }
}

#[async_trait]
impl Channel for HeartbeatChannel {
    fn name(&self) -> &str {
        NAME
    }

    async fn run(&self, context: ChannelContext) -> Result<(), ChannelError> {
        tracing::info!(
            interval_secs = self.interval.as_secs(),
            hours = %self.hours,
            target = self.target.as_ref().map_or("last active session", SessionId::as_str),
            "Heartbeat started."
        );
        context.ready.cancel();
        loop {
            let next = chrono::Duration::from_std(self.interval)
                .ok()
                .and_then(|interval| self.now().checked_add_signed(interval));
            self.lock_status().next_tick = next;
            tokio::select! {
                biased;
                () = context.shutdown.cancelled() => break,
                () = tokio::time::sleep(self.interval) => {}
            }
            let started = self.now();
            let Some(outcome) = self.tick(&context).await else {
                break;
            };
            let mut status = self.lock_status();
            status.last_tick = Some(started);
            status.last_outcome = Some(outcome);
        }
        tracing::info!("Heartbeat stopped.");
        Ok(())
    }
}

/// What the [`AlertSink`] saw, in rising order of importance (the most important one sticks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Seen {
    Nothing,
    Ok,
    Delivered,
    DeliveryFailed,
}

/// The reply sink of a heartbeat turn: drops `HEARTBEAT_OK` (and blank replies), forwards
/// anything else to the target's outbox. It never streams and shows no typing notice, so an
/// OK reply leaves no trace with the user.
struct AlertSink {
    outbox: Arc<dyn ReplySink>,
    /// A std mutex: held only to read or set the flag, never across an await.
    seen: Mutex<Seen>,
}

impl AlertSink {
    fn new(outbox: Arc<dyn ReplySink>) -> Self {
        Self {
            outbox,
            seen: Mutex::new(Seen::Nothing),
        }
    }

    fn set(&self, seen: Seen) {
        let mut current = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        *current = (*current).max(seen);
    }

    /// The tick's outcome for a turn that replied.
    fn outcome(&self) -> TickOutcome {
        match *self.seen.lock().unwrap_or_else(|p| p.into_inner()) {
            Seen::Ok | Seen::Nothing => TickOutcome::Ok,
            Seen::Delivered => TickOutcome::AlertDelivered,
            Seen::DeliveryFailed => TickOutcome::Failed,
        }
    }
}

#[async_trait]
impl ReplySink for AlertSink {
    fn streaming(&self) -> bool {
        false
    }

    async fn deliver(&self, text: &str) -> Result<(), DeliveryError> {
        if text.trim().is_empty() || is_ok_reply(text) {
            tracing::debug!("Heartbeat reply is OK; nothing delivered.");
            self.set(Seen::Ok);
            return Ok(());
        }
        match self.outbox.deliver(text).await {
            Ok(()) => {
                self.set(Seen::Delivered);
                Ok(())
            }
            Err(error) => {
                self.set(Seen::DeliveryFailed);
                Err(error)
            }
        }
    }
}
