//! Scheduled jobs, in one module: jobs from `cron/jobs.json` fire as agent turns in their target
//! session. Everything cron lives here — the store, the schedules, the channel that fires jobs
//! and the agent's tools that manage them — so no other adapter reaches into it; the CLI's
//! `squidbot cron` (in `cli/`) and the gateway only compose it.
//!
//! - [`store`]: `cron/jobs.json`, locked read-modify-write shared across processes
//!   ([`store::CronJobs`]).
//! - [`schedule`]: parsing schedules (`cron`, `every N`, `at`) and zones; computing slots.
//! - [`scheduler`]: which slots are due, and the locked claim that fires each at most once.
//! - [`channel`]: [`CronChannel`], the running task that sleeps until the next slot and submits
//!   due jobs through the dispatcher, reporting jobs whose target cannot be reached.
//! - [`admin`]: adding, removing, toggling and listing jobs; shared by the agent's cron tools
//!   and `squidbot cron`. A job's routing data comes from its target's channel
//!   ([`admin::JobRoutes`]), so cron has no arm per channel.
//! - [`plugin`]: [`plugin::CronPlugin`], cron on the list of channel plug-ins: the gateway
//!   builds its channel and `/status` section as it builds the others.
//! - [`tools`]: `cron_list`, `cron_remove`, `cron_set_enabled` (registered) and `cron_add`
//!   (built per turn with the turn's session and routing metadata).

pub mod admin;
pub mod channel;
pub mod plugin;
pub mod schedule;
pub mod scheduler;
pub mod store;
#[cfg(test)]
mod tests;
pub mod tools;

pub use admin::{JobStatus, add_job, format_jobs, job_status, remove_job, set_enabled};
pub use channel::CronChannel;
pub use schedule::{Schedule, Zone};
pub use scheduler::{Claim, CronScheduler, Fire, claim_due, due};

use store::CronStoreError;

/// Why a cron operation failed.
#[derive(Debug, thiserror::Error)]
pub enum CronError {
    /// The schedule is not a 5-field cron expression, `every N` or `at <RFC 3339 time>`.
    #[error("invalid schedule {schedule:?}: {reason}")]
    InvalidSchedule {
        /// The schedule text.
        schedule: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The zone is not an IANA name, `UTC`, `local` or `±HH:MM`.
    #[error(
        "unknown timezone {zone:?} (use an IANA name like Europe/Berlin, UTC, local or +02:00)"
    )]
    UnknownZone {
        /// The zone text.
        zone: String,
    },
    /// The target session cannot receive cron replies.
    #[error("invalid target {target:?}: {reason}")]
    InvalidTarget {
        /// The target session id text.
        target: String,
        /// Why.
        reason: String,
    },
    /// No job has this id or name.
    #[error("no job found with id or name {id:?}")]
    UnknownJob {
        /// The id or name asked for.
        id: String,
    },
    /// Several jobs have this name: the id says which.
    #[error("several jobs are named {name:?}; name one by its id: {}", ids.join(", "))]
    AmbiguousName {
        /// The name asked for.
        name: String,
        /// The ids of the jobs with that name.
        ids: Vec<String>,
    },
    /// The job store failed.
    #[error(transparent)]
    Store(#[from] CronStoreError),
}
