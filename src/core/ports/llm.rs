//! **API Boundary.** The LLM port: one streamed chat completion with tools.
//!
//! An implementation may be a single model or a pool that falls back across models; the agent
//! loop cannot tell. Streaming is reported through [`StreamEvent`]s while the call runs; the
//! finished [`ChatResponse`] is the source of truth. When a pool falls back after text was
//! already streamed it emits [`StreamEvent::Restart`], so a consumer can discard what it showed
//! instead of showing the text twice.
//!
//! A call that fails after the provider reported its tokens (an in-stream error following a
//! usage chunk, a `response.failed` that carries usage) was still billed: the adapter tells
//! the caller with [`StreamEvent::Usage`] before it returns the error, so the accounting layer
//! records those tokens instead of nothing. An event rather than a field on [`LlmError`],
//! because a pool swallows the errors of the attempts it retries, while the events of every
//! attempt reach the layer above it.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::core::message::{Message, ReasoningState, ToolCall};
use crate::core::ports::tool::ToolSpec;
use crate::core::ports::usage::{CallTag, TokenUsage};

/// One request: the prompt and the tools the model may call.
#[derive(Debug, Clone, Copy)]
pub struct ChatRequest<'a> {
    /// System prompt, history and the new user message, in order; shared with the session's
    /// tail, so building a prompt copies no message.
    pub messages: &'a [Arc<Message>],
    /// Tool definitions offered to the model (may be empty); borrowed from the tools, so a
    /// turn never copies the schemas.
    pub tools: &'a [&'a ToolSpec],
    /// Why the call is made and for which session and turn: what the usage ledger records and
    /// the budgets check.
    pub call: CallTag<'a>,
}

/// What arrives while a call streams.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// A piece of reply text.
    TextDelta(String),
    /// Everything streamed so far by this call is void: a retry or fallback starts over.
    Restart {
        /// The model now being tried.
        model: String,
    },
    /// The tokens the provider reported for an attempt that then failed; sent by an adapter
    /// just before it returns the error (never for an answer, whose usage is in its
    /// [`ChatResponse`]), so the billed tokens reach the ledger.
    Usage(TokenUsage),
}

/// Receives stream events; must not block (it runs inside the streaming loop).
pub type StreamObserver<'a> = &'a (dyn Fn(StreamEvent) + Send + Sync);

/// The finished answer of one call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChatResponse {
    /// Reply text (may be empty when the model only calls tools).
    pub text: String,
    /// Tools the model wants run, in order.
    pub tool_calls: Vec<ToolCall>,
    /// Reasoning text, when the provider returned any.
    pub reasoning_content: Option<String>,
    /// Reasoning the provider wants back verbatim in the next round (see
    /// [`ReasoningState`]).
    pub reasoning_state: Option<ReasoningState>,
    /// The configured model name that answered.
    pub model: String,
    /// The tokens the provider reported for the call, if it reported any.
    pub usage: Option<TokenUsage>,
}

/// The context budget of the model(s) behind a client, in tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextBudget {
    /// The most tokens the prompt plus reply may take.
    pub max_context_tokens: u32,
    /// Tokens reserved for the reply.
    pub max_reply_tokens: u32,
}

impl ContextBudget {
    /// How many tokens the prompt may take.
    pub fn prompt_tokens(&self) -> u32 {
        self.max_context_tokens
            .saturating_sub(self.max_reply_tokens)
    }
}

/// Why a call failed, classified so the user gets a clear message and the pool knows whether a
/// retry can help.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlmError {
    /// 401/403: the key is wrong or lacks access. Retrying the same model cannot help.
    #[error("authentication failed at {model}: {detail}")]
    Auth {
        /// Configured model name.
        model: String,
        /// The server's words.
        detail: String,
    },
    /// 429: too many requests; `retry_after` comes from the server when it said.
    #[error("rate limited by {model}")]
    RateLimited {
        /// Configured model name.
        model: String,
        /// The server's `Retry-After`, if any.
        retry_after: Option<Duration>,
    },
    /// The server could not be reached (connection refused or timed out, DNS, TLS).
    #[error("could not reach {model} at {url}: {detail}")]
    Unreachable {
        /// Configured model name.
        model: String,
        /// The URL that was tried (without credentials), so the person can check `api_base`.
        url: String,
        /// The transport's words: the innermost cause (`Connection refused (os error 111)`).
        detail: String,
    },
    /// The server stopped answering within the configured time.
    #[error("{model} timed out ({phase})")]
    Timeout {
        /// Configured model name.
        model: String,
        /// Which limit ran out: connect, first byte, idle or total.
        phase: &'static str,
    },
    /// 404: nothing answers at the URL, almost always an `api_base` without its `/v1` (or a
    /// model id the server does not know). Retrying cannot help; the pool tries the next model.
    #[error("{model}: {url} answered HTTP 404 Not Found: {detail}")]
    NotFound {
        /// Configured model name.
        model: String,
        /// The URL that was tried (without credentials).
        url: String,
        /// Start of the body.
        detail: String,
    },
    /// A 5xx or other unexpected status.
    #[error("{model} answered HTTP {status}: {detail}")]
    Server {
        /// Configured model name.
        model: String,
        /// HTTP status code.
        status: u16,
        /// Start of the body.
        detail: String,
    },
    /// The answer broke the protocol: malformed SSE or JSON, a stream cut mid-way, nothing at all.
    #[error("{model} sent a malformed response: {detail}")]
    Protocol {
        /// Configured model name.
        model: String,
        /// What was wrong.
        detail: String,
    },
    /// The request could not be built or the configuration is unusable.
    #[error("{0}")]
    Config(String),
    /// A budget (`budgets.*`) is used up, so the call was not made.
    #[error("{} reached", .stop.kind.field())]
    Budget {
        /// Which budget, its figures and when it resets; worded by [`BudgetStop::message`].
        stop: BudgetStop,
        /// Whether someone should be told: always in a person's turn; once per budget and day
        /// for a heartbeat tick or a cron run, which are otherwise skipped quietly.
        notify: bool,
    },
}

impl LlmError {
    /// Whether retrying the same model may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::RateLimited { .. }
            | Self::Unreachable { .. }
            | Self::Timeout { .. }
            | Self::Protocol { .. } => true,
            Self::Server { status, .. } => *status >= 500 || *status == 408,
            Self::Auth { .. } | Self::NotFound { .. } | Self::Config(_) | Self::Budget { .. } => {
                false
            }
        }
    }

    /// A short message for the person waiting for a reply; never includes secrets.
    pub fn user_message(&self) -> String {
        match self {
            Self::Auth { .. } => "Error: the LLM rejected the API key. Check `llm.providers` in the config (or run `squidbot onboard`).".to_owned(),
            Self::RateLimited { .. } => "Error: the LLM's rate limit was reached. Try again in a moment.".to_owned(),
            Self::Unreachable { url, detail, .. } => format!("Error: could not reach the LLM at {url} ({detail}). Check the network and the provider's api_base."),
            Self::NotFound { url, detail, .. } => {
                let said = if detail.is_empty() { String::new() } else { format!(" The server said: {detail}") };
                format!("Error: the LLM endpoint was not found: {url} answered HTTP 404. Check `api_base` in llm.providers (it usually ends in /v1) and the model id.{said}")
            }
            Self::Timeout { phase, .. } => format!("Error: the LLM did not answer in time ({phase} timeout). Check the network and the provider's api_base, or raise llm.timeouts."),
            Self::Server { status, detail, .. } => {
                let said = if detail.is_empty() { String::new() } else { format!(": {detail}") };
                if self.is_retryable() {
                    format!("Error: the LLM failed (HTTP {status}){said}. Try again later.")
                } else {
                    format!("Error: the LLM refused the request (HTTP {status}){said}. Retrying will not help: check the model's settings (`squidbot doctor`).")
                }
            }
            Self::Protocol { detail, .. } => format!("Error: the LLM's answer could not be used: {detail}. Try again."),
            Self::Config(detail) => format!("Error: LLM configuration problem: {detail}"),
            Self::Budget { stop, .. } => stop.message(),
        }
    }

    /// Whether the person or owner should read [`LlmError::user_message`]: false only for a
    /// budget stop already reported today.
    pub fn should_tell(&self) -> bool {
        !matches!(self, Self::Budget { notify: false, .. })
    }
}

/// A chat-completion client: one model or a pool of them.
#[async_trait]
pub trait LlmClient: Send + Sync {
    /// Runs one completion, reporting text as it streams.
    async fn chat(
        &self,
        request: ChatRequest<'_>,
        observer: StreamObserver<'_>,
    ) -> Result<ChatResponse, LlmError>;

    /// Whether a call tagged `call` may be made now; a client that enforces budgets answers
    /// [`LlmError::Budget`] when one is used up. The default admits everything.
    async fn admit(&self, call: CallTag<'_>) -> Result<(), LlmError> {
        let _ = call;
        Ok(())
    }

    /// The tightest context budget among the models behind this client, if any is configured.
    fn context_budget(&self) -> Option<ContextBudget>;

    /// A short name for logs and status (`pool:default`, `model:gpt`).
    fn name(&self) -> &str;

    /// The configured name of the model a call starts with (a pool's first member): whom a
    /// call cut short before any answer is charged to.
    fn first_model(&self) -> Option<&str> {
        None
    }

    /// What a person asking `/status` should read: the models behind this client, in the
    /// order they are tried (`default: small (gpt-4o-mini) → big (gpt-4o)`).
    fn describe(&self) -> String {
        self.name().to_owned()
    }
}

/// Which budget stopped a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BudgetKind {
    /// `budgets.daily_tokens`.
    DailyTokens,
    /// `budgets.daily_cost`.
    DailyCost,
    /// `budgets.turn_tokens`.
    TurnTokens,
    /// `budgets.heartbeat_tokens`.
    HeartbeatTokens,
    /// `budgets.cron_tokens`.
    CronTokens,
}

impl BudgetKind {
    /// The config field, which is also how messages and `/status` name it.
    pub fn field(self) -> &'static str {
        match self {
            Self::DailyTokens => "budgets.daily_tokens",
            Self::DailyCost => "budgets.daily_cost",
            Self::TurnTokens => "budgets.turn_tokens",
            Self::HeartbeatTokens => "budgets.heartbeat_tokens",
            Self::CronTokens => "budgets.cron_tokens",
        }
    }

    /// Whether it counts a whole day (rather than one turn, tick or run).
    pub fn is_daily(self) -> bool {
        matches!(self, Self::DailyTokens | Self::DailyCost)
    }
}

/// A budget's limit and what was spent against it, in its own unit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BudgetFigures {
    /// A token budget.
    Tokens {
        /// The limit.
        limit: u64,
        /// The tokens spent.
        used: u64,
    },
    /// A cost budget, in the prices' currency.
    Cost {
        /// The limit.
        limit: f64,
        /// The cost so far.
        used: f64,
    },
}

/// A budget that is used up, as figures: the words are made where it is shown
/// ([`BudgetStop::message`]), not where it was found.
#[derive(Clone, Debug, PartialEq)]
pub struct BudgetStop {
    /// The budget.
    pub kind: BudgetKind,
    /// Its limit and the spend.
    pub figures: BudgetFigures,
    /// For a daily budget: the owner's zone (as configured) and the minutes until its
    /// midnight, when the budget resets.
    pub resets: Option<(String, i64)>,
}

impl BudgetStop {
    /// What the person (or the owner, for a tick or run) reads: which budget, the spend, and
    /// when it resets.
    pub fn message(&self) -> String {
        let what = match self.kind {
            BudgetKind::DailyTokens => "daily token budget",
            BudgetKind::DailyCost => "daily cost budget",
            BudgetKind::TurnTokens => "token budget of one turn",
            BudgetKind::HeartbeatTokens => "token budget of one heartbeat tick",
            BudgetKind::CronTokens => "token budget of one cron run",
        };
        let (used, limit) = match self.figures {
            BudgetFigures::Tokens { limit, used } => {
                (format!("{used} tokens"), format!("{limit} tokens"))
            }
            BudgetFigures::Cost { limit, used } => (format!("{used:.4}"), format!("{limit:.2}")),
        };
        let resets = match (&self.resets, self.kind) {
            (Some((zone, minutes)), _) => format!(
                "it resets at midnight ({zone}), in {} h {} min",
                minutes / 60,
                minutes % 60
            ),
            (None, BudgetKind::DailyTokens | BudgetKind::DailyCost) => {
                "it resets at midnight".to_owned()
            }
            (None, BudgetKind::TurnTokens) => "the next message starts a new turn".to_owned(),
            (None, BudgetKind::HeartbeatTokens) => "the next tick starts afresh".to_owned(),
            (None, BudgetKind::CronTokens) => "the job's next run starts afresh".to_owned(),
        };
        format!(
            "Stopped: the {what} is used up ({used} of {limit}, {}); {resets}.",
            self.kind.field()
        )
    }
}
