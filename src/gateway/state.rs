//! The gateway's live state, read by `/status` and `/readyz`: channels, sessions, uptime.
//!
//! Writers (supervisor, router) update it as things happen; readers take a snapshot. Channel
//! sources that have more to say (cron jobs, heartbeat) register a [`StatusSection`] that
//! renders their part of the status JSON.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use super::metrics::Metrics;
use crate::core::redact::Redactor;
use crate::core::session::SessionId;
use crate::gateway::liveness::Liveness;

/// Where a channel task is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChannelPhase {
    /// Started, not ready yet.
    Starting,
    /// Up and ready.
    Running,
    /// Failed; waiting for its restart.
    Failing,
    /// Failed in a way retrying cannot fix (a refused login): not restarted.
    Broken,
    /// Stopped for shutdown.
    Stopped,
}

/// One channel's status.
#[derive(Debug, Clone, Serialize)]
pub struct ChannelStatus {
    /// Its phase.
    pub state: ChannelPhase,
    /// The last error it stopped with, if any.
    pub last_error: Option<String>,
    /// How often it was restarted.
    pub restarts: u64,
    /// When the phase last changed.
    pub since: DateTime<Utc>,
    /// Its pulse, read when a snapshot is taken.
    #[serde(skip)]
    liveness: Liveness,
}

/// A channel's status with its pulse read now, as `/status` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct ChannelReport {
    /// The phase, error, restarts and since.
    #[serde(flatten)]
    pub status: ChannelStatus,
    /// Seconds since its last inbound event, if one arrived since start.
    pub last_inbound_age_seconds: Option<f64>,
    /// Seconds since its last successful round (sync, IDLE or poll), if it has rounds and one
    /// succeeded since start.
    pub last_round_age_seconds: Option<f64>,
    /// The longest a healthy round may take, if it has rounds.
    pub stall_after_seconds: Option<f64>,
    /// Whether no round succeeded within that limit: then `/readyz` fails.
    pub stalled: bool,
}

impl ChannelReport {
    fn of(status: &ChannelStatus) -> Self {
        let pulse = status.liveness.pulse();
        Self {
            status: status.clone(),
            last_inbound_age_seconds: pulse.last_inbound.map(|d| d.as_secs_f64()),
            last_round_age_seconds: pulse.last_round.map(|d| d.as_secs_f64()),
            stall_after_seconds: pulse.stall_after.map(|d| d.as_secs_f64()),
            stalled: pulse.stalled,
        }
    }
}

impl ChannelStatus {
    fn new(state: ChannelPhase) -> Self {
        Self {
            state,
            last_error: None,
            restarts: 0,
            since: Utc::now(),
            liveness: Liveness::new(),
        }
    }
}

/// What the gateway knows of one session since start.
#[derive(Debug, Clone, Serialize)]
pub struct SessionActivity {
    /// Messages in its history after the last turn.
    pub messages: u64,
    /// Turns run since start.
    pub turns: u64,
    /// When its last turn ended.
    pub last_turn: DateTime<Utc>,
}

/// The sections `/status` shows without the token: they describe health, not the owner.
const PUBLIC_SECTIONS: [&str; 1] = ["sandbox"];

/// A part of `/status` contributed by a channel (cron jobs, heartbeat).
#[async_trait::async_trait]
pub trait StatusSection: Send + Sync {
    /// The key in the status object.
    fn key(&self) -> &str;
    /// The section's JSON.
    async fn render(&self) -> Value;
}

/// A section that serializes a status snapshot taken synchronously, which is what most
/// components offer: `status_fn("email", move || channel.status())`.
pub struct FnSection<F> {
    key: &'static str,
    snapshot: F,
}

/// A [`StatusSection`] under `key` rendering whatever `snapshot` returns.
pub fn status_fn<F, T>(key: &'static str, snapshot: F) -> FnSection<F>
where
    F: Fn() -> T + Send + Sync,
    T: serde::Serialize,
{
    FnSection { key, snapshot }
}

#[async_trait::async_trait]
impl<F, T> StatusSection for FnSection<F>
where
    F: Fn() -> T + Send + Sync,
    T: serde::Serialize,
{
    fn key(&self) -> &str {
        self.key
    }

    async fn render(&self) -> Value {
        serde_json::to_value((self.snapshot)()).unwrap_or_default()
    }
}

/// Sessions kept in the activity table; older ones are dropped first beyond this.
const MAX_SESSIONS: usize = 10_000;

/// The shared live state.
pub struct GatewayState {
    started: Instant,
    started_at: DateTime<Utc>,
    /// A std lock: held for map updates only, never across an await.
    channels: RwLock<BTreeMap<String, ChannelStatus>>,
    /// A std lock: held for map updates only, never across an await.
    sessions: Mutex<HashMap<SessionId, SessionActivity>>,
    sections: RwLock<Vec<Arc<dyn StatusSection>>>,
    metrics: Arc<Metrics>,
    /// Every string `/status` shows passes through it: a section may quote a command, an
    /// error or a job text that holds a secret.
    redactor: Arc<Redactor>,
}

impl GatewayState {
    /// Fresh state, started now.
    pub fn new(metrics: Arc<Metrics>) -> Self {
        Self {
            started: Instant::now(),
            started_at: Utc::now(),
            channels: RwLock::default(),
            sessions: Mutex::default(),
            sections: RwLock::default(),
            metrics,
            redactor: Arc::new(Redactor::none()),
        }
    }

    /// The state redacting what `/status` shows with `redactor`.
    pub fn with_redactor(mut self, redactor: Arc<Redactor>) -> Self {
        self.redactor = redactor;
        self
    }

    /// The metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Sets a channel's phase (and error), counting a restart when it fails.
    pub fn set_channel(&self, name: &str, state: ChannelPhase, error: Option<String>) {
        let mut channels = self.channels.write().unwrap_or_else(|p| p.into_inner());
        let entry = channels
            .entry(name.to_owned())
            .or_insert_with(|| ChannelStatus::new(state));
        if state == ChannelPhase::Failing {
            entry.restarts += 1;
        }
        entry.state = state;
        entry.since = Utc::now();
        if error.is_some() {
            entry.last_error = error;
        }
    }

    /// The pulse `name` reports into, shared across its restarts.
    pub fn liveness(&self, name: &str) -> Liveness {
        let mut channels = self.channels.write().unwrap_or_else(|p| p.into_inner());
        channels
            .entry(name.to_owned())
            .or_insert_with(|| ChannelStatus::new(ChannelPhase::Starting))
            .liveness
            .clone()
    }

    /// Every channel's status with its pulse read now.
    pub fn channel_reports(&self) -> BTreeMap<String, ChannelReport> {
        let channels = self.channels.read().unwrap_or_else(|p| p.into_inner());
        channels
            .iter()
            .map(|(name, status)| (name.clone(), ChannelReport::of(status)))
            .collect()
    }

    /// The metrics in the OpenMetrics text format, with every channel's pulse read now.
    pub fn render_metrics(&self) -> String {
        {
            let channels = self.channels.read().unwrap_or_else(|p| p.into_inner());
            for (name, status) in channels.iter() {
                self.metrics.channel_pulse(name, &status.liveness.pulse());
            }
        }
        self.metrics.render()
    }

    /// Whether `name` is running.
    pub fn channel_running(&self, name: &str) -> bool {
        let channels = self.channels.read().unwrap_or_else(|p| p.into_inner());
        channels
            .get(name)
            .is_some_and(|c| c.state == ChannelPhase::Running)
    }

    /// Channels that are not running or are stalled (for `/readyz`); empty means ready.
    pub fn not_ready(&self) -> Vec<String> {
        let channels = self.channels.read().unwrap_or_else(|p| p.into_inner());
        channels
            .iter()
            .filter(|(_, c)| c.state != ChannelPhase::Running || c.liveness.pulse().stalled)
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// Records a finished turn of `session`, whose history now holds `messages` messages.
    pub fn turn_finished(&self, session: &SessionId, messages: u64) {
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        if sessions.len() >= MAX_SESSIONS
            && !sessions.contains_key(session)
            && let Some(oldest) = sessions
                .iter()
                .min_by_key(|(_, a)| a.last_turn)
                .map(|(s, _)| s.clone())
        {
            sessions.remove(&oldest);
        }
        let entry = sessions.entry(session.clone()).or_insert(SessionActivity {
            messages,
            turns: 0,
            last_turn: Utc::now(),
        });
        entry.messages = messages.max(entry.messages);
        entry.turns += 1;
        entry.last_turn = Utc::now();
    }

    /// Adds a status section.
    pub fn add_section(&self, section: Arc<dyn StatusSection>) {
        self.sections
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .push(section);
    }

    /// The `/status` document.
    /// What `/status` shows without the token: whether the daemon is healthy, nothing of what
    /// the owner does (no sessions, jobs, approvals, usage, rooms or addresses).
    pub async fn health(&self) -> Value {
        let channels: BTreeMap<String, Value> = self
            .channel_reports()
            .into_iter()
            .map(|(name, report)| (name, serde_json::json!({ "state": report.status.state })))
            .collect();
        let mut status = self.base(serde_json::to_value(channels).unwrap_or_default());
        status["detail"] =
            "sessions, jobs, approvals and usage need the token (Authorization: Bearer)".into();
        self.add_sections(&mut status, |key| PUBLIC_SECTIONS.contains(&key))
            .await;
        status
    }

    /// The fields every `/status` has: version, start, uptime and `channels`.
    fn base(&self, channels: Value) -> Value {
        serde_json::json!({
            "version": env!("CARGO_PKG_VERSION"),
            "started_at": self.started_at,
            "uptime_seconds": self.started.elapsed().as_secs(),
            "channels": channels,
        })
    }

    /// Renders into `status` the sections whose key `shown` accepts.
    async fn add_sections(&self, status: &mut Value, shown: impl Fn(&str) -> bool) {
        let sections = self
            .sections
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        for section in sections.iter().filter(|s| shown(s.key())) {
            status[section.key()] = section.render().await;
        }
    }

    /// Everything: [`GatewayState::health`] plus sessions and every section.
    pub async fn snapshot(&self) -> Value {
        let channels = self.channel_reports();
        let sessions: BTreeMap<String, SessionActivity> = self
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(s, a)| (s.to_string(), a.clone()))
            .collect();
        let mut status = self.base(serde_json::to_value(channels).unwrap_or_default());
        status["sessions"] = serde_json::to_value(sessions).unwrap_or_default();
        self.add_sections(&mut status, |_| true).await;
        self.redactor.redact_json(&mut status);
        status
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn status_shows_no_secret_a_section_quotes() {
        let redactor = Arc::new(Redactor::new(["sk-status-SECRET-99"]));
        let state = GatewayState::new(Arc::new(Metrics::new())).with_redactor(redactor);
        state.add_section(Arc::new(status_fn("jobs", || {
            serde_json::json!([{"message": "use sk-status-SECRET-99 daily", "sk-status-SECRET-99": 1}])
        })));
        let shown = state.snapshot().await.to_string();
        assert!(shown.contains("use [redacted] daily"), "{shown}");
        assert!(!shown.contains("SECRET"), "{shown}");
    }
}
