//! Filling the gap a `limited` sync leaves: the messages sent while the bot was away (down,
//! offline, or outpaced by a busy room) that the sync did not return.
//!
//! Synapse returns at most the last ten events of a room per sync; when more arrived since
//! the last one, the timeline comes back `limited`. Paging back from the first event the sync
//! returned (`/context` for the events just before it, then `/messages` from its start token;
//! the SDK decrypts both like synced events) until an event the channel already handed over,
//! the bot's own message, its join or its invite recovers what was missed. (Paging from the sync's own
//! `prev_batch` skipped the event just before the timeline on Synapse.)
//! the channel then treats each recovered message like a live one, oldest first. The paging
//! is bounded ([`MAX_EVENTS`]): a gap longer than that is logged with how far it reached.

use matrix_sdk::Room;
use matrix_sdk::deserialized_responses::TimelineEvent;
use matrix_sdk::room::MessagesOptions;
use matrix_sdk::ruma::events::room::member::MembershipState;
use matrix_sdk::ruma::events::{AnySyncStateEvent, AnySyncTimelineEvent, SyncStateEvent};
use matrix_sdk::ruma::{EventId, UInt};

/// The most events paged back over one gap.
pub const MAX_EVENTS: usize = 500;
/// Events per `/messages` request.
const PAGE: u32 = 100;

/// What paging back found.
#[derive(Debug, Default)]
pub struct Recovered {
    /// The missed events, oldest first.
    pub events: Vec<TimelineEvent>,
    /// Whether the paging reached where the channel left off (else it stopped at the bound
    /// or on an error, and older messages stay unrecovered).
    pub complete: bool,
}

/// Pages back in `room` from just before the event `first` until `seen` says an event was
/// handled, or the bot (`own`) spoke or joined; returns the events in between.
pub async fn recover(
    room: &Room,
    first: &EventId,
    own: &str,
    seen: impl Fn(&str) -> bool,
) -> Recovered {
    let mut recovered = Recovered::default();
    let context = room
        .event_with_context(first, false, UInt::from(PAGE), None)
        .await;
    let (mut page, mut from) = match context {
        Ok(context) => (context.events_before, context.prev_batch_token),
        Err(error) => {
            tracing::warn!(room = %room.room_id(), error = %error, "Could not page back over a Matrix sync gap.");
            return recovered;
        }
    };
    loop {
        for event in page {
            if event.event_id().is_some_and(|id| seen(id.as_str())) || is_own(&event, own) {
                recovered.complete = true;
                break;
            }
            recovered.events.push(event);
            if recovered.events.len() >= MAX_EVENTS {
                break;
            }
        }
        if recovered.complete || recovered.events.len() >= MAX_EVENTS {
            break;
        }
        // No token: the start of the room's visible history.
        let Some(token) = from.take() else {
            recovered.complete = true;
            break;
        };
        let mut options = MessagesOptions::backward();
        options.from = Some(token);
        options.limit = UInt::from(PAGE);
        match room.messages(options).await {
            Ok(messages) if !messages.chunk.is_empty() => {
                page = messages.chunk;
                from = messages.end;
            }
            Ok(_) => {
                recovered.complete = true;
                break;
            }
            Err(error) => {
                tracing::warn!(room = %room.room_id(), error = %error, "Could not page back over a Matrix sync gap.");
                break;
            }
        }
    }
    recovered.events.reverse();
    recovered
}

/// Whether `event` was sent by the bot, or is its own invite or join (where it came in).
fn is_own(event: &TimelineEvent, own: &str) -> bool {
    match event.raw().deserialize() {
        Ok(AnySyncTimelineEvent::State(AnySyncStateEvent::RoomMember(
            SyncStateEvent::Original(member),
        ))) if member.state_key.as_str() == own => matches!(
            member.content.membership,
            MembershipState::Join | MembershipState::Invite
        ),
        Ok(event) => event.sender().as_str() == own,
        Err(_) => false,
    }
}
