//! The cron job store: `$SQUIDBOT_HOME/cron/jobs.json`, shared by the scheduler, the agent's
//! cron tools and the `squidbot cron` command line, possibly in different processes.
//!
//! Every change is a read-modify-write under an exclusive lock on `cron/jobs.lock` (an OS file
//! lock, so it holds across processes), ending with an atomic write of the whole file. Nobody
//! ever writes a list they read before someone else's change, so no update is lost. Reads
//! without the lock are safe because the file is only ever replaced whole.
//!
//! The record extends the original squidbot's (`id, name, message, schedule, channel, enabled,
//! timezone, last_run, metadata`) with what at-most-once firing and status need; the original's
//! files load unchanged. A file that does not parse is an error naming it, never replaced by an
//! empty list.

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use chrono::{DateTime, SubsecRound, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::storage::atomic;
use crate::storage::file_lock::FileLock;

/// Why the job store could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum CronStoreError {
    /// Reading, locking or writing a file failed.
    #[error("{op} {}: {error}", path.display())]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        error: std::io::Error,
    },
    /// The file is not a JSON array of jobs; it is left untouched for the owner to repair.
    #[error("{} is corrupt (fix or remove it; it was not changed): {error}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// The parse error, with line and column.
        error: serde_json::Error,
    },
    /// The jobs could not be encoded (should not happen).
    #[error("encoding jobs for {}: {error}", path.display())]
    Encode {
        /// The file.
        path: PathBuf,
        /// The cause.
        error: serde_json::Error,
    },
    /// The blocking worker running the file work died.
    #[error("cron store worker for {} failed: {detail}", path.display())]
    Worker {
        /// The file.
        path: PathBuf,
        /// What happened to the worker.
        detail: String,
    },
}

/// Slots that passed without firing under `cron.missed_runs: skip`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SkippedSlots {
    /// How many slots were skipped in total.
    pub count: u64,
    /// The latest skipped slot.
    pub last: Option<DateTime<Utc>>,
}

/// One scheduled job, as stored in `jobs.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CronJob {
    /// Eight hex digits.
    pub id: String,
    /// A human name.
    pub name: String,
    /// The prompt given to the agent when the job fires.
    pub message: String,
    /// `<5-field cron expression>`, `every N` (seconds) or `at <RFC 3339 time>`.
    pub schedule: String,
    /// The target session id the reply goes to (default `cli:local`, as in the original).
    #[serde(default = "default_channel")]
    pub channel: String,
    /// Whether the job fires (default true).
    #[serde(default = "default_enabled")]
    pub enabled: bool,
    /// The zone cron expressions are read in: IANA name, `UTC`, `local` or `±HH:MM`.
    #[serde(default = "default_timezone")]
    pub timezone: String,
    /// When the job last fired (RFC 3339), kept for the original's format and for display.
    #[serde(default)]
    pub last_run: Option<String>,
    /// Routing data for the reply (room, thread, mail subject).
    #[serde(default)]
    pub metadata: Map<String, Value>,
    /// When the job was created; `every N` slots are counted from here.
    #[serde(default)]
    pub created_at: Option<DateTime<Utc>>,
    /// When the job was last enabled again; slots before it never fire.
    #[serde(default)]
    pub resumed_at: Option<DateTime<Utc>>,
    /// The last slot handled (fired or skipped); claimed before the job runs, so no slot fires
    /// twice, across restarts too.
    #[serde(default)]
    pub last_slot: Option<DateTime<Utc>>,
    /// The next slot, as last computed by the scheduler (informational).
    #[serde(default)]
    pub next_run: Option<DateTime<Utc>>,
    /// Why the last firing failed (no route, failed turn, bad schedule), if it did.
    #[serde(default)]
    pub last_error: Option<String>,
    /// Slots skipped under `cron.missed_runs: skip`.
    #[serde(default)]
    pub skipped: SkippedSlots,
    /// Who created the job: the sender id of the turn that called `cron_add` (in the session
    /// `created_in`), or `squidbot cron` for the command line. Only the owner can create jobs
    /// (`cron_add` is owner-only), so a job runs with the owner's authority; this says which
    /// of the owner's ids and conversations it came from. `None` for jobs older than it (and
    /// the original's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_by: Option<String>,
    /// The session the job was created in (`None` from the command line and for older jobs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_in: Option<String>,
}

fn default_channel() -> String {
    "cli:local".to_owned()
}

fn default_enabled() -> bool {
    true
}

fn default_timezone() -> String {
    "local".to_owned()
}

/// What a new job is made of; the rest of [`CronJob`] is state.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NewJob {
    /// A human name.
    pub name: String,
    /// The prompt given to the agent.
    pub message: String,
    /// The schedule text.
    pub schedule: String,
    /// The target session id.
    pub channel: String,
    /// The zone name.
    pub timezone: String,
    /// Routing data for the reply.
    pub metadata: Map<String, Value>,
    /// Who created it (see [`CronJob::created_by`]).
    pub created_by: Option<String>,
    /// Where it was created (see [`CronJob::created_in`]).
    pub created_in: Option<String>,
}

impl CronJob {
    /// A new enabled job created at `now` (truncated to the second), with an id not in `taken`.
    pub fn new(taken: &[CronJob], new: NewJob, now: DateTime<Utc>) -> Self {
        Self {
            id: fresh_id(taken),
            name: new.name,
            message: new.message,
            schedule: new.schedule,
            channel: new.channel,
            enabled: true,
            timezone: new.timezone,
            last_run: None,
            metadata: new.metadata,
            created_at: Some(now.trunc_subsecs(0)),
            resumed_at: None,
            last_slot: None,
            next_run: None,
            last_error: None,
            skipped: SkippedSlots::default(),
            created_by: new.created_by,
            created_in: new.created_in,
        }
    }

    /// Enables or disables the job. Enabling a disabled job records `now`, so the slots that
    /// passed while it was off do not fire as missed runs.
    pub fn set_enabled(&mut self, enabled: bool, now: DateTime<Utc>) {
        if enabled && !self.enabled {
            self.resumed_at = Some(now.trunc_subsecs(0));
        }
        if !enabled {
            self.next_run = None;
        }
        self.enabled = enabled;
    }
}

/// Eight random hex digits that no job in `taken` uses.
fn fresh_id(taken: &[CronJob]) -> String {
    loop {
        let id = format!("{:08x}", fastrand::u32(..));
        if !taken.iter().any(|job| job.id == id) {
            return id;
        }
    }
}

/// The job file and its lock; cheap to clone, safe to share between tasks and processes.
#[derive(Clone, Debug)]
pub struct CronJobs {
    path: PathBuf,
    lock_path: PathBuf,
}

impl CronJobs {
    /// The store of `home` (`$SQUIDBOT_HOME`): `home/cron/jobs.json`.
    pub fn new(home: &Path) -> Self {
        let dir = home.join("cron");
        Self {
            path: dir.join("jobs.json"),
            lock_path: dir.join("jobs.lock"),
        }
    }

    /// The job file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// All jobs; an absent file is an empty list.
    pub async fn load(&self) -> Result<Vec<CronJob>, CronStoreError> {
        let store = self.clone();
        self.blocking(move || store.load_blocking()).await
    }

    /// Runs `change` on the jobs under the exclusive lock and saves the result if it differs;
    /// returns what `change` returned. Other updaters, in this process or another, wait.
    pub async fn update<T: Send + 'static>(
        &self,
        change: impl FnOnce(&mut Vec<CronJob>) -> T + Send + 'static,
    ) -> Result<T, CronStoreError> {
        let store = self.clone();
        self.blocking(move || store.update_blocking(change)).await
    }

    /// [`CronJobs::load`] for synchronous callers.
    pub fn load_blocking(&self) -> Result<Vec<CronJob>, CronStoreError> {
        let text = match fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(error) if error.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(self.io("reading", &self.path, source)),
        };
        if text.trim().is_empty() {
            return Ok(Vec::new());
        }
        serde_json::from_str(&text).map_err(|error| CronStoreError::Corrupt {
            path: self.path.clone(),
            error,
        })
    }

    /// [`CronJobs::update`] for synchronous callers (blocks while another updater holds the lock).
    pub fn update_blocking<T>(
        &self,
        change: impl FnOnce(&mut Vec<CronJob>) -> T,
    ) -> Result<T, CronStoreError> {
        let lock = FileLock::exclusive(&self.lock_path)
            .map_err(|source| self.io("locking", &self.lock_path, source))?;
        let before = self.load_blocking()?;
        let mut jobs = before.clone();
        let result = change(&mut jobs);
        if jobs != before {
            let mut bytes =
                serde_json::to_vec_pretty(&jobs).map_err(|source| CronStoreError::Encode {
                    path: self.path.clone(),
                    error: source,
                })?;
            bytes.push(b'\n');
            atomic::write(&self.path, &bytes)
                .map_err(|source| self.io("writing", &self.path, source))?;
        }
        drop(lock);
        Ok(result)
    }

    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> Result<T, CronStoreError> + Send + 'static,
    ) -> Result<T, CronStoreError> {
        match tokio::task::spawn_blocking(work).await {
            Ok(result) => result,
            Err(join) => Err(CronStoreError::Worker {
                path: self.path.clone(),
                detail: join.to_string(),
            }),
        }
    }

    fn io(&self, op: &'static str, path: &Path, source: std::io::Error) -> CronStoreError {
        CronStoreError::Io {
            op,
            path: path.to_owned(),
            error: source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(store_jobs: &[CronJob], name: &str) -> CronJob {
        let new = NewJob {
            name: name.to_owned(),
            message: "ping".to_owned(),
            schedule: "every 60".to_owned(),
            channel: "matrix:!r:x".to_owned(),
            timezone: "UTC".to_owned(),
            metadata: Map::new(),
            ..NewJob::default()
        };
        CronJob::new(store_jobs, new, Utc::now())
    }

    #[tokio::test]
    async fn original_jobs_file_loads_with_defaults() {
        let home = tempfile::tempdir().unwrap();
        let store = CronJobs::new(home.path());
        fs::create_dir_all(home.path().join("cron")).unwrap();
        let original = r#"[
  {"id": "a1b2c3d4", "name": "morning", "message": "Good morning summary",
   "schedule": "0 8 * * *", "channel": "matrix:@me:server", "enabled": true,
   "timezone": "local", "last_run": "2026-02-20T07:00:00.123456+00:00",
   "metadata": {"matrix_room_id": "!abc:server"}},
  {"id": "deadbeef", "name": "old", "message": "m", "schedule": "every 300"}
]"#;
        fs::write(store.path(), original).unwrap();
        let jobs = store.load().await.unwrap();
        assert_eq!(jobs.len(), 2);
        assert_eq!(jobs[0].timezone, "local");
        assert_eq!(jobs[0].metadata["matrix_room_id"], "!abc:server");
        assert_eq!(jobs[1].channel, "cli:local");
        assert!(jobs[1].enabled);
        assert_eq!(jobs[1].timezone, "local");
        assert_eq!(jobs[1].last_slot, None);
    }

    #[tokio::test]
    async fn corrupt_file_is_an_error_naming_it_and_is_not_overwritten() {
        let home = tempfile::tempdir().unwrap();
        let store = CronJobs::new(home.path());
        fs::create_dir_all(home.path().join("cron")).unwrap();
        fs::write(store.path(), "[{\"id\": broken").unwrap();
        let error = store.load().await.unwrap_err();
        assert!(matches!(error, CronStoreError::Corrupt { .. }));
        assert!(error.to_string().contains("jobs.json"), "{error}");
        let error = store
            .update(|jobs| jobs.push(job(&[], "x")))
            .await
            .unwrap_err();
        assert!(matches!(error, CronStoreError::Corrupt { .. }));
        assert_eq!(
            fs::read_to_string(store.path()).unwrap(),
            "[{\"id\": broken"
        );
    }

    #[tokio::test]
    async fn update_persists_and_unchanged_update_does_not_write() {
        let home = tempfile::tempdir().unwrap();
        let store = CronJobs::new(home.path());
        let id = store
            .update(|jobs| {
                let new = job(jobs, "a");
                let id = new.id.clone();
                jobs.push(new);
                id
            })
            .await
            .unwrap();
        let jobs = store.load().await.unwrap();
        assert_eq!(jobs.len(), 1);
        assert_eq!(jobs[0].id, id);
        assert_eq!(id.len(), 8);
        let modified = fs::metadata(store.path()).unwrap().modified().unwrap();
        store.update(|_| ()).await.unwrap();
        assert_eq!(
            fs::metadata(store.path()).unwrap().modified().unwrap(),
            modified
        );
    }

    #[test]
    fn re_enabling_records_resume_time() {
        let now = Utc::now();
        let mut job = job(&[], "a");
        job.set_enabled(false, now);
        assert_eq!(job.resumed_at, None);
        job.set_enabled(true, now);
        assert_eq!(job.resumed_at, Some(now.trunc_subsecs(0)));
    }
}
