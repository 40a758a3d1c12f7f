//! [`EmailPlugin`]: the email channel as the rest of squidbot sees it (see
//! [`crate::channels::plugin`]): built with the owner's addresses, `/status` → `email`, both
//! logins checked by `doctor`, its password, the owner's address as `cron add`'s default
//! target, and a subject for a job's mail.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value};

use super::EmailChannel;
use super::routing;
use crate::channels::plugin::{
    ChannelPlugin, Identity, OwnerTarget, Plugged, PluginContext, PluginError, Probe, on, owner_ids,
};
use crate::config::{Config, SecretField};
use crate::core::session::SessionId;
use crate::gateway::status_fn;

/// The channel's name: its sessions are `email:<lower-cased sender address>`.
const NAME: &str = "email";

/// The email channel's plug-in.
pub struct EmailPlugin;

#[async_trait]
impl ChannelPlugin for EmailPlugin {
    fn name(&self) -> &'static str {
        NAME
    }

    fn enabled(&self, config: &Config) -> bool {
        config.channels.email.enabled
    }

    fn build(&self, cx: &PluginContext<'_>) -> Result<Plugged, PluginError> {
        let email = &cx.config.channels.email;
        let workspace = &cx.config.agents.workspace;
        let channel = EmailChannel::new(email, cx.home, workspace).map_err(PluginError::new)?;
        let channel = channel.with_owner(cx.owner);
        let channel = Arc::new(match cx.voice {
            Some(voice) => channel.with_voice_notes(voice.clone()),
            None => channel,
        });
        let status = channel.clone();
        Ok(Plugged {
            status: Some(Arc::new(status_fn(NAME, move || status.status()))),
            tools: None,
            channel,
        })
    }

    async fn doctor(&self, config: &Config) -> Vec<Probe> {
        super::doctor::checks(&config.channels.email).await
    }

    fn summary(&self, config: &Config) -> Option<String> {
        Some(format!("{NAME} {}", on(self.enabled(config))))
    }

    fn identity(&self, config: &Config) -> Option<Identity> {
        let email = &config.channels.email;
        if !email.enabled {
            return None;
        }
        let allowed = match email.allow_from.as_slice() {
            [] => "nobody".to_owned(),
            items => items.join(", "),
        };
        Some(Identity {
            bot: format!("{NAME} {}", email.from_address),
            answers: format!("{NAME}: {allowed} (allow_from)"),
        })
    }

    fn secrets<'a>(&self, config: &'a Config) -> Vec<SecretField<'a>> {
        let email = &config.channels.email;
        vec![SecretField::new(
            format!("channels.{NAME}.password"),
            &email.password,
            &email.password_env,
        )]
    }

    /// The owner's first address names their mail conversation even before any mail.
    fn owner_target(&self, config: &Config, _home: &Path) -> Option<Result<OwnerTarget, String>> {
        if !config.channels.email.enabled {
            return None;
        }
        let is_address = |id: &str| !id.starts_with('@');
        let ids = owner_ids(config, NAME, &config.owner.email, is_address);
        let Some(address) = ids.first() else {
            return Some(Err("email is on but owner.email names nobody".to_owned()));
        };
        let key = address.trim().to_lowercase();
        Some(match SessionId::new(NAME, &key) {
            Ok(session) => Ok(OwnerTarget {
                session,
                why: format!("your mail conversation ({key})"),
            }),
            Err(_) => Err(format!("owner.email {address:?} is not an address")),
        })
    }

    /// A job's mail gets the subject `[squidbot] <name>`.
    fn route(
        &self,
        _target: &SessionId,
        name: &str,
        _current: Option<(&SessionId, &Map<String, Value>)>,
    ) -> Result<Map<String, Value>, String> {
        let mut metadata = Map::new();
        metadata.insert(
            routing::EMAIL_SUBJECT.into(),
            Value::from(format!("[squidbot] {name}")),
        );
        Ok(metadata)
    }
}
