//! Incremental indexing: bringing the index up to date with the JSONL files.
//!
//! Each session file has a row with its identity (device, inode), its size and mtime at the last
//! update, the byte offset indexed so far (always the end of a complete line) and the last bytes
//! before that offset. An unchanged file costs one `stat`. A file that grew, with the same
//! identity and the same bytes before the offset, is read from the offset only. Anything else (a
//! shrunk, replaced or rewritten file) is re-indexed from scratch, and the rows of a deleted file
//! are dropped. A last line without its newline is left for the next update (it may be a write
//! in progress); unreadable complete lines are skipped, as the store's loader does.
//!
//! A session's `summary.md` (under `memory/<stem>/`) is one more document of its file's row:
//! when its size or mtime changes it replaces the one indexed. The `meta` totals of documents
//! and terms, which BM25 needs, move with every insert and delete in the same transaction.

use std::collections::HashMap;
use std::fs::{File, Metadata};
use std::io::{BufRead, BufReader, ErrorKind, Seek, SeekFrom};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use rusqlite::{Connection, Transaction, params};

use super::{ROLE_ASSISTANT, ROLE_SUMMARY, ROLE_USER, analyze};
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
    summary: Stamp,
}

/// A summary file's size and mtime; `(-1, 0)` when there is none.
type Stamp = (i64, i64);

/// The stamp of `path`.
fn stamp(path: &Path) -> Stamp {
    match std::fs::metadata(path) {
        Ok(metadata) if metadata.is_file() => (metadata.len() as i64, mtime_ns(&metadata)),
        _ => (-1, 0),
    }
}

fn mtime_ns(metadata: &Metadata) -> i64 {
    metadata.mtime().saturating_mul(1_000_000_000) + metadata.mtime_nsec()
}

/// A session file found on disk.
struct OnDisk {
    stem: String,
    path: PathBuf,
    dev: i64,
    ino: i64,
    len: i64,
    mtime_ns: i64,
    summary_path: PathBuf,
    summary: Stamp,
}

impl OnDisk {
    fn new(stem: String, path: PathBuf, metadata: &Metadata, memory_dir: &Path) -> Self {
        let summary_path = memory_dir.join(&stem).join("summary.md");
        Self {
            summary: stamp(&summary_path),
            summary_path,
            stem,
            path,
            dev: metadata.dev() as i64,
            ino: metadata.ino() as i64,
            len: metadata.len() as i64,
            mtime_ns: mtime_ns(metadata),
        }
    }
}

/// Updates the index from `sessions_dir`; returns the number of messages added.
pub(super) fn run(
    conn: &mut Connection,
    sessions_dir: &Path,
    memory_dir: &Path,
) -> Result<u64, rusqlite::Error> {
    let Some(files) = list(sessions_dir, memory_dir) else {
        return Ok(0);
    };
    let mut known = load_progress(conn)?;
    let unchanged = |file: &OnDisk, progress: &Progress| {
        (
            progress.dev,
            progress.ino,
            progress.stat_len,
            progress.mtime_ns,
            progress.summary,
        ) == (file.dev, file.ino, file.len, file.mtime_ns, file.summary)
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
fn list(dir: &Path, memory_dir: &Path) -> Option<Vec<OnDisk>> {
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
                files.push(OnDisk::new(
                    stem.to_owned(),
                    path.clone(),
                    &metadata,
                    memory_dir,
                ));
            }
            _ => {}
        }
    }
    Some(files)
}

fn load_progress(conn: &Connection) -> Result<HashMap<String, Progress>, rusqlite::Error> {
    let mut statement = conn.prepare(
        "SELECT stem, id, dev, ino, stat_len, mtime_ns, offset, tail, next_pos, summary_len,
         summary_mtime_ns FROM files",
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
                summary: (row.get(9)?, row.get(10)?),
            },
        ))
    })?;
    rows.collect()
}

/// Removes every indexed message and the summary of file `id`.
fn forget(tx: &Transaction<'_>, id: i64) -> Result<(), rusqlite::Error> {
    remove(tx, "file_id = ?1", id)
}

/// Removes the messages `filter` (over `messages`, with `?1` = `value`) selects, keeping the
/// totals true.
fn remove(tx: &Transaction<'_>, filter: &str, value: i64) -> Result<(), rusqlite::Error> {
    let (docs, tokens): (i64, i64) = tx.query_row(
        &format!("SELECT count(*), coalesce(sum(len), 0) FROM messages WHERE {filter}"),
        params![value],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )?;
    if docs == 0 {
        return Ok(());
    }
    tx.execute(
        &format!(
            "DELETE FROM messages_fts WHERE rowid IN (SELECT id FROM messages WHERE {filter})"
        ),
        params![value],
    )?;
    tx.execute(
        &format!("DELETE FROM messages WHERE {filter}"),
        params![value],
    )?;
    add_totals(tx, -docs, -tokens)
}

/// Moves the document and term totals.
fn add_totals(tx: &Transaction<'_>, docs: i64, tokens: i64) -> Result<(), rusqlite::Error> {
    let mut statement = tx.prepare_cached("UPDATE meta SET value = value + ?2 WHERE key = ?1")?;
    statement.execute(params!["docs", docs])?;
    statement.execute(params!["tokens", tokens])?;
    Ok(())
}

/// Inserts one document (message or summary); returns its term count.
fn insert(
    tx: &Transaction<'_>,
    row: (i64, i64, i64, i64, i64),
    content: &str,
) -> Result<i64, rusqlite::Error> {
    let (file_id, pos, role, ts, offset) = row;
    let text = analyze::index_text(content);
    let len = if text.is_empty() {
        0
    } else {
        text.split(' ').count() as i64
    };
    tx.prepare_cached(
        "INSERT INTO messages (file_id, pos, role, ts, offset, len, content)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?
    .execute(params![file_id, pos, role, ts, offset, len, content])?;
    tx.prepare_cached("INSERT INTO messages_fts (rowid, terms) VALUES (?1, ?2)")?
        .execute(params![tx.last_insert_rowid(), text])?;
    Ok(len)
}

/// Replaces the indexed summary of file `id` with what `file`'s summary.md holds now.
fn index_summary(tx: &Transaction<'_>, id: i64, file: &OnDisk) -> Result<(), rusqlite::Error> {
    remove(tx, "file_id = ?1 AND pos = -1", id)?;
    let text = match std::fs::read_to_string(&file.summary_path) {
        Ok(text) => text,
        Err(error) if error.kind() == ErrorKind::NotFound => String::new(),
        Err(error) => {
            tracing::warn!(path = %file.summary_path.display(), error = %error, "Cannot read summary; not indexed.");
            String::new()
        }
    };
    if !text.trim().is_empty() {
        let ts = file.summary.1 / 1_000_000;
        let len = insert(tx, (id, -1, ROLE_SUMMARY, ts, -1), &text)?;
        add_totals(tx, 1, len)?;
    }
    tx.execute(
        "UPDATE files SET summary_len = ?2, summary_mtime_ns = ?3 WHERE id = ?1",
        params![id, file.summary.0, file.summary.1],
    )?;
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
    let (id, offset, mut pos, summary) = match progress {
        Some(progress) if is_append(file, &progress, &handle) => (
            progress.id,
            progress.offset,
            progress.next_pos,
            progress.summary,
        ),
        Some(progress) => {
            tracing::info!(path = %file.path.display(), "Session file changed; re-indexing it.");
            forget(tx, progress.id)?;
            (progress.id, 0, 0, (-1, 0))
        }
        None => {
            let session = safe_id::decode(&file.stem).unwrap_or_else(|| file.stem.clone());
            tx.execute(
                "INSERT INTO files (stem, session, dev, ino, stat_len, mtime_ns, offset, tail,
                 next_pos, summary_len, summary_mtime_ns)
                 VALUES (?1, ?2, 0, 0, 0, 0, 0, x'', 0, -1, 0)",
                params![file.stem, session],
            )?;
            (tx.last_insert_rowid(), 0, 0, (-1, 0))
        }
    };
    if summary != file.summary {
        index_summary(tx, id, file)?;
    }
    let mut reader = BufReader::with_capacity(1 << 16, handle);
    let mut end = offset as u64;
    if reader.seek(SeekFrom::Start(end)).is_err() {
        return Ok(0);
    }
    let (mut added, mut skipped, mut tokens) = (0u64, 0u64, 0i64);
    let mut line = Vec::with_capacity(1024);
    loop {
        line.clear();
        let start = end;
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
        tokens += insert(tx, (id, pos, role, ts, start as i64), &message.content)?;
        pos += 1;
        added += 1;
    }
    add_totals(tx, added as i64, tokens)?;
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
