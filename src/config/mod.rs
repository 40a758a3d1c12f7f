//! The configuration: one YAML file (JSON works too), its schema, loading and validation.
//!
//! [`load`] finds the file (`--config`, then `SQUIDBOT_CONFIG`, then
//! `$SQUIDBOT_HOME/squidbot.yaml`), deserializes it, resolves secrets from the environment and
//! paths against `$SQUIDBOT_HOME`, and checks every value and cross reference. Every problem is
//! reported at once, each naming the file, the line and the field, before anything starts.
//!
//! - `schema*.rs`: the structs; their field docs are the configuration reference. Each
//!   channel's own section is in its folder (`src/channels/<name>/config.rs`, re-exported here).
//! - `owner.rs`: the `owner` section.
//! - `secret.rs`: [`Secret`], a credential that never prints.
//! - `known_secrets.rs`: every secret value the configuration knows, for the redactor.
//! - `check.rs`: the checker semantic checks report through, and [`Problem`];
//!   `ChannelSettings`, what each channel's section implements to be checked.
//! - `index.rs`: the field-path → line index used to place errors.
//! - `load.rs`: finding, reading and deserializing the file.
//! - `diagnosis.rs`: every deserialization problem of a file at once, and syntax errors at the
//!   line to fix.
//! - `validate.rs`: semantic checks and secret resolution.
//! - `starter.rs`: the commented starter file written by `squidbot onboard`.
//! - `tests/`: table-driven tests of all of the above.

pub(crate) mod check;
mod diagnosis;
mod index;
mod known_secrets;
mod load;
pub(crate) mod owner;
mod schema;
mod schema_llm;
mod schema_tools;
pub(crate) mod secret;
mod starter;
mod validate;

#[cfg(test)]
mod tests;

use std::path::PathBuf;

pub use check::Problem;
pub use load::{ConfigLocation, LoadedConfig, load, load_from_str, resolve_path};
pub use owner::{OwnerAlias, OwnerConfig};
pub use schema::{
    AgentsConfig, BudgetsConfig, Config, CronConfig, GatewayConfig, MissedRuns, PoolMember,
    SkillsConfig,
};
// The `channels` section is written by the list of channels (`src/channels/mod.rs`), one
// field per channel that has settings.
pub use crate::channels::ChannelsConfig;
// The channels' own settings, named here too so that code reading the configuration does not
// need to know which folder each section lives in.
pub use crate::channels::email::config::EmailConfig;
pub use crate::channels::heartbeat::config::{DEFAULT_HEARTBEAT_PROMPT, HeartbeatConfig};
pub use crate::channels::http::config::HttpConfig;
pub use crate::channels::matrix::config::{GroupPolicy, MatrixConfig};
pub use schema_llm::{
    LlmConfig, LlmRetry, LlmTimeouts, ModelConfig, PoolEntry, PriceConfig, ProviderApi,
    ProviderConfig, TokenLimitSetting, ToolCallIdsSetting, TranscriptionConfig,
};
pub use schema_tools::{
    ApprovalConfig, McpServerConfig, McpTransport, ShellSandbox, ShellToolConfig, SpawnConfig,
    SpawnProfile, ToolToggle, ToolsConfig, WebSearchConfig, WebSearchProvider,
};
pub use secret::{Secret, SecretField};

/// Why the configuration could not be loaded. Startup stops on any of these: running with a
/// half-understood config would do the wrong thing quietly.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file was named explicitly (`--config` or `SQUIDBOT_CONFIG`) but does not exist.
    #[error("{}: config file not found", path.display())]
    NotFound {
        /// The path that was named.
        path: PathBuf,
    },
    /// A path starts with `~` (by default `$SQUIDBOT_HOME` is `~/.squidbot`) but `HOME` is
    /// not set, so there is no home directory to put in its place.
    #[error(
        "{}: `~` stands for the home directory, but HOME is not set; set HOME, or set \
         SQUIDBOT_HOME to the directory squidbot keeps its files in",
        path.display()
    )]
    NoHome {
        /// The path with the `~`.
        path: PathBuf,
    },
    /// The file exists but could not be read.
    #[error("{}: cannot read config file: {error}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
    /// The file was read but is not a valid configuration: YAML syntax, unknown fields, wrong
    /// types, dangling references or bad values. Lists every problem found.
    #[error("{}", render_problems(path, problems))]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, in file order as far as known.
        problems: Vec<Problem>,
    },
}

/// One problem per line, as `path:line: field: message` (compilers' format, so editors can jump).
fn render_problems(path: &std::path::Path, problems: &[Problem]) -> String {
    let lines: Vec<String> = problems
        .iter()
        .map(|problem| match problem.line {
            Some(line) => format!(
                "{}:{line}: {}: {}",
                path.display(),
                problem.field,
                problem.message
            ),
            None => format!("{}: {}: {}", path.display(), problem.field, problem.message),
        })
        .collect();
    lines.join("\n")
}
