//! **API Boundary.** Where pending approvals are kept while the owner decides.
//!
//! The gateway writes the whole list each time it changes, so after a crash or restart it knows
//! which requests were still open: those are expired, the owner is told, and their commands
//! never run (the turn that waited for them is gone).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::core::session::SessionId;

/// One request for the owner's approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    /// The request's id (the HTTP API's `approval_id`).
    pub id: String,
    /// The one-time code the owner answers with (`yes CODE`).
    pub code: String,
    /// The session whose turn asks.
    pub session: SessionId,
    /// The tool that would run (`shell`).
    pub tool: String,
    /// What would run, exactly as it would run.
    pub command: String,
    /// Why it was not allowed without asking.
    pub reason: String,
    /// When it counts as denied.
    pub expires_at: DateTime<Utc>,
}

impl ApprovalRequest {
    /// The text that asks the owner, for channels that ask in words (Matrix, email).
    pub fn question(&self) -> String {
        format!(
            "Approval needed: the `{tool}` tool wants to run\n\n```\n{command}\n```\n\n\
             ({reason}.) Answer `yes {code}` to run it once or `no {code}` to refuse. Without \
             an answer it is refused at {expires} UTC.",
            tool = self.tool,
            command = self.command,
            reason = self.reason,
            code = self.code,
            expires = self.expires_at.format("%Y-%m-%d %H:%M"),
        )
    }
}

/// The pending list could not be kept.
#[derive(Debug, thiserror::Error)]
#[error("pending approvals in {path}: {source}")]
pub struct ApprovalStoreError {
    /// The file.
    pub path: String,
    /// What failed.
    #[source]
    pub source: std::io::Error,
}

/// Keeps the pending approvals across restarts.
pub trait ApprovalStore: Send + Sync {
    /// Replaces the stored list with `pending`.
    fn save(&self, pending: &[ApprovalRequest]) -> Result<(), ApprovalStoreError>;

    /// The list a previous run left (empty when there is none).
    fn load(&self) -> Result<Vec<ApprovalRequest>, ApprovalStoreError>;
}
