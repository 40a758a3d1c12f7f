//! [`MatrixReplySink`]: how one turn's reply reaches a room.
//!
//! The Markdown reply goes out as `m.text` with the source as `body` and the rendered HTML as
//! `formatted_body` (the original sent no HTML through this path), in the thread the message
//! came from, split into pieces of at most [`MAX_PIECE`] bytes so no event nears the 64 KiB
//! limit, with an empty `m.mentions` so a reply never pings anyone. While the turn runs a
//! typing notice is kept alive (the original had the code but never called it). Each piece is
//! sent after [`RoomKeys::settle`], so a room key is rotated rather than re-sent at a later
//! index to a device that just started a new Olm session with the bot.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use matrix_sdk::ruma::OwnedEventId;
use matrix_sdk::ruma::events::Mentions;
use matrix_sdk::ruma::events::relation::Thread;
use matrix_sdk::ruma::events::room::message::{Relation, RoomMessageEventContent};
use matrix_sdk::{Room, RoomMemberships};
use tokio::task::AbortHandle;

use super::room_keys::RoomKeys;
use crate::channels::format::{markdown_to_html, split_message};
use crate::channels::owner::OwnerIds;
use crate::core::audience::Readers;
use crate::core::error_chain::Chain;
use crate::core::ports::approvals::{ApprovalRequest, MAX_QUESTION_BYTES};
use crate::core::ports::channel::{DeliveryError, ReplySink};

/// The largest piece of Markdown sent as one event; the HTML copy roughly doubles it, and
/// the event must stay well under Matrix's 64 KiB.
pub const MAX_PIECE: usize = 16_000;

/// How often the typing notice is renewed; servers drop it after the 30 s the SDK asks for.
const TYPING_RENEW: Duration = Duration::from_secs(20);

/// Where replies to one room (and thread) go.
pub struct MatrixReplySink {
    room: Room,
    thread: Option<ThreadRef>,
    keys: Arc<RoomKeys>,
    /// The keep-alive task of the typing notice. A std mutex: held only to swap the handle.
    typing: Mutex<Option<AbortHandle>>,
}

/// A reply could not be sent to a room.
#[derive(Debug, thiserror::Error)]
#[error("sending to {room}: {}", Chain(error))]
struct SendFailed {
    room: matrix_sdk::ruma::OwnedRoomId,
    error: matrix_sdk::Error,
}

/// The thread a reply belongs to.
#[derive(Debug, Clone)]
pub struct ThreadRef {
    /// The thread's root event.
    pub root: OwnedEventId,
    /// The message being answered (the fallback reply target for clients without threads).
    pub latest: OwnedEventId,
}

impl MatrixReplySink {
    /// A sink for `room`, replying in `thread` when the message came from one; `keys` is the
    /// channel's room-key guard.
    pub fn new(room: Room, thread: Option<ThreadRef>, keys: Arc<RoomKeys>) -> Self {
        Self {
            room,
            thread,
            keys,
            typing: Mutex::new(None),
        }
    }

    fn stop_keepalive(&self) {
        if let Ok(mut slot) = self.typing.lock()
            && let Some(handle) = slot.take()
        {
            handle.abort();
        }
    }

    /// The event content of one piece of the reply.
    pub fn content(&self, markdown: &str) -> RoomMessageEventContent {
        let mut content = RoomMessageEventContent::text_html(markdown, markdown_to_html(markdown));
        content.mentions = Some(Mentions::new());
        if let Some(thread) = &self.thread {
            content.relates_to = Some(Relation::Thread(Thread::plain(
                thread.root.clone(),
                thread.latest.clone(),
            )));
        }
        content
    }

    /// Sends `markdown` as one event, once the room's keys are settled.
    async fn send_event(&self, markdown: &str) -> Result<(), DeliveryError> {
        self.keys.settle().await;
        self.room
            .send(self.content(markdown))
            .await
            .map(|_| ())
            .map_err(|source| {
                let error = SendFailed {
                    room: self.room.room_id().to_owned(),
                    error: source,
                };
                DeliveryError::new("matrix", error)
            })
    }
}

impl Drop for MatrixReplySink {
    fn drop(&mut self) {
        self.stop_keepalive();
    }
}

#[async_trait]
impl ReplySink for MatrixReplySink {
    async fn typing(&self, active: bool) {
        self.stop_keepalive();
        if active {
            let room = self.room.clone();
            let task = tokio::spawn(async move {
                loop {
                    if let Err(error) = room.typing_notice(true).await {
                        tracing::debug!(room = %room.room_id(), error = %error, "Typing notice failed.");
                    }
                    tokio::time::sleep(TYPING_RENEW).await;
                }
            });
            if let Ok(mut slot) = self.typing.lock() {
                *slot = Some(task.abort_handle());
            }
        } else if let Err(error) = self.room.typing_notice(false).await {
            tracing::debug!(room = %self.room.room_id(), error = %error, "Stopping the typing notice failed.");
        }
    }

    /// The question goes to the room (or thread) like a reply, as one event, never split: a
    /// piece rendered on its own could hide what the next holds (the gate refuses a question
    /// longer than [`MAX_QUESTION_BYTES`] before it gets here). The owner answers there.
    async fn ask(&self, request: &ApprovalRequest) -> Result<bool, DeliveryError> {
        let question = request.question();
        if question.len() > MAX_QUESTION_BYTES.max(MAX_PIECE) {
            tracing::warn!(room = %self.room.room_id(), bytes = question.len(), "Approval question too long for one event; not asked.");
            return Ok(false);
        }
        self.send_event(&question).await.map(|()| true)
    }

    async fn deliver(&self, text: &str) -> Result<(), DeliveryError> {
        for piece in split_message(text, MAX_PIECE) {
            self.send_event(&piece).await?;
        }
        Ok(())
    }
}

/// Who reads `room`: its members other than the bot, joined or invited (an invited user can
/// join and read on at any time), each compared with the `owner`'s ids. The stored list is used when it is complete; when the server counts
/// more members than are stored (lazy-loaded members), the list is fetched; when it still
/// falls short or cannot be read, the readers are unknown.
pub async fn room_readers(room: &Room, owner: &OwnerIds) -> Readers {
    let expected = room.active_members_count();
    let mut members = room.members_no_sync(RoomMemberships::ACTIVE).await;
    if members
        .as_ref()
        .is_ok_and(|list| (list.len() as u64) < expected)
    {
        members = room.members(RoomMemberships::ACTIVE).await;
    }
    match members {
        Ok(list) if list.len() as u64 >= expected => {
            let own = room.own_user_id();
            owner.readers(
                list.iter()
                    .map(|member| member.user_id())
                    .filter(|user| *user != own)
                    .map(|user| user.as_str()),
            )
        }
        Ok(list) => {
            tracing::warn!(room = %room.room_id(), known = list.len(), expected, "Matrix room members incomplete; the room counts as shared.");
            Readers::Unknown
        }
        Err(error) => {
            tracing::warn!(room = %room.room_id(), error = %error, "Matrix room members unreadable; the room counts as shared.");
            Readers::Unknown
        }
    }
}

/// How many members joined `room`: the stored member events, or the server's summary when
/// that says more (the summary alone is stale without lazy-loading, and a group room counted
/// as a DM would skip the group policy).
pub async fn joined_members(room: &Room) -> u64 {
    let stored = room
        .members_no_sync(matrix_sdk::RoomMemberships::JOIN)
        .await
        .map(|members| members.len() as u64)
        .unwrap_or(0);
    stored.max(room.joined_members_count())
}
