//! The configuration schema: the top-level `Config` and its smaller sections (`agents`, `skills`,
//! `cron`, `gateway`). `llm`, `tools`, `owner` and `channels` live in their own files, and the
//! channels' own settings (`gateway.http` and `agents.heartbeat` too) in their folders.
//!
//! The doc comments on the fields are the configuration reference: each says what the field does
//! and its default. Every struct rejects unknown fields, so a typo is an error, not a silent
//! default.

use std::path::PathBuf;

use serde::Deserialize;

use crate::channels::heartbeat::config::HeartbeatConfig;
use crate::channels::http::config::HttpConfig;
use crate::channels::owner::Owner;

use super::owner::OwnerConfig;
use super::{
    ChannelsConfig, LlmConfig, ModelConfig, ProviderConfig, ToolsConfig, TranscriptionConfig,
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

/// `skills`: extra places to look for skills.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct SkillsConfig {
    /// Directories searched before `<workspace>/skills` and the bundled skills, in order. `~` is
    /// expanded; relative paths are relative to `$SQUIDBOT_HOME`. Default: none.
    pub extra_dirs: Vec<PathBuf>,
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
