//! `agents.heartbeat`: the heartbeat's settings and their checks.
//!
//! The doc comments on the fields are the reference for these settings. The section stays
//! under `agents`, where the original has it; only its type lives here.

use serde::Deserialize;

use crate::config::check::{ChannelSettings, Checker};
use crate::config::owner::OwnerConfig;

/// The default heartbeat prompt (the original's wording).
pub const DEFAULT_HEARTBEAT_PROMPT: &str = "Read HEARTBEAT.md if it exists in your workspace. \
Follow any instructions strictly. Do not repeat tasks from prior turns. If nothing needs \
attention, reply with just: HEARTBEAT_OK";

/// `agents.heartbeat`: every `interval_minutes` within the active hours, the agent reads
/// HEARTBEAT.md and reports anything that needs attention.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct HeartbeatConfig {
    /// Whether the heartbeat runs in the gateway. Default: `true`.
    pub enabled: bool,
    /// Minutes between heartbeats; must be positive. Default: `30`.
    pub interval_minutes: u32,
    /// The prompt of a heartbeat turn. Default: read HEARTBEAT.md, follow it, else answer
    /// `HEARTBEAT_OK`.
    pub prompt: String,
    /// Start of the active hours, `HH:MM`, inclusive. Default: `"00:00"`.
    pub active_hours_start: String,
    /// End of the active hours, `HH:MM` or `24:00`, exclusive; an end before the start spans
    /// midnight (`22:00`–`06:00`). Default: `"24:00"`.
    pub active_hours_end: String,
    /// IANA time zone of the active hours (e.g. `Europe/Berlin`), or `local`. Default: `"local"`.
    pub timezone: String,
    /// LLM pool of heartbeat turns. Default: empty (the default pool).
    pub pool: String,
    /// Session id that receives alerts (e.g. `matrix:!room:server`). Default: empty (the last
    /// active session).
    pub target: String,
}

impl Default for HeartbeatConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            interval_minutes: 30,
            prompt: DEFAULT_HEARTBEAT_PROMPT.to_owned(),
            active_hours_start: "00:00".to_owned(),
            active_hours_end: "24:00".to_owned(),
            timezone: "local".to_owned(),
            pool: String::new(),
            target: String::new(),
        }
    }
}

impl HeartbeatConfig {
    /// The active hours as minutes after midnight, `(start, end)`, with `end` up to 1440.
    /// Validation guarantees both parse after `load`; a bad value falls back to the whole day.
    pub fn active_minutes(&self) -> (u32, u32) {
        let start = parse_hhmm(&self.active_hours_start, false).unwrap_or(0);
        let end = parse_hhmm(&self.active_hours_end, true).unwrap_or(24 * 60);
        (start, end)
    }
}

/// Parses `HH:MM` into minutes after midnight; `24:00` only when `allow_end_of_day`.
fn parse_hhmm(text: &str, allow_end_of_day: bool) -> Option<u32> {
    let (hours, minutes) = text.split_once(':')?;
    if hours.len() != 2 || minutes.len() != 2 {
        return None;
    }
    let hours: u32 = hours.parse().ok()?;
    let minutes: u32 = minutes.parse().ok()?;
    match (hours, minutes) {
        (24, 0) if allow_end_of_day => Some(24 * 60),
        (0..=23, 0..=59) => Some(hours * 60 + minutes),
        _ => None,
    }
}

impl ChannelSettings for HeartbeatConfig {
    fn check(&self, checker: &mut Checker<'_>, _owner: &OwnerConfig) {
        checker.pool_ref(&self.pool, "agents.heartbeat.pool");
        let interval = self.interval_minutes.into();
        checker.positive(interval, "agents.heartbeat.interval_minutes");
        if parse_hhmm(&self.active_hours_start, false).is_none() {
            let message = format!(
                "{:?} is not a time HH:MM (00:00 to 23:59)",
                self.active_hours_start
            );
            checker.report("agents.heartbeat.active_hours_start", message);
        }
        if parse_hhmm(&self.active_hours_end, true).is_none() {
            let message = format!(
                "{:?} is not a time HH:MM (00:00 to 24:00)",
                self.active_hours_end
            );
            checker.report("agents.heartbeat.active_hours_end", message);
        }
        let zone = self.timezone.as_str();
        if !zone.trim().is_empty()
            && let Err(error) = crate::zone::Zone::parse(zone)
        {
            checker.report("agents.heartbeat.timezone", error.to_string());
        }
        if !self.target.is_empty() && !self.target.contains(':') {
            let message = format!("{:?} is not a session id <channel>:<key>", self.target);
            checker.report("agents.heartbeat.target", message);
        }
    }
}
