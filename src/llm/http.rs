//! The HTTP exchange every API adapter shares ([`crate::llm::openai_compat`] for Chat
//! Completions, [`crate::llm::responses`] for OpenAI's Responses API,
//! [`crate::llm::anthropic`] for Anthropic's Messages API): the shared client, one POST under
//! the first-byte timeout (the key in the `Authorization` header, or in the header an API
//! names), the mapping of statuses, `Retry-After` and transport errors to [`LlmError`]s the
//! pool can act on, bodies read under the idle timeout, and an SSE event stream whose every
//! gap is timed.
//!
//! It lives apart from the wire formats so that every API classifies failures exactly as the
//! first: a 429 is a rate limit and a 503 (or Anthropic's 529) is retried whichever API
//! answered it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures_util::{Stream, StreamExt};
use reqwest::header::{CONTENT_TYPE, HeaderValue, RETRY_AFTER};

use crate::core::error_chain::Chain;
use crate::core::ports::llm::{
    ChatRequest, ChatResponse, ContextBudget, LlmClient, LlmError, StreamObserver,
};
use crate::llm::settings::{Endpoint, Timeouts, masked_url};
use crate::llm::wire::error_message;

/// How many bytes of a bad payload go into an error's detail.
pub(crate) const DETAIL_BYTES: usize = 300;
/// The most bytes read from an error response (only its start goes into the error).
const ERROR_BODY_BYTES: usize = 300;

/// Builds the HTTP client shared by every model: rustls, TCP_NODELAY, the connect timeout.
///
/// Build it once and pass clones to each model's client, so connections are pooled.
pub fn http_client(timeouts: &Timeouts) -> Result<reqwest::Client, LlmError> {
    reqwest::Client::builder()
        .connect_timeout(timeouts.connect)
        .tcp_nodelay(true)
        .build()
        .map_err(|error| LlmError::Config(format!("cannot build the HTTP client: {error}")))
}

/// The URL one API is posted to, parsed once (reqwest would parse a string on every request),
/// and as errors show it, with any password masked.
#[derive(Debug, Clone)]
pub(crate) struct ApiUrl {
    /// A URL that does not parse is kept as text, for reqwest to refuse with its own error.
    parsed: Result<reqwest::Url, String>,
    shown: String,
}

impl ApiUrl {
    /// `full`, parsed.
    pub(crate) fn new(full: String) -> Self {
        let shown = masked_url(&full);
        Self {
            parsed: reqwest::Url::parse(&full).map_err(|_| full),
            shown,
        }
    }

    /// The URL as errors name it.
    pub(crate) fn shown(&self) -> &str {
        &self.shown
    }
}

/// `body` as the JSON bytes of a request, written into a buffer of `capacity` (the size of
/// the model's last request, so a long history is not copied as the buffer grows).
pub(crate) fn encode_json(
    body: &impl serde::Serialize,
    capacity: usize,
) -> Result<Vec<u8>, LlmError> {
    let mut bytes = Vec::with_capacity(capacity);
    serde_json::to_writer(&mut bytes, body)
        .map_err(|error| LlmError::Config(format!("the request could not be encoded: {error}")))?;
    Ok(bytes)
}

/// Posts the JSON `bytes` to `url` for `endpoint` (its key as a bearer token) and returns the
/// response if its status is a success; every failure is classified (see [`send`]).
pub(crate) async fn post_json(
    client: &reqwest::Client,
    url: &ApiUrl,
    endpoint: &Endpoint,
    timeouts: &Timeouts,
    bytes: Vec<u8>,
) -> Result<reqwest::Response, LlmError> {
    let mut builder = json_post(client, url, bytes);
    if let Some(key) = &endpoint.api_key {
        builder = builder.bearer_auth(key);
    }
    send(builder, url, &endpoint.model_name, timeouts).await
}

/// A POST of the JSON `bytes` to `url`, without a key: an API that carries the key in a
/// header of its own (Anthropic's `x-api-key`) adds it and its other headers, then [`send`]s.
pub(crate) fn json_post(
    client: &reqwest::Client,
    url: &ApiUrl,
    bytes: Vec<u8>,
) -> reqwest::RequestBuilder {
    let builder = match &url.parsed {
        Ok(parsed) => client.post(parsed.clone()),
        Err(text) => client.post(text.as_str()),
    };
    builder
        .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
        .body(bytes)
}

/// Sends a request to `url` for `model` under the first-byte timeout and returns the response
/// if its status is a success; every failure is classified (see [`classify_status`]), with
/// the provider's words from the error body.
pub(crate) async fn send(
    builder: reqwest::RequestBuilder,
    url: &ApiUrl,
    model: &str,
    timeouts: &Timeouts,
) -> Result<reqwest::Response, LlmError> {
    let response = match tokio::time::timeout(timeouts.first_byte, builder.send()).await {
        Err(_) => {
            return Err(LlmError::Timeout {
                model: model.to_owned(),
                phase: "first byte",
            });
        }
        Ok(Err(error)) => return Err(transport_error(&error, model, url, timeouts)),
        Ok(Ok(response)) => response,
    };
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let retry_after = response
        .headers()
        .get(RETRY_AFTER)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| parse_retry_after(value, Utc::now()));
    let detail = read_body(response, timeouts.idle, ERROR_BODY_BYTES)
        .await
        .map(|bytes| {
            let body = String::from_utf8_lossy(&bytes);
            html_page(&body, url.shown()).unwrap_or_else(|| error_message(&head(body.trim())))
        })
        .unwrap_or_default();
    Err(classify_status(
        model,
        url.shown(),
        status.as_u16(),
        retry_after,
        detail,
    ))
}

/// What to say of an error body that is a web page (a proxy's or a web server's, not an LLM
/// API's JSON): its title and the URL that answered, instead of the page's markup, so the
/// error and `doctor`'s one line point at `api_base`. `None` for any other body.
fn html_page(body: &str, url: &str) -> Option<String> {
    let lower: String = body
        .trim_start()
        .chars()
        .take(512)
        .collect::<String>()
        .to_ascii_lowercase();
    if !(lower.starts_with("<!doctype html")
        || lower.starts_with("<html")
        || lower.contains("<body"))
    {
        return None;
    }
    let title = body
        .find("<title>")
        .and_then(|at| {
            let rest = &body[at + "<title>".len()..];
            rest.find("</title>").map(|end| rest[..end].trim())
        })
        .filter(|title| !title.is_empty())
        .map(|title| format!(" (\"{}\")", title.chars().take(80).collect::<String>()))
        .unwrap_or_default();
    Some(format!(
        "{url} answered with a web page{title}, not an LLM API's error: check `api_base` \
         (it usually ends in /v1) and what runs there"
    ))
}

/// One model at one endpoint, whatever API it speaks: its call, and what the rest of
/// [`LlmClient`] says about it, which comes from its endpoint alike for every API.
#[async_trait]
pub trait ModelClient: Send + Sync {
    /// The endpoint the model is asked at.
    fn endpoint(&self) -> &Endpoint;
    /// The limits of a call.
    fn timeouts(&self) -> &Timeouts;
    /// `model:<name>`, for logs and status.
    fn label(&self) -> &str;
    /// One call, without the total timeout (which [`LlmClient::chat`] adds).
    async fn call(
        &self,
        request: ChatRequest<'_>,
        observer: StreamObserver<'_>,
    ) -> Result<ChatResponse, LlmError>;
}

#[async_trait]
impl<M: ModelClient> LlmClient for M {
    async fn chat(
        &self,
        request: ChatRequest<'_>,
        observer: StreamObserver<'_>,
    ) -> Result<ChatResponse, LlmError> {
        match tokio::time::timeout(self.timeouts().total, self.call(request, observer)).await {
            Ok(result) => result,
            Err(_) => Err(LlmError::Timeout {
                model: self.endpoint().model_name.clone(),
                phase: "total",
            }),
        }
    }

    fn context_budget(&self) -> Option<ContextBudget> {
        self.endpoint().context_budget()
    }

    fn name(&self) -> &str {
        self.label()
    }

    fn first_model(&self) -> Option<&str> {
        Some(&self.endpoint().model_name)
    }

    fn describe(&self) -> String {
        self.endpoint().describe()
    }
}

/// The first [`DETAIL_BYTES`] of a text, cut at a character boundary.
pub(crate) fn head(text: &str) -> String {
    let mut end = text.len().min(DETAIL_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// Parses the JSON a server sent as `what` (`SSE data`, `a completion`), or says what was
/// wrong with it, quoting its start.
pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    what: &str,
    model: &str,
) -> Result<T, LlmError> {
    serde_json::from_slice(bytes).map_err(|error| LlmError::Protocol {
        model: model.to_owned(),
        detail: format!(
            "invalid JSON in {what} ({error}): {}",
            head(&String::from_utf8_lossy(bytes))
        ),
    })
}

/// Whether the response says it is plain JSON (a server that ignored `stream: true`).
pub(crate) fn is_json(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/json"))
}

/// A request that got no response: named by its URL and innermost cause (reqwest's outer
/// layers only repeat the URL), so the message says what to fix.
fn transport_error(
    error: &reqwest::Error,
    model: &str,
    url: &ApiUrl,
    timeouts: &Timeouts,
) -> LlmError {
    let detail = if error.is_connect() && error.is_timeout() {
        format!("no connection within {} s", timeouts.connect.as_secs_f32())
    } else {
        root_cause(error)
    };
    LlmError::Unreachable {
        model: model.to_owned(),
        url: url.shown().to_owned(),
        detail,
    }
}

/// Reads a whole successful body of at most `limit` bytes under the idle timeout.
pub(crate) async fn read_whole(
    response: reqwest::Response,
    idle: Duration,
    limit: usize,
    model: &str,
) -> Result<Vec<u8>, LlmError> {
    read_body(response, idle, limit)
        .await
        .map_err(|failure| failure.into_error(model))
}

/// Why reading a whole body failed.
#[derive(Debug)]
enum BodyReadFailure {
    Idle,
    TooLarge,
    Broken(String),
}

impl BodyReadFailure {
    fn into_error(self, model: &str) -> LlmError {
        let model = model.to_owned();
        match self {
            Self::Idle => LlmError::Timeout {
                model,
                phase: "idle",
            },
            Self::TooLarge => LlmError::Protocol {
                model,
                detail: "the completion is too large".to_owned(),
            },
            Self::Broken(detail) => LlmError::Protocol {
                model,
                detail: format!("body broken: {detail}"),
            },
        }
    }
}

/// Reads a body chunk by chunk under the idle timeout. Error bodies stop quietly at `limit`;
/// anything else that reaches it is [`BodyReadFailure::TooLarge`].
async fn read_body(
    mut response: reqwest::Response,
    idle: Duration,
    limit: usize,
) -> Result<Vec<u8>, BodyReadFailure> {
    let truncate = !response.status().is_success();
    let mut bytes = Vec::new();
    loop {
        match tokio::time::timeout(idle, response.chunk()).await {
            Err(_) => return Err(BodyReadFailure::Idle),
            Ok(Err(error)) => return Err(BodyReadFailure::Broken(Chain(&error).to_string())),
            Ok(Ok(None)) => return Ok(bytes),
            Ok(Ok(Some(chunk))) => {
                bytes.extend_from_slice(&chunk);
                if bytes.len() >= limit {
                    if truncate {
                        bytes.truncate(limit);
                        return Ok(bytes);
                    }
                    return Err(BodyReadFailure::TooLarge);
                }
            }
        }
    }
}

/// The innermost cause of an error, which is the part a person can act on.
fn root_cause(error: &dyn std::error::Error) -> String {
    let mut cause = error;
    while let Some(source) = cause.source() {
        cause = source;
    }
    cause.to_string()
}

/// Maps a failed HTTP status to an error: 401/403 → `Auth`, 404 → `NotFound` (naming `url`),
/// 429 → `RateLimited`, the rest `Server` (retryable for 408 and 5xx, see
/// [`LlmError::is_retryable`]).
pub(crate) fn classify_status(
    model: &str,
    url: &str,
    status: u16,
    retry_after: Option<Duration>,
    detail: String,
) -> LlmError {
    let model = model.to_owned();
    match status {
        401 | 403 => LlmError::Auth { model, detail },
        404 => LlmError::NotFound {
            model,
            url: url.to_owned(),
            detail,
        },
        429 => LlmError::RateLimited { model, retry_after },
        _ => LlmError::Server {
            model,
            status,
            detail,
        },
    }
}

/// Parses `Retry-After`: delay seconds (fractions tolerated) or an HTTP date, relative to `now`.
/// A date in the past means "now".
pub(crate) fn parse_retry_after(value: &str, now: DateTime<Utc>) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return Duration::try_from_secs_f64(seconds).ok();
    }
    let date = DateTime::parse_from_rfc2822(value).ok()?;
    Some(
        (date.with_timezone(&Utc) - now)
            .to_std()
            .unwrap_or(Duration::ZERO),
    )
}

/// Why the body stopped before the SSE parser saw its end.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BodyFailure {
    /// No bytes for longer than the idle timeout.
    #[error("idle timeout")]
    Idle,
    /// The connection broke.
    #[error(transparent)]
    Transport(#[from] reqwest::Error),
}

/// The SSE events of `response`, each wait for bytes limited to `idle` (so comments and
/// keep-alives count as activity), and a counter of the body bytes received (a 200 with no
/// bytes at all is llama.cpp's way of saying it cannot stream tool calls).
pub(crate) fn sse_events(
    response: reqwest::Response,
    idle: Duration,
) -> (
    impl Stream<Item = Result<Event, EventStreamError<BodyFailure>>>,
    Arc<AtomicUsize>,
) {
    let received = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&received);
    let bytes = Box::pin(response.bytes_stream());
    let body = futures_util::stream::unfold((bytes, false), move |(mut bytes, failed)| {
        let counter = Arc::clone(&counter);
        async move {
            if failed {
                return None;
            }
            match tokio::time::timeout(idle, bytes.next()).await {
                Ok(Some(Ok(chunk))) => {
                    counter.fetch_add(chunk.len(), Ordering::Relaxed);
                    Some((Ok(chunk), (bytes, false)))
                }
                Ok(Some(Err(error))) => Some((Err(BodyFailure::from(error)), (bytes, true))),
                Ok(None) => None,
                Err(_) => Some((Err(BodyFailure::Idle), (bytes, true))),
            }
        }
    });
    (body.eventsource(), received)
}

/// The error of an SSE stream that broke: the idle timeout, a broken connection, bad framing.
pub(crate) fn sse_error(error: EventStreamError<BodyFailure>, model: &str) -> LlmError {
    let model = model.to_owned();
    match error {
        EventStreamError::Transport(BodyFailure::Idle) => LlmError::Timeout {
            model,
            phase: "idle",
        },
        EventStreamError::Transport(BodyFailure::Transport(error)) => LlmError::Protocol {
            model,
            detail: format!("stream broken: {}", Chain(&error)),
        },
        error => LlmError::Protocol {
            model,
            detail: format!("invalid SSE: {error}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_seconds_and_dates() {
        let now = DateTime::parse_from_rfc3339("2026-11-22T10:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let check = |value: &str, expected: Option<Duration>| {
            assert_eq!(parse_retry_after(value, now), expected, "{value}");
        };
        check("2", Some(Duration::from_secs(2)));
        check(" 0 ", Some(Duration::ZERO));
        check("1.5", Some(Duration::from_millis(1500)));
        check("-3", None);
        check("1e300", None);
        check("NaN", None);
        check("soon", None);
        check(
            "Sun, 22 Nov 2026 10:00:30 GMT",
            Some(Duration::from_secs(30)),
        );
        check("Sun, 22 Nov 2026 09:00:00 GMT", Some(Duration::ZERO));
    }

    #[test]
    fn statuses_are_classified() {
        let check = |status: u16, retryable: bool| {
            let error = classify_status("m", "http://h/v1", status, None, String::new());
            assert_eq!(error.is_retryable(), retryable, "{status}");
            error
        };
        assert!(matches!(check(401, false), LlmError::Auth { .. }));
        assert!(matches!(check(403, false), LlmError::Auth { .. }));
        assert!(matches!(check(429, true), LlmError::RateLimited { .. }));
        check(408, true);
        check(500, true);
        check(503, true);
        check(400, false);
        assert!(matches!(check(404, false), LlmError::NotFound { .. }));
    }
}
