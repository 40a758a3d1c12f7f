//! The gateway's open approval requests, in `$SQUIDBOT_HOME/state/approvals.json`.
//!
//! [`ApprovalFile`] implements the [`ApprovalStore`] port: the whole list is rewritten
//! atomically each time a request opens or closes (a few times a day, so the fsyncs cost
//! nothing that matters), which is what lets a restarted gateway tell the owner which requests
//! died with the old process. Only the gateway writes it (the home lock makes it the only one).
//!
//! A file that cannot be parsed is an error the caller logs: its requests are then never run
//! either, since nothing runs without a live waiter.

use std::path::{Path, PathBuf};

use crate::core::ports::approvals::{ApprovalRequest, ApprovalStore, ApprovalStoreError};
use crate::storage::atomic;

/// The file of open approval requests.
#[derive(Debug, Clone)]
pub struct ApprovalFile {
    path: PathBuf,
}

impl ApprovalFile {
    /// The file under `home`.
    pub fn new(home: &Path) -> Self {
        Self {
            path: home.join("state").join("approvals.json"),
        }
    }

    fn error(&self, source: std::io::Error) -> ApprovalStoreError {
        ApprovalStoreError {
            path: self.path.display().to_string(),
            error: source,
        }
    }
}

impl ApprovalStore for ApprovalFile {
    fn save(&self, pending: &[ApprovalRequest]) -> Result<(), ApprovalStoreError> {
        let bytes = serde_json::to_vec_pretty(pending)
            .map_err(|error| self.error(std::io::Error::other(error)))?;
        atomic::write(&self.path, &bytes).map_err(|error| self.error(error))
    }

    fn load(&self) -> Result<Vec<ApprovalRequest>, ApprovalStoreError> {
        match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|error| {
                self.error(std::io::Error::new(std::io::ErrorKind::InvalidData, error))
            }),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(error) => Err(self.error(error)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::session::SessionId;

    #[test]
    fn the_list_round_trips_and_a_missing_file_is_empty() {
        let home = tempfile::tempdir().unwrap();
        let file = ApprovalFile::new(home.path());
        assert!(file.load().unwrap().is_empty());
        let request = ApprovalRequest {
            id: "0123456789abcdef".into(),
            code: "K7F3QZ".into(),
            session: SessionId::parse("matrix:!r:example.org").unwrap(),
            tool: "shell".into(),
            command: "rm -rf x".into(),
            reason: "`rm` is not on the allow list".into(),
            expires_at: chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap(),
            requester: Some(crate::core::ports::approvals::Requester {
                id: "@friend:example.org".into(),
                owner: false,
            }),
        };
        file.save(std::slice::from_ref(&request)).unwrap();
        assert_eq!(file.load().unwrap(), vec![request]);
        file.save(&[]).unwrap();
        assert!(file.load().unwrap().is_empty());
        std::fs::write(home.path().join("state/approvals.json"), "{torn").unwrap();
        assert!(file.load().is_err());
    }
}
