//! The last active session, remembered across restarts: the heartbeat's default target.
//!
//! [`ActivityFile`] implements the [`ActivityLog`] port. The router calls
//! [`ActivityLog::record`] on every user turn, so recording is cheap: the record lives in memory
//! and the file `$SQUIDBOT_HOME/state/last_active.json` is rewritten (atomically) only when the
//! session or its routing metadata changed; identical records are skipped.
//!
//! Writing choice: inside a tokio runtime writes are coalesced: the first change schedules one
//! write [`WRITE_DELAY`] later, on `spawn_blocking` (an atomic write fsyncs twice and a slow
//! disk must not stall a runtime worker), and every change until then rides along. With many
//! sessions active the session changes on almost every turn, and a file sync per turn would
//! cost more than the turn itself. The gateway calls [`ActivityFile::save`] on shutdown, so
//! only a crash can lose the last second of it, which a cache may. Outside a runtime (tests,
//! CLI) the write runs inline. Each write stores the *latest* record under a write lock, so
//! writes that finish out of order still leave the newest record on disk.
//!
//! The file is a convenience cache, not user data: a missing file means "no activity yet" and a
//! corrupt one is logged and ignored.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::core::ports::channel::ActivityLog;
use crate::core::session::SessionId;
use crate::storage::atomic;

/// How long changes are gathered before one write, inside a runtime.
pub const WRITE_DELAY: Duration = Duration::from_secs(1);

/// Why the activity file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum ActivityFileError {
    /// Reading the file failed (other than it being missing).
    #[error("cannot read {path}: {error}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
    /// The file is not a valid record.
    #[error("cannot parse {path}: {error}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The JSON error.
        error: serde_json::Error,
    },
    /// Writing the file failed.
    #[error("cannot write {path}: {error}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
}

/// What the file holds: the session and its routing metadata.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Record {
    session: SessionId,
    #[serde(default)]
    metadata: Map<String, Value>,
}

#[derive(Debug)]
struct Inner {
    path: PathBuf,
    /// A std mutex: held only to compare or replace the record, never across an await.
    record: Mutex<Option<Record>>,
    /// A std mutex: serializes file writes (taken on blocking threads only), so the newest
    /// record is the last one written.
    write_lock: Mutex<()>,
    /// A coalesced write is scheduled and has not started yet.
    scheduled: AtomicBool,
}

/// The last session a person talked in, kept in memory and in `state/last_active.json`.
#[derive(Debug, Clone)]
pub struct ActivityFile {
    inner: Arc<Inner>,
}

impl ActivityFile {
    /// The activity file of `$SQUIDBOT_HOME`, loaded now (`home/state/last_active.json`).
    pub fn new(home: &Path) -> Self {
        Self::at(home.join("state").join("last_active.json"))
    }

    /// The activity file at `path`, loaded now; a missing file is empty, a corrupt one is
    /// logged and ignored.
    pub fn at(path: PathBuf) -> Self {
        let record = match load(&path) {
            Ok(record) => record,
            Err(error) => {
                tracing::warn!(error = %error, "Ignoring the unreadable last-active-session file.");
                None
            }
        };
        Self {
            inner: Arc::new(Inner {
                path,
                record: Mutex::new(record),
                write_lock: Mutex::new(()),
                scheduled: AtomicBool::new(false),
            }),
        }
    }

    /// Where the record is stored.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Writes the current record now, on this thread (for shutdown and tests).
    pub fn save(&self) -> Result<(), ActivityFileError> {
        self.inner.save()
    }
}

impl Inner {
    fn save(&self) -> Result<(), ActivityFileError> {
        let _writing = self.write_lock.lock().unwrap_or_else(|p| p.into_inner());
        let record = self
            .record
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let Some(record) = record else {
            return Ok(());
        };
        let write_error = |error| ActivityFileError::Write {
            path: self.path.clone(),
            error,
        };
        let bytes = serde_json::to_vec_pretty(&record)
            .map_err(|error| write_error(std::io::Error::other(error)))?;
        atomic::write(&self.path, &bytes).map_err(write_error)
    }
}

fn load(path: &Path) -> Result<Option<Record>, ActivityFileError> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(ActivityFileError::Read {
                path: path.to_owned(),
                error: source,
            });
        }
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|error| ActivityFileError::Parse {
            path: path.to_owned(),
            error,
        })
}

impl ActivityLog for ActivityFile {
    fn record(&self, session: &SessionId, metadata: &Map<String, Value>) {
        {
            let mut current = self.inner.record.lock().unwrap_or_else(|p| p.into_inner());
            let unchanged = current
                .as_ref()
                .is_some_and(|record| record.session == *session && record.metadata == *metadata);
            if unchanged {
                return;
            }
            *current = Some(Record {
                session: session.clone(),
                metadata: metadata.clone(),
            });
        }
        let inner = Arc::clone(&self.inner);
        let write = move |inner: Arc<Inner>| {
            if let Err(error) = inner.save() {
                tracing::warn!(error = %error, "Could not save the last active session.");
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                if inner.scheduled.swap(true, Ordering::AcqRel) {
                    return; // The scheduled write will carry this change.
                }
                runtime.spawn(async move {
                    tokio::time::sleep(WRITE_DELAY).await;
                    inner.scheduled.store(false, Ordering::Release);
                    let _ = tokio::task::spawn_blocking(move || write(inner)).await;
                });
            }
            Err(_) => write(inner),
        }
    }

    fn last(&self) -> Option<(SessionId, Map<String, Value>)> {
        self.inner
            .record
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|record| (record.session.clone(), record.metadata.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn room(key: &str) -> (SessionId, Map<String, Value>) {
        let session = SessionId::new("matrix", key).unwrap();
        let mut metadata = Map::new();
        metadata.insert("room_id".to_owned(), Value::String(key.to_owned()));
        (session, metadata)
    }

    #[test]
    fn starts_empty_without_a_file() {
        let home = tempfile::tempdir().unwrap();
        let activity = ActivityFile::new(home.path());
        assert_eq!(activity.last(), None);
        assert!(!activity.path().exists());
    }

    #[test]
    fn survives_a_restart() {
        let home = tempfile::tempdir().unwrap();
        let (session, metadata) = room("!a:example.org");
        ActivityFile::new(home.path()).record(&session, &metadata);
        assert!(home.path().join("state/last_active.json").exists());
        let reopened = ActivityFile::new(home.path());
        assert_eq!(reopened.last(), Some((session, metadata)));
    }

    #[test]
    fn the_newest_record_wins() {
        let home = tempfile::tempdir().unwrap();
        let activity = ActivityFile::new(home.path());
        let (first, first_metadata) = room("!a:example.org");
        let (second, second_metadata) = room("!b:example.org");
        activity.record(&first, &first_metadata);
        activity.record(&second, &second_metadata);
        assert_eq!(
            activity.last(),
            Some((second.clone(), second_metadata.clone()))
        );
        let reopened = ActivityFile::new(home.path());
        assert_eq!(reopened.last(), Some((second, second_metadata)));
    }

    #[test]
    fn identical_records_are_not_rewritten() {
        let home = tempfile::tempdir().unwrap();
        let activity = ActivityFile::new(home.path());
        let (session, metadata) = room("!a:example.org");
        activity.record(&session, &metadata);
        // Remove the file: an identical record must not write it again.
        std::fs::remove_file(activity.path()).unwrap();
        activity.record(&session, &metadata);
        assert!(!activity.path().exists());
        let mut changed = metadata.clone();
        changed.insert("thread".to_owned(), Value::String("$t".to_owned()));
        activity.record(&session, &changed);
        assert!(activity.path().exists());
    }

    #[test]
    fn a_corrupt_file_is_ignored() {
        let home = tempfile::tempdir().unwrap();
        let path = home.path().join("state/last_active.json");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, b"{not json").unwrap();
        let activity = ActivityFile::new(home.path());
        assert_eq!(activity.last(), None);
        let (session, metadata) = room("!a:example.org");
        activity.record(&session, &metadata);
        assert_eq!(
            ActivityFile::new(home.path()).last(),
            Some((session, metadata))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn changes_in_a_runtime_are_written_once_after_the_delay() {
        let home = tempfile::tempdir().unwrap();
        let activity = ActivityFile::new(home.path());
        for key in ["!a:x.org", "!b:x.org", "!c:x.org"] {
            let (session, metadata) = room(key);
            activity.record(&session, &metadata);
        }
        assert!(!activity.path().exists(), "nothing is written at once");
        tokio::time::sleep(WRITE_DELAY + Duration::from_millis(10)).await;
        // The write runs on the blocking pool: wait for it in real time.
        for _ in 0..200 {
            if activity.path().exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(
            ActivityFile::new(home.path()).last(),
            Some(room("!c:x.org"))
        );
        // A later change schedules a new write.
        let (session, metadata) = room("!d:x.org");
        activity.record(&session, &metadata);
        tokio::time::sleep(WRITE_DELAY + Duration::from_millis(10)).await;
        for _ in 0..200 {
            if ActivityFile::new(home.path()).last() == Some(room("!d:x.org")) {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        panic!("the second change was never written");
    }

    #[tokio::test]
    async fn writes_off_the_runtime_and_save_flushes() {
        let home = tempfile::tempdir().unwrap();
        let activity = ActivityFile::new(home.path());
        let (session, metadata) = room("!a:example.org");
        activity.record(&session, &metadata);
        activity.save().unwrap();
        assert_eq!(
            ActivityFile::new(home.path()).last(),
            Some((session, metadata))
        );
    }
}
