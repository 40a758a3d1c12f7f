//! Builds the agent from the configuration: the composition of adapters behind the core.
//!
//! Every command that talks to the LLM goes through [`Assembly::from_config`], so the terminal
//! and the gateway run the very same agent: JSONL store, MEMORY.md, bootstrap prompt,
//! LLM pools with retry and fallback, the registered tools (shell, files, cron, fetch_url,
//! web_search, spawn) and the per-turn `memory_write` tool.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, bail};

use squidbot::accounting::layer::{AccountedLlm, CallObserver};
use squidbot::accounting::meter::UsageMeter;
use squidbot::approval::{ApprovalMode, ApprovalSettings, Approvals, TurnGates};
use squidbot::channels::Routes;
use squidbot::channels::terminal::ExtraTools;
use squidbot::config::{
    ApprovalConfig, Config, LoadedConfig, PoolMember, ProviderApi, TokenLimitSetting,
    ToolCallIdsSetting,
};
use squidbot::core::agent_loop::AgentLoop;
use squidbot::core::conversation::Conversations;
use squidbot::core::memory_manager::{MemoryManager, MemorySettings};
use squidbot::core::origin::Origin;
use squidbot::core::ports::channel::TurnTools;
use squidbot::core::ports::clock::Clock;
use squidbot::core::ports::clock::SystemClock;
use squidbot::core::ports::llm::LlmClient;
use squidbot::core::ports::models::{CatalogEntry, ModelCatalog, ModelKind};
use squidbot::core::ports::prompt::AppendedPrompt;
use squidbot::core::ports::store::{HistoryStore, MemoryStore};
use squidbot::core::ports::tool::Tool;
use squidbot::core::redact::Redactor;
use squidbot::core::session::SessionId;
use squidbot::core::session_locks::SessionLocks;
use squidbot::core::tool_registry::ToolRegistry;
use squidbot::cron::admin::JobRoutes;
use squidbot::cron::store::CronJobs;
use squidbot::cron::tools::{CronAddTool, registry_tools};
use squidbot::gateway::Metrics;
use squidbot::gateway::backoff::Backoff;
use squidbot::llm::learned::Learned;
use squidbot::llm::profile::{TokenLimit, ToolCallIds};
use squidbot::llm::{
    AnthropicLlm, Endpoint, LlmPool, OpenAiCompatLlm, Profile, ResponsesLlm, RetryPolicy, Timeouts,
    http_client,
};
use squidbot::skills::catalog::search_dirs;
use squidbot::skills::{SkillCatalog, SkilledPrompt, bundled};
use squidbot::storage::file_lock::WorkspaceLock;
use squidbot::storage::{ConversationFiles, HistoryIndex, JsonlStore, MemoryFile, WorkspacePrompt};
use squidbot::tools::mcp::{CONNECT_TIMEOUT, McpHub};
use squidbot::tools::sandbox::{Sandbox, SandboxSettings, rules};
use squidbot::tools::shell_policy::AllowList;
use squidbot::tools::spawn::profiles::profiles_prompt;
use squidbot::tools::spawn::{SpawnLimits, SubAgentParts};
use squidbot::tools::{
    FetchUrlTool, MemoryWriteTool, SearchHistoryTool, ShellTool, SpawnHub, WebSearchTool,
    file_tools, spawn_tools,
};
use squidbot::workspace::WorkspaceGuard;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Waits before retrying an MCP server that was down at startup: 5 s doubling to 5 minutes.
const MCP_RETRY: Backoff = Backoff::new(Duration::from_secs(5), Duration::from_secs(300));

/// The assembled agent and what commands need next to it.
pub struct Assembly {
    /// The shared agent loop.
    pub agent: Arc<AgentLoop>,
    /// The registry of open approval requests: the agent's turns open them, the gateway's
    /// router, HTTP API, `/status` and shutdown answer, show and refuse them.
    pub approvals: Arc<Approvals>,
    /// The default pool's name (for banners).
    pub pool_name: String,
    memory: Arc<dyn MemoryStore>,
    pools: Pools,
    cron: CronJobs,
    clock: Arc<dyn Clock>,
    skills: SkillCatalog,
    mcp: Arc<McpHub>,
    spawn: Option<Arc<SpawnHub>>,
    history_index: Option<Arc<SearchHistoryTool>>,
    sandbox: Arc<Sandbox>,
    redactor: Arc<Redactor>,
}

/// What building more pools later needs.
#[derive(Clone)]
struct Pools {
    client: reqwest::Client,
    timeouts: Timeouts,
    metering: Metering,
}

impl Pools {
    /// The HTTP client, timeouts and metering of every pool of `loaded`: the ledger and
    /// budgets, and with `metrics` every model call counted.
    fn new(
        loaded: &LoadedConfig,
        metrics: Option<Arc<Metrics>>,
        clock: &Arc<dyn Clock>,
    ) -> Result<Self> {
        let timeouts = timeouts(&loaded.config);
        let client = http_client(&timeouts).context("building the HTTP client")?;
        let metering = Metering {
            usage: super::usage::usage_meter(&loaded.config, &loaded.home, clock.clone()),
            metrics,
            learned: Arc::new(Learned::load(&loaded.home)),
        };
        Ok(Self {
            client,
            timeouts,
            metering,
        })
    }

    /// The client of pool `name` of `config`.
    fn build(&self, config: &Config, name: &str) -> Result<Arc<dyn LlmClient>> {
        build_pool(config, name, &self.client, &self.timeouts, &self.metering)
    }
}

/// The tools built for each turn: `memory_write` bound to the turn's session, `cron_add`
/// bound to its session and routing metadata (not in cron and heartbeat turns), and the tools
/// of MCP servers that came up after startup.
struct AgentTurnTools {
    memory: Arc<dyn MemoryStore>,
    cron: CronJobs,
    /// How each channel routes a job aimed at it (see `cron_add`).
    routes: Arc<dyn JobRoutes>,
    clock: Arc<dyn Clock>,
    mcp: Arc<McpHub>,
}

impl TurnTools for AgentTurnTools {
    fn for_turn(
        &self,
        session: &SessionId,
        metadata: &serde_json::Map<String, serde_json::Value>,
        origin: &Origin,
    ) -> Vec<Arc<dyn Tool>> {
        let mut tools: Vec<Arc<dyn Tool>> = vec![Arc::new(MemoryWriteTool::new(
            self.memory.clone(),
            session.clone(),
        ))];
        if origin.may_schedule() {
            tools.push(Arc::new(CronAddTool::new(
                self.cron.clone(),
                self.routes.clone(),
                self.clock.clone(),
                session.clone(),
                metadata.clone(),
                origin.sender_id(),
            )));
        }
        tools.extend(self.mcp.late_tools());
        tools
    }
}

impl Assembly {
    /// Loads the configuration and builds the agent; fails with a clear message when no LLM is
    /// configured.
    pub async fn from_config(config_path: Option<&Path>) -> Result<Self> {
        let loaded = squidbot::config::load(config_path)?;
        for warning in &loaded.warnings {
            tracing::warn!("{warning}");
        }
        Self::build(&loaded, None).await
    }

    /// Builds the agent from an already loaded configuration; with `metrics`, every model call
    /// is counted.
    pub async fn build(loaded: &LoadedConfig, metrics: Option<Arc<Metrics>>) -> Result<Self> {
        super::private::narrow_home(loaded);
        loaded.check_agent()?;
        let config = &loaded.config;
        require_llm(loaded)?;
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let pools = Pools::new(loaded, metrics, &clock)?;
        let default_pool = &config.llm.default_pool;
        let llm = pools.build(config, default_pool)?;
        let consolidation_pool = config.pool_or_default(&config.agents.consolidation_pool);
        let consolidation_llm = if consolidation_pool == default_pool {
            llm.clone()
        } else {
            pools.build(config, consolidation_pool)?
        };

        let workspace = &config.agents.workspace;
        std::fs::create_dir_all(workspace)
            .with_context(|| format!("creating the workspace {}", workspace.display()))?;
        // In the home, where no shell command can take it (see `WorkspaceLock`).
        let workspace_lock = WorkspaceLock::new(&loaded.home, workspace);
        let memory: Arc<dyn MemoryStore> =
            Arc::new(MemoryFile::new(workspace).with_lock(workspace_lock.clone()));
        let skills = skill_catalog(config, &loaded.home);
        let settings = MemorySettings {
            consolidation_threshold: config.agents.consolidation_threshold,
            keep_recent: config.agents.keep_recent,
            summary_word_limit: config.agents.summary_word_limit,
        };
        let history: Arc<dyn HistoryStore> = Arc::new(JsonlStore::new(&loaded.home));
        let prompt = main_prompt(config, &skills);
        let manager = MemoryManager::new(
            history.clone(),
            memory.clone(),
            prompt,
            Some(consolidation_llm),
            settings,
        );
        let cron = CronJobs::new(&loaded.home);
        // Every tool result of every turn, sub-agents' included, is redacted by this.
        let redactor = Arc::new(redactor(config));
        super::redact_logs(redactor.clone());
        let mut registry = ToolRegistry::with_redactor(redactor.clone());
        let sandbox = Arc::new(Sandbox::new(&sandbox_settings(loaded), &redactor));
        if config.tools.shell.enabled
            && let Some(warning) = sandbox.warning()
        {
            tracing::warn!("{warning}");
        }
        register_workspace_tools(
            &mut registry,
            config,
            &bundled::bundled_dir(&loaded.home),
            &sandbox,
            &workspace_lock,
        )?;
        for tool in registry_tools(&cron, &clock) {
            registry.register(tool)?;
        }
        let history_index = register_web_and_history_tools(&mut registry, loaded, &clock)?;
        // Their tools join before spawn copies the registry, so sub-agents get them too.
        let mcp = connect_mcp(config, &mut registry).await;
        let locks = Arc::new(SessionLocks::new());
        let mut spawn = None;
        if config.tools.spawn.enabled {
            // The hub takes a copy of the registry as it is now, before spawn and spawn_await
            // join it: sub-agents get every other tool, never these two, and no cycle forms.
            let parts = SubAgentParts {
                llm: llm.clone(),
                tools: registry.clone(),
                history,
                memory: memory.clone(),
                clock: clock.clone(),
                settings,
                workspace: workspace.clone(),
                locks: locks.clone(),
            };
            spawn = Some(spawn_hub(config, parts, &pools, &mut registry)?);
        }
        let approvals = Arc::new(Approvals::new(clock.clone()));
        let catalog = ConfiguredModels::new(
            config,
            pools.clone(),
            HashMap::from([(default_pool.clone(), llm.clone())]),
        );
        let conversations = Conversations::new(
            Arc::new(ConversationFiles::new(&loaded.home)),
            Arc::new(catalog),
        );
        let agent = AgentLoop::new(
            llm,
            Arc::new(registry),
            Arc::new(manager),
            locks,
            clock.clone(),
        )
        .with_approvals(Arc::new(TurnGates::new(
            Some(approvals.clone()),
            approval_settings(config),
            redactor.clone(),
        )))
        .with_usage(pools.metering.usage.clone())
        .with_conversations(Arc::new(conversations));
        Ok(Self {
            agent: Arc::new(agent),
            approvals,
            pool_name: default_pool.clone(),
            memory,
            pools,
            cron,
            clock,
            skills,
            mcp,
            spawn,
            history_index,
            sandbox,
            redactor,
        })
    }

    /// The redactor shared by every tool result, reply, prompt and log line (a channel adds
    /// the secrets it learns at login).
    pub fn redactor(&self) -> &Arc<Redactor> {
        &self.redactor
    }

    /// The shell sandbox (for `/status`).
    pub fn sandbox(&self) -> &Arc<Sandbox> {
        &self.sandbox
    }

    /// Work worth starting early in a long-lived process (the gateway, the REPL): bringing the
    /// history index up to date in the background. A one-shot `agent -m` skips it: its search,
    /// if any, updates the index itself, and the process would otherwise wait at exit for a
    /// full index build it never used.
    pub fn warm_up(&self) {
        if let Some(tool) = &self.history_index {
            tool.warm_up();
        }
    }

    /// The sub-agent hub, when `tools.spawn` is enabled (for `/status` and shutdown).
    pub fn spawn(&self) -> Option<&Arc<SpawnHub>> {
        self.spawn.as_ref()
    }

    /// The usage meter: ledger, totals and budgets (for `/status`).
    pub fn usage(&self) -> &Arc<UsageMeter> {
        &self.pools.metering.usage
    }

    /// The skill catalog behind the prompt (for `/status`).
    pub fn skills(&self) -> &SkillCatalog {
        &self.skills
    }

    /// The MCP servers and their tools (for `/status`).
    pub fn mcp(&self) -> Arc<McpHub> {
        self.mcp.clone()
    }

    /// Starts retrying, in `tasks`, the MCP servers that were down at startup, until they
    /// answer or `shutdown` fires; their tools then join every turn.
    pub fn retry_mcp(&self, shutdown: CancellationToken, tasks: &TaskTracker) {
        let hub = self.mcp.clone();
        tasks.spawn(async move { hub.retry_unavailable(MCP_RETRY, shutdown).await });
    }

    /// A client for another pool of the configuration (heartbeat, spawn profiles).
    pub fn pool(&self, config: &Config, name: &str) -> Result<Arc<dyn LlmClient>> {
        self.pools.build(config, name)
    }

    /// The per-turn tools for the gateway's router.
    pub fn turn_tools(&self) -> Arc<dyn TurnTools> {
        Arc::new(AgentTurnTools {
            memory: self.memory.clone(),
            cron: self.cron.clone(),
            routes: Arc::new(Routes::new()),
            clock: self.clock.clone(),
            mcp: self.mcp.clone(),
        })
    }

    /// The clock every component uses.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// The per-turn tools of the terminal: `memory_write` and `cron_add` for its session.
    pub fn extra_tools(&self) -> Arc<ExtraTools> {
        let tools = self.turn_tools();
        let owner = Origin::owner();
        Arc::new(move |session| tools.for_turn(session, &serde_json::Map::new(), &owner))
    }
}

/// The main agent's system prompt: the workspace's bootstrap files with the spawn profiles,
/// then the skills.
fn main_prompt(config: &Config, skills: &SkillCatalog) -> Arc<SkilledPrompt> {
    let workspace = Arc::new(WorkspacePrompt::main_agent(&config.agents.workspace));
    let profiles = profiles_prompt(&config.tools.spawn);
    let prompt = Arc::new(AppendedPrompt::new(workspace, profiles));
    Arc::new(SkilledPrompt::new(prompt, skills.clone()))
}

/// Connects the MCP servers, concurrently, each bounded by a timeout (one that is down only
/// warns), and registers their tools.
async fn connect_mcp(config: &Config, registry: &mut ToolRegistry) -> Arc<McpHub> {
    let mcp = Arc::new(McpHub::connect(&config.tools.mcp_servers, CONNECT_TIMEOUT).await);
    for tool in mcp.tools() {
        if let Err(error) = registry.register(tool) {
            tracing::warn!(error = %error, "MCP tool skipped.");
        }
    }
    mcp
}

/// The sub-agent hub over `parts`, its pools built from `pools`, with `spawn` and
/// `spawn_await` registered.
fn spawn_hub(
    config: &Config,
    parts: SubAgentParts,
    pools: &Pools,
    registry: &mut ToolRegistry,
) -> Result<Arc<SpawnHub>> {
    let build = |pool: &str| pools.build(config, pool);
    let hub = SpawnHub::new(&config.tools.spawn, parts, SpawnLimits::default(), build)
        .context("setting up tools.spawn")?;
    let hub = Arc::new(hub);
    for tool in spawn_tools(&hub) {
        registry.register(tool)?;
    }
    Ok(hub)
}

/// Fails, saying how to configure one, when `loaded` has no usable LLM.
fn require_llm(loaded: &LoadedConfig) -> Result<()> {
    if loaded.config.llm_configured() {
        return Ok(());
    }
    let what = if loaded.exists {
        "has no usable LLM configured"
    } else {
        "does not exist"
    };
    bail!(
        "{} {what}.\nConfigure an OpenAI-compatible endpoint with:\n  squidbot onboard --api-base https://api.openai.com/v1 --model gpt-4o-mini --api-key-env OPENAI_API_KEY\n(or edit the file: llm.providers, llm.models, llm.pools, llm.default_pool; see config/example.yaml).",
        loaded.path.display()
    );
}

/// Registers `fetch_url`, `web_search` and `search_history` as configured; returns the last,
/// whose index the long-lived commands warm up.
fn register_web_and_history_tools(
    registry: &mut ToolRegistry,
    loaded: &LoadedConfig,
    clock: &Arc<dyn Clock>,
) -> Result<Option<Arc<SearchHistoryTool>>> {
    let config = &loaded.config;
    if config.tools.fetch_url.enabled {
        registry.register(Arc::new(FetchUrlTool::new()))?;
    }
    if config.tools.web_search.enabled {
        let tool = WebSearchTool::from_config(&config.tools.web_search)
            .context("setting up tools.web_search")?;
        registry.register(Arc::new(tool))?;
    }
    if !config.tools.search_history.enabled {
        return Ok(None);
    }
    // The index is a cache: if it cannot be opened, the agent runs without the tool.
    match HistoryIndex::open(&loaded.home) {
        Ok(index) => {
            let tool = Arc::new(SearchHistoryTool::new(Arc::new(index), clock.clone()));
            registry.register(tool.clone())?;
            Ok(Some(tool))
        }
        Err(error) => {
            tracing::warn!(error = %error, "History index unavailable; search_history disabled.");
            Ok(None)
        }
    }
}

/// The skill catalog of `config`: `skills.extra_dirs`, `<workspace>/skills`, then the bundled
/// skills, materialized under `home` first (without them when that fails).
pub fn skill_catalog(config: &Config, home: &Path) -> SkillCatalog {
    if let Err(error) = bundled::materialize(home) {
        tracing::warn!(error = %error, "Could not write the bundled skills; they are left out.");
    }
    let dirs = search_dirs(
        &config.skills.extra_dirs,
        &config.agents.workspace,
        &bundled::bundled_dir(home),
    );
    SkillCatalog::new(dirs)
}

/// How approvals behave, from `tools.shell.approval` and `approval_timeout_seconds`.
fn approval_settings(config: &Config) -> ApprovalSettings {
    let shell = &config.tools.shell;
    ApprovalSettings {
        mode: match shell.approval {
            ApprovalConfig::Ask => ApprovalMode::Ask,
            ApprovalConfig::Off => ApprovalMode::Off,
        },
        timeout: Duration::from_secs(shell.approval_timeout_seconds),
    }
}

/// The redactor of every secret the configuration knows (see `Config::secret_values`); the
/// fields of secrets too short to redact are named in the log.
fn redactor(config: &Config) -> Redactor {
    let secrets = config.secret_values(&squidbot::channels::registry::secret_fields(config));
    for (field, value) in &secrets {
        if Redactor::too_short(value) {
            tracing::warn!(field = %field, "Secret too short to be redacted from tool output.");
        }
    }
    Redactor::new(secrets.iter().map(|(_, value)| value))
}

/// The shell sandbox's settings: `tools.shell.*`, the workspace, the skill directories as
/// readable, and `$SQUIDBOT_HOME`, the config file, the owner's home and the system's secrets
/// (`rules::SYSTEM_SECRETS`, the SSH host keys) as hidden.
pub fn sandbox_settings(loaded: &LoadedConfig) -> SandboxSettings {
    let config = &loaded.config;
    let shell = &config.tools.shell;
    let mut readable = config.skills.extra_dirs.clone();
    readable.push(bundled::bundled_dir(&loaded.home));
    let mut hidden = vec![loaded.home.clone(), loaded.path.clone()];
    hidden.extend(std::env::var_os("HOME").map(std::path::PathBuf::from));
    hidden.extend(rules::SYSTEM_SECRETS.iter().map(std::path::PathBuf::from));
    // The SSH host keys, by name: /etc/ssh itself holds the client's configuration.
    if let Ok(entries) = std::fs::read_dir("/etc/ssh") {
        hidden.extend(
            entries
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("ssh_host_"))
                .map(|e| e.path()),
        );
    }
    SandboxSettings {
        mode: shell.sandbox,
        network: shell.network,
        workspace: config.agents.workspace.clone(),
        readable,
        hidden,
        env_passthrough: shell.env_passthrough.clone(),
        run_as: shell.run_as.clone(),
    }
}

/// Registers `shell` (if `tools.shell.enabled`, in `sandbox`) and the file tools (if
/// `tools.files.enabled`), confined to the workspace when `agents.restrict_to_workspace`;
/// skill directories (`skills.extra_dirs` and the bundled skills in `bundled`) stay readable.
fn register_workspace_tools(
    registry: &mut ToolRegistry,
    config: &Config,
    bundled: &Path,
    sandbox: &Arc<Sandbox>,
    lock: &WorkspaceLock,
) -> Result<()> {
    let workspace = &config.agents.workspace;
    if config.tools.shell.enabled {
        let shell = &config.tools.shell;
        let allow = match &shell.allow {
            Some(entries) => AllowList::new(entries.iter().map(String::as_str)),
            None => AllowList::default(),
        };
        let tool = ShellTool::new(workspace, shell.timeout_seconds)
            .with_approval(allow, approval_settings(config).mode)
            .with_unattended_writes(shell.unattended_writes.clone())
            .with_sandbox(sandbox.clone());
        registry.register(Arc::new(tool))?;
    }
    if config.tools.files.enabled {
        let mut readable = config.skills.extra_dirs.clone();
        readable.push(bundled.to_owned());
        let guard = WorkspaceGuard::new(workspace, config.agents.restrict_to_workspace, &readable)
            .with_context(|| format!("resolving the workspace {}", workspace.display()))?
            .with_lock(lock.clone());
        for tool in file_tools(Arc::new(guard)) {
            registry.register(tool)?;
        }
    }
    Ok(())
}

fn timeouts(config: &Config) -> Timeouts {
    let t = &config.llm.timeouts;
    Timeouts {
        connect: Duration::from_secs(t.connect_seconds),
        first_byte: Duration::from_secs(t.first_byte_seconds),
        idle: Duration::from_secs(t.idle_seconds),
        total: Duration::from_secs(t.total_seconds),
    }
}

/// One pool of the configuration as an LLM client.
fn build_pool(
    config: &Config,
    pool: &str,
    client: &reqwest::Client,
    timeouts: &Timeouts,
    metering: &Metering,
) -> Result<Arc<dyn LlmClient>> {
    let Some(members) = config.pool_members(pool) else {
        bail!("LLM pool {pool:?} is not configured");
    };
    Ok(members_client(
        config, pool, members, client, timeouts, metering,
    ))
}

/// The accounted client of `members`, asked in order, under the name `pool`.
fn members_client(
    config: &Config,
    pool: &str,
    members: Vec<PoolMember<'_>>,
    client: &reqwest::Client,
    timeouts: &Timeouts,
    metering: &Metering,
) -> Arc<dyn LlmClient> {
    let metrics = metering.metrics.as_ref();
    let members: Vec<Arc<dyn LlmClient>> = members
        .into_iter()
        .map(|member| {
            if let Some(metrics) = metrics {
                metrics.register_model(member.name);
            }
            let endpoint = endpoint(&member, Some(member.model.max_tokens));
            model_client(&member, endpoint, client, timeouts, &metering.learned)
        })
        .collect();
    let r = &config.llm.retry;
    let retry = RetryPolicy {
        max_retries: r.max_retries,
        base_delay: Duration::from_millis(r.base_delay_ms),
        max_delay: Duration::from_millis(r.max_delay_ms),
    };
    // The layers, outermost first: accounting (budgets, ledger, metrics), then retry and
    // fallback across the members, then each model's client with its provider's quirks.
    let inner: Arc<dyn LlmClient> = Arc::new(LlmPool::new(pool, members, retry));
    let accounted = AccountedLlm::new(inner, metering.usage.clone(), pool);
    Arc::new(match metrics {
        Some(metrics) => accounted.with_observer(metrics.clone() as Arc<dyn CallObserver>),
        None => accounted,
    })
}

/// The configured models and pools for `/model`: each client built on first use, through the
/// same layers as every pool, then kept, so conversations that pick the same name share it.
struct ConfiguredModels {
    config: Config,
    pools: Pools,
    entries: Vec<CatalogEntry>,
    /// A std mutex: held to look up or insert a client; building one does no I/O.
    built: Mutex<HashMap<String, Arc<dyn LlmClient>>>,
}

impl ConfiguredModels {
    /// The catalog of `config`, with the clients already built (the default pool's).
    fn new(config: &Config, pools: Pools, built: HashMap<String, Arc<dyn LlmClient>>) -> Self {
        let llm = &config.llm;
        let pools_listed = llm.pools.iter().map(|(name, entries)| CatalogEntry {
            name: name.clone(),
            kind: ModelKind::Pool,
            detail: entries
                .iter()
                .map(|entry| entry.model.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        });
        let models_listed = llm.models.iter().map(|(name, model)| CatalogEntry {
            name: name.clone(),
            kind: ModelKind::Model,
            detail: model.model.clone(),
        });
        Self {
            config: config.clone(),
            pools,
            entries: pools_listed.chain(models_listed).collect(),
            built: Mutex::new(built),
        }
    }
}

impl ModelCatalog for ConfiguredModels {
    fn entries(&self) -> Vec<CatalogEntry> {
        self.entries.clone()
    }

    fn default_name(&self) -> &str {
        &self.config.llm.default_pool
    }

    fn client(&self, name: &str) -> Option<Arc<dyn LlmClient>> {
        let mut built = self.built.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(client) = built.get(name) {
            return Some(client.clone());
        }
        let config = &self.config;
        let members = match config.pool_members(name) {
            Some(members) => members,
            None => {
                let (name, model) = config.llm.models.get_key_value(name)?;
                let (provider_name, provider) =
                    config.llm.providers.get_key_value(&model.provider)?;
                vec![PoolMember {
                    name,
                    model,
                    provider_name,
                    provider,
                }]
            }
        };
        if members.is_empty() {
            return None;
        }
        let pools = &self.pools;
        let client = members_client(
            config,
            name,
            members,
            &pools.client,
            &pools.timeouts,
            &pools.metering,
        );
        built.insert(name.to_owned(), client.clone());
        Some(client)
    }
}

/// The client of one model, speaking the API its provider states (`llm.providers.<name>.api`).
pub(crate) fn model_client(
    member: &PoolMember<'_>,
    endpoint: Endpoint,
    client: &reqwest::Client,
    timeouts: &Timeouts,
    learned: &Arc<Learned>,
) -> Arc<dyn LlmClient> {
    match member.provider.api {
        ProviderApi::Chat => Arc::new(
            OpenAiCompatLlm::new(client.clone(), endpoint, *timeouts).with_learned(learned.clone()),
        ),
        ProviderApi::Responses => Arc::new(ResponsesLlm::new(client.clone(), endpoint, *timeouts)),
        ProviderApi::Anthropic => Arc::new(AnthropicLlm::new(client.clone(), endpoint, *timeouts)),
    }
}

/// What every pool is measured by: the per-model call counters (gateway only) and the usage
/// meter (ledger and budgets).
#[derive(Clone)]
struct Metering {
    metrics: Option<Arc<Metrics>>,
    usage: Arc<UsageMeter>,
    /// What the home learned about the servers (see `Learned`).
    learned: Arc<Learned>,
}

/// The endpoint of one pool member, its reply limited to `max_tokens`: the provider's URL and
/// key, and the request profile the model's settings state (`auto`: detected from the model id
/// and the API's host, see [`Profile::detect`]).
pub(crate) fn endpoint(member: &PoolMember<'_>, max_tokens: Option<u32>) -> Endpoint {
    let (model, provider) = (member.model, member.provider);
    let mut profile = Profile::detect(&provider.api_base, &model.model);
    match model.token_limit {
        TokenLimitSetting::Auto => {}
        TokenLimitSetting::MaxTokens => profile.token_limit = TokenLimit::MaxTokens,
        TokenLimitSetting::MaxCompletionTokens => {
            profile.token_limit = TokenLimit::MaxCompletionTokens;
        }
        TokenLimitSetting::None => profile.token_limit = TokenLimit::Omit,
    }
    match model.tool_call_ids {
        ToolCallIdsSetting::Auto => {}
        ToolCallIdsSetting::Any => profile.tool_call_ids = ToolCallIds::Any,
        ToolCallIdsSetting::Mistral => profile.tool_call_ids = ToolCallIds::NineAlphanumerics,
    }
    profile.tools = model.tools;
    profile.echo_reasoning |= provider.supports_reasoning_content;
    if let Some(vision) = model.vision {
        profile.vision = vision;
    }
    Endpoint {
        model_name: member.name.to_owned(),
        model: model.model.clone(),
        api_base: provider.api_base.clone(),
        api_key: (!provider.api_key.is_empty()).then(|| provider.api_key.expose().to_owned()),
        profile,
        max_tokens: max_tokens.filter(|&n| n > 0),
        max_context_tokens: Some(model.max_context_tokens).filter(|&n| n > 0),
        max_image_bytes: model.max_image_bytes,
    }
}
