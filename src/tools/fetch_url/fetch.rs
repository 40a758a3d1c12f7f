//! One guarded fetch: resolve, check, connect to exactly the checked addresses, follow
//! redirects by hand, read a capped body.
//!
//! Each hop resolves its host once through [`Resolve`], refuses the hop if any answer is
//! forbidden, and builds a reqwest client whose only DNS resolver is a [`PinnedResolve`] that
//! returns those checked addresses for that host and fails for every other name. The
//! connection therefore never resolves again, so a DNS answer that changes between the check
//! and the connect (DNS rebinding) cannot move it to another address. Redirects are disabled in
//! reqwest and followed here, so every hop passes the same check. Proxies are disabled, because
//! a proxy would resolve the name itself, out of the guard's sight.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use reqwest::header::{ACCEPT, CONTENT_TYPE, LOCATION};
use url::Url;

use super::FetchError;
use super::guard::{AddressPolicy, Target, check_url, parse_url};

/// At most this many redirects are followed.
pub const MAX_REDIRECTS: usize = 5;

/// The Accept header: the textual types `fetch_url` returns.
const ACCEPT_TEXT: &str = "text/html, application/xhtml+xml, text/*;q=0.9, application/json;q=0.8, \
                           application/xml;q=0.8, */*;q=0.1";

/// Resolves a host name to socket addresses.
#[async_trait]
pub trait Resolve: Send + Sync {
    /// All addresses of `host`, with `port` set.
    async fn resolve(&self, host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>>;
}

/// The system resolver (`getaddrinfo` through tokio).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

#[async_trait]
impl Resolve for SystemResolver {
    async fn resolve(&self, host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
        Ok(tokio::net::lookup_host((host, port)).await?.collect())
    }
}

/// The reqwest resolver of one hop: answers the checked addresses for the checked host only.
struct PinnedResolve {
    host: String,
    addrs: Vec<SocketAddr>,
}

impl reqwest::dns::Resolve for PinnedResolve {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let answer = if name.as_str().eq_ignore_ascii_case(&self.host) {
            let addrs: reqwest::dns::Addrs = Box::new(self.addrs.clone().into_iter());
            Ok(addrs)
        } else {
            Err(format!("{} was not checked by the SSRF guard", name.as_str()).into())
        };
        Box::pin(std::future::ready(answer))
    }
}

/// Limits of one fetch.
#[derive(Debug, Clone, Copy)]
pub struct FetchLimits {
    /// The deadline for the whole fetch, redirects and body included.
    pub timeout: Duration,
    /// The body is read up to this many bytes.
    pub max_bytes: usize,
}

/// A fetched, still undecoded, text body.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The URL of the last hop.
    pub url: Url,
    /// The response's Content-Type header.
    pub content_type: String,
    /// The body, at most `max_bytes` long.
    pub body: Vec<u8>,
    /// Whether the body was cut at `max_bytes`.
    pub truncated: bool,
}

/// Fetches URLs through the SSRF guard.
#[derive(Clone)]
pub struct Fetcher {
    policy: AddressPolicy,
    resolver: Arc<dyn Resolve>,
}

impl Fetcher {
    /// A fetcher with `policy` deciding addresses and `resolver` answering names.
    pub fn new(policy: AddressPolicy, resolver: Arc<dyn Resolve>) -> Self {
        Self { policy, resolver }
    }

    /// Fetches `raw_url` within `limits`.
    pub async fn fetch(&self, raw_url: &str, limits: FetchLimits) -> Result<Fetched, FetchError> {
        let url = parse_url(raw_url)?;
        match tokio::time::timeout(limits.timeout, self.follow(url, limits.max_bytes)).await {
            Ok(res) => res,
            Err(_) => Err(FetchError::Timeout {
                seconds: limits.timeout.as_secs(),
            }),
        }
    }

    async fn follow(&self, mut url: Url, max_bytes: usize) -> Result<Fetched, FetchError> {
        for hop in 0..=MAX_REDIRECTS {
            let client = self.pinned_client(&url).await?;
            let response = client
                .get(url.clone())
                .header(ACCEPT, ACCEPT_TEXT)
                .send()
                .await
                .map_err(|error| FetchError::Request {
                    url: url.to_string(),
                    error,
                })?;
            let status = response.status();
            if matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308) {
                let location = response
                    .headers()
                    .get(LOCATION)
                    .and_then(|value| value.to_str().ok())
                    .ok_or_else(|| FetchError::BadRedirect {
                        url: url.to_string(),
                    })?;
                let next = url.join(location).map_err(|error| FetchError::InvalidUrl {
                    url: location.chars().take(200).collect(),
                    error,
                })?;
                // Hosts only: query strings may carry tokens.
                tracing::debug!(
                    hop,
                    from = url.host_str().unwrap_or(""),
                    to = next.host_str().unwrap_or(""),
                    "Following a redirect."
                );
                url = next;
                continue;
            }
            if !status.is_success() {
                return Err(FetchError::Status {
                    url: url.to_string(),
                    status: status.as_u16(),
                });
            }
            let content_type = response
                .headers()
                .get(CONTENT_TYPE)
                .and_then(|value| value.to_str().ok())
                .unwrap_or("")
                .to_owned();
            if !is_text(&content_type) {
                return Err(FetchError::UnsupportedContentType { content_type });
            }
            let (body, truncated) = read_capped(response, max_bytes, &url).await?;
            return Ok(Fetched {
                url,
                content_type,
                body,
                truncated,
            });
        }
        Err(FetchError::TooManyRedirects { max: MAX_REDIRECTS })
    }

    /// Checks the hop's URL and addresses and builds a client that can only reach them.
    async fn pinned_client(&self, url: &Url) -> Result<reqwest::Client, FetchError> {
        let builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .user_agent(concat!("squidbot/", env!("CARGO_PKG_VERSION")));
        let builder = match check_url(url, &self.policy)? {
            // A literal IP is connected to directly; check_url has judged it.
            Target::Ip(_) => builder.dns_resolver(PinnedResolve {
                host: String::new(),
                addrs: Vec::new(),
            }),
            Target::Domain(host) => {
                let port = url.port_or_known_default().unwrap_or(80);
                let addrs = self.resolver.resolve(&host, port).await.map_err(|error| {
                    FetchError::Resolve {
                        host: host.clone(),
                        error,
                    }
                })?;
                if addrs.is_empty() {
                    return Err(FetchError::NoAddresses { host });
                }
                for addr in &addrs {
                    self.policy.check(addr.ip()).map_err(|reason| {
                        FetchError::ForbiddenAddress {
                            host: host.clone(),
                            ip: addr.ip(),
                            reason,
                        }
                    })?;
                }
                tracing::debug!(host = %host, n_addrs = addrs.len(), "Pinned checked addresses.");
                builder.dns_resolver(PinnedResolve { host, addrs })
            }
        };
        builder.build().map_err(FetchError::Client)
    }
}

/// Whether `content_type` names a textual type `fetch_url` returns.
fn is_text(content_type: &str) -> bool {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence.starts_with("text/")
        || matches!(
            essence.as_str(),
            "application/json" | "application/xml" | "application/xhtml+xml"
        )
        || essence.ends_with("+xml")
        || essence.ends_with("+json")
}

/// Reads at most `max_bytes` of the body; the flag says whether more was there.
async fn read_capped(
    mut response: reqwest::Response,
    max_bytes: usize,
    url: &Url,
) -> Result<(Vec<u8>, bool), FetchError> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|error| FetchError::Request {
            url: url.to_string(),
            error,
        })?
    {
        let room = max_bytes - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
        if body.len() == max_bytes {
            // Exactly at the cap: cut only if anything follows.
            let more = response
                .chunk()
                .await
                .map_err(|error| FetchError::Request {
                    url: url.to_string(),
                    error,
                })?;
            return Ok((body, more.is_some_and(|rest| !rest.is_empty())));
        }
    }
    Ok((body, false))
}
