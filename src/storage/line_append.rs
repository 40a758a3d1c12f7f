//! Appending whole lines to a file other processes append to as well: a session's history
//! and the usage ledger's month file.
//!
//! The file is never replaced, so it carries its own `flock`, taken on the descriptor the lines
//! are written through and released when it is closed. Under the lock the file's last byte is
//! checked: a torn last line left by a crash is closed with a newline first, so the new lines
//! start on a line of their own. The lines go out in one `write` on an `O_APPEND` descriptor.
//!
//! Where the work runs is the point of this module. An append that need not reach the disk
//! before it returns is an open, a `flock`, an `fstat`, a one-byte `pread` and a `write`:
//! microseconds, less than the two thread switches of a hop to the blocking pool, which was a
//! fifth of a turn's CPU. So it runs on the caller's thread, but only when the lock is free at
//! once: when another process holds it (mid-append, or committing a consolidation), the open
//! file goes to the blocking pool to wait there, so the runtime thread never waits on another
//! process. An append that must be durable before it returns (`fdatasync`, which waits on the
//! disk) always runs on the blocking pool.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, ErrorKind, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::atomic;

/// Whether an append waits for the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// `fdatasync` before returning, and the directory entry of a file the append created.
    Synced,
    /// Visible to every reader at once and kept if this process crashes, but not flushed: a
    /// later synced append to the file (or a [`sync`] of it) makes it durable. Only a file
    /// the append created is flushed at once, with its directory entry.
    Unsynced,
}

/// Where an append landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    /// The file's length before the append.
    pub before: u64,
    /// Where the first appended line starts (one past `before` when a torn line was closed).
    pub start: u64,
}

/// An append that failed, with the step that failed.
#[derive(Debug)]
pub struct AppendError {
    /// `open`, `create`, `lock`, `stat`, `read`, `append` or `sync`.
    pub op: &'static str,
    /// The path the step worked on.
    pub path: PathBuf,
    /// The cause.
    pub source: io::Error,
}

fn failed<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> AppendError + 'a {
    move |source| AppendError {
        op,
        path: path.to_owned(),
        source,
    }
}

/// Appends `lines` (whole lines, each ending in `\n`) to `path`, creating it and its directory
/// `dir` when missing. `line_end` is where a line the caller knows to be whole ends (its own
/// last append, a poll that read up to there): when the file still has exactly that length,
/// nothing was written after it and the last byte is not read back to look for a torn line.
pub async fn append(
    dir: &Path,
    path: &Path,
    lines: Vec<u8>,
    durability: Durability,
    line_end: Option<u64>,
) -> Result<Appended, AppendError> {
    if durability == Durability::Synced {
        let (dir, path) = (dir.to_owned(), path.to_owned());
        return on_pool(&path.clone(), move || {
            let file = lock(&dir, &path)?;
            write_locked(&dir, &path, file, lines, durability, line_end)
        })
        .await;
    }
    let file = open(dir, path)?;
    let landed = match file.try_lock() {
        Ok(()) => write_locked(dir, path, file, lines, durability, line_end)?,
        Err(TryLockError::WouldBlock) => {
            let (dir, path) = (dir.to_owned(), path.to_owned());
            on_pool(&path.clone(), move || {
                file.lock().map_err(failed("lock", &path))?;
                write_locked(&dir, &path, file, lines, durability, line_end)
            })
            .await?
        }
        Err(TryLockError::Error(error)) => return Err(failed("lock", path)(error)),
    };
    if landed.before == 0 {
        // A file this append created is made durable at once, its directory entry included,
        // so that a later `fdatasync` of the file alone makes what follows durable. Once per
        // file.
        let (dir, path) = (dir.to_owned(), path.to_owned());
        on_pool(&path.clone(), move || {
            let file = File::open(&path).map_err(failed("open", &path))?;
            flush(&dir, &path, &file, true)
        })
        .await?;
    }
    Ok(landed)
}

impl From<AppendError> for crate::core::ports::store::StoreError {
    fn from(error: AppendError) -> Self {
        Self::Io {
            op: error.op,
            path: error.path.display().to_string(),
            error: error.source,
        }
    }
}

impl From<AppendError> for crate::accounting::ledger::LedgerError {
    fn from(error: AppendError) -> Self {
        Self::Io {
            path: error.path,
            error: error.source,
        }
    }
}

/// Opens `path` (creating it and `dir` when missing) and waits for its lock, held until the
/// returned file is closed: for a step that must exclude appends (a consolidation's commit).
/// Blocking: call it from the blocking pool.
pub fn lock(dir: &Path, path: &Path) -> Result<File, AppendError> {
    let file = open(dir, path)?;
    file.lock().map_err(failed("lock", path))?;
    Ok(file)
}

/// Makes what was appended to `path` so far durable (`fdatasync` works on the file, whichever
/// descriptor wrote it). A missing file has nothing to make durable.
pub async fn sync(path: &Path) -> Result<(), AppendError> {
    let path = path.to_owned();
    on_pool(&path.clone(), move || match File::open(&path) {
        Ok(file) => file.sync_data().map_err(failed("sync", &path)),
        Err(error) if error.kind() == ErrorKind::NotFound => Ok(()),
        Err(error) => Err(failed("open", &path)(error)),
    })
    .await
}

async fn on_pool<T: Send + 'static>(
    path: &Path,
    work: impl FnOnce() -> Result<T, AppendError> + Send + 'static,
) -> Result<T, AppendError> {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|join| Err(failed("append", path)(io::Error::other(join.to_string()))))
}

/// Opens `path` for appending, making `dir` only when the file cannot be opened without it.
fn open(dir: &Path, path: &Path) -> Result<File, AppendError> {
    let open = || {
        OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(path)
    };
    match open() {
        Err(error) if error.kind() == ErrorKind::NotFound => {
            fs::create_dir_all(dir).map_err(failed("create", dir))?;
            open()
        }
        other => other,
    }
    .map_err(failed("open", path))
}

/// The append proper, with the lock held on `file` (released when it is closed on return).
fn write_locked(
    dir: &Path,
    path: &Path,
    mut file: File,
    mut lines: Vec<u8>,
    durability: Durability,
    line_end: Option<u64>,
) -> Result<Appended, AppendError> {
    let before = file.metadata().map_err(failed("stat", path))?.len();
    let mut start = before;
    if before > 0 && line_end != Some(before) {
        let mut last = [0u8];
        file.read_exact_at(&mut last, before - 1)
            .map_err(failed("read", path))?;
        if last[0] != b'\n' {
            tracing::warn!(path = %path.display(), "File ended with a torn line; closing it before appending.");
            lines.insert(0, b'\n');
            start += 1;
        }
    }
    file.write_all(&lines).map_err(failed("append", path))?;
    if durability == Durability::Synced {
        flush(dir, path, &file, before == 0)?;
    }
    Ok(Appended { before, start })
}

/// `fdatasync` of `file` (it flushes the file, whichever descriptor wrote it), and of its
/// directory `dir` when the file was `created`, so that its name is durable too.
fn flush(dir: &Path, path: &Path, file: &File, created: bool) -> Result<(), AppendError> {
    file.sync_data().map_err(failed("sync", path))?;
    if created {
        atomic::sync_dir(dir).map_err(failed("sync", dir))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<u8> {
        text.as_bytes().to_vec()
    }

    /// Leaves half a line at the end of `path`, as a crash mid-write would.
    fn tear(path: &Path) {
        fs::OpenOptions::new()
            .append(true)
            .open(path)
            .unwrap()
            .write_all(b"torn")
            .unwrap();
    }

    #[tokio::test(flavor = "current_thread")]
    async fn appends_close_a_torn_line_and_report_where_they_landed() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join("new");
        let path = dir.join("file.jsonl");
        for durability in [Durability::Unsynced, Durability::Synced] {
            let _ = fs::remove_file(&path);
            let first = append(&dir, &path, lines("a\n"), durability, None)
                .await
                .unwrap();
            assert_eq!(
                first,
                Appended {
                    before: 0,
                    start: 0
                }
            );
            tear(&path);
            let second = append(&dir, &path, lines("b\nc\n"), durability, None)
                .await
                .unwrap();
            assert_eq!(
                second,
                Appended {
                    before: 6,
                    start: 7
                }
            );
            assert_eq!(fs::read_to_string(&path).unwrap(), "a\ntorn\nb\nc\n");
        }
    }

    /// While another process holds the lock, an unsynced append waits for it off the runtime
    /// thread: the single-threaded runtime still runs other tasks meanwhile, and the append
    /// lands once the lock is released.
    #[tokio::test(flavor = "current_thread")]
    async fn a_held_lock_is_waited_for_off_the_runtime_thread() {
        let home = tempfile::tempdir().unwrap();
        let path = home.path().join("file.jsonl");
        fs::write(&path, "a\n").unwrap();
        // Another holder of the lock, which lets go when told, or after 2 s: an append that
        // waited for it on the runtime thread would hold that thread until then, and the
        // check below would find it finished.
        let (release, released) = std::sync::mpsc::channel::<()>();
        let holder = File::open(&path).unwrap();
        holder.lock().unwrap();
        let holder = std::thread::spawn(move || {
            let _ = released.recv_timeout(std::time::Duration::from_secs(2));
            drop(holder);
        });
        let appending = tokio::spawn({
            let (dir, path) = (home.path().to_owned(), path.clone());
            async move { append(&dir, &path, lines("b\n"), Durability::Unsynced, None).await }
        });
        tokio::task::yield_now().await;
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!appending.is_finished());
        assert_eq!(fs::read_to_string(&path).unwrap(), "a\n");
        release.send(()).unwrap();
        holder.join().unwrap();
        let landed = appending.await.unwrap().unwrap();
        assert_eq!(
            landed,
            Appended {
                before: 2,
                start: 2
            }
        );
        assert_eq!(fs::read_to_string(&path).unwrap(), "a\nb\n");
    }

    /// A known line end spares reading the last byte only while the file ends exactly there:
    /// a torn line written after it is still closed.
    #[tokio::test(flavor = "current_thread")]
    async fn a_known_line_end_never_hides_a_torn_line_after_it() {
        let home = tempfile::tempdir().unwrap();
        let path = home.path().join("file.jsonl");
        let first = append(home.path(), &path, lines("a\n"), Durability::Unsynced, None)
            .await
            .unwrap();
        assert_eq!(first.start, 0);
        let own_end = Some(2);
        let second = append(
            home.path(),
            &path,
            lines("b\n"),
            Durability::Unsynced,
            own_end,
        )
        .await
        .unwrap();
        assert_eq!(
            second,
            Appended {
                before: 2,
                start: 2
            }
        );
        tear(&path);
        let third = append(
            home.path(),
            &path,
            lines("c\n"),
            Durability::Unsynced,
            Some(4),
        )
        .await
        .unwrap();
        assert_eq!(
            third,
            Appended {
                before: 8,
                start: 9
            }
        );
        assert_eq!(fs::read_to_string(&path).unwrap(), "a\nb\ntorn\nc\n");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn sync_of_a_missing_file_is_nothing_to_do() {
        let home = tempfile::tempdir().unwrap();
        sync(&home.path().join("none.jsonl")).await.unwrap();
    }
}
