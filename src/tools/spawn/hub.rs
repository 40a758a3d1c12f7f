//! [`SpawnHub`]: builds and runs sub-agents, one background turn per job.
//!
//! A job is one turn of the session `spawn:<job id>` on an `AgentLoop` made for it: the
//! profile's LLM pool, a registry filtered from the parent's (never `spawn`/`spawn_await`, so
//! sub-agents cannot spawn), and a prompt of the profile's bootstrap files, its
//! `system_prompt_file` and its system prompt. The loop shares the parent's history and memory
//! stores, so the sub-agent reads MEMORY.md and its exchange is persisted in its own JSONL,
//! never in the parent's session. A sub-agent takes its parent turn's audience: one started
//! in a conversation with other people gets no more of the owner's private memory than that
//! turn had. A semaphore bounds how many run at once; the rest wait.

use std::collections::BTreeMap;
use std::fmt::Display;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use futures_util::future::join_all;
use tokio::sync::{Semaphore, watch};
use tokio::time::Instant;
use tokio_util::task::TaskTracker;

use super::SpawnError;
use super::jobs::{self, Finished, JobError, JobResult, JobStore};
use super::profiles::profile_descriptions;
use crate::approval::{ApprovalSettings, TurnGates};
use crate::config::SpawnConfig;
use crate::core::agent_loop::{AgentLoop, TurnRequest};
use crate::core::audience::Audience;
use crate::core::memory_manager::{MemoryManager, MemorySettings};
use crate::core::origin::Origin;
use crate::core::ports::channel::CollectingSink;
use crate::core::ports::clock::Clock;
use crate::core::ports::llm::LlmClient;
use crate::core::ports::prompt::{PromptSections, PromptSource};
use crate::core::ports::store::{HistoryStore, MemoryStore};
use crate::core::session::SessionId;
use crate::core::session_locks::SessionLocks;
use crate::core::tool_registry::ToolRegistry;
use crate::storage::WorkspacePrompt;

/// Bootstrap files of a profile that names none.
pub const DEFAULT_BOOTSTRAP_FILES: [&str; 2] = ["AGENTS.md", "ENVIRONMENT.md"];
/// The tools no sub-agent gets.
pub const SPAWN_TOOL_NAMES: [&str; 2] = ["spawn", "spawn_await"];
/// Separator between prompt parts (as between bootstrap files).
const SEPARATOR: &str = "\n\n---\n\n";

/// Limits of a hub; [`Default`] is what production uses.
#[derive(Debug, Clone, Copy)]
pub struct SpawnLimits {
    /// How long `spawn_await` waits before reporting jobs as still running.
    pub await_timeout: Duration,
    /// How long a finished, uncollected result is kept.
    pub job_ttl: Duration,
    /// Most jobs (running or uncollected) kept at once.
    pub max_jobs: usize,
}

impl Default for SpawnLimits {
    fn default() -> Self {
        Self {
            await_timeout: Duration::from_secs(600),
            job_ttl: Duration::from_secs(3600),
            max_jobs: 256,
        }
    }
}

/// What every sub-agent shares with the parent agent.
pub struct SubAgentParts {
    /// The default pool (for jobs whose profile names none).
    pub llm: Arc<dyn LlmClient>,
    /// The parent's registry; `spawn`/`spawn_await` are left out if present.
    pub tools: ToolRegistry,
    /// The session history store (sub-agent turns land in `spawn:<id>`).
    pub history: Arc<dyn HistoryStore>,
    /// The global MEMORY.md.
    pub memory: Arc<dyn MemoryStore>,
    /// The clock.
    pub clock: Arc<dyn Clock>,
    /// Memory settings (sub-agents never consolidate: they have no consolidation client).
    pub settings: MemorySettings,
    /// The workspace the prompt files are read from.
    pub workspace: PathBuf,
    /// The parent agent's per-session locks: one map for every loop over the same store, so a
    /// session's turns are serialized whichever loop runs them.
    pub locks: Arc<SessionLocks>,
}

/// A configured kind of sub-agent, ready to use.
struct Profile {
    prompt: Arc<WorkspacePrompt>,
    system_prompt: String,
    tools: Vec<String>,
    llm: Arc<dyn LlmClient>,
}

/// One `spawn` call, validated by the tool.
#[derive(Debug, Clone, Default)]
pub struct SpawnRequest {
    /// What the sub-agent should do.
    pub task: String,
    /// The profile's name, if any.
    pub profile: Option<String>,
    /// Background put before the task.
    pub context: Option<String>,
    /// Replaces the profile's system prompt.
    pub system_prompt: Option<String>,
    /// Tool names that replace the profile's list.
    pub tools: Option<Vec<String>>,
    /// The audience of the turn that asked: the sub-agent's (shared unless set).
    pub audience: Audience,
}

/// Runs sub-agents and keeps their jobs. Created once and shared by the two tools.
pub struct SpawnHub {
    profiles: BTreeMap<String, Profile>,
    default_profile: Profile,
    descriptions: BTreeMap<String, String>,
    tools: ToolRegistry,
    history: Arc<dyn HistoryStore>,
    memory: Arc<dyn MemoryStore>,
    clock: Arc<dyn Clock>,
    settings: MemorySettings,
    locks: Arc<SessionLocks>,
    permits: Arc<Semaphore>,
    max_concurrent: usize,
    jobs: JobStore,
    limits: SpawnLimits,
    /// Every job's task, so shutdown can wait for them.
    tracker: TaskTracker,
    /// Set by [`SpawnHub::shutdown`]: no new job is started after it.
    closed: AtomicBool,
}

/// The hub's jobs at a glance (for `/status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct SpawnStatus {
    /// Jobs started and not finished (including those waiting for a free slot).
    pub running: usize,
    /// Finished jobs whose result nobody has collected yet.
    pub uncollected: usize,
    /// Most sub-agents running at once.
    pub max_concurrent: usize,
}

/// The prompt of a sub-agent: its files, then its system prompt.
struct SubAgentPrompt {
    files: Arc<WorkspacePrompt>,
    system_prompt: String,
}

#[async_trait]
impl PromptSource for SubAgentPrompt {
    async fn sections(&self, audience: Audience) -> PromptSections {
        let files = self.files.sections(audience).await.base;
        let base = [files.as_str(), self.system_prompt.trim()]
            .into_iter()
            .filter(|part| !part.trim().is_empty())
            .collect::<Vec<_>>()
            .join(SEPARATOR);
        PromptSections {
            base,
            ..PromptSections::default()
        }
    }
}

impl SpawnHub {
    /// A hub for `config`'s profiles; `pool` builds the LLM client of a named pool (profiles
    /// with an empty `pool` use `parts.llm`). Fails when a profile's pool cannot be built.
    pub fn new<E: Display>(
        config: &SpawnConfig,
        parts: SubAgentParts,
        limits: SpawnLimits,
        pool: impl Fn(&str) -> Result<Arc<dyn LlmClient>, E>,
    ) -> Result<Self, SpawnError> {
        let mut tools = parts.tools.emptied();
        for name in parts.tools.names() {
            if SPAWN_TOOL_NAMES.contains(&name) {
                continue;
            }
            if let Some(tool) = parts.tools.get(name) {
                // Names are unique in the source registry, so this cannot fail.
                let _ = tools.register(tool.clone());
            }
        }
        let mut profiles = BTreeMap::new();
        for (name, profile) in &config.profiles {
            let llm = if profile.pool.trim().is_empty() {
                parts.llm.clone()
            } else {
                pool(&profile.pool).map_err(|error| SpawnError::Pool {
                    profile: name.clone(),
                    pool: profile.pool.clone(),
                    error: error.to_string(),
                })?
            };
            for tool in &profile.tools {
                if tools.get(tool).is_none() {
                    tracing::warn!(profile = %name, tool = %tool, "A spawn profile names a tool that is not available.");
                }
            }
            let mut files: Vec<&str> = if profile.bootstrap_files.is_empty() {
                DEFAULT_BOOTSTRAP_FILES.to_vec()
            } else {
                profile.bootstrap_files.iter().map(String::as_str).collect()
            };
            if !profile.system_prompt_file.trim().is_empty() {
                files.push(profile.system_prompt_file.trim());
            }
            profiles.insert(
                name.clone(),
                Profile {
                    prompt: Arc::new(WorkspacePrompt::with_files(&parts.workspace, files)),
                    system_prompt: profile.system_prompt.clone(),
                    tools: profile.tools.clone(),
                    llm,
                },
            );
        }
        let default_profile = Profile {
            prompt: Arc::new(WorkspacePrompt::with_files(
                &parts.workspace,
                DEFAULT_BOOTSTRAP_FILES,
            )),
            system_prompt: String::new(),
            tools: Vec::new(),
            llm: parts.llm,
        };
        Ok(Self {
            profiles,
            default_profile,
            descriptions: profile_descriptions(config),
            tools,
            history: parts.history,
            memory: parts.memory,
            clock: parts.clock,
            settings: parts.settings,
            locks: parts.locks,
            permits: Arc::new(Semaphore::new(config.max_concurrent.max(1))),
            max_concurrent: config.max_concurrent.max(1),
            jobs: JobStore::new(limits.job_ttl, limits.max_jobs),
            limits,
            tracker: TaskTracker::new(),
            closed: AtomicBool::new(false),
        })
    }

    /// The profiles by name, each with a one-line description (for the tool schema).
    pub fn profiles(&self) -> &BTreeMap<String, String> {
        &self.descriptions
    }

    /// The tools a sub-agent may be given.
    pub fn available_tools(&self) -> Vec<&str> {
        self.tools.names()
    }

    /// How many jobs are kept (running or uncollected).
    pub fn job_count(&self) -> usize {
        self.jobs.prune();
        self.jobs.len()
    }

    /// Running and uncollected jobs.
    pub fn status(&self) -> SpawnStatus {
        let (running, uncollected) = self.jobs.counts();
        SpawnStatus {
            running,
            uncollected,
            max_concurrent: self.max_concurrent,
        }
    }

    /// Stops the hub for a gateway shutdown: no job starts after this; jobs still waiting for
    /// a slot end at once with an error (they had done nothing yet); running sub-agents get up
    /// to `grace` to finish their turn, which is persisted like any other, and are then
    /// aborted. Returns how many were aborted.
    pub async fn shutdown(&self, grace: Duration) -> usize {
        self.closed.store(true, Ordering::SeqCst);
        self.permits.close();
        self.tracker.close();
        if tokio::time::timeout(grace, self.tracker.wait())
            .await
            .is_ok()
        {
            return 0;
        }
        let aborted = self.jobs.abort_running();
        tracing::warn!(
            aborted,
            grace_seconds = grace.as_secs(),
            "Sub-agents still running after the grace period; stopping them."
        );
        // An aborted task ends at its next await; this only waits for that.
        let _ = tokio::time::timeout(Duration::from_secs(1), self.tracker.wait()).await;
        aborted
    }

    /// Starts a sub-agent for `owner` and returns its job id at once.
    pub fn spawn(&self, owner: &SessionId, request: SpawnRequest) -> Result<String, SpawnError> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(SpawnError::ShuttingDown);
        }
        let profile = match request.profile.as_deref() {
            None => &self.default_profile,
            Some(name) => self
                .profiles
                .get(name)
                .ok_or_else(|| SpawnError::UnknownProfile {
                    name: name.to_owned(),
                    known: self.profiles.keys().cloned().collect(),
                })?,
        };
        let wanted: &[String] = match &request.tools {
            Some(names) => names,
            None => &profile.tools,
        };
        let mut tools = self.tools.emptied();
        if wanted.is_empty() {
            tools = self.tools.clone();
        } else {
            let unknown: Vec<String> = wanted
                .iter()
                .filter(|name| request.tools.is_some() && self.tools.get(name).is_none())
                .cloned()
                .collect();
            if !unknown.is_empty() {
                return Err(SpawnError::UnknownTools {
                    unknown,
                    known: self.available_tools().join(", "),
                });
            }
            for name in wanted {
                if let Some(tool) = self.tools.get(name) {
                    let _ = tools.register(tool.clone());
                }
            }
        }
        let prompt = SubAgentPrompt {
            files: profile.prompt.clone(),
            system_prompt: request
                .system_prompt
                .clone()
                .unwrap_or_else(|| profile.system_prompt.clone()),
        };
        let memory = MemoryManager::new(
            self.history.clone(),
            self.memory.clone(),
            Arc::new(prompt),
            None,
            self.settings,
        );
        let tools = Arc::new(tools);
        // Sub-agents never ask the owner; their gate says so to the model.
        let gates = TurnGates::new(None, ApprovalSettings::default(), tools.redactor().clone());
        let agent = AgentLoop::new(
            profile.llm.clone(),
            tools,
            Arc::new(memory),
            self.locks.clone(),
            self.clock.clone(),
        )
        .with_approvals(Arc::new(gates));
        let text = match request.context.as_deref().map(str::trim) {
            Some(context) if !context.is_empty() => format!("{context}\n\n{}", request.task),
            _ => request.task.clone(),
        };
        let permits = self.permits.clone();
        let origin = Origin::SubAgent {
            parent: owner.clone(),
        };
        let audience = request.audience;
        let profile_name = request.profile.clone().unwrap_or_default();
        let id = self.jobs.insert(owner, |id| {
            let (sender, receiver) = watch::channel(None);
            let id = id.to_owned();
            let handle = self.tracker.spawn(async move {
                let result = run_job(&id, agent, text, origin, audience, permits).await;
                match &result {
                    Ok(_) => tracing::info!(job = %id, profile = %profile_name, "Sub-agent finished."),
                    Err(error) => tracing::info!(job = %id, profile = %profile_name, error = %error, "Sub-agent failed."),
                }
                let _ = sender.send(Some(Finished {
                    result,
                    at: Instant::now(),
                }));
            });
            (receiver, handle.abort_handle())
        })?;
        tracing::info!(job = %id, owner = %owner, "Sub-agent spawned.");
        Ok(id)
    }

    /// Waits for `ids` (or, with `None`, every uncollected job of `owner`) up to the await
    /// timeout and renders one block per job. Collected jobs are removed.
    pub async fn collect(&self, owner: &SessionId, ids: Option<Vec<String>>) -> String {
        let ids = match ids {
            Some(ids) => ids,
            None => self.jobs.owned_by(owner),
        };
        if ids.is_empty() {
            return "No jobs found.".to_owned();
        }
        let deadline = Instant::now() + self.limits.await_timeout;
        let blocks = ids.iter().map(|id| async move {
            let Some(mut outcome) = self.jobs.outcome(owner, id) else {
                return format!("[{id}: NOT FOUND]");
            };
            let waited = tokio::time::timeout_at(deadline, outcome.wait_for(Option::is_some)).await;
            let finished = match waited {
                Err(_) => {
                    return format!(
                        "[{id}: RUNNING]\nStill running after {:?}; call spawn_await again later.",
                        self.limits.await_timeout
                    );
                }
                Ok(Err(_)) => None,
                Ok(Ok(finished)) => finished.clone(),
            };
            self.jobs.remove(id);
            let result = match finished {
                Some(finished) => finished.result,
                None if self.closed.load(Ordering::SeqCst) => Err(JobError::Stopped),
                None => Err(JobError::Lost),
            };
            jobs::collected(id, &result)
        });
        join_all(blocks).await.join("\n\n")
    }
}

/// One sub-agent turn, once a permit is free.
async fn run_job(
    id: &str,
    agent: AgentLoop,
    text: String,
    origin: Origin,
    audience: Audience,
    permits: Arc<Semaphore>,
) -> JobResult {
    let _permit = permits
        .acquire_owned()
        .await
        .map_err(|_| JobError::NotStarted)?;
    let session = SessionId::new("spawn", id).map_err(JobError::Session)?;
    let mut request = TurnRequest::new(session, text, origin);
    request.readers = audience.readers();
    let outcome = agent.run(request, Arc::new(CollectingSink::new())).await?;
    Ok(outcome.reply)
}
