//! [`ChatCommand`]: the few commands every channel understands, answered by squidbot itself
//! without the LLM: `/help`, `/stop`, `/status`, `/model`, `/new`, `/compact` and `/usage`.
//!
//! A command is control, not conversation: it is not written to the session's history and
//! never reaches the model, so asking for the status does not cost a turn or change the next
//! prompt. Only a person's message is read as a command; a heartbeat or cron prompt that
//! happens to say `/stop` is just text. The text must be the command alone (surrounding
//! whitespace and letter case aside), `/model` with at most one name after it; `/stop now` or
//! `/shrug` go to the model as usual. [`crate::gateway::command_answer`] answers them.

use chrono::{DateTime, TimeDelta, Utc};

use crate::core::ports::store::Tail;
use crate::core::window;

/// A command a person can send on any channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChatCommand {
    /// Lists the commands.
    Help,
    /// Cancels the session's running turn.
    Stop,
    /// A short line about the session: model, size, last consolidation.
    Status,
    /// Lists the models and pools (`None`) or switches the conversation to one.
    Model(Option<String>),
    /// Starts a fresh conversation; the old history stays.
    New,
    /// Summarizes the conversation now.
    Compact,
    /// This conversation's and today's tokens, cache hits and cost.
    Usage,
}

/// What `/help` answers.
pub const HELP: &str = "Commands: /help (this list), /stop (cancel the reply I am working on \
in this conversation), /status (model, conversation size, last summary), /model (list the \
models; /model NAME switches this conversation, /model default goes back), /new (start a fresh \
conversation here; the old one stays searchable), /compact (summarize this conversation now), \
/usage (tokens, cache hits and cost of this conversation and today). Anything else goes to the \
assistant.";

impl ChatCommand {
    /// The command `text` is, if it is one.
    pub fn parse(text: &str) -> Option<Self> {
        let mut words = text.split_whitespace();
        let word = words.next()?;
        let argument = words.next();
        if words.next().is_some() {
            return None;
        }
        if word.eq_ignore_ascii_case("/model") {
            return Some(Self::Model(argument.map(str::to_owned)));
        }
        if argument.is_some() {
            return None;
        }
        [
            ("/help", Self::Help),
            ("/stop", Self::Stop),
            ("/status", Self::Status),
            ("/new", Self::New),
            ("/compact", Self::Compact),
            ("/usage", Self::Usage),
        ]
        .into_iter()
        .find(|(name, _)| word.eq_ignore_ascii_case(name))
        .map(|(_, command)| command)
    }
}

/// The `/status` line of a session: `model: … · conversation: … · last summary: …`.
pub fn status_line(model: &str, tail: &Tail, now: DateTime<Utc>) -> String {
    let tokens = window::approx_tokens(tail.messages.iter().map(|s| &*s.message));
    let summary = match tail.consolidated_at {
        Some(at) => format!(
            "last summary {} ago ({} messages summarized)",
            ago(now - at),
            tail.cursor.messages
        ),
        None => "never summarized".to_owned(),
    };
    format!(
        "model: {model} · conversation: {} messages, {} since the last summary (~{tokens} tokens) · {summary}",
        tail.total(),
        tail.messages.len(),
    )
}

/// A rough age: `40 s`, `12 min`, `5 h`, `3 d`.
fn ago(age: TimeDelta) -> String {
    let seconds = age.num_seconds().max(0);
    match seconds {
        0..60 => format!("{seconds} s"),
        60..3_600 => format!("{} min", seconds / 60),
        3_600..86_400 => format!("{} h", seconds / 3_600),
        _ => format!("{} d", seconds / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_line_names_model_size_and_last_summary() {
        let now = DateTime::parse_from_rfc3339("2026-11-25T12:00:00Z")
            .unwrap()
            .to_utc();
        let mut tail = Tail::default();
        let never = status_line("default: small (x)", &tail, now);
        assert_eq!(
            never,
            "model: default: small (x) · conversation: 0 messages, 0 since the last summary (~0 tokens) · never summarized"
        );
        tail.cursor.messages = 40;
        tail.consolidated_at = Some(now - TimeDelta::minutes(90));
        let line = status_line("m", &tail, now);
        assert!(
            line.ends_with("40 messages, 0 since the last summary (~0 tokens) · last summary 1 h ago (40 messages summarized)"),
            "{line}"
        );
    }

    #[test]
    fn only_a_command_alone_is_a_command() {
        assert_eq!(ChatCommand::parse("/help"), Some(ChatCommand::Help));
        assert_eq!(ChatCommand::parse("  /STOP\n"), Some(ChatCommand::Stop));
        assert_eq!(ChatCommand::parse("/Status"), Some(ChatCommand::Status));
        assert_eq!(ChatCommand::parse(" /new "), Some(ChatCommand::New));
        assert_eq!(ChatCommand::parse("/compact"), Some(ChatCommand::Compact));
        assert_eq!(ChatCommand::parse("/usage"), Some(ChatCommand::Usage));
        assert_eq!(ChatCommand::parse("/model"), Some(ChatCommand::Model(None)));
        assert_eq!(
            ChatCommand::parse("/MODEL big"),
            Some(ChatCommand::Model(Some("big".to_owned())))
        );
        for text in [
            "/stop now",
            "please /stop",
            "/shrug",
            "help",
            "/",
            "",
            "/new chat",
            "/model big please",
        ] {
            assert_eq!(ChatCommand::parse(text), None, "{text:?}");
        }
    }
}
