//! Summarizing old messages: the prompts and the two LLM calls of consolidation.
//!
//! Only user and assistant text goes into a summary (tool traffic is bulky and its outcome is in
//! the assistant's words). A call that fails or returns nothing yields `None`, and the caller
//! then changes nothing: the raw messages stay in context and the next turn tries again.

use std::sync::Arc;

use crate::core::message::{Message, Role};
use crate::core::origin::Origin;
use crate::core::ports::llm::{ChatRequest, LlmClient};
use crate::core::ports::usage::{CallTag, Purpose};
use crate::core::session::SessionId;

const SUMMARY_SYSTEM: &str = "You are a memory consolidation assistant. You write concise, \
factual summaries of conversation history. Output only the summary text: no preamble, no \
commentary.";

const META_SYSTEM: &str = "You are a memory consolidation assistant. You are given a session \
summary that has grown too long. Compress it, keeping every fact, decision, name, date and open \
task. Output only the summary text: no preamble, no commentary.";

/// The longest single message fed to the summarizer, in characters; longer ones are cut so one
/// pasted log cannot overflow the summarizer's own context.
const MAX_MESSAGE_CHARS: usize = 4_000;

/// Renders the messages to summarize as `role: text` lines, user and assistant text only.
pub fn transcript<'a>(messages: impl IntoIterator<Item = &'a Message>) -> String {
    let mut out = String::new();
    for message in messages {
        let role = match message.role {
            Role::User => message
                .sender_id
                .as_deref()
                .filter(|sender| Origin::is_heartbeat_sender(sender))
                .unwrap_or("user"),
            Role::Assistant => "assistant",
            Role::System | Role::Tool => continue,
        };
        let text = message.content.trim();
        if text.is_empty() {
            continue;
        }
        out.push_str(role);
        out.push_str(": ");
        if text.chars().count() > MAX_MESSAGE_CHARS {
            out.extend(text.chars().take(MAX_MESSAGE_CHARS));
            out.push_str(" [...]");
        } else {
            out.push_str(text);
        }
        out.push('\n');
    }
    out
}

/// Asks the LLM for a summary of `transcript` (which holds `n_messages` messages of
/// `session`).
pub async fn summarize(
    llm: &dyn LlmClient,
    session: &SessionId,
    transcript: &str,
    n_messages: usize,
) -> Option<String> {
    let sentences = (n_messages / 10).max(5);
    let prompt = format!(
        "Summarize the following conversation into a concise memory entry. Keep key facts, \
         decisions, preferences and open tasks; drop small talk.\n\nConversation:\n{transcript}\n\
         Write about {sentences} sentences."
    );
    let call = CallTag {
        session: Some(session),
        ..CallTag::new(Purpose::Consolidation)
    };
    complete(llm, call, SUMMARY_SYSTEM, &prompt, "Consolidation").await
}

/// Asks the LLM to rewrite an overlong summary of `session` into a compact one.
pub async fn compress(llm: &dyn LlmClient, session: &SessionId, summary: &str) -> Option<String> {
    let prompt = format!(
        "This session summary has grown too long:\n\n{summary}\n\nRewrite it as a compact \
         summary of about 8 sentences. Keep all facts, decisions and context."
    );
    let call = CallTag {
        session: Some(session),
        ..CallTag::new(Purpose::Compression)
    };
    complete(llm, call, META_SYSTEM, &prompt, "Meta-consolidation").await
}

/// Counts words the way the limit is defined: whitespace-separated tokens.
pub fn word_count(text: &str) -> usize {
    text.split_whitespace().count()
}

async fn complete(
    llm: &dyn LlmClient,
    call: CallTag<'_>,
    system: &str,
    prompt: &str,
    what: &str,
) -> Option<String> {
    let now = chrono::Utc::now().fixed_offset();
    let messages = [
        Arc::new(Message::new(Role::System, system, now)),
        Arc::new(Message::new(Role::User, prompt, now)),
    ];
    let request = ChatRequest {
        messages: &messages,
        tools: &[],
        call,
    };
    match llm.chat(request, &|_| {}).await {
        Ok(response) if !response.text.trim().is_empty() => Some(response.text.trim().to_owned()),
        Ok(_) => {
            tracing::warn!(
                llm = llm.name(),
                "{what} returned no text; nothing was changed."
            );
            None
        }
        Err(error) => {
            tracing::warn!(llm = llm.name(), error = %error, "{what} failed; nothing was changed.");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::DateTime;

    use super::*;

    #[test]
    fn transcript_keeps_only_user_and_assistant_text() {
        let ts = DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z").unwrap();
        let mut tool = Message::new(Role::Tool, "tool output", ts);
        tool.tool_call_id = Some("1".into());
        let messages = [
            Message::new(Role::User, "hello", ts),
            Message::new(Role::Assistant, "", ts),
            tool,
            Message::new(Role::Assistant, "hi there", ts),
        ];
        assert_eq!(transcript(&messages), "user: hello\nassistant: hi there\n");
    }
}
