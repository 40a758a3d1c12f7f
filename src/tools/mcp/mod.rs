//! MCP (Model Context Protocol) servers as tools, over stdio or streamable HTTP.
//!
//! Each configured server in `tools.mcp_servers` becomes an [`McpServer`]; each tool it lists
//! becomes an [`McpTool`] named `<server>__<tool>`. Connecting is bounded by a timeout, so a
//! server that is down only logs a warning; its connection is retried on the next call, and a
//! transport failure mid-call reconnects once and retries. [`McpHub::status`] feeds `/status`.

mod client;
#[cfg(test)]
mod test_server;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

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

    async fn call(&self, arguments: Value, _context: &ToolContext) -> ToolOutput {
        self.server.call(&self.remote_name, arguments).await
    }
}

/// Every configured MCP server and the tools they offered when connected.
#[derive(Default)]
pub struct McpHub {
    servers: Vec<Arc<McpServer>>,
    tools: Vec<Arc<McpTool>>,
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
        for (server, listing) in servers.iter().zip(listings) {
            match listing {
                Ok(listed) => {
                    for remote in listed {
                        tools.push(Arc::new(McpTool {
                            spec: ToolSpec {
                                name: tool_name(server.name(), &remote.name),
                                description: remote
                                    .description
                                    .as_deref()
                                    .unwrap_or_default()
                                    .to_owned(),
                                parameters: Value::Object((*remote.input_schema).clone()),
                            },
                            remote_name: remote.name.to_string(),
                            server: server.clone(),
                        }));
                    }
                }
                Err(error) => {
                    tracing::warn!(server = %server.name(), error = %error, "MCP server unavailable; will retry on use.");
                }
            }
        }
        Self { servers, tools }
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
