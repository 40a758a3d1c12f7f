//! [`Conversations`]: which session a conversation's messages go to, and which model a
//! session's turns use, as the chat commands `/new` and `/model` set them.
//!
//! A channel keys its messages by conversation (a room, a correspondent, an API session id,
//! the terminal) and names that key as the message's [`SessionId`]. `/new` leaves the key's
//! history untouched and points the key at a fresh session, `<key>#<n>`, its *current*
//! session: the router and the terminal resolve every message's key with [`Conversations::current`]
//! before anything else, so history, cursor, summary, lock, queue, `/stop` and approvals all
//! follow the current session, while replies still go where the channel's reply sink says and
//! routing (the activity log, `cron_add`'s target) keeps the key. The old session stays a
//! session like any other, found by `search_history`.
//!
//! Both facts are small records in the [`ConversationStore`], read once per conversation and
//! cached here (at most [`MAX_CACHED`] sessions; past it the cache is emptied, which costs a
//! read each, never a wrong answer).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::core::ports::conversation::{ConversationState, ConversationStore};
use crate::core::ports::llm::LlmClient;
use crate::core::ports::models::{CatalogEntry, ModelCatalog};
use crate::core::ports::store::StoreError;
use crate::core::session::{SessionId, SessionIdError};

/// Why a chat command could not change a conversation.
#[derive(Debug, thiserror::Error)]
pub enum ConversationError {
    /// The state could not be saved.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The key is too long to number a new session after it.
    #[error("no new session can be named after this one: {0}")]
    Unnamed(SessionIdError),
}

/// The most session states kept in memory.
pub const MAX_CACHED: usize = 4096;

/// The word `/model` takes for "back to the default".
pub const DEFAULT_WORD: &str = "default";

/// What `/model NAME` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSwitch {
    /// The session now uses this entry.
    Switched(CatalogEntry),
    /// The session is back on the default pool.
    Default,
    /// No model or pool has that name; nothing changed.
    Unknown,
}

/// The conversations' current sessions and the sessions' models.
pub struct Conversations {
    store: Arc<dyn ConversationStore>,
    catalog: Arc<dyn ModelCatalog>,
    /// A std mutex: held only to look up or replace a state, never across an await or a
    /// write of the store.
    cache: Mutex<HashMap<SessionId, ConversationState>>,
    /// Serializes commands that read, change and save a state (a std mutex: commands are
    /// rare and their writes short, and no await happens while it is held).
    writing: Mutex<()>,
}

impl Conversations {
    /// Conversations kept in `store`, switching among the models of `catalog`.
    pub fn new(store: Arc<dyn ConversationStore>, catalog: Arc<dyn ModelCatalog>) -> Self {
        Self {
            store,
            catalog,
            cache: Mutex::default(),
            writing: Mutex::default(),
        }
    }

    /// The model catalog.
    pub fn catalog(&self) -> &Arc<dyn ModelCatalog> {
        &self.catalog
    }

    fn state(&self, session: &SessionId) -> ConversationState {
        if let Some(state) = self.cached().get(session) {
            return state.clone();
        }
        let state = match self.store.load(session) {
            Ok(state) => state,
            Err(error) => {
                // An unreadable state is the default: the conversation goes on in its key's
                // session with the default model rather than not at all.
                tracing::warn!(session = %session, error = %error, "Conversation state unreadable; using the defaults.");
                return ConversationState::default();
            }
        };
        let mut cache = self.cached();
        if cache.len() >= MAX_CACHED {
            cache.clear();
        }
        cache.insert(session.clone(), state.clone());
        state
    }

    fn cached(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, ConversationState>> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn save(&self, session: &SessionId, state: ConversationState) -> Result<(), StoreError> {
        self.store.save(session, &state)?;
        self.cached().insert(session.clone(), state);
        Ok(())
    }

    /// The session the messages of conversation `key` go to now.
    pub fn current(&self, key: &SessionId) -> SessionId {
        self.state(key).current.unwrap_or_else(|| key.clone())
    }

    /// The model or pool `session`'s turns use, if one was picked.
    pub fn model(&self, session: &SessionId) -> Option<String> {
        self.state(session).model
    }

    /// The client `session`'s turns use, if a model was picked and still exists (a name the
    /// configuration dropped falls back to the default pool).
    pub fn client(&self, session: &SessionId) -> Option<Arc<dyn LlmClient>> {
        let name = self.model(session)?;
        let client = self.catalog.client(&name);
        if client.is_none() {
            tracing::warn!(session = %session, model = %name, "The model this conversation picked is no longer configured; the default pool answers.");
        }
        client
    }

    /// Sets the model of `key`'s current session to `name` (`default`: back to the default).
    pub fn switch_model(
        &self,
        key: &SessionId,
        name: &str,
    ) -> Result<ModelSwitch, ConversationError> {
        let name = name.trim();
        let default = name.eq_ignore_ascii_case(DEFAULT_WORD);
        let entry = if default {
            None
        } else {
            let entries = self.catalog.entries();
            let Some(entry) = entries.into_iter().find(|entry| entry.name == name) else {
                return Ok(ModelSwitch::Unknown);
            };
            if self.catalog.client(&entry.name).is_none() {
                return Ok(ModelSwitch::Unknown);
            }
            Some(entry)
        };
        let _writing = self.writing.lock().unwrap_or_else(|p| p.into_inner());
        let session = self.current(key);
        let mut state = self.state(&session);
        state.model = entry.as_ref().map(|entry| entry.name.clone());
        self.save(&session, state)?;
        Ok(entry.map_or(ModelSwitch::Default, ModelSwitch::Switched))
    }

    /// Points `key` at a fresh session, `<key>#<n>`, which keeps the model the conversation
    /// had; returns the new session. The old session's files are not touched.
    pub fn start_new(&self, key: &SessionId) -> Result<SessionId, ConversationError> {
        let _writing = self.writing.lock().unwrap_or_else(|p| p.into_inner());
        let mut state = self.state(key);
        let old = state.current.clone().unwrap_or_else(|| key.clone());
        let model = self.state(&old).model;
        let generation = state.generation.max(1) + 1;
        let fresh =
            SessionId::parse(&format!("{key}#{generation}")).map_err(ConversationError::Unnamed)?;
        // The new session's state first: a crash between the two writes leaves the key on
        // its old session, never on a session without its model.
        if model.is_some() {
            let mut fresh_state = self.state(&fresh);
            fresh_state.model = model;
            self.save(&fresh, fresh_state)?;
        }
        state.current = Some(fresh.clone());
        state.generation = generation;
        self.save(key, state)?;
        Ok(fresh)
    }
}
