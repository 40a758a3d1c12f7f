//! Deciding which jobs fire: the pure slot logic and the claim that makes firing at-most-once.
//!
//! A job's *baseline* is the latest of its last handled slot, its creation and its last
//! re-enabling (or the original's `last_run`). The slots after the baseline up to now are due.
//! The claim step runs inside one locked store update: it sets `last_slot` to the slot being
//! fired *before* the job runs, so neither a crash nor a restart nor a second scheduler can fire
//! that slot again. Many due slots collapse into one run (`catch_up`) or, when they are older
//! than [`ON_TIME_GRACE`], are counted as skipped (`skip`). One-shot `at` jobs are disabled once
//! their slot is handled, and kept so that `cron list` and status still show them.

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use serde_json::{Map, Value};

use super::schedule::{Schedule, Zone, parse_zone};
use super::store::{CronJob, CronJobs, CronStoreError};
use crate::config::MissedRuns;
use crate::core::ports::clock::Clock;

/// A slot this much older than now counts as missed (it was not fired while it was current).
pub const ON_TIME_GRACE: Duration = Duration::seconds(60);

/// One claimed run of a job.
#[derive(Clone, Debug, PartialEq)]
pub struct Fire {
    /// The job id.
    pub job_id: String,
    /// The job name.
    pub name: String,
    /// The slot being fired.
    pub slot: DateTime<Utc>,
    /// The target session id (unvalidated text from the file).
    pub target: String,
    /// The prompt for the agent.
    pub message: String,
    /// Routing data for the reply.
    pub metadata: Map<String, Value>,
    /// How many earlier missed slots this run stands for (`catch_up`).
    pub collapsed: u64,
}

/// What one claim pass decided.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Claim {
    /// The runs to start now.
    pub fires: Vec<Fire>,
    /// The earliest future slot over the enabled jobs.
    pub next_wake: Option<DateTime<Utc>>,
}

/// Parses a job's schedule and zone.
fn parse(job: &CronJob) -> Result<(Schedule, Zone), String> {
    let schedule = Schedule::parse(&job.schedule).map_err(|error| error.to_string())?;
    let zone = parse_zone(&job.timezone).map_err(|error| error.to_string())?;
    Ok((schedule, zone))
}

/// The job's baseline: slots at or before it are never due.
fn baseline(job: &CronJob) -> Option<DateTime<Utc>> {
    let last_run = job
        .last_run
        .as_deref()
        .and_then(|text| DateTime::parse_from_rfc3339(text).ok())
        .map(|time| time.with_timezone(&Utc));
    [job.last_slot, job.resumed_at, job.created_at, last_run]
        .into_iter()
        .flatten()
        .max()
}

/// When `job` fires next after `now` (`None` when disabled, finished or unparseable). A slot
/// already due but not yet claimed counts as next.
pub fn next_run(job: &CronJob, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    if !job.enabled {
        return None;
    }
    let (schedule, zone) = parse(job).ok()?;
    let base = baseline(job).unwrap_or(now);
    let anchor = job.created_at.unwrap_or(base);
    schedule.next_slot_after(&zone, base, anchor)
}

/// The jobs due at `now`, without changing anything (what [`claim_due`] would fire).
pub fn due(jobs: &[CronJob], now: DateTime<Utc>, policy: MissedRuns) -> Vec<Fire> {
    let mut copy = jobs.to_vec();
    claim_due(&mut copy, now, policy).fires
}

/// Claims the due slots of `jobs` at `now`: records them as handled (`last_slot`, skipped
/// counts, one-shots disabled, `next_run`) and returns the runs to start. Call it inside
/// [`CronJobs::update`], so the claim and the save are one locked step.
pub fn claim_due(jobs: &mut [CronJob], now: DateTime<Utc>, policy: MissedRuns) -> Claim {
    let mut claim = Claim::default();
    for job in jobs.iter_mut().filter(|job| job.enabled) {
        let (schedule, zone) = match parse(job) {
            Ok(parsed) => parsed,
            Err(reason) => {
                if job.last_error.as_deref() != Some(reason.as_str()) {
                    tracing::warn!(job_id = %job.id, reason = %reason, "Cron job has an invalid schedule; it will not fire.");
                    job.last_error = Some(reason);
                }
                job.next_run = None;
                continue;
            }
        };
        let Some(base) = baseline(job) else {
            // A job from the original's file that never ran: its slots start now.
            job.created_at = Some(now);
            job.next_run = schedule.next_slot_after(&zone, now, now);
            claim.next_wake = earliest(claim.next_wake, job.next_run);
            continue;
        };
        let anchor = *job.created_at.get_or_insert(base);
        let latest = schedule
            .last_slot_until(&zone, now, anchor)
            .filter(|slot| *slot > base);
        if let Some(latest) = latest {
            let count = schedule.count_slots(&zone, base, latest, anchor).max(1);
            let on_time = now - latest <= ON_TIME_GRACE;
            job.last_slot = Some(latest);
            let fire = match policy {
                MissedRuns::CatchUp => true,
                MissedRuns::Skip => on_time,
            };
            let skipped = if fire { count - 1 } else { count };
            if skipped > 0 && policy == MissedRuns::Skip {
                let last_skipped = if fire {
                    schedule.last_slot_until(&zone, latest - Duration::seconds(1), anchor)
                } else {
                    Some(latest)
                };
                job.skipped.count += skipped;
                job.skipped.last = last_skipped.or(job.skipped.last);
                tracing::info!(job_id = %job.id, skipped, last_skipped = ?job.skipped.last, "Cron slots missed while down were skipped.");
            }
            if fire {
                if count > 1 {
                    tracing::info!(job_id = %job.id, missed = count, slot = %latest, "Cron job catches up on missed slots with one run.");
                }
                job.last_run = Some(now.to_rfc3339());
                claim.fires.push(Fire {
                    job_id: job.id.clone(),
                    name: job.name.clone(),
                    slot: latest,
                    target: job.channel.clone(),
                    message: job.message.clone(),
                    metadata: job.metadata.clone(),
                    collapsed: count - 1,
                });
            }
            if schedule.is_one_shot() {
                job.enabled = false;
            }
        }
        job.next_run = if job.enabled {
            schedule.next_slot_after(&zone, now.max(base), anchor)
        } else {
            None
        };
        claim.next_wake = earliest(claim.next_wake, job.next_run);
    }
    claim
}

fn earliest(a: Option<DateTime<Utc>>, b: Option<DateTime<Utc>>) -> Option<DateTime<Utc>> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The scheduler over the job store: [`claim_due`] at the clock's now, as one locked update.
#[derive(Clone)]
pub struct CronScheduler {
    store: CronJobs,
    clock: Arc<dyn Clock>,
    policy: MissedRuns,
}

impl CronScheduler {
    /// A scheduler over `store`, reading time from `clock`, treating missed slots per `policy`.
    pub fn new(store: CronJobs, clock: Arc<dyn Clock>, policy: MissedRuns) -> Self {
        Self {
            store,
            clock,
            policy,
        }
    }

    /// The store.
    pub fn store(&self) -> &CronJobs {
        &self.store
    }

    /// The clock's now, in UTC.
    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now().with_timezone(&Utc)
    }

    /// Claims the slots due now and returns the runs to start.
    pub async fn claim(&self) -> Result<Claim, CronStoreError> {
        let now = self.now();
        let policy = self.policy;
        self.store
            .update(move |jobs| claim_due(jobs, now, policy))
            .await
    }

    /// Records the outcome of a run (or why it could not start) on the job.
    pub async fn record_outcome(
        &self,
        job_id: &str,
        error: Option<String>,
    ) -> Result<(), CronStoreError> {
        let job_id = job_id.to_owned();
        self.store
            .update(move |jobs| {
                if let Some(job) = jobs.iter_mut().find(|job| job.id == job_id) {
                    job.last_error = error;
                }
            })
            .await
    }
}
