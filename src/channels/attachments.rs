//! Where received attachments (Matrix files, mail parts) are stored, so the agent can open them.
//!
//! They go inside the workspace, under `attachments/<channel>/<conversation>/<YYYY-MM-DD>/`
//! ([`crate::workspace::attachments_dir`]): per conversation, so a turn others take part in can
//! be confined to its own files. Inside the workspace because the file
//! tools are confined to the workspace: a file saved anywhere else could not be read by the
//! agent it is offered to. Names come from senders, so they are reduced to a safe basename, and
//! an existing file is never overwritten (a numbered name is picked instead). Each file is
//! written atomically: a crash leaves either the whole file or none. The directories are
//! created and the file written beneath the workspace ([`beneath::write_new`]): a link a
//! command planted at `attachments/<channel>` or below is refused, never written through.

use std::path::{Path, PathBuf};

use chrono::NaiveDate;

use crate::core::session::SessionId;
use crate::storage::beneath;
use crate::workspace::attachments_dir;
pub use crate::workspace::safe_name;

/// Stores received attachments under one workspace.
#[derive(Debug, Clone)]
pub struct AttachmentStore {
    workspace: PathBuf,
}

impl AttachmentStore {
    /// A store writing under `<workspace>/attachments`.
    pub fn new(workspace: &Path) -> Self {
        Self {
            workspace: workspace.to_owned(),
        }
    }

    /// Saves `bytes` as `name` for `session`'s conversation on `day`; returns the path
    /// written.
    ///
    /// Blocking file I/O: call it from `spawn_blocking` in async code.
    pub fn save(
        &self,
        session: &SessionId,
        day: NaiveDate,
        name: &str,
        bytes: &[u8],
    ) -> std::io::Result<PathBuf> {
        let dir = attachments_dir(session).join(day.format("%Y-%m-%d").to_string());
        let name = safe_name(name, "attachment");
        let (stem, extension) = match name.rsplit_once('.') {
            Some((stem, ext)) if !stem.is_empty() => (stem.to_owned(), format!(".{ext}")),
            _ => (name.clone(), String::new()),
        };
        let mut path = dir.join(&name);
        let mut n = 1;
        // The name is taken in the same step as the file is created, so two attachments of one
        // name saved at once (Matrix and mail, or two rooms) never overwrite each other.
        while !beneath::write_new(&self.workspace, &path, bytes)? {
            path = dir.join(format!("{stem}-{n}{extension}"));
            n += 1;
        }
        Ok(self.workspace.join(path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day() -> NaiveDate {
        NaiveDate::from_ymd_opt(2026, 11, 22).unwrap()
    }

    #[test]
    fn names_lose_directories_dots_and_control_characters() {
        assert_eq!(safe_name("../../etc/passwd", "x"), "passwd");
        assert_eq!(safe_name("C:\\Users\\a\\report.pdf", "x"), "report.pdf");
        assert_eq!(safe_name(".hidden", "x"), "hidden");
        assert_eq!(safe_name("a\nb\u{0}c.txt", "x"), "a_b_c.txt");
        assert_eq!(safe_name("..", "attachment"), "attachment");
        assert_eq!(safe_name("", "attachment"), "attachment");
        assert!(safe_name(&"é".repeat(200), "x").len() <= 120);
    }

    #[test]
    fn saves_inside_the_workspace_and_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let store = AttachmentStore::new(dir.path());
        let session = SessionId::new("email", "bob@example.org").unwrap();
        let first = store.save(&session, day(), "../notes.txt", b"one").unwrap();
        let second = store.save(&session, day(), "notes.txt", b"two").unwrap();
        let third = store.save(&session, day(), "notes.txt", b"three").unwrap();
        assert_eq!(
            first,
            dir.path()
                .join("attachments/email/bob@example.org/2026-11-22/notes.txt")
        );
        assert_eq!(second.file_name().unwrap(), "notes-1.txt");
        assert_eq!(third.file_name().unwrap(), "notes-2.txt");
        assert_eq!(std::fs::read(&first).unwrap(), b"one");
        assert_eq!(std::fs::read(&third).unwrap(), b"three");
    }
}
