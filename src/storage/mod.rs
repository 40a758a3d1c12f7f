//! File storage: the embedded default, plain files under `$SQUIDBOT_HOME`, no server.
//!
//! - [`activity_log`]: the last active session, the heartbeat's default target ([`ActivityFile`]).
//! - [`approval_file`]: the gateway's open approval requests ([`ApprovalFile`]).
//! - [`conversation_file`]: each conversation's current session and model, as chat commands
//!   set them ([`ConversationFiles`]).
//! - [`safe_id`]: the injective, filesystem-safe encoding of session ids.
//! - [`atomic`]: whole-file writes that are atomic (temp file, fsync, rename, fsync dir).
//! - [`file_lock`]: exclusive locks between processes for read-modify-write ([`FileLock`]).
//! - [`home_lock`]: one gateway per home ([`HomeLock`]).
//! - [`jsonl_store`]: session histories, cursors and summaries ([`JsonlStore`]).
//! - [`line_append`]: whole lines appended to a file other processes append to, on the
//!   caller's thread when its lock is free and nothing waits on the disk.
//! - [`history_index`]: the full-text index over all histories, a rebuildable cache ([`HistoryIndex`]).
//! - [`cursor_file`]: the `.meta.json` cursor format and its crash-safe commit protocol.
//! - [`tail_cache`]: recently loaded tails, validated by file stamps ([`tail_cache::TailCache`]).
//! - [`memory_file`]: the global MEMORY.md with its previous version ([`MemoryFile`]).
//! - [`import`]: bringing an original (Python) squidbot home over, idempotently.
//! - [`usage_ledger`]: one record per LLM call, a JSONL file per month ([`UsageLedgerFile`]).
//! - [`bootstrap`]: the workspace's bootstrap files as the base prompt ([`WorkspacePrompt`]).
//!
//! **Architecture Invariant:** only this module writes squidbot's state files, and a file two
//! processes may write is written under a [`FileLock`].

pub mod activity_log;
pub mod approval_file;
pub mod atomic;
pub mod beneath;
pub mod bootstrap;
pub mod conversation_file;
pub mod cursor_file;
pub mod file_lock;
pub mod history_index;
pub mod home_lock;
pub mod import;
pub mod jsonl_store;
pub mod line_append;
pub mod memory_file;
pub mod safe_id;
pub mod tail_cache;
pub mod usage_ledger;
pub mod workspace_files;

pub use activity_log::ActivityFile;
pub use approval_file::ApprovalFile;
pub use bootstrap::WorkspacePrompt;
pub use conversation_file::ConversationFiles;
pub use file_lock::FileLock;
pub use history_index::HistoryIndex;
pub use home_lock::HomeLock;
pub use jsonl_store::JsonlStore;
pub use memory_file::MemoryFile;
pub use usage_ledger::UsageLedgerFile;

use crate::core::ports::store::StoreError;

/// Wraps an I/O error with the operation and path, the context every storage error carries.
pub(crate) fn io_error(
    op: &'static str,
    path: &std::path::Path,
    source: std::io::Error,
) -> StoreError {
    StoreError::Io {
        op,
        path: path.display().to_string(),
        error: source,
    }
}

/// Runs blocking file work off the async runtime; a panicking closure becomes an I/O error.
pub(crate) async fn blocking<T: Send + 'static>(
    op: &'static str,
    path: &std::path::Path,
    work: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result,
        Err(join) => Err(io_error(op, path, std::io::Error::other(join.to_string()))),
    }
}
