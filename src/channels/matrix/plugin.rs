//! [`MatrixPlugin`]: the Matrix channel as the rest of squidbot sees it (see
//! [`crate::channels::plugin`]): built with the owner's ids and the redactor, `/status` →
//! `matrix`, `matrix_send_file` in its rooms' turns, the homeserver and login checked by
//! `doctor`, its secrets, the room the owner last wrote in as `cron add`'s default target, and
//! a job's room (and thread) as its routing data.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value};

use super::routing;
use super::{MatrixChannel, MatrixTurnTools};
use crate::channels::plugin::{
    ChannelPlugin, Identity, OwnerTarget, Plugged, PluginContext, PluginError, Probe, on, owner_ids,
};
use crate::config::{Config, GroupPolicy, SecretField};
use crate::core::session::SessionId;
use crate::gateway::status_fn;
use crate::storage::safe_id;

/// The channel's name: its sessions are `matrix:<room id>`.
const NAME: &str = "matrix";

/// The Matrix channel's plug-in.
pub struct MatrixPlugin;

#[async_trait]
impl ChannelPlugin for MatrixPlugin {
    fn name(&self) -> &'static str {
        NAME
    }

    fn enabled(&self, config: &Config) -> bool {
        config.channels.matrix.enabled
    }

    fn build(&self, cx: &PluginContext<'_>) -> Result<Plugged, PluginError> {
        let workspace = &cx.config.agents.workspace;
        let channel = MatrixChannel::new(&cx.config.channels.matrix, cx.home, workspace)
            .with_redactor(cx.redactor.clone())
            .with_owner(cx.owner);
        let channel = Arc::new(match cx.voice {
            Some(voice) => channel.with_voice_notes(voice.clone()),
            None => channel,
        });
        let status = channel.clone();
        let tools = MatrixTurnTools::new(channel.client_slot(), workspace.clone());
        Ok(Plugged {
            status: Some(Arc::new(status_fn(NAME, move || status.status()))),
            tools: Some(Arc::new(tools)),
            channel,
        })
    }

    async fn doctor(&self, config: &Config) -> Vec<Probe> {
        super::doctor::checks(&config.channels.matrix).await
    }

    fn summary(&self, config: &Config) -> Option<String> {
        Some(format!("{NAME} {}", on(self.enabled(config))))
    }

    fn identity(&self, config: &Config) -> Option<Identity> {
        let matrix = &config.channels.matrix;
        if !matrix.enabled {
            return None;
        }
        let policy = match matrix.group_policy {
            GroupPolicy::Open => "every message",
            GroupPolicy::Mention => "messages that mention it",
            GroupPolicy::Allowlist => "the allowlist's messages",
        };
        let allowed = match matrix.allowlist.as_slice() {
            [] => "nobody".to_owned(),
            items => items.join(", "),
        };
        Some(Identity {
            bot: format!("{NAME} {}", matrix.user_id),
            answers: format!("{NAME}: {allowed} (allowlist), in rooms {policy}"),
        })
    }

    fn secrets<'a>(&self, config: &'a Config) -> Vec<SecretField<'a>> {
        let matrix = &config.channels.matrix;
        let field = |name: &str| format!("channels.{NAME}.{name}");
        vec![
            SecretField::new(
                field("access_token"),
                &matrix.access_token,
                &matrix.access_token_env,
            ),
            SecretField::new(field("password"), &matrix.password, &matrix.password_env),
            SecretField::new(
                field("recovery_key"),
                &matrix.recovery_key,
                &matrix.recovery_key_env,
            ),
            SecretField::new(field("store_passphrase"), &matrix.store_passphrase, ""),
        ]
    }

    fn owner_target(&self, config: &Config, home: &Path) -> Option<Result<OwnerTarget, String>> {
        if !config.channels.matrix.enabled {
            return None;
        }
        let is_user_id = |id: &str| id.starts_with('@');
        let ids = owner_ids(config, NAME, &config.owner.matrix, is_user_id);
        Some(if ids.is_empty() {
            Err("Matrix is on but owner.matrix names nobody".to_owned())
        } else if let Some(session) = owner_matrix_room(home, &ids) {
            Ok(OwnerTarget {
                session,
                why: format!(
                    "your Matrix conversation (the room {} last wrote in)",
                    ids.join(" or ")
                ),
            })
        } else {
            Err(format!(
                "no Matrix room has a message from {} yet (write to the bot once)",
                ids.join(" or ")
            ))
        })
    }

    /// A job for the session it is created in keeps its room and thread; otherwise the room
    /// comes from the session id itself (`matrix:!room:server`).
    fn route(
        &self,
        target: &SessionId,
        _name: &str,
        current: Option<(&SessionId, &Map<String, Value>)>,
    ) -> Result<Map<String, Value>, String> {
        let mut metadata = Map::new();
        let same = current.filter(|(session, _)| *session == target);
        if let Some((_, current)) = same
            && let Some(room) = current.get(routing::MATRIX_ROOM_ID)
        {
            metadata.insert(routing::MATRIX_ROOM_ID.into(), room.clone());
            if let Some(root) = current.get(routing::MATRIX_THREAD_ROOT) {
                metadata.insert(routing::MATRIX_THREAD_ROOT.into(), root.clone());
            }
        } else if target.key().starts_with('!') {
            metadata.insert(routing::MATRIX_ROOM_ID.into(), Value::from(target.key()));
        } else {
            return Err("a Matrix target must name a room: matrix:!room:server".into());
        }
        Ok(metadata)
    }
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
        let Some(id) = safe_id::decode(stem).filter(|id| id.starts_with(&format!("{NAME}:!")))
        else {
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
