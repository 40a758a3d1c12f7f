//! [`WorkspaceFiles`]: files of the workspace that go into every prompt (the bootstrap files,
//! MEMORY.md), read beneath the workspace and cached so that a turn touches the disk only for
//! what changed.
//!
//! Every turn used to open the workspace and look up each file: eight lookups, most of them
//! for files that do not exist (an owner rarely writes all six bootstrap files). Whether a
//! name exists can only change with the directory, so the directory's modification time
//! vouches for every name found missing (or refused: a link out of the workspace) at the last
//! scan, and only the files that exist are looked at again (`lstat`, for an edit in place).
//! One `statx` per turn when none exist, instead of two opens and eight failing lookups.
//!
//! The directory's time is coarse (a clock tick): a file created within the same tick as a
//! scan would leave it unchanged. So a scan vouches only for a directory last changed at least
//! [`SETTLED`] before it, as git does for its index; until then every turn scans again.
//!
//! [`WorkspaceFiles::read_cached`] answers from the cache with only the `statx` calls that
//! vouch for it, on the caller's thread: a `statx` of a local directory takes microseconds,
//! while handing it to the blocking pool costs two thread switches, the largest cost of a turn
//! (`perf`, BENCHMARKS.md). Anything that needs a lookup or a read goes to [`WorkspaceFiles::read`]
//! on the blocking pool.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use super::beneath::{self, Beneath};

/// How long before a scan the directory must have last changed for the scan to vouch for it.
const SETTLED: Duration = Duration::from_secs(2);

/// What the last scan found under one name.
#[derive(Debug, Clone)]
enum Entry {
    /// Not there, or refused (a link out of the workspace, not a file).
    Absent,
    /// Read: its modification time and length then, and the text.
    Text {
        modified: SystemTime,
        len: u64,
        text: Arc<str>,
    },
}

#[derive(Debug, Default)]
struct State {
    /// The directory's modification time at the last scan, if that scan vouches for it.
    vouched: Option<SystemTime>,
    entries: HashMap<PathBuf, Entry>,
}

/// Files of one workspace, read beneath it and cached (see the module docs).
#[derive(Debug)]
pub struct WorkspaceFiles {
    workspace: PathBuf,
    /// A std mutex: held during a (blocking) read, which callers run on the blocking pool.
    state: Mutex<State>,
}

impl WorkspaceFiles {
    /// The files of `workspace`.
    pub fn new(workspace: &Path) -> Self {
        Self {
            workspace: workspace.to_owned(),
            state: Mutex::default(),
        }
    }

    /// What [`WorkspaceFiles::read`] would return, if the cache can tell without a lookup or a
    /// read: the directory is vouched for and every existing file is unchanged. Only `statx`
    /// calls (one for the directory, one per existing file), so callers run it inline.
    pub fn read_cached(&self, names: &[&Path]) -> Option<Vec<Option<Arc<str>>>> {
        let dir_modified = std::fs::metadata(&self.workspace)
            .and_then(|meta| meta.modified())
            .ok()?;
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.vouched != Some(dir_modified) {
            return None;
        }
        names
            .iter()
            .map(|name| match state.entries.get(*name)? {
                Entry::Absent => Some(None),
                Entry::Text {
                    modified,
                    len,
                    text,
                } => self
                    .unchanged(name, *modified, *len)?
                    .then(|| Some(text.clone())),
            })
            .collect()
    }

    /// The text of each of `names` (relative to the workspace), `None` for one that is not
    /// there, is refused (linked out of the workspace) or cannot be read. Blocking.
    pub fn read(&self, names: &[&Path]) -> Vec<Option<Arc<str>>> {
        let now = SystemTime::now();
        let dir_modified = std::fs::metadata(&self.workspace)
            .and_then(|meta| meta.modified())
            .ok();
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let trusted = dir_modified.is_some() && state.vouched == dir_modified;
        if !trusted {
            state
                .entries
                .retain(|_, entry| matches!(entry, Entry::Text { .. }));
        }
        let mut dir: Option<Beneath> = None;
        let texts = names
            .iter()
            .map(|name| self.one(&mut state, &mut dir, name, trusted))
            .collect();
        // Vouch for the directory only when it had settled before this scan began.
        state.vouched = dir_modified.filter(|modified| {
            now.duration_since(*modified)
                .is_ok_and(|age| age >= SETTLED)
        });
        texts
    }

    fn one(
        &self,
        state: &mut State,
        dir: &mut Option<Beneath>,
        name: &Path,
        trusted: bool,
    ) -> Option<Arc<str>> {
        match state.entries.get(name) {
            Some(Entry::Absent) if trusted => return None,
            Some(Entry::Text {
                modified,
                len,
                text,
            }) if trusted && self.unchanged(name, *modified, *len)? => {
                return Some(text.clone());
            }
            _ => {}
        }
        let entry = self.scan(dir, name);
        let text = match &entry {
            Entry::Text { text, .. } => Some(text.clone()),
            Entry::Absent => None,
        };
        state.entries.insert(name.to_owned(), entry);
        text
    }

    /// Whether `name` still holds the file read with this time and length (`None`: it cannot
    /// be looked at). The directory did not change, so the name was not replaced; an edit in
    /// place shows in the file's time or length.
    fn unchanged(&self, name: &Path, modified: SystemTime, len: u64) -> Option<bool> {
        let meta = std::fs::symlink_metadata(self.workspace.join(name)).ok()?;
        Some(meta.is_file() && meta.len() == len && meta.modified().ok() == Some(modified))
    }

    /// Looks `name` up beneath the workspace and reads it.
    fn scan(&self, dir: &mut Option<Beneath>, name: &Path) -> Entry {
        if dir.is_none() {
            match Beneath::open(&self.workspace) {
                Ok(opened) => *dir = Some(opened),
                Err(error) => {
                    tracing::warn!(path = %self.workspace.display(), error = %error, "Cannot open the workspace.");
                    return Entry::Absent;
                }
            }
        }
        let Some(dir) = dir.as_ref() else {
            return Entry::Absent;
        };
        let meta = match dir.metadata(name) {
            Ok(meta) if meta.is_file() => meta,
            Ok(_) => return Entry::Absent,
            Err(error) => {
                beneath::refused(&self.workspace.join(name), &error);
                return Entry::Absent;
            }
        };
        match dir.read_to_string(name) {
            Ok(text) => Entry::Text {
                modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                len: meta.len(),
                text: text.into(),
            },
            Err(error) => {
                if !beneath::refused(&self.workspace.join(name), &error) {
                    tracing::warn!(path = %name.display(), error = %error, "Could not read a workspace file; left it out.");
                }
                Entry::Absent
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(files: &WorkspaceFiles, names: &[&str]) -> Vec<Option<String>> {
        let names: Vec<&Path> = names.iter().map(Path::new).collect();
        files
            .read(&names)
            .into_iter()
            .map(|text| text.map(|t| t.to_string()))
            .collect()
    }

    /// Sets the directory's time into the past, as if it had settled.
    fn settle(dir: &Path) {
        let past = SystemTime::now() - Duration::from_secs(60);
        std::fs::File::open(dir)
            .unwrap()
            .set_modified(past)
            .unwrap();
    }

    #[test]
    fn the_cache_answers_inline_only_for_a_settled_directory_and_unchanged_files() {
        let workspace = tempfile::tempdir().unwrap();
        let ws = workspace.path();
        std::fs::write(ws.join("SOUL.md"), "soul").unwrap();
        let files = WorkspaceFiles::new(ws);
        let names = [Path::new("SOUL.md"), Path::new("USER.md")];
        assert!(files.read_cached(&names).is_none(), "nothing read yet");
        settle(ws);
        files.read(&names);
        let cached = files.read_cached(&names).expect("vouched and unchanged");
        assert_eq!(cached[0].as_deref(), Some("soul"));
        assert_eq!(cached[1], None);
        assert!(
            files.read_cached(&[Path::new("AGENTS.md")]).is_none(),
            "a name never looked up"
        );
        std::fs::write(ws.join("SOUL.md"), "SOUL, longer").unwrap();
        assert!(files.read_cached(&names).is_none(), "an edit in place");
        files.read(&names);
        std::fs::write(ws.join("USER.md"), "new").unwrap();
        assert!(files.read_cached(&names).is_none(), "a file created");
    }

    #[test]
    fn creations_edits_deletions_and_links_out_are_seen_on_the_next_read() {
        let workspace = tempfile::tempdir().unwrap();
        let ws = workspace.path();
        let files = WorkspaceFiles::new(ws);
        let names = ["SOUL.md", "USER.md"];
        assert_eq!(texts(&files, &names), [None, None]);
        settle(ws);
        assert_eq!(texts(&files, &names), [None, None]);
        // Created: the directory changed, so the name is looked up again.
        std::fs::write(ws.join("SOUL.md"), "soul").unwrap();
        assert_eq!(texts(&files, &names), [Some("soul".into()), None]);
        settle(ws);
        texts(&files, &names);
        // Edited in place (same length, new time), with the directory unchanged.
        std::fs::write(ws.join("SOUL.md"), "SOUL").unwrap();
        let later = SystemTime::now() + Duration::from_secs(5);
        std::fs::File::options()
            .write(true)
            .open(ws.join("SOUL.md"))
            .unwrap()
            .set_modified(later)
            .unwrap();
        assert_eq!(texts(&files, &names), [Some("SOUL".into()), None]);
        // Replaced by a link out of the workspace: refused, never read.
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "secret").unwrap();
        std::fs::remove_file(ws.join("SOUL.md")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), ws.join("SOUL.md")).unwrap();
        assert_eq!(texts(&files, &names), [None, None]);
        // Deleted.
        std::fs::remove_file(ws.join("SOUL.md")).unwrap();
        assert_eq!(texts(&files, &names), [None, None]);
    }

    #[test]
    fn a_directory_changed_within_the_settling_time_is_scanned_every_time() {
        let workspace = tempfile::tempdir().unwrap();
        let ws = workspace.path();
        let files = WorkspaceFiles::new(ws);
        assert_eq!(texts(&files, &["AGENTS.md"]), [None]);
        // Created without the directory's time moving (a coarse clock tick): still seen,
        // since the directory had not settled at the last scan.
        let before = std::fs::metadata(ws).unwrap().modified().unwrap();
        std::fs::write(ws.join("AGENTS.md"), "agents").unwrap();
        std::fs::File::open(ws)
            .unwrap()
            .set_modified(before)
            .unwrap();
        assert_eq!(texts(&files, &["AGENTS.md"]), [Some("agents".into())]);
    }
}
