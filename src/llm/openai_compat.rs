//! [`OpenAiCompatLlm`]: one model behind an OpenAI-compatible Chat Completions API.
//!
//! It streams with SSE, maps every way a call can fail to an [`LlmError`] the pool can act on
//! (status codes, `Retry-After`, transport errors, four explicit timeouts) and survives the
//! known server quirks: llama.cpp's empty 200 body when tools are streamed is retried once
//! without streaming, a 4xx naming `stream_options` is retried without them (both learned for
//! good, see [`Learned`]), and a server that ignores `stream: true` and answers with plain JSON
//! is read as such. The API key only ever goes into the `Authorization` header.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use reqwest::header::{CONTENT_TYPE, HeaderValue, RETRY_AFTER};

use crate::core::ports::llm::{
    ChatRequest, ChatResponse, ContextBudget, LlmClient, LlmError, StreamObserver,
};
use crate::llm::images;
use crate::llm::learned::Learned;
use crate::llm::settings::{Endpoint, Timeouts};
use crate::llm::stream::{StreamOutcome, head, parse_completion, read_sse};
use crate::llm::wire::{RequestBody, error_message};

/// The most bytes read from an error response (only its start goes into the error).
const ERROR_BODY_BYTES: usize = 300;
/// The most bytes accepted for a non-streamed completion.
const COMPLETION_BODY_BYTES: usize = 32 * 1024 * 1024;

/// Builds the HTTP client shared by every model: rustls, TCP_NODELAY, the connect timeout.
///
/// Build it once and pass clones to [`OpenAiCompatLlm::new`], so connections are pooled.
pub fn http_client(timeouts: &Timeouts) -> Result<reqwest::Client, LlmError> {
    reqwest::Client::builder()
        .connect_timeout(timeouts.connect)
        .tcp_nodelay(true)
        .build()
        .map_err(|error| LlmError::Config(format!("cannot build the HTTP client: {error}")))
}

/// One model at one OpenAI-compatible endpoint.
#[derive(Debug, Clone)]
pub struct OpenAiCompatLlm {
    client: reqwest::Client,
    endpoint: Endpoint,
    timeouts: Timeouts,
    name: String,
    /// What is known about the server (shared by every client of the home): whether it
    /// refuses `stream_options` (requests then go without them, and their usage is estimated
    /// unless the server reports it anyway) or cannot stream tool calls.
    learned: Arc<Learned>,
    /// The key of this server in `learned`: the completions URL and the model id.
    server: String,
    /// The completions URL, parsed once: reqwest would parse a string on every request. One
    /// that does not parse is kept as text, for reqwest to refuse with its own error.
    completions: Result<reqwest::Url, String>,
    /// The size to reserve for the next request body: the last one's and an eighth. A turn's
    /// body is tens of kilobytes, which, grown by doubling from empty, was copied five times.
    body_hint: Arc<AtomicUsize>,
}

impl OpenAiCompatLlm {
    /// A client for `endpoint` using the shared HTTP `client` (see [`http_client`]).
    pub fn new(client: reqwest::Client, endpoint: Endpoint, timeouts: Timeouts) -> Self {
        let name = format!("model:{}", endpoint.model_name);
        let url = endpoint.completions_url();
        let server = format!("{url} {}", endpoint.model);
        let completions = reqwest::Url::parse(&url).map_err(|_| url);
        Self {
            client,
            endpoint,
            timeouts,
            name,
            learned: Arc::default(),
            server,
            completions,
            body_hint: Arc::new(AtomicUsize::new(16 * 1024)),
        }
    }

    /// The client sharing what `learned` knows about servers (the home's, see [`Learned`]).
    pub fn with_learned(mut self, learned: Arc<Learned>) -> Self {
        self.learned = learned;
        self
    }

    /// The endpoint this client talks to.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    fn model_name(&self) -> &str {
        &self.endpoint.model_name
    }

    async fn call(
        &self,
        request: ChatRequest<'_>,
        observer: StreamObserver<'_>,
    ) -> Result<ChatResponse, LlmError> {
        let images = if self.endpoint.profile.vision {
            images::load(request.messages, self.endpoint.max_image_bytes).await
        } else {
            HashMap::new()
        };
        let mut body = RequestBody::new(
            &self.endpoint.model,
            request.messages,
            request.tools,
            self.endpoint.max_tokens,
            &self.endpoint.profile,
            &images,
        );
        let quirks = self.learned.recall(&self.server);
        if quirks.no_stream_options {
            body.stream_options = None;
        }
        if quirks.no_streamed_tools && !request.tools.is_empty() {
            return self.unstreamed(&mut body, observer).await;
        }
        let response = match self.send(&body).await {
            // OpenAI-compatible servers that do not know `stream_options` say so with a 400
            // (vLLM, older llama.cpp) or a 422 (Mistral): any 4xx naming it.
            Err(LlmError::Server { status, detail, .. })
                if (400..500).contains(&status)
                    && body.stream_options.is_some()
                    && detail.contains("stream_options") =>
            {
                tracing::info!(
                    model = self.model_name(),
                    "The server rejects stream_options; asking without it from now on."
                );
                self.learned
                    .remember(&self.server, |quirks| quirks.no_stream_options = true);
                body.stream_options = None;
                self.send(&body).await?
            }
            response => response?,
        };
        let is_json = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with("application/json"));
        if is_json {
            return self.read_completion(response, observer).await;
        }
        match read_sse(response, self.timeouts.idle, self.model_name(), observer).await? {
            StreamOutcome::Complete(response) => Ok(response),
            StreamOutcome::Empty => {
                tracing::info!(
                    model = self.model_name(),
                    "Empty streamed response; retrying once without streaming."
                );
                if !request.tools.is_empty() {
                    // llama.cpp's way of saying it cannot stream tool calls: from now on
                    // requests with tools go unstreamed.
                    self.learned
                        .remember(&self.server, |quirks| quirks.no_streamed_tools = true);
                }
                self.unstreamed(&mut body, observer).await
            }
        }
    }

    /// Asks with `body` without streaming (so without `stream_options`) and reads the answer.
    async fn unstreamed(
        &self,
        body: &mut RequestBody<'_>,
        observer: StreamObserver<'_>,
    ) -> Result<ChatResponse, LlmError> {
        body.stream = false;
        body.stream_options = None;
        let response = self.send(body).await?;
        self.read_completion(response, observer).await
    }

    /// Sends the request and returns the response if its status is a success.
    async fn send(&self, body: &RequestBody<'_>) -> Result<reqwest::Response, LlmError> {
        let builder = match &self.completions {
            Ok(url) => self.client.post(url.clone()),
            Err(text) => self.client.post(text.as_str()),
        };
        let mut bytes = Vec::with_capacity(self.body_hint.load(Ordering::Relaxed));
        serde_json::to_writer(&mut bytes, body).map_err(|error| {
            LlmError::Config(format!("the request could not be encoded: {error}"))
        })?;
        self.body_hint
            .store(bytes.len() + bytes.len() / 8, Ordering::Relaxed);
        let mut builder = builder
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .body(bytes);
        if let Some(key) = &self.endpoint.api_key {
            builder = builder.bearer_auth(key);
        }
        let response = match tokio::time::timeout(self.timeouts.first_byte, builder.send()).await {
            Err(_) => {
                return Err(LlmError::Timeout {
                    model: self.model_name().to_owned(),
                    phase: "first byte",
                });
            }
            Ok(Err(error)) => return Err(self.transport_error(&error)),
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
        let detail = read_body(response, self.timeouts.idle, ERROR_BODY_BYTES)
            .await
            .map(|bytes| error_message(&head(String::from_utf8_lossy(&bytes).trim())))
            .unwrap_or_default();
        Err(classify_status(
            self.model_name(),
            &self.endpoint.shown_url(),
            status.as_u16(),
            retry_after,
            detail,
        ))
    }

    async fn read_completion(
        &self,
        response: reqwest::Response,
        observer: StreamObserver<'_>,
    ) -> Result<ChatResponse, LlmError> {
        let bytes = read_body(response, self.timeouts.idle, COMPLETION_BODY_BYTES)
            .await
            .map_err(|failure| failure.into_error(self.model_name()))?;
        parse_completion(&bytes, self.model_name(), observer)
    }

    /// A request that got no response: named by its URL and innermost cause (reqwest's outer
    /// layers only repeat the URL), so the message says what to fix.
    fn transport_error(&self, error: &reqwest::Error) -> LlmError {
        let detail = if error.is_connect() && error.is_timeout() {
            format!(
                "no connection within {} s",
                self.timeouts.connect.as_secs_f32()
            )
        } else {
            root_cause(error)
        };
        LlmError::Unreachable {
            model: self.model_name().to_owned(),
            url: self.endpoint.shown_url(),
            detail,
        }
    }
}

#[async_trait]
impl LlmClient for OpenAiCompatLlm {
    async fn chat(
        &self,
        request: ChatRequest<'_>,
        observer: StreamObserver<'_>,
    ) -> Result<ChatResponse, LlmError> {
        match tokio::time::timeout(self.timeouts.total, self.call(request, observer)).await {
            Ok(result) => result,
            Err(_) => Err(LlmError::Timeout {
                model: self.model_name().to_owned(),
                phase: "total",
            }),
        }
    }

    fn context_budget(&self) -> Option<ContextBudget> {
        self.endpoint
            .max_context_tokens
            .map(|max_context_tokens| ContextBudget {
                max_context_tokens,
                max_reply_tokens: self.endpoint.max_tokens.unwrap_or(0),
            })
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn first_model(&self) -> Option<&str> {
        Some(&self.endpoint.model_name)
    }

    fn describe(&self) -> String {
        format!("{} ({})", self.endpoint.model_name, self.endpoint.model)
    }
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
            Ok(Err(error)) => return Err(BodyReadFailure::Broken(error_chain(&error))),
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

/// An error and its sources on one line (reqwest hides the useful part in the sources).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
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
