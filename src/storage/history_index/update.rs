//! Incremental indexing: bringing the index up to date with the JSONL files.
//!
//! Each session file has a row with its identity (device, inode), its size and mtime at the last
//! update, the byte offset indexed so far (always the end of a complete line) and the last bytes
//! before that offset. An unchanged file costs one `stat`. A file that grew, with the same
//! identity and the same bytes before the offset, is read from the offset only. Anything else (a
//! shrunk, replaced or rewritten file) is re-indexed from scratch, and the rows of a deleted file
//! are dropped. A last line without its newline is left for the next update (it may be a write
//! in progress); unreadable complete lines are skipped, as the store's loader does.

use std::collections::HashMap;
use std::fs::{File, Metadata};
use std::io::{BufRead, BufReader, ErrorKind, Seek, SeekFrom};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use rusqlite::{Connection, Transaction, params};

use super::query::{ROLE_ASSISTANT, ROLE_USER};
use crate::core::message::{Message, Role};
use crate::storage::safe_id;

/// How many bytes before the indexed offset are kept to detect a rewritten file.
const TAIL_BYTES: u64 = 64;

/// A session file's indexing progress, as stored in `files`.
struct Progress {
    id: i64,
    dev: i64,
    ino: i64,
    stat_len: i64,
    mtime_ns: i64,
    offset: i64,
    tail: Vec<u8>,
    next_pos: i64,
}

/// A session file found on disk.
struct OnDisk {
    stem: String,
    path: PathBuf,
    dev: i64,
    ino: i64,
    len: i64,
    mtime_ns: i64,
}

impl OnDisk {
    fn new(stem: String, path: PathBuf, metadata: &Metadata) -> Self {
        Self {
            stem,
            path,
            dev: metadata.dev() as i64,
            ino: metadata.ino() as i64,
            len: metadata.len() as i64,
            mtime_ns: metadata.mtime().saturating_mul(1_000_000_000) + metadata.mtime_nsec(),
        }
    }
}

/// Updates the index from `sessions_dir`; returns the number of messages added.
pub(super) fn run(conn: &mut Connection, sessions_dir: &Path) -> Result<u64, rusqlite::Error> {
    let Some(files) = list(sessions_dir) else {
        return Ok(0);
    };
    let mut known = load_progress(conn)?;
    let unchanged = |file: &OnDisk, progress: &Progress| {
        (
            progress.dev,
            progress.ino,
            progress.stat_len,
            progress.mtime_ns,
        ) == (file.dev, file.ino, file.len, file.mtime_ns)
    };
    let pending: Vec<&OnDisk> = files
        .iter()
        .filter(|file| !known.get(&file.stem).is_some_and(|p| unchanged(file, p)))
        .collect();
    let on_disk: std::collections::HashSet<&str> = files.iter().map(|f| f.stem.as_str()).collect();
    let gone: Vec<i64> = known
        .iter()
        .filter(|(stem, _)| !on_disk.contains(stem.as_str()))
        .map(|(_, progress)| progress.id)
        .collect();
    if pending.is_empty() && gone.is_empty() {
        return Ok(0);
    }
    let tx = conn.transaction()?;
    for id in gone {
        forget(&tx, id)?;
        tx.execute("DELETE FROM files WHERE id = ?1", params![id])?;
    }
    let mut added = 0;
    for file in pending {
        added += index_file(&tx, file, known.remove(&file.stem))?;
    }
    tx.commit()?;
    Ok(added)
}

/// The `*.jsonl` files of `dir` (empty when it does not exist; `None` when it cannot be read).
fn list(dir: &Path) -> Option<Vec<OnDisk>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == ErrorKind::NotFound => return Some(Vec::new()),
        Err(error) => {
            tracing::warn!(path = %dir.display(), error = %error, "Cannot list session files; index not updated.");
            return None;
        }
    };
    let mut files = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(stem) = path
            .file_name()
            .and_then(|name| name.to_str())
            .and_then(|name| name.strip_suffix(".jsonl"))
        else {
            continue;
        };
        // Follows symlinks like the store does; skips what vanished meanwhile.
        match std::fs::metadata(&path) {
            Ok(metadata) if metadata.is_file() => {
                files.push(OnDisk::new(stem.to_owned(), path.clone(), &metadata));
            }
            _ => {}
        }
    }
    Some(files)
}

fn load_progress(conn: &Connection) -> Result<HashMap<String, Progress>, rusqlite::Error> {
    let mut statement = conn.prepare(
        "SELECT stem, id, dev, ino, stat_len, mtime_ns, offset, tail, next_pos FROM files",
    )?;
    let rows = statement.query_map([], |row| {
        Ok((
            row.get::<_, String>(0)?,
            Progress {
                id: row.get(1)?,
                dev: row.get(2)?,
                ino: row.get(3)?,
                stat_len: row.get(4)?,
                mtime_ns: row.get(5)?,
                offset: row.get(6)?,
                tail: row.get(7)?,
                next_pos: row.get(8)?,
            },
        ))
    })?;
    rows.collect()
}

/// Removes every indexed message of file `id`.
fn forget(tx: &Transaction<'_>, id: i64) -> Result<(), rusqlite::Error> {
    tx.execute(
        "DELETE FROM messages_fts WHERE rowid IN (SELECT id FROM messages WHERE file_id = ?1)",
        params![id],
    )?;
    tx.execute("DELETE FROM messages WHERE file_id = ?1", params![id])?;
    Ok(())
}

/// Whether `file` still starts with the bytes indexed so far (same identity, not shorter, and
/// the same last bytes before the offset).
fn is_append(file: &OnDisk, progress: &Progress, handle: &File) -> bool {
    if (progress.dev, progress.ino) != (file.dev, file.ino) || file.len < progress.offset {
        return false;
    }
    let mut tail = vec![0; progress.tail.len()];
    let start = progress.offset as u64 - tail.len() as u64;
    handle.read_exact_at(&mut tail, start).is_ok() && tail == progress.tail
}

/// Indexes what is new in `file`; returns the number of messages added.
fn index_file(
    tx: &Transaction<'_>,
    file: &OnDisk,
    progress: Option<Progress>,
) -> Result<u64, rusqlite::Error> {
    let handle = match File::open(&file.path) {
        Ok(handle) => handle,
        Err(error) => {
            tracing::warn!(path = %file.path.display(), error = %error, "Cannot read session file; not indexed.");
            return Ok(0);
        }
    };
    let (id, offset, mut pos) = match progress {
        Some(progress) if is_append(file, &progress, &handle) => {
            (progress.id, progress.offset, progress.next_pos)
        }
        Some(progress) => {
            tracing::info!(path = %file.path.display(), "Session file changed; re-indexing it.");
            forget(tx, progress.id)?;
            (progress.id, 0, 0)
        }
        None => {
            let session = safe_id::decode(&file.stem).unwrap_or_else(|| file.stem.clone());
            tx.execute(
                "INSERT INTO files (stem, session, dev, ino, stat_len, mtime_ns, offset, tail, next_pos)
                 VALUES (?1, ?2, 0, 0, 0, 0, 0, x'', 0)",
                params![file.stem, session],
            )?;
            (tx.last_insert_rowid(), 0, 0)
        }
    };
    let mut reader = BufReader::with_capacity(1 << 16, handle);
    let mut end = offset as u64;
    if reader.seek(SeekFrom::Start(end)).is_err() {
        return Ok(0);
    }
    let mut insert_message = tx.prepare_cached(
        "INSERT INTO messages (file_id, pos, role, ts, content) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?;
    let mut insert_text =
        tx.prepare_cached("INSERT INTO messages_fts (rowid, content) VALUES (?1, ?2)")?;
    let (mut added, mut skipped) = (0u64, 0u64);
    let mut line = Vec::with_capacity(1024);
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => break,
            Ok(_) if line.last() != Some(&b'\n') => break,
            Ok(n) => end += n as u64,
            Err(error) => {
                tracing::warn!(path = %file.path.display(), error = %error, "Read error; indexing resumes later.");
                break;
            }
        }
        let Ok(message) = serde_json::from_slice::<Message>(&line) else {
            skipped += u64::from(!line.iter().all(u8::is_ascii_whitespace));
            continue;
        };
        let role = match message.role {
            Role::User => ROLE_USER,
            Role::Assistant => ROLE_ASSISTANT,
            Role::System | Role::Tool => continue,
        };
        if message.content.trim().is_empty() {
            continue;
        }
        let ts = message.timestamp.timestamp_millis();
        insert_message.execute(params![id, pos, role, ts, message.content])?;
        insert_text.execute(params![tx.last_insert_rowid(), message.content])?;
        pos += 1;
        added += 1;
    }
    if skipped > 0 {
        tracing::warn!(path = %file.path.display(), skipped, "Skipped unreadable history lines while indexing.");
    }
    let tail_len = end.min(TAIL_BYTES);
    let mut tail = vec![0; tail_len as usize];
    if reader
        .get_ref()
        .read_exact_at(&mut tail, end - tail_len)
        .is_err()
    {
        tail.clear();
    }
    tx.execute(
        "UPDATE files SET dev = ?2, ino = ?3, stat_len = ?4, mtime_ns = ?5, offset = ?6, tail = ?7,
         next_pos = ?8 WHERE id = ?1",
        params![
            id,
            file.dev,
            file.ino,
            file.len,
            file.mtime_ns,
            end as i64,
            tail,
            pos
        ],
    )?;
    Ok(added)
}
