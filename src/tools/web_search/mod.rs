//! `web_search`: searches the web through the configured provider.
//!
//! - [`provider`]: the three services ([`SearchProvider`]): SearXNG (JSON API), Brave (JSON
//!   API with a subscription token) and DuckDuckGo (its HTML endpoint, parsed with `scraper`).
//!
//! Output is one block per hit, `i. title — url` and the snippet indented below it, or
//! `No results found for: q`. Every failure (HTTP status, timeout, unreadable body) is an error
//! result `Search failed: …`; nothing here panics or ends the turn.

pub mod provider;
#[cfg(test)]
mod tests;

use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::config::{WebSearchConfig, WebSearchProvider};
use crate::core::authority::{Effect, Effects};
use crate::core::error_chain::Chain;
use crate::core::ports::tool::{ToolContext, ToolOutput, TypedSpec, TypedTool};

pub use provider::{BRAVE_URL, DUCKDUCKGO_URL, SearchHit, SearchProvider};

/// Results returned when the model does not say.
pub const DEFAULT_MAX_RESULTS: usize = 5;
/// The most results one call may ask for.
pub const MAX_RESULTS: usize = 10;
/// Connect-to-last-byte limit of one search request.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a search failed.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// The HTTP client could not be built.
    #[error("could not build the HTTP client: {}", Chain(.0))]
    Client(reqwest::Error),
    /// The request could not be sent or the body not read (including timeouts).
    #[error("{provider} request failed: {}", Chain(error))]
    Request {
        /// The provider's name.
        provider: &'static str,
        /// The transport error.
        error: reqwest::Error,
    },
    /// The configured base URL does not parse.
    #[error("invalid {provider} URL {url:?}: {error}")]
    Url {
        /// The provider's name.
        provider: &'static str,
        /// The URL as configured.
        url: String,
        /// The parse error.
        error: url::ParseError,
    },
    /// The service answered with a non-success status.
    #[error("{provider} answered HTTP {status}")]
    Status {
        /// The provider's name.
        provider: &'static str,
        /// The HTTP status code.
        status: u16,
    },
    /// The body was not the JSON the provider documents.
    #[error("{provider} returned an unreadable body: {error}")]
    Body {
        /// The provider's name.
        provider: &'static str,
        /// The JSON error.
        error: serde_json::Error,
    },
    /// The configuration lacks something the provider needs.
    #[error("{0}")]
    Config(&'static str),
}

/// The `web_search` tool.
pub struct WebSearchTool {
    spec: TypedSpec<Arguments>,
    provider: SearchProvider,
    client: reqwest::Client,
}

/// The arguments of `web_search`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Arguments {
    /// What to search for.
    query: String,
    #[schemars(range(min = 1, max = MAX_RESULTS), extend("default" = DEFAULT_MAX_RESULTS))]
    max_results: Option<i64>,
}

impl WebSearchTool {
    /// A tool searching with `provider`.
    pub fn new(provider: SearchProvider) -> Result<Self, SearchError> {
        let client = reqwest::Client::builder()
            .connect_timeout(REQUEST_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            .user_agent(concat!("squidbot/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(SearchError::Client)?;
        let spec = TypedSpec::new(
            "web_search",
            "Search the web. Returns titles, URLs and snippets; use fetch_url to read a page.",
        );
        Ok(Self {
            spec,
            provider,
            client,
        })
    }

    /// The tool for `tools.web_search`; fails when the provider's URL or key is missing.
    pub fn from_config(config: &WebSearchConfig) -> Result<Self, SearchError> {
        let api_key = (!config.api_key.is_empty()).then(|| config.api_key.expose().to_owned());
        let provider = match config.provider {
            WebSearchProvider::Searxng => {
                if config.url.trim().is_empty() {
                    return Err(SearchError::Config(
                        "tools.web_search.url is required for the searxng provider",
                    ));
                }
                SearchProvider::Searxng {
                    url: config.url.trim().to_owned(),
                    api_key,
                }
            }
            WebSearchProvider::Brave => {
                let Some(api_key) = api_key else {
                    return Err(SearchError::Config(
                        "tools.web_search.api_key is required for the brave provider",
                    ));
                };
                SearchProvider::Brave {
                    url: BRAVE_URL.to_owned(),
                    api_key,
                }
            }
            WebSearchProvider::Duckduckgo => SearchProvider::DuckDuckGo {
                url: DUCKDUCKGO_URL.to_owned(),
            },
        };
        Self::new(provider)
    }
}

#[async_trait]
impl TypedTool for WebSearchTool {
    type Arguments = Arguments;

    fn definition(&self) -> &TypedSpec<Arguments> {
        &self.spec
    }

    fn effects(&self) -> Effects {
        Effects::of(&[Effect::Network])
    }

    async fn run(&self, arguments: Arguments, _context: &ToolContext) -> ToolOutput {
        let query = arguments.query.trim();
        if query.is_empty() {
            return ToolOutput::error("query must not be empty");
        }
        let max_results = match arguments.max_results {
            None => DEFAULT_MAX_RESULTS,
            Some(n) if (1..=MAX_RESULTS as i64).contains(&n) => n as usize,
            Some(n) => {
                return ToolOutput::error(format!(
                    "max_results must be between 1 and {MAX_RESULTS}, got {n}"
                ));
            }
        };
        match self.provider.search(&self.client, query, max_results).await {
            // Titles and snippets are the web's text: fenced as untrusted data.
            Ok(hits) => ToolOutput::ok(format_hits(query, &hits, max_results)).from_outside(),
            Err(error) => {
                tracing::info!(provider = self.provider.name(), error = %error, "Web search failed.");
                ToolOutput::error(format!("Search failed: {error}"))
            }
        }
    }
}

/// Renders hits as numbered blocks, at most `max_results` of them.
pub fn format_hits(query: &str, hits: &[SearchHit], max_results: usize) -> String {
    if hits.is_empty() {
        return format!("No results found for: {query}");
    }
    hits.iter()
        .take(max_results)
        .enumerate()
        .map(|(i, hit)| {
            format!(
                "{}. {} — {}\n   {}",
                i + 1,
                hit.title.trim(),
                hit.url.trim(),
                hit.snippet.trim()
            )
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}
