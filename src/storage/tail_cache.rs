//! [`TailCache`]: the last loaded unconsolidated tail of recently active sessions, so a turn
//! does not re-read and re-parse its session's tail from disk.
//!
//! An entry is valid only while the session's files are exactly as they were when it was
//! filled, checked by a [`Stamp`] of three `stat`s: the history's length, and the inode, size
//! and modification time of the cursor file and of summary.md (atomic writes replace the file,
//! so a new inode shows a rewrite even within one timestamp tick). Appends made through this
//! store extend the entry in place; any other change, including one by another process, makes
//! the stamp differ and the tail is read from disk again. The cache holds at most
//! [`CAPACITY`] sessions, dropping the least recently used. The stamp is read on the async
//! caller's thread: three `statx` of local files cost less than the two thread switches of a
//! hop to the blocking pool, which a turn that hits the cache then never makes.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::core::message::Message;
use crate::core::ports::store::{StoredMessage, Tail};
use crate::core::session::SessionId;

/// Sessions kept in the cache.
pub const CAPACITY: usize = 256;

/// The identity of a file's current content, as far as `stat` can tell.
type FileStamp = Option<(u64, u64, i64, i64)>;

/// The state of a session's three files when a tail was cached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    history_len: u64,
    cursor: FileStamp,
    summary: FileStamp,
}

fn file_stamp(path: &Path) -> FileStamp {
    std::fs::metadata(path)
        .ok()
        .map(|m| (m.ino(), m.size(), m.mtime(), m.mtime_nsec()))
}

impl Stamp {
    /// Reads the stamp of a session's files.
    pub fn read(history: &Path, cursor: &Path, summary: &Path) -> Self {
        Self {
            history_len: std::fs::metadata(history).map(|m| m.len()).unwrap_or(0),
            cursor: file_stamp(cursor),
            summary: file_stamp(summary),
        }
    }
}

#[derive(Debug)]
struct Entry {
    stamp: Stamp,
    tail: Tail,
    used: u64,
    /// Whether the history's length in `stamp` is where a line this store appended ends (so
    /// its last byte is that line's newline), not a length read from the disk, which may end
    /// in a torn line.
    own_end: bool,
}

/// Recently loaded tails by session.
#[derive(Debug, Default)]
pub struct TailCache {
    /// A std mutex: held to look up, clone or update one entry, never across an await.
    entries: Mutex<(HashMap<SessionId, Entry>, u64)>,
}

impl TailCache {
    /// The cached tail of `session`, if its files still match `stamp`.
    pub fn get(&self, session: &SessionId, stamp: &Stamp) -> Option<Tail> {
        let mut guard = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let (entries, clock) = &mut *guard;
        *clock += 1;
        let entry = entries.get_mut(session)?;
        if entry.stamp != *stamp {
            entries.remove(session);
            return None;
        }
        entry.used = *clock;
        // Cheap: the messages are shared, so this copies pointers and offsets, not text.
        Some(entry.tail.clone())
    }

    /// Caches `tail`, loaded when the files matched `stamp`.
    pub fn put(&self, session: &SessionId, stamp: Stamp, tail: Tail) {
        let mut guard = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let (entries, clock) = &mut *guard;
        *clock += 1;
        if entries.len() >= CAPACITY && !entries.contains_key(session) {
            let oldest = entries
                .iter()
                .min_by_key(|(_, e)| e.used)
                .map(|(s, _)| s.clone());
            if let Some(oldest) = oldest {
                entries.remove(&oldest);
            }
        }
        entries.insert(
            session.clone(),
            Entry {
                stamp,
                tail,
                used: *clock,
                own_end: false,
            },
        );
    }

    /// Extends the cached tail with `messages` just appended (their lines ending at `ends`), if
    /// the entry described the file as it was before the append (`old_len`); otherwise drops it.
    pub fn appended(&self, session: &SessionId, old_len: u64, messages: &[Message], ends: &[u64]) {
        let mut guard = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let (entries, _) = &mut *guard;
        let Some(entry) = entries.get_mut(session) else {
            return;
        };
        match ends.last() {
            Some(&end) if entry.stamp.history_len == old_len => {
                entry.stamp.history_len = end;
                entry.own_end = true;
                entry.tail.messages.extend(messages.iter().zip(ends).map(
                    |(message, &end_offset)| StoredMessage {
                        message: Arc::new(message.clone()),
                        end_offset,
                    },
                ));
            }
            _ => {
                entries.remove(session);
            }
        }
    }

    /// Where the last line this store appended to `session`'s history ends, while the cache
    /// still describes the file: if the file has that length at the next append, nothing was
    /// written after that line, and its newline need not be read back.
    pub fn own_end(&self, session: &SessionId) -> Option<u64> {
        let guard = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let entry = guard.0.get(session)?;
        entry.own_end.then_some(entry.stamp.history_len)
    }

    /// Forgets `session` (after a consolidation commit rewrote its cursor and summary).
    pub fn forget(&self, session: &SessionId) {
        let mut guard = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        guard.0.remove(session);
    }

    /// Sessions currently cached.
    pub fn len(&self) -> usize {
        self.entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .0
            .len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use chrono::DateTime;

    use crate::core::message::{Message, Role};
    use crate::core::ports::store::{Cursor, HistoryStore};
    use crate::core::session::SessionId;
    use crate::storage::JsonlStore;

    fn message(text: &str) -> Message {
        Message::new(
            Role::User,
            text,
            DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z").unwrap(),
        )
    }

    fn texts(tail: &crate::core::ports::store::Tail) -> Vec<String> {
        tail.messages
            .iter()
            .map(|m| m.message.content.clone())
            .collect()
    }

    /// The cached view must always equal what a fresh store reads from disk.
    async fn assert_coherent(store: &JsonlStore, home: &std::path::Path, session: &SessionId) {
        let cached = store.load_tail(session).await.unwrap();
        let fresh = JsonlStore::new(home).load_tail(session).await.unwrap();
        assert_eq!(cached, fresh);
    }

    #[tokio::test]
    async fn own_appends_extend_the_cached_tail() {
        let dir = tempfile::tempdir().unwrap();
        let store = JsonlStore::new(dir.path());
        let session = SessionId::new("test", "cache").unwrap();
        store.append(&session, &[message("a")]).await.unwrap();
        store.load_tail(&session).await.unwrap();
        store
            .append(&session, &[message("b"), message("c")])
            .await
            .unwrap();
        assert_eq!(
            texts(&store.load_tail(&session).await.unwrap()),
            ["a", "b", "c"]
        );
        assert_coherent(&store, dir.path(), &session).await;
    }

    #[tokio::test]
    async fn changes_by_another_process_are_seen() {
        let dir = tempfile::tempdir().unwrap();
        let store = JsonlStore::new(dir.path());
        let other = JsonlStore::new(dir.path());
        let session = SessionId::new("test", "shared").unwrap();
        store
            .append(&session, &[message("a"), message("b"), message("c")])
            .await
            .unwrap();
        let tail = store.load_tail(&session).await.unwrap();

        // Another writer appends.
        other.append(&session, &[message("d")]).await.unwrap();
        assert_eq!(
            texts(&store.load_tail(&session).await.unwrap()),
            ["a", "b", "c", "d"]
        );

        // Another writer consolidates (cursor and summary rewritten).
        other
            .commit_consolidation(&session, "summary", tail.cursor_after(2))
            .await
            .unwrap();
        let after = store.load_tail(&session).await.unwrap();
        assert_eq!(texts(&after), ["c", "d"]);
        assert_eq!(after.summary, "summary");
        assert_eq!(
            after.cursor,
            Cursor {
                messages: 2,
                offset: tail.messages[1].end_offset
            }
        );

        // A line written by hand.
        let path = store.history_path(&session);
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        writeln!(file, "{}", serde_json::to_string(&message("e")).unwrap()).unwrap();
        assert_eq!(
            texts(&store.load_tail(&session).await.unwrap()),
            ["c", "d", "e"]
        );
        assert_coherent(&store, dir.path(), &session).await;
    }
}
