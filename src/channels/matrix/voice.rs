//! Voice messages (`m.audio`, MSC3245 voice messages among them): transcribed before the
//! mention and policy gates, so a spoken "hey bot" in a room addresses the bot as typed text
//! would, and off the sync loop, so a slow transcription holds no other room.
//!
//! Its hand-over is a [`Submission`], owned so the task can do it once the transcript is
//! there. Order within a room is kept by a chain: while a voice message of a room is being
//! transcribed, the room's later messages wait for it ([`crate::channels::voice::Chains`])
//! and other rooms go on.

use std::sync::Arc;

use tokio::task::JoinHandle;

use super::media::{self, MediaRef};
use super::policy::mentions_bot;
use super::submit::Submission;
use crate::channels::attachments::AttachmentStore;
use crate::channels::voice::{self, NotedReply, VoiceNotes};
use crate::core::ports::channel::Inbound;
use crate::transcription::Audio;

/// A voice message waiting for its transcript, with everything its hand-over needs.
pub(super) struct VoiceMessage {
    pub(super) notes: Arc<VoiceNotes>,
    pub(super) client: matrix_sdk::Client,
    pub(super) attachments: AttachmentStore,
    pub(super) media: MediaRef,
    /// The bot's user id and display name, to find it named in the transcript.
    pub(super) own: String,
    pub(super) display_name: String,
    /// Whether it is answered whatever it says (a DM, a room answering everything, a mention
    /// or reply to the bot); else only if the transcript names the bot.
    pub(super) addressed: bool,
    /// Text before the transcript: what it replies to.
    pub(super) quoted: Option<String>,
    /// The inbound message, its text still to be written.
    pub(super) inbound: Inbound,
    pub(super) submission: Submission,
}

impl VoiceMessage {
    /// Downloads, saves and transcribes the voice message, then hands it over (after
    /// `before`, the room's message ahead of it) if it addresses the bot.
    pub(super) async fn run(self, before: Option<JoinHandle<()>>) {
        let Self {
            notes,
            client,
            attachments,
            media,
            own,
            display_name,
            addressed,
            quoted,
            mut inbound,
            submission,
        } = self;
        let caption = media.caption.clone();
        let (name, mime, duration) = (media.name.clone(), media.mimetype.clone(), media.duration);
        let session = inbound.session.clone();
        let received = media::receive(&client, &attachments, &session, media).await;
        let (text, failure) = match received.audio {
            Some((path, bytes)) => {
                let audio = Audio {
                    bytes,
                    file_name: name,
                    mime,
                    duration,
                    session: Some(session),
                };
                let outcome = notes.transcribe(audio).await;
                let text = voice::told(&outcome, &path.to_string_lossy());
                let heard = outcome.as_ref().ok().map(|t| t.text.as_str());
                let named =
                    heard.is_some_and(|heard| mentions_bot(&own, &display_name, heard, None, &[]));
                if !addressed && !named {
                    tracing::debug!(room = %submission.room.room_id(), "A voice message that does not address the bot; not answered.");
                    if let Some(before) = before {
                        let _ = before.await;
                    }
                    submission.pass();
                    return;
                }
                (text, outcome.err())
            }
            // Not downloaded or not saved: told as any attachment that failed.
            None if addressed => (received.text, None),
            None => {
                submission.pass();
                return;
            }
        };
        let mut parts: Vec<String> = quoted.into_iter().collect();
        parts.extend(caption);
        parts.push(text);
        inbound.text = parts.join("\n");
        if let Some(error) = failure {
            inbound.reply = Arc::new(NotedReply::new(inbound.reply, voice::failure_note(&error)));
        }
        if let Some(before) = before {
            let _ = before.await;
        }
        submission.submit(inbound);
    }
}
