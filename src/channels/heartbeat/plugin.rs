//! [`HeartbeatPlugin`]: the heartbeat as the rest of squidbot sees it (see
//! [`crate::channels::plugin`]): built with its own pool, the activity log and the outboxes,
//! `/status` → `heartbeat`, and its schedule in `squidbot status`.

use std::sync::Arc;

use async_trait::async_trait;

use super::HeartbeatChannel;
use crate::channels::plugin::{ChannelPlugin, Plugged, PluginContext, PluginError, on};
use crate::config::Config;
use crate::gateway::status_fn;

/// The channel's name.
const NAME: &str = "heartbeat";

/// The heartbeat's plug-in.
pub struct HeartbeatPlugin;

#[async_trait]
impl ChannelPlugin for HeartbeatPlugin {
    fn name(&self) -> &'static str {
        NAME
    }

    fn enabled(&self, config: &Config) -> bool {
        config.agents.heartbeat.enabled
    }

    /// Its turns run on `agents.heartbeat.pool`, built here unless it is the default pool.
    fn build(&self, cx: &PluginContext<'_>) -> Result<Plugged, PluginError> {
        let config = cx.config;
        let heartbeat = &config.agents.heartbeat;
        let pool = config.pool_or_default(&heartbeat.pool);
        let llm = (pool != config.llm.default_pool)
            .then(|| (cx.pool)(pool))
            .transpose()
            .map_err(PluginError::new)?;
        let channel = HeartbeatChannel::new(
            heartbeat,
            config.agents.workspace.clone(),
            cx.activity.clone(),
            cx.outboxes.clone(),
            llm,
        )
        .map_err(PluginError::new)?;
        let channel = Arc::new(channel);
        let status = channel.clone();
        Ok(Plugged {
            status: Some(Arc::new(status_fn(NAME, move || status.status()))),
            tools: None,
            channel,
        })
    }

    fn status_lines(&self, config: &Config) -> Vec<String> {
        let hb = &config.agents.heartbeat;
        vec![format!(
            "heartbeat:  {} every {} min, {}-{} {}",
            on(hb.enabled),
            hb.interval_minutes,
            hb.active_hours_start,
            hb.active_hours_end,
            hb.timezone
        )]
    }
}
