//! [`JobStore`]: the sub-agent jobs of this process, by id, with their owner and outcome.
//!
//! The original kept every job forever and `*` waited for all of them. Here a job belongs to the
//! session that spawned it, is removed once collected, and a finished job nobody collects is
//! pruned after a time to live. The store is capped too, so it never grows without bound: when
//! it is full the oldest finished job is dropped, and when every job is still running a new
//! spawn is refused.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use crate::core::ports::channel::FailureKind;
use crate::core::ports::llm::LlmError;
use crate::core::session::{SessionId, SessionIdError};
use crate::core::turn::TurnError;

/// What a finished sub-agent produced: its reply, or why it failed.
pub type JobResult = Result<String, JobError>;

/// Why a sub-agent gave no reply. Its [`kind`](Self::kind) names it in the job's
/// `[id: ERROR (kind)]` line and its Display is what the parent model reads under that line,
/// each worded here once for every way a job ends without an answer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum JobError {
    /// squidbot began shutting down while the job waited for a free slot: it did nothing.
    #[error("The sub-agent never started: squidbot shut down while it waited for a free slot.")]
    NotStarted,
    /// The gateway's shutdown stopped the job after its grace period.
    #[error("The sub-agent was stopped: squidbot is shutting down.")]
    Stopped,
    /// The job's task ended without an outcome (a panic, or an abort outside a shutdown).
    #[error("The sub-agent stopped unexpectedly.")]
    Lost,
    /// The job's id made no session id (ids are 8 hex digits, so this is a bug).
    #[error("The sub-agent could not start: {0}.")]
    Session(SessionIdError),
    /// The sub-agent's turn failed; its [`TurnError::kind`] says how (cancelled, timed out,
    /// the LLM failed, a budget is used up, it went round in circles, storage). Shared, as a
    /// turn's error cannot be cloned and every reader of the job's outcome gets a copy.
    #[error("{}", turn_failure(.0))]
    Turn(Arc<TurnError>),
}

impl JobError {
    /// How the job ended without a reply: for a failed turn, the turn's own [`FailureKind`].
    pub fn kind(&self) -> JobErrorKind {
        match self {
            Self::NotStarted => JobErrorKind::NotStarted,
            Self::Stopped => JobErrorKind::Stopped,
            Self::Lost => JobErrorKind::Lost,
            Self::Session(_) => JobErrorKind::Internal,
            Self::Turn(error) => JobErrorKind::Turn(error.kind()),
        }
    }
}

/// How a sub-agent job ended without a reply, as a closed set, from which the word the parent
/// model reads in the job's header is derived in one place ([`JobErrorKind::word`]), so the
/// parent can tell a wall it should not spawn into again (a budget, a shutdown) from a
/// failure worth one more try (a timeout) without parsing the sentence below it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobErrorKind {
    /// It never started: squidbot shut down while it waited for a slot.
    NotStarted,
    /// squidbot's shutdown stopped it.
    Stopped,
    /// Its task ended without an outcome.
    Lost,
    /// It could not start for a reason that is a bug (its id made no session).
    Internal,
    /// Its turn failed, for this reason.
    Turn(FailureKind),
}

impl JobErrorKind {
    /// The kind's word in the job's `[id: ERROR (word)]` header: lower case, as the turn
    /// failure's kinds are named in metrics and logs.
    pub fn word(self) -> &'static str {
        match self {
            Self::NotStarted => "not started",
            Self::Stopped | Self::Turn(FailureKind::Stopping) => "stopped",
            Self::Lost => "lost",
            Self::Internal => "internal",
            Self::Turn(FailureKind::Cancelled) => "cancelled",
            Self::Turn(FailureKind::Budget) => "budget",
            Self::Turn(FailureKind::Timeout) => "timeout",
            Self::Turn(FailureKind::Llm) => "llm",
            Self::Turn(FailureKind::Runaway) => "runaway",
            Self::Turn(FailureKind::Storage) => "storage",
            Self::Turn(FailureKind::Delivery) => "delivery",
        }
    }
}

/// The block `spawn_await` shows the parent model for a collected job: a header with its id
/// and how it ended (`OK`, or `ERROR` and the [`JobErrorKind`]), then its reply or why there
/// is none.
pub fn collected(id: &str, result: &JobResult) -> String {
    match result {
        Ok(text) => format!("[{id}: OK]\n{text}"),
        Err(error) => format!("[{id}: ERROR ({})]\n{error}", error.kind().word()),
    }
}

impl From<TurnError> for JobError {
    fn from(error: TurnError) -> Self {
        Self::Turn(Arc::new(error))
    }
}

/// The parent's words for a failed sub-agent turn: a budget stop with its figures and when it
/// resets (so the parent does not spawn again into the same wall), any other failure as the
/// turn says it.
fn turn_failure(error: &TurnError) -> String {
    match error {
        TurnError::Llm(LlmError::Budget { stop, .. }) => {
            format!("The sub-agent was not run to the end. {}", stop.message())
        }
        error => format!("The sub-agent failed: {error}."),
    }
}

/// A finished job's outcome and when it finished.
#[derive(Debug, Clone)]
pub struct Finished {
    /// The reply or why there is none.
    pub result: JobResult,
    /// When the sub-agent finished.
    pub at: Instant,
}

/// The receiving side of a job's outcome: `None` while it runs.
pub type Outcome = watch::Receiver<Option<Finished>>;

struct Job {
    owner: SessionId,
    created: Instant,
    outcome: Outcome,
    abort: AbortHandle,
}

impl Job {
    /// Whether the sub-agent has neither finished nor been stopped (an aborted task drops its
    /// sender without an outcome).
    fn is_running(&self) -> bool {
        self.outcome.borrow().is_none() && self.outcome.has_changed().is_ok()
    }
}

/// The store is full of running jobs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{0} sub-agent jobs are already running or uncollected; collect some with spawn_await first"
)]
pub struct StoreFull(pub usize);

/// The jobs of this process.
pub struct JobStore {
    /// A std mutex: held only for map operations, never across an await.
    jobs: Mutex<HashMap<String, Job>>,
    ttl: Duration,
    capacity: usize,
}

impl JobStore {
    /// An empty store pruning finished jobs after `ttl` and holding at most `capacity` jobs.
    pub fn new(ttl: Duration, capacity: usize) -> Self {
        Self {
            jobs: Mutex::default(),
            ttl,
            capacity: capacity.max(1),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Job>> {
        self.jobs
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Adds a job under a fresh 8-hex id; `start` is called with that id (still under the lock,
    /// it must only spawn) and returns the job's outcome receiver and abort handle.
    pub fn insert(
        &self,
        owner: &SessionId,
        start: impl FnOnce(&str) -> (Outcome, AbortHandle),
    ) -> Result<String, StoreFull> {
        let mut jobs = self.lock();
        self.prune_locked(&mut jobs);
        if jobs.len() >= self.capacity {
            let oldest_finished = jobs
                .iter()
                .filter_map(|(id, job)| job.outcome.borrow().as_ref().map(|f| (f.at, id.clone())))
                .min();
            match oldest_finished {
                Some((_, id)) => {
                    tracing::info!(job = %id, "Dropping an uncollected sub-agent result: the job store is full.");
                    jobs.remove(&id);
                }
                None => return Err(StoreFull(jobs.len())),
            }
        }
        let id = loop {
            let id = format!("{:08x}", fastrand::u32(..));
            if !jobs.contains_key(&id) {
                break id;
            }
        };
        let (outcome, abort) = start(&id);
        jobs.insert(
            id.clone(),
            Job {
                owner: owner.clone(),
                created: Instant::now(),
                outcome,
                abort,
            },
        );
        Ok(id)
    }

    /// Drops finished jobs older than the time to live.
    pub fn prune(&self) {
        let mut jobs = self.lock();
        self.prune_locked(&mut jobs);
    }

    fn prune_locked(&self, jobs: &mut HashMap<String, Job>) {
        let now = Instant::now();
        jobs.retain(|id, job| {
            let expired = job
                .outcome
                .borrow()
                .as_ref()
                .is_some_and(|finished| now.duration_since(finished.at) >= self.ttl);
            if expired {
                tracing::info!(job = %id, "Pruned an uncollected sub-agent result.");
            }
            !expired
        });
    }

    /// The ids of `owner`'s jobs, oldest first.
    pub fn owned_by(&self, owner: &SessionId) -> Vec<String> {
        let mut jobs = self.lock();
        self.prune_locked(&mut jobs);
        let mut owned: Vec<(Instant, String)> = jobs
            .iter()
            .filter(|(_, job)| &job.owner == owner)
            .map(|(id, job)| (job.created, id.clone()))
            .collect();
        owned.sort();
        owned.into_iter().map(|(_, id)| id).collect()
    }

    /// The outcome receiver of `owner`'s job `id` (jobs of other sessions are not visible).
    pub fn outcome(&self, owner: &SessionId, id: &str) -> Option<Outcome> {
        let mut jobs = self.lock();
        self.prune_locked(&mut jobs);
        jobs.get(id)
            .filter(|job| &job.owner == owner)
            .map(|job| job.outcome.clone())
    }

    /// Removes a collected job.
    pub fn remove(&self, id: &str) {
        self.lock().remove(id);
    }

    /// How many jobs are running and how many finished ones wait to be collected.
    pub fn counts(&self) -> (usize, usize) {
        let mut jobs = self.lock();
        self.prune_locked(&mut jobs);
        let running = jobs.values().filter(|job| job.is_running()).count();
        (running, jobs.len() - running)
    }

    /// Aborts every job still running and returns how many there were. Their entries stay, so
    /// a `spawn_await` still waiting reports them as stopped.
    pub fn abort_running(&self) -> usize {
        let jobs = self.lock();
        let mut aborted = 0;
        for job in jobs.values().filter(|job| job.is_running()) {
            job.abort.abort();
            aborted += 1;
        }
        aborted
    }

    /// How many jobs the store holds.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether the store holds no job.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Drop for JobStore {
    /// Stops the sub-agents still running: they belong to the hub that is going away.
    fn drop(&mut self) {
        for job in self.lock().values() {
            job.abort.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::ports::llm::{BudgetFigures, BudgetKind, BudgetStop};

    fn session(key: &str) -> SessionId {
        SessionId::new("cli", key).unwrap()
    }

    /// Inserts a job that finishes at once with `result` (or never, for `None`).
    fn add(
        store: &JobStore,
        owner: &SessionId,
        result: Option<JobResult>,
    ) -> Result<String, StoreFull> {
        store.insert(owner, |_| {
            let (tx, rx) = watch::channel(None);
            let handle = tokio::spawn(async move {
                match result {
                    Some(result) => {
                        let _ = tx.send(Some(Finished {
                            result,
                            at: Instant::now(),
                        }));
                    }
                    None => {
                        std::future::pending::<()>().await;
                        drop(tx);
                    }
                }
            });
            (rx, handle.abort_handle())
        })
    }

    #[tokio::test(start_paused = true)]
    async fn finished_jobs_are_pruned_after_the_ttl_and_running_ones_kept() {
        let store = JobStore::new(Duration::from_secs(60), 10);
        let owner = session("a");
        let done = add(&store, &owner, Some(Ok("x".into()))).unwrap();
        let running = add(&store, &owner, None).unwrap();
        tokio::task::yield_now().await;
        assert_eq!(done.len(), 8);
        assert!(done.chars().all(|c| c.is_ascii_hexdigit()));
        tokio::time::advance(Duration::from_secs(59)).await;
        assert_eq!(store.owned_by(&owner).len(), 2);
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(store.owned_by(&owner), vec![running]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_store_drops_the_oldest_finished_job_or_refuses() {
        let store = JobStore::new(Duration::from_secs(3600), 2);
        let owner = session("a");
        let first = add(&store, &owner, Some(Ok("1".into()))).unwrap();
        tokio::task::yield_now().await;
        let _running = add(&store, &owner, None).unwrap();
        let _third = add(&store, &owner, None).unwrap();
        assert_eq!(store.len(), 2);
        assert!(store.outcome(&owner, &first).is_none());
        assert_eq!(add(&store, &owner, None), Err(StoreFull(2)));
    }

    #[test]
    fn a_collected_job_says_in_its_header_how_it_ended() {
        let budget = LlmError::Budget {
            stop: BudgetStop {
                kind: BudgetKind::TurnTokens,
                figures: BudgetFigures::Tokens {
                    limit: 100,
                    used: 120,
                },
                resets: None,
            },
            notify: true,
        };
        let timeout = LlmError::Timeout {
            model: "m".into(),
            phase: "idle",
        };
        let cases: [(JobResult, &str); 6] = [
            (Ok("done".into()), "[ab: OK]\ndone"),
            (
                Err(TurnError::Llm(budget).into()),
                "[ab: ERROR (budget)]\nThe sub-agent was not run to the end. ",
            ),
            (
                Err(TurnError::Llm(timeout).into()),
                "[ab: ERROR (timeout)]\nThe sub-agent failed: the LLM call failed: ",
            ),
            (
                Err(TurnError::TooManyToolRounds(20).into()),
                "[ab: ERROR (runaway)]\nThe sub-agent failed: stopped after 20 tool rounds",
            ),
            (
                Err(JobError::NotStarted),
                "[ab: ERROR (not started)]\nThe sub-agent never started: ",
            ),
            (
                Err(JobError::Stopped),
                "[ab: ERROR (stopped)]\nThe sub-agent was stopped: squidbot is shutting down.",
            ),
        ];
        for (result, expected) in cases {
            let block = collected("ab", &result);
            assert!(
                block.starts_with(expected),
                "{block:?} does not start with {expected:?}"
            );
        }
        assert_eq!(JobError::Lost.kind().word(), "lost");
        assert_eq!(TurnError::Cancelled.kind(), FailureKind::Cancelled);
        let cancelled: JobError = TurnError::Cancelled.into();
        assert_eq!(cancelled.kind().word(), "cancelled");
    }

    #[tokio::test]
    async fn jobs_are_visible_only_to_their_owner() {
        let store = JobStore::new(Duration::from_secs(3600), 10);
        let id = add(&store, &session("a"), Some(Ok("x".into()))).unwrap();
        assert!(store.outcome(&session("b"), &id).is_none());
        assert!(store.owned_by(&session("b")).is_empty());
        assert!(store.outcome(&session("a"), &id).is_some());
    }
}
