//! `spawn` and `spawn_await`: background sub-agents with profiles.
//!
//! - [`hub`]: [`SpawnHub`], which builds a sub-agent per job (profile pool, tools, prompt) and
//!   runs it as a turn of `spawn:<job id>` under a concurrency bound.
//! - [`jobs`]: [`JobStore`], the jobs by id, owned by the spawning session, removed when
//!   collected and pruned when left uncollected.
//! - [`profiles`]: the profiles' one-line descriptions, for the tool schema and the
//!   `<available_spawn_profiles>` block of the main prompt.
//!
//! There is no cycle between the agent and its spawn tools: the hub gets a copy of the
//! registry taken *before* the two tools are registered (cloning a registry clones `Arc`s), and
//! builds its own `AgentLoop` per job over the shared stores. So sub-agents cannot spawn, and
//! the main agent is never needed by the hub.

pub mod hub;
pub mod jobs;
pub mod profiles;

use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::core::authority::{Effect, Effects};
use crate::core::ports::tool::{Tool, ToolContext, ToolOutput, TypedSpec, TypedTool};

pub use hub::{SpawnHub, SpawnLimits, SpawnRequest, SpawnStatus, SubAgentParts};
pub use jobs::{JobStore, StoreFull};

/// Why a sub-agent could not be set up or started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// A profile's LLM pool could not be built (at startup).
    #[error("spawn profile {profile:?}: LLM pool {pool:?}: {error}")]
    Pool {
        /// The profile.
        profile: String,
        /// The pool it names.
        pool: String,
        /// Why the pool failed.
        error: String,
    },
    /// `spawn` named a profile that is not configured.
    #[error("unknown profile {name:?} (known: {})", if known.is_empty() { "none".to_owned() } else { known.join(", ") })]
    UnknownProfile {
        /// The name given.
        name: String,
        /// The configured profiles.
        known: Vec<String>,
    },
    /// `spawn` named tools a sub-agent cannot have.
    #[error("unknown tools: {} (available: {known})", unknown.join(", "))]
    UnknownTools {
        /// The names not found.
        unknown: Vec<String>,
        /// The available names, comma-separated.
        known: String,
    },
    /// Too many jobs are running or uncollected.
    #[error(transparent)]
    Full(#[from] StoreFull),
    /// The gateway is shutting down and starts no more sub-agents.
    #[error("squidbot is shutting down; no new sub-agent can start")]
    ShuttingDown,
}

/// The `spawn` tool.
pub struct SpawnTool {
    spec: TypedSpec<SpawnArguments>,
    hub: Arc<SpawnHub>,
}

/// The arguments of `spawn`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SpawnArguments {
    /// What the sub-agent should do; it sees nothing else of this conversation.
    task: String,
    /// Kind of sub-agent. (The schema lists the configured profiles, or leaves this out when
    /// there are none; see [`SpawnTool::new`].)
    profile: Option<String>,
    /// Background the sub-agent needs, put before the task.
    context: Option<String>,
    /// Replaces the profile's system prompt.
    system_prompt: Option<String>,
    /// Comma-separated tool names the sub-agent may use (default: the profile's, else all).
    tools: Option<String>,
}

impl SpawnTool {
    /// The tool over `hub`; the `profile` enum is in the schema only when profiles exist.
    pub fn new(hub: Arc<SpawnHub>) -> Self {
        let profiles = hub.profiles();
        let profile = (!profiles.is_empty()).then(|| {
            let listing = profiles
                .iter()
                .map(|(name, description)| format!("{name}: {description}"))
                .collect::<Vec<_>>()
                .join("; ");
            json!({
                "type": "string",
                "enum": profiles.keys().collect::<Vec<_>>(),
                "description": format!("Kind of sub-agent. {listing}")
            })
        });
        let spec = TypedSpec::edited(
            "spawn",
            "Start a background sub-agent on a self-contained task. Returns a job id at once; \
             collect the result with spawn_await.",
            |parameters| {
                if let Some(properties) = parameters
                    .get_mut("properties")
                    .and_then(Value::as_object_mut)
                {
                    match profile {
                        Some(profile) => properties.insert("profile".to_owned(), profile),
                        None => properties.remove("profile"),
                    };
                }
            },
        );
        Self { spec, hub }
    }
}

#[async_trait]
impl TypedTool for SpawnTool {
    type Arguments = SpawnArguments;

    fn definition(&self) -> &TypedSpec<SpawnArguments> {
        &self.spec
    }

    fn effects(&self) -> Effects {
        Effects::of(&[Effect::RunsAgents])
    }

    async fn run(&self, arguments: SpawnArguments, context: &ToolContext) -> ToolOutput {
        if arguments.task.trim().is_empty() {
            return ToolOutput::error("task must not be empty");
        }
        let non_empty = |text: Option<String>| text.filter(|t| !t.trim().is_empty());
        let request = SpawnRequest {
            task: arguments.task,
            profile: non_empty(arguments.profile),
            context: non_empty(arguments.context),
            system_prompt: non_empty(arguments.system_prompt),
            tools: non_empty(arguments.tools).map(|list| split_list(&list)),
            audience: context.audience,
        };
        match self.hub.spawn(&context.session, request) {
            Ok(id) => ToolOutput::ok(id),
            Err(error) => ToolOutput::error(error.to_string()),
        }
    }
}

/// The `spawn_await` tool.
pub struct SpawnAwaitTool {
    spec: TypedSpec<AwaitArguments>,
    hub: Arc<SpawnHub>,
}

/// The arguments of `spawn_await`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AwaitArguments {
    /// Comma-separated job ids, or * for all your uncollected jobs.
    job_ids: String,
}

impl SpawnAwaitTool {
    /// The tool over `hub`.
    pub fn new(hub: Arc<SpawnHub>) -> Self {
        let spec = TypedSpec::new(
            "spawn_await",
            "Wait for sub-agents started with spawn and return their results (each job can be \
             collected once).",
        );
        Self { spec, hub }
    }
}

#[async_trait]
impl TypedTool for SpawnAwaitTool {
    type Arguments = AwaitArguments;

    fn definition(&self) -> &TypedSpec<AwaitArguments> {
        &self.spec
    }

    fn effects(&self) -> Effects {
        Effects::of(&[Effect::RunsAgents])
    }

    async fn run(&self, arguments: AwaitArguments, context: &ToolContext) -> ToolOutput {
        let selection = arguments.job_ids.trim();
        let ids = if selection == "*" {
            None
        } else {
            let ids = split_list(selection);
            if ids.is_empty() {
                return ToolOutput::error("job_ids must name at least one job id, or be *");
            }
            Some(ids)
        };
        ToolOutput::ok(self.hub.collect(&context.session, ids).await)
    }
}

/// Splits a comma list, trimming and dropping empty and repeated names.
fn split_list(list: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        if !names.iter().any(|n| n == name) {
            names.push(name.to_owned());
        }
    }
    names
}

/// Both tools over one hub, for registration.
pub fn spawn_tools(hub: &Arc<SpawnHub>) -> [Arc<dyn Tool>; 2] {
    [
        Arc::new(SpawnTool::new(hub.clone())),
        Arc::new(SpawnAwaitTool::new(hub.clone())),
    ]
}
