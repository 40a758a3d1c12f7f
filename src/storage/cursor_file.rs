//! The `.meta.json` cursor file and the crash-safe consolidation commit.
//!
//! Format: `{"last_consolidated": N, "offset": B}`, where N is the number of messages covered by
//! the summary (the original's field, so its files load) and B the byte offset where message N
//! starts, which lets a turn seek straight to the unconsolidated tail.
//!
//! Committing a consolidation touches two files, summary.md and the cursor, and a crash can fall
//! between them. Writing the summary first and the cursor second would, after such a crash,
//! summarize the same messages again. So the commit is three atomic writes:
//! 1. the cursor file gains `pending: {last_consolidated, offset, summary_sha256}`;
//! 2. summary.md is replaced;
//! 3. the cursor file is replaced by the new cursor.
//!
//! On load, a leftover `pending` is adopted exactly when summary.md hashes to `summary_sha256`
//! (the summary was written, so the cursor must move) and dropped otherwise.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::core::ports::store::Cursor;

/// The on-disk form of the cursor file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CursorFile {
    /// Messages covered by the summary.
    #[serde(default)]
    pub last_consolidated: u64,
    /// Byte offset of message `last_consolidated`; absent in the original's files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// A commit that was started but maybe not finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<PendingCommit>,
}

/// The cursor a commit in progress will move to, and the summary it goes with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingCommit {
    /// The new `last_consolidated`.
    pub last_consolidated: u64,
    /// The new offset.
    pub offset: u64,
    /// SHA-256 (hex) of the summary.md written by this commit.
    pub summary_sha256: String,
}

impl CursorFile {
    /// A settled cursor file for `cursor`.
    pub fn settled(cursor: Cursor) -> Self {
        Self {
            last_consolidated: cursor.messages,
            offset: Some(cursor.offset),
            pending: None,
        }
    }

    /// Resolves a leftover pending commit against the summary on disk. Returns the settled
    /// file and whether anything changed (so the caller rewrites it).
    pub fn recover(mut self, summary: &str) -> (Self, bool) {
        let Some(pending) = self.pending.take() else {
            return (self, false);
        };
        if pending.summary_sha256 == digest(summary) {
            self.last_consolidated = pending.last_consolidated;
            self.offset = Some(pending.offset);
        }
        (self, true)
    }
}

/// Hex SHA-256 of a summary text.
pub fn digest(summary: &str) -> String {
    Sha256::digest(summary.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending_for(summary: &str) -> CursorFile {
        CursorFile {
            last_consolidated: 10,
            offset: Some(100),
            pending: Some(PendingCommit {
                last_consolidated: 30,
                offset: 300,
                summary_sha256: digest(summary),
            }),
        }
    }

    #[test]
    fn pending_is_adopted_only_when_the_summary_was_written() {
        let (adopted, changed) = pending_for("new").recover("new");
        assert!(changed);
        assert_eq!((adopted.last_consolidated, adopted.offset), (30, Some(300)));
        let (dropped, changed) = pending_for("new").recover("old");
        assert!(changed);
        assert_eq!((dropped.last_consolidated, dropped.offset), (10, Some(100)));
        assert!(dropped.pending.is_none());
    }

    #[test]
    fn original_format_loads() {
        let file: CursorFile = serde_json::from_str(r#"{"last_consolidated": 80}"#).unwrap();
        assert_eq!(file.last_consolidated, 80);
        assert_eq!(file.offset, None);
    }
}
