//! A tiny MCP server on stdin/stdout with `echo`, `add` and `fail`, for the MCP client tests.

#[path = "../src/tools/mcp/test_server.rs"]
mod test_server;

use rmcp::ServiceExt;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let service = test_server::EchoServer
        .serve(rmcp::transport::stdio())
        .await?;
    service.waiting().await?;
    Ok(())
}
