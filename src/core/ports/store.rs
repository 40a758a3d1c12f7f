//! **API Boundary.** The storage ports: session history with its consolidation cursor and
//! summary, and the global memory document.
//!
//! History is append-only. The cursor (`last_consolidated`, a message count) comes with the byte
//! offset where the unconsolidated tail starts, so loading a turn's context reads only the tail.
//! Committing a consolidation writes the summary before the cursor, and must be crash-safe:
//! after a crash at any point, each message is covered by the summary at most once.

use std::sync::Arc;

use async_trait::async_trait;

use crate::core::message::Message;
use crate::core::session::SessionId;

/// How far a session has been summarized.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cursor {
    /// Number of messages covered by the summary (`last_consolidated`).
    pub messages: u64,
    /// Byte offset in the JSONL file where message number `messages` starts.
    pub offset: u64,
}

/// A stored message and where its line ends in the file.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredMessage {
    /// The record, shared: a cached tail, the turn's tail and the prompt built from it all
    /// point at one copy, so neither loading a cached tail nor building a prompt copies text.
    pub message: Arc<Message>,
    /// Byte offset just past its line (the offset of the next message).
    pub end_offset: u64,
}

/// The unconsolidated tail of a session: everything a turn's prompt needs from history.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tail {
    /// Where the tail starts.
    pub cursor: Cursor,
    /// Messages after the cursor, oldest first.
    pub messages: Vec<StoredMessage>,
    /// The session's summary (summary.md), possibly empty.
    pub summary: String,
    /// Lines after the cursor that could not be read (a torn write after a crash) and were
    /// skipped.
    pub skipped_lines: usize,
    /// When the session was last consolidated (its cursor last moved), if ever: `/status`
    /// shows it.
    pub consolidated_at: Option<chrono::DateTime<chrono::Utc>>,
}

impl Tail {
    /// Total messages in the session (`len(history)`).
    pub fn total(&self) -> u64 {
        self.cursor.messages + self.messages.len() as u64
    }

    /// The cursor that would result from consolidating the first `n` tail messages.
    pub fn cursor_after(&self, n: usize) -> Cursor {
        match n.checked_sub(1).and_then(|last| self.messages.get(last)) {
            Some(last) => Cursor {
                messages: self.cursor.messages + n as u64,
                offset: last.end_offset,
            },
            None => self.cursor,
        }
    }
}

/// A storage failure, with the path and operation that failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Reading or writing a file failed.
    #[error("{op} {path}: {error}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file.
        path: String,
        /// The cause.
        error: std::io::Error,
    },
    /// A record could not be encoded (should not happen for valid messages).
    #[error("encoding a record for {path}: {error}")]
    Encode {
        /// The file.
        path: String,
        /// The cause.
        error: serde_json::Error,
    },
    /// A cursor update would move backwards or past the end of the history.
    #[error("refused cursor update for {session}: {detail}")]
    BadCursor {
        /// The session.
        session: String,
        /// Why.
        detail: String,
    },
}

/// Session histories, cursors and summaries.
///
/// Callers hold the session's mutex (see `SessionLocks`) around every call for that session;
/// implementations may therefore assume one writer per session.
#[async_trait]
pub trait HistoryStore: Send + Sync {
    /// Appends messages as whole lines and makes them durable, with every line appended to the
    /// session before them; returns each line's end offset.
    async fn append(
        &self,
        session: &SessionId,
        messages: &[Message],
    ) -> Result<Vec<u64>, StoreError>;

    /// Appends messages as whole lines that every reader sees at once and that outlive a crash
    /// of this process, but not yet one of the machine: the session's next [`append`] or
    /// [`sync`] makes them durable. For a message whose only acknowledgement is the turn's
    /// answer, which is appended durably before it is sent: one flush to the disk per turn,
    /// not two. Returns each line's end offset.
    ///
    /// [`append`]: HistoryStore::append
    /// [`sync`]: HistoryStore::sync
    async fn append_unsynced(
        &self,
        session: &SessionId,
        messages: &[Message],
    ) -> Result<Vec<u64>, StoreError>;

    /// Makes every line this store appended to the session so far durable (nothing to do, and
    /// no flush, when its appends were all synced).
    async fn sync(&self, session: &SessionId) -> Result<(), StoreError>;

    /// Loads the cursor, the summary and the messages after the cursor. Cost is proportional
    /// to the tail, not to the whole history. Unreadable lines are skipped with a warning.
    async fn load_tail(&self, session: &SessionId) -> Result<Tail, StoreError>;

    /// Records a consolidation: the new summary text first, then the new cursor, so that a
    /// crash never leaves a cursor ahead of its summary nor a summary counted twice.
    async fn commit_consolidation(
        &self,
        session: &SessionId,
        summary: &str,
        cursor: Cursor,
    ) -> Result<(), StoreError>;
}

/// The global memory document (MEMORY.md).
#[async_trait]
pub trait MemoryStore: Send + Sync {
    /// The current document, empty when none exists.
    async fn load(&self) -> Result<String, StoreError>;

    /// Replaces the document atomically, keeping the previous version; returns the version it
    /// replaced (`None` when there was none), read in the same step as the write, so the agent
    /// learns what it overwrote. Writes are serialized, also between processes.
    async fn replace(&self, content: &str) -> Result<Option<String>, StoreError>;
}
