//! The owner's own conversation, as the default target of a job added from the shell.
//!
//! A new owner does not know their session ids: a Matrix session is named after the room
//! (`matrix:!AbCd:server`), which no client shows by default. The owner ids in the
//! configuration and the stored histories say it: the Matrix room the owner last wrote in
//! is their conversation; a mail session is `email:<lower-cased address>` (as the email
//! channel forms it), so the owner's first address names it even before any mail.
//! Matrix is preferred when both channels are on: a scheduled reply there arrives as a chat
//! message rather than a new mail.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use crate::config::Config;
use crate::core::session::SessionId;
use crate::storage::safe_id;

/// Where `cron add` without `--target` sends a job, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerTarget {
    /// The session.
    pub session: SessionId,
    /// How it was chosen, for the command's output.
    pub why: String,
}

/// The owner's ids on `channel`: `owner.<channel>` and the aliases valid there.
fn owner_ids(config: &Config, channel: &str) -> Vec<String> {
    let listed = match channel {
        "matrix" => &config.owner.matrix,
        _ => &config.owner.email,
    };
    let aliases = config
        .owner
        .aliases
        .iter()
        .filter(|alias| match &alias.channel {
            Some(only) => only == channel,
            // An alias for every channel counts where it has that channel's form.
            None => alias.address.starts_with('@') == (channel == "matrix"),
        });
    listed
        .iter()
        .cloned()
        .chain(aliases.map(|alias| alias.address.clone()))
        .filter(|id| !id.trim().is_empty())
        .collect()
}

/// The newest time (RFC 3339 text, which sorts) one of `ids` wrote in the history `path`.
fn last_written_by(path: &Path, ids: &[String]) -> Option<String> {
    let file = File::open(path).ok()?;
    let mut newest: Option<String> = None;
    for line in BufReader::new(file).lines().map_while(Result::ok) {
        if !ids.iter().any(|id| line.contains(id.as_str())) {
            continue;
        }
        let Ok(record) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        let sender = record["sender_id"].as_str().unwrap_or_default();
        if record["role"] != "user" || !ids.iter().any(|id| id == sender) {
            continue;
        }
        // Stored times carry their offset; compared as instants, not text.
        let Some(at) = record["timestamp"]
            .as_str()
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        else {
            continue;
        };
        let at = at.to_utc().to_rfc3339();
        if newest.as_ref().is_none_or(|n| *n < at) {
            newest = Some(at);
        }
    }
    newest
}

/// The Matrix room the owner last wrote in, from the stored histories under `home`.
fn owner_matrix_room(home: &Path, ids: &[String]) -> Option<SessionId> {
    let entries = std::fs::read_dir(home.join("sessions")).ok()?;
    let mut best: Option<(String, SessionId)> = None;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(stem) = name.to_str().and_then(|n| n.strip_suffix(".jsonl")) else {
            continue;
        };
        let Some(id) = safe_id::decode(stem).filter(|id| id.starts_with("matrix:!")) else {
            continue;
        };
        let Ok(session) = SessionId::parse(&id) else {
            continue;
        };
        if let Some(at) = last_written_by(&entry.path(), ids)
            && best.as_ref().is_none_or(|(newest, _)| *newest < at)
        {
            best = Some((at, session));
        }
    }
    best.map(|(_, session)| session)
}

/// The owner's own conversation on the configured channels (Matrix first, then email), or
/// why there is none, saying what to pass instead.
pub fn owner_target(config: &Config, home: &Path) -> Result<OwnerTarget, String> {
    let mut missing = Vec::new();
    if config.channels.matrix.enabled {
        let ids = owner_ids(config, "matrix");
        if ids.is_empty() {
            missing.push("Matrix is on but owner.matrix names nobody".to_owned());
        } else if let Some(session) = owner_matrix_room(home, &ids) {
            return Ok(OwnerTarget {
                session,
                why: format!(
                    "your Matrix conversation (the room {} last wrote in)",
                    ids.join(" or ")
                ),
            });
        } else {
            missing.push(format!(
                "no Matrix room has a message from {} yet (write to the bot once)",
                ids.join(" or ")
            ));
        }
    }
    if config.channels.email.enabled {
        match owner_ids(config, "email").first() {
            Some(address) => {
                let key = address.trim().to_lowercase();
                if let Ok(session) = SessionId::new("email", &key) {
                    return Ok(OwnerTarget {
                        session,
                        why: format!("your mail conversation ({key})"),
                    });
                }
                missing.push(format!("owner.email {address:?} is not an address"));
            }
            None => missing.push("email is on but owner.email names nobody".to_owned()),
        }
    }
    if missing.is_empty() {
        missing.push("neither the Matrix nor the email channel is enabled".to_owned());
    }
    Err(format!(
        "no default target: {}; pass --target SESSION (e.g. 'matrix:!room:server' or email:you@example.org)",
        missing.join("; ")
    ))
}

/// `session` as it can be pasted into a shell: single-quoted when it has characters a shell
/// reads (a Matrix room id's `!` is history expansion in an interactive bash).
pub fn shell_quoted(session: &str) -> String {
    let plain = session
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "@%+=:,./_-".contains(c));
    if plain {
        session.to_owned()
    } else {
        format!("'{}'", session.replace('\'', r"'\''"))
    }
}
