//! The `tools` section: which tools the agent may call, and their settings.
//!
//! The doc comments on the fields are the reference for these settings.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::Secret;

/// `tools`: the agent's tools.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ToolsConfig {
    /// The `shell` tool.
    pub shell: ShellToolConfig,
    /// The file tools (`read_file`, `write_file`, `edit_file`, `list_files`).
    pub files: ToolToggle,
    /// The `fetch_url` tool.
    pub fetch_url: ToolToggle,
    /// The `web_search` tool.
    pub web_search: WebSearchConfig,
    /// The `search_history` tool.
    pub search_history: ToolToggle,
    /// MCP servers whose tools the agent may call, by name. Default: none.
    pub mcp_servers: BTreeMap<String, McpServerConfig>,
    /// Background sub-agents (`spawn`, `spawn_await`).
    pub spawn: SpawnConfig,
}

/// A tool that only has an on/off switch.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct ToolToggle {
    /// Whether the tool is offered to the agent. Default: `true`.
    pub enabled: bool,
}

impl Default for ToolToggle {
    fn default() -> Self {
        Self { enabled: true }
    }
}

/// `tools.shell`: run shell commands (in the workspace).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct ShellToolConfig {
    /// Whether the tool is offered to the agent. Default: `true`.
    pub enabled: bool,
    /// Default timeout of one command in seconds; its whole process group is killed then.
    /// Default: `60`.
    pub timeout_seconds: u64,
    /// Commands that run without asking the owner: a name (`ls`) allows it with any
    /// arguments, a name with words (`git status`) only with those first. Every simple command
    /// of a line must be allowed (see README, "Model of trust"). Setting it replaces the
    /// default, a list of read-only commands (`ls`, `cat`, `grep`, `head`, `find`, …).
    pub allow: Option<Vec<String>>,
    /// `ask`: a command not allowed waits for the owner's approval on the turn's channel;
    /// `off`: nothing asks (the sandbox still holds). Default: `ask`.
    pub approval: ApprovalConfig,
    /// Seconds an approval waits for an answer before it counts as denied. Default: `600`.
    pub approval_timeout_seconds: u64,
    /// `auto`: every command runs jailed by Landlock and seccomp: a command the owner did not
    /// approve reads the system, the workspace and the skill directories, writes only its own
    /// temporary directory and opens no socket; an approved one may also write the workspace
    /// and (with `network`) use the network. Never the rest of `$SQUIDBOT_HOME`, the config or
    /// the owner's home. Every process a command starts ends with it. The jail needs Linux 6.12
    /// (Landlock ABI 6); where it cannot be built (no Landlock, an older one) the shell tool is
    /// off and says which guarantee is missing.
    /// `off`: no jail, commands run with every right of this user. Default: `auto`.
    pub sandbox: ShellSandbox,
    /// Whether approved commands may open sockets (TCP, UDP, UNIX). Commands the owner did not
    /// approve never can. Default: `true`.
    pub network: bool,
    /// Command lines that turns with no one to ask (heartbeat, cron jobs, sub-agents) may run
    /// in the workspace jail (writes in the workspace, `network`), compared whole after
    /// trimming: `./scripts/nightly.sh`. Every other command of those turns runs read-only.
    /// Default: none.
    pub unattended_writes: Vec<String>,
    /// Environment variables passed on to commands besides PATH, LANG, TZ, TERM, HOME (the
    /// workspace) and TMPDIR (the command's own temporary directory); nothing else of the
    /// daemon's environment reaches them, and a variable holding a secret is never passed.
    /// Default: none.
    pub env_passthrough: Vec<String>,
    /// The user commands run as when the gateway runs as root (a container, a VPS): a user
    /// name or a numeric uid, never root. Ignored when the gateway is not root (commands then
    /// run as its user). Default: `nobody`.
    pub run_as: Option<String>,
}

impl Default for ShellToolConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            timeout_seconds: 60,
            allow: None,
            approval: ApprovalConfig::Ask,
            approval_timeout_seconds: 600,
            sandbox: ShellSandbox::Auto,
            network: true,
            unattended_writes: Vec::new(),
            env_passthrough: Vec::new(),
            run_as: None,
        }
    }
}

/// `tools.shell.approval`.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalConfig {
    /// Ask the owner.
    #[default]
    Ask,
    /// Never ask.
    Off,
}

/// `tools.shell.sandbox`: whether shell commands run sandboxed.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ShellSandbox {
    /// The jail where the kernel supports it; otherwise the shell tool is off.
    #[default]
    Auto,
    /// No sandbox: commands run with the daemon's rights (the environment is still filtered).
    Off,
}

/// Which web search service `web_search` queries.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum WebSearchProvider {
    /// A SearXNG instance at `url` (JSON API).
    #[default]
    Searxng,
    /// The Brave Search API (needs `api_key`).
    Brave,
    /// DuckDuckGo (no key).
    Duckduckgo,
}

/// `tools.web_search`: search the web.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct WebSearchConfig {
    /// Whether the tool is offered to the agent. Default: `false`.
    pub enabled: bool,
    /// `searxng`, `brave` or `duckduckgo`. Default: `searxng`.
    pub provider: WebSearchProvider,
    /// Base URL of the SearXNG instance (required for `searxng`). Default: empty.
    pub url: String,
    /// API key (required for `brave`; optional bearer token for `searxng`), or `${VAR}`.
    /// Default: empty.
    pub api_key: Secret,
    /// Name of an environment variable holding the API key. Default: empty.
    pub api_key_env: String,
}

/// How squidbot talks to an MCP server.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum McpTransport {
    /// A child process speaking MCP on stdin/stdout (`command`, `args`, `env`, `cwd`).
    #[default]
    Stdio,
    /// An MCP server over HTTP at `url`.
    Http,
}

/// `tools.mcp_servers.<name>`: one MCP server whose tools the agent may call.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct McpServerConfig {
    /// `stdio` or `http`. Default: `stdio`.
    pub transport: McpTransport,
    /// Program to start (required for `stdio`). Default: empty.
    pub command: String,
    /// Its arguments. Default: none.
    pub args: Vec<String>,
    /// Extra environment variables for it. Default: none (`null` is accepted).
    pub env: Option<BTreeMap<String, String>>,
    /// Its working directory. Default: squidbot's (`null` is accepted).
    pub cwd: Option<String>,
    /// Server URL (required for `http`). Default: empty.
    pub url: String,
}

/// `tools.spawn`: background sub-agents.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct SpawnConfig {
    /// Whether `spawn` and `spawn_await` are offered to the agent. Default: `false`.
    pub enabled: bool,
    /// Most sub-agents running at once; more wait. Default: `4`.
    pub max_concurrent: usize,
    /// Named sub-agent profiles. Default: none.
    pub profiles: BTreeMap<String, SpawnProfile>,
}

impl Default for SpawnConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            max_concurrent: 4,
            profiles: BTreeMap::new(),
        }
    }
}

/// `tools.spawn.profiles.<name>`: a kind of sub-agent.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct SpawnProfile {
    /// System prompt text of the sub-agent. Default: empty.
    pub system_prompt: String,
    /// File (relative to the workspace) whose text is added to the system prompt. Default: empty.
    pub system_prompt_file: String,
    /// Workspace files that start the system prompt. Default: none (`AGENTS.md`,
    /// `ENVIRONMENT.md` are used).
    pub bootstrap_files: Vec<String>,
    /// Names of the tools the sub-agent may use. Default: none (all but spawn itself).
    pub tools: Vec<String>,
    /// LLM pool of the sub-agent. Default: empty (the default pool).
    pub pool: String,
}
