//! `fetch_url`: fetches a web page for the model, behind an SSRF guard.
//!
//! - [`guard`]: which URLs and IP addresses may be contacted ([`AddressPolicy`]).
//! - [`fetch`]: the per-hop resolve → check → pinned connect loop with manual redirects and a
//!   capped body ([`Fetcher`], [`Resolve`]).
//! - [`text`]: charset decoding and HTML → text.
//!
//! Only `http`/`https`; every hop (redirects included) is checked and the connection goes to
//! exactly the addresses that were checked, so DNS rebinding cannot reach a private address.
//! Limits: `timeout_seconds` (default 20, at most 60), `max_bytes` (default 512 KiB, at most
//! 2 MiB; the body is cut there and the result says so) and `max_chars` of output (default
//! 8000). Only textual content types are returned.

pub mod fetch;
pub mod guard;
#[cfg(test)]
mod tests;
pub mod text;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::core::authority::{Effect, Effects};
use crate::core::error_chain::Chain;
use crate::core::ports::tool::{ToolContext, ToolOutput, TypedSpec, TypedTool};

pub use fetch::{FetchLimits, Fetched, Fetcher, Resolve, SystemResolver};
pub use guard::AddressPolicy;

/// Default deadline of one call, in seconds.
pub const DEFAULT_TIMEOUT_SECONDS: u64 = 20;
/// Largest deadline a call may ask for, in seconds.
pub const MAX_TIMEOUT_SECONDS: u64 = 60;
/// Default body cap, in bytes.
pub const DEFAULT_MAX_BYTES: u64 = 512 * 1024;
/// Largest body cap a call may ask for, in bytes.
pub const MAX_MAX_BYTES: u64 = 2 * 1024 * 1024;
/// Default output cap, in characters.
pub const DEFAULT_MAX_CHARS: u64 = 8000;
/// Largest output cap a call may ask for, in characters.
pub const MAX_MAX_CHARS: u64 = 100_000;

/// Why a fetch was refused or failed; shown to the model as an error result.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The URL does not parse.
    #[error("invalid URL {url:?}: {error}")]
    InvalidUrl {
        /// The URL as given (cut to 200 characters).
        url: String,
        /// The parser's complaint.
        error: url::ParseError,
    },
    /// The scheme is not `http` or `https`.
    #[error("blocked by SSRF policy: scheme {scheme:?} is not allowed (only http and https)")]
    UnsupportedScheme {
        /// The refused scheme.
        scheme: String,
    },
    /// The URL carries a user name or password.
    #[error("blocked by SSRF policy: URLs with credentials (user:password@) are not allowed")]
    Userinfo,
    /// The URL has no host.
    #[error("the URL has no host")]
    NoHost,
    /// The host is `localhost` or a `.localhost` name.
    #[error("blocked by SSRF policy: host {host:?} is local")]
    ForbiddenHost {
        /// The refused host name.
        host: String,
    },
    /// The host is, or resolves to, an address that may not be contacted.
    #[error("blocked by SSRF policy: {host} is {ip}, a {reason} address")]
    ForbiddenAddress {
        /// The host as written in the URL.
        host: String,
        /// The refused address.
        ip: IpAddr,
        /// The kind of range it is in.
        reason: &'static str,
    },
    /// The host name does not resolve.
    #[error("could not resolve {host}: {error}")]
    Resolve {
        /// The host name.
        host: String,
        /// The resolver's error.
        error: std::io::Error,
    },
    /// The host name resolves to no address.
    #[error("{host} resolves to no address")]
    NoAddresses {
        /// The host name.
        host: String,
    },
    /// A redirect had no usable `Location`.
    #[error("redirect from {url} has no valid Location header")]
    BadRedirect {
        /// The redirecting URL.
        url: String,
    },
    /// More than the allowed number of redirects.
    #[error("too many redirects (more than {max})")]
    TooManyRedirects {
        /// The limit.
        max: usize,
    },
    /// The HTTP client could not be built.
    #[error("could not build the HTTP client: {}", Chain(.0))]
    Client(reqwest::Error),
    /// The request or the body read failed.
    #[error("request to {url} failed: {}", Chain(error))]
    Request {
        /// The URL of the hop.
        url: String,
        /// The transport error.
        error: reqwest::Error,
    },
    /// The server answered with a non-success status.
    #[error("HTTP {status} from {url}")]
    Status {
        /// The URL of the hop.
        url: String,
        /// The status code.
        status: u16,
    },
    /// The content type is not textual.
    #[error("unsupported content-type {content_type:?} (only text/*, JSON and XML are fetched)")]
    UnsupportedContentType {
        /// The Content-Type header ("" if absent).
        content_type: String,
    },
    /// The deadline passed.
    #[error("timed out after {seconds} s")]
    Timeout {
        /// The deadline, in seconds.
        seconds: u64,
    },
}

// How the body is returned. Plain comments, not doc comments: those would become schema
// descriptions the model does not need (and turn the `enum` into a longer `oneOf`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Format {
    // HTML rendered as readable text; other types as they are.
    #[default]
    Text,
    // The decoded body as it is.
    Html,
}

/// The arguments of `fetch_url`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Arguments {
    /// The http or https URL.
    url: String,
    // Accepted but not shown to the model (the defaults serve; the cut says how to read
    // more): every turn's prompt carries the schema.
    #[schemars(skip)]
    timeout_seconds: Option<u64>,
    #[schemars(skip)]
    max_bytes: Option<u64>,
    #[schemars(range(min = 1, max = MAX_MAX_CHARS), extend("default" = DEFAULT_MAX_CHARS))]
    max_chars: Option<u64>,
    #[serde(default)]
    format: Format,
}

/// The `fetch_url` tool.
pub struct FetchUrlTool {
    fetcher: Fetcher,
    spec: TypedSpec<Arguments>,
}

impl FetchUrlTool {
    /// The production tool: public addresses only, the system resolver.
    pub fn new() -> Self {
        Self::with_fetcher(Fetcher::new(
            AddressPolicy::public_only(),
            Arc::new(SystemResolver),
        ))
    }

    /// The tool over a given fetcher (tests use a permissive policy and fake resolvers).
    pub fn with_fetcher(fetcher: Fetcher) -> Self {
        let spec = TypedSpec::new(
            "fetch_url",
            "Fetch a public http(s) URL and return its text (HTML converted to text). Private \
             and local addresses are refused.",
        );
        Self { fetcher, spec }
    }
}

impl Default for FetchUrlTool {
    fn default() -> Self {
        Self::new()
    }
}

/// `value` (or `default`) limited to `1..=max`; zero is refused.
fn bounded(name: &str, value: Option<u64>, default: u64, max: u64) -> Result<u64, ToolOutput> {
    match value.unwrap_or(default) {
        0 => Err(ToolOutput::error(format!(
            "Error: {name} must be at least 1"
        ))),
        value => Ok(value.min(max)),
    }
}

#[async_trait]
impl TypedTool for FetchUrlTool {
    type Arguments = Arguments;

    fn definition(&self) -> &TypedSpec<Arguments> {
        &self.spec
    }

    fn effects(&self) -> Effects {
        Effects::of(&[Effect::Network])
    }

    async fn run(&self, arguments: Arguments, context: &ToolContext) -> ToolOutput {
        let limits = (
            bounded(
                "timeout_seconds",
                arguments.timeout_seconds,
                DEFAULT_TIMEOUT_SECONDS,
                MAX_TIMEOUT_SECONDS,
            ),
            bounded(
                "max_bytes",
                arguments.max_bytes,
                DEFAULT_MAX_BYTES,
                MAX_MAX_BYTES,
            ),
            bounded(
                "max_chars",
                arguments.max_chars,
                DEFAULT_MAX_CHARS,
                MAX_MAX_CHARS,
            ),
        );
        let (timeout_seconds, max_bytes, max_chars) = match limits {
            (Ok(t), Ok(b), Ok(c)) => (t, b, c),
            (Err(output), _, _) | (_, Err(output), _) | (_, _, Err(output)) => return output,
        };
        let limits = FetchLimits {
            timeout: Duration::from_secs(timeout_seconds),
            max_bytes: usize::try_from(max_bytes).unwrap_or(usize::MAX),
        };
        let fetched = match self.fetcher.fetch(&arguments.url, limits).await {
            Ok(fetched) => fetched,
            Err(error) => {
                tracing::info!(session = %context.session, error = %error, "fetch_url refused or failed.");
                return ToolOutput::error(format!("Error: {error}"));
            }
        };
        tracing::info!(
            session = %context.session,
            host = fetched.url.host_str().unwrap_or(""),
            n_bytes = fetched.body.len(),
            truncated = fetched.truncated,
            "fetch_url fetched a page."
        );
        let format = arguments.format;
        // The page is someone else's text: the agent loop fences it as untrusted data.
        ToolOutput::ok(render(fetched, format, max_chars).await).from_outside()
    }
}

/// Decodes, converts and cuts a fetched body, appending notes about cuts and redirects.
async fn render(fetched: Fetched, format: Format, max_chars: u64) -> String {
    let Fetched {
        url,
        content_type,
        body,
        truncated,
    } = fetched;
    let n_bytes = body.len();
    let convert = format == Format::Text && text::is_html(&content_type);
    let task = tokio::task::spawn_blocking(move || {
        let decoded = text::decode(&body, &content_type);
        if convert {
            text::html_to_text(&decoded)
        } else {
            decoded
        }
    });
    let rendered = match task.await {
        Ok(rendered) => rendered,
        Err(error) => {
            tracing::error!(error = %error, "fetch_url rendering task failed.");
            return "Error: rendering the page failed".to_owned();
        }
    };
    let max_chars = usize::try_from(max_chars).unwrap_or(usize::MAX);
    let (mut content, cut) = text::cut_chars(rendered, max_chars);
    let mut notes = Vec::new();
    if truncated {
        notes.push(format!(
            "[Body cut at {n_bytes} bytes (max_bytes); the page is longer.]"
        ));
    }
    if cut {
        notes.push(format!(
            "[Output cut at {max_chars} characters (max_chars).]"
        ));
    }
    notes.push(format!("[Source: {url}]"));
    content.push_str("\n\n");
    content.push_str(&notes.join("\n"));
    content
}
