//! The configuration schema: the top-level `Config` and its smaller sections (`agents`, `skills`,
//! `owner`, `cron`, `gateway`). `llm`, `tools` and `channels` live in their own files.
//!
//! The doc comments on the fields are the configuration reference: each says what the field does
//! and its default. Every struct rejects unknown fields, so a typo is an error, not a silent
//! default.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::PathBuf;

use serde::Deserialize;

use crate::channels::owner::Owner;

use super::{
    ChannelsConfig, LlmConfig, ModelConfig, ProviderConfig, Secret, ToolsConfig,
    TranscriptionConfig,
};

/// The whole configuration file (`squidbot.yaml`). Every section may be omitted.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// LLM providers, models and pools.
    pub llm: LlmConfig,
    /// The agent: workspace, memory and heartbeat.
    pub agents: AgentsConfig,
    /// The agent's tools.
    pub tools: ToolsConfig,
    /// Matrix and email.
    pub channels: ChannelsConfig,
    /// Where skills are looked up.
    pub skills: SkillsConfig,
    /// Who the owner is on each channel.
    pub owner: OwnerConfig,
    /// Scheduled jobs.
    pub cron: CronConfig,
    /// The daemon (`squidbot gateway`).
    pub gateway: GatewayConfig,
    /// Limits on LLM tokens and cost.
    pub budgets: BudgetsConfig,
    /// Voice notes turned into text; off while absent.
    pub transcription: Option<TranscriptionConfig>,
}

/// `budgets`: limits on what the LLM may spend. When one is reached no further LLM call is
/// made: a turn ends with a message naming the budget and when it resets, heartbeat ticks and
/// cron runs are skipped (the owner is told once per budget and day, `/status` counts the
/// skips). Spending is read back from the usage ledger (`$SQUIDBOT_HOME/usage/`) at start and
/// shared by the gateway and `squidbot agent`. `0` means no limit.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct BudgetsConfig {
    /// Tokens (prompt plus completion) per day, every purpose together. Default: `0`.
    pub daily_tokens: u64,
    /// Cost per day (in the currency of `llm.models.<name>.price`). Default: `0`.
    pub daily_cost: f64,
    /// Tokens per turn a person started (and per sub-agent job). Default: `0`.
    pub turn_tokens: u64,
    /// Tokens per heartbeat tick. Default: `0`.
    pub heartbeat_tokens: u64,
    /// Tokens per cron run. Default: `0`.
    pub cron_tokens: u64,
    /// The zone whose midnight starts a new day (an IANA name, `UTC`, `local` or `±HH:MM`).
    /// Default: empty, meaning `agents.heartbeat.timezone`.
    pub timezone: String,
}

impl BudgetsConfig {
    /// The zone name in effect: `timezone`, else the heartbeat's.
    pub fn zone_name<'a>(&'a self, config: &'a Config) -> &'a str {
        if self.timezone.trim().is_empty() {
            &config.agents.heartbeat.timezone
        } else {
            &self.timezone
        }
    }
}

/// One model of a resolved pool, with the names it is configured under.
#[derive(Clone, Copy, Debug)]
pub struct PoolMember<'a> {
    /// The model's name (its key in `llm.models`), for logs and error messages.
    pub name: &'a str,
    /// The model.
    pub model: &'a ModelConfig,
    /// The provider's name (its key in `llm.providers`).
    pub provider_name: &'a str,
    /// The provider serving the model.
    pub provider: &'a ProviderConfig,
}

impl Config {
    /// The models of `pool`, in fallback order, with their providers; `None` when the pool does
    /// not exist or a model or provider it names is missing (validation rules that out after
    /// `load`, except for an absent default pool).
    pub fn pool_members(&self, pool: &str) -> Option<Vec<PoolMember<'_>>> {
        let entries = self.llm.pools.get(pool)?;
        entries
            .iter()
            .map(|entry| {
                let (name, model) = self.llm.models.get_key_value(&entry.model)?;
                let (provider_name, provider) =
                    self.llm.providers.get_key_value(&model.provider)?;
                Some(PoolMember {
                    name,
                    model,
                    provider_name,
                    provider,
                })
            })
            .collect()
    }

    /// The models of `pool` with their providers, in fallback order (see [`Self::pool_members`]).
    pub fn pool_models(&self, pool: &str) -> Option<Vec<(&ModelConfig, &ProviderConfig)>> {
        let members = self.pool_members(pool)?;
        Some(
            members
                .into_iter()
                .map(|member| (member.model, member.provider))
                .collect(),
        )
    }

    /// Whether an LLM can be used at all: the default pool exists, is non-empty and resolves.
    /// A fresh install has no LLM until `squidbot onboard`; callers check this to say so.
    pub fn llm_configured(&self) -> bool {
        self.pool_members(&self.llm.default_pool)
            .is_some_and(|members| !members.is_empty())
    }

    /// The owner as the domain knows them: `owner.matrix` on Matrix, `owner.email` by mail,
    /// and the original's `owner.aliases` as they are scoped.
    pub fn owner(&self) -> Owner {
        let matrix = self.owner.matrix.iter().map(|id| (id, Some("matrix")));
        let email = self
            .owner
            .email
            .iter()
            .map(|address| (address, Some("email")));
        let aliases =
            (self.owner.aliases.iter()).map(|alias| (&alias.address, alias.channel.as_deref()));
        matrix
            .chain(email)
            .chain(aliases)
            .fold(Owner::nobody(), |owner, (address, channel)| {
                owner.with(address.clone(), channel)
            })
    }

    /// The pool for `purpose_pool`, an `agents.*.pool`-style setting where empty means default.
    pub fn pool_or_default<'a>(&'a self, purpose_pool: &'a str) -> &'a str {
        if purpose_pool.is_empty() {
            &self.llm.default_pool
        } else {
            purpose_pool
        }
    }
}

/// The default heartbeat prompt (the original's wording).
pub const DEFAULT_HEARTBEAT_PROMPT: &str = "Read HEARTBEAT.md if it exists in your workspace. \
Follow any instructions strictly. Do not repeat tasks from prior turns. If nothing needs \
attention, reply with just: HEARTBEAT_OK";

/// `agents`: the agent's workspace and memory.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct AgentsConfig {
    /// The agent's workspace (MEMORY.md, bootstrap files, skills). `~` is expanded and a relative
    /// path is relative to `$SQUIDBOT_HOME`; after loading this is an absolute path.
    /// Default: empty, meaning `$SQUIDBOT_HOME/workspace`.
    pub workspace: PathBuf,
    /// Whether the file and shell tools are confined to the workspace. Default: `true`.
    pub restrict_to_workspace: bool,
    /// Accepted for compatibility with the original and ignored (with a warning): the history
    /// window is now bounded by consolidation instead.
    pub history_context_messages: Option<i64>,
    /// Unconsolidated messages in a session above which older ones are summarized.
    /// Default: `100`.
    pub consolidation_threshold: usize,
    /// Most recent messages kept verbatim when consolidating; `0 < keep_recent <
    /// consolidation_threshold`. Default: `20`.
    pub keep_recent: usize,
    /// LLM pool used for summaries. Default: empty (the default pool).
    pub consolidation_pool: String,
    /// Words above which a session summary is itself condensed. Default: `600`.
    pub summary_word_limit: usize,
    /// The periodic self check-in.
    pub heartbeat: HeartbeatConfig,
}

impl Default for AgentsConfig {
    fn default() -> Self {
        Self {
            workspace: PathBuf::new(),
            restrict_to_workspace: true,
            history_context_messages: None,
            consolidation_threshold: 100,
            keep_recent: 20,
            consolidation_pool: String::new(),
            summary_word_limit: 600,
            heartbeat: HeartbeatConfig::default(),
        }
    }
}

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
pub(crate) fn parse_hhmm(text: &str, allow_end_of_day: bool) -> Option<u32> {
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

/// `skills`: extra places to look for skills.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct SkillsConfig {
    /// Directories searched before `<workspace>/skills` and the bundled skills, in order. `~` is
    /// expanded; relative paths are relative to `$SQUIDBOT_HOME`. Default: none.
    pub extra_dirs: Vec<PathBuf>,
}

/// `owner`: who the owner is on each channel. Only the owner answers approvals, and MEMORY.md
/// and USER.md go only into sessions where no one but the owner takes part.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct OwnerConfig {
    /// The owner's Matrix user ids (`@alex:example.org`). Default: none.
    pub matrix: Vec<String>,
    /// The owner's mail addresses (compared without regard to case). Default: none.
    pub email: Vec<String>,
    /// The original's form, still read: `alex` (any channel) or `{address:
    /// "@alex:matrix.org", channel: matrix}`. Default: none.
    pub aliases: Vec<OwnerAlias>,
}

/// One address of the owner, optionally valid on one channel only.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(from = "OwnerAliasRepr")]
pub struct OwnerAlias {
    /// The sender id or address (matched case-sensitively).
    pub address: String,
    /// The channel it applies to (`matrix`, `email`, ...); `None` means every channel.
    pub channel: Option<String>,
}

#[derive(Deserialize)]
#[serde(
    untagged,
    expecting = "an address, or a mapping {address: ADDRESS, channel: CHANNEL}"
)]
enum OwnerAliasRepr {
    Address(String),
    Scoped(OwnerAliasTable),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OwnerAliasTable {
    address: String,
    #[serde(default)]
    channel: Option<String>,
}

impl From<OwnerAliasRepr> for OwnerAlias {
    fn from(repr: OwnerAliasRepr) -> Self {
        match repr {
            OwnerAliasRepr::Address(address) => Self {
                address,
                channel: None,
            },
            OwnerAliasRepr::Scoped(OwnerAliasTable { address, channel }) => Self {
                address,
                channel: channel.filter(|channel| !channel.is_empty()),
            },
        }
    }
}

/// What happens to a cron slot that passed while the daemon was down.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum MissedRuns {
    /// Fire once on start for the missed slots.
    #[default]
    CatchUp,
    /// Record the missed slots as skipped.
    Skip,
}

/// `cron`: scheduled jobs (the jobs themselves live in `cron/jobs.json`).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct CronConfig {
    /// `catch_up` or `skip`. Default: `catch_up`.
    pub missed_runs: MissedRuns,
}

/// `gateway`: the long-running daemon.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct GatewayConfig {
    /// Most sessions handled at once; more wait their turn. Default: `64`.
    pub max_parallel_sessions: usize,
    /// Seconds in-flight work gets to finish on shutdown before it is cancelled. Default: `20`.
    pub shutdown_grace_seconds: u64,
    /// The HTTP server (health, status, metrics, message API).
    pub http: HttpConfig,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self {
            max_parallel_sessions: 64,
            shutdown_grace_seconds: 20,
            http: HttpConfig::default(),
        }
    }
}

/// `gateway.http`: the HTTP server.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    /// Whether the server runs. Default: `true`.
    pub enabled: bool,
    /// Address and port to listen on. Default: `127.0.0.1:8765` (loopback only).
    pub listen: SocketAddr,
    /// Bearer token of the message API, or `${VAR}`; empty disables the message API (health,
    /// status and metrics stay up). Default: empty.
    pub token: Secret,
    /// Name of an environment variable holding the token. Default: empty.
    pub token_env: String,
    /// Whether the OpenAI-compatible endpoint (`/v1/chat/completions`, `/v1/models`) is
    /// served, behind the same token, so apps that speak to OpenAI are front ends of
    /// squidbot. Default: `false`.
    pub openai: bool,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            listen: SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 8765)),
            token: Secret::default(),
            token_env: String::new(),
            openai: false,
        }
    }
}
