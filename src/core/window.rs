//! Clean history windows: the API rejects a tool result without its call and a call without
//! all of its results, so windows and consolidation cuts only ever fall on clean points.
//!
//! A *clean point* is an index before which no assistant tool-call message is left without its
//! results. Because results always follow their call directly, any index whose message is not a
//! tool result is clean. History written by a crashed turn can still hold a call whose results
//! never arrived; [`sanitize`] drops such fragments from the prompt (never from the file).

use std::borrow::Borrow;
use std::collections::HashSet;
use std::sync::Arc;

use crate::core::message::{Message, Role};

/// The clean cut nearest to `desired`, searching backwards first (keeping more messages
/// verbatim), then forwards. Returns 0 when `desired` is 0 or no clean point lies in `1..len`.
pub fn clean_cut<M: Borrow<Message>>(messages: &[M], desired: usize) -> usize {
    let desired = desired.min(messages.len());
    if desired == 0 {
        return 0;
    }
    let is_clean = |i: usize| {
        messages
            .get(i)
            .is_none_or(|m| m.borrow().role != Role::Tool)
    };
    (1..=desired)
        .rev()
        .find(|&i| is_clean(i))
        .or_else(|| (desired + 1..messages.len()).find(|&i| is_clean(i)))
        .unwrap_or(0)
}

/// The messages of `window` that form a valid prompt sequence: orphan tool results and tool-call
/// groups whose results are incomplete are left out (the assistant's text, if any, is kept).
///
/// Kept messages are shared, not copied: only an assistant message stripped of its unanswered
/// calls is a new one.
pub fn sanitize<'a>(window: impl IntoIterator<Item = &'a Arc<Message>>) -> Vec<Arc<Message>> {
    let window: Vec<&Arc<Message>> = window.into_iter().collect();
    let mut out = Vec::with_capacity(window.len());
    let mut i = 0;
    while i < window.len() {
        let message = window[i];
        match message.role {
            Role::Tool => i += 1, // An orphan: its call was consolidated or never written.
            Role::Assistant if message.has_tool_calls() => {
                let results_end = (i + 1..window.len())
                    .find(|&j| window[j].role != Role::Tool)
                    .unwrap_or(window.len());
                let results = &window[i + 1..results_end];
                let answered: HashSet<&str> = results
                    .iter()
                    .filter_map(|r| r.tool_call_id.as_deref())
                    .collect();
                let calls = message.tool_calls.as_deref().unwrap_or_default();
                if calls.iter().all(|c| answered.contains(c.id.as_str())) {
                    out.push(Arc::clone(message));
                    let wanted: HashSet<&str> = calls.iter().map(|c| c.id.as_str()).collect();
                    out.extend(
                        results
                            .iter()
                            .filter(|r| {
                                r.tool_call_id
                                    .as_deref()
                                    .is_some_and(|id| wanted.contains(id))
                            })
                            .map(|r| Arc::clone(r)),
                    );
                } else if !message.content.trim().is_empty() {
                    let mut text_only = Message::clone(message);
                    text_only.tool_calls = None;
                    out.push(Arc::new(text_only));
                }
                i = results_end;
            }
            _ => {
                out.push(Arc::clone(message));
                i += 1;
            }
        }
    }
    out
}

/// A rough token count (about four characters a token), enough to decide when to consolidate.
pub fn approx_tokens<'a>(messages: impl IntoIterator<Item = &'a Message>) -> usize {
    messages
        .into_iter()
        .map(Message::approx_chars)
        .sum::<usize>()
        / 4
}

#[cfg(test)]
mod tests {
    use chrono::DateTime;
    use serde_json::json;

    use super::*;
    use crate::core::message::ToolCall;

    fn msg(role: Role, text: &str) -> Message {
        Message::new(
            role,
            text,
            DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z").unwrap(),
        )
    }

    fn call(ids: &[&str]) -> Message {
        let mut m = msg(Role::Assistant, "");
        m.tool_calls = Some(
            ids.iter()
                .map(|id| ToolCall {
                    id: (*id).into(),
                    name: "t".into(),
                    arguments: json!({}),
                    provider_state: None,
                })
                .collect(),
        );
        m
    }

    fn result(id: &str) -> Message {
        let mut m = msg(Role::Tool, "r");
        m.tool_call_id = Some(id.into());
        m
    }

    fn roles(messages: &[Arc<Message>]) -> Vec<Role> {
        messages.iter().map(|m| m.role).collect()
    }

    #[test]
    fn cut_moves_off_tool_results() {
        let h = vec![
            msg(Role::User, "a"),
            call(&["1", "2"]),
            result("1"),
            result("2"),
            msg(Role::Assistant, "b"),
        ];
        for (desired, expected) in [(0, 0), (1, 1), (2, 1), (3, 1), (4, 4), (5, 5)] {
            assert_eq!(clean_cut(&h, desired), expected, "desired {desired}");
        }
        let only_tools = vec![result("x"), result("y")];
        assert_eq!(clean_cut(&only_tools, 1), 0);
    }

    #[test]
    fn sanitize_drops_orphans_and_incomplete_groups() {
        let h = vec![
            result("old"),
            msg(Role::User, "q"),
            call(&["1", "2"]),
            result("1"),
            msg(Role::User, "q2"),
            call(&["3"]),
            result("3"),
            msg(Role::Assistant, "done"),
        ];
        let h: Vec<Arc<Message>> = h.into_iter().map(Arc::new).collect();
        let clean = sanitize(&h);
        assert_eq!(
            roles(&clean),
            vec![
                Role::User,
                Role::User,
                Role::Assistant,
                Role::Tool,
                Role::Assistant
            ]
        );
        // Kept messages are the window's own, not copies.
        assert!(Arc::ptr_eq(&clean[0], &h[1]));
        assert!(Arc::ptr_eq(&clean[4], &h[7]));
    }
}
