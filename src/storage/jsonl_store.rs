//! [`JsonlStore`]: session histories as append-only JSONL, with cursor and summary files.
//!
//! Layout under `$SQUIDBOT_HOME`: `sessions/<safe-id>.jsonl`, `sessions/<safe-id>.meta.json`,
//! `memory/<safe-id>/summary.md`. Appends are whole lines written with one `write` and made
//! durable with `fdatasync` before returning; if a crash left a torn last line, the next append
//! first ends it with a newline so the torn fragment stays an isolated, skippable line.
//! Loading seeks to the cursor's byte offset, so it reads only the unconsolidated tail.
//!
//! The gateway, `squidbot agent` and `squidbot import` may write one session at the same time
//! (the session mutex of `core` orders the turns of one process only). So every append, load
//! and consolidation commit holds an exclusive `flock` on the session's history file, which is
//! never replaced and so can carry the lock itself: the torn-line check and its append, and the
//! cursor's compare, summary and cursor writes, each happen as one step between processes.

use std::collections::HashSet;
use std::fs::{self, File};
use std::io::{BufRead, BufReader, ErrorKind, Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;

use super::cursor_file::{self, CursorFile, PendingCommit};
use super::line_append::{self, Durability};
use super::tail_cache::{Stamp, TailCache};
use super::{atomic, blocking, io_error, safe_id};
use crate::core::message::Message;
use crate::core::ports::store::{Cursor, HistoryStore, StoreError, StoredMessage, Tail};
use crate::core::session::SessionId;

/// Session histories, cursors and summaries in plain files.
#[derive(Debug, Clone)]
pub struct JsonlStore {
    sessions_dir: PathBuf,
    memory_dir: PathBuf,
    cache: std::sync::Arc<TailCache>,
    /// Sessions with lines this store appended unsynced since their last flush: a `sync` of
    /// any other session has nothing of ours to make durable and costs no `fdatasync`.
    unflushed: std::sync::Arc<std::sync::Mutex<HashSet<SessionId>>>,
}

/// The three files of one session.
#[derive(Debug, Clone)]
struct SessionPaths {
    history: PathBuf,
    cursor: PathBuf,
    summary: PathBuf,
}

impl JsonlStore {
    /// A store rooted at `home` (`$SQUIDBOT_HOME`).
    pub fn new(home: &Path) -> Self {
        Self {
            sessions_dir: home.join("sessions"),
            memory_dir: home.join("memory"),
            cache: std::sync::Arc::default(),
            unflushed: std::sync::Arc::default(),
        }
    }

    /// The JSONL file of a session (for tools and tests that read history directly).
    pub fn history_path(&self, session: &SessionId) -> PathBuf {
        let mut name = safe_id::encode(session);
        name.push_str(".jsonl");
        self.sessions_dir.join(name)
    }

    /// The directory holding every session's history.
    pub fn sessions_dir(&self) -> &Path {
        &self.sessions_dir
    }

    fn paths(&self, session: &SessionId) -> SessionPaths {
        let stem = safe_id::encode(session);
        SessionPaths {
            history: self.sessions_dir.join(format!("{stem}.jsonl")),
            cursor: self.sessions_dir.join(format!("{stem}.meta.json")),
            summary: self.memory_dir.join(&stem).join("summary.md"),
        }
    }
}

impl JsonlStore {
    /// Encodes `messages` as lines and appends them; returns each line's end offset.
    async fn write(
        &self,
        session: &SessionId,
        messages: &[Message],
        durability: Durability,
    ) -> Result<Vec<u64>, StoreError> {
        let path = self.history_path(session);
        let mut buffer = Vec::with_capacity(messages.len() * 256);
        let mut ends = Vec::with_capacity(messages.len());
        for message in messages {
            serde_json::to_writer(&mut buffer, message).map_err(|error| StoreError::Encode {
                path: path.display().to_string(),
                error,
            })?;
            buffer.push(b'\n');
            ends.push(buffer.len() as u64);
        }
        let line_end = self.cache.own_end(session);
        let landed =
            line_append::append(&self.sessions_dir, &path, buffer, durability, line_end).await?;
        let ends: Vec<u64> = ends.into_iter().map(|end| landed.start + end).collect();
        self.cache.appended(session, landed.before, messages, &ends);
        let mut unflushed = self.unflushed.lock().unwrap_or_else(|p| p.into_inner());
        // A file the append created was flushed at once (see `line_append`).
        if durability == Durability::Unsynced && landed.before > 0 {
            unflushed.insert(session.clone());
        } else {
            unflushed.remove(session);
        }
        Ok(ends)
    }
}

#[async_trait]
impl HistoryStore for JsonlStore {
    async fn append(
        &self,
        session: &SessionId,
        messages: &[Message],
    ) -> Result<Vec<u64>, StoreError> {
        self.write(session, messages, Durability::Synced).await
    }

    async fn append_unsynced(
        &self,
        session: &SessionId,
        messages: &[Message],
    ) -> Result<Vec<u64>, StoreError> {
        self.write(session, messages, Durability::Unsynced).await
    }

    async fn sync(&self, session: &SessionId) -> Result<(), StoreError> {
        let pending = self
            .unflushed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(session);
        if !pending {
            return Ok(());
        }
        let result = line_append::sync(&self.history_path(session)).await;
        if result.is_err() {
            // Still not durable: the next sync tries again.
            self.unflushed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(session.clone());
        }
        Ok(result?)
    }

    async fn load_tail(&self, session: &SessionId) -> Result<Tail, StoreError> {
        let paths = self.paths(session);
        // The three `statx` of the stamp run here, not on the blocking pool: they take
        // microseconds, the hop two thread switches (see `TailCache`).
        let before = Stamp::read(&paths.history, &paths.cursor, &paths.summary);
        if let Some(tail) = self.cache.get(session, &before) {
            return Ok(tail);
        }
        let id = session.clone();
        let cache = self.cache.clone();
        let tail = blocking("load", &paths.history.clone(), move || {
            let tail = load_tail(&id, &paths)?;
            // Cache only a tail read from files that did not change while it was read (a
            // repaired cursor file, or another process writing, shows as a changed stamp).
            if Stamp::read(&paths.history, &paths.cursor, &paths.summary) == before {
                cache.put(&id, before, tail.clone());
            }
            Ok(tail)
        })
        .await?;
        if tail.skipped_lines > 0 {
            tracing::warn!(
                session = %session,
                skipped = tail.skipped_lines,
                "Skipped unreadable history lines (a torn write after a crash?)."
            );
        }
        Ok(tail)
    }

    async fn commit_consolidation(
        &self,
        session: &SessionId,
        summary: &str,
        cursor: Cursor,
    ) -> Result<(), StoreError> {
        let paths = self.paths(session);
        let summary = summary.to_owned();
        let id = session.clone();
        let dir = self.sessions_dir.clone();
        self.cache.forget(session);
        let result = blocking("commit", &paths.cursor.clone(), move || {
            commit(&dir, &id, &paths, &summary, cursor)
        })
        .await;
        self.cache.forget(session);
        result
    }
}

fn read_optional(path: &Path) -> Result<String, StoreError> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(text),
        Err(error) if error.kind() == ErrorKind::NotFound => Ok(String::new()),
        Err(error) => Err(io_error("read", path, error)),
    }
}

fn read_cursor_file(path: &Path) -> Result<CursorFile, StoreError> {
    let text = read_optional(path)?;
    if text.trim().is_empty() {
        return Ok(CursorFile::default());
    }
    Ok(serde_json::from_str(&text).unwrap_or_else(|error| {
        tracing::warn!(path = %path.display(), error = %error, "Unreadable cursor file; starting from 0.");
        CursorFile::default()
    }))
}

fn write_cursor_file(path: &Path, file: &CursorFile) -> Result<(), StoreError> {
    let bytes = serde_json::to_vec(file).map_err(|error| StoreError::Encode {
        path: path.display().to_string(),
        error,
    })?;
    atomic::write(path, &bytes).map_err(|e| io_error("write", path, e))
}

fn load_tail(session: &SessionId, paths: &SessionPaths) -> Result<Tail, StoreError> {
    let mut file = match File::open(&paths.history) {
        Ok(file) => file,
        Err(error) if error.kind() == ErrorKind::NotFound => {
            return Ok(Tail {
                summary: read_optional(&paths.summary)?,
                ..Tail::default()
            });
        }
        Err(error) => return Err(io_error("open", &paths.history, error)),
    };
    // Cursor and summary are read as one state, and a repaired cursor written back, only while
    // no other process commits a consolidation.
    file.lock()
        .map_err(|e| io_error("lock", &paths.history, e))?;
    let summary = read_optional(&paths.summary)?;
    let (mut cursor_file, mut dirty) = read_cursor_file(&paths.cursor)?.recover(&summary);
    let len = file
        .metadata()
        .map_err(|e| io_error("stat", &paths.history, e))?
        .len();
    let valid = |offset: u64| -> bool {
        let mut before = [0u8];
        offset == 0
            || (offset <= len
                && file.read_exact_at(&mut before, offset - 1).is_ok()
                && before[0] == b'\n')
    };
    let offset = match cursor_file.offset.filter(|&o| valid(o)) {
        Some(offset) => offset,
        None if cursor_file.last_consolidated == 0 => 0,
        None => {
            let (found, offset) =
                scan_offset(&mut file, cursor_file.last_consolidated, &paths.history)?;
            if found < cursor_file.last_consolidated {
                tracing::warn!(session = %session, cursor = cursor_file.last_consolidated, messages = found, "Cursor points past the history; clamped.");
            }
            cursor_file.last_consolidated = found;
            cursor_file.offset = Some(offset);
            dirty = true;
            offset
        }
    };
    if dirty {
        write_cursor_file(
            &paths.cursor,
            &CursorFile {
                pending: None,
                ..cursor_file.clone()
            },
        )?;
    }
    file.seek(SeekFrom::Start(offset))
        .map_err(|e| io_error("seek", &paths.history, e))?;
    let (messages, skipped_lines) = read_messages(file, offset, &paths.history)?;
    // The cursor file is written when a consolidation commits (and, rarely, when a stale
    // cursor is repaired), so its time is the last consolidation's.
    let consolidated_at = (cursor_file.last_consolidated > 0)
        .then(|| fs::metadata(&paths.cursor).and_then(|m| m.modified()).ok())
        .flatten()
        .map(chrono::DateTime::<chrono::Utc>::from);
    Ok(Tail {
        cursor: Cursor {
            messages: cursor_file.last_consolidated,
            offset,
        },
        messages,
        summary,
        skipped_lines,
        consolidated_at,
    })
}

/// Reads messages from the current position; returns them and how many lines were unreadable.
fn read_messages(
    file: File,
    start: u64,
    path: &Path,
) -> Result<(Vec<StoredMessage>, usize), StoreError> {
    parse_history(BufReader::with_capacity(64 * 1024, file), start)
        .map_err(|e| io_error("read", path, e))
}

/// The rule by which a session file's lines become messages, applied to any byte source:
/// `reader` is positioned at byte `start` of a history file, and each returned message carries
/// the absolute offset just past its line. Blank lines are ignored; a line that is not a
/// readable [`Message`] is skipped and counted, and a last line without its newline (a write
/// torn by a crash) is counted as skipped and ends the read. Returns the messages and the number
/// of skipped lines; only an I/O error of `reader` fails.
///
/// Public because it is the single definition of what a history file means: the store uses it
/// on its files, and tools that read histories from elsewhere (a backup, an export, the fuzz
/// targets of `fuzz/`) get exactly the messages squidbot itself would load.
pub fn parse_history(
    mut reader: impl BufRead,
    start: u64,
) -> std::io::Result<(Vec<StoredMessage>, usize)> {
    let mut line = Vec::with_capacity(512);
    let mut position = start;
    let mut messages = Vec::new();
    let mut skipped = 0;
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line)?;
        if n == 0 {
            break;
        }
        position += n as u64;
        if line.last() != Some(&b'\n') {
            skipped += 1; // A torn last line: the crash happened mid-write.
            break;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Message>(&line) {
            Ok(message) => messages.push(StoredMessage {
                message: Arc::new(message),
                end_offset: position,
            }),
            Err(_) => skipped += 1,
        }
    }
    Ok((messages, skipped))
}

/// Finds the byte offset just past the `count`-th readable message (a one-time scan for cursor
/// files written without an offset). Returns how many messages were found and the offset.
fn scan_offset(file: &mut File, count: u64, path: &Path) -> Result<(u64, u64), StoreError> {
    file.seek(SeekFrom::Start(0))
        .map_err(|e| io_error("seek", path, e))?;
    let mut reader = BufReader::with_capacity(64 * 1024, Read::by_ref(file));
    let mut line = Vec::with_capacity(512);
    let (mut found, mut position, mut offset) = (0u64, 0u64, 0u64);
    while found < count {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| io_error("read", path, e))?;
        if n == 0 || line.last() != Some(&b'\n') {
            break;
        }
        position += n as u64;
        if serde_json::from_slice::<Message>(&line).is_ok() {
            found += 1;
            offset = position;
        }
    }
    Ok((found, offset))
}

fn commit(
    dir: &Path,
    session: &SessionId,
    paths: &SessionPaths,
    summary: &str,
    cursor: Cursor,
) -> Result<(), StoreError> {
    // Held until the end: the check below and the three writes are one step, so two processes
    // consolidating the same session cannot interleave them.
    let _history = line_append::lock(dir, &paths.history)?;
    let current = read_cursor_file(&paths.cursor)?;
    let (current, _) = current.recover(&read_optional(&paths.summary)?);
    if cursor.messages < current.last_consolidated {
        return Err(StoreError::BadCursor {
            session: session.to_string(),
            detail: format!(
                "{} is behind {}",
                cursor.messages, current.last_consolidated
            ),
        });
    }
    let pending = CursorFile {
        pending: Some(PendingCommit {
            last_consolidated: cursor.messages,
            offset: cursor.offset,
            summary_sha256: cursor_file::digest(summary),
        }),
        ..current
    };
    write_cursor_file(&paths.cursor, &pending)?;
    atomic::write(&paths.summary, summary.as_bytes())
        .map_err(|e| io_error("write", &paths.summary, e))?;
    write_cursor_file(&paths.cursor, &CursorFile::settled(cursor))
}
