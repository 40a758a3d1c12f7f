//! [`answer`]: what squidbot says to a chat command, the same on every channel.
//!
//! The router (the gateway's channels) and the terminal both parse a person's message with
//! [`ChatCommand::parse`] and hand every command but `/stop` here; `/stop` needs the running
//! turn's cancel token, which each of them keeps its own way. Every answer is about the
//! conversation's *current* session ([`AgentLoop::current_session`]), so after `/new` the
//! status, the model, the summary and the usage are the fresh session's.

use std::fmt::Write as _;

use crate::core::agent_loop::AgentLoop;
use crate::core::conversation::{Conversations, ModelSwitch};
use crate::core::memory_manager::Consolidation;
use crate::core::ports::models::ModelKind;
use crate::core::ports::store::StoreError;
use crate::core::session::SessionId;
use crate::gateway::command::{self, ChatCommand, HELP};

/// What a channel without a way to steer conversations says to `/model` and `/new`.
const NOT_HERE: &str = "Conversations cannot be switched here.";

/// The `/status` line of `session` (see [`command::status_line`]). Reads only, so it does
/// not wait for the session's running turn.
async fn status_line(agent: &AgentLoop, session: &SessionId) -> Result<String, StoreError> {
    let tail = agent.memory().load_tail(session).await?;
    let llm = agent.llm_of(session);
    let now = agent.clock().now().to_utc();
    let mut line = command::status_line(&llm.describe(), &tail, now);
    if let Some(usage) = agent.usage() {
        line.push_str(" · ");
        line.push_str(&usage.status_line().await);
    }
    Ok(line)
}

/// The answer to `command` sent in conversation `key`. `/stop` is the caller's to answer.
pub async fn answer(agent: &AgentLoop, key: &SessionId, command: &ChatCommand) -> String {
    let session = agent.current_session(key);
    let text = match command {
        ChatCommand::Help => HELP.to_owned(),
        ChatCommand::Stop => "Nothing to stop: no reply is being worked on.".to_owned(),
        ChatCommand::Status => match status_line(agent, &session).await {
            Ok(line) => line,
            Err(error) => format!("Error: {error}"),
        },
        ChatCommand::Model(name) => match agent.conversations() {
            None => NOT_HERE.to_owned(),
            Some(conversations) => model(conversations, key, &session, name.as_deref()),
        },
        ChatCommand::New => match agent.conversations() {
            None => NOT_HERE.to_owned(),
            Some(conversations) => match conversations.start_new(key) {
                Ok(fresh) => {
                    tracing::info!(conversation = %key, old = %session, new = %fresh, "New conversation started.");
                    format!(
                        "New conversation started. The previous one stays in the history as {session}; search_history finds it."
                    )
                }
                Err(error) => format!("Error: {error}"),
            },
        },
        ChatCommand::Compact => compact(agent, &session).await,
        ChatCommand::Usage => match agent.usage() {
            Some(usage) => usage.usage_lines(&session).await,
            None => "Usage is not metered here.".to_owned(),
        },
    };
    tracing::info!(session = %session, command = ?command, "Chat command answered.");
    text
}

/// `/model` and `/model NAME`.
fn model(
    conversations: &Conversations,
    key: &SessionId,
    session: &SessionId,
    name: Option<&str>,
) -> String {
    let catalog = conversations.catalog();
    let Some(name) = name else {
        return list(conversations, session);
    };
    match conversations.switch_model(key, name) {
        Ok(ModelSwitch::Switched(entry)) => format!(
            "This conversation now uses {} ({}).",
            entry.name,
            describe(entry.kind, &entry.detail)
        ),
        Ok(ModelSwitch::Default) => format!(
            "This conversation is back on the default, {}.",
            catalog.default_name()
        ),
        Ok(ModelSwitch::Unknown) => format!(
            "There is no model or pool named {name}; nothing changed.\n{}",
            list(conversations, session)
        ),
        Err(error) => format!("Error: {error}"),
    }
}

/// The models and pools, the current one marked.
fn list(conversations: &Conversations, session: &SessionId) -> String {
    let catalog = conversations.catalog();
    let current = conversations
        .model(session)
        .unwrap_or_else(|| catalog.default_name().to_owned());
    let mut text = "Models and pools (* this conversation's):".to_owned();
    for entry in catalog.entries() {
        let mark = if entry.name == current { "*" } else { "-" };
        let _ = write!(
            text,
            "\n{mark} {} ({})",
            entry.name,
            describe(entry.kind, &entry.detail)
        );
        if entry.name == catalog.default_name() && entry.kind == ModelKind::Pool {
            text.push_str(", the default");
        }
    }
    text.push_str("\n/model NAME switches this conversation; /model default goes back.");
    text
}

fn describe(kind: ModelKind, detail: &str) -> String {
    match kind {
        ModelKind::Pool => format!("pool: {detail}"),
        ModelKind::Model => format!("model: {detail}"),
    }
}

/// `/compact`: consolidates the session now, under its mutex (so after a running turn).
async fn compact(agent: &AgentLoop, session: &SessionId) -> String {
    let _guard = agent.locks().lock(session).await;
    let memory = agent.memory();
    let mut tail = match memory.load_tail(session).await {
        Ok(tail) => tail,
        Err(error) => return format!("Error: {error}"),
    };
    let waiting = tail.messages.len();
    match memory.consolidate_now(session, &mut tail).await {
        Ok(Consolidation::Done {
            messages,
            compressed,
            ..
        }) => {
            let mut text = format!(
                "Summarized {messages} messages; the newest {} stay as they are.",
                tail.messages.len()
            );
            if compressed {
                text.push_str(" The summary was also shortened.");
            }
            text
        }
        Ok(Consolidation::NotDue) => format!(
            "Nothing to summarize: {waiting} messages since the last summary, and the newest {} always stay as they are.",
            memory.settings().keep_recent
        ),
        Ok(Consolidation::Failed) => "The summary failed; nothing changed.".to_owned(),
        Ok(Consolidation::NoLlm) => {
            "No model is configured for summaries; nothing changed.".to_owned()
        }
        Err(error) => format!("Error: {error}"),
    }
}
