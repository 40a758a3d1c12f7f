//! [`UsageLedgerFile`]: the usage ledger as one JSONL file per month, `usage/YYYY-MM.jsonl`
//! (the month of the record's UTC time).
//!
//! The gateway and `squidbot agent` append to the same file, each line under the file's own
//! `flock` and after a torn last line left by a crash was closed (see
//! [`line_append`](super::line_append), which also keeps the append on the caller's thread when
//! the lock is free). Appends are not fsynced: a record lost to a power cut
//! costs one call's worth of budget, while an fsync per LLM call would cost every call a disk
//! flush. Readers take only whole lines and skip a line that does not parse (the torn one), so
//! every file stays loadable after a crash.
//!
//! `usage/notices.jsonl` remembers, one line per budget and day, that the owner was told a
//! budget was reached, so a skipped heartbeat tick or cron run tells them once a day across
//! processes and restarts; it is read and appended under its own `flock`.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use chrono::{DateTime, Datelike, Months, NaiveDate, Utc};
use serde::{Deserialize, Serialize};

use crate::accounting::ledger::{LedgerError, UsageLedger, UsageRecord};
use crate::storage::FileLock;
use crate::storage::line_append::{self, Durability};

/// Where the next poll starts.
#[derive(Debug, Clone)]
struct PollCursor {
    /// The month file being followed (`2026-11`).
    month: String,
    /// Bytes of it already read (always at a line start).
    offset: u64,
}

/// What the next poll hands out and where it reads on.
#[derive(Debug, Default)]
struct PollState {
    cursor: Option<PollCursor>,
    /// Records this ledger appended right at the cursor, which the cursor has already passed:
    /// the next poll returns them without reading them back.
    own: Vec<UsageRecord>,
}

/// The ledger under `$SQUIDBOT_HOME/usage/`.
///
/// A poll runs before every LLM call and usually finds only the line this process appended
/// after the previous call. So an append made right at the poll cursor moves the cursor past
/// its own line and keeps the record; the next poll then needs one `statx` to see that the
/// file ends at the cursor, made on the caller's thread (cheaper than the two thread switches
/// of a hop to the blocking pool), and reads the file only when another process wrote to it.
#[derive(Debug, Clone)]
pub struct UsageLedgerFile {
    dir: PathBuf,
    /// A std lock, never held across an await: one poll at a time hands each record out once.
    state: Arc<Mutex<PollState>>,
}

impl UsageLedgerFile {
    /// The ledger of the home `home`.
    pub fn new(home: &Path) -> Self {
        Self {
            dir: home.join("usage"),
            state: Arc::default(),
        }
    }

    /// The directory of the month files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Every record of every month file, oldest file first; torn or unreadable lines skipped.
    pub fn read_all(&self) -> Result<Vec<UsageRecord>, LedgerError> {
        let mut files: Vec<PathBuf> = match fs::read_dir(&self.dir) {
            Ok(entries) => entries
                .filter_map(Result::ok)
                .map(|entry| entry.path())
                .filter(|path| is_month_file(path))
                .collect(),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(error) => {
                return Err(LedgerError::Io {
                    path: self.dir.clone(),
                    error,
                });
            }
        };
        files.sort();
        let mut records = Vec::new();
        for path in files {
            records.extend(read_from(&path, 0)?.0);
        }
        Ok(records)
    }
}

/// `2026-11` for a time in November 2026 (UTC).
fn month_of(time: DateTime<Utc>) -> String {
    format!("{:04}-{:02}", time.year(), time.month())
}

/// Whether `path` is a month file (`2026-11.jsonl`), not the notices.
fn is_month_file(path: &Path) -> bool {
    path.extension().is_some_and(|ext| ext == "jsonl")
        && path
            .file_name()
            .and_then(|name| name.to_str())
            .is_some_and(|name| name.starts_with(|c: char| c.is_ascii_digit()))
}

fn month_file(dir: &Path, month: &str) -> PathBuf {
    dir.join(format!("{month}.jsonl"))
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> LedgerError + '_ {
    move |error| LedgerError::Io {
        path: path.to_owned(),
        error,
    }
}

/// The records in whole lines of `path` from byte `offset`, and the offset after the last
/// whole line; a missing file holds none.
pub fn read_from(path: &Path, offset: u64) -> Result<(Vec<UsageRecord>, u64), LedgerError> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok((Vec::new(), offset)),
        Err(error) => return Err(io_error(path)(error)),
    };
    // Positioned reads until the end: no seek and no size query, as a poll runs before every
    // LLM call and usually finds one new line or none.
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let read = file
            .read_at(&mut chunk, offset + bytes.len() as u64)
            .map_err(io_error(path))?;
        if read == 0 {
            break;
        }
        bytes.extend_from_slice(&chunk[..read]);
    }
    let (records, consumed) = parse_lines(&bytes);
    Ok((records, offset + consumed as u64))
}

/// The records of the whole lines in `bytes` and how many bytes those lines took; a line that
/// does not parse is skipped, an unfinished last line left for later.
pub fn parse_lines(bytes: &[u8]) -> (Vec<UsageRecord>, usize) {
    let mut records = Vec::new();
    let mut consumed = 0;
    while let Some(end) = bytes[consumed..].iter().position(|&b| b == b'\n') {
        let line = &bytes[consumed..consumed + end];
        consumed += end + 1;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<UsageRecord>(line) {
            Ok(record) => records.push(record),
            Err(error) => {
                tracing::debug!(error = %error, "Unreadable usage record skipped.");
            }
        }
    }
    (records, consumed)
}

/// One line of `notices.jsonl`.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Notice {
    budget: String,
    day: NaiveDate,
}

/// Appends the notice of `budget` on `day` unless the file holds it already; whether it was new.
fn note_first(dir: &Path, budget: &str, day: NaiveDate) -> Result<bool, LedgerError> {
    fs::create_dir_all(dir).map_err(io_error(dir))?;
    let path = dir.join("notices.jsonl");
    let _lock = FileLock::exclusive(&path).map_err(io_error(&path))?;
    let text = fs::read_to_string(&path).map_err(io_error(&path))?;
    let notice = Notice {
        budget: budget.to_owned(),
        day,
    };
    let known = text
        .lines()
        .filter_map(|line| serde_json::from_str::<Notice>(line).ok())
        .any(|seen| seen == notice);
    if known {
        return Ok(false);
    }
    let mut line =
        serde_json::to_vec(&notice).map_err(|error| io_error(&path)(io::Error::other(error)))?;
    line.push(b'\n');
    if !text.is_empty() && !text.ends_with('\n') {
        line.insert(0, b'\n');
    }
    let mut file = OpenOptions::new()
        .append(true)
        .open(&path)
        .map_err(io_error(&path))?;
    file.write_all(&line).map_err(io_error(&path))?;
    Ok(true)
}

/// Reads what was appended since `cursor` (the previous and current month on the first poll).
fn poll_files(
    dir: &Path,
    cursor: &mut Option<PollCursor>,
    now: DateTime<Utc>,
) -> Result<Vec<UsageRecord>, LedgerError> {
    let month = month_of(now);
    let mut records = Vec::new();
    let start = match cursor.take() {
        None => {
            let previous = now.checked_sub_months(Months::new(1)).unwrap_or(now);
            if month_of(previous) != month {
                records.extend(read_from(&month_file(dir, &month_of(previous)), 0)?.0);
            }
            0
        }
        Some(old) if old.month == month => old.offset,
        Some(old) => {
            records.extend(read_from(&month_file(dir, &old.month), old.offset)?.0);
            0
        }
    };
    let (more, offset) = read_from(&month_file(dir, &month), start)?;
    records.extend(more);
    *cursor = Some(PollCursor { month, offset });
    Ok(records)
}

#[async_trait]
impl UsageLedger for UsageLedgerFile {
    async fn append(&self, record: &UsageRecord) -> Result<(), LedgerError> {
        // One line under the month file's lock (see `line_append`), usually on this thread.
        let month = month_of(record.time);
        let path = month_file(&self.dir, &month);
        let mut line =
            serde_json::to_vec(record).map_err(|error| io_error(&path)(io::Error::other(error)))?;
        line.push(b'\n');
        let length = line.len() as u64;
        // The poll cursor stands after a whole line of this month's file (or at its start).
        let line_end = {
            let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            state
                .cursor
                .as_ref()
                .filter(|cursor| cursor.month == month)
                .map(|cursor| cursor.offset)
        };
        let landed =
            line_append::append(&self.dir, &path, line, Durability::Unsynced, line_end).await?;
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(cursor) = &mut state.cursor
            && cursor.month == month
            && cursor.offset == landed.before
        {
            cursor.offset = landed.start + length;
            state.own.push(record.clone());
        }
        Ok(())
    }

    async fn first_notice(&self, budget: &str, day: NaiveDate) -> Result<bool, LedgerError> {
        let dir = self.dir.clone();
        let budget = budget.to_owned();
        tokio::task::spawn_blocking(move || note_first(&dir, &budget, day))
            .await
            .unwrap_or_else(|error| Err(io_error(&self.dir)(io::Error::other(error))))
    }

    async fn poll(&self) -> Result<Vec<UsageRecord>, LedgerError> {
        let now = Utc::now();
        {
            let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(cursor) = &state.cursor
                && cursor.month == month_of(now)
                && fs::metadata(month_file(&self.dir, &cursor.month))
                    .is_ok_and(|meta| meta.len() == cursor.offset)
            {
                return Ok(std::mem::take(&mut state.own));
            }
        }
        let dir = self.dir.clone();
        let state = Arc::clone(&self.state);
        tokio::task::spawn_blocking(move || {
            let mut state = state.lock().unwrap_or_else(|p| p.into_inner());
            let mut next = state.cursor.clone();
            let mut records = poll_files(&dir, &mut next, now)?;
            state.cursor = next;
            let mut own = std::mem::take(&mut state.own);
            own.append(&mut records);
            Ok(own)
        })
        .await
        .unwrap_or_else(|error| Err(io_error(&self.dir)(io::Error::other(error))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::ports::usage::Purpose;

    fn record(time: &str, prompt: u64) -> UsageRecord {
        UsageRecord {
            time: DateTime::parse_from_rfc3339(time).unwrap().to_utc(),
            session: Some("http:a".into()),
            purpose: Purpose::Turn,
            pool: "default".into(),
            model: "small".into(),
            prompt_tokens: prompt,
            completion_tokens: 2,
            cached_tokens: 1,
            cache_written_tokens: 0,
            cost: 0.5,
            estimated: false,
            audio_seconds: 0.0,
        }
    }

    /// The prompt tokens of what a poll of `ledger` hands out.
    async fn prompts(ledger: &UsageLedgerFile) -> Vec<u64> {
        let records = ledger.poll().await.unwrap();
        records.iter().map(|r| r.prompt_tokens).collect()
    }

    #[test]
    fn a_line_written_before_cache_writes_were_recorded_reads_as_none_written() {
        let line = r#"{"time":"2026-11-24T10:00:00Z","purpose":"turn","pool":"default","model":"small","prompt_tokens":10,"completion_tokens":2,"cached_tokens":4,"cost":0.5}"#;
        let record: UsageRecord = serde_json::from_str(line).unwrap();
        assert_eq!((record.cached_tokens, record.cache_written_tokens), (4, 0));
        let again: UsageRecord =
            serde_json::from_str(&serde_json::to_string(&record).unwrap()).unwrap();
        assert_eq!(again, record);
    }

    #[tokio::test]
    async fn each_record_is_polled_once_whether_this_ledger_or_another_wrote_it() {
        let home = tempfile::tempdir().unwrap();
        let (ours, theirs) = (
            UsageLedgerFile::new(home.path()),
            UsageLedgerFile::new(home.path()),
        );
        let now = Utc::now().to_rfc3339();
        let at = |prompt| {
            let mut record = record(&now, prompt);
            record.time = Utc::now();
            record
        };
        assert!(ours.poll().await.unwrap().is_empty());
        // Our own line, right at the cursor: handed out without reading it back.
        ours.append(&at(1)).await.unwrap();
        let polled = prompts(&ours).await;
        assert_eq!(polled, [1]);
        assert!(ours.poll().await.unwrap().is_empty());
        // Another process writes before and after ours: all three, once each.
        theirs.append(&at(2)).await.unwrap();
        ours.append(&at(3)).await.unwrap();
        theirs.append(&at(4)).await.unwrap();
        let mut polled = prompts(&ours).await;
        polled.sort_unstable();
        assert_eq!(polled, [2, 3, 4]);
        assert!(ours.poll().await.unwrap().is_empty());
        ours.append(&at(5)).await.unwrap();
        let polled = prompts(&ours).await;
        assert_eq!(polled, [5]);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_torn_last_line_is_skipped_and_closed_by_the_next_append() {
        let home = tempfile::tempdir().unwrap();
        let ledger = UsageLedgerFile::new(home.path());
        ledger
            .append(&record("2026-11-03T10:00:00Z", 10))
            .await
            .unwrap();
        let path = month_file(ledger.dir(), "2026-11");
        // A crash mid-write leaves half a record without its newline.
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(br#"{"time":"2026-11-03T10:01:00Z","sess"#)
            .unwrap();
        let (records, offset) = read_from(&path, 0).unwrap();
        assert_eq!(records, vec![record("2026-11-03T10:00:00Z", 10)]);
        let whole = fs::metadata(&path).unwrap().len();
        assert!(offset < whole, "the torn line is not consumed");
        ledger
            .append(&record("2026-11-03T10:02:00Z", 30))
            .await
            .unwrap();
        let (records, _) = read_from(&path, offset).unwrap();
        assert_eq!(records, vec![record("2026-11-03T10:02:00Z", 30)]);
        assert_eq!(ledger.read_all().unwrap().len(), 2);
    }

    #[test]
    fn a_budget_notice_is_first_once_per_day() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join("usage");
        let day = |text: &str| text.parse::<NaiveDate>().unwrap();
        assert!(note_first(&dir, "budgets.daily_tokens", day("2026-11-24")).unwrap());
        assert!(!note_first(&dir, "budgets.daily_tokens", day("2026-11-24")).unwrap());
        assert!(note_first(&dir, "budgets.daily_cost", day("2026-11-24")).unwrap());
        assert!(note_first(&dir, "budgets.daily_tokens", day("2026-11-25")).unwrap());
        // A torn line does not hide the notices before it.
        let path = dir.join("notices.jsonl");
        let mut text = fs::read_to_string(&path).unwrap();
        text.push_str("{\"budg");
        fs::write(&path, text).unwrap();
        assert!(!note_first(&dir, "budgets.daily_cost", day("2026-11-24")).unwrap());
        assert!(note_first(&dir, "budgets.cron_tokens", day("2026-11-24")).unwrap());
        assert!(!note_first(&dir, "budgets.cron_tokens", day("2026-11-24")).unwrap());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn polls_hand_each_record_out_once_across_months() {
        let home = tempfile::tempdir().unwrap();
        let ledger = UsageLedgerFile::new(home.path());
        let dir = ledger.dir().to_owned();
        let at = |text: &str| DateTime::parse_from_rfc3339(text).unwrap().to_utc();
        ledger
            .append(&record("2026-09-30T10:00:00Z", 1))
            .await
            .unwrap();
        ledger
            .append(&record("2026-10-31T10:00:00Z", 2))
            .await
            .unwrap();
        ledger
            .append(&record("2026-11-01T10:00:00Z", 3))
            .await
            .unwrap();
        let prompts = |records: Vec<UsageRecord>| -> Vec<u64> {
            records.iter().map(|r| r.prompt_tokens).collect()
        };
        let mut cursor = None;
        let first = poll_files(&dir, &mut cursor, at("2026-11-02T00:00:00Z")).unwrap();
        assert_eq!(prompts(first), vec![2, 3], "previous and current month");
        assert!(
            poll_files(&dir, &mut cursor, at("2026-11-02T00:00:01Z"))
                .unwrap()
                .is_empty()
        );
        ledger
            .append(&record("2026-11-30T23:00:00Z", 4))
            .await
            .unwrap();
        ledger
            .append(&record("2026-12-01T00:00:00Z", 5))
            .await
            .unwrap();
        let next = poll_files(&dir, &mut cursor, at("2026-12-01T00:00:01Z")).unwrap();
        assert_eq!(prompts(next), vec![4, 5]);
    }
}
