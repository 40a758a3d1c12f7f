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
use serde::Deserialize;
use serde_json::{Value, json};

use crate::core::ports::tool::{Tool, ToolContext, ToolOutput, ToolSpec, parse_arguments};

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
    spec: ToolSpec,
    hub: Arc<SpawnHub>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SpawnArguments {
    task: String,
    profile: Option<String>,
    context: Option<String>,
    system_prompt: Option<String>,
    tools: Option<String>,
}

impl SpawnTool {
    /// The tool over `hub`; the `profile` enum is in the schema only when profiles exist.
    pub fn new(hub: Arc<SpawnHub>) -> Self {
        let mut properties = json!({
            "task": {"type": "string", "description": "What the sub-agent should do; it sees nothing else of this conversation."},
            "context": {"type": "string", "description": "Background the sub-agent needs, put before the task."},
            "system_prompt": {"type": "string", "description": "Replaces the profile's system prompt."},
            "tools": {"type": "string", "description": "Comma-separated tool names the sub-agent may use (default: the profile's, else all)."}
        });
        let profiles = hub.profiles();
        if !profiles.is_empty() {
            let listing = profiles
                .iter()
                .map(|(name, description)| format!("{name}: {description}"))
                .collect::<Vec<_>>()
                .join("; ");
            properties["profile"] = json!({
                "type": "string",
                "enum": profiles.keys().collect::<Vec<_>>(),
                "description": format!("Kind of sub-agent. {listing}")
            });
        }
        let spec = ToolSpec {
            name: "spawn".to_owned(),
            description: "Start a background sub-agent on a self-contained task. Returns a job \
                          id at once; collect the result with spawn_await."
                .to_owned(),
            parameters: json!({
                "type": "object",
                "properties": properties,
                "required": ["task"],
                "additionalProperties": false
            }),
        };
        Self { spec, hub }
    }
}

#[async_trait]
impl Tool for SpawnTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, arguments: Value, context: &ToolContext) -> ToolOutput {
        let arguments: SpawnArguments = match parse_arguments(&self.spec.name, arguments) {
            Ok(arguments) => arguments,
            Err(error) => return error,
        };
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
        };
        match self.hub.spawn(&context.session, request) {
            Ok(id) => ToolOutput::ok(id),
            Err(error) => ToolOutput::error(error.to_string()),
        }
    }
}

/// The `spawn_await` tool.
pub struct SpawnAwaitTool {
    spec: ToolSpec,
    hub: Arc<SpawnHub>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AwaitArguments {
    job_ids: String,
}

impl SpawnAwaitTool {
    /// The tool over `hub`.
    pub fn new(hub: Arc<SpawnHub>) -> Self {
        let spec = ToolSpec {
            name: "spawn_await".to_owned(),
            description: "Wait for sub-agents started with spawn and return their results \
                          (each job can be collected once)."
                .to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "job_ids": {"type": "string", "description": "Comma-separated job ids, or * for all your uncollected jobs."}
                },
                "required": ["job_ids"],
                "additionalProperties": false
            }),
        };
        Self { spec, hub }
    }
}

#[async_trait]
impl Tool for SpawnAwaitTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, arguments: Value, context: &ToolContext) -> ToolOutput {
        let arguments: AwaitArguments = match parse_arguments(&self.spec.name, arguments) {
            Ok(arguments) => arguments,
            Err(error) => return error,
        };
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
