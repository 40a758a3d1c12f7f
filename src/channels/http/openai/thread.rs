//! [`Threads`]: which squidbot session an app's conversation is, found from the conversation
//! itself, so an app needs to send nothing squidbot-specific.
//!
//! An app resends its whole conversation with every message. Its *thread* is a digest of the
//! system prompt and the first message; the index keeps, for each thread, the sessions that
//! started so (two conversations that both open with "hi" are two sessions), and for each
//! session the digests of every exchange squidbot answered: the person's text and the reply as
//! it was sent to the app. A request is matched to the session whose replies its assistant
//! messages are, and is then one of:
//!
//! - the next message ([`Kind::Next`]): the app's last reply is the session's last;
//! - a regenerate ([`Kind::Regenerate`]): the app dropped an answer and sends the message it
//!   answered again;
//! - an edit ([`Kind::Edit`]): the app went back to an earlier point and sends another message.
//!
//! The session's history is never rewritten: a regenerate or an edit is a new turn recorded as
//! what it is (see `turn.rs`), and the app's copy of the conversation only finds the session,
//! it is not trusted as the record. An app that knows its conversation's id may say it
//! ([`CONVERSATION_HEADERS`]); the thread is then that id.
//!
//! The index is one JSONL file, `<home>/openai/threads.jsonl`, appended to (through
//! `storage::line_append`) and read whole at start: a line is a hundred bytes per exchange.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::request::{ChatRequest, Speaker};
use crate::storage::line_append::{self, Durability};

/// Headers an app may name its conversation with: squidbot's own, and the one Open WebUI sends
/// with `ENABLE_FORWARD_USER_INFO_HEADERS=true`.
pub const CONVERSATION_HEADERS: [&str; 2] = ["x-squidbot-conversation", "x-openwebui-chat-id"];

/// What a request is to the session it was matched to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The next message of the conversation (or its first).
    Next,
    /// Another answer to a message already answered.
    Regenerate,
    /// A message written in place of an earlier one.
    Edit,
}

/// The session a request belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The session's key (`openai-…`, under the `http` channel).
    pub key: String,
    /// Its thread.
    pub thread: String,
    /// What the request is to it.
    pub kind: Kind,
}

/// One line of the index.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Record {
    session: String,
    thread: String,
    user: String,
    reply: String,
}

/// The digests of one answered message.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Exchange {
    user: String,
    reply: String,
}

#[derive(Debug, Default)]
struct Index {
    /// Each thread's sessions, in the order they started.
    threads: HashMap<String, Vec<String>>,
    /// Each session's exchanges, in order.
    sessions: HashMap<String, Vec<Exchange>>,
}

impl Index {
    fn add(&mut self, record: Record) {
        let sessions = self.threads.entry(record.thread).or_default();
        if !sessions.contains(&record.session) {
            sessions.push(record.session.clone());
        }
        self.sessions
            .entry(record.session)
            .or_default()
            .push(Exchange {
                user: record.user,
                reply: record.reply,
            });
    }
}

/// The conversations index.
#[derive(Debug)]
pub struct Threads {
    dir: PathBuf,
    path: PathBuf,
    /// A std mutex: held to look up or add, never across an await.
    index: Mutex<Index>,
}

/// A short digest of `parts`, each ended by a NUL so the parts cannot run together.
pub fn digest(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part.trim().as_bytes());
        hasher.update([0]);
    }
    hasher.finalize()[..8]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

impl Threads {
    /// The index kept under `home`, read now (a missing file is an empty index; a torn or
    /// foreign line is skipped).
    pub fn open(home: &Path) -> Self {
        let dir = home.join("openai");
        let path = dir.join("threads.jsonl");
        let mut index = Index::default();
        if let Ok(text) = std::fs::read_to_string(&path) {
            for line in text.lines() {
                match serde_json::from_str::<Record>(line) {
                    Ok(record) => index.add(record),
                    Err(error) => {
                        tracing::warn!(path = %path.display(), error = %error, "A line of the OpenAI conversations index is unreadable; skipped.");
                    }
                }
            }
        }
        Self {
            dir,
            path,
            index: Mutex::new(index),
        }
    }

    fn index(&self) -> std::sync::MutexGuard<'_, Index> {
        self.index.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The session `request` belongs to; `named` is the conversation id the app gave, if any.
    pub fn find(&self, request: &ChatRequest, named: Option<&str>) -> Found {
        let first = request
            .turns
            .iter()
            .find(|turn| turn.speaker == Speaker::User)
            .map_or("", |turn| turn.text.as_str());
        let (thread, prefix) = match named {
            Some(name) => (digest(&["named", name]), "openai-id-"),
            None => (digest(&[&request.system, first]), "openai-"),
        };
        let users: Vec<String> = request
            .turns
            .iter()
            .filter(|turn| turn.speaker == Speaker::User)
            .map(|turn| digest(&[&turn.text]))
            .collect();
        let replies: Vec<String> = request
            .turns
            .iter()
            .filter(|turn| turn.speaker == Speaker::Assistant)
            .map(|turn| digest(&[&turn.text]))
            .collect();
        let index = self.index();
        let sessions = index.threads.get(&thread).cloned().unwrap_or_default();
        let exchanges = |key: &String| index.sessions.get(key).cloned().unwrap_or_default();
        // The session most of whose replies the app shows, the latest of equals.
        let best = sessions
            .iter()
            .map(|key| {
                let recorded = exchanges(key);
                let score = replies
                    .iter()
                    .filter(|reply| recorded.iter().any(|e| &e.reply == *reply))
                    .count();
                (score, key)
            })
            .filter(|(score, _)| *score > 0 || replies.is_empty() || named.is_some())
            .max_by_key(|(score, _)| *score);
        let fresh = |n: usize| match n {
            0 => format!("{prefix}{thread}"),
            n => format!("{prefix}{thread}-{}", n + 1),
        };
        let Some((_, key)) = best else {
            // No session has this conversation's replies: it started elsewhere, or squidbot's
            // answers were lost with a crash; the latest session of the thread is the
            // conversation when the app's count of messages agrees, else it is new.
            return match sessions.last() {
                Some(key) if exchanges(key).len() + 1 == users.len() => Found {
                    key: key.clone(),
                    thread,
                    kind: Kind::Next,
                },
                _ => Found {
                    key: fresh(sessions.len()),
                    thread,
                    kind: Kind::Next,
                },
            };
        };
        let recorded = exchanges(key);
        let last_user = users.last().map_or("", String::as_str);
        let kind = match replies.last() {
            None if recorded.is_empty() => Kind::Next,
            None if named.is_none() && recorded.len() > 1 => {
                // A new conversation that opens as an older one did.
                return Found {
                    key: fresh(sessions.len()),
                    thread,
                    kind: Kind::Next,
                };
            }
            None => again_or_edit(recorded.first(), last_user),
            Some(reply) => match recorded.iter().rposition(|e| &e.reply == reply) {
                Some(at) if at + 1 == recorded.len() => Kind::Next,
                Some(at) => again_or_edit(recorded.get(at + 1), last_user),
                None if users.len() == recorded.len() + 1 => Kind::Next,
                None => again_or_edit(recorded.get(users.len() - 1), last_user),
            },
        };
        Found {
            key: key.clone(),
            thread,
            kind,
        }
    }

    /// Records that the session of `found` answered `user` with `reply`, as sent to the app.
    pub async fn record(&self, found: &Found, user: &str, reply: &str) {
        let record = Record {
            session: found.key.clone(),
            thread: found.thread.clone(),
            user: digest(&[user]),
            reply: digest(&[reply]),
        };
        let mut line = match serde_json::to_vec(&record) {
            Ok(line) => line,
            Err(error) => {
                tracing::warn!(error = %error, "An OpenAI conversations record could not be written.");
                return;
            }
        };
        line.push(b'\n');
        self.index().add(record);
        if let Err(error) =
            line_append::append(&self.dir, &self.path, line, Durability::Unsynced, None).await
        {
            tracing::warn!(path = %error.path.display(), op = error.op, error = %error.source, "The OpenAI conversations index could not be appended to; the conversation may start a new session after a restart.");
        }
    }
}

/// A regenerate when the person sends again the message `answered` holds, else an edit.
fn again_or_edit(answered: Option<&Exchange>, user: &str) -> Kind {
    match answered {
        Some(exchange) if exchange.user == user => Kind::Regenerate,
        _ => Kind::Edit,
    }
}
