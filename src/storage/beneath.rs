//! Files the daemon itself opens in the workspace, opened so that nothing leads out of it.
//!
//! Shell commands may write the workspace, and a command can plant a link there
//! (`SOUL.md -> ../squidbot.yaml`, `attachments/email -> /home/owner/.ssh`). The daemon is not
//! jailed, so a plain `open` would follow the link and read the config into the next prompt or
//! write a received file wherever the link points. Every path here is resolved by the kernel
//! with `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` from a descriptor of the workspace:
//! a symlink, `..` or absolute path that leaves it fails with `EXDEV` in the same system call
//! that opens the file, so there is no window between a check and the open. Links that stay
//! inside still work. Directories created for writes are walked one at a time with
//! `RESOLVE_NO_SYMLINKS`, so a planted link directory is never written through.
//!
//! A refused link is logged once per path ([`refused`]) and treated as absent by readers.
//! `rustix` (already in the tree through tempfile) makes the calls; `openat2` needs Linux 5.6,
//! and on an older kernel these functions refuse instead of opening unchecked.

use std::collections::HashSet;
use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;

use rustix::fs::{Mode, OFlags, RenameFlags, ResolveFlags};

/// The descriptor of `root`, from which paths are resolved.
fn root_fd(root: &Path) -> std::io::Result<OwnedFd> {
    Ok(rustix::fs::open(
        root,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// Opens `relative` beneath the directory `dir` with `flags`, never leaving it.
fn open_at(
    dir: &OwnedFd,
    relative: &Path,
    flags: OFlags,
    mode: Mode,
    resolve: ResolveFlags,
) -> std::io::Result<OwnedFd> {
    rustix::fs::openat2(
        dir,
        relative,
        flags | OFlags::CLOEXEC,
        mode,
        resolve | ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
    )
    .map_err(|error| match error {
        rustix::io::Errno::XDEV => Escape::error(relative, "leads out of the workspace"),
        rustix::io::Errno::LOOP => Escape::error(relative, "goes through a symlink"),
        other => other.into(),
    })
}

/// A path refused because it would leave the directory it is resolved beneath: the kind of
/// error [`is_escape`] recognises by type, not by its words.
#[derive(Debug, thiserror::Error)]
#[error("{path} {why}")]
struct Escape {
    path: String,
    why: &'static str,
}

impl Escape {
    fn error(path: &Path, why: &'static str) -> std::io::Error {
        let escape = Self {
            path: path.display().to_string(),
            why,
        };
        std::io::Error::new(ErrorKind::PermissionDenied, escape)
    }
}

/// Whether `error` is a refused way out (a link leading outside), not a plain I/O error.
pub fn is_escape(error: &std::io::Error) -> bool {
    error.get_ref().is_some_and(|inner| inner.is::<Escape>())
}

/// Whether `error` is a refused way out; if so it is logged once for `path` ([`warn_once`]).
/// Readers treat such a file as absent.
pub fn refused(path: &Path, error: &std::io::Error) -> bool {
    let escape = is_escape(error);
    if escape {
        warn_once(path, error);
    }
    escape
}

/// A directory the daemon reads beneath: opened once, then any number of files in it.
#[derive(Debug)]
pub struct Beneath(OwnedFd);

impl Beneath {
    /// The directory `root`.
    pub fn open(root: &Path) -> std::io::Result<Self> {
        root_fd(root).map(Self)
    }

    /// Opens `relative` for reading.
    pub fn open_read(&self, relative: &Path) -> std::io::Result<File> {
        let fd = open_at(
            &self.0,
            relative,
            OFlags::RDONLY,
            Mode::empty(),
            ResolveFlags::empty(),
        )?;
        Ok(File::from(fd))
    }

    /// Reads `relative` as UTF-8.
    pub fn read_to_string(&self, relative: &Path) -> std::io::Result<String> {
        let mut text = String::new();
        self.open_read(relative)?.read_to_string(&mut text)?;
        Ok(text)
    }

    /// The metadata of `relative`, following links that stay inside.
    pub fn metadata(&self, relative: &Path) -> std::io::Result<std::fs::Metadata> {
        let fd = open_at(
            &self.0,
            relative,
            OFlags::PATH,
            Mode::empty(),
            ResolveFlags::empty(),
        )?;
        File::from(fd).metadata()
    }
}

/// What an entry of a listed directory is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A directory (or a link to one that stays inside).
    Dir,
    /// Anything else that stays inside.
    File,
    /// A link that leads out (or through a magic link): named, never followed.
    Outside,
}

impl Beneath {
    /// The entries of the directory `relative` (names, unsorted, without `.` and `..`), each
    /// classified by resolving it beneath this directory: a link out is [`EntryKind::Outside`].
    pub fn list(&self, relative: &Path) -> std::io::Result<Vec<(String, EntryKind)>> {
        let dir = open_at(
            &self.0,
            relative,
            OFlags::RDONLY | OFlags::DIRECTORY,
            Mode::empty(),
            ResolveFlags::empty(),
        )?;
        let mut entries = Vec::new();
        for entry in rustix::fs::Dir::new(dir)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name == "." || name == ".." {
                continue;
            }
            let kind = match self.metadata(&relative.join(&name)) {
                Ok(meta) if meta.is_dir() => EntryKind::Dir,
                Err(error) if is_escape(&error) => EntryKind::Outside,
                _ => EntryKind::File,
            };
            entries.push((name, kind));
        }
        Ok(entries)
    }
}

/// Opens `relative` (inside `root`) for reading.
pub fn open_read(root: &Path, relative: &Path) -> std::io::Result<File> {
    Beneath::open(root)?.open_read(relative)
}

/// Reads `relative` (inside `root`) as UTF-8.
pub fn read_to_string(root: &Path, relative: &Path) -> std::io::Result<String> {
    Beneath::open(root)?.read_to_string(relative)
}

/// The metadata of `relative` (inside `root`), following links that stay inside.
pub fn metadata(root: &Path, relative: &Path) -> std::io::Result<std::fs::Metadata> {
    Beneath::open(root)?.metadata(relative)
}

/// Opens the directory `relative` inside `root`, creating what is missing, one component at a
/// time and never through a symlink.
fn dir_all(root: &Path, relative: &Path) -> std::io::Result<OwnedFd> {
    let mut dir = rustix::fs::open(
        root,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    for component in relative.components() {
        let Component::Normal(name) = component else {
            return Err(std::io::Error::new(
                ErrorKind::InvalidInput,
                format!("{} is not a plain relative path", relative.display()),
            ));
        };
        match rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(0o700)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(error) => return Err(error.into()),
        }
        // Opened for reading, not `O_PATH`: the last one is fsynced after the rename.
        dir = open_at(
            &dir,
            Path::new(name),
            OFlags::RDONLY | OFlags::DIRECTORY,
            Mode::empty(),
            ResolveFlags::NO_SYMLINKS,
        )?;
    }
    Ok(dir)
}

/// Writes `bytes` to a new, durable file beside `relative` inside `root` (the directories on
/// the way created, never followed through a symlink) and hands it to `commit`, which moves it
/// into place; the temporary file is removed whatever `commit` did. `mode` is set on the file
/// whatever the umask.
fn write_then<T>(
    root: &Path,
    relative: &Path,
    bytes: &[u8],
    mode: u32,
    commit: impl FnOnce(&OwnedFd, &str, &std::ffi::OsStr) -> std::io::Result<T>,
) -> std::io::Result<T> {
    let (parent, name) = match (relative.parent(), relative.file_name()) {
        (Some(parent), Some(name)) => (parent, name),
        _ => {
            return Err(std::io::Error::new(
                ErrorKind::InvalidInput,
                format!("{} names no file", relative.display()),
            ));
        }
    };
    let dir = dir_all(root, parent)?;
    let temp = format!(
        ".{}.tmp.{}.{}",
        name.to_string_lossy(),
        std::process::id(),
        fastrand::u64(..)
    );
    let mode = Mode::from_raw_mode(mode & 0o7777);
    let fd = open_at(
        &dir,
        Path::new(&temp),
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL,
        mode,
        ResolveFlags::NO_SYMLINKS,
    )?;
    let written = (|| {
        let mut file = File::from(fd);
        file.write_all(bytes)?;
        // The umask narrowed the mode at creation.
        rustix::fs::fchmod(&file, mode)?;
        file.sync_all()
    })();
    let result = written.and_then(|()| commit(&dir, &temp, name));
    // After a rename the name is gone and this does nothing; after a link or a failure it
    // removes the temporary file.
    let _ = rustix::fs::unlinkat(&dir, &temp, rustix::fs::AtFlags::empty());
    result
}

/// Writes `bytes` as the new file `relative` inside `root`, atomically and durably: `false`
/// when a file of that name exists (it is left as it is). The directories on the way are
/// created, never followed through a symlink.
pub fn write_new(root: &Path, relative: &Path, bytes: &[u8]) -> std::io::Result<bool> {
    write_then(
        root,
        relative,
        bytes,
        0o600,
        |dir, temp, name| match rustix::fs::renameat_with(
            dir,
            temp,
            dir,
            name,
            RenameFlags::NOREPLACE,
        ) {
            Ok(()) => rustix::fs::fsync(dir).map(|()| true).map_err(Into::into),
            Err(rustix::io::Errno::EXIST) => Ok(false),
            Err(error) => Err(error.into()),
        },
    )
}

/// Replaces (or creates) the file `relative` inside `root` with `bytes`, atomically and
/// durably, with permissions `mode`: a temporary file beside it, then a rename over it. The
/// directories on the way are created and never followed through a symlink, so a directory
/// swapped for a link after a path was checked cannot redirect the write.
pub fn replace(root: &Path, relative: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    write_then(root, relative, bytes, mode, |dir, temp, name| {
        rustix::fs::renameat(dir, temp, dir, name)?;
        rustix::fs::fsync(dir)?;
        Ok(())
    })
}

/// Logs `error` for `path` once per process: a planted link is reported, not repeated on
/// every turn.
fn warn_once(path: &Path, error: &std::io::Error) {
    static WARNED: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);
    let mut warned = WARNED.lock().unwrap_or_else(|p| p.into_inner());
    if warned
        .get_or_insert_with(HashSet::new)
        .insert(path.to_owned())
    {
        tracing::warn!(path = %path.display(), error = %error, "Refused a workspace file that leads outside the workspace; it is treated as absent.");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_inside_are_followed_and_links_out_refused() {
        let root = tempfile::tempdir().unwrap();
        let workspace = root.path().join("workspace");
        std::fs::create_dir_all(workspace.join("notes")).unwrap();
        std::fs::write(root.path().join("squidbot.yaml"), "api_key: secret\n").unwrap();
        std::fs::write(workspace.join("notes/soul.md"), "be kind\n").unwrap();
        std::os::unix::fs::symlink("notes/soul.md", workspace.join("SOUL.md")).unwrap();
        std::os::unix::fs::symlink("../squidbot.yaml", workspace.join("AGENTS.md")).unwrap();
        std::os::unix::fs::symlink(root.path(), workspace.join("up")).unwrap();
        assert_eq!(
            read_to_string(&workspace, Path::new("SOUL.md")).unwrap(),
            "be kind\n"
        );
        for path in ["AGENTS.md", "up/squidbot.yaml", "../squidbot.yaml"] {
            let error = read_to_string(&workspace, Path::new(path)).unwrap_err();
            assert!(is_escape(&error), "{path}: {error}");
            assert!(metadata(&workspace, Path::new(path)).is_err(), "{path}");
        }
        let absolute = root.path().join("squidbot.yaml");
        assert!(read_to_string(&workspace, &absolute).is_err());
    }

    #[test]
    fn writes_never_go_through_a_planted_directory_link() {
        let root = tempfile::tempdir().unwrap();
        let workspace = root.path().join("workspace");
        let elsewhere = root.path().join("elsewhere");
        std::fs::create_dir_all(workspace.join("attachments")).unwrap();
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, workspace.join("attachments/email")).unwrap();
        let error = write_new(&workspace, Path::new("attachments/email/a.txt"), b"x").unwrap_err();
        assert!(is_escape(&error), "{error}");
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
        assert!(write_new(&workspace, Path::new("attachments/matrix/a.txt"), b"one").unwrap());
        assert!(!write_new(&workspace, Path::new("attachments/matrix/a.txt"), b"two").unwrap());
        assert_eq!(
            std::fs::read(workspace.join("attachments/matrix/a.txt")).unwrap(),
            b"one"
        );
        assert_eq!(
            std::fs::read_dir(workspace.join("attachments/matrix"))
                .unwrap()
                .count(),
            1,
            "no temporary file is left"
        );
    }
}
