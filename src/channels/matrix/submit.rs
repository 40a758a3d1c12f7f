//! [`Submission`]: the Matrix channel's one way to hand a message to the router, persisted
//! before it is acknowledged. The hand-over is an owned value, so a task can do it later (a
//! voice message once transcribed, a message that waits for a voice message ahead of it);
//! once the router says the message is persisted, the sync position may move past it and the
//! read receipt goes out, never before (the channel contract's acknowledgement rule).

use std::sync::{Arc, Mutex};

use matrix_sdk::Room;
use matrix_sdk::ruma::OwnedEventId;
use matrix_sdk::ruma::api::client::receipt::create_receipt::v3::ReceiptType;
use matrix_sdk::ruma::events::receipt::ReceiptThread;
use tokio_util::task::TaskTracker;

use super::sync_state::SyncState;
use crate::core::ports::channel::{Dispatch, Inbound};

/// One message's hand-over to the router, and what follows its persistence (the sync
/// position, the read receipt).
pub(super) struct Submission {
    pub(super) dispatch: Arc<dyn Dispatch>,
    pub(super) state: Arc<Mutex<SyncState>>,
    pub(super) waiters: TaskTracker,
    pub(super) room: Room,
    pub(super) event_id: OwnedEventId,
    pub(super) batch: u64,
    /// The original this edit is answered in place of, in the same batch.
    pub(super) replaces_in_batch: Option<String>,
}

impl Submission {
    /// Submits `inbound`; `false` when the router is shutting down (the batch stays open, so
    /// it is synced again).
    pub(super) fn submit(self, mut inbound: Inbound) -> bool {
        let (persisted_tx, persisted_rx) = tokio::sync::oneshot::channel();
        inbound.persisted = Some(persisted_tx);
        if self.dispatch.submit(inbound).is_err() {
            return false;
        }
        let Self {
            state,
            room,
            event_id,
            batch,
            replaces_in_batch,
            ..
        } = self;
        self.waiters.spawn(async move {
            // Fired once the router persisted the message; dropped if it never will be.
            if persisted_rx.await.is_err() {
                return;
            }
            if let Ok(mut state) = state.lock() {
                state.persisted(batch, event_id.as_str());
                if let Some(original) = &replaces_in_batch {
                    state.persisted(batch, original);
                }
            }
            if let Err(error) = room
                .send_single_receipt(ReceiptType::Read, ReceiptThread::Unthreaded, event_id)
                .await
            {
                tracing::debug!(room = %room.room_id(), error = %error, "Could not send a read receipt.");
            }
        });
        true
    }

    /// Counts the message as handled without answering it (a voice message that turned out
    /// not to address the bot), so the sync position moves past it.
    pub(super) fn pass(self) {
        if let Ok(mut state) = self.state.lock() {
            state.persisted(self.batch, self.event_id.as_str());
            if let Some(original) = &self.replaces_in_batch {
                state.persisted(self.batch, original);
            }
        }
    }
}
