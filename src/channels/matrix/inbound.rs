//! A timeline event turned into what the agent gets: a message the policy answers, with its
//! caption, what it replies to, its thread, and whether it edits an earlier one.
//!
//! Edits: `m.replace` carries the whole corrected message. When its original was not answered
//! yet, the edit takes its place, as if the person had written it so: within one sync batch
//! (a restart, a gap paged back) the original is skipped here; one still queued for its turn is
//! dropped by the router (see [`Inbound::corrects`]). An edit of an answered message is a turn
//! that says it is a correction. Only the sender's own edits count, as Matrix clients show them.
//!
//! Who reads the reply is stated here, on the message ([`Inbound::readers`]): the room's members
//! (joined or invited) other than the bot, read from the SDK's store (which keeps them across
//! restarts) when the message arrives. A room is the owner's alone, and gets the owner's
//! private memory, only while no one else is in it.
//!
//! Voice messages are judged as addressed first and handed to [`super::voice`], which
//! transcribes them off the sync loop and decides by what was said.

use std::sync::Arc;

use matrix_sdk::Room;
use matrix_sdk::ruma::events::room::message::{
    MessageType, OriginalSyncRoomMessageEvent, Relation,
};
use matrix_sdk::ruma::events::{
    AnySyncMessageLikeEvent, AnySyncTimelineEvent, SyncMessageLikeEvent,
};
use serde_json::Map;

use super::channel::{Loop, MatrixChannel, NAME};
use super::edits::Edits;
use super::policy::{MessageFacts, Verdict, mentions_bot};
use super::routing;
use super::sink::{MatrixReplySink, ThreadRef, joined_members, room_readers};
use super::submit::Submission;
use super::voice::VoiceMessage;
use super::{media, relations};
use crate::approval;
use crate::core::ports::channel::{ChannelContext, Inbound};
use crate::core::session::SessionId;

impl MatrixChannel {
    /// Submits one timeline event if it is a message the policy answers; `true` if submitted
    /// (a voice message: taken, to be submitted once transcribed).
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
            // handled once the edit is persisted (see `Submission`).
            tracing::debug!(room = %room.room_id(), "A Matrix message edited before it was answered; its edit is answered instead.");
            return false;
        }
        let voice = (self.voice.as_ref())
            .zip(media::media_of(msgtype))
            .filter(|(_, media)| media.audio);
        let Some(addressed) = addressed(this, room, &message, msgtype, voice.is_some()).await
        else {
            return false;
        };
        let Ok(session) = SessionId::new(NAME, room.room_id().as_str()) else {
            return false;
        };
        let quoted = match (&edit_of, &message.content.relates_to) {
            // Current clients send replies without the quoted fallback: what is replied to is
            // fetched, so the agent knows.
            (None, Some(Relation::Reply(reply))) => {
                relations::replied_to(room, &reply.in_reply_to.event_id).await
            }
            _ => None,
        };
        let mut inbound = self
            .inbound(this, room, &message, session, String::new())
            .await;
        // The original, if answered in this batch's place, is handled with its edit.
        let replaces_in_batch = edit_of
            .as_ref()
            .filter(|original| edits.skipped(&sender, original))
            .cloned();
        if replaces_in_batch.is_none() {
            // The router puts it in its original's place if that still waits for its turn.
            inbound.corrects = edit_of;
        }
        if let Ok(mut state) = this.state.lock() {
            state.add(batch);
            if replaces_in_batch.is_some() {
                state.add(batch);
            }
        }
        let submission = Submission {
            dispatch: context.dispatch.clone(),
            state: this.state.clone(),
            waiters: this.waiters.clone(),
            room: room.clone(),
            event_id: message.event_id.clone(),
            batch,
            replaces_in_batch,
        };
        let before = this.chains.take(room.room_id().as_str());
        if let Some((notes, media)) = voice {
            let voice = VoiceMessage {
                notes: notes.clone(),
                client: this.client.clone(),
                attachments: self.attachments.clone(),
                media,
                own: this.own.clone(),
                display_name: this.display_name.clone(),
                addressed,
                quoted,
                inbound,
                submission,
            };
            let handle = this.waiters.spawn(voice.run(before));
            this.chains.set(room.room_id().to_string(), handle);
            return true;
        }
        let (text, images) = self.text_of(this, &inbound.session, msgtype).await;
        inbound.text = match quoted {
            Some(quoted) => format!("{quoted}\n{text}"),
            None => text,
        };
        inbound.images = images;
        match before {
            // A voice message of this room is still being transcribed: this one follows it.
            Some(before) => {
                let handle = this.waiters.spawn(async move {
                    let _ = before.await;
                    submission.submit(inbound);
                });
                this.chains.set(room.room_id().to_string(), handle);
                true
            }
            None => submission.submit(inbound),
        }
    }

    /// The text of a message and the images it brings: a file's saved path (with its
    /// caption), or the body without a reply fallback.
    async fn text_of(
        &self,
        this: &Loop,
        session: &SessionId,
        msgtype: &MessageType,
    ) -> (String, Vec<String>) {
        let Some(media) = media::media_of(msgtype) else {
            let body = msgtype.body();
            return (relations::strip_reply_fallback(body).to_owned(), Vec::new());
        };
        let caption = media.caption.clone();
        let saved = media::receive(&this.client, &self.attachments, session, media).await;
        let text = match caption {
            Some(caption) => format!("{caption}\n{}", saved.text),
            None => saved.text,
        };
        (text, saved.image.into_iter().collect())
    }

    /// The inbound message for `message` in `room`, with its routing, its reply sink and the
    /// room's readers as they are now.
    async fn inbound(
        &self,
        this: &Loop,
        room: &Room,
        message: &OriginalSyncRoomMessageEvent,
        session: SessionId,
        text: String,
    ) -> Inbound {
        let thread = match &message.content.relates_to {
            Some(Relation::Thread(thread)) => Some(ThreadRef {
                root: thread.event_id.clone(),
                latest: message.event_id.clone(),
            }),
            _ => None,
        };
        let sender = message.sender.to_string();
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
        ));
        let origin = self.owner.origin(sender);
        let readers = room_readers(room, &self.owner).await;
        let mut inbound = Inbound::new(session, text, origin, sink).read_by(readers);
        inbound.metadata = metadata;
        inbound.message_id = Some(message.event_id.to_string());
        inbound
    }
}

/// Whether `message` is answered: `None` if not; `Some(true)` whatever it says, `Some(false)`
/// only if its transcript names the bot (a `voice` message, judged as addressed until its
/// words are known, see `VoiceMessage::run`).
async fn addressed(
    this: &Loop,
    room: &Room,
    message: &OriginalSyncRoomMessageEvent,
    msgtype: &MessageType,
    voice: bool,
) -> Option<bool> {
    // Notices are what bots send; answering them is how bot loops start.
    let (body, formatted) = texts(msgtype)?;
    let sender = message.sender.as_str();
    let mentioned_users: Vec<String> = message
        .content
        .mentions
        .as_ref()
        .map(|m| m.user_ids.iter().map(ToString::to_string).collect())
        .unwrap_or_default();
    let facts = MessageFacts {
        room_id: room.room_id().as_str(),
        sender,
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
    let judged = MessageFacts {
        mentioned: facts.mentioned || voice,
        ..facts
    };
    let verdict = this.policy.judge(&judged);
    if verdict != Verdict::Answer {
        tracing::debug!(room = %room.room_id(), sender, verdict = ?verdict, "Matrix message not answered.");
        return None;
    }
    Some(this.policy.judge(&facts) == Verdict::Answer)
}

/// The body and formatted body of a message the bot may answer; `None` for a notice.
fn texts(msgtype: &MessageType) -> Option<(String, Option<String>)> {
    Some(match msgtype {
        MessageType::Text(text) => (
            text.body.clone(),
            text.formatted.as_ref().map(|f| f.body.clone()),
        ),
        MessageType::Emote(emote) => (
            emote.body.clone(),
            emote.formatted.as_ref().map(|f| f.body.clone()),
        ),
        MessageType::Notice(_) => return None,
        other => (other.body().to_owned(), None),
    })
}
