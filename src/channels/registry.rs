//! The one list of channel plug-ins, and what squidbot asks of all of them at once.
//!
//! [`plugins`] is the list: the composition root builds the enabled ones from it, the gateway
//! and `doctor` refuse the ones a build left out, `squidbot status` describes them, the
//! redactor takes their secrets, and cron asks them where a job's replies go ([`Routes`]) and
//! which conversation is the owner's ([`owner_target`]). Adding a channel adds one entry here.

use std::path::Path;

use serde_json::{Map, Value};

use super::plugin::{ChannelPlugin, OwnerTarget};
use crate::config::{Config, SecretField};
use crate::core::session::SessionId;
use crate::cron::admin::JobRoutes;

/// A plug-in of a channel behind a cargo feature: the channel when built, else [`Unbuilt`]
/// under the feature's name, turned on by `$enabled`.
///
/// [`Unbuilt`]: super::plugin::Unbuilt
macro_rules! gated {
    ($feature:tt, $plugin:expr, $enabled:expr) => {{
        #[cfg(feature = $feature)]
        let plugin: Box<dyn ChannelPlugin> = Box::new($plugin);
        #[cfg(not(feature = $feature))]
        let plugin: Box<dyn ChannelPlugin> = Box::new(super::plugin::Unbuilt {
            name: $feature,
            enabled: $enabled,
        });
        plugin
    }};
}

/// Every channel the gateway can run, in the order it starts them; cron, which fires jobs into
/// the others' sessions, last (`src/cron/plugin.rs` says why it is on this list).
pub fn plugins() -> Vec<Box<dyn ChannelPlugin>> {
    vec![
        Box::new(super::http::HttpPlugin),
        gated!("matrix", super::matrix::MatrixPlugin, |config| config
            .channels
            .matrix
            .enabled),
        Box::new(super::heartbeat::HeartbeatPlugin),
        gated!("email", super::email::EmailPlugin, |config| config
            .channels
            .email
            .enabled),
        Box::new(crate::cron::plugin::CronPlugin),
    ]
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
