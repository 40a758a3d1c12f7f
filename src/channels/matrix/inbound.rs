//! A timeline event turned into what the agent gets: a message the policy answers, with its
//! caption, what it replies to, its thread, and whether it edits an earlier one.
//!
//! Edits: `m.replace` carries the whole corrected message. When its original was not answered
//! yet, the edit takes its place, as if the person had written it so: within one sync batch
//! (a restart, a gap paged back) the original is skipped here; one still queued for its turn is
//! dropped by the router (see [`Inbound::corrects`]). An edit of an answered message is a turn
//! that says it is a correction. Only the sender's own edits count, as Matrix clients show them.

use std::sync::Arc;

use matrix_sdk::Room;
use matrix_sdk::ruma::api::client::receipt::create_receipt::v3::ReceiptType;
use matrix_sdk::ruma::events::receipt::ReceiptThread;
use matrix_sdk::ruma::events::room::message::{MessageType, Relation};
use matrix_sdk::ruma::events::{
    AnySyncMessageLikeEvent, AnySyncTimelineEvent, SyncMessageLikeEvent,
};
use serde_json::Map;

use super::channel::{Loop, MatrixChannel, NAME};
use super::edits::Edits;
use super::policy::{MessageFacts, Verdict, mentions_bot};
use super::routing;
use super::sink::{MatrixReplySink, ThreadRef, joined_members};
use super::{media, relations};
use crate::core::approval;
use crate::core::ports::channel::{ChannelContext, Inbound};
use crate::core::session::SessionId;

impl MatrixChannel {
    /// Submits one timeline event if it is a message the policy answers; `true` if submitted.
    pub(super) async fn message(
        &self,
        this: &Loop,
        context: &ChannelContext,
        room: &Room,
        event: &matrix_sdk::deserialized_responses::TimelineEvent,
        batch: u64,
        edits: &mut Edits,
    ) -> bool {
        let Ok(AnySyncTimelineEvent::MessageLike(AnySyncMessageLikeEvent::RoomMessage(
            SyncMessageLikeEvent::Original(message),
        ))) = event.raw().deserialize()
        else {
            return false;
        };
        // An edit carries the whole corrected message in `m.new_content`.
        let (msgtype, edit_of) = match &message.content.relates_to {
            Some(Relation::Replacement(replacement)) => (
                &replacement.new_content.msgtype,
                Some(replacement.event_id.to_string()),
            ),
            _ => (&message.content.msgtype, None),
        };
        let sender = message.sender.to_string();
        if edit_of.is_none() && edits.skip(&sender, message.event_id.as_str()) {
            // Its edit follows in this batch and is answered in its place; this one counts as
            // handled once the edit is persisted (see below).
            tracing::debug!(room = %room.room_id(), "A Matrix message edited before it was answered; its edit is answered instead.");
            return false;
        }
        let (body, formatted) = match msgtype {
            MessageType::Text(text) => (
                text.body.clone(),
                text.formatted.as_ref().map(|f| f.body.clone()),
            ),
            MessageType::Emote(emote) => (
                emote.body.clone(),
                emote.formatted.as_ref().map(|f| f.body.clone()),
            ),
            // Notices are what bots send; answering them is how bot loops start.
            MessageType::Notice(_) => return false,
            other => (other.body().to_owned(), None),
        };
        let mentioned_users: Vec<String> = message
            .content
            .mentions
            .as_ref()
            .map(|m| m.user_ids.iter().map(ToString::to_string).collect())
            .unwrap_or_default();
        let facts = MessageFacts {
            room_id: room.room_id().as_str(),
            sender: &sender,
            other_members: joined_members(room).await.saturating_sub(1),
            // An answer to an approval (`yes CODE`) is addressed to the bot without naming it:
            // the question asked for exactly these words.
            mentioned: mentions_bot(
                &this.own,
                &this.display_name,
                &body,
                formatted.as_deref(),
                &mentioned_users,
            ) || approval::parse_answer(&body).is_some(),
        };
        let verdict = this.policy.judge(&facts);
        if verdict != Verdict::Answer {
            tracing::debug!(room = %room.room_id(), sender, verdict = ?verdict, "Matrix message not answered.");
            return false;
        }
        let Ok(session) = SessionId::new(NAME, room.room_id().as_str()) else {
            return false;
        };
        let mut images = Vec::new();
        let mut text = match media::media_of(msgtype) {
            Some(media) => {
                let caption = media.caption.clone();
                let saved = media::receive(&this.client, &self.attachments, &session, media).await;
                images.extend(saved.image);
                match caption {
                    Some(caption) => format!("{caption}\n{}", saved.text),
                    None => saved.text,
                }
            }
            None => relations::strip_reply_fallback(&body).to_owned(),
        };
        if edit_of.is_none()
            && let Some(Relation::Reply(reply)) = &message.content.relates_to
        {
            // Current clients send replies without the quoted fallback: what is replied to is
            // fetched, so the agent knows.
            if let Some(quoted) = relations::replied_to(room, &reply.in_reply_to.event_id).await {
                text = format!("{quoted}\n{text}");
            }
        }
        let thread = match &message.content.relates_to {
            Some(Relation::Thread(thread)) => Some(ThreadRef {
                root: thread.event_id.clone(),
                latest: message.event_id.clone(),
            }),
            _ => None,
        };
        let mut metadata = Map::new();
        metadata.insert(
            routing::MATRIX_ROOM_ID.into(),
            room.room_id().as_str().into(),
        );
        metadata.insert("matrix_event_id".into(), message.event_id.as_str().into());
        metadata.insert("matrix_sender".into(), sender.clone().into());
        if let Some(thread) = &thread {
            metadata.insert(
                routing::MATRIX_THREAD_ROOT.into(),
                thread.root.as_str().into(),
            );
        }
        let sink = Arc::new(MatrixReplySink::new(
            room.clone(),
            thread,
            this.keys.clone(),
            self.owner.clone(),
        ));
        let origin = self.owner.origin(sender.clone());
        let mut inbound = Inbound::new(session, text, origin, sink);
        inbound.metadata = metadata;
        inbound.images = images;
        inbound.message_id = Some(message.event_id.to_string());
        // The original, if answered in this batch's place, is handled with its edit.
        let replaces_in_batch = edit_of
            .as_ref()
            .filter(|original| edits.skipped(&sender, original))
            .cloned();
        if replaces_in_batch.is_none() {
            // The router puts it in its original's place if that still waits for its turn.
            inbound.corrects = edit_of;
        }
        let (persisted_tx, persisted_rx) = tokio::sync::oneshot::channel();
        inbound.persisted = Some(persisted_tx);
        if let Ok(mut state) = this.state.lock() {
            state.add(batch);
            if replaces_in_batch.is_some() {
                state.add(batch);
            }
        }
        if context.dispatch.submit(inbound).is_err() {
            return false; // Shutting down; the batch stays open, so it is synced again.
        }
        let state = this.state.clone();
        let room = room.clone();
        let event_id = message.event_id.clone();
        this.waiters.spawn(async move {
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
}
