//! [`HistoryIndex`]: a ranked full-text index over every session's history and summary, for
//! `search_history`.
//!
//! The index is a cache in `$SQUIDBOT_HOME/index/history.sqlite` (SQLite FTS5): the JSONL files
//! and `summary.md` files stay the only source of truth, and deleting the index loses nothing.
//! [`HistoryIndex::update`] brings it up to date from the files, reading only the lines
//! appended since the last update (two `stat`s per session when nothing changed); a file that
//! shrank or was replaced is re-indexed from scratch, a changed summary replaces the old one,
//! and a missing, corrupt or older-schema index file is rebuilt. User and assistant text and
//! each session's summary are indexed, as analyzed terms ([`analyze`]: English stems, any
//! language's words). [`HistoryIndex::search`] ranks by relevance ([`rank`] says how), each
//! message hit with the previous and next message of its session as context.
//!
//! One connection, guarded by a std mutex because every use is a short blocking call made from
//! `spawn_blocking` (never held across an await).

pub mod analyze;
pub mod dates;
mod rank;
mod update;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use chrono::{DateTime, Utc};
use rusqlite::{Connection, ErrorCode, OptionalExtension, params};

use crate::core::message::Role;
use crate::core::session::SessionId;
use crate::storage::safe_id;

/// Bumped whenever the schema changes; an index with another version is rebuilt.
const SCHEMA_VERSION: i64 = 2;

/// The most hits one search returns.
pub const MAX_RESULTS: usize = 50;

/// What can go wrong with the index.
#[derive(Debug, thiserror::Error)]
pub enum HistoryIndexError {
    /// An SQLite call failed.
    #[error("history index {path}: {error}")]
    Sqlite {
        /// The index file.
        path: String,
        /// The SQLite error.
        error: rusqlite::Error,
    },
    /// A file operation failed.
    #[error("history index: cannot {op} {path}: {error}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file or directory.
        path: String,
        /// The I/O error.
        error: std::io::Error,
    },
    /// The background task running the index work panicked or was cancelled.
    #[error("history index task failed: {0}")]
    Task(String),
}

/// One message as stored in the index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexedMessage {
    /// `User` or `Assistant` (nothing else is indexed).
    pub role: Role,
    /// The message text.
    pub content: String,
    /// When it was written, in UTC.
    pub timestamp: DateTime<Utc>,
}

/// One search result with its context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    /// The session id (the file stem when the id cannot be recovered from a hashed name).
    pub session: String,
    /// Whether the hit is the session's summary (`message.role` is then `System` and its
    /// timestamp the time the summary was last written), not one message.
    pub summary: bool,
    /// The matching message, or the summary.
    pub message: IndexedMessage,
    /// The indexed message just before it in the same session, if any.
    pub before: Option<IndexedMessage>,
    /// The indexed message just after it in the same session, if any.
    pub after: Option<IndexedMessage>,
}

/// What to search for, and where.
#[derive(Debug, Clone, Default)]
pub struct SearchRequest {
    /// Words or a question, as the person or the model would put it.
    pub query: String,
    /// At most this many hits (clamped to `1..=`[`MAX_RESULTS`]).
    pub max: usize,
    /// Only messages at or after this time.
    pub since: Option<DateTime<Utc>>,
    /// Only messages before this time.
    pub until: Option<DateTime<Utc>>,
    /// Only this session.
    pub session: Option<SessionId>,
    /// The session asking, and where its unconsolidated tail starts (a byte offset in its
    /// history): those messages and its summary are already in the asker's prompt, so they are
    /// never hits.
    pub asking: Option<(SessionId, u64)>,
}

/// The full-text index over all session histories.
#[derive(Debug)]
pub struct HistoryIndex {
    sessions_dir: PathBuf,
    memory_dir: PathBuf,
    db_path: PathBuf,
    /// std mutex: held only inside blocking calls, never across an await.
    conn: Mutex<Connection>,
}

impl HistoryIndex {
    /// Opens (or creates, or rebuilds when corrupt or outdated) the index of `home`
    /// (`$SQUIDBOT_HOME`). Does not index anything yet: call [`HistoryIndex::update`].
    pub fn open(home: &Path) -> Result<Self, HistoryIndexError> {
        let dir = home.join("index");
        std::fs::create_dir_all(&dir).map_err(|error| HistoryIndexError::Io {
            op: "create",
            path: dir.display().to_string(),
            error,
        })?;
        let db_path = dir.join("history.sqlite");
        let conn = open_or_rebuild(&db_path)?;
        Ok(Self {
            sessions_dir: home.join("sessions"),
            memory_dir: home.join("memory"),
            db_path,
            conn: Mutex::new(conn),
        })
    }

    /// The index file.
    pub fn path(&self) -> &Path {
        &self.db_path
    }

    /// Brings the index up to date with the JSONL files; returns how many messages were added.
    ///
    /// A deleted index file is recreated; a corrupt one is rebuilt from scratch.
    pub fn update(&self) -> Result<u64, HistoryIndexError> {
        let mut conn = self.lock();
        if !self.db_path.exists() {
            tracing::warn!(path = %self.db_path.display(), "History index missing; rebuilding.");
            *conn = open_or_rebuild(&self.db_path)?;
        }
        let added = match update::run(&mut conn, &self.sessions_dir, &self.memory_dir) {
            Err(error) if is_corrupt(&error) => {
                tracing::warn!(error = %error, "History index corrupt; rebuilding.");
                *conn = recreate(&self.db_path)?;
                update::run(&mut conn, &self.sessions_dir, &self.memory_dir)
                    .map_err(|e| self.sqlite(e))?
            }
            other => other.map_err(|e| self.sqlite(e))?,
        };
        if added >= BULK_UPDATE {
            release_memory(&conn);
        }
        Ok(added)
    }

    /// The best hits for `request`, best first (see [`rank`]). No character of the query has
    /// a special meaning to the index. Does not update the index.
    pub fn search(&self, request: &SearchRequest) -> Result<Vec<Hit>, HistoryIndexError> {
        let conn = self.lock();
        let file = |session: &SessionId| -> Result<i64, rusqlite::Error> {
            Ok(conn
                .query_row(
                    "SELECT id FROM files WHERE stem = ?1",
                    params![safe_id::encode(session)],
                    |row| row.get(0),
                )
                .optional()?
                .unwrap_or(0))
        };
        let only_file = match &request.session {
            // 0 matches no file: an unknown session has nothing to find.
            Some(session) => file(session).map_err(|e| self.sqlite(e))?,
            None => -1,
        };
        let (asking_file, tail_offset) = match &request.asking {
            Some((session, offset)) => (
                file(session).map_err(|e| self.sqlite(e))?,
                i64::try_from(*offset).unwrap_or(i64::MAX),
            ),
            None => (-1, i64::MAX),
        };
        let scope = rank::Scope {
            since: request.since.map_or(i64::MIN, |t| t.timestamp_millis()),
            until: request.until.map_or(i64::MAX, |t| t.timestamp_millis()),
            only_file,
            asking_file,
            tail_offset,
        };
        let max = request.max.clamp(1, MAX_RESULTS);
        rank::search(&conn, &request.query, scope, max).map_err(|e| self.sqlite(e))
    }

    /// [`HistoryIndex::update`] then [`HistoryIndex::search`], off the async runtime.
    pub async fn update_and_search(
        self: &std::sync::Arc<Self>,
        request: SearchRequest,
    ) -> Result<Vec<Hit>, HistoryIndexError> {
        let index = self.clone();
        tokio::task::spawn_blocking(move || {
            index.update()?;
            index.search(&request)
        })
        .await
        .map_err(|join| HistoryIndexError::Task(join.to_string()))?
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock leaves at worst a rolled-back transaction.
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn sqlite(&self, source: rusqlite::Error) -> HistoryIndexError {
        HistoryIndexError::Sqlite {
            path: self.db_path.display().to_string(),
            error: source,
        }
    }
}

/// An update that indexed at least this many messages (a rebuild, a first start, an import)
/// gives back the memory it used: a long-running gateway should not keep a bulk load's pages.
const BULK_UPDATE: u64 = 1_000;

/// Returns the memory a bulk update used: SQLite's page cache of this connection, then the
/// allocator's free pages (glibc keeps freed heap otherwise, and the idle gateway's RSS with it).
fn release_memory(conn: &Connection) {
    if let Err(error) = conn.execute_batch("PRAGMA shrink_memory;") {
        tracing::debug!(error = %error, "History index: shrink_memory failed.");
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free heap pages to the kernel; it takes no pointers and
    // is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Whether an SQLite error means the file is not a usable database.
fn is_corrupt(error: &rusqlite::Error) -> bool {
    matches!(
        error.sqlite_error_code(),
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase)
    )
}

/// Opens the index, rebuilding it when it is corrupt or has another schema version.
fn open_or_rebuild(path: &Path) -> Result<Connection, HistoryIndexError> {
    let sqlite = |error| HistoryIndexError::Sqlite {
        path: path.display().to_string(),
        error,
    };
    match try_open(path) {
        Ok(Some(conn)) => Ok(conn),
        Ok(None) => {
            tracing::info!(path = %path.display(), "History index outdated; rebuilding.");
            recreate(path)
        }
        Err(error) if is_corrupt(&error) => {
            tracing::warn!(path = %path.display(), error = %error, "History index corrupt; rebuilding.");
            recreate(path)
        }
        Err(error) => Err(sqlite(error)),
    }
}

/// Opens and initializes the index; `None` when it holds another schema version.
fn try_open(path: &Path) -> Result<Option<Connection>, rusqlite::Error> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    // A cache: losing the last transactions on power loss only means re-indexing them.
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);",
    )?;
    let version: Option<i64> = conn
        .query_row("SELECT value FROM meta WHERE key = 'version'", [], |row| {
            row.get(0)
        })
        .optional()?;
    match version {
        Some(SCHEMA_VERSION) => Ok(Some(conn)),
        Some(_) => Ok(None),
        None => {
            conn.execute_batch(SCHEMA)?;
            conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('version', ?1)",
                params![SCHEMA_VERSION],
            )?;
            Ok(Some(conn))
        }
    }
}

/// Deletes the index file (and its WAL files) and creates an empty index.
fn recreate(path: &Path) -> Result<Connection, HistoryIndexError> {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let file = PathBuf::from(format!("{}{suffix}", path.display()));
        match std::fs::remove_file(&file) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(HistoryIndexError::Io {
                    op: "remove",
                    path: file.display().to_string(),
                    error: source,
                });
            }
        }
    }
    let sqlite = |error| HistoryIndexError::Sqlite {
        path: path.display().to_string(),
        error,
    };
    try_open(path)
        .map_err(sqlite)?
        .ok_or_else(|| sqlite(rusqlite::Error::InvalidQuery))
}

/// The stored code of [`Role::User`].
const ROLE_USER: i64 = 0;
/// The stored code of [`Role::Assistant`].
const ROLE_ASSISTANT: i64 = 1;
/// The stored role of a session's summary (one per session, at position -1).
const ROLE_SUMMARY: i64 = 2;

/// The tables: one row per session file with its indexing progress (history and summary), one
/// per indexed message or summary (with the byte offset of its line, so the asking session's
/// tail can be left out, and its length in terms for BM25), a contentless FTS5 table over the
/// analyzed text (rowid = message id) and its vocabulary (document frequencies). `meta` keeps
/// the schema version and the document and term totals.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS files (
    id INTEGER PRIMARY KEY,
    stem TEXT NOT NULL UNIQUE,
    session TEXT NOT NULL,
    dev INTEGER NOT NULL,
    ino INTEGER NOT NULL,
    stat_len INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    offset INTEGER NOT NULL,
    tail BLOB NOT NULL,
    next_pos INTEGER NOT NULL,
    summary_len INTEGER NOT NULL,
    summary_mtime_ns INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY,
    file_id INTEGER NOT NULL,
    pos INTEGER NOT NULL,
    role INTEGER NOT NULL,
    ts INTEGER NOT NULL,
    offset INTEGER NOT NULL,
    len INTEGER NOT NULL,
    content TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS messages_by_file ON messages (file_id, pos);
CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(
    terms, content = '', contentless_delete = 1, tokenize = 'unicode61 remove_diacritics 2'
);
CREATE VIRTUAL TABLE IF NOT EXISTS messages_vocab USING fts5vocab(messages_fts, 'row');
INSERT OR IGNORE INTO meta (key, value) VALUES ('docs', 0), ('tokens', 0);
";
