//! `web_search` against local axum servers standing in for SearXNG, Brave and DuckDuckGo.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use serde_json::{Value, json};

use super::*;
use crate::core::ports::tool::Tool;
use crate::core::session::SessionId;

/// One request the fake service saw: its query parameters and headers.
type Seen = (HashMap<String, String>, HeaderMap);

/// What the fake service answers, and what it saw.
#[derive(Clone)]
struct Fake {
    status: u16,
    body: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

async fn answer(
    State(fake): State<Fake>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> (StatusCode, String) {
    fake.seen.lock().unwrap().push((query, headers));
    (
        StatusCode::from_u16(fake.status).unwrap(),
        fake.body.clone(),
    )
}

/// Serves `body` with `status` on every path; returns the base URL and the request log.
async fn serve(status: u16, body: &str) -> (String, Fake) {
    let fake = Fake {
        status,
        body: body.to_owned(),
        seen: Arc::default(),
    };
    let router = Router::new()
        .route("/search", get(answer))
        .route("/res/v1/web/search", get(answer))
        .route("/html/", get(answer))
        .with_state(fake.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    (format!("http://{addr}"), fake)
}

fn context() -> ToolContext {
    ToolContext::for_test().with_session(SessionId::cli_local())
}

async fn run(provider: SearchProvider, arguments: Value) -> ToolOutput {
    let tool = WebSearchTool::new(provider).unwrap();
    tool.call(arguments, &context()).await
}

fn searxng(base: &str, key: Option<&str>) -> SearchProvider {
    SearchProvider::Searxng {
        url: base.to_owned(),
        api_key: key.map(str::to_owned),
    }
}

fn brave(base: &str) -> SearchProvider {
    SearchProvider::Brave {
        url: format!("{base}/res/v1/web/search"),
        api_key: "brave-key".to_owned(),
    }
}

fn ddg(base: &str) -> SearchProvider {
    SearchProvider::DuckDuckGo {
        url: format!("{base}/html/"),
    }
}

const DDG_PAGE: &str = r#"<html><body>
<div class="result results_links result--ad"><a class="result__a" href="https://ads.example/">Ad</a>
  <a class="result__snippet">Buy now</a></div>
<div class="result results_links"><h2><a class="result__a" href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fwww.rust-lang.org%2F&amp;rut=abc">The <b>Rust</b> Language</a></h2>
  <a class="result__snippet" href="x">A language empowering <b>everyone</b>.</a></div>
<div class="result results_links"><h2><a class="result__a" href="https://doc.rust-lang.org/book/">The Book</a></h2>
  <a class="result__snippet">Learn Rust.</a></div>
</body></html>"#;

#[tokio::test]
async fn searxng_formats_hits_and_sends_query_and_key() {
    let body = json!({"results": [
        {"title": "Rust", "url": "https://www.rust-lang.org/", "content": "A language."},
        {"title": "Crates", "url": "https://crates.io/", "content": "Packages."},
        {"title": "Docs", "url": "https://docs.rs/"}
    ]});
    let (base, fake) = serve(200, &body.to_string()).await;
    let out = run(
        searxng(&base, Some("sx-key")),
        json!({"query": "rust lang", "max_results": 2}),
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(
        out.content,
        "1. Rust — https://www.rust-lang.org/\n   A language.\n\n2. Crates — https://crates.io/\n   Packages."
    );
    let seen = fake.seen.lock().unwrap();
    let (query, headers) = &seen[0];
    assert_eq!(query["q"], "rust lang");
    assert_eq!(query["format"], "json");
    assert_eq!(query["categories"], "general");
    assert_eq!(headers["authorization"], "Bearer sx-key");
}

#[tokio::test]
async fn brave_formats_hits_strips_markup_and_sends_token() {
    let body = json!({"web": {"results": [
        {"title": "The <strong>Rust</strong> site", "url": "https://www.rust-lang.org/", "description": "Fast &amp; <strong>safe</strong>."}
    ]}});
    let (base, fake) = serve(200, &body.to_string()).await;
    let out = run(brave(&base), json!({"query": "rust"})).await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(
        out.content,
        "1. The Rust site — https://www.rust-lang.org/\n   Fast & safe."
    );
    let seen = fake.seen.lock().unwrap();
    let (query, headers) = &seen[0];
    assert_eq!(query["q"], "rust");
    assert_eq!(query["count"], "5");
    assert_eq!(headers["x-subscription-token"], "brave-key");
}

#[tokio::test]
async fn duckduckgo_parses_the_html_page_skipping_ads() {
    let (base, fake) = serve(200, DDG_PAGE).await;
    let out = run(ddg(&base), json!({"query": "rust"})).await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(
        out.content,
        "1. The Rust Language — https://www.rust-lang.org/\n   A language empowering everyone.\n\n2. The Book — https://doc.rust-lang.org/book/\n   Learn Rust."
    );
    assert_eq!(fake.seen.lock().unwrap()[0].0["q"], "rust");
}

#[tokio::test]
async fn empty_results_say_so_for_every_provider() {
    let (base, _) = serve(200, r#"{"results": []}"#).await;
    let out = run(searxng(&base, None), json!({"query": "nothing"})).await;
    assert_eq!(
        out,
        ToolOutput::ok("No results found for: nothing").from_outside()
    );

    let (base, _) = serve(200, r#"{"type": "search"}"#).await;
    let out = run(brave(&base), json!({"query": "nothing"})).await;
    assert_eq!(
        out,
        ToolOutput::ok("No results found for: nothing").from_outside()
    );

    let (base, _) = serve(
        200,
        "<html><body><div class=\"no-results\">No results.</div></body></html>",
    )
    .await;
    let out = run(ddg(&base), json!({"query": "nothing"})).await;
    assert_eq!(
        out,
        ToolOutput::ok("No results found for: nothing").from_outside()
    );
}

#[tokio::test]
async fn http_errors_are_error_results() {
    let (base, _) = serve(500, "boom").await;
    for provider in [searxng(&base, None), brave(&base), ddg(&base)] {
        let name = provider.name();
        let out = run(provider, json!({"query": "q"})).await;
        assert!(out.is_error, "{name}: {}", out.content);
        assert_eq!(
            out.content,
            format!("Error: Search failed: {name} answered HTTP 500")
        );
    }
}

#[tokio::test]
async fn malformed_bodies_are_error_results() {
    let (base, _) = serve(200, "{not json").await;
    for provider in [searxng(&base, None), brave(&base)] {
        let out = run(provider, json!({"query": "q"})).await;
        assert!(out.is_error);
        assert!(
            out.content.contains("returned an unreadable body"),
            "{}",
            out.content
        );
    }
}

#[tokio::test]
async fn unreachable_service_is_an_error_result() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let out = run(searxng(&base, None), json!({"query": "q"})).await;
    assert!(out.is_error);
    assert!(
        out.content.contains("searxng request failed"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn bad_arguments_are_error_results() {
    let provider = searxng("http://127.0.0.1:9", None);
    for arguments in [
        json!({}),
        json!({"query": "  "}),
        json!({"query": "q", "max_results": 0}),
        json!({"query": "q", "max_results": 11}),
        json!({"query": "q", "num_results": 3}),
    ] {
        let out = run(provider.clone(), arguments.clone()).await;
        assert!(out.is_error, "{arguments}: {}", out.content);
    }
}

#[test]
fn from_config_requires_url_for_searxng_and_key_for_brave() {
    let mut config = crate::config::WebSearchConfig::default();
    assert!(WebSearchTool::from_config(&config).is_err());
    config.url = "http://searx.local".to_owned();
    assert!(WebSearchTool::from_config(&config).is_ok());
    config.provider = WebSearchProvider::Brave;
    assert!(WebSearchTool::from_config(&config).is_err());
    config.api_key = crate::config::Secret::new("k");
    assert!(WebSearchTool::from_config(&config).is_ok());
    config.provider = WebSearchProvider::Duckduckgo;
    assert!(WebSearchTool::from_config(&config).is_ok());
}
