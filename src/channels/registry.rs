//! The one list of channel plug-ins, and what squidbot asks of all of them at once.
//!
//! [`plugins`] is the list: the composition root builds the enabled ones from it, the gateway
//! and `doctor` refuse the ones a build left out, `squidbot status` describes them, the
//! redactor takes their secrets, and cron asks them where a job's replies go ([`Routes`]) and
//! which conversation is the owner's ([`owner_target`]). Adding a channel adds one entry to the
//! list in `src/channels/mod.rs` (`channels!`), which this reads.

use std::path::Path;

use serde_json::{Map, Value};

use super::plugin::{ChannelPlugin, OwnerTarget};
use crate::config::{Config, SecretField};
use crate::core::session::SessionId;
use crate::cron::admin::JobRoutes;

/// Every channel the gateway can run, in the order it starts them: the list in
/// `src/channels/mod.rs`, then cron, which fires jobs into the others' sessions
/// (`src/cron/plugin.rs` says why it is on this list).
pub fn plugins() -> Vec<Box<dyn ChannelPlugin>> {
    let mut plugins = super::listed();
    plugins.push(Box::new(crate::cron::plugin::CronPlugin));
    plugins
}

/// The enabled channels this build left out.
pub fn unbuilt(config: &Config) -> Vec<&'static str> {
    plugins()
        .iter()
        .filter(|plugin| !plugin.built() && plugin.enabled(config))
        .map(|plugin| plugin.name())
        .collect()
}

/// Every channel's secret settings, in list order.
pub fn secret_fields(config: &Config) -> Vec<SecretField<'_>> {
    plugins()
        .iter()
        .flat_map(|plugin| plugin.secrets(config))
        .collect()
}

/// Routes a job by the plug-in of its target's channel.
pub struct Routes(Vec<Box<dyn ChannelPlugin>>);

impl Routes {
    /// The routes of every channel on the list.
    pub fn new() -> Self {
        Self(plugins())
    }
}

impl Default for Routes {
    fn default() -> Self {
        Self::new()
    }
}

impl JobRoutes for Routes {
    fn route(
        &self,
        target: &SessionId,
        name: &str,
        current: Option<(&SessionId, &Map<String, Value>)>,
    ) -> Result<Map<String, Value>, String> {
        match self
            .0
            .iter()
            .find(|plugin| plugin.name() == target.channel())
        {
            Some(plugin) => plugin.route(target, name, current),
            None => Ok(Map::new()),
        }
    }
}

/// The owner's own conversation on the enabled channels (in list order), or why there is
/// none, saying what to pass instead.
pub fn owner_target(config: &Config, home: &Path) -> Result<OwnerTarget, String> {
    let mut missing = Vec::new();
    for plugin in plugins() {
        match plugin.owner_target(config, home) {
            Some(Ok(found)) => return Ok(found),
            Some(Err(reason)) => missing.push(reason),
            None => {}
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{LoadedConfig, load_from_str};

    fn load(yaml: &str) -> LoadedConfig {
        let home = Path::new("/nonexistent/squidbot-home");
        load_from_str(yaml, &home.join("squidbot.yaml"), home)
            .unwrap_or_else(|error| panic!("{error}\n{yaml}"))
    }

    fn names() -> Vec<&'static str> {
        plugins().iter().map(|plugin| plugin.name()).collect()
    }

    #[test]
    fn the_list_starts_the_channels_in_its_order_and_cron_last() {
        assert_eq!(names(), ["http", "matrix", "heartbeat", "email", "cron"]);
    }

    /// The entry's settings are the section that turns its own plug-in on: each `channels:`
    /// field enables the plug-in of the same name and no other.
    #[test]
    fn each_channels_section_turns_on_its_own_plug_in() {
        let base = load("agents:\n  heartbeat:\n    enabled: false\n").config;
        for (name, yaml) in [
            (
                "matrix",
                "channels:\n  matrix:\n    enabled: true\n    homeserver: http://127.0.0.1:1\n    user_id: '@bot:x'\n    access_token: t\n",
            ),
            (
                "email",
                "channels:\n  email:\n    enabled: true\n    imap_host: h\n    smtp_host: h\n    username: u\n    password: p\n    from_address: bot@x.org\n",
            ),
        ] {
            let yaml = format!("{yaml}agents:\n  heartbeat:\n    enabled: false\n");
            let config = load(&yaml).config;
            let on: Vec<_> = plugins()
                .iter()
                .filter(|plugin| plugin.enabled(&config) && !plugin.enabled(&base))
                .map(|plugin| plugin.name())
                .collect();
            assert_eq!(on, [name], "{yaml}");
        }
        assert_eq!(base.channels.sections().len(), 2, "matrix and email");
    }
}
