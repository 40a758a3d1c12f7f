//! [`Resume`]: where a turn stands when its message is handed over again.
//!
//! A channel that acknowledges a message only after its reply is on its way (mail: the
//! `\Seen` flag and the progress file) hands the same message over again after a crash. The
//! user message carries the channel's [`source_id`](crate::core::message::Message::source_id),
//! so the agent loop can find it in the session's tail and neither write it twice nor answer
//! it twice: a turn that already has its answer re-delivers it; one cut short goes on from the
//! history it has (the tool results already written included).

use crate::core::message::Role;
use crate::core::ports::store::{StoredMessage, Tail};

/// What a message handed over again needs.
#[derive(Debug, Clone, PartialEq)]
pub enum Resume {
    /// Not in the tail: a new turn.
    Fresh,
    /// Persisted, not answered: go on from the tail.
    Continue(StoredMessage),
    /// Answered in the history (the delivery may not have happened): this is the answer.
    Answered(String),
}

/// Where the message with `source_id` stands in `tail`.
pub fn resume(tail: &Tail, source_id: &str) -> Resume {
    let Some(at) = tail.messages.iter().rposition(|stored| {
        stored.message.role == Role::User && stored.message.source_id.as_deref() == Some(source_id)
    }) else {
        return Resume::Fresh;
    };
    let answer = tail.messages[at + 1..]
        .iter()
        .find(|stored| stored.message.role == Role::Assistant && !stored.message.has_tool_calls());
    match answer {
        Some(stored) => Resume::Answered(stored.message.content.clone()),
        None => Resume::Continue(tail.messages[at].clone()),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::core::message::{Message, ToolCall};

    fn stored(message: Message, end_offset: u64) -> StoredMessage {
        StoredMessage {
            message: Arc::new(message),
            end_offset,
        }
    }

    fn tail(messages: Vec<Message>) -> Tail {
        Tail {
            messages: messages
                .into_iter()
                .enumerate()
                .map(|(i, m)| stored(m, i as u64 * 10 + 10))
                .collect(),
            ..Tail::default()
        }
    }

    #[test]
    fn a_message_is_found_by_its_source_and_its_answer_after_it() {
        let now = chrono::Utc::now().fixed_offset();
        let mut user = Message::new(Role::User, "hello", now);
        user.source_id = Some("email:7:42".into());
        let mut calls = Message::new(Role::Assistant, "", now);
        calls.tool_calls = Some(vec![ToolCall {
            id: "c1".into(),
            name: "read_file".into(),
            arguments: serde_json::json!({}),
            provider_state: None,
        }]);
        let mut result = Message::new(Role::Tool, "text", now);
        result.tool_call_id = Some("c1".into());
        let earlier = Message::new(Role::Assistant, "an earlier answer", now);

        let cut = tail(vec![earlier.clone(), user.clone(), calls.clone(), result]);
        assert_eq!(resume(&cut, "email:7:43"), Resume::Fresh);
        match resume(&cut, "email:7:42") {
            Resume::Continue(found) => {
                assert_eq!(*found.message, user);
                assert_eq!(found.end_offset, 20);
            }
            other => panic!("{other:?}"),
        }
        let done = tail(vec![
            user.clone(),
            calls,
            Message::new(Role::Assistant, "the answer", now),
        ]);
        assert_eq!(
            resume(&done, "email:7:42"),
            Resume::Answered("the answer".into())
        );
    }
}
