//! MCP client tests against a real rmcp server over stdio (`examples/mcp_echo.rs`) and over
//! streamable HTTP on 127.0.0.1.

use crate::gateway::backoff::Backoff;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::test_server::EchoServer;
use super::*;
use crate::config::McpTransport;

fn context() -> ToolContext {
    ToolContext::for_test()
}

fn find(hub: &McpHub, name: &str) -> Arc<dyn Tool> {
    hub.tools()
        .into_iter()
        .find(|tool| tool.spec().name() == name)
        .unwrap_or_else(|| panic!("no tool {name}"))
}

fn echo_binary() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap();
    let path = dir.join("examples").join("mcp_echo");
    assert!(
        path.exists(),
        "{} is missing: run `cargo test` (which builds the examples)",
        path.display()
    );
    path
}

async fn serve_http(listener: tokio::net::TcpListener) -> tokio::task::JoinHandle<()> {
    let service: StreamableHttpService<EchoServer, LocalSessionManager> =
        StreamableHttpService::new(
            || Ok(EchoServer),
            Default::default(),
            StreamableHttpServerConfig::default(),
        );
    let router = axum::Router::new().nest_service("/mcp", service);
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    })
}

#[test]
fn names_are_namespaced_and_sanitized() {
    assert_eq!(tool_name("fs", "read_file"), "fs__read_file");
    assert_eq!(tool_name("my server", "do.it/now"), "my_server__do_it_now");
    assert_eq!(tool_name("s", &"x".repeat(100)).len(), 64);
}

async fn check_round_trip(hub: &McpHub, server: &str) {
    let names: Vec<String> = hub
        .tools()
        .iter()
        .map(|t| t.spec().name().to_owned())
        .collect();
    assert_eq!(
        names,
        vec![
            format!("{server}__echo"),
            format!("{server}__add"),
            format!("{server}__fail")
        ]
    );
    let echo = find(hub, &format!("{server}__echo"));
    assert_eq!(echo.spec().description(), "Echoes text.");
    let parameters: Value = serde_json::from_str(echo.spec().parameters()).unwrap();
    assert_eq!(parameters["properties"]["text"]["type"], "string");
    let out = echo.call(json!({"text": "hi"}), &context()).await;
    assert_eq!(out, ToolOutput::ok("hi").from_outside());
    let add = find(hub, &format!("{server}__add"));
    let out = add.call(json!({"a": 2, "b": 3}), &context()).await;
    assert_eq!(out, ToolOutput::ok("5").from_outside());
    let fail = find(hub, &format!("{server}__fail"));
    let out = fail.call(json!({}), &context()).await;
    assert!(out.is_error);
    assert!(out.content.contains("it broke"), "{}", out.content);
    let out = echo.call(json!("nope"), &context()).await;
    assert!(out.is_error);
    let status = hub.status().await;
    assert_eq!(status.len(), 1);
    assert!(status[0].connected);
    assert_eq!(status[0].tools, names);
    assert_eq!(status[0].last_error, None);
}

#[tokio::test]
async fn stdio_server_round_trips() {
    let config = McpServerConfig {
        transport: McpTransport::Stdio,
        command: echo_binary().display().to_string(),
        ..Default::default()
    };
    let hub = McpHub::connect(
        &BTreeMap::from([("local".to_owned(), config)]),
        CONNECT_TIMEOUT,
    )
    .await;
    check_round_trip(&hub, "local").await;
}

#[tokio::test]
async fn http_server_round_trips_and_reconnects() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let server = serve_http(listener).await;
    let config = McpServerConfig {
        transport: McpTransport::Http,
        url: format!("http://{addr}/mcp"),
        ..Default::default()
    };
    let hub = McpHub::connect(
        &BTreeMap::from([("web".to_owned(), config)]),
        CONNECT_TIMEOUT,
    )
    .await;
    check_round_trip(&hub, "web").await;

    // The server goes away: a call fails with an error result, not a hang or a panic.
    server.abort();
    let _ = server.await;
    let echo = find(&hub, "web__echo");
    let out = echo.call(json!({"text": "gone"}), &context()).await;
    assert!(out.is_error, "{out:?}");
    assert!(hub.status().await[0].last_error.is_some());

    // It comes back on the same port (with no memory of the old session): the next call
    // reconnects.
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let _server = serve_http(listener).await;
    let out = echo.call(json!({"text": "back"}), &context()).await;
    assert_eq!(out, ToolOutput::ok("back").from_outside());
    let status = hub.status().await;
    assert!(status[0].connected);
    assert_eq!(status[0].last_error, None);
}

#[tokio::test]
async fn unreachable_server_warns_without_blocking() {
    let configs = BTreeMap::from([
        (
            "missing".to_owned(),
            McpServerConfig {
                command: "/nonexistent/mcp-server".into(),
                ..Default::default()
            },
        ),
        (
            "nourl".to_owned(),
            McpServerConfig {
                transport: McpTransport::Http,
                ..Default::default()
            },
        ),
    ]);
    let started = std::time::Instant::now();
    let hub = McpHub::connect(&configs, Duration::from_secs(2)).await;
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(hub.tools().is_empty());
    let status = hub.status().await;
    assert_eq!(status.len(), 2);
    assert!(
        status
            .iter()
            .all(|s| !s.connected && s.last_error.is_some())
    );
}

#[tokio::test]
async fn server_down_at_startup_joins_as_late_tools_once_it_answers() {
    // Reserve a port, then free it so the first connection is refused.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    drop(listener);
    let config = McpServerConfig {
        transport: McpTransport::Http,
        url: format!("http://{addr}/mcp"),
        ..Default::default()
    };
    let hub = Arc::new(
        McpHub::connect(
            &BTreeMap::from([("late".to_owned(), config)]),
            Duration::from_secs(2),
        )
        .await,
    );
    assert!(hub.tools().is_empty() && hub.late_tools().is_empty());

    let shutdown = CancellationToken::new();
    let retry = tokio::spawn({
        let hub = hub.clone();
        let shutdown = shutdown.clone();
        async move {
            hub.retry_unavailable(
                Backoff::new(Duration::from_millis(50), Duration::from_secs(300)),
                shutdown,
            )
            .await
        }
    });
    // Still down for the first rounds: nothing is offered.
    tokio::time::sleep(Duration::from_millis(120)).await;
    assert!(hub.late_tools().is_empty());

    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let _server = serve_http(listener).await;
    // The retry loop ends by itself once every server answered.
    tokio::time::timeout(Duration::from_secs(10), retry)
        .await
        .expect("retry loop ends once the server is up")
        .unwrap();
    let names: Vec<String> = hub
        .late_tools()
        .iter()
        .map(|t| t.spec().name().to_owned())
        .collect();
    assert_eq!(names, ["late__echo", "late__add", "late__fail"]);
    let echo = hub.late_tools().remove(0);
    let out = echo.call(json!({"text": "hi"}), &context()).await;
    assert_eq!(out, ToolOutput::ok("hi").from_outside());
    assert!(hub.status().await[0].connected);
    assert!(hub.tools().is_empty(), "the startup set never changes");
}

#[tokio::test]
async fn retrying_stops_at_shutdown() {
    let configs = BTreeMap::from([(
        "missing".to_owned(),
        McpServerConfig {
            command: "/nonexistent/mcp-server".into(),
            ..Default::default()
        },
    )]);
    let hub = McpHub::connect(&configs, Duration::from_secs(1)).await;
    let shutdown = CancellationToken::new();
    shutdown.cancel();
    tokio::time::timeout(
        Duration::from_secs(2),
        hub.retry_unavailable(
            Backoff::new(Duration::from_secs(60), Duration::from_secs(300)),
            shutdown,
        ),
    )
    .await
    .expect("returns at once when shut down");
    assert!(hub.late_tools().is_empty());
}
