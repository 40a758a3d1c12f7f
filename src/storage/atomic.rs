//! Atomic whole-file writes: a reader (or a crash) sees the old content or the new, never a mix.
//!
//! The sequence is the classic one: write a temporary file in the same directory, fsync it,
//! rename it over the target, fsync the directory so the rename itself is durable.
//! [`write_new`] creates a file the same way but never replaces one.
//!
//! Atomic is not exclusive: a read-modify-write that two processes may run at once also holds
//! a [`super::file_lock::FileLock`].

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Writes `bytes` to `path` atomically and durably, creating parent directories.
pub fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let (dir, temp) = write_temp(path, bytes)?;
    let result = fs::rename(&temp, path).and_then(|()| sync_dir(&dir));
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    result
}

/// Like [`write`], but only creates `path`: `Ok(false)` (and nothing written) when it exists.
///
/// The check and the creation are one step (the temp file is hard-linked to `path`, which fails
/// if `path` exists), so a file another process or turn created meanwhile is never replaced, as
/// a check followed by [`write`] would do.
pub fn write_new(path: &Path, bytes: &[u8]) -> std::io::Result<bool> {
    let (dir, temp) = write_temp(path, bytes)?;
    let result = match fs::hard_link(&temp, path) {
        Ok(()) => sync_dir(&dir).map(|()| true),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(error) => Err(error),
    };
    let _ = fs::remove_file(&temp);
    result
}

/// Writes `bytes` to a new, durable temp file beside `path` (creating the directory); returns
/// the directory and the temp file.
fn write_temp(path: &Path, bytes: &[u8]) -> std::io::Result<(PathBuf, PathBuf)> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = dir.join(format!(
        ".{name}.tmp.{}.{}",
        std::process::id(),
        fastrand::u64(..)
    ));
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()
    })();
    match result {
        Ok(()) => Ok((dir.to_owned(), temp)),
        Err(error) => {
            let _ = fs::remove_file(&temp);
            Err(error)
        }
    }
}

/// Makes a directory's entries (new files, renames) durable.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_content_and_leaves_no_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/file.md");
        write(&path, b"one").unwrap();
        write(&path, b"two").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "two");
        let entries: Vec<_> = fs::read_dir(path.parent().unwrap()).unwrap().collect();
        assert_eq!(entries.len(), 1);
    }

    #[test]
    fn write_new_creates_but_never_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new.md");
        assert!(write_new(&path, b"first").unwrap());
        assert!(!write_new(&path, b"second").unwrap());
        assert_eq!(fs::read_to_string(&path).unwrap(), "first");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
