//! Edits that arrive with the message they edit: within one list of events about to be
//! handled (a sync batch, a gap paged back), a message whose edit follows is not answered on
//! its own; the edit is, in its place (see `inbound`).

use std::collections::HashSet;

use matrix_sdk::deserialized_responses::TimelineEvent;
use matrix_sdk::ruma::events::room::message::Relation;
use matrix_sdk::ruma::events::{
    AnySyncMessageLikeEvent, AnySyncTimelineEvent, SyncMessageLikeEvent,
};

/// The edits among a list of events about to be handled, by (sender, original event id).
#[derive(Debug, Default)]
pub(super) struct Edits {
    originals: HashSet<(String, String)>,
    /// Originals not handed over because their edit follows.
    skipped: HashSet<(String, String)>,
}

impl Edits {
    /// The edits in `events`.
    pub(super) fn of<'a>(events: impl IntoIterator<Item = &'a TimelineEvent>) -> Self {
        let originals = events
            .into_iter()
            .filter_map(|event| match event.raw().deserialize() {
                Ok(AnySyncTimelineEvent::MessageLike(AnySyncMessageLikeEvent::RoomMessage(
                    SyncMessageLikeEvent::Original(message),
                ))) => match message.content.relates_to {
                    Some(Relation::Replacement(replacement)) => {
                        Some((message.sender.to_string(), replacement.event_id.to_string()))
                    }
                    _ => None,
                },
                _ => None,
            })
            .collect();
        Self {
            originals,
            skipped: HashSet::new(),
        }
    }

    /// Whether `sender`'s message `event_id` is edited later in the same list, so that the
    /// edit is handed over in its place; remembered for [`Self::skipped`].
    pub(super) fn skip(&mut self, sender: &str, event_id: &str) -> bool {
        let key = (sender.to_owned(), event_id.to_owned());
        if !self.originals.contains(&key) {
            return false;
        }
        self.skipped.insert(key);
        true
    }

    /// Whether `sender`'s message `event_id` was skipped for its edit.
    pub(super) fn skipped(&self, sender: &str, event_id: &str) -> bool {
        self.skipped
            .contains(&(sender.to_owned(), event_id.to_owned()))
    }
}
