//! [`ConversationFiles`]: each session's conversation state (see
//! [`crate::core::ports::conversation`]) as `sessions/<stem>.conversation.json`, beside the
//! session's history and cursor files, written atomically.
//!
//! The file exists only once a chat command (`/model`, `/new`) changed something, so a home
//! that never used one has none. Its name ends in `.json`, never `.jsonl`, so nothing that
//! lists histories mistakes it for one.

use std::path::{Path, PathBuf};

use super::{atomic, io_error, safe_id};
use crate::core::ports::conversation::{ConversationState, ConversationStore};
use crate::core::ports::store::StoreError;
use crate::core::session::SessionId;

/// The conversation states under `$SQUIDBOT_HOME/sessions`.
#[derive(Debug, Clone)]
pub struct ConversationFiles {
    sessions_dir: PathBuf,
}

impl ConversationFiles {
    /// The states of the home `home`.
    pub fn new(home: &Path) -> Self {
        Self {
            sessions_dir: home.join("sessions"),
        }
    }

    /// The state file of `session`.
    pub fn path(&self, session: &SessionId) -> PathBuf {
        let mut name = safe_id::encode(session);
        name.push_str(".conversation.json");
        self.sessions_dir.join(name)
    }
}

impl ConversationStore for ConversationFiles {
    fn load(&self, session: &SessionId) -> Result<ConversationState, StoreError> {
        let path = self.path(session);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Ok(ConversationState::default());
            }
            Err(error) => return Err(io_error("reading", &path, error)),
        };
        serde_json::from_slice(&bytes).map_err(|error| {
            io_error(
                "parsing",
                &path,
                std::io::Error::new(std::io::ErrorKind::InvalidData, error),
            )
        })
    }

    fn save(&self, session: &SessionId, state: &ConversationState) -> Result<(), StoreError> {
        let path = self.path(session);
        let mut bytes = serde_json::to_vec_pretty(state).map_err(|error| StoreError::Encode {
            path: path.display().to_string(),
            error,
        })?;
        bytes.push(b'\n');
        atomic::write(&path, &bytes).map_err(|error| io_error("writing", &path, error))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_survives_a_new_store_and_a_missing_one_is_the_default() {
        let home = tempfile::tempdir().unwrap();
        let files = ConversationFiles::new(home.path());
        let room = SessionId::parse("matrix:!r:example.org").unwrap();
        assert_eq!(files.load(&room).unwrap(), ConversationState::default());
        let state = ConversationState {
            current: Some(SessionId::parse("matrix:!r:example.org#2").unwrap()),
            generation: 2,
            model: Some("big".to_owned()),
        };
        files.save(&room, &state).unwrap();
        assert_eq!(
            ConversationFiles::new(home.path()).load(&room).unwrap(),
            state
        );
        assert!(
            files
                .path(&room)
                .ends_with("matrix_3A_21r_3Aexample.org.conversation.json")
        );
    }
}
