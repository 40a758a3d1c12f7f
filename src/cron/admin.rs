//! Managing jobs: the operations the agent's cron tools and `squidbot cron` share.
//!
//! Each change is one locked store update, so an add from the CLI, a toggle from a tool and a
//! claim by the scheduler never overwrite each other. Adding validates the schedule, the zone
//! and the target, and fills in the routing metadata the target channel needs to deliver.

use std::fmt::Write as _;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use super::CronError;
use super::schedule::validate;
use super::scheduler::next_run;
use super::store::{CronJob, CronJobs, NewJob};
use crate::core::session::SessionId;

/// How the channels route scheduled replies: each channel says what a job aimed at one of
/// its sessions carries (its routing keys are its own), so cron has no arm per channel.
pub trait JobRoutes: Send + Sync {
    /// The routing data a job named `name` aimed at `target` needs, or why it cannot be aimed
    /// there. `current` is the session (and its metadata) the job is created from, if any.
    fn route(
        &self,
        target: &SessionId,
        name: &str,
        current: Option<(&SessionId, &Map<String, Value>)>,
    ) -> Result<Map<String, Value>, String>;
}

/// Checks `target` and returns the metadata a job for it needs, as its channel in `routes`
/// says (a channel no route knows needs none). The terminal's own session is refused: nothing
/// delivers to it while no one types.
pub fn target_metadata(
    routes: &dyn JobRoutes,
    target: &SessionId,
    name: &str,
    current: Option<(&SessionId, &Map<String, Value>)>,
) -> Result<Map<String, Value>, CronError> {
    if target.channel() == SessionId::cli_local().channel() {
        return Err(CronError::InvalidTarget {
            target: target.to_string(),
            reason:
                "the terminal cannot receive scheduled replies; name a matrix: or email: session"
                    .into(),
        });
    }
    routes
        .route(target, name, current)
        .map_err(|reason| CronError::InvalidTarget {
            target: target.to_string(),
            reason,
        })
}

/// Validates and stores a new job; returns it. `new.metadata` is used as given.
pub async fn add_job(
    store: &CronJobs,
    new: NewJob,
    now: DateTime<Utc>,
) -> Result<CronJob, CronError> {
    validate(&new.schedule, &new.timezone, now)?;
    SessionId::parse(&new.channel).map_err(|error| CronError::InvalidTarget {
        target: new.channel.clone(),
        reason: error.to_string(),
    })?;
    let job = store
        .update(move |jobs| {
            let mut job = CronJob::new(jobs, new, now);
            job.next_run = next_run(&job, now);
            jobs.push(job.clone());
            job
        })
        .await?;
    tracing::info!(job_id = %job.id, name = %job.name, schedule = %job.schedule, target = %job.channel, "Cron job added.");
    Ok(job)
}

/// The index of the job `wanted` names: its id, else its name if only one job has it.
///
/// Names are what people remember and what `cron list` shows first, so they work wherever
/// an id does; an id always wins, and a name two jobs share is refused with their ids.
fn find_job(jobs: &[CronJob], wanted: &str) -> Result<usize, CronError> {
    if let Some(index) = jobs.iter().position(|job| job.id == wanted) {
        return Ok(index);
    }
    let named: Vec<usize> = (0..jobs.len())
        .filter(|&i| jobs[i].name == wanted)
        .collect();
    match named.as_slice() {
        [index] => Ok(*index),
        [] => Err(CronError::UnknownJob {
            id: wanted.to_owned(),
        }),
        _ => Err(CronError::AmbiguousName {
            name: wanted.to_owned(),
            ids: named.iter().map(|&i| jobs[i].id.clone()).collect(),
        }),
    }
}

/// Removes the job `id` (or the one job named `id`); returns it.
pub async fn remove_job(store: &CronJobs, id: &str) -> Result<CronJob, CronError> {
    let wanted = id.to_owned();
    let job = store
        .update(move |jobs| find_job(jobs, &wanted).map(|index| jobs.remove(index)))
        .await??;
    tracing::info!(job_id = %job.id, name = %job.name, "Cron job removed.");
    Ok(job)
}

/// Enables or disables the job `id` (or the one job named `id`); returns it as saved.
pub async fn set_enabled(
    store: &CronJobs,
    id: &str,
    enabled: bool,
    now: DateTime<Utc>,
) -> Result<CronJob, CronError> {
    let wanted = id.to_owned();
    let job = store
        .update(move |jobs| {
            let index = find_job(jobs, &wanted)?;
            let job = &mut jobs[index];
            job.set_enabled(enabled, now);
            job.next_run = next_run(job, now);
            Ok::<_, CronError>(job.clone())
        })
        .await??;
    tracing::info!(job_id = %job.id, enabled, "Cron job toggled.");
    Ok(job)
}

/// One job as status reports show it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct JobStatus {
    /// The job id.
    pub id: String,
    /// The job name.
    pub name: String,
    /// Whether it fires.
    pub enabled: bool,
    /// The schedule text.
    pub schedule: String,
    /// The zone name.
    pub timezone: String,
    /// The target session id.
    pub target: String,
    /// When it fires next.
    pub next_run: Option<DateTime<Utc>>,
    /// The last slot handled (fired or skipped).
    pub last_slot: Option<DateTime<Utc>>,
    /// Why the last run failed or could not start.
    pub last_error: Option<String>,
    /// How many slots were skipped (`missed_runs: skip`).
    pub skipped: u64,
    /// The latest skipped slot.
    pub last_skipped: Option<DateTime<Utc>>,
}

/// The status of `job` at `now`.
pub fn job_status(job: &CronJob, now: DateTime<Utc>) -> JobStatus {
    JobStatus {
        id: job.id.clone(),
        name: job.name.clone(),
        enabled: job.enabled,
        schedule: job.schedule.clone(),
        timezone: job.timezone.clone(),
        target: job.channel.clone(),
        next_run: next_run(job, now),
        last_slot: job.last_slot,
        last_error: job.last_error.clone(),
        skipped: job.skipped.count,
        last_skipped: job.skipped.last,
    }
}

/// The job list as the tools and the CLI print it.
pub fn format_jobs(jobs: &[CronJob], now: DateTime<Utc>) -> String {
    if jobs.is_empty() {
        return "No cron jobs configured.".to_owned();
    }
    let mut out = String::new();
    for job in jobs {
        let status = job_status(job, now);
        let state = if status.enabled { "on" } else { "off" };
        let _ = writeln!(out, "  [{state}] {}  {}", status.id, status.name);
        let _ = writeln!(
            out,
            "       schedule: {}  timezone: {}  target: {}",
            status.schedule,
            status.timezone,
            // As `--target` takes it, pasted into a shell.
            shell_quoted(&status.target)
        );
        let _ = writeln!(out, "       message:  {}", job.message);
        if let Some(by) = &job.created_by {
            let _ = match &job.created_in {
                Some(session) => writeln!(out, "       created by {by} in {session}"),
                None => writeln!(out, "       created by {by}"),
            };
        }
        let mut state_line = Vec::new();
        if let Some(next) = status.next_run {
            state_line.push(format!("next: {}", next.to_rfc3339()));
        }
        if let Some(last) = status.last_slot {
            state_line.push(format!("last: {}", last.to_rfc3339()));
        }
        if status.skipped > 0 {
            state_line.push(format!("skipped: {}", status.skipped));
        }
        if let Some(error) = &status.last_error {
            state_line.push(format!("error: {error}"));
        }
        if !state_line.is_empty() {
            let _ = writeln!(out, "       {}", state_line.join("  "));
        }
    }
    out.truncate(out.trim_end().len());
    out
}

/// `session` as it can be pasted into a shell: single-quoted when it has characters a shell
/// reads (a Matrix room id's `!` is history expansion in an interactive bash).
pub fn shell_quoted(session: &str) -> String {
    let plain = session
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "@%+=:,./_-".contains(c));
    if plain {
        session.to_owned()
    } else {
        format!("'{}'", session.replace('\'', r"'\''"))
    }
}
