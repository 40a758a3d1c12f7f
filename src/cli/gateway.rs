//! `squidbot gateway`: the daemon.
//!
//! It assembles the agent with metered LLM pools, builds the live state, the enabled channels
//! (one loop over the list of channel plug-ins, `squidbot::channels::plugins`, cron among
//! them) and the router, and hands them to the supervisor. SIGTERM or SIGINT stops accepting,
//! drains in-flight turns within `gateway.shutdown_grace_seconds`, lets the channels stop, and
//! exits 0. Before anything else it claims the home ([`HomeLock`]): a second gateway on the same
//! `$SQUIDBOT_HOME` exits 1 naming the first one's pid.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use squidbot::accounting::meter::UsageMeter;
use squidbot::channels::plugin::{ChannelTools, PluginContext, unbuilt_message};
use squidbot::channels::registry::{plugins, unbuilt};
use squidbot::config::{Config, LoadedConfig};
use squidbot::core::ports::approvals::ApprovalRequest;
use squidbot::core::ports::channel::{ActivityLog, Channel, Dispatch, Outboxes, TurnTools};
use squidbot::gateway::approval_notice;
use squidbot::gateway::fault::FaultChannel;
use squidbot::gateway::{ChannelDirectory, GatewayState, Metrics, Router, Supervisor, shutdown};
use squidbot::gateway::{StatusSection, status_fn};
use squidbot::skills::SkillCatalog;
use squidbot::storage::{ActivityFile, ApprovalFile, HomeLock};
use squidbot::tools::mcp::McpHub;

use super::assemble::Assembly;

/// Refuses a configuration that enables a channel this build left out (a cargo feature), so
/// the gateway does not run without a channel its owner expects to work.
fn built_with(config: &Config) -> Result<()> {
    match unbuilt(config).first() {
        Some(channel) => anyhow::bail!("{}", unbuilt_message(channel)),
        None => Ok(()),
    }
}

/// How long the usage of calls cut short by the stop gets to reach the ledger.
const LEDGER_FLUSH: Duration = Duration::from_secs(5);

/// How long channels get to stop after the turns drained.
const CHANNEL_STOP: Duration = Duration::from_secs(5);

/// Runs the gateway until a stop signal.
pub async fn run(config_path: Option<&Path>) -> Result<ExitCode> {
    let started = Instant::now();
    let loaded = squidbot::config::load(config_path)?;
    loaded.check_gateway()?;
    built_with(&loaded.config)?;
    for warning in &loaded.warnings {
        tracing::warn!("{warning}");
    }
    // Held until the process exits: before the port, the Matrix store or any file is touched.
    let _home = HomeLock::acquire(&loaded.home)?;
    let config = &loaded.config;
    let metrics = Arc::new(Metrics::new());
    let assembly = Assembly::build(&loaded, Some(metrics.clone())).await?;
    metrics.register_tool("memory_write");
    let state = Arc::new(GatewayState::new(metrics).with_redactor(assembly.redactor().clone()));
    add_sections(&state, &assembly, config);
    let activity = Arc::new(ActivityFile::new(&loaded.home));
    let activity_log: Arc<dyn ActivityLog> = activity.clone();
    let directory = Arc::new(ChannelDirectory::new(state.clone()));
    let outboxes: Arc<dyn Outboxes> = directory.clone();
    // Before any turn can open a request: what the last run left open is expired now.
    let expired_approvals = recover_approvals(&state, &assembly, &loaded.home);
    let wiring = Wiring {
        loaded: &loaded,
        assembly: &assembly,
        state: &state,
        directory: &directory,
        outboxes: &outboxes,
        activity: &activity_log,
    };
    let turn_tools = wiring.plug_channels()?;
    wiring.plug_fault();
    let router = Arc::new(
        Router::new(
            assembly.agent.clone(),
            turn_tools,
            Some(activity_log.clone()),
            state.clone(),
            config.gateway.max_parallel_sessions,
        )
        .with_approvals(assembly.approvals.clone()),
    );

    let channels: Vec<Arc<dyn Channel>> = directory.all();
    let names: Vec<&str> = channels.iter().map(|c| c.name()).collect();
    tracing::info!(channels = ?names, pool = %assembly.pool_name, startup_ms = started.elapsed().as_millis() as u64, "Gateway starting.");
    let stop = CancellationToken::new();
    let signals = tokio::spawn(shutdown::on_signal(stop.clone()));
    // Every background task the gateway starts, waited for (within CHANNEL_STOP) at the end.
    let tasks = TaskTracker::new();
    assembly.retry_mcp(stop.clone(), &tasks);
    if !expired_approvals.is_empty() {
        tracing::warn!(
            count = expired_approvals.len(),
            "Approvals left open by the last run were refused; telling the owner."
        );
        approval_notice::tell_owner(expired_approvals, outboxes.clone(), &tasks, stop.clone());
    }
    assembly.warm_up();
    let dispatch: Arc<dyn Dispatch> = router.clone();
    let supervisor = Supervisor::new(state.clone(), dispatch, tasks);
    let supervised = tokio::spawn({
        let stop = stop.clone();
        async move { supervisor.run(channels, stop).await }
    });

    stop.cancelled().await;
    let drained = drain(&assembly, &router, config, supervised).await;
    signals.abort();
    if let Err(error) = activity.save() {
        tracing::warn!(error = %error, "Could not save the last active session.");
    }
    if !assembly.usage().flush(LEDGER_FLUSH).await {
        tracing::warn!("Usage of calls cut short was not all written before the exit.");
    }
    if drained {
        tracing::info!("Gateway stopped.");
        Ok(ExitCode::SUCCESS)
    } else {
        // A supervisor (systemd's Restart=on-failure) and the owner's logs see that turns
        // were cut, not a clean stop.
        tracing::warn!("Gateway stopped with turns cut at the end of the grace period.");
        Ok(ExitCode::FAILURE)
    }
}

/// The `/status` sections of the agent's parts: skills, sandbox, usage, MCP servers, spawn.
fn add_sections(state: &GatewayState, assembly: &Assembly, config: &Config) {
    state.add_section(Arc::new(SkillsSection(assembly.skills().clone())));
    let sandbox = assembly.sandbox().clone();
    let shell_enabled = config.tools.shell.enabled;
    state.add_section(Arc::new(status_fn("sandbox", move || {
        if shell_enabled {
            sandbox.status()
        } else {
            "off (no shell tool)".to_owned()
        }
    })));
    state.add_section(Arc::new(UsageSection(assembly.usage().clone())));
    if !config.tools.mcp_servers.is_empty() {
        state.add_section(Arc::new(McpSection(assembly.mcp())));
    }
    if let Some(hub) = assembly.spawn() {
        let hub = hub.clone();
        state.add_section(Arc::new(status_fn("spawn", move || hub.status())));
    }
}

/// `/status` → `approvals`, and what the last run left open, expired now (to tell the owner).
fn recover_approvals(
    state: &GatewayState,
    assembly: &Assembly,
    home: &Path,
) -> Vec<ApprovalRequest> {
    let approvals = &assembly.approvals;
    let status = approvals.clone();
    // The one-time codes stay out: `/status` needs no token.
    let open = move || {
        let open = status.open().into_iter().map(|request| {
            serde_json::json!({
                "id": request.id,
                "session": request.session,
                "tool": request.tool,
                "command": request.command,
                "expires_at": request.expires_at,
            })
        });
        open.collect::<Vec<_>>()
    };
    state.add_section(Arc::new(status_fn("approvals", open)));
    approvals.recover(Arc::new(ApprovalFile::new(home)))
}

/// What the channels are built from and registered with.
struct Wiring<'a> {
    loaded: &'a LoadedConfig,
    assembly: &'a Assembly,
    state: &'a Arc<GatewayState>,
    directory: &'a Arc<ChannelDirectory>,
    outboxes: &'a Arc<dyn Outboxes>,
    activity: &'a Arc<dyn ActivityLog>,
}

impl Wiring<'_> {
    /// Builds every enabled channel of the one list, registers it with its `/status` section,
    /// and returns the turn tools: everyone's and the channels' own.
    fn plug_channels(&self) -> Result<Arc<dyn TurnTools>> {
        let config = &self.loaded.config;
        let agent = &self.assembly.agent;
        let pool = |name: &str| {
            self.assembly
                .pool(config, name)
                .map_err(squidbot::core::ports::channel::Cause::from)
        };
        let voice = super::voice::voice_notes(config, self.assembly.usage())?;
        let context = PluginContext {
            config,
            voice: voice.as_ref(),
            home: &self.loaded.home,
            owner: &config.owner(),
            redactor: self.assembly.redactor(),
            state: self.state,
            outboxes: self.outboxes,
            activity: self.activity,
            approvals: Some(&self.assembly.approvals),
            conversations: agent.conversations(),
            pool: &pool,
            clock: self.assembly.clock(),
        };
        let mut tools = Vec::new();
        for plugin in plugins() {
            if !plugin.enabled(config) {
                continue;
            }
            let plugged = plugin.build(&context)?;
            if let Some(section) = plugged.status {
                self.state.add_section(section);
            }
            tools.extend(plugged.tools);
            self.directory.register(plugged.channel);
        }
        Ok(Arc::new(ChannelTools {
            base: self.assembly.turn_tools(),
            channels: tools,
        }))
    }

    /// The fault channel the supervisor's tests plant with `SQUIDBOT_FAULT_CHANNEL`.
    fn plug_fault(&self) {
        if let Ok(spec) = std::env::var("SQUIDBOT_FAULT_CHANNEL") {
            match FaultChannel::parse(&spec) {
                Some(fault) => self.directory.register(Arc::new(fault)),
                None => tracing::warn!(
                    spec,
                    "Ignored SQUIDBOT_FAULT_CHANNEL: expected panic:<ms> or error:<ms>."
                ),
            }
        }
    }
}

/// After the stop signal: refuses the approvals still waiting, drains the turns and the
/// sub-agents within the grace period, and gives the channels `CHANNEL_STOP` to stop. Whether
/// every turn finished.
async fn drain(
    assembly: &Assembly,
    router: &Router,
    config: &Config,
    supervised: tokio::task::JoinHandle<()>,
) -> bool {
    // A turn waiting for the owner would hold the drain for the whole grace period and then
    // be cut off: refuse what waits, so each such turn ends now and tells its asker.
    let refused = assembly.approvals.refuse_all();
    if refused > 0 {
        tracing::info!(
            refused,
            "Refused the approvals still waiting: the gateway is stopping."
        );
    }
    let grace = Duration::from_secs(config.gateway.shutdown_grace_seconds);
    let deadline = tokio::time::Instant::now() + grace;
    let drained = router.shutdown(grace).await;
    // Turns may have started sub-agents that nobody awaits: they share what is left of the
    // grace period, so a stop never takes longer than configured.
    if let Some(hub) = assembly.spawn() {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        hub.shutdown(left).await;
    }
    if tokio::time::timeout(CHANNEL_STOP, supervised)
        .await
        .is_err()
    {
        tracing::warn!("Channels and their tasks did not stop in time; exiting anyway.");
    }
    drained
}

/// `/status` → `mcp`: each MCP server, whether it is connected, its tools and last error.
struct McpSection(Arc<McpHub>);

#[async_trait::async_trait]
impl StatusSection for McpSection {
    fn key(&self) -> &str {
        "mcp"
    }

    async fn render(&self) -> serde_json::Value {
        self.0
            .status()
            .await
            .iter()
            .map(|server| {
                serde_json::json!({
                    "server": server.server,
                    "connected": server.connected,
                    "tools": server.tools,
                    "last_error": server.last_error,
                })
            })
            .collect()
    }
}

/// The skills section of `/status`: every skill with its availability and location.
/// `/status` → `usage`: today's and this month's totals, the budgets, skipped ticks and runs.
struct UsageSection(Arc<UsageMeter>);

#[async_trait::async_trait]
impl StatusSection for UsageSection {
    fn key(&self) -> &str {
        "usage"
    }

    async fn render(&self) -> serde_json::Value {
        serde_json::to_value(self.0.status().await).unwrap_or_default()
    }
}

struct SkillsSection(SkillCatalog);

#[async_trait::async_trait]
impl StatusSection for SkillsSection {
    fn key(&self) -> &str {
        "skills"
    }

    async fn render(&self) -> serde_json::Value {
        let catalog = self.0.clone();
        let skills = tokio::task::spawn_blocking(move || catalog.skills())
            .await
            .unwrap_or_default();
        skills
            .iter()
            .map(|skill| {
                serde_json::json!({
                    "name": skill.name,
                    "available": skill.available(),
                    "always": skill.always,
                    "location": skill.location,
                    "missing_bins": skill.missing_bins,
                    "missing_env": skill.missing_env,
                })
            })
            .collect()
    }
}
