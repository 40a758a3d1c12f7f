//! [`HistoryIndex`]: a full-text index over every session's history, for `search_history`.
//!
//! The index is a cache in `$SQUIDBOT_HOME/index/history.sqlite` (SQLite FTS5): the JSONL files
//! stay the only source of truth, and deleting the index loses nothing. [`HistoryIndex::update`]
//! brings it up to date from the files, reading only the lines appended since the last update
//! (one `stat` per session file when nothing changed); a file that shrank or was replaced is
//! re-indexed from scratch, and a missing or corrupt index file is rebuilt. Only user and
//! assistant text is indexed. [`HistoryIndex::search`] returns hits newest first, each with the
//! previous and next indexed message of the same session as context.
//!
//! One connection, guarded by a std mutex because every use is a short blocking call made from
//! `spawn_blocking` (never held across an await).

mod query;
mod update;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use chrono::{DateTime, Utc};
use rusqlite::{Connection, ErrorCode, OptionalExtension, params};

use crate::core::message::Role;

pub use query::fts_query;

/// Bumped whenever the schema changes; an index with another version is rebuilt.
const SCHEMA_VERSION: i64 = 1;

/// The most hits one search returns.
pub const MAX_RESULTS: usize = 50;

/// What can go wrong with the index.
#[derive(Debug, thiserror::Error)]
pub enum HistoryIndexError {
    /// An SQLite call failed.
    #[error("history index {path}: {source}")]
    Sqlite {
        /// The index file.
        path: String,
        /// The SQLite error.
        #[source]
        source: rusqlite::Error,
    },
    /// A file operation failed.
    #[error("history index: cannot {op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file or directory.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
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
    /// The matching message.
    pub message: IndexedMessage,
    /// The indexed message just before it in the same session, if any.
    pub before: Option<IndexedMessage>,
    /// The indexed message just after it in the same session, if any.
    pub after: Option<IndexedMessage>,
}

/// The full-text index over all session histories.
#[derive(Debug)]
pub struct HistoryIndex {
    sessions_dir: PathBuf,
    db_path: PathBuf,
    /// std mutex: held only inside blocking calls, never across an await.
    conn: Mutex<Connection>,
}

impl HistoryIndex {
    /// Opens (or creates, or rebuilds when corrupt or outdated) the index of `home`
    /// (`$SQUIDBOT_HOME`). Does not index anything yet: call [`HistoryIndex::update`].
    pub fn open(home: &Path) -> Result<Self, HistoryIndexError> {
        let dir = home.join("index");
        std::fs::create_dir_all(&dir).map_err(|source| HistoryIndexError::Io {
            op: "create",
            path: dir.display().to_string(),
            source,
        })?;
        let db_path = dir.join("history.sqlite");
        let conn = open_or_rebuild(&db_path)?;
        Ok(Self {
            sessions_dir: home.join("sessions"),
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
        match update::run(&mut conn, &self.sessions_dir) {
            Err(error) if is_corrupt(&error) => {
                tracing::warn!(error = %error, "History index corrupt; rebuilding.");
                *conn = recreate(&self.db_path)?;
                update::run(&mut conn, &self.sessions_dir).map_err(|e| self.sqlite(e))
            }
            other => other.map_err(|e| self.sqlite(e)),
        }
    }

    /// The newest `max` (clamped to 1..=50) messages matching every word of `query`, newest
    /// first; with `days > 0`, only messages from the last `days` days before `now`.
    ///
    /// Words match case-insensitively as prefixes; `"quoted text"` matches as a phrase. No
    /// character of `query` has a special meaning to the index. Does not update the index.
    pub fn search(
        &self,
        query: &str,
        days: u32,
        max: usize,
        now: DateTime<Utc>,
    ) -> Result<Vec<Hit>, HistoryIndexError> {
        let Some(fts) = fts_query(query) else {
            return Ok(Vec::new());
        };
        let since = if days == 0 {
            i64::MIN
        } else {
            (now - chrono::Duration::days(i64::from(days))).timestamp_millis()
        };
        let max = max.clamp(1, MAX_RESULTS);
        let conn = self.lock();
        query::search(&conn, &fts, since, max).map_err(|e| self.sqlite(e))
    }

    /// [`HistoryIndex::update`] then [`HistoryIndex::search`], off the async runtime.
    pub async fn update_and_search(
        self: &std::sync::Arc<Self>,
        query: String,
        days: u32,
        max: usize,
        now: DateTime<Utc>,
    ) -> Result<Vec<Hit>, HistoryIndexError> {
        let index = self.clone();
        tokio::task::spawn_blocking(move || {
            index.update()?;
            index.search(&query, days, max, now)
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
            source,
        }
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
    let sqlite = |source| HistoryIndexError::Sqlite {
        path: path.display().to_string(),
        source,
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
                    source,
                });
            }
        }
    }
    let sqlite = |source| HistoryIndexError::Sqlite {
        path: path.display().to_string(),
        source,
    };
    try_open(path)
        .map_err(sqlite)?
        .ok_or_else(|| sqlite(rusqlite::Error::InvalidQuery))
}

/// The tables: one row per session file with its indexing progress, one per indexed message,
/// and a contentless FTS5 table over the message text (rowid = message id).
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
    next_pos INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY,
    file_id INTEGER NOT NULL,
    pos INTEGER NOT NULL,
    role INTEGER NOT NULL,
    ts INTEGER NOT NULL,
    content TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS messages_by_file ON messages (file_id, pos);
CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(
    content, content = '', contentless_delete = 1, tokenize = 'unicode61 remove_diacritics 2'
);
";
