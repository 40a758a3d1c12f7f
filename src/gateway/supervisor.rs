//! [`Supervisor`]: one task per channel, restarted with capped exponential backoff (unless
//! its error is permanent, such as a refused login: it is then reported broken, not retried).
//!
//! A channel task that returns an error, returns early or panics is logged with its name,
//! shown as `failing` in `/status`, counted in `squidbot_channel_restarts_total`, and started
//! again after 1 s, 2 s, 4 s … up to 60 s (reset after a run of a minute or more). It never
//! takes the other channels or the daemon down. On shutdown every task is asked to stop through
//! the shared cancellation token and awaited.

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use async_trait::async_trait;

use super::state::{ChannelPhase, GatewayState};
use crate::core::ports::channel::{Channel, ChannelContext, Dispatch, NoRoute, Outbox, Outboxes};
use crate::core::session::SessionId;
use crate::gateway::backoff::Backoff;

/// Delays between restarts: 1 s doubling to 60 s.
pub const RESTART_BACKOFF: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
/// A run at least this long resets the backoff.
const HEALTHY_RUN: Duration = Duration::from_secs(60);

/// The channels of the gateway, by name; also the outbox lookup for cron and heartbeat.
pub struct ChannelDirectory {
    channels: RwLock<Vec<Arc<dyn Channel>>>,
    state: Arc<GatewayState>,
}

impl ChannelDirectory {
    /// An empty directory.
    pub fn new(state: Arc<GatewayState>) -> Self {
        Self {
            channels: RwLock::default(),
            state,
        }
    }

    /// Adds a channel.
    pub fn register(&self, channel: Arc<dyn Channel>) {
        self.channels
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .push(channel);
    }

    /// Every registered channel.
    pub fn all(&self) -> Vec<Arc<dyn Channel>> {
        self.channels
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

#[async_trait]
impl Outboxes for ChannelDirectory {
    async fn outbox(
        &self,
        session: &SessionId,
        metadata: &Map<String, Value>,
    ) -> Result<Outbox, NoRoute> {
        let name = session.channel();
        let no_route = |reason: String| NoRoute {
            session: session.to_string(),
            reason,
        };
        let channel = self
            .all()
            .into_iter()
            .find(|c| c.name() == name)
            .ok_or_else(|| no_route(format!("no channel {name:?} is configured")))?;
        if !self.state.channel_running(name) {
            return Err(no_route(format!("channel {name:?} is not running")));
        }
        channel.outbox(session, metadata).await.ok_or_else(|| {
            no_route(format!(
                "channel {name:?} cannot start a conversation with this session"
            ))
        })
    }
}

/// Runs and restarts channel tasks.
pub struct Supervisor {
    state: Arc<GatewayState>,
    dispatch: Arc<dyn Dispatch>,
    tasks: TaskTracker,
}

impl Supervisor {
    /// A supervisor submitting through `dispatch`, reporting into `state`, and handing
    /// channels `tasks` for the work they leave running.
    pub fn new(state: Arc<GatewayState>, dispatch: Arc<dyn Dispatch>, tasks: TaskTracker) -> Self {
        Self {
            state,
            dispatch,
            tasks,
        }
    }

    /// Runs every channel until `shutdown` is cancelled and all of them have stopped, then
    /// waits for the tasks they left running (the caller bounds the whole wait).
    pub async fn run(&self, channels: Vec<Arc<dyn Channel>>, shutdown: CancellationToken) {
        for channel in &channels {
            self.state
                .set_channel(channel.name(), ChannelPhase::Starting, None);
            self.state.metrics().register_channel(channel.name());
        }
        let tasks: Vec<_> = channels
            .into_iter()
            .map(|channel| {
                let state = self.state.clone();
                let parts = Parts {
                    dispatch: self.dispatch.clone(),
                    shutdown: shutdown.clone(),
                    tasks: self.tasks.clone(),
                };
                tokio::spawn(supervise(channel, state, parts))
            })
            .collect();
        for task in tasks {
            if let Err(error) = task.await {
                tracing::error!(error = %error, "A supervision task ended abnormally.");
            }
        }
        self.tasks.close();
        self.tasks.wait().await;
    }
}

/// What every run of a channel shares.
struct Parts {
    dispatch: Arc<dyn Dispatch>,
    shutdown: CancellationToken,
    tasks: TaskTracker,
}

/// Keeps one channel running until shutdown.
async fn supervise(channel: Arc<dyn Channel>, state: Arc<GatewayState>, parts: Parts) {
    let Parts {
        dispatch,
        shutdown,
        tasks,
    } = parts;
    let name = channel.name().to_owned();
    let liveness = state.liveness(&name);
    let mut failures: u32 = 0;
    loop {
        state.set_channel(&name, ChannelPhase::Starting, None);
        liveness.run_started();
        let ready = CancellationToken::new();
        let context = ChannelContext {
            dispatch: dispatch.clone(),
            shutdown: shutdown.clone(),
            ready: ready.clone(),
            tasks: tasks.clone(),
            liveness: Arc::new(liveness.clone()),
        };
        let started = Instant::now();
        let runner = channel.clone();
        let mut task =
            tokio::spawn(async move { AssertUnwindSafe(runner.run(context)).catch_unwind().await });
        let outcome = tokio::select! {
            outcome = &mut task => outcome,
            () = ready.cancelled() => {
                state.set_channel(&name, ChannelPhase::Running, None);
                tracing::info!(channel = %name, "Channel is ready.");
                task.await
            }
        };
        let error = match outcome {
            Ok(Ok(Ok(()))) if shutdown.is_cancelled() => {
                state.set_channel(&name, ChannelPhase::Stopped, None);
                tracing::info!(channel = %name, "Channel stopped.");
                return;
            }
            Ok(Ok(Ok(()))) => "stopped without being asked to".to_owned(),
            Ok(Ok(Err(error))) if error.permanent && !shutdown.is_cancelled() => {
                // Retrying a refused login only hammers the server (and may lock the
                // account): the channel stays down until the configuration is fixed.
                let error = error.to_string();
                state.set_channel(&name, ChannelPhase::Broken, Some(error.clone()));
                tracing::error!(channel = %name, error = %error, "Channel stopped for good: retrying cannot fix this. Fix the configuration (squidbot doctor checks it) and restart the gateway.");
                return;
            }
            Ok(Ok(Err(error))) => error.to_string(),
            Ok(Err(panic)) => format!("panicked: {}", panic_text(panic.as_ref())),
            Err(join) => format!("task failed: {join}"),
        };
        if shutdown.is_cancelled() {
            state.set_channel(&name, ChannelPhase::Stopped, Some(error));
            return;
        }
        if started.elapsed() >= HEALTHY_RUN {
            failures = 0;
        }
        let delay = RESTART_BACKOFF.delay(failures);
        failures = failures.saturating_add(1);
        state.set_channel(&name, ChannelPhase::Failing, Some(error.clone()));
        state.metrics().channel_restart(&name);
        tracing::error!(channel = %name, error = %error, retry_in_ms = delay.as_millis() as u64, "Channel failed; restarting.");
        tokio::select! {
            biased;
            () = shutdown.cancelled() => {
                state.set_channel(&name, ChannelPhase::Stopped, None);
                return;
            }
            () = tokio::time::sleep(delay) => {}
        }
    }
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_owned())
}
