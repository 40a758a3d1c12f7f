//! Tests of the cron scheduler and channel on injectable clocks (no real sleeping): slots,
//! at-most-once across a simulated restart, catch-up versus skip, one-shots, the lost-update
//! race between the scheduler and job edits, and the running channel's routing.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use chrono::{DateTime, Duration, FixedOffset, Utc};
use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::store::{CronJob, CronJobs, NewJob};
use super::*;
use crate::config::MissedRuns;
use crate::core::audience::Readers;
use crate::core::origin::Origin;
use crate::core::ports::channel::{
    Channel, ChannelContext, DeliveryError, Dispatch, DispatchClosed, FailureKind, Inbound,
    NoRoute, Outbox, Outboxes, ReplySink, TurnFailure, TurnResult,
};
use crate::core::ports::clock::Clock;
use crate::core::session::SessionId;

/// A clock the test sets by hand.
struct ManualClock(Mutex<DateTime<Utc>>);

impl ManualClock {
    fn at(text: &str) -> Arc<Self> {
        Arc::new(Self(Mutex::new(utc(text))))
    }

    fn set(&self, text: &str) {
        *self.0.lock().unwrap() = utc(text);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<FixedOffset> {
        self.0.lock().unwrap().fixed_offset()
    }
}

fn utc(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .unwrap()
        .with_timezone(&Utc)
}

fn new_job(name: &str, schedule: &str, target: &str) -> NewJob {
    NewJob {
        name: name.to_owned(),
        message: format!("prompt of {name}"),
        schedule: schedule.to_owned(),
        channel: target.to_owned(),
        timezone: "UTC".to_owned(),
        metadata: Map::new(),
        ..NewJob::default()
    }
}

/// A store in a fresh home with one job created at `created`; returns the job id too.
async fn store_with(home: &tempfile::TempDir, schedule: &str, created: &str) -> (CronJobs, String) {
    let store = CronJobs::new(home.path());
    let job = add_job(
        &store,
        new_job("job", schedule, "email:me@x.org"),
        utc(created),
    )
    .await
    .unwrap();
    (store, job.id)
}

async fn claim_at(store: &CronJobs, now: &str, policy: MissedRuns) -> Claim {
    let clock = ManualClock::at(now);
    CronScheduler::new(store.clone(), clock, policy)
        .claim()
        .await
        .unwrap()
}

fn slots(claim: &Claim) -> Vec<DateTime<Utc>> {
    claim.fires.iter().map(|fire| fire.slot).collect()
}

#[tokio::test]
async fn cron_slots_fire_on_time_in_the_zone() {
    let home = tempfile::tempdir().unwrap();
    let (store, _) = store_with(&home, "*/5 * * * *", "2026-03-01T10:02:00Z").await;
    let claim = claim_at(&store, "2026-03-01T10:04:59Z", MissedRuns::CatchUp).await;
    assert!(claim.fires.is_empty());
    assert_eq!(claim.next_wake, Some(utc("2026-03-01T10:05:00Z")));
    let claim = claim_at(&store, "2026-03-01T10:05:00Z", MissedRuns::CatchUp).await;
    assert_eq!(slots(&claim), [utc("2026-03-01T10:05:00Z")]);
    assert_eq!(claim.next_wake, Some(utc("2026-03-01T10:10:00Z")));
}

#[tokio::test]
async fn a_slot_fires_at_most_once_across_a_restart() {
    let home = tempfile::tempdir().unwrap();
    let (store, id) = store_with(&home, "every 60", "2026-03-01T10:00:00Z").await;
    let claim = claim_at(&store, "2026-03-01T10:01:00Z", MissedRuns::CatchUp).await;
    assert_eq!(slots(&claim), [utc("2026-03-01T10:01:00Z")]);
    assert_eq!(claim.fires[0].job_id, id);
    // The same scheduler looks again: nothing.
    let claim = claim_at(&store, "2026-03-01T10:01:10Z", MissedRuns::CatchUp).await;
    assert!(claim.fires.is_empty());
    // "Restart": a new store handle and scheduler over the same jobs.json.
    let restarted = CronJobs::new(home.path());
    let claim = claim_at(&restarted, "2026-03-01T10:01:30Z", MissedRuns::CatchUp).await;
    assert!(claim.fires.is_empty(), "{claim:?}");
    let claim = claim_at(&restarted, "2026-03-01T10:02:00Z", MissedRuns::CatchUp).await;
    assert_eq!(slots(&claim), [utc("2026-03-01T10:02:00Z")]);
    let job = &restarted.load().await.unwrap()[0];
    assert_eq!(job.last_slot, Some(utc("2026-03-01T10:02:00Z")));
}

#[tokio::test]
async fn two_schedulers_claiming_at_once_fire_a_slot_once() {
    let home = tempfile::tempdir().unwrap();
    let (store, _) = store_with(&home, "every 60", "2026-03-01T10:00:00Z").await;
    let other = CronJobs::new(home.path());
    let (a, b) = tokio::join!(
        claim_at(&store, "2026-03-01T10:01:00Z", MissedRuns::CatchUp),
        claim_at(&other, "2026-03-01T10:01:00Z", MissedRuns::CatchUp),
    );
    assert_eq!(a.fires.len() + b.fires.len(), 1);
}

#[tokio::test]
async fn catch_up_collapses_missed_slots_into_one_run() {
    let home = tempfile::tempdir().unwrap();
    let (store, _) = store_with(&home, "0 * * * *", "2026-03-01T00:30:00Z").await;
    // Down from 00:30 to 05:10: slots 01:00..05:00 were missed.
    let claim = claim_at(&store, "2026-03-01T05:10:00Z", MissedRuns::CatchUp).await;
    assert_eq!(slots(&claim), [utc("2026-03-01T05:00:00Z")]);
    assert_eq!(claim.fires[0].collapsed, 4);
    let claim = claim_at(&store, "2026-03-01T05:20:00Z", MissedRuns::CatchUp).await;
    assert!(claim.fires.is_empty());
    let job = &store.load().await.unwrap()[0];
    assert_eq!(job.skipped.count, 0);
}

#[tokio::test]
async fn skip_records_missed_slots_and_waits_for_the_next() {
    let home = tempfile::tempdir().unwrap();
    let (store, _) = store_with(&home, "0 * * * *", "2026-03-01T00:30:00Z").await;
    let claim = claim_at(&store, "2026-03-01T05:10:00Z", MissedRuns::Skip).await;
    assert!(claim.fires.is_empty());
    assert_eq!(claim.next_wake, Some(utc("2026-03-01T06:00:00Z")));
    let job = &store.load().await.unwrap()[0];
    assert_eq!(job.skipped.count, 5);
    assert_eq!(job.skipped.last, Some(utc("2026-03-01T05:00:00Z")));
    let status = job_status(job, utc("2026-03-01T05:10:00Z"));
    assert_eq!(
        (status.skipped, status.next_run),
        (5, Some(utc("2026-03-01T06:00:00Z")))
    );
    let claim = claim_at(&store, "2026-03-01T06:00:00Z", MissedRuns::Skip).await;
    assert_eq!(slots(&claim), [utc("2026-03-01T06:00:00Z")]);
    // Down again, back just in time for a slot: it fires, the earlier ones are skipped.
    let claim = claim_at(&store, "2026-03-01T09:00:20Z", MissedRuns::Skip).await;
    assert_eq!(slots(&claim), [utc("2026-03-01T09:00:00Z")]);
    let job = &store.load().await.unwrap()[0];
    assert_eq!(job.skipped.count, 7);
    assert_eq!(job.skipped.last, Some(utc("2026-03-01T08:00:00Z")));
}

#[tokio::test]
async fn a_one_shot_fires_once_and_is_disabled() {
    let home = tempfile::tempdir().unwrap();
    let (store, _) = store_with(
        &home,
        "at 2026-03-01T12:00:00+01:00",
        "2026-03-01T10:00:00Z",
    )
    .await;
    let claim = claim_at(&store, "2026-03-01T10:59:59Z", MissedRuns::CatchUp).await;
    assert!(claim.fires.is_empty());
    assert_eq!(claim.next_wake, Some(utc("2026-03-01T11:00:00Z")));
    let claim = claim_at(&store, "2026-03-01T11:00:00Z", MissedRuns::CatchUp).await;
    assert_eq!(slots(&claim), [utc("2026-03-01T11:00:00Z")]);
    let job = &store.load().await.unwrap()[0];
    assert!(!job.enabled);
    let restarted = CronJobs::new(home.path());
    let claim = claim_at(&restarted, "2026-03-02T00:00:00Z", MissedRuns::CatchUp).await;
    assert!(claim.fires.is_empty());
    assert_eq!(claim.next_wake, None);
}

#[tokio::test]
async fn re_enabled_jobs_do_not_fire_for_slots_while_disabled() {
    let home = tempfile::tempdir().unwrap();
    let (store, id) = store_with(&home, "0 * * * *", "2026-03-01T00:30:00Z").await;
    set_enabled(&store, &id, false, utc("2026-03-01T00:40:00Z"))
        .await
        .unwrap();
    assert!(
        claim_at(&store, "2026-03-01T03:00:00Z", MissedRuns::CatchUp)
            .await
            .fires
            .is_empty()
    );
    set_enabled(&store, &id, true, utc("2026-03-01T03:30:00Z"))
        .await
        .unwrap();
    let claim = claim_at(&store, "2026-03-01T03:40:00Z", MissedRuns::CatchUp).await;
    assert!(claim.fires.is_empty(), "{claim:?}");
    let claim = claim_at(&store, "2026-03-01T04:00:00Z", MissedRuns::CatchUp).await;
    assert_eq!(slots(&claim), [utc("2026-03-01T04:00:00Z")]);
}

#[test]
fn due_does_not_claim() {
    let now = utc("2026-03-01T10:01:00Z");
    let job = CronJob::new(
        &[],
        new_job("j", "every 60", "email:a@b"),
        utc("2026-03-01T10:00:00Z"),
    );
    let jobs = vec![job];
    assert_eq!(due(&jobs, now, MissedRuns::CatchUp).len(), 1);
    assert_eq!(due(&jobs, now, MissedRuns::CatchUp).len(), 1);
    assert_eq!(jobs[0].last_slot, None);
}

#[tokio::test]
async fn no_update_is_lost_while_the_scheduler_claims() {
    let home = tempfile::tempdir().unwrap();
    let (store, ticker) = store_with(&home, "every 1", "2026-03-01T10:00:00Z").await;
    // A second handle on the same file stands for another process (the CLI).
    let other = CronJobs::new(home.path());
    let clock = ManualClock::at("2026-03-01T10:00:00Z");
    let scheduler = CronScheduler::new(store.clone(), clock.clone(), MissedRuns::CatchUp);
    let mut edits = tokio::task::JoinSet::new();
    for n in 0..40 {
        let handle = if n % 2 == 0 {
            store.clone()
        } else {
            other.clone()
        };
        edits.spawn(async move {
            let job = new_job(&format!("edit-{n}"), "0 9 * * *", "email:me@x.org");
            let job = add_job(&handle, job, utc("2026-03-01T09:00:00Z"))
                .await
                .unwrap();
            set_enabled(&handle, &job.id, false, utc("2026-03-01T09:00:00Z"))
                .await
                .unwrap();
        });
    }
    let mut fired = 0;
    for second in 1..=30 {
        clock.set(&format!("2026-03-01T10:00:{second:02}Z"));
        fired += scheduler.claim().await.unwrap().fires.len();
    }
    while let Some(result) = edits.join_next().await {
        result.unwrap();
    }
    let jobs = other.load().await.unwrap();
    assert_eq!(jobs.len(), 41, "an added job was lost");
    assert_eq!(
        jobs.iter().filter(|job| !job.enabled).count(),
        40,
        "a toggle was lost"
    );
    let ticker = jobs.iter().find(|job| job.id == ticker).unwrap();
    assert_eq!(fired, 30);
    assert_eq!(
        ticker.last_slot,
        Some(utc("2026-03-01T10:00:30Z")),
        "a claim was lost"
    );
}

/// A clock that follows tokio's (paused) time from a fixed start.
struct TokioClock {
    start: DateTime<Utc>,
    origin: tokio::time::Instant,
}

impl Clock for TokioClock {
    fn now(&self) -> DateTime<FixedOffset> {
        let elapsed = Duration::from_std(self.origin.elapsed()).unwrap();
        (self.start + elapsed).fixed_offset()
    }
}

struct NullSink;

#[async_trait]
impl ReplySink for NullSink {
    async fn deliver(&self, _text: &str) -> Result<(), DeliveryError> {
        Ok(())
    }
}

/// Routes `email:` sessions only, as if Matrix were down.
struct EmailOnly;

#[async_trait]
impl Outboxes for EmailOnly {
    async fn outbox(
        &self,
        session: &SessionId,
        _metadata: &Map<String, Value>,
    ) -> Result<Outbox, NoRoute> {
        if session.channel() == "email" {
            Ok(Outbox {
                sink: Arc::new(NullSink),
                readers: Readers::Unknown,
            })
        } else {
            Err(NoRoute {
                session: session.to_string(),
                reason: format!("channel {} is not running", session.channel()),
            })
        }
    }
}

/// What the recorder saw of one inbound: session, text, origin, metadata.
type Submitted = (String, String, Origin, Map<String, Value>);

/// Records what was submitted and holds each turn's outcome until the test answers it.
struct Recorder {
    submitted: mpsc::UnboundedSender<Submitted>,
    outcomes: Mutex<Vec<oneshot::Sender<TurnResult>>>,
}

impl Dispatch for Recorder {
    fn submit(&self, inbound: Inbound) -> Result<oneshot::Receiver<TurnResult>, DispatchClosed> {
        let record = (
            inbound.session.to_string(),
            inbound.text.clone(),
            inbound.origin.clone(),
            inbound.metadata.clone(),
        );
        let _ = self.submitted.send(record);
        let (sender, receiver) = oneshot::channel();
        self.outcomes.lock().unwrap().push(sender);
        Ok(receiver)
    }
}

#[tokio::test(start_paused = true)]
async fn the_channel_fires_routable_jobs_and_reports_unroutable_ones() {
    let home = tempfile::tempdir().unwrap();
    let start = utc("2026-03-01T10:00:00Z");
    let store = CronJobs::new(home.path());
    let mut email = new_job("mail", "every 60", "email:me@x.org");
    email.metadata = json!({"email_subject": "[squidbot] mail"})
        .as_object()
        .unwrap()
        .clone();
    let email = add_job(&store, email, start).await.unwrap();
    let matrix = add_job(
        &store,
        new_job("room", "every 60", "matrix:!r:x.org"),
        start,
    )
    .await
    .unwrap();
    let clock = Arc::new(TokioClock {
        start,
        origin: tokio::time::Instant::now(),
    });
    let channel = Arc::new(CronChannel::new(
        store.clone(),
        clock,
        MissedRuns::CatchUp,
        Arc::new(EmailOnly),
    ));
    let (sender, mut submitted) = mpsc::unbounded_channel();
    let recorder = Arc::new(Recorder {
        submitted: sender,
        outcomes: Mutex::default(),
    });
    let context = ChannelContext {
        dispatch: recorder.clone(),
        shutdown: CancellationToken::new(),
        ready: CancellationToken::new(),
        tasks: TaskTracker::new(),
        liveness: Arc::new(crate::gateway::liveness::Liveness::new()),
    };
    let task = tokio::spawn({
        let channel = channel.clone();
        let context = context.clone();
        async move { channel.run(context).await }
    });
    for _ in 0..2 {
        let (session, text, origin, metadata) = submitted.recv().await.unwrap();
        assert_eq!(session, "email:me@x.org");
        assert_eq!(text, "prompt of mail");
        assert_eq!(
            origin,
            Origin::Cron {
                job: email.id.clone()
            }
        );
        assert_eq!(metadata["email_subject"], "[squidbot] mail");
    }
    assert!(context.ready.is_cancelled());
    let snapshot = channel.snapshot().await.unwrap();
    let room = snapshot.iter().find(|job| job.id == matrix.id).unwrap();
    let error = room.last_error.as_deref().unwrap_or_default();
    assert!(error.contains("matrix is not running"), "{error:?}");
    assert!(room.last_slot.is_some());
    context.shutdown.cancel();
    task.await.unwrap().unwrap();
    // The channel stopped, but the two runs' outcomes are still awaited in the gateway's
    // tracker: a turn that ends during shutdown still gets its outcome recorded.
    assert_eq!(context.tasks.len(), 2);
    for outcome in recorder.outcomes.lock().unwrap().drain(..) {
        let _ = outcome.send(TurnResult::Failed(TurnFailure::new(
            FailureKind::Llm,
            "late",
        )));
    }
    context.tasks.close();
    context.tasks.wait().await;
    let snapshot = channel.snapshot().await.unwrap();
    let mail = snapshot.iter().find(|job| job.id == email.id).unwrap();
    assert_eq!(mail.last_error.as_deref(), Some("run failed: late"));
}
