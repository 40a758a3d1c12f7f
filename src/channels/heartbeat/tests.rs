//! Heartbeat channel tests under paused tokio time, with a fake dispatch, outboxes and clock.
//!
//! The fake dispatch plays the agent loop: it records each [`Inbound`] (so the tests see the
//! sender id the turn is persisted with) and answers with a scripted reply by calling
//! `inbound.reply.deliver(...)` before sending the [`TurnResult`]. The fake clock follows
//! tokio's paused timer, so the active hours and the interval agree.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, FixedOffset, Utc};
use serde_json::{Map, Value};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::channels::heartbeat::{HeartbeatChannel, TickOutcome};
use crate::config::HeartbeatConfig;
use crate::core::audience::Readers;
use crate::core::origin::Origin;
use crate::core::ports::channel::{
    ActivityLog, Channel, ChannelContext, DeliveryError, Dispatch, DispatchClosed, FailureKind,
    Inbound, NoRoute, Outbox, Outboxes, ReplySink, TurnFailure, TurnResult,
};
use crate::core::ports::clock::Clock;
use crate::core::ports::llm::{
    ChatRequest, ChatResponse, ContextBudget, LlmClient, LlmError, StreamObserver,
};
use crate::core::session::SessionId;
use crate::storage::ActivityFile;

const ROOM: &str = "matrix:!room:example.org";
const MINUTE: Duration = Duration::from_secs(60);

/// What the fake dispatch saw of one submitted turn.
#[derive(Debug, Clone)]
struct Submitted {
    session: String,
    text: String,
    origin: Origin,
    metadata: Map<String, Value>,
    llm: Option<String>,
    streaming: bool,
}

/// Plays the agent loop: records the turn, delivers the scripted reply, reports the result.
struct FakeDispatch {
    reply: String,
    /// When set, the turn never ends (to test shutdown during a turn).
    hang: bool,
    /// When set, the turn reports failure after delivering its (error) text.
    fail: bool,
    submitted: Mutex<Vec<Submitted>>,
    hung: Mutex<Vec<oneshot::Sender<TurnResult>>>,
}

impl FakeDispatch {
    fn replying(reply: &str) -> Arc<Self> {
        Arc::new(Self {
            reply: reply.to_owned(),
            hang: false,
            fail: false,
            submitted: Mutex::new(Vec::new()),
            hung: Mutex::new(Vec::new()),
        })
    }

    fn hanging() -> Arc<Self> {
        Arc::new(Self {
            hang: true,
            ..Arc::into_inner(Self::replying("")).unwrap()
        })
    }

    fn failing(error_text: &str) -> Arc<Self> {
        Arc::new(Self {
            fail: true,
            ..Arc::into_inner(Self::replying(error_text)).unwrap()
        })
    }

    fn submitted(&self) -> Vec<Submitted> {
        self.submitted.lock().unwrap().clone()
    }
}

impl Dispatch for FakeDispatch {
    fn submit(&self, inbound: Inbound) -> Result<oneshot::Receiver<TurnResult>, DispatchClosed> {
        self.submitted.lock().unwrap().push(Submitted {
            session: inbound.session.to_string(),
            text: inbound.text.clone(),
            origin: inbound.origin.clone(),
            metadata: inbound.metadata.clone(),
            llm: inbound.llm.as_ref().map(|llm| llm.name().to_owned()),
            streaming: inbound.reply.streaming(),
        });
        let (sender, receiver) = oneshot::channel();
        if self.hang {
            self.hung.lock().unwrap().push(sender);
            return Ok(receiver);
        }
        let reply = self.reply.clone();
        let fail = self.fail;
        tokio::spawn(async move {
            if inbound.reply.streaming() {
                inbound.reply.delta(&reply).await;
            }
            let _ = inbound.reply.deliver(&reply).await;
            let result = if fail {
                TurnResult::Failed(TurnFailure::new(FailureKind::Llm, reply))
            } else {
                TurnResult::Replied(reply)
            };
            let _ = sender.send(result);
        });
        Ok(receiver)
    }
}

/// Records what is delivered to each session; only `reachable` sessions have an outbox.
struct FakeOutboxes {
    reachable: Vec<String>,
    delivered: Arc<Mutex<Vec<(String, String)>>>,
}

impl FakeOutboxes {
    fn new(reachable: &[&str]) -> Arc<Self> {
        Arc::new(Self {
            reachable: reachable.iter().map(|s| (*s).to_owned()).collect(),
            delivered: Arc::default(),
        })
    }

    fn delivered(&self) -> Vec<(String, String)> {
        self.delivered.lock().unwrap().clone()
    }
}

struct RecordingSink {
    session: String,
    delivered: Arc<Mutex<Vec<(String, String)>>>,
}

#[async_trait]
impl ReplySink for RecordingSink {
    fn streaming(&self) -> bool {
        true
    }

    async fn delta(&self, text: &str) {
        let entry = (self.session.clone(), format!("delta:{text}"));
        self.delivered.lock().unwrap().push(entry);
    }

    async fn deliver(&self, text: &str) -> Result<(), DeliveryError> {
        let entry = (self.session.clone(), text.to_owned());
        self.delivered.lock().unwrap().push(entry);
        Ok(())
    }
}

#[async_trait]
impl Outboxes for FakeOutboxes {
    async fn outbox(
        &self,
        session: &SessionId,
        _metadata: &Map<String, Value>,
    ) -> Result<Outbox, NoRoute> {
        if !self.reachable.iter().any(|s| s == session.as_str()) {
            return Err(NoRoute {
                session: session.to_string(),
                reason: "not running".to_owned(),
            });
        }
        Ok(Outbox {
            sink: Arc::new(RecordingSink {
                session: session.to_string(),
                delivered: Arc::clone(&self.delivered),
            }),
            readers: Readers::Unknown,
        })
    }
}

/// An in-memory activity log.
#[derive(Default)]
struct MemoryActivity(Mutex<Option<(SessionId, Map<String, Value>)>>);

impl ActivityLog for MemoryActivity {
    fn record(&self, session: &SessionId, metadata: &Map<String, Value>) {
        *self.0.lock().unwrap() = Some((session.clone(), metadata.clone()));
    }

    fn last(&self) -> Option<(SessionId, Map<String, Value>)> {
        self.0.lock().unwrap().clone()
    }
}

/// Wall-clock time that advances with tokio's (paused) timer.
struct PausedClock {
    base: DateTime<Utc>,
    started: tokio::time::Instant,
}

impl PausedClock {
    fn at(rfc3339: &str) -> Arc<Self> {
        Arc::new(Self {
            base: DateTime::parse_from_rfc3339(rfc3339).unwrap().to_utc(),
            started: tokio::time::Instant::now(),
        })
    }
}

impl Clock for PausedClock {
    fn now(&self) -> DateTime<FixedOffset> {
        (self.base + self.started.elapsed()).fixed_offset()
    }
}

struct FakeLlm;

#[async_trait]
impl LlmClient for FakeLlm {
    async fn chat(
        &self,
        _request: ChatRequest<'_>,
        _observer: StreamObserver<'_>,
    ) -> Result<ChatResponse, LlmError> {
        Err(LlmError::Config("not used in these tests".to_owned()))
    }

    fn context_budget(&self) -> Option<ContextBudget> {
        None
    }

    fn name(&self) -> &str {
        "pool:heartbeat"
    }
}

fn config(hours: (&str, &str), target: &str) -> HeartbeatConfig {
    HeartbeatConfig {
        interval_minutes: 30,
        active_hours_start: hours.0.to_owned(),
        active_hours_end: hours.1.to_owned(),
        timezone: "Europe/Berlin".to_owned(),
        target: target.to_owned(),
        ..HeartbeatConfig::default()
    }
}

fn room_activity() -> Arc<MemoryActivity> {
    let activity = Arc::new(MemoryActivity::default());
    let mut metadata = Map::new();
    metadata.insert(
        "room_id".to_owned(),
        Value::String("!room:example.org".to_owned()),
    );
    activity.record(&SessionId::parse(ROOM).unwrap(), &metadata);
    activity
}

fn write_checklist(workspace: &Path, text: &str) {
    std::fs::write(workspace.join("HEARTBEAT.md"), text).unwrap();
}

/// A heartbeat at 12:00 Berlin time (11:00 UTC in winter) with the given parts.
fn heartbeat(
    config: &HeartbeatConfig,
    workspace: &Path,
    activity: Arc<dyn ActivityLog>,
    outboxes: Arc<FakeOutboxes>,
) -> Arc<HeartbeatChannel> {
    heartbeat_at(
        "2026-01-15T11:00:00Z",
        config,
        workspace,
        activity,
        outboxes,
    )
}

/// A heartbeat whose wall clock starts at `start` (RFC 3339).
fn heartbeat_at(
    start: &str,
    config: &HeartbeatConfig,
    workspace: &Path,
    activity: Arc<dyn ActivityLog>,
    outboxes: Arc<FakeOutboxes>,
) -> Arc<HeartbeatChannel> {
    let llm: Arc<dyn LlmClient> = Arc::new(FakeLlm);
    let channel =
        HeartbeatChannel::new(config, workspace.to_owned(), activity, outboxes, Some(llm))
            .unwrap()
            .with_clock(PausedClock::at(start));
    Arc::new(channel)
}

/// Runs `channel` for `duration` of paused time, then shuts it down.
async fn run_for(channel: Arc<HeartbeatChannel>, dispatch: Arc<FakeDispatch>, duration: Duration) {
    let context = ChannelContext {
        dispatch,
        shutdown: CancellationToken::new(),
        ready: CancellationToken::new(),
        tasks: TaskTracker::new(),
        liveness: Arc::new(crate::gateway::liveness::Liveness::new()),
    };
    let task = {
        let context = context.clone();
        tokio::spawn(async move { channel.run(context).await })
    };
    tokio::time::sleep(duration).await;
    assert!(context.ready.is_cancelled(), "the heartbeat reports ready");
    context.shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(1), task)
        .await
        .expect("the heartbeat stops promptly")
        .unwrap()
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn an_alert_inside_hours_is_delivered_to_the_last_active_session() {
    let workspace = tempfile::tempdir().unwrap();
    write_checklist(workspace.path(), "# Tasks\n- [ ] check the backups\n");
    let dispatch = FakeDispatch::replying("The backup failed last night.");
    let outboxes = FakeOutboxes::new(&[ROOM]);
    let channel = heartbeat(
        &config(("09:00", "17:00"), ""),
        workspace.path(),
        room_activity(),
        Arc::clone(&outboxes),
    );
    run_for(Arc::clone(&channel), Arc::clone(&dispatch), 31 * MINUTE).await;

    let submitted = dispatch.submitted();
    assert_eq!(submitted.len(), 1);
    let turn = &submitted[0];
    assert_eq!(turn.session, ROOM);
    assert_eq!(turn.origin, Origin::Heartbeat);
    assert_eq!(turn.text, HeartbeatConfig::default().prompt);
    assert_eq!(turn.metadata["room_id"], "!room:example.org");
    assert_eq!(turn.llm.as_deref(), Some("pool:heartbeat"));
    assert!(!turn.streaming, "the heartbeat sink never streams");
    assert_eq!(
        outboxes.delivered(),
        vec![(ROOM.to_owned(), "The backup failed last night.".to_owned())]
    );
    let status = channel.status();
    assert_eq!(status.last_outcome, Some(TickOutcome::AlertDelivered));
    assert_eq!(
        status.last_tick,
        Some(
            DateTime::parse_from_rfc3339("2026-01-15T11:30:00Z")
                .unwrap()
                .to_utc()
        )
    );
}

#[tokio::test(start_paused = true)]
async fn heartbeat_ok_is_never_delivered() {
    for reply in [
        "HEARTBEAT_OK",
        "HEARTBEAT_OK.",
        "All quiet.\nHEARTBEAT_OK",
        "  ",
    ] {
        let workspace = tempfile::tempdir().unwrap();
        write_checklist(workspace.path(), "- [ ] check the server\n");
        let dispatch = FakeDispatch::replying(reply);
        let outboxes = FakeOutboxes::new(&[ROOM]);
        let channel = heartbeat(
            &config(("00:00", "24:00"), ""),
            workspace.path(),
            room_activity(),
            Arc::clone(&outboxes),
        );
        run_for(Arc::clone(&channel), Arc::clone(&dispatch), 31 * MINUTE).await;
        assert_eq!(dispatch.submitted().len(), 1, "reply {reply:?}");
        assert_eq!(outboxes.delivered(), vec![], "reply {reply:?}");
        assert_eq!(channel.status().last_outcome, Some(TickOutcome::Ok));
    }
}

#[tokio::test(start_paused = true)]
async fn a_failed_turn_delivers_its_error_text_and_is_reported() {
    let workspace = tempfile::tempdir().unwrap();
    write_checklist(workspace.path(), "- [ ] check the server\n");
    let error_text = "Error: could not reach the LLM.";
    let dispatch = FakeDispatch::failing(error_text);
    let outboxes = FakeOutboxes::new(&[ROOM]);
    let channel = heartbeat(
        &config(("00:00", "24:00"), ""),
        workspace.path(),
        room_activity(),
        Arc::clone(&outboxes),
    );
    run_for(Arc::clone(&channel), dispatch, 31 * MINUTE).await;
    assert_eq!(
        outboxes.delivered(),
        vec![(ROOM.to_owned(), error_text.to_owned())]
    );
    assert_eq!(channel.status().last_outcome, Some(TickOutcome::Failed));
}

/// Runs one interval and checks that nothing was dispatched and the tick ended as `expected`.
async fn check_skipped(
    config: &HeartbeatConfig,
    checklist: Option<&str>,
    activity: Arc<dyn ActivityLog>,
    expected: TickOutcome,
) {
    let workspace = tempfile::tempdir().unwrap();
    if let Some(text) = checklist {
        write_checklist(workspace.path(), text);
    }
    let dispatch = FakeDispatch::replying("An alert.");
    let outboxes = FakeOutboxes::new(&[ROOM]);
    let channel = heartbeat(config, workspace.path(), activity, Arc::clone(&outboxes));
    run_for(Arc::clone(&channel), Arc::clone(&dispatch), 31 * MINUTE).await;
    assert_eq!(dispatch.submitted().len(), 0, "expected {expected:?}");
    assert_eq!(outboxes.delivered(), vec![]);
    assert_eq!(channel.status().last_outcome, Some(expected));
}

#[tokio::test(start_paused = true)]
async fn skips_without_dispatching() {
    let work = Some("- [ ] check the server");
    let day = ("00:00", "24:00");
    // 12:30 Berlin is outside 22:00-06:00.
    check_skipped(
        &config(("22:00", "06:00"), ""),
        work,
        room_activity(),
        TickOutcome::SkippedOutsideHours,
    )
    .await;
    check_skipped(
        &config(day, ""),
        None,
        room_activity(),
        TickOutcome::SkippedEmpty,
    )
    .await;
    check_skipped(
        &config(day, ""),
        Some("# Heartbeat\n<!--\nAdd tasks.\n-->\n- [x] done\n"),
        room_activity(),
        TickOutcome::SkippedEmpty,
    )
    .await;
    let nobody: Arc<dyn ActivityLog> = Arc::new(MemoryActivity::default());
    check_skipped(&config(day, ""), work, nobody, TickOutcome::NoTarget).await;
    check_skipped(
        &config(day, "email:bob@example.org"),
        work,
        room_activity(),
        TickOutcome::NoRoute,
    )
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_configured_target_wins_over_the_activity_log() {
    const OTHER: &str = "email:owner@example.org";
    let workspace = tempfile::tempdir().unwrap();
    write_checklist(workspace.path(), "- [ ] check the server\n");
    let dispatch = FakeDispatch::replying("Server down.");
    let outboxes = FakeOutboxes::new(&[ROOM, OTHER]);
    let channel = heartbeat(
        &config(("00:00", "24:00"), OTHER),
        workspace.path(),
        room_activity(),
        Arc::clone(&outboxes),
    );
    run_for(channel, Arc::clone(&dispatch), 31 * MINUTE).await;
    let submitted = dispatch.submitted();
    assert_eq!(submitted.len(), 1);
    assert_eq!(submitted[0].session, OTHER);
    assert!(
        submitted[0].metadata.is_empty(),
        "the room's metadata is not the target's"
    );
    assert_eq!(
        outboxes.delivered(),
        vec![(OTHER.to_owned(), "Server down.".to_owned())]
    );
}

#[tokio::test(start_paused = true)]
async fn the_interval_is_honoured() {
    let workspace = tempfile::tempdir().unwrap();
    write_checklist(workspace.path(), "- [ ] check the server\n");
    let dispatch = FakeDispatch::replying("HEARTBEAT_OK");
    let channel = heartbeat(
        &config(("00:00", "24:00"), ""),
        workspace.path(),
        room_activity(),
        FakeOutboxes::new(&[ROOM]),
    );
    // Ticks at 30, 60 and 90 minutes; none at the start (sleep first).
    run_for(Arc::clone(&channel), Arc::clone(&dispatch), 29 * MINUTE).await;
    assert_eq!(dispatch.submitted().len(), 0);
    run_for(Arc::clone(&channel), Arc::clone(&dispatch), 95 * MINUTE).await;
    assert_eq!(dispatch.submitted().len(), 3);
    let status = channel.status();
    assert!(status.next_tick > status.last_tick);
}

#[tokio::test(start_paused = true)]
async fn the_window_follows_the_clock_across_midnight() {
    // Started at 12:00 Berlin with 22:00-06:00: ticks every 30 min for a day fire only at
    // 22:00, 22:30, ..., 05:30: 16 ticks.
    let workspace = tempfile::tempdir().unwrap();
    write_checklist(workspace.path(), "- [ ] check the server\n");
    let dispatch = FakeDispatch::replying("HEARTBEAT_OK");
    let channel = heartbeat(
        &config(("22:00", "06:00"), ""),
        workspace.path(),
        room_activity(),
        FakeOutboxes::new(&[ROOM]),
    );
    run_for(channel, Arc::clone(&dispatch), 24 * 60 * MINUTE + MINUTE).await;
    assert_eq!(
        dispatch.submitted().len(),
        16,
        "22:00 through 06:00 exclusive"
    );
}

/// Counts the turns of a 22:00-06:00 Berlin heartbeat run for a day from `start`.
async fn overnight_ticks(start: &str) -> usize {
    let workspace = tempfile::tempdir().unwrap();
    write_checklist(workspace.path(), "- [ ] check the server\n");
    let dispatch = FakeDispatch::replying("HEARTBEAT_OK");
    let channel = heartbeat_at(
        start,
        &config(("22:00", "06:00"), ""),
        workspace.path(),
        room_activity(),
        FakeOutboxes::new(&[ROOM]),
    );
    run_for(channel, Arc::clone(&dispatch), 24 * 60 * MINUTE + MINUTE).await;
    dispatch.submitted().len()
}

#[tokio::test(start_paused = true)]
async fn the_window_follows_the_zone_across_dst_nights() {
    // Spring forward (2025-03-30): 22:00 CET to 06:00 CEST is 7 real hours, 21:00-04:00 UTC.
    assert_eq!(overnight_ticks("2025-03-29T11:00:00Z").await, 14);
    // Fall back (2025-10-26): 22:00 CEST to 06:00 CET is 9 real hours, 20:00-05:00 UTC.
    assert_eq!(overnight_ticks("2025-10-25T10:00:00Z").await, 18);
}

#[tokio::test(start_paused = true)]
async fn shutdown_stops_a_waiting_turn_promptly() {
    let workspace = tempfile::tempdir().unwrap();
    write_checklist(workspace.path(), "- [ ] check the server\n");
    let dispatch = FakeDispatch::hanging();
    let channel = heartbeat(
        &config(("00:00", "24:00"), ""),
        workspace.path(),
        room_activity(),
        FakeOutboxes::new(&[ROOM]),
    );
    // The turn starts at 30 minutes and never ends; run_for asserts the prompt stop.
    run_for(channel, Arc::clone(&dispatch), 45 * MINUTE).await;
    assert_eq!(dispatch.submitted().len(), 1);
}

#[test]
fn the_last_active_session_survives_a_restart() {
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    write_checklist(workspace.path(), "- [ ] check the server\n");
    // Before the "restart": a person talks in the room (no runtime, so the write is inline).
    let mut metadata = Map::new();
    metadata.insert(
        "room_id".to_owned(),
        Value::String("!room:example.org".to_owned()),
    );
    ActivityFile::new(home.path()).record(&SessionId::parse(ROOM).unwrap(), &metadata);

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    runtime.block_on(async {
        let dispatch = FakeDispatch::replying("Reminder: dentist at 3.");
        let outboxes = FakeOutboxes::new(&[ROOM]);
        let activity: Arc<dyn ActivityLog> = Arc::new(ActivityFile::new(home.path()));
        let channel = heartbeat(
            &config(("00:00", "24:00"), ""),
            workspace.path(),
            activity,
            Arc::clone(&outboxes),
        );
        run_for(channel, Arc::clone(&dispatch), 31 * MINUTE).await;
        let submitted = dispatch.submitted();
        assert_eq!(submitted.len(), 1);
        assert_eq!(submitted[0].session, ROOM);
        assert_eq!(submitted[0].metadata, metadata);
        assert_eq!(outboxes.delivered().len(), 1);
    });
}

#[test]
fn construction_rejects_bad_zones_and_targets() {
    let workspace = tempfile::tempdir().unwrap();
    let build = |config: &HeartbeatConfig| {
        HeartbeatChannel::new(
            config,
            workspace.path().to_owned(),
            Arc::new(MemoryActivity::default()),
            FakeOutboxes::new(&[]),
            None,
        )
        .map(|_| ())
    };
    let mut bad_zone = config(("00:00", "24:00"), "");
    bad_zone.timezone = "Mars/Olympus".to_owned();
    assert!(build(&bad_zone).is_err());
    assert!(build(&config(("00:00", "24:00"), "Not A Session")).is_err());
    assert!(build(&config(("00:00", "24:00"), ROOM)).is_ok());
}
