//! [`CronChannel`]: the running task that fires cron jobs as agent turns.
//!
//! Each round claims the due slots (one locked store update), starts their runs, then sleeps
//! until the earliest next slot (at most [`MAX_SLEEP`]), in a `select!` that checks shutdown
//! first. While sleeping it looks at the job file's size and modification time every
//! [`CHANGE_POLL`], so a job added by another process (the CLI) is picked up within a second. A run is an [`Inbound`] to the job's
//! target session with sender `cron:<id>`, the job's metadata and the target channel's outbox as
//! its reply sink. When no running channel serves the target, the job's `last_error` says so and
//! a warning is logged; the agent does not run (the slot stays claimed: at most once).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::admin::{JobStatus, job_status};
use super::scheduler::{CronScheduler, Fire};
use super::store::{CronJobs, CronStoreError};
use crate::config::MissedRuns;
use crate::core::origin::Origin;
use crate::core::ports::channel::{
    Channel, ChannelContext, ChannelError, DispatchClosed, Inbound, Outboxes, TurnResult,
};
use crate::core::ports::clock::Clock;
use crate::core::session::SessionId;

/// The longest sleep between two looks at the job file.
pub const MAX_SLEEP: Duration = Duration::from_secs(30);

/// How often the job file is checked for changes made by another process.
pub const CHANGE_POLL: Duration = Duration::from_secs(1);

/// The shortest sleep, so a slot the wall clock has not quite reached cannot spin the loop.
const MIN_SLEEP: Duration = Duration::from_millis(50);

/// The cron channel (name `cron`).
pub struct CronChannel {
    scheduler: CronScheduler,
    outboxes: Arc<dyn Outboxes>,
}

impl CronChannel {
    /// A channel firing the jobs of `store` on `clock`'s time, with missed slots per `policy`,
    /// delivering through the running channels' `outboxes`.
    pub fn new(
        store: CronJobs,
        clock: Arc<dyn Clock>,
        policy: MissedRuns,
        outboxes: Arc<dyn Outboxes>,
    ) -> Self {
        Self {
            scheduler: CronScheduler::new(store, clock, policy),
            outboxes,
        }
    }

    /// Every job with its next run, last error and skipped slots, for `/status`.
    pub async fn snapshot(&self) -> Result<Vec<JobStatus>, CronStoreError> {
        let now = self.scheduler.now();
        let jobs = self.scheduler.store().load().await?;
        Ok(jobs.iter().map(|job| job_status(job, now)).collect())
    }

    /// One round: claims the due slots, starts their runs, and says how long to sleep.
    async fn round(&self, context: &ChannelContext) -> Result<Duration, DispatchClosed> {
        let claim = match self.scheduler.claim().await {
            Ok(claim) => claim,
            Err(error) => {
                tracing::error!(error = %error, "Cron jobs could not be read; retrying later.");
                return Ok(MAX_SLEEP);
            }
        };
        for fire in claim.fires {
            self.start(fire, context).await?;
        }
        let now = self.scheduler.now();
        let wait = claim
            .next_wake
            .map(|wake| (wake - now).to_std().unwrap_or(Duration::ZERO))
            .unwrap_or(MAX_SLEEP);
        Ok(wait.clamp(MIN_SLEEP, MAX_SLEEP))
    }

    /// Starts one claimed run, or records why it cannot start.
    async fn start(&self, fire: Fire, context: &ChannelContext) -> Result<(), DispatchClosed> {
        let session = match SessionId::parse(&fire.target) {
            Ok(session) => session,
            Err(error) => {
                self.report(&fire, format!("invalid target: {error}")).await;
                return Ok(());
            }
        };
        let outbox = match self.outboxes.outbox(&session, &fire.metadata).await {
            Ok(outbox) => outbox,
            Err(no_route) => {
                self.report(&fire, no_route.to_string()).await;
                return Ok(());
            }
        };
        tracing::info!(job_id = %fire.job_id, name = %fire.name, slot = %fire.slot, session = %session, "Cron job fired.");
        let origin = Origin::Cron {
            job: fire.job_id.clone(),
        };
        // The target's readers: a job's turn is private exactly when its session is.
        let mut inbound =
            Inbound::new(session, fire.message, origin, outbox.sink).read_by(outbox.readers);
        inbound.metadata = fire.metadata;
        let outcome = context.dispatch.submit(inbound)?;
        let scheduler = self.scheduler.clone();
        let job_id = fire.job_id;
        context.tasks.spawn(async move {
            let error = match outcome.await {
                Ok(TurnResult::Replied(_)) => None,
                Ok(TurnResult::Failed(failure)) => Some(format!("run failed: {}", failure.told)),
                Ok(TurnResult::Dropped | TurnResult::Replaced) | Err(_) => return,
            };
            if let Err(store_error) = scheduler.record_outcome(&job_id, error).await {
                tracing::warn!(job_id = %job_id, error = %store_error, "Cron job outcome not recorded.");
            }
        });
        Ok(())
    }

    /// Records on the job that its run could not start, and logs it.
    async fn report(&self, fire: &Fire, reason: String) {
        tracing::warn!(job_id = %fire.job_id, name = %fire.name, target = %fire.target, reason = %reason, "Cron job not delivered.");
        if let Err(error) = self
            .scheduler
            .record_outcome(&fire.job_id, Some(reason))
            .await
        {
            tracing::warn!(job_id = %fire.job_id, error = %error, "Cron job error not recorded.");
        }
    }
}

#[async_trait]
impl Channel for CronChannel {
    fn name(&self) -> &str {
        "cron"
    }

    async fn run(&self, context: ChannelContext) -> Result<(), ChannelError> {
        context.ready.cancel();
        tracing::info!(jobs = %self.scheduler.store().path().display(), "Cron channel started.");
        loop {
            if context.shutdown.is_cancelled() {
                return Ok(());
            }
            let wait = match self.round(&context).await {
                Ok(wait) => wait,
                Err(DispatchClosed) => return Ok(()),
            };
            let path = self.scheduler.store().path().to_path_buf();
            tokio::select! {
                biased;
                () = context.shutdown.cancelled() => return Ok(()),
                () = sleep_until_changed(&path, wait) => {}
            }
        }
    }
}

/// Sleeps for `wait`, or less when the file at `path` changes (size or modification time).
async fn sleep_until_changed(path: &std::path::Path, wait: Duration) {
    let stamp =
        |meta: std::io::Result<std::fs::Metadata>| meta.ok().map(|m| (m.len(), m.modified().ok()));
    let before = stamp(tokio::fs::metadata(path).await);
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let now = tokio::time::Instant::now();
        if now >= deadline {
            return;
        }
        tokio::time::sleep((deadline - now).min(CHANGE_POLL)).await;
        if stamp(tokio::fs::metadata(path).await) != before {
            return;
        }
    }
}
