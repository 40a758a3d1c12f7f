//! [`CronPlugin`]: cron on the list of channel plug-ins, built like every channel.
//!
//! Cron is no conversation: it has no sessions, owner ids, secrets or routing keys of its own,
//! and it fires its jobs into the sessions of the other channels through their outboxes. But
//! to the gateway it is what the heartbeat is, a supervised task that submits turns on a
//! timer and shows a `/status` section, and that is the part of [`ChannelPlugin`] it
//! implements; the rest keeps the trait's defaults (nothing to say in `status`' channels line,
//! no doctor checks, no target of its own: a job aimed at `cron:…` carries nothing, as before).
//! So the composition root has no arm for it, and its wiring lives here with the rest of cron.

use std::sync::Arc;

use async_trait::async_trait;

use super::channel::CronChannel;
use super::store::CronJobs;
use crate::channels::plugin::{ChannelPlugin, Plugged, PluginContext, PluginError};
use crate::config::Config;
use crate::gateway::StatusSection;

/// The cron scheduler as a plug-in; always on in the gateway.
pub struct CronPlugin;

#[async_trait]
impl ChannelPlugin for CronPlugin {
    fn name(&self) -> &'static str {
        "cron"
    }

    fn enabled(&self, _config: &Config) -> bool {
        true
    }

    fn build(&self, context: &PluginContext<'_>) -> Result<Plugged, PluginError> {
        let cron = Arc::new(CronChannel::new(
            CronJobs::new(context.home),
            context.clock.clone(),
            context.config.cron.missed_runs,
            context.outboxes.clone(),
        ));
        Ok(Plugged {
            channel: cron.clone(),
            status: Some(Arc::new(CronSection(cron))),
            tools: None,
        })
    }
}

/// The cron section of `/status`: every job with its next run, last error and skipped slots.
struct CronSection(Arc<CronChannel>);

#[async_trait]
impl StatusSection for CronSection {
    fn key(&self) -> &str {
        "cron"
    }

    async fn render(&self) -> serde_json::Value {
        match self.0.snapshot().await {
            Ok(jobs) => serde_json::json!({ "jobs": jobs }),
            Err(error) => serde_json::json!({ "error": error.to_string() }),
        }
    }
}
