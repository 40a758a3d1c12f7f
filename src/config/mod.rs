//! The configuration: one YAML file (JSON works too), its schema, loading and validation.
//!
//! [`load`] finds the file (`--config`, then `SQUIDBOT_CONFIG`, then
//! `$SQUIDBOT_HOME/squidbot.yaml`), deserializes it, resolves secrets from the environment and
//! paths against `$SQUIDBOT_HOME`, and checks every value and cross reference. Every problem is
//! reported at once, each naming the file, the line and the field, before anything starts.
//!
//! - `schema*.rs`: the structs; their field docs are the configuration reference.
//! - `secret.rs`: [`Secret`], a credential that never prints.
//! - `index.rs`: the field-path → line index used to place errors.
//! - `load.rs`: finding, reading and deserializing the file.
//! - `diagnosis.rs`: every deserialization problem of a file at once, and syntax errors at the
//!   line to fix.
//! - `validate.rs`: semantic checks and secret resolution.
//! - `starter.rs`: the commented starter file written by `squidbot onboard`.
//! - `tests/`: table-driven tests of all of the above.

mod diagnosis;
mod index;
mod load;
mod schema;
mod schema_channels;
mod schema_llm;
mod schema_tools;
mod secret;
mod starter;
mod validate;

#[cfg(test)]
mod tests;

use std::fmt;
use std::path::PathBuf;

pub use load::{ConfigLocation, LoadedConfig, load, load_from_str, resolve_path};
pub use schema::{
    AgentsConfig, BudgetsConfig, Config, CronConfig, DEFAULT_HEARTBEAT_PROMPT, GatewayConfig,
    HeartbeatConfig, HttpConfig, MissedRuns, OwnerAlias, OwnerConfig, PoolMember, SkillsConfig,
};
pub use schema_channels::{ChannelsConfig, EmailConfig, GroupPolicy, MatrixConfig};
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

/// One thing wrong with the configuration, located as precisely as the source allows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// 1-based line in the file, when the field appears in it (defaults have no line).
    pub line: Option<usize>,
    /// Dotted path of the field, e.g. `llm.pools.default[0]`.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl Problem {
    /// A problem of `field` at `line`.
    pub(crate) fn new(
        line: Option<usize>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            line,
            field: field.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(line) = self.line {
            write!(f, "{line}: ")?;
        }
        write!(f, "{}: {}", self.field, self.message)
    }
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
