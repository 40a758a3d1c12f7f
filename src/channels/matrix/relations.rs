//! What a reply refers to: the quoted fallback older clients put before a reply is dropped,
//! and the message replied to is fetched, since current clients send no fallback (Matrix 1.13)
//! and the agent would not know what "yes, that one" answers.

use matrix_sdk::Room;
use matrix_sdk::ruma::events::{
    AnySyncMessageLikeEvent, AnySyncTimelineEvent, SyncMessageLikeEvent,
};

/// The most characters of a replied-to message shown with a reply.
const REPLIED_TO_CHARS: usize = 500;

/// `body` without the quoted fallback older clients put before a reply (`> <@a:x> text`
/// lines and a blank line).
pub fn strip_reply_fallback(body: &str) -> &str {
    if !body.starts_with("> <") {
        return body;
    }
    let mut rest = body;
    while let Some(line_end) = rest.find('\n') {
        if !rest.starts_with('>') {
            break;
        }
        rest = &rest[line_end + 1..];
    }
    rest.strip_prefix('\n').unwrap_or(rest)
}

/// A note of the message `event_id` a reply answers: its sender and (shortened) text.
pub async fn replied_to(room: &Room, event_id: &matrix_sdk::ruma::EventId) -> Option<String> {
    let event = match room.event(event_id, None).await {
        Ok(event) => event,
        Err(error) => {
            tracing::debug!(room = %room.room_id(), error = %error, "Could not fetch the message a reply answers.");
            return None;
        }
    };
    let Ok(AnySyncTimelineEvent::MessageLike(AnySyncMessageLikeEvent::RoomMessage(
        SyncMessageLikeEvent::Original(original),
    ))) = event.raw().deserialize()
    else {
        return None;
    };
    let body = strip_reply_fallback(original.content.body());
    let mut quoted: String = body.chars().take(REPLIED_TO_CHARS).collect();
    if body.chars().count() > REPLIED_TO_CHARS {
        quoted.push('…');
    }
    Some(format!("[In reply to {}: «{quoted}»]", original.sender))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quoted_fallback_is_dropped_and_other_text_kept() {
        assert_eq!(
            strip_reply_fallback("> <@a:x.org> meet at 5\n> at the station\n\nyes, that one"),
            "yes, that one"
        );
        assert_eq!(strip_reply_fallback("yes, that one"), "yes, that one");
        assert_eq!(
            strip_reply_fallback("> a quote of my own\nmine"),
            "> a quote of my own\nmine"
        );
    }
}
