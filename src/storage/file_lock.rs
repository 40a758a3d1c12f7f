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
//! file tools write), a lock file in squidbot's home named after the workspace
//! ([`WorkspaceLock`]). A file only ever appended to (a session history) is locked directly.
//!
//! No lock the daemon waits for may be one a shell command can take: `flock` needs nothing but
//! an open descriptor, and every jailed command can open the workspace (the read-only jail
//! reads it), so a command that held `flock` on the workspace directory froze every file write
//! and MEMORY.md update of every session. The home outside the workspace is hidden from every
//! jail (`tools::sandbox::rules`), so its lock files are out of reach.

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

/// The lock every writer of a workspace's files holds (MEMORY.md's writers, the file tools, the
/// import), so that the gateway and `squidbot agent` on one workspace take turns.
///
/// It lives in squidbot's home, never in the workspace (see the module docs):
/// `<home>/state/locks/workspace-<hash>.lock`, where the hash is of the workspace's canonical
/// path, so every process of one home on one workspace finds the same file, and two workspaces
/// of one home do not wait for each other. (Two homes sharing one workspace do not exclude each
/// other; they are two assistants, each with its own config.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceLock {
    path: PathBuf,
}

impl WorkspaceLock {
    /// The lock of `workspace` kept in `home`; beside the workspace instead in the odd layout
    /// where the workspace holds `home/state/locks` (every jail can open the workspace).
    pub fn new(home: &Path, workspace: &Path) -> Self {
        let workspace = fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_owned());
        let name = format!(
            "workspace-{:016x}.lock",
            fnv1a(workspace.as_os_str().as_encoded_bytes())
        );
        let home = fs::canonicalize(home).unwrap_or_else(|_| home.to_owned());
        let path = home.join("state").join("locks").join(name);
        if path.starts_with(&workspace) {
            return Self::beside(&workspace);
        }
        Self { path }
    }

    /// The lock of `workspace` for a process that knows no home (tests, tools that share the
    /// workspace with no other process): `.<name>.lock` beside it. Inside the default layout
    /// (`<home>/workspace`) that is in the home too, but only [`WorkspaceLock::new`] holds
    /// wherever the workspace is, so the daemon always uses that.
    pub fn beside(workspace: &Path) -> Self {
        Self {
            path: FileLock::beside(workspace),
        }
    }

    /// Waits until this process holds the lock; held until dropped. Blocking: call it from
    /// `spawn_blocking` in async code.
    pub fn acquire(&self) -> std::io::Result<FileLock> {
        FileLock::exclusive(&self.path)
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// FNV-1a: a hash that every build and every version of squidbot computes alike (std's
/// `DefaultHasher` promises no such thing), so a gateway and an upgraded `squidbot agent` still
/// meet on one lock file.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
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
    fn a_workspace_lock_lives_in_the_home_and_is_one_per_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let workspace = dir.path().join("elsewhere/ws");
        fs::create_dir_all(&workspace).unwrap();
        let lock = WorkspaceLock::new(&home, &workspace);
        assert!(
            lock.path().starts_with(home.join("state/locks")),
            "{lock:?}"
        );
        // The same workspace by another spelling is the same lock; another workspace is not.
        let spelled = dir.path().join("elsewhere/./ws");
        assert_eq!(WorkspaceLock::new(&home, &spelled), lock);
        assert_ne!(WorkspaceLock::new(&home, dir.path()), lock);
        // A workspace holding the lock directory gets its lock beside it instead.
        let odd = WorkspaceLock::new(&home, &home.join("state"));
        assert_eq!(odd.path(), home.join(".state.lock"));
        let held = lock.acquire().unwrap();
        assert!(FileLock::try_exclusive(lock.path()).unwrap().is_none());
        drop(held);
        assert_eq!(fs::read_dir(&workspace).unwrap().count(), 0);
    }

    #[test]
    fn the_lock_beside_a_file_is_hidden_in_its_directory() {
        assert_eq!(
            FileLock::beside(Path::new("/ws/MEMORY.md")),
            Path::new("/ws/.MEMORY.md.lock")
        );
    }
}
