//! Importing an original (Python) squidbot home: history, MEMORY.md, cron jobs and config.
//!
//! - History: the original's single global `history.jsonl` is split into sessions. A user
//!   record goes to `cli:local` (channel `cli` or none), `matrix:<sender>` (the original's
//!   records carry no room; a `metadata.matrix_room_id` or `metadata.room_id` string, if a
//!   record has one, is used as `matrix:<room>` instead), `email:<lower-cased sender>`, or
//!   `<channel>:<sender>` for any other channel. Assistant and tool records go to the session of
//!   the preceding user record (`cli:local` when none precedes). Messages are appended after
//!   whatever the session already holds. Malformed lines are counted and skipped.
//! - Idempotence: `state/import.json` records, per source file, the bytes imported and their
//!   SHA-256 plus the session of the last record. A second run over the same file imports
//!   nothing; a file that only grew imports just the new lines; a file whose imported prefix
//!   changed is refused (its history is not imported twice).
//! - Crash safety: before appending, the chunk about to be imported is recorded in
//!   `state/import.json` as pending, with each target session's length before the append. A
//!   run that finds a pending chunk (the last one was killed mid-way) appends only the messages
//!   of each session that are not already after that recorded length, so a crash at any point
//!   neither loses nor duplicates a message. The history files are only ever appended to.
//! - MEMORY.md: copied when ours is missing; when ours differs, ours is kept and theirs is
//!   written next to it as `MEMORY.md.imported`.
//! - Cron jobs: merged by id under the store's lock; a job whose id we already have is kept.
//! - Config: `config.json` becomes YAML; fields our schema rejects are dropped (and listed in a
//!   comment at the top) until [`crate::config::load_from_str`] accepts it, and paths inside the
//!   original home are moved into ours ([`Rehome`]), so nothing is written outside our home.
//! - Beside a running gateway: one import runs at a time ([`lock`]); history is appended under
//!   each session's lock, MEMORY.md placed under the lock `memory_write` takes, jobs merged under
//!   the store's lock and the config written under the lock `onboard` takes.

use std::collections::BTreeMap;
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::core::message::{Message, Role};
use crate::core::ports::store::{HistoryStore, StoreError};
use crate::core::session::SessionId;
use crate::cron::store::{CronJob, CronJobs, CronStoreError};
use crate::storage::file_lock::{FileLock, WorkspaceLock};
use crate::storage::{JsonlStore, MemoryFile, atomic};

mod config;

pub use config::{ConfigReport, Converted, Rehome, convert_config, import_config};

/// Why an import step failed.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// Reading or writing a file failed.
    #[error("{op} {}: {error}", path.display())]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        error: std::io::Error,
    },
    /// A source file is not what the original writes.
    #[error("{}: {detail}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// Appending to a session failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The cron job store failed.
    #[error(transparent)]
    Cron(#[from] CronStoreError),
}

fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> ImportError + 'a {
    move |error| ImportError::Io {
        op,
        path: path.to_owned(),
        error,
    }
}

/// What a history import did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct HistoryReport {
    /// Messages appended, per session id.
    pub sessions: BTreeMap<String, usize>,
    /// Lines that were not a readable record.
    pub skipped_lines: usize,
    /// Whether the file had been imported before (and nothing new was found).
    pub already_imported: bool,
    /// Whether there was no `history.jsonl` to import.
    pub absent: bool,
}

impl HistoryReport {
    /// All messages appended.
    pub fn messages(&self) -> usize {
        self.sessions.values().sum()
    }
}

/// What happened to one copied file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileOutcome {
    /// There was nothing to import.
    Absent,
    /// Written to this path.
    Written(PathBuf),
    /// Ours was kept; theirs went to this path.
    WrittenBeside(PathBuf),
    /// Already there with the same content.
    Unchanged,
}

/// What a cron import did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct JobsReport {
    /// Jobs added.
    pub added: usize,
    /// Jobs whose id we already had (kept as ours).
    pub kept: usize,
}

/// `state/import.json`: what was imported from each source history file.
#[derive(Debug, Default, Serialize, Deserialize)]
struct ImportState {
    #[serde(default)]
    history: BTreeMap<String, ImportedFile>,
    /// Chunks whose import started but may not have finished, by source file.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pending: BTreeMap<String, PendingChunk>,
}

/// A chunk of a source file being imported: where it ends, and each target session's history
/// length (bytes) before its messages were appended.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct PendingChunk {
    /// The chunk ends here (bytes of the source, whole lines).
    end: u64,
    /// SHA-256 (hex) of the source up to `end`.
    sha256: String,
    /// Session id → its history's length before the append.
    sessions: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct ImportedFile {
    /// Bytes of the source imported (always whole lines).
    bytes: u64,
    /// SHA-256 (hex) of those bytes.
    sha256: String,
    /// The session the last record went to (for assistant records that follow).
    last_session: Option<String>,
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Imports `source_home/history.jsonl` into the sessions of `home`.
pub async fn import_history(source_home: &Path, home: &Path) -> Result<HistoryReport, ImportError> {
    let source = source_home.join("history.jsonl");
    let bytes = match fs::read(&source) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == ErrorKind::NotFound => {
            return Ok(HistoryReport {
                absent: true,
                ..HistoryReport::default()
            });
        }
        Err(error) => return Err(io("reading", &source)(error)),
    };
    let state_path = home.join("state").join("import.json");
    let mut state = read_state(&state_path)?;
    let key = fs::canonicalize(&source)
        .unwrap_or_else(|_| source.clone())
        .display()
        .to_string();
    let mut start = 0usize;
    let mut last_session = None;
    if let Some(done) = state.history.get(&key) {
        let done_len = usize::try_from(done.bytes).unwrap_or(usize::MAX);
        let prefix = bytes.get(..done_len);
        if prefix.is_none_or(|prefix| sha256_hex(prefix) != done.sha256) {
            return Err(ImportError::Invalid {
                path: source,
                detail: format!(
                    "changed since it was imported (the first {} bytes differ); remove its entry from {} to import it again",
                    done.bytes,
                    state_path.display()
                ),
            });
        }
        start = done_len;
        last_session = done.last_session.clone();
    }
    // Only whole lines: a last line without a newline may still be being written. A chunk
    // that a killed run left pending is finished first, exactly as it was recorded.
    let pending = state
        .pending
        .get(&key)
        .filter(|p| {
            usize::try_from(p.end)
                .ok()
                .and_then(|end| bytes.get(..end))
                .is_some_and(|chunk| sha256_hex(chunk) == p.sha256)
        })
        .cloned();
    let end = match (&pending, bytes[start..].iter().rposition(|&b| b == b'\n')) {
        (Some(p), _) => usize::try_from(p.end).unwrap_or(start),
        (None, Some(pos)) => start + pos + 1,
        (None, None) => start,
    };
    let mut report = HistoryReport::default();
    if end == start {
        report.already_imported = start > 0;
        return Ok(report);
    }
    let mut grouped: Vec<(SessionId, Vec<Message>)> = Vec::new();
    let mut current = last_session.and_then(|id| SessionId::parse(&id).ok());
    for line in bytes[start..end].split(|&b| b == b'\n') {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let Some((message, metadata)) = parse_record(line) else {
            report.skipped_lines += 1;
            continue;
        };
        let session = match message.role {
            Role::User => session_for(&message, metadata.as_ref()),
            _ => current.clone().unwrap_or_else(SessionId::cli_local),
        };
        current = Some(session.clone());
        match grouped.iter_mut().find(|(id, _)| *id == session) {
            Some((_, messages)) => messages.push(message),
            None => grouped.push((session, vec![message])),
        }
    }
    let store = JsonlStore::new(home);
    let lengths = match &pending {
        Some(p) => p.sessions.clone(),
        None => {
            let lengths: BTreeMap<String, u64> = grouped
                .iter()
                .map(|(session, _)| {
                    let len = fs::metadata(store.history_path(session)).map_or(0, |m| m.len());
                    (session.as_str().to_owned(), len)
                })
                .collect();
            let chunk = PendingChunk {
                end: end as u64,
                sha256: sha256_hex(&bytes[..end]),
                sessions: lengths.clone(),
            };
            state.pending.insert(key.clone(), chunk);
            write_state(&state_path, &state)?;
            lengths
        }
    };
    for (session, messages) in &grouped {
        let from = lengths.get(session.as_str()).copied().unwrap_or(0);
        let done = already_appended(&store.history_path(session), from, messages)?;
        store.append(session, &messages[done..]).await?;
        report
            .sessions
            .insert(session.as_str().to_owned(), messages.len());
    }
    state.pending.remove(&key);
    state.history.insert(
        key,
        ImportedFile {
            bytes: end as u64,
            sha256: sha256_hex(&bytes[..end]),
            last_session: current.map(|id| id.as_str().to_owned()),
        },
    );
    write_state(&state_path, &state)?;
    Ok(report)
}

/// How many of `messages` a killed run already appended to `path` after byte `from`: the
/// length of the common prefix of what is there and what is to be appended.
fn already_appended(path: &Path, from: u64, messages: &[Message]) -> Result<usize, ImportError> {
    let Some(bytes) = read_optional(path)? else {
        return Ok(0);
    };
    let tail = bytes
        .get(usize::try_from(from).unwrap_or(usize::MAX)..)
        .unwrap_or_default();
    let there = tail
        .split(|&b| b == b'\n')
        .filter_map(|line| serde_json::from_slice::<Message>(line).ok());
    let same = |a: &Message, b: &Message| {
        a.role == b.role && a.content == b.content && a.timestamp == b.timestamp
    };
    Ok(there.zip(messages).take_while(|(a, b)| same(a, b)).count())
}

/// One original record as our message, plus its `metadata` object if it has one.
fn parse_record(line: &[u8]) -> Option<(Message, Option<Value>)> {
    let value: Value = serde_json::from_slice(line).ok()?;
    let metadata = value.get("metadata").cloned();
    let message: Message = serde_json::from_value(value).ok()?;
    Some((message, metadata))
}

/// The session a user record belongs to (see the module docs).
fn session_for(message: &Message, metadata: Option<&Value>) -> SessionId {
    let sender = message.sender_id.as_deref().unwrap_or("").trim();
    let channel = message.channel.as_deref().unwrap_or("cli");
    let room = metadata.and_then(|m| {
        // The original's record format, which named the room either way.
        ["matrix_room_id", "room_id"]
            .iter()
            .find_map(|key| m.get(key).and_then(Value::as_str))
    });
    let id = match (channel, room) {
        ("cli", _) => return SessionId::cli_local(),
        ("matrix", Some(room)) => SessionId::new("matrix", room),
        ("email", _) => SessionId::new("email", &sender.to_lowercase()),
        (channel, _) => SessionId::new(channel, sender),
    };
    id.unwrap_or_else(|_| SessionId::cli_local())
}

fn read_state(path: &Path) -> Result<ImportState, ImportError> {
    match fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|error| ImportError::Invalid {
            path: path.to_owned(),
            detail: error.to_string(),
        }),
        Err(error) if error.kind() == ErrorKind::NotFound => Ok(ImportState::default()),
        Err(error) => Err(io("reading", path)(error)),
    }
}

fn write_state(path: &Path, state: &ImportState) -> Result<(), ImportError> {
    let mut bytes = serde_json::to_vec_pretty(state).map_err(|error| ImportError::Invalid {
        path: path.to_owned(),
        detail: error.to_string(),
    })?;
    bytes.push(b'\n');
    write_file(path, &bytes)
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), ImportError> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(io("creating", dir))?;
    }
    atomic::write(path, bytes).map_err(io("writing", path))
}

fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, ImportError> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(error) if error.kind() == ErrorKind::NotFound => Ok(None),
        Err(error) => Err(io("reading", path)(error)),
    }
}

/// Writes `theirs` to `ours`, or beside it (`<name><suffix>`) when ours exists and differs.
fn place(ours: &Path, beside: &Path, theirs: &[u8]) -> Result<FileOutcome, ImportError> {
    match read_optional(ours)? {
        None => {
            write_file(ours, theirs)?;
            Ok(FileOutcome::Written(ours.to_owned()))
        }
        Some(existing) if existing == theirs => Ok(FileOutcome::Unchanged),
        Some(_) => {
            if read_optional(beside)?.as_deref() == Some(theirs) {
                return Ok(FileOutcome::Unchanged);
            }
            write_file(beside, theirs)?;
            Ok(FileOutcome::WrittenBeside(beside.to_owned()))
        }
    }
}

/// Waits until no other import runs on `home` and holds that until dropped: two imports at
/// once would both read `state/import.json` before either recorded its chunk, and append the
/// same history twice.
pub fn lock(home: &Path) -> Result<FileLock, ImportError> {
    let path = home.join("state").join("import.lock");
    FileLock::exclusive(&path).map_err(io("locking", &path))
}

/// Copies `source_home/workspace/MEMORY.md` to `workspace/MEMORY.md` (see the module docs),
/// under the lock every MEMORY.md writer of `home` holds.
pub fn import_memory(
    source_home: &Path,
    home: &Path,
    workspace: &Path,
) -> Result<FileOutcome, ImportError> {
    let source = source_home.join("workspace").join("MEMORY.md");
    let Some(theirs) = read_optional(&source)? else {
        return Ok(FileOutcome::Absent);
    };
    let _lock = MemoryFile::new(workspace)
        .with_lock(WorkspaceLock::new(home, workspace))
        .lock_blocking()?;
    place(
        &workspace.join("MEMORY.md"),
        &workspace.join("MEMORY.md.imported"),
        &theirs,
    )
}

/// Merges `source_home/cron/jobs.json` into the job store of `home`, by id.
pub async fn import_jobs(source_home: &Path, home: &Path) -> Result<JobsReport, ImportError> {
    let source = CronJobs::new(source_home);
    if !source.path().exists() {
        return Ok(JobsReport::default());
    }
    let theirs: Vec<CronJob> = source.load().await?;
    let report = CronJobs::new(home)
        .update(move |ours| {
            let mut report = JobsReport::default();
            for job in theirs {
                if ours.iter().any(|existing| existing.id == job.id) {
                    report.kept += 1;
                } else {
                    ours.push(job);
                    report.added += 1;
                }
            }
            report
        })
        .await?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_records_map_to_sessions() {
        let record = |channel: &str, sender: &str| {
            let mut m = Message::new(Role::User, "x", chrono::Utc::now().fixed_offset());
            m.channel = Some(channel.to_owned());
            m.sender_id = Some(sender.to_owned());
            m
        };
        let id = |m: &Message, meta: Option<&Value>| session_for(m, meta).as_str().to_owned();
        assert_eq!(id(&record("cli", "local"), None), "cli:local");
        assert_eq!(id(&record("email", "A@B.org"), None), "email:a@b.org");
        assert_eq!(id(&record("matrix", "@u:x.org"), None), "matrix:@u:x.org");
        let meta = serde_json::json!({"matrix_room_id": "!r:x.org"});
        assert_eq!(
            id(&record("matrix", "@u:x.org"), Some(&meta)),
            "matrix:!r:x.org"
        );
    }

    /// A run killed after some appends (and before its state was final) is finished by the
    /// next run without losing or duplicating a message.
    #[tokio::test]
    async fn a_killed_import_is_finished_without_duplicates() {
        let source = tempfile::tempdir().unwrap();
        let line = |channel: &str, sender: &str, role: &str, text: &str, minute: u32| {
            format!(
                "{}\n",
                serde_json::json!({"role": role, "content": text, "channel": channel,
                    "sender_id": sender, "timestamp": format!("2026-01-01T10:{minute:02}:00+00:00")})
            )
        };
        let history = [
            line("cli", "local", "user", "a", 1),
            line("cli", "local", "assistant", "re a", 2),
            line("email", "x@y.org", "user", "b", 3),
            line("email", "x@y.org", "assistant", "re b", 4),
            line("matrix", "@u:x.org", "user", "c", 5),
        ]
        .concat();
        std::fs::write(source.path().join("history.jsonl"), history).unwrap();
        let count = |home: &Path, id: &str| {
            let session = SessionId::parse(id).unwrap();
            let path = JsonlStore::new(home).history_path(&session);
            std::fs::read_to_string(path).map_or(0, |t| t.lines().count())
        };
        let state_path = |home: &Path| home.join("state").join("import.json");

        for kill_after_sessions in 0..=3 {
            let home = tempfile::tempdir().unwrap();
            // A complete run, then its state rolled back to "pending, not finished", with the
            // sessions after `kill_after_sessions` not yet written.
            let first = import_history(source.path(), home.path()).await.unwrap();
            assert_eq!(first.messages(), 5);
            let mut state = read_state(&state_path(home.path())).unwrap();
            let (key, done) = state.history.pop_first().unwrap();
            let order = ["cli:local", "email:x@y.org", "matrix:@u:x.org"];
            for id in &order[kill_after_sessions.min(3)..] {
                let session = SessionId::parse(id).unwrap();
                std::fs::remove_file(JsonlStore::new(home.path()).history_path(&session)).unwrap();
            }
            state.pending.insert(
                key,
                PendingChunk {
                    end: done.bytes,
                    sha256: done.sha256,
                    sessions: order.iter().map(|id| ((*id).to_owned(), 0)).collect(),
                },
            );
            write_state(&state_path(home.path()), &state).unwrap();

            let again = import_history(source.path(), home.path()).await.unwrap();
            assert_eq!(again.messages(), 5);
            assert_eq!(
                count(home.path(), "cli:local"),
                2,
                "kill after {kill_after_sessions}"
            );
            assert_eq!(count(home.path(), "email:x@y.org"), 2);
            assert_eq!(count(home.path(), "matrix:@u:x.org"), 1);
            let state = read_state(&state_path(home.path())).unwrap();
            assert!(state.pending.is_empty());
            // And a third run imports nothing.
            let third = import_history(source.path(), home.path()).await.unwrap();
            assert!(third.already_imported && third.messages() == 0);
        }
    }
}
