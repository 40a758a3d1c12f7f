//! Where the agent's file access may reach: the workspace guard behind `restrict_to_workspace`,
//! shared by the file tools and the Matrix channel's `matrix_send_file` (so neither adapter
//! reaches into the other for it).
//!
//! A path from the model is joined to the workspace when relative, then resolved with symlinks
//! followed: the longest existing ancestor is canonicalized and the remaining (not yet existing)
//! components are appended after refusing `..` among them. The result is checked with
//! [`Path::starts_with`], which compares whole components, so `/ws2` is not inside `/ws` (the
//! original's string-prefix check allowed it). Reads may also reach the skill directories given
//! as `readable_extra`; writes only the workspace. A dangling symlink is refused, since writing
//! through it would create its target wherever it points.
//!
//! # Check, then open beneath
//! The check and the open are separate system calls, and a process that can change the
//! workspace between them (a command the `shell` tool started in the background) could swap a
//! checked directory for a symlink leading out. So the file tools open what the guard resolved
//! through [`WorkspaceGuard::open_read`], [`WorkspaceGuard::metadata`] and
//! [`WorkspaceGuard::replace`], which resolve it again with `openat2(RESOLVE_BENEATH)` from the
//! workspace (or the skill directory) it must stay in ([`crate::storage::beneath`]): a swapped
//! component fails the open instead of leading out. `list_files` still lists by path (it shows
//! names, not contents).

mod authority;

pub use authority::Access;

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

use crate::core::session::SessionId;
use crate::storage::beneath;
use crate::storage::bootstrap::MAIN_AGENT_FILES;
use crate::storage::file_lock::WorkspaceLock;

/// The workspace files that describe the owner (see [`WorkspaceGuard::is_owners_private`]).
const PRIVATE_FILES: [&str; 3] = ["MEMORY.md", "MEMORY.md.prev", "USER.md"];

/// Besides the prompt's bootstrap files ([`MAIN_AGENT_FILES`]), the workspace files whose
/// text later turns of the owner obey or carry in their prompt: only the owner's requests may
/// write them (see [`WorkspaceGuard::is_instruction`]).
const INSTRUCTION_FILES: [&str; 4] = ["HEARTBEAT.md", "TOOLS.md", "MEMORY.md", "MEMORY.md.prev"];

/// Where the attachments of `session`'s conversation are saved, relative to the workspace:
/// `attachments/<channel>/<conversation>`, the conversation (a room id, a mail address) made a
/// safe file name. Kept here, beside the guard that confines reads to it, so the channels that
/// save and the tools that read agree without reaching into each other.
pub fn attachments_dir(session: &SessionId) -> PathBuf {
    Path::new("attachments")
        .join(safe_name(session.channel(), "channel"))
        .join(safe_name(session.key(), "conversation"))
}

/// The longest file name kept, in bytes (file systems allow 255).
const MAX_NAME: usize = 120;

/// A file name without directories, control characters or leading dots, at most [`MAX_NAME`]
/// bytes; `fallback` when nothing is left.
pub fn safe_name(raw: &str, fallback: &str) -> String {
    let base = raw.rsplit(['/', '\\']).next().unwrap_or_default();
    let cleaned: String = base
        .chars()
        .map(|c| {
            if c.is_control() || matches!(c, ':' | '*' | '?' | '"' | '<' | '>' | '|') {
                '_'
            } else {
                c
            }
        })
        .collect();
    let trimmed = cleaned.trim().trim_start_matches('.');
    let mut name = String::new();
    for c in trimmed.chars() {
        if name.len() + c.len_utf8() > MAX_NAME {
            break;
        }
        name.push(c);
    }
    if name.is_empty() {
        fallback.to_owned()
    } else {
        name
    }
}

/// Why a path was refused.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    /// The path was empty.
    #[error("the path is empty")]
    Empty,
    /// The path contained a NUL byte.
    #[error("the path contains a NUL byte")]
    Nul,
    /// The resolved path lies outside the places the tool may reach.
    #[error("{path} is outside the workspace{hint}")]
    Outside {
        /// The path as given.
        path: String,
        /// Extra explanation (e.g. "(symlinks are followed)").
        hint: &'static str,
    },
    /// A read-only place (a skill directory) was the target of a write.
    #[error(
        "{path} is read-only for the agent (a skill directory); only the workspace is writable"
    )]
    ReadOnly {
        /// The path as given.
        path: String,
    },
    /// `..` appeared after the part of the path that exists, so it cannot be resolved safely.
    #[error("{path} uses '..' below a directory that does not exist")]
    ParentOfMissing {
        /// The path as given.
        path: String,
    },
    /// A symlink on the way points to nothing (or loops).
    #[error("{path} goes through a dangling or looping symlink ({link})")]
    DanglingSymlink {
        /// The path as given.
        path: String,
        /// The symlink that could not be resolved.
        link: PathBuf,
    },
    /// The workspace itself (or a skill directory) could not be resolved.
    #[error("cannot resolve {path}: {error}")]
    Io {
        /// The directory.
        path: PathBuf,
        /// The underlying error.
        error: std::io::Error,
    },
}

/// Resolves and checks the paths the model gives the file tools.
#[derive(Debug, Clone)]
pub struct WorkspaceGuard {
    root: PathBuf,
    restrict: bool,
    readable_extra: Vec<PathBuf>,
    /// The lock the file tools' writes hold.
    lock: WorkspaceLock,
}

impl WorkspaceGuard {
    /// A guard for the workspace `root` (which must exist). With `restrict`, paths must resolve
    /// inside `root`, or, for reads, inside one of `readable_extra`; directories of
    /// `readable_extra` that do not exist are skipped.
    pub fn new(root: &Path, restrict: bool, readable_extra: &[PathBuf]) -> Result<Self, PathError> {
        let root = root.canonicalize().map_err(|error| PathError::Io {
            path: root.to_owned(),
            error,
        })?;
        let readable_extra = readable_extra
            .iter()
            .filter_map(|dir| match dir.canonicalize() {
                Ok(dir) => Some(dir),
                Err(error) => {
                    tracing::debug!(dir = %dir.display(), error = %error, "Skipping a readable directory that cannot be resolved.");
                    None
                }
            })
            .collect();
        Ok(Self {
            lock: WorkspaceLock::beside(&root),
            root,
            restrict,
            readable_extra,
        })
    }

    /// The guard with the file tools' writes under `lock` (the daemon passes its home's
    /// [`WorkspaceLock::new`]; the default, [`WorkspaceLock::beside`], is for tests).
    pub fn with_lock(mut self, lock: WorkspaceLock) -> Self {
        self.lock = lock;
        self
    }

    /// The lock every writer of the workspace's files holds.
    pub fn lock(&self) -> &WorkspaceLock {
        &self.lock
    }

    /// The canonical workspace directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether paths are confined to the workspace.
    pub fn restricted(&self) -> bool {
        self.restrict
    }

    /// Whether `path` (resolved) is an instruction file or lies in the workspace's skills:
    /// text that every later turn of the owner reads as its own instructions.
    pub fn is_instruction(&self, path: &Path) -> bool {
        path.starts_with(self.root.join("skills"))
            || MAIN_AGENT_FILES
                .iter()
                .chain(&INSTRUCTION_FILES)
                .any(|name| path == self.root.join(name))
    }

    /// Whether `path` (resolved) is one of the owner's private files, which turns others take
    /// part in neither read nor change: MEMORY.md (and its previous version) and USER.md.
    pub fn is_owners_private(&self, path: &Path) -> bool {
        PRIVATE_FILES
            .iter()
            .any(|name| path == self.root.join(name))
    }

    /// Whether `path` (resolved) is a saved attachment (`attachments/` in the workspace, where
    /// the channels keep the files people sent): text written by whoever sent it.
    pub fn is_attachment(&self, path: &Path) -> bool {
        path.starts_with(self.root.join("attachments"))
    }

    /// Whether `path` (resolved) is a saved attachment of a conversation other than
    /// `session`'s: files are kept per conversation (`attachments/<channel>/<conversation>/`,
    /// see [`attachments_dir`]), and a turn others take part in reads only its own.
    pub fn is_other_conversations_attachment(&self, path: &Path, session: &SessionId) -> bool {
        self.is_attachment(path) && !path.starts_with(self.root.join(attachments_dir(session)))
    }

    /// For a resolved `path` the guard confines: the directory it must stay beneath (the
    /// workspace or a readable skill directory) and the path relative to it. The file tools open
    /// through it with [`crate::storage::beneath`], so a component swapped for a link between
    /// the check and the open (by a command running in the background) fails instead of leading
    /// out. `None` when nothing is confined (`restrict_to_workspace: false`).
    pub fn confined<'a>(&'a self, path: &Path) -> Option<(&'a Path, PathBuf)> {
        if !self.restrict {
            return None;
        }
        std::iter::once(&self.root)
            .chain(&self.readable_extra)
            .find_map(|base| {
                let relative = path.strip_prefix(base).ok()?;
                let relative = if relative.as_os_str().is_empty() {
                    PathBuf::from(".")
                } else {
                    relative.to_owned()
                };
                Some((base.as_path(), relative))
            })
    }

    /// Opens the resolved `path` for reading, beneath the directory that confines it.
    pub fn open_read(&self, path: &Path) -> std::io::Result<std::fs::File> {
        match self.confined(path) {
            Some((base, relative)) => beneath::open_read(base, &relative),
            None => std::fs::File::open(path),
        }
    }

    /// The metadata of the resolved `path`, beneath the directory that confines it.
    pub fn metadata(&self, path: &Path) -> std::io::Result<std::fs::Metadata> {
        match self.confined(path) {
            Some((base, relative)) => beneath::metadata(base, &relative),
            None => std::fs::metadata(path),
        }
    }

    /// The entries of the resolved directory `path`, beneath the directory that confines it
    /// (unconfined: by path, following every link).
    pub fn list(&self, path: &Path) -> std::io::Result<Vec<(String, beneath::EntryKind)>> {
        if let Some((base, relative)) = self.confined(path) {
            return beneath::Beneath::open(base)?.list(&relative);
        }
        let mut entries = Vec::new();
        for entry in std::fs::read_dir(path)? {
            let entry = entry?;
            let kind = if std::fs::metadata(entry.path()).is_ok_and(|meta| meta.is_dir()) {
                beneath::EntryKind::Dir
            } else {
                beneath::EntryKind::File
            };
            entries.push((entry.file_name().to_string_lossy().into_owned(), kind));
        }
        Ok(entries)
    }

    /// Replaces the resolved `path` with `bytes` atomically, keeping its permissions (new
    /// files get the umask's), beneath the workspace when confined.
    pub fn replace(&self, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        match self.confined(path) {
            Some((base, relative)) => {
                let mode = match beneath::metadata(base, &relative) {
                    Ok(meta) => meta.permissions().mode(),
                    Err(error) if error.kind() == std::io::ErrorKind::NotFound => 0o600,
                    Err(error) => return Err(error),
                };
                beneath::replace(base, &relative, bytes, mode)
            }
            None => {
                let permissions = std::fs::metadata(path).ok().map(|meta| meta.permissions());
                crate::storage::atomic::write(path, bytes)?;
                if let Some(permissions) = permissions {
                    std::fs::set_permissions(path, permissions)?;
                }
                Ok(())
            }
        }
    }

    /// The resolved path for reading `input`: inside the workspace or a readable skill
    /// directory when restricted.
    pub fn resolve_for_read(&self, input: &str) -> Result<PathBuf, PathError> {
        let path = self.resolve(input)?;
        if !self.restrict
            || path.starts_with(&self.root)
            || self.readable_extra.iter().any(|dir| path.starts_with(dir))
        {
            Ok(path)
        } else {
            Err(self.outside(input))
        }
    }

    /// The resolved path for writing `input`: inside the workspace when restricted.
    pub fn resolve_for_write(&self, input: &str) -> Result<PathBuf, PathError> {
        let path = self.resolve(input)?;
        if !self.restrict || path.starts_with(&self.root) {
            Ok(path)
        } else if self.readable_extra.iter().any(|dir| path.starts_with(dir)) {
            Err(PathError::ReadOnly {
                path: input.to_owned(),
            })
        } else {
            Err(self.outside(input))
        }
    }

    fn outside(&self, input: &str) -> PathError {
        let hint = if Path::new(input).is_absolute() {
            ""
        } else {
            " (symlinks are followed; use paths relative to the workspace)"
        };
        PathError::Outside {
            path: input.to_owned(),
            hint,
        }
    }

    /// Joins `input` to the workspace and resolves it, following symlinks.
    fn resolve(&self, input: &str) -> Result<PathBuf, PathError> {
        if input.is_empty() {
            return Err(PathError::Empty);
        }
        if input.contains('\0') {
            return Err(PathError::Nul);
        }
        let joined = self.root.join(input);
        let mut rest: Vec<OsString> = Vec::new();
        let mut current = joined.as_path();
        loop {
            match current.canonicalize() {
                Ok(base) => return self.append(base, rest, input),
                Err(_) => {
                    if current
                        .symlink_metadata()
                        .is_ok_and(|meta| meta.file_type().is_symlink())
                    {
                        return Err(PathError::DanglingSymlink {
                            path: input.to_owned(),
                            link: current.to_owned(),
                        });
                    }
                }
            }
            let (Some(parent), Some(last)) = (current.parent(), current.components().next_back())
            else {
                // Only the filesystem root has no parent, and it always resolves.
                return Err(self.outside(input));
            };
            rest.push(last.as_os_str().to_owned());
            current = parent;
        }
    }

    fn append(
        &self,
        base: PathBuf,
        rest: Vec<OsString>,
        input: &str,
    ) -> Result<PathBuf, PathError> {
        let mut path = base;
        for part in rest.into_iter().rev() {
            match Path::new(&part).components().next() {
                Some(Component::Normal(name)) => path.push(name),
                Some(Component::CurDir) | None => {}
                _ => {
                    return Err(PathError::ParentOfMissing {
                        path: input.to_owned(),
                    });
                }
            }
        }
        Ok(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// What a case expects.
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Expect {
        /// Allowed, resolving to this path under the workspace.
        Inside(&'static str),
        /// Allowed, resolving to this path under the skills directory.
        Skill(&'static str),
        /// Refused.
        Refused,
    }

    #[derive(Debug, Clone, Copy)]
    enum Mode {
        Read,
        Write,
    }

    struct Fixture {
        _dir: tempfile::TempDir,
        base: PathBuf,
        guard: WorkspaceGuard,
    }

    /// `base/ws` (the workspace), `base/ws2` (a sibling with a shared prefix), `base/outside`,
    /// `base/skills` (a readable extra), and symlinks inside the workspace pointing around.
    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let ws = base.join("ws");
        for sub in ["ws/sub", "ws2", "outside", "skills/git"] {
            std::fs::create_dir_all(base.join(sub)).unwrap();
        }
        std::fs::write(ws.join("note.txt"), "hi").unwrap();
        std::fs::write(base.join("ws2/x"), "sibling").unwrap();
        std::fs::write(base.join("outside/secret"), "secret").unwrap();
        std::fs::write(base.join("skills/git/SKILL.md"), "skill").unwrap();
        symlink(base.join("outside/secret"), ws.join("link_file_out")).unwrap();
        symlink(base.join("outside"), ws.join("link_dir_out")).unwrap();
        symlink(ws.join("link_dir_out"), ws.join("chain")).unwrap();
        symlink(ws.join("note.txt"), ws.join("link_in")).unwrap();
        symlink(base.join("outside/new_file"), ws.join("dangling_out")).unwrap();
        symlink(base.join("ws2"), ws.join("link_sibling")).unwrap();
        let guard = WorkspaceGuard::new(&ws, true, &[base.join("skills")]).unwrap();
        Fixture {
            _dir: dir,
            base,
            guard,
        }
    }

    fn check(fixture: &Fixture, mode: Mode, input: &str, expected: Expect) {
        let input = input.replace("$BASE", &fixture.base.to_string_lossy());
        let result = match mode {
            Mode::Read => fixture.guard.resolve_for_read(&input),
            Mode::Write => fixture.guard.resolve_for_write(&input),
        };
        match (expected, result) {
            (Expect::Inside(want), Ok(got)) => {
                assert_eq!(
                    got,
                    fixture.base.join("ws").join(want),
                    "{mode:?} {input:?}"
                )
            }
            (Expect::Skill(want), Ok(got)) => {
                assert_eq!(
                    got,
                    fixture.base.join("skills").join(want),
                    "{mode:?} {input:?}"
                )
            }
            (Expect::Refused, Err(_)) => {}
            (expected, got) => panic!("{mode:?} {input:?}: expected {expected:?}, got {got:?}"),
        }
    }

    #[test]
    fn workspace_escapes_are_refused() {
        use Expect::*;
        use Mode::*;
        let fixture = fixture();
        let cases: &[(Mode, &str, Expect)] = &[
            (Read, "../x", Refused),
            (Write, "../x", Refused),
            (Read, "a/../../x", Refused),
            (Write, "sub/../../outside/secret", Refused),
            (Read, "/etc/passwd", Refused),
            (Write, "/etc/passwd", Refused),
            (Read, "$BASE/ws/note.txt", Inside("note.txt")),
            (
                Write,
                "$BASE/ws/new/deep/file.txt",
                Inside("new/deep/file.txt"),
            ),
            (Read, "$BASE/ws2/x", Refused),
            (Write, "$BASE/ws2/x", Refused),
            (Read, "./../ws2/x", Refused),
            (Write, "../ws2", Refused),
            (Read, "link_file_out", Refused),
            (Write, "link_file_out", Refused),
            (Read, "link_dir_out/secret", Refused),
            (Write, "link_dir_out/new_file", Refused),
            (Read, "chain/secret", Refused),
            (Write, "chain/new", Refused),
            (Read, "link_sibling/x", Refused),
            (Write, "dangling_out", Refused),
            (Write, "dangling_out/x", Refused),
            (Read, "note\0.txt", Refused),
            (Read, "", Refused),
            (Write, "", Refused),
            (Read, "~/.bashrc", Inside("~/.bashrc")),
            (Read, "~root/.bashrc", Inside("~root/.bashrc")),
            (
                Write,
                "sub/new/nested/file.md",
                Inside("sub/new/nested/file.md"),
            ),
            (Write, "missing/../../x", Refused),
            (Write, "missing/..", Refused),
            (Read, "link_in", Inside("note.txt")),
            (Read, "sub/./../note.txt", Inside("note.txt")),
            (Read, ".", Inside("")),
            (Read, "$BASE/skills/git/SKILL.md", Skill("git/SKILL.md")),
            (Write, "$BASE/skills/git/SKILL.md", Refused),
            (Write, "$BASE/skills/new/SKILL.md", Refused),
            (Read, "$BASE/skills/../outside/secret", Refused),
            (Read, "$BASE/ws/../outside/secret", Refused),
            (Read, "/", Refused),
        ];
        assert!(cases.len() >= 15);
        for &(mode, input, expected) in cases {
            check(&fixture, mode, input, expected);
        }
    }

    #[test]
    fn unrestricted_allows_outside_but_still_resolves() {
        let fixture = fixture();
        let guard = WorkspaceGuard::new(&fixture.base.join("ws"), false, &[]).unwrap();
        assert_eq!(
            guard.resolve_for_read("../outside/secret").unwrap(),
            fixture.base.join("outside/secret")
        );
        assert!(guard.resolve_for_write("link_dir_out/x").is_ok());
        assert!(guard.resolve_for_read("").is_err());
    }

    #[test]
    fn sibling_prefix_message_is_clear() {
        let fixture = fixture();
        let error = fixture.guard.resolve_for_read("../ws2/x").unwrap_err();
        assert!(
            error.to_string().contains("outside the workspace"),
            "{error}"
        );
        let error = fixture
            .guard
            .resolve_for_write(&format!("{}/skills/git/SKILL.md", fixture.base.display()))
            .unwrap_err();
        assert!(error.to_string().contains("read-only"), "{error}");
    }
}
