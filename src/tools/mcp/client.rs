//! One MCP server connection: connect with a time bound, list tools, call them, reconnect once
//! when the transport fails.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResponse, CallToolResult, Tool as RemoteTool};
use rmcp::service::{Peer, RoleClient, RunningService};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ServiceError, ServiceExt};
use serde_json::Value;
use tokio::sync::Mutex;

use crate::config::{McpServerConfig, McpTransport};
use crate::core::ports::tool::ToolOutput;

/// Why a connection to an MCP server could not be made.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// The server's configuration is incomplete.
    #[error("MCP server {server}: {message}")]
    Config {
        /// The server's name.
        server: String,
        /// What is missing.
        message: String,
    },
    /// The child process could not be started.
    #[error("MCP server {server}: starting `{command}`: {error}")]
    Spawn {
        /// The server's name.
        server: String,
        /// The program.
        command: String,
        /// The cause.
        error: std::io::Error,
    },
    /// The MCP handshake or the tool listing failed.
    #[error("MCP server {server}: {message}")]
    Protocol {
        /// The server's name.
        server: String,
        /// What failed.
        message: String,
    },
    /// The connection did not complete in time.
    #[error("MCP server {server}: no answer within {seconds} s")]
    Timeout {
        /// The server's name.
        server: String,
        /// The bound.
        seconds: u64,
    },
}

/// A snapshot of one server for `/status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerStatus {
    /// The configured name.
    pub server: String,
    /// Whether a live connection exists.
    pub connected: bool,
    /// The namespaced tool names offered to the model.
    pub tools: Vec<String>,
    /// The last connection or transport error, if any.
    pub last_error: Option<String>,
}

#[derive(Default)]
struct State {
    client: Option<RunningService<RoleClient, ()>>,
    tools: Vec<String>,
    last_error: Option<String>,
}

/// A connection (possibly down) to one configured MCP server.
pub struct McpServer {
    name: String,
    config: McpServerConfig,
    timeout: Duration,
    state: Mutex<State>,
}

impl McpServer {
    /// A server that is not yet connected.
    pub fn new(name: impl Into<String>, config: McpServerConfig, timeout: Duration) -> Self {
        Self {
            name: name.into(),
            config,
            timeout,
            state: Mutex::new(State::default()),
        }
    }

    /// The configured name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Connects (replacing any old connection) and returns the server's tools.
    pub async fn connect(&self) -> Result<Vec<RemoteTool>, McpError> {
        let mut state = self.state.lock().await;
        self.connect_locked(&mut state).await
    }

    async fn connect_locked(&self, state: &mut State) -> Result<Vec<RemoteTool>, McpError> {
        // Dropping the old service cancels it and ends its child process.
        drop(state.client.take());
        let result = tokio::time::timeout(self.timeout, self.open()).await;
        let result = match result {
            Ok(result) => result,
            Err(_) => Err(McpError::Timeout {
                server: self.name.clone(),
                seconds: self.timeout.as_secs(),
            }),
        };
        match result {
            Ok((client, tools)) => {
                state.client = Some(client);
                state.tools = tools
                    .iter()
                    .map(|t| tool_name(&self.name, &t.name))
                    .collect();
                state.last_error = None;
                Ok(tools)
            }
            Err(error) => {
                state.last_error = Some(error.to_string());
                Err(error)
            }
        }
    }

    async fn open(&self) -> Result<(RunningService<RoleClient, ()>, Vec<RemoteTool>), McpError> {
        let protocol = |error: &dyn std::fmt::Display| McpError::Protocol {
            server: self.name.clone(),
            message: error.to_string(),
        };
        let client = match self.config.transport {
            McpTransport::Stdio => {
                if self.config.command.is_empty() {
                    return Err(McpError::Config {
                        server: self.name.clone(),
                        message: "transport stdio needs a command".into(),
                    });
                }
                let mut command = tokio::process::Command::new(&self.config.command);
                command.args(&self.config.args);
                if let Some(env) = &self.config.env {
                    command.envs(env as &BTreeMap<String, String>);
                }
                if let Some(cwd) = &self.config.cwd {
                    command.current_dir(cwd);
                }
                let (transport, _stderr) = TokioChildProcess::builder(command)
                    .stderr(Stdio::null())
                    .spawn()
                    .map_err(|error| McpError::Spawn {
                        server: self.name.clone(),
                        command: self.config.command.clone(),
                        error,
                    })?;
                ().serve(transport).await.map_err(|e| protocol(&e))?
            }
            McpTransport::Http => {
                if self.config.url.is_empty() {
                    return Err(McpError::Config {
                        server: self.name.clone(),
                        message: "transport http needs a url".into(),
                    });
                }
                let transport = StreamableHttpClientTransport::from_uri(self.config.url.as_str());
                ().serve(transport).await.map_err(|e| protocol(&e))?
            }
        };
        let tools = client.list_all_tools().await.map_err(|e| protocol(&e))?;
        Ok((client, tools))
    }

    /// Calls `tool` (the server's own name for it); a transport failure reconnects once and
    /// retries.
    pub async fn call(&self, tool: &str, arguments: Value) -> ToolOutput {
        let arguments = match arguments {
            Value::Object(map) => map,
            Value::Null => serde_json::Map::new(),
            other => {
                return ToolOutput::error(format!(
                    "arguments for {} must be a JSON object, got {other}",
                    tool_name(&self.name, tool)
                ));
            }
        };
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        let peer = match self.peer(false).await {
            Ok(peer) => peer,
            Err(error) => return ToolOutput::error(error.to_string()),
        };
        match peer.call_tool_once(params.clone()).await {
            Err(error) if is_transport(&error) => {
                tracing::warn!(server = %self.name, error = %error, "MCP transport failed; reconnecting.");
                self.record_error(&error).await;
                let peer = match self.peer(true).await {
                    Ok(peer) => peer,
                    Err(error) => return ToolOutput::error(error.to_string()),
                };
                let result = peer.call_tool_once(params).await;
                if let Err(error) = &result {
                    self.record_error(error).await;
                }
                self.output(result)
            }
            result => self.output(result),
        }
    }

    async fn record_error(&self, error: &ServiceError) {
        self.state.lock().await.last_error = Some(error.to_string());
    }

    /// The live peer, connecting first when there is none (or `fresh` asks for a new one).
    async fn peer(&self, fresh: bool) -> Result<Peer<RoleClient>, McpError> {
        let mut state = self.state.lock().await;
        let usable = state
            .client
            .as_ref()
            .is_some_and(|client| !client.is_transport_closed());
        if fresh || !usable {
            self.connect_locked(&mut state).await?;
        }
        match &state.client {
            Some(client) => Ok(client.peer().clone()),
            None => Err(McpError::Protocol {
                server: self.name.clone(),
                message: "not connected".into(),
            }),
        }
    }

    fn output(&self, result: Result<CallToolResponse, ServiceError>) -> ToolOutput {
        match result {
            Ok(CallToolResponse::Complete(result)) => render(result),
            Ok(_) => ToolOutput::error(format!(
                "MCP server {} asked for input or started a task, which squidbot does not support",
                self.name
            )),
            Err(error) => ToolOutput::error(format!("MCP server {}: {error}", self.name)),
        }
    }

    /// A snapshot for `/status`.
    pub async fn status(&self) -> McpServerStatus {
        let state = self.state.lock().await;
        McpServerStatus {
            server: self.name.clone(),
            connected: state
                .client
                .as_ref()
                .is_some_and(|client| !client.is_transport_closed()),
            tools: state.tools.clone(),
            last_error: state.last_error.clone(),
        }
    }
}

fn is_transport(error: &ServiceError) -> bool {
    matches!(
        error,
        ServiceError::TransportSend(_) | ServiceError::TransportClosed
    )
}

/// Joins the text blocks; other blocks are named by kind. `isError` makes an error result.
fn render(result: CallToolResult) -> ToolOutput {
    let mut parts: Vec<String> = result
        .content
        .iter()
        .map(|block| match block.as_text() {
            Some(text) => text.text.clone(),
            None => "[non-text content omitted]".to_owned(),
        })
        .collect();
    if parts.is_empty()
        && let Some(structured) = &result.structured_content
    {
        parts.push(structured.to_string());
    }
    let text = parts.join("\n");
    if result.is_error.unwrap_or(false) {
        ToolOutput::error(text)
    } else {
        ToolOutput::ok(text)
    }
}

/// `<server>__<tool>`, every character outside `[a-zA-Z0-9_-]` replaced by `_`, at most 64.
pub fn tool_name(server: &str, tool: &str) -> String {
    format!("{server}__{tool}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect()
}
