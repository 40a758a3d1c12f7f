//! [`ChannelPlugin`]: everything a channel brings to squidbot, in the channel's own folder.
//!
//! Modelled on Vector's `SourceConfig::build`: from its section of the configuration and one
//! [`PluginContext`], a plug-in builds the running [`Channel`], its `/status` section and the
//! turn tools it adds; it also answers, from the configuration alone, what `squidbot status`
//! says of it, what `squidbot doctor` checks, which of its settings are secrets, who the owner
//! is on it, and what a scheduled job aimed at one of its sessions carries (`route`). The
//! composition root (`src/cli/gateway.rs`), `status`, `doctor`, the redactor and cron each loop
//! over the one list, [`crate::channels::plugins`] (the entries of `channels!` in
//! `src/channels/mod.rs`, then cron), so adding a channel is its folder plus one entry there and
//! no arm anywhere else.
//!
//! A channel a build left out (a cargo feature) stays on the list as [`Unbuilt`], so a
//! configuration that enables it is refused by name instead of being ignored.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value};

use crate::approval::Approvals;
use crate::config::{Config, SecretField};
use crate::core::conversation::Conversations;
use crate::core::origin::Origin;
use crate::core::ports::channel::{ActivityLog, Cause, Channel, Outboxes, TurnTools};
use crate::core::ports::clock::Clock;
use crate::core::ports::llm::LlmClient;
use crate::core::ports::tool::Tool;
use crate::core::redact::Redactor;
use crate::core::session::SessionId;
use crate::gateway::{GatewayState, StatusSection};

use super::owner::Owner;
use super::voice::VoiceNotes;

/// The limit of one network probe a plug-in's doctor checks make (HTTP GET, TCP connect).
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Builds the client of a named LLM pool (the heartbeat's own pool).
pub type PoolBuilder<'a> = &'a (dyn Fn(&str) -> Result<Arc<dyn LlmClient>, Cause> + Sync);

/// What the gateway hands every plug-in it builds: the one context of all channels.
pub struct PluginContext<'a> {
    /// The whole configuration; each plug-in reads its own section.
    pub config: &'a Config,
    /// `$SQUIDBOT_HOME`, where channels keep their state.
    pub home: &'a Path,
    /// The owner's ids, which each channel checks senders against at its edge.
    pub owner: &'a Owner,
    /// The redactor every reply and log line passes (a channel adds what it learns at login).
    pub redactor: &'a Arc<Redactor>,
    /// The gateway's live state (`/status`, `/metrics`, `/readyz`).
    pub state: &'a Arc<GatewayState>,
    /// The running channels' outboxes, for channels that send unasked (the heartbeat).
    pub outboxes: &'a Arc<dyn Outboxes>,
    /// The last session a person talked in.
    pub activity: &'a Arc<dyn ActivityLog>,
    /// The approvals registry, when approvals are on.
    pub approvals: Option<&'a Arc<Approvals>>,
    /// Which session each conversation is in and which model it uses.
    pub conversations: Option<&'a Arc<Conversations>>,
    /// Builds another pool of the configuration.
    pub pool: PoolBuilder<'a>,
    /// The transcriber of voice notes, when `transcription` is configured.
    pub voice: Option<&'a Arc<VoiceNotes>>,
    /// The clock every component reads (cron's schedules).
    pub clock: &'a Arc<dyn Clock>,
}

/// A built channel and what it adds to the gateway.
pub struct Plugged {
    /// The running channel, registered with the supervisor.
    pub channel: Arc<dyn Channel>,
    /// Its `/status` section, if it has state worth showing.
    pub status: Option<Arc<dyn StatusSection>>,
    /// Tools its turns get besides everyone's (`matrix_send_file`).
    pub tools: Option<Arc<dyn TurnTools>>,
}

impl Plugged {
    /// A channel with no status section and no tools of its own.
    pub fn channel(channel: Arc<dyn Channel>) -> Self {
        Self {
            channel,
            status: None,
            tools: None,
        }
    }
}

/// A plug-in could not build its channel (an address taken, a zone unknown).
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct PluginError(Cause);

impl PluginError {
    /// The failure `source`.
    pub fn new(source: impl Into<Cause>) -> Self {
        Self(source.into())
    }
}

/// One line of `squidbot doctor`: what was checked and, when it failed, how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// What was checked.
    pub what: String,
    /// `None` when it passed, else how to fix it.
    pub fix: Option<String>,
}

impl Probe {
    /// A passed check.
    pub fn ok(what: impl Into<String>) -> Self {
        Self {
            what: what.into(),
            fix: None,
        }
    }

    /// A failed check with its fix.
    pub fn fail(what: impl Into<String>, fix: impl Into<String>) -> Self {
        Self {
            what: what.into(),
            fix: Some(fix.into()),
        }
    }
}

/// Who the bot is on a chat channel and whom it answers there, for `squidbot status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The bot's own id (`matrix @bot:server`).
    pub bot: String,
    /// Whom it answers (`matrix: @alex:server (allowlist), …`).
    pub answers: String,
}

/// Where `cron add` without `--target` sends a job, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerTarget {
    /// The session.
    pub session: SessionId,
    /// How it was chosen, for the command's output.
    pub why: String,
}

/// A channel, as its own folder describes it to the rest of squidbot.
#[async_trait]
pub trait ChannelPlugin: Send + Sync {
    /// The channel's name: the prefix of its sessions, the name its owner ids are scoped by.
    fn name(&self) -> &'static str;

    /// Whether `config` turns the channel on.
    fn enabled(&self, config: &Config) -> bool;

    /// Whether this build has the channel (false for [`Unbuilt`]).
    fn built(&self) -> bool {
        true
    }

    /// Builds the enabled channel from `context`.
    fn build(&self, context: &PluginContext<'_>) -> Result<Plugged, PluginError>;

    /// `squidbot doctor`'s checks of the enabled channel (its servers, its login).
    async fn doctor(&self, _config: &Config) -> Vec<Probe> {
        Vec::new()
    }

    /// Its word in the `channels:` line of `squidbot status` (`matrix enabled`), if listed.
    fn summary(&self, _config: &Config) -> Option<String> {
        None
    }

    /// Who the bot is there and whom it answers, when the channel is on.
    fn identity(&self, _config: &Config) -> Option<Identity> {
        None
    }

    /// Lines of its own in `squidbot status` (the heartbeat's schedule).
    fn status_lines(&self, _config: &Config) -> Vec<String> {
        Vec::new()
    }

    /// Its secret settings, for the redactor.
    fn secrets<'a>(&self, _config: &'a Config) -> Vec<SecretField<'a>> {
        Vec::new()
    }

    /// The owner's own conversation on it, the default target of `cron add`: `None` when the
    /// channel is off or has none, `Err` saying what is missing for it.
    fn owner_target(&self, _config: &Config, _home: &Path) -> Option<Result<OwnerTarget, String>> {
        None
    }

    /// The routing data a job named `name` aimed at its session `target` needs, or why it
    /// cannot be aimed there. `current` is the session (with its routing data) the job is
    /// created from, if any.
    fn route(
        &self,
        _target: &SessionId,
        _name: &str,
        _current: Option<(&SessionId, &Map<String, Value>)>,
    ) -> Result<Map<String, Value>, String> {
        Ok(Map::new())
    }
}

/// A channel this build left out: listed so that enabling it is refused by name.
pub struct Unbuilt {
    /// The channel's name (also its cargo feature).
    pub name: &'static str,
    /// Whether the configuration turns it on.
    pub enabled: fn(&Config) -> bool,
}

#[async_trait]
impl ChannelPlugin for Unbuilt {
    fn name(&self) -> &'static str {
        self.name
    }

    fn enabled(&self, config: &Config) -> bool {
        (self.enabled)(config)
    }

    fn built(&self) -> bool {
        false
    }

    fn build(&self, _context: &PluginContext<'_>) -> Result<Plugged, PluginError> {
        Err(PluginError::new(unbuilt_message(self.name)))
    }

    async fn doctor(&self, _config: &Config) -> Vec<Probe> {
        vec![Probe::fail(
            format!("{} channel", self.name),
            unbuilt_message(self.name),
        )]
    }

    /// Says the build lacks it, so `status` never shows a channel as on that cannot run.
    fn summary(&self, config: &Config) -> Option<String> {
        Some(if self.enabled(config) {
            format!("{} enabled but not in this build", self.name)
        } else {
            format!("{} not in this build", self.name)
        })
    }
}

/// What to do about an enabled `channel` this build left out.
pub fn unbuilt_message(channel: &str) -> String {
    format!(
        "channels.{channel}.enabled is true, but this squidbot was built without {channel} \
         (rebuild with `--features {channel}`, or set channels.{channel}.enabled: false)"
    )
}

/// `enabled` or `disabled`, as `squidbot status` says it.
pub fn on(enabled: bool) -> &'static str {
    if enabled { "enabled" } else { "disabled" }
}

/// The owner's ids on `channel`: `listed` (`owner.<channel>`) and the aliases valid there, an
/// alias for every channel counting where `has_form` says it has that channel's form.
pub fn owner_ids(
    config: &Config,
    channel: &str,
    listed: &[String],
    has_form: fn(&str) -> bool,
) -> Vec<String> {
    let aliases = config
        .owner
        .aliases
        .iter()
        .filter(|alias| match &alias.channel {
            Some(only) => only == channel,
            None => has_form(&alias.address),
        });
    listed
        .iter()
        .cloned()
        .chain(aliases.map(|alias| alias.address.clone()))
        .filter(|id| !id.trim().is_empty())
        .collect()
}

/// Everyone's turn tools and the ones the channels add, in list order.
pub struct ChannelTools {
    /// The tools of every turn (`memory_write`, `cron_add`, late MCP tools).
    pub base: Arc<dyn TurnTools>,
    /// The channels' own.
    pub channels: Vec<Arc<dyn TurnTools>>,
}

impl TurnTools for ChannelTools {
    fn for_turn(
        &self,
        session: &SessionId,
        metadata: &Map<String, Value>,
        origin: &Origin,
    ) -> Vec<Arc<dyn Tool>> {
        let mut tools = self.base.for_turn(session, metadata, origin);
        for channel in &self.channels {
            tools.extend(channel.for_turn(session, metadata, origin));
        }
        tools
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_channel_the_build_left_out_is_never_shown_as_running() {
        let config = Config::default();
        let on = Unbuilt {
            name: "matrix",
            enabled: |_| true,
        };
        let off = Unbuilt {
            name: "matrix",
            enabled: |_| false,
        };
        assert_eq!(
            on.summary(&config).as_deref(),
            Some("matrix enabled but not in this build")
        );
        assert_eq!(
            off.summary(&config).as_deref(),
            Some("matrix not in this build")
        );
        assert!(!on.built());
        let probes = on.doctor(&config).await;
        assert_eq!(probes.len(), 1);
        let fix = probes[0].fix.as_deref().unwrap_or_default();
        assert!(fix.contains("rebuild with `--features matrix`"), "{fix}");
    }
}
