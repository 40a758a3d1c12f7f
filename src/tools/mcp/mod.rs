//! MCP (Model Context Protocol) servers as tools, over stdio or streamable HTTP.
//!
//! Each configured server in `tools.mcp_servers` becomes an [`McpServer`]; each tool it lists
//! becomes an [`McpTool`] named `<server>__<tool>`. Connecting is bounded by a timeout, so a
//! server that is down only logs a warning. A server that was up at startup reconnects on its
//! next call (a transport failure mid-call reconnects once and retries). A server that was down
//! at startup is retried in the background by [`McpHub::retry_unavailable`]; once it answers,
//! its tools are offered per turn through [`McpHub::late_tools`], because the shared tool
//! registry is built once and never mutated. [`McpHub::status`] feeds `/status`.

mod client;
#[cfg(test)]
mod test_server;
#[cfg(test)]
mod tests;

use crate::core::authority::{Effect, Effects};
use crate::gateway::backoff::Backoff;
use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::config::McpServerConfig;
use crate::core::ports::tool::{Tool, ToolContext, ToolOutput, ToolSpec};

pub use client::{McpError, McpServer, McpServerStatus, tool_name};

/// How long one server may take to start, hand-shake and list its tools.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// One tool of one MCP server.
pub struct McpTool {
    spec: ToolSpec,
    remote_name: String,
    server: Arc<McpServer>,
}

impl McpTool {
    /// The server's own name for the tool.
    pub fn remote_name(&self) -> &str {
        &self.remote_name
    }
}

#[async_trait]
impl Tool for McpTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn effects(&self) -> Effects {
        Effects::of(&[
            Effect::OwnerCredentials,
            Effect::Network,
            Effect::RunsCommands,
        ])
    }

    async fn call(&self, arguments: Value, _context: &ToolContext) -> ToolOutput {
        // Whatever a server returns, errors included, is its text, not the owner's.
        self.server
            .call(&self.remote_name, arguments)
            .await
            .from_outside()
    }
}

/// Every configured MCP server and the tools they offered when connected.
#[derive(Default)]
pub struct McpHub {
    servers: Vec<Arc<McpServer>>,
    /// The tools of the servers that answered at startup (registered once).
    tools: Vec<Arc<McpTool>>,
    /// The servers that did not answer at startup, until they do.
    unavailable: std::sync::Mutex<Vec<Arc<McpServer>>>,
    /// The tools of servers that answered later, offered per turn.
    late: RwLock<Vec<Arc<dyn Tool>>>,
}

impl McpHub {
    /// Connects to every server concurrently, each bounded by `timeout`. A server that fails
    /// is logged at WARN and kept (unconnected), so `/status` shows it and calls retry it.
    pub async fn connect(configs: &BTreeMap<String, McpServerConfig>, timeout: Duration) -> Self {
        let servers: Vec<Arc<McpServer>> = configs
            .iter()
            .map(|(name, config)| Arc::new(McpServer::new(name.clone(), config.clone(), timeout)))
            .collect();
        let listings = futures_util::future::join_all(servers.iter().map(|server| {
            let server = server.clone();
            async move { server.connect().await }
        }))
        .await;
        let mut tools = Vec::new();
        let mut unavailable = Vec::new();
        for (server, listing) in servers.iter().zip(listings) {
            match listing {
                Ok(listed) => tools.extend(wrap(server, listed)),
                Err(error) => {
                    tracing::warn!(server = %server.name(), error = %error, "MCP server unavailable; retrying in the background.");
                    unavailable.push(server.clone());
                }
            }
        }
        Self {
            servers,
            tools,
            unavailable: std::sync::Mutex::new(unavailable),
            late: RwLock::new(Vec::new()),
        }
    }

    /// Retries the servers that were down at startup, round after round with the pauses of
    /// `backoff`, until every one answered or `shutdown` fires. A server that answers gets its
    /// tools into [`McpHub::late_tools`].
    pub async fn retry_unavailable(&self, backoff: Backoff, shutdown: CancellationToken) {
        let mut rounds = 0;
        loop {
            let pending = self.pending();
            if pending.is_empty() {
                return;
            }
            tokio::select! {
                biased;
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(backoff.delay(rounds)) => {}
            }
            for server in pending {
                let listing = tokio::select! {
                    biased;
                    () = shutdown.cancelled() => return,
                    listing = server.connect() => listing,
                };
                match listing {
                    Ok(listed) => {
                        let tools = wrap(&server, listed);
                        tracing::info!(server = %server.name(), tools = tools.len(), "MCP server is up; its tools are offered from the next turn.");
                        if let Ok(mut late) = self.late.write() {
                            late.extend(tools.into_iter().map(|t| t as Arc<dyn Tool>));
                        }
                        if let Ok(mut unavailable) = self.unavailable.lock() {
                            unavailable.retain(|s| !Arc::ptr_eq(s, &server));
                        }
                    }
                    Err(error) => {
                        tracing::debug!(server = %server.name(), error = %error, "MCP server still unavailable.");
                    }
                }
            }
            rounds = rounds.saturating_add(1);
        }
    }

    fn pending(&self) -> Vec<Arc<McpServer>> {
        self.unavailable
            .lock()
            .map(|servers| servers.clone())
            .unwrap_or_default()
    }

    /// The tools of servers that came up after startup: offered to each turn as extra tools.
    pub fn late_tools(&self) -> Vec<Arc<dyn Tool>> {
        self.late
            .read()
            .map(|late| late.clone())
            .unwrap_or_default()
    }

    /// The tools to register, one per server tool.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.tools
            .iter()
            .map(|tool| tool.clone() as Arc<dyn Tool>)
            .collect()
    }

    /// One line of data per server for `/status`.
    pub async fn status(&self) -> Vec<McpServerStatus> {
        let mut out = Vec::with_capacity(self.servers.len());
        for server in &self.servers {
            out.push(server.status().await);
        }
        out
    }
}

/// The listed tools of `server` as namespaced [`McpTool`]s.
fn wrap(server: &Arc<McpServer>, listed: Vec<rmcp::model::Tool>) -> Vec<Arc<McpTool>> {
    listed
        .into_iter()
        .map(|remote| {
            Arc::new(McpTool {
                // Serialized here, once per discovered tool, like every other schema.
                spec: ToolSpec::new(
                    tool_name(server.name(), &remote.name),
                    remote.description.as_deref().unwrap_or_default(),
                    &Value::Object((*remote.input_schema).clone()),
                ),
                remote_name: remote.name.to_string(),
                server: server.clone(),
            })
        })
        .collect()
}
