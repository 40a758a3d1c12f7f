//! [`HomeLock`]: one gateway per `$SQUIDBOT_HOME`.
//!
//! Two gateways on one home would both run the heartbeat and cron, both answer Matrix and mail,
//! and share the Matrix crypto store, which matrix-sdk does not allow. So the gateway takes an
//! exclusive [`FileLock`] on `$SQUIDBOT_HOME/gateway.lock` before it builds anything and holds
//! it until it exits; a second one fails at once, naming the holder by the pid the first wrote
//! into the file. The kernel drops the lock with the process, so a killed gateway never blocks
//! the next start (its stale pid stays in the file and is overwritten).
//!
//! The CLI commands that write (`agent`, `import`, `cron`, `onboard`) do not take this lock:
//! they run beside a gateway, and every file both may write is locked on its own.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::file_lock::FileLock;

/// Why the home could not be claimed.
#[derive(Debug, thiserror::Error)]
pub enum HomeLockError {
    /// Another gateway holds the home.
    #[error(
        "another gateway ({}) is running on {}; stop it first (it holds {})",
        holder.map_or_else(|| "pid unknown".to_owned(), |pid| format!("pid {pid}")),
        home.display(),
        lock.display()
    )]
    Held {
        /// The home.
        home: PathBuf,
        /// The lock file.
        lock: PathBuf,
        /// The holder's pid, as it wrote it into the lock file.
        holder: Option<u32>,
    },
    /// The lock file could not be opened, locked or written.
    #[error("claiming {}: {error}", lock.display())]
    Io {
        /// The lock file.
        lock: PathBuf,
        /// The cause.
        error: std::io::Error,
    },
}

/// The gateway's claim on a home, released when dropped (or when the process ends).
#[derive(Debug)]
pub struct HomeLock {
    _lock: FileLock,
}

impl HomeLock {
    /// Claims `home` for this process and records its pid in the lock file.
    pub fn acquire(home: &Path) -> Result<Self, HomeLockError> {
        let path = home.join("gateway.lock");
        let io = |error| HomeLockError::Io {
            lock: path.clone(),
            error,
        };
        let Some(lock) = FileLock::try_exclusive(&path).map_err(io)? else {
            return Err(HomeLockError::Held {
                home: home.to_owned(),
                holder: holder(&path),
                lock: path,
            });
        };
        let mut file = lock.file();
        file.set_len(0).map_err(io)?;
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        writeln!(file, "{}", std::process::id()).map_err(io)?;
        Ok(Self { _lock: lock })
    }
}

/// The pid a holder wrote into the lock file (none while it has not written it yet).
fn holder(path: &Path) -> Option<u32> {
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|mut file| file.read_to_string(&mut text))
        .ok()?;
    text.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_claim_names_the_holder_and_a_released_home_is_free() {
        let home = tempfile::tempdir().unwrap();
        let first = HomeLock::acquire(home.path()).unwrap();
        match HomeLock::acquire(home.path()) {
            Err(HomeLockError::Held { holder, .. }) => {
                assert_eq!(holder, Some(std::process::id()));
            }
            other => panic!("expected Held, got {other:?}"),
        }
        drop(first);
        HomeLock::acquire(home.path()).unwrap();
    }
}
