//! A tiny MCP server (`echo`, `add`, `fail`) shared by the tests and `examples/mcp_echo.rs`.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::json;

/// The test server.
#[derive(Clone, Copy)]
pub struct EchoServer;

fn schema(value: serde_json::Value) -> Arc<serde_json::Map<String, serde_json::Value>> {
    match value {
        serde_json::Value::Object(map) => Arc::new(map),
        _ => Arc::new(serde_json::Map::new()),
    }
}

impl ServerHandler for EchoServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![
            Tool::new(
                "echo",
                "Echoes text.",
                schema(json!({"type": "object", "properties": {"text": {"type": "string"}}})),
            ),
            Tool::new(
                "add",
                "Adds a and b.",
                schema(json!({"type": "object", "properties": {
                    "a": {"type": "number"}, "b": {"type": "number"}}})),
            ),
            Tool::new("fail", "Always fails.", schema(json!({"type": "object"}))),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let result = match request.name.as_ref() {
            "echo" => CallToolResult::success(vec![ContentBlock::text(
                args.get("text")
                    .and_then(|v| v.as_str())
                    .unwrap_or_default(),
            )]),
            "add" => {
                let number = |key: &str| args.get(key).and_then(|v| v.as_f64()).unwrap_or(0.0);
                CallToolResult::success(vec![ContentBlock::text(
                    (number("a") + number("b")).to_string(),
                )])
            }
            _ => CallToolResult::error(vec![ContentBlock::text("it broke")]),
        };
        Ok(result.into())
    }
}
