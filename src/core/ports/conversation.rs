//! **API Boundary.** The conversation state port: what a chat command changed about a
//! conversation, kept across restarts.
//!
//! A conversation is what a channel keys its messages by (a room, a mail correspondent, an API
//! session id, the terminal): its *key*, a [`SessionId`]. `/new` points the key at a fresh
//! session and `/model` picks the model of a session; both are small records written whole,
//! read once per conversation and then cached by [`crate::core::conversation::Conversations`],
//! so the port is synchronous.

use serde::{Deserialize, Serialize};

use crate::core::ports::store::StoreError;
use crate::core::session::SessionId;

/// The persisted state of one session id: as a conversation key, which session its messages
/// go to now; as a session, which model its turns use. Every field defaults, so a missing file
/// is the state of a conversation no command touched.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConversationState {
    /// The session this key's messages go to since its last `/new` (none: the key itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<SessionId>,
    /// How many times `/new` ran on this key; numbers the next session.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub generation: u32,
    /// The model or pool this session's turns use (none: the default pool).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Where conversation states are kept.
pub trait ConversationStore: Send + Sync {
    /// The state of `session`; the default when none was saved.
    fn load(&self, session: &SessionId) -> Result<ConversationState, StoreError>;

    /// Replaces the state of `session`, atomically and durably.
    fn save(&self, session: &SessionId, state: &ConversationState) -> Result<(), StoreError>;
}
