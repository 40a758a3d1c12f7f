//! The search services behind `web_search`, each turned into a list of [`SearchHit`]s.
//!
//! SearXNG and Brave answer JSON; DuckDuckGo has no free JSON API, so its HTML endpoint is parsed
//! with `scraper` (CSS selectors over html5ever), which is what the original's Python library
//! does too. Base URLs are fields so tests can point each provider at a local server.

use scraper::{Html, Selector};
use serde::Deserialize;

use super::SearchError;

/// The Brave Search web endpoint.
pub const BRAVE_URL: &str = "https://api.search.brave.com/res/v1/web/search";
/// DuckDuckGo's HTML (no JavaScript) endpoint.
pub const DUCKDUCKGO_URL: &str = "https://html.duckduckgo.com/html/";

/// One search result.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SearchHit {
    /// The page title.
    pub title: String,
    /// The page address.
    pub url: String,
    /// A short excerpt (plain text).
    pub snippet: String,
}

/// A configured search service.
#[derive(Debug, Clone)]
pub enum SearchProvider {
    /// A SearXNG instance: GET `{url}/search?q=…&format=json&categories=general`.
    Searxng {
        /// The instance's base URL.
        url: String,
        /// Sent as a bearer token when set.
        api_key: Option<String>,
    },
    /// The Brave Search API: GET `url?q=…&count=n` with `X-Subscription-Token`.
    Brave {
        /// The endpoint ([`BRAVE_URL`] in production).
        url: String,
        /// The subscription token.
        api_key: String,
    },
    /// DuckDuckGo's HTML endpoint: GET `url?q=…`.
    DuckDuckGo {
        /// The endpoint ([`DUCKDUCKGO_URL`] in production).
        url: String,
    },
}

#[derive(Deserialize)]
struct SearxngBody {
    #[serde(default)]
    results: Vec<SearxngResult>,
}

#[derive(Deserialize)]
struct SearxngResult {
    #[serde(default)]
    title: String,
    #[serde(default)]
    url: String,
    #[serde(default)]
    content: Option<String>,
}

#[derive(Deserialize)]
struct BraveBody {
    #[serde(default)]
    web: Option<BraveWeb>,
}

#[derive(Deserialize)]
struct BraveWeb {
    #[serde(default)]
    results: Vec<BraveResult>,
}

#[derive(Deserialize)]
struct BraveResult {
    #[serde(default)]
    title: String,
    #[serde(default)]
    url: String,
    #[serde(default)]
    description: Option<String>,
}

impl SearchProvider {
    /// The provider's name (for messages and logs).
    pub fn name(&self) -> &'static str {
        match self {
            Self::Searxng { .. } => "searxng",
            Self::Brave { .. } => "brave",
            Self::DuckDuckGo { .. } => "duckduckgo",
        }
    }

    /// Runs one search and returns at most `max_results` hits.
    pub async fn search(
        &self,
        client: &reqwest::Client,
        query: &str,
        max_results: usize,
    ) -> Result<Vec<SearchHit>, SearchError> {
        let provider = self.name();
        let request = match self {
            Self::Searxng { url, api_key } => {
                let endpoint = format!("{}/search", url.trim_end_matches('/'));
                let endpoint = with_query(
                    provider,
                    &endpoint,
                    &[("q", query), ("format", "json"), ("categories", "general")],
                )?;
                let request = client.get(endpoint);
                match api_key {
                    Some(key) => request.bearer_auth(key),
                    None => request,
                }
            }
            Self::Brave { url, api_key } => {
                let count = max_results.to_string();
                let endpoint = with_query(provider, url, &[("q", query), ("count", &count)])?;
                client
                    .get(endpoint)
                    .header("Accept", "application/json")
                    .header("X-Subscription-Token", api_key)
            }
            Self::DuckDuckGo { url } => client.get(with_query(provider, url, &[("q", query)])?),
        };
        let body = fetch(request, provider).await?;
        let mut hits = match self {
            Self::Searxng { .. } => parse_searxng(&body)?,
            Self::Brave { .. } => parse_brave(&body)?,
            Self::DuckDuckGo { .. } => parse_duckduckgo(&body),
        };
        hits.truncate(max_results);
        Ok(hits)
    }
}

/// `base` with `pairs` appended to its query string.
fn with_query(
    provider: &'static str,
    base: &str,
    pairs: &[(&str, &str)],
) -> Result<url::Url, SearchError> {
    let mut url = url::Url::parse(base).map_err(|error| SearchError::Url {
        provider,
        url: base.to_owned(),
        error,
    })?;
    url.query_pairs_mut().extend_pairs(pairs);
    Ok(url)
}

async fn fetch(
    request: reqwest::RequestBuilder,
    provider: &'static str,
) -> Result<String, SearchError> {
    let response = request
        .send()
        .await
        .map_err(|error| SearchError::Request { provider, error })?;
    let status = response.status();
    if !status.is_success() {
        return Err(SearchError::Status {
            provider,
            status: status.as_u16(),
        });
    }
    response
        .text()
        .await
        .map_err(|source| SearchError::Request {
            provider,
            error: source,
        })
}

/// Hits from a SearXNG JSON body.
pub fn parse_searxng(body: &str) -> Result<Vec<SearchHit>, SearchError> {
    let body: SearxngBody = serde_json::from_str(body).map_err(|error| SearchError::Body {
        provider: "searxng",
        error,
    })?;
    Ok(body
        .results
        .into_iter()
        .map(|r| SearchHit {
            title: r.title,
            url: r.url,
            snippet: r.content.unwrap_or_default(),
        })
        .collect())
}

/// Hits from a Brave JSON body; Brave marks matches with `<strong>`, which is stripped.
pub fn parse_brave(body: &str) -> Result<Vec<SearchHit>, SearchError> {
    let body: BraveBody = serde_json::from_str(body).map_err(|error| SearchError::Body {
        provider: "brave",
        error,
    })?;
    Ok(body
        .web
        .map(|web| web.results)
        .unwrap_or_default()
        .into_iter()
        .map(|r| SearchHit {
            title: strip_tags(&r.title),
            url: r.url,
            snippet: strip_tags(&r.description.unwrap_or_default()),
        })
        .collect())
}

/// Hits from DuckDuckGo's HTML results page; ads are skipped and redirect links unwrapped.
/// A page without results (or one that is not a results page) gives no hits.
pub fn parse_duckduckgo(body: &str) -> Vec<SearchHit> {
    let (Ok(result), Ok(link), Ok(snippet)) = (
        Selector::parse("div.result"),
        Selector::parse("a.result__a"),
        Selector::parse(".result__snippet"),
    ) else {
        tracing::error!("A DuckDuckGo CSS selector does not parse.");
        return Vec::new();
    };
    let document = Html::parse_document(body);
    document
        .select(&result)
        .filter(|element| !element.value().classes().any(|class| class == "result--ad"))
        .filter_map(|element| {
            let anchor = element.select(&link).next()?;
            let href = anchor.value().attr("href")?;
            let title = squash(&anchor.text().collect::<String>());
            let snippet = element
                .select(&snippet)
                .next()
                .map(|s| squash(&s.text().collect::<String>()))
                .unwrap_or_default();
            Some(SearchHit {
                title,
                url: unwrap_redirect(href),
                snippet,
            })
        })
        .collect()
}

/// DuckDuckGo links go through `//duckduckgo.com/l/?uddg=<target>`; this returns the target.
fn unwrap_redirect(href: &str) -> String {
    let absolute = if href.starts_with("//") {
        format!("https:{href}")
    } else {
        href.to_owned()
    };
    url::Url::parse(&absolute)
        .ok()
        .filter(|url| url.path().starts_with("/l/"))
        .and_then(|url| {
            url.query_pairs()
                .find(|(key, _)| key == "uddg")
                .map(|(_, value)| value.into_owned())
        })
        .unwrap_or(absolute)
}

fn strip_tags(html: &str) -> String {
    if !html.contains('<') && !html.contains('&') {
        return html.to_owned();
    }
    squash(
        &Html::parse_fragment(html)
            .root_element()
            .text()
            .collect::<String>(),
    )
}

fn squash(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
