//! The usage ledger's port: the append-only record of LLM calls ([`UsageLedger`]) and its one
//! line ([`UsageRecord`]), which the meter reads and writes and storage keeps as JSONL.
//!
//! It sits beside the meter, not in core: no core file reads or writes a ledger line; the
//! agent only tags calls ([`crate::core::ports::usage::CallTag`]) and reads the spend
//! ([`crate::core::ports::usage::SpendReport`]).

use std::path::PathBuf;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};

use crate::core::ports::usage::{Purpose, TokenUsage};

/// One line of the ledger: one LLM call that answered, or one attempt that failed after its
/// provider reported the tokens it bills.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UsageRecord {
    /// When the answer arrived.
    pub time: DateTime<Utc>,
    /// The session served (`http:abc`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Why the call was made.
    pub purpose: Purpose,
    /// The pool asked (`default`).
    pub pool: String,
    /// The configured model that answered (after any fallback).
    pub model: String,
    /// Prompt tokens, cached ones included.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
    /// Prompt tokens read from the provider's cache.
    #[serde(default)]
    pub cached_tokens: u64,
    /// Prompt tokens written to the provider's cache (absent from lines written before it
    /// was recorded: zero).
    #[serde(default)]
    pub cache_written_tokens: u64,
    /// The cost in the currency of the configured prices (0 for a model without a price).
    #[serde(default)]
    pub cost: f64,
    /// Whether the tokens are squidbot's estimate because the provider reported none.
    #[serde(default)]
    pub estimated: bool,
    /// Seconds of audio transcribed (a [`Purpose::Transcription`] record, which has no
    /// tokens); absent from every other line.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub audio_seconds: f64,
}

/// Whether `seconds` is zero: a record of tokens, whose line leaves the field out.
fn is_zero(seconds: &f64) -> bool {
    *seconds == 0.0
}

impl UsageRecord {
    /// The tokens of the record.
    pub fn usage(&self) -> TokenUsage {
        TokenUsage {
            prompt: self.prompt_tokens,
            completion: self.completion_tokens,
            cached: self.cached_tokens,
            cache_written: self.cache_written_tokens,
        }
    }
}

/// Why the ledger could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// A ledger file could not be opened, locked, read or appended to.
    #[error("usage ledger {path}: {error}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        error: std::io::Error,
    },
}

/// The append-only record of LLM calls, shared by every squidbot process of a home.
#[async_trait]
pub trait UsageLedger: Send + Sync {
    /// Appends one record, whole, so a concurrent writer never interleaves with it.
    async fn append(&self, record: &UsageRecord) -> Result<(), LedgerError>;

    /// The records appended (by any process) since the previous poll; the first poll returns
    /// those of the previous and the current month. A torn or unreadable line is skipped.
    async fn poll(&self) -> Result<Vec<UsageRecord>, LedgerError>;

    /// Notes that the owner is being told that `budget` was reached on `day`; false when they
    /// already were (by any process, before any restart), so they are told once a day.
    async fn first_notice(&self, budget: &str, day: NaiveDate) -> Result<bool, LedgerError>;
}
