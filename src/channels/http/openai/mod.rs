//! The OpenAI-compatible endpoint: `POST /v1/chat/completions` (plain and streamed) and
//! `GET /v1/models` on the HTTP API's server, behind its bearer token, so any app that speaks
//! to OpenAI (web chats such as Open WebUI, phone apps, editor plug-ins, the `openai` SDKs, the
//! `llm` CLI) is a front end of the same assistant, with the same memory, tools, approvals and
//! budgets as Matrix and mail. Off unless `gateway.http.openai: true`.
//!
//! - `api.rs`: the handlers, the token check and the answer shapes (completion, chunks, models).
//! - `request.rs`: the request shapes and the limits.
//! - `thread.rs`: [`Threads`], which session an app's conversation is.
//! - `turn.rs`: one message as a turn; approvals parked between messages; a client that leaves
//!   cancels its turn.
//! - `error.rs`: [`ApiError`], OpenAI-style errors.
//!
//! An app's conversation is a session `http:openai-…` of the HTTP channel, so proactive
//! messages (cron, heartbeat) aimed at it land on the session's `events` stream like any API
//! session's, and its usage is in the ledger under that session.

mod api;
mod error;
mod request;
mod thread;
mod turn;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use tokio_util::task::TaskTracker;

use crate::approval::Approvals;
use crate::channels::attachments::AttachmentStore;
use crate::core::conversation::Conversations;
use crate::core::ports::channel::Alive;
use crate::core::ports::channel::Dispatch;
use crate::core::session::SessionId;

pub use api::router;
pub use error::{ApiError, ErrorKind};
pub use thread::Threads;

/// What the endpoint keeps from the start of the gateway on: the conversations index, where
/// images go, and the turns waiting for an approval.
pub struct OpenAiEndpoint {
    threads: Threads,
    attachments: AttachmentStore,
    /// A std mutex: held to park or take a turn, never across an await.
    parked: Mutex<HashMap<SessionId, turn::Running>>,
}

impl OpenAiEndpoint {
    /// The endpoint of the gateway whose state is in `home` and workspace is `workspace`; reads
    /// the conversations index now.
    pub fn open(home: &Path, workspace: &Path) -> Self {
        Self {
            threads: Threads::open(home),
            attachments: AttachmentStore::new(workspace),
            parked: Mutex::default(),
        }
    }
}

/// The endpoint as the running server's handlers share it.
pub struct Endpoint {
    /// What was kept from the start.
    pub kept: Arc<OpenAiEndpoint>,
    /// Where messages are submitted.
    pub dispatch: Arc<dyn Dispatch>,
    /// Where the work a request leaves running is spawned (see `ChannelContext::tasks`).
    pub tasks: TaskTracker,
    /// Where accepted messages are reported.
    pub liveness: Arc<dyn Alive>,
    /// The HTTP API's bearer token.
    pub token: Arc<str>,
    /// Where approval answers go.
    pub approvals: Option<Arc<Approvals>>,
    /// The conversations' current sessions and models, and the model catalog.
    pub conversations: Option<Arc<Conversations>>,
}

impl Endpoint {
    /// Parks `running`, which waits for an approval, with the conversation `key`.
    fn park(&self, key: SessionId, running: turn::Running) {
        self.kept
            .parked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, running);
    }

    /// Takes the turn parked with `key`, if one is and it has not ended.
    fn unpark(&self, key: &SessionId) -> Option<turn::Running> {
        let mut parked = self.kept.parked.lock().unwrap_or_else(|p| p.into_inner());
        let mut running = parked.remove(key)?;
        (!running.ended()).then_some(running)
    }
}
