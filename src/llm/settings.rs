//! Plain settings the LLM adapter is built from: one endpoint, its timeouts and a retry policy.
//!
//! These are deliberately independent of the config file's schema: the config module resolves
//! providers, models and pools and then fills these structs, so the adapter can be built and
//! tested without a config file.

use crate::core::ports::llm::ContextBudget;
use crate::core::ports::tool::ToolSpec;
use crate::gateway::backoff::Backoff;
use crate::llm::profile::Profile;
use std::fmt;
use std::time::Duration;

/// One model at one OpenAI-compatible server.
#[derive(Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The configured model name (used in logs, errors and [`crate::core::ports::llm::ChatResponse::model`]).
    pub model_name: String,
    /// The model id sent to the API (`gpt-4o`, `qwen3:8b`, ...).
    pub model: String,
    /// Base URL up to and including the version, e.g. `https://api.openai.com/v1`.
    pub api_base: String,
    /// The API key (a bearer token, or Anthropic's `x-api-key`); `None` sends none. Never
    /// logged.
    pub api_key: Option<String>,
    /// What the requests look like for this model's provider (token-limit field, tool-call
    /// ids, what goes back to it); [`Profile::detect`] unless the configuration says.
    pub profile: Profile,
    /// The most tokens the reply may take (`max_tokens` in the request), if set.
    pub max_tokens: Option<u32>,
    /// The model's context window in tokens, if known.
    pub max_context_tokens: Option<u32>,
    /// The largest image file sent to a model that reads images; a larger one stays a path.
    pub max_image_bytes: u64,
}

/// The default [`Endpoint::max_image_bytes`]: 5 MB, the smallest per-image limit among the
/// major providers.
pub const DEFAULT_MAX_IMAGE_BYTES: u64 = 5_000_000;

impl Endpoint {
    /// An endpoint with no key and no token limits, its profile detected from the model id
    /// and the API's host.
    pub fn new(
        model_name: impl Into<String>,
        model: impl Into<String>,
        api_base: impl Into<String>,
    ) -> Self {
        let (model, api_base) = (model.into(), api_base.into());
        Self {
            model_name: model_name.into(),
            profile: Profile::detect(&api_base, &model),
            model,
            api_base,
            api_key: None,
            max_tokens: None,
            max_context_tokens: None,
            max_image_bytes: DEFAULT_MAX_IMAGE_BYTES,
        }
    }

    /// The chat-completions URL: `{api_base}/chat/completions`.
    pub fn completions_url(&self) -> String {
        format!("{}/chat/completions", self.api_base.trim_end_matches('/'))
    }

    /// [`Self::completions_url`] as errors show it, with any password in it masked, so the URL
    /// can be named to the person fixing `api_base`.
    pub fn shown_url(&self) -> String {
        masked_url(&self.completions_url())
    }

    /// The context budget the model's settings give, if its context window is known.
    pub fn context_budget(&self) -> Option<ContextBudget> {
        self.max_context_tokens
            .map(|max_context_tokens| ContextBudget {
                max_context_tokens,
                max_reply_tokens: self.max_tokens.unwrap_or(0),
            })
    }

    /// What `/status` shows of the model: its configured name and the id sent to the API.
    pub fn describe(&self) -> String {
        format!("{} ({})", self.model_name, self.model)
    }

    /// The Responses API's URL: `{api_base}/responses`.
    pub fn responses_url(&self) -> String {
        format!("{}/responses", self.api_base.trim_end_matches('/'))
    }

    /// The tools a request offers this model: none for a model configured without tools
    /// (its server would refuse them).
    pub fn offered<'t>(&self, tools: &'t [&'t ToolSpec]) -> &'t [&'t ToolSpec] {
        if self.profile.tools { tools } else { &[] }
    }

    /// Anthropic's Messages URL: `{api_base}/messages`.
    pub fn messages_url(&self) -> String {
        format!("{}/messages", self.api_base.trim_end_matches('/'))
    }
}

/// `full` with any password in it masked, for errors and logs.
pub(crate) fn masked_url(full: &str) -> String {
    match url::Url::parse(full) {
        Ok(mut parsed) => {
            if parsed.password().is_some() {
                let _ = parsed.set_password(Some("***"));
            }
            parsed.to_string()
        }
        Err(_) => full.to_owned(),
    }
}

/// The key is redacted so an endpoint can be logged or debug-printed safely.
impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("model_name", &self.model_name)
            .field("model", &self.model)
            .field("api_base", &self.api_base)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("profile", &self.profile)
            .field("max_tokens", &self.max_tokens)
            .field("max_context_tokens", &self.max_context_tokens)
            .field("max_image_bytes", &self.max_image_bytes)
            .finish()
    }
}

/// The explicit time limits of one call; each maps to `LlmError::Timeout { phase }`, except
/// `connect`, which means the server could not be reached (`LlmError::Unreachable`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Establishing the TCP (and TLS) connection (`LlmError::Unreachable` when it runs out).
    pub connect: Duration,
    /// From sending the request to receiving the response headers (`phase: "first byte"`).
    pub first_byte: Duration,
    /// The longest gap between two pieces of the response body (`phase: "idle"`).
    pub idle: Duration,
    /// The whole call, including a non-streamed retry (`phase: "total"`).
    pub total: Duration,
}

impl Default for Timeouts {
    /// Generous limits: local models may take a while to process a long prompt.
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(10),
            first_byte: Duration::from_secs(120),
            idle: Duration::from_secs(60),
            total: Duration::from_secs(600),
        }
    }
}

/// How a pool retries one model before falling back to the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries of the same model after a retryable error (0 = fall back at once).
    pub max_retries: u32,
    /// The first backoff; each further retry doubles it (with jitter).
    pub base_delay: Duration,
    /// The longest sleep between attempts, even when the server's `Retry-After` asks for more.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 2,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// The sleep before retry number `retry` (0-based): exponential backoff with jitter, at
    /// least `retry_after` when the server sent one, and never more than `max_delay`.
    pub fn delay(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        // Capped after the jitter, so retries that reached the cap wait exactly `max_delay`.
        let backoff = Backoff::new(self.base_delay, Duration::MAX).delay(retry);
        // Jitter between 50% and 100% of the backoff spreads retries of concurrent callers.
        let backoff = backoff.mul_f64(0.5 + fastrand::f64() * 0.5);
        backoff
            .max(retry_after.unwrap_or_default())
            .min(self.max_delay)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_redacts_key() {
        let mut endpoint = Endpoint::new("gpt", "gpt-4o", "http://x/v1/");
        endpoint.api_key = Some("sk-secret".to_owned());
        let shown = format!("{endpoint:?}");
        assert!(!shown.contains("sk-secret"));
        assert!(shown.contains("<redacted>"));
        assert_eq!(endpoint.completions_url(), "http://x/v1/chat/completions");
    }

    #[test]
    fn the_shown_url_hides_passwords() {
        let check = |api_base: &str, shown: &str| {
            assert_eq!(Endpoint::new("m", "m", api_base).shown_url(), shown);
        };
        check("http://x:8080/v1", "http://x:8080/v1/chat/completions");
        check(
            "https://user:pw@x/v1",
            "https://user:***@x/v1/chat/completions",
        );
        check("not a url", "not a url/chat/completions");
    }

    #[test]
    fn delay_grows_honours_retry_after_and_is_capped() {
        let policy = RetryPolicy {
            max_retries: 5,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(2),
        };
        let first = policy.delay(0, None);
        assert!(first >= Duration::from_millis(50) && first <= Duration::from_millis(100));
        let third = policy.delay(2, None);
        assert!(third >= Duration::from_millis(200) && third <= Duration::from_millis(400));
        assert_eq!(
            policy.delay(0, Some(Duration::from_secs(1))),
            Duration::from_secs(1)
        );
        assert_eq!(
            policy.delay(0, Some(Duration::from_secs(60))),
            Duration::from_secs(2)
        );
        assert_eq!(policy.delay(40, None), Duration::from_secs(2));
    }
}
