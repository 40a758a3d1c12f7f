//! [`FileLock`]: an exclusive advisory lock between processes, held while a file is read,
//! decided on and replaced.
//!
//! The gateway, `squidbot agent`, `import`, `cron` and `onboard` may run at the same time on one
//! home. An atomic write alone keeps each file whole, but a read-modify-write (MEMORY.md copied
//! to `.prev` and replaced, a cursor compared and advanced, a config checked and written) needs
//! every writer to take turns, or two writers read the same old state and one update is lost.
//!
//! The lock is `flock(2)` through std's `File::lock` (stable since Rust 1.89), so no crate is
//! needed: the kernel releases it when the holder's file is closed, also when the process is
//! killed, so a crash never leaves a stale lock. It is per open file, so two handles in one
//! process exclude each other too. A file replaced by rename cannot carry the lock itself (the
//! rename swaps its inode), so it is locked through a lock file: a hidden `.<name>.lock` beside
//! it ([`FileLock::beside`]), or, for the files of the workspace (MEMORY.md and whatever the
//! file tools write), the workspace directory itself ([`FileLock::directory`]), which leaves no
//! lock file where the agent works. A file only ever appended to (a session history) is locked
//! directly.

use std::fs::{self, File, OpenOptions};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

/// An exclusive lock on a lock file, released when dropped.
#[derive(Debug)]
pub struct FileLock {
    /// Closing the file releases the lock.
    file: File,
}

impl FileLock {
    /// Waits until this process holds the lock on `path`, creating the file (and its directory)
    /// if needed. Blocking: call it from `spawn_blocking` in async code.
    pub fn exclusive(path: &Path) -> std::io::Result<Self> {
        let file = open(path)?;
        file.lock()?;
        Ok(Self { file })
    }

    /// Waits until this process holds the lock on the directory `dir` (created if missing).
    /// Blocking: call it from `spawn_blocking` in async code.
    pub fn directory(dir: &Path) -> std::io::Result<Self> {
        fs::create_dir_all(dir)?;
        let file = File::open(dir)?;
        file.lock()?;
        Ok(Self { file })
    }

    /// Takes the lock on `path` if no one holds it; `None` when another holder does.
    pub fn try_exclusive(path: &Path) -> std::io::Result<Option<Self>> {
        let file = open(path)?;
        match file.try_lock() {
            Ok(()) => Ok(Some(Self { file })),
            Err(fs::TryLockError::WouldBlock) => Ok(None),
            Err(fs::TryLockError::Error(error)) => Err(error),
        }
    }

    /// The lock file guarding `path`, a file replaced by rename: `.<name>.lock` in its directory.
    pub fn beside(path: &Path) -> PathBuf {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        path.with_file_name(format!(".{name}.lock"))
    }

    /// The lock file itself, for a holder that records who it is (the gateway's pid).
    pub fn file(&self) -> &File {
        &self.file
    }
}

/// Opens (creating) a lock file without truncating it: a holder may have written into it.
fn open(path: &Path) -> std::io::Result<File> {
    let open = || {
        OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(path)
    };
    match open() {
        Err(error) if error.kind() == ErrorKind::NotFound => {
            if let Some(dir) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                fs::create_dir_all(dir)?;
            }
            open()
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_is_refused_until_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/x.lock");
        let held = FileLock::exclusive(&path).unwrap();
        assert!(FileLock::try_exclusive(&path).unwrap().is_none());
        drop(held);
        assert!(FileLock::try_exclusive(&path).unwrap().is_some());
    }

    #[test]
    fn a_directory_lock_excludes_another_handle_and_creates_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let held = FileLock::directory(dir.path()).unwrap();
        let other = File::open(dir.path()).unwrap();
        assert!(matches!(
            other.try_lock(),
            Err(fs::TryLockError::WouldBlock)
        ));
        drop(held);
        other.try_lock().unwrap();
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn the_lock_beside_a_file_is_hidden_in_its_directory() {
        assert_eq!(
            FileLock::beside(Path::new("/ws/MEMORY.md")),
            Path::new("/ws/.MEMORY.md.lock")
        );
    }
}
