//! The `llm` section: providers (where to send requests), models (what to ask for), pools
//! (ordered fallback lists of models), timeouts and retries.
//!
//! The doc comments on the fields are the reference for these settings.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::Secret;

/// `llm`: which OpenAI-compatible endpoints and models the agent may use.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct LlmConfig {
    /// The pool the agent uses unless a purpose names its own. Default: `"default"`.
    pub default_pool: String,
    /// Named API endpoints. Default: none.
    pub providers: BTreeMap<String, ProviderConfig>,
    /// Named models, each served by one provider. Default: none.
    pub models: BTreeMap<String, ModelConfig>,
    /// Named pools: ordered lists of models; a failing model falls back to the next one.
    /// Each entry is a model name (`- fast`) or the original's form (`- {model: fast}`).
    /// Default: none.
    pub pools: BTreeMap<String, Vec<PoolEntry>>,
    /// Network timeouts of LLM requests.
    pub timeouts: LlmTimeouts,
    /// Retries of failed LLM requests (before falling back to the pool's next model).
    pub retry: LlmRetry,
}

impl Default for LlmConfig {
    fn default() -> Self {
        Self {
            default_pool: "default".to_owned(),
            providers: BTreeMap::new(),
            models: BTreeMap::new(),
            pools: BTreeMap::new(),
            timeouts: LlmTimeouts::default(),
            retry: LlmRetry::default(),
        }
    }
}

/// `llm.providers.<name>`: one endpoint, and the API its models are asked through
/// (OpenAI-compatible Chat Completions, OpenAI's Responses API or Anthropic's Messages API).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ProviderConfig {
    /// Base URL of the API, http or https, e.g. `https://openrouter.ai/api/v1`. Required.
    pub api_base: String,
    /// API key, or `${VAR}` to read it from environment variable `VAR`. Default: empty (no key,
    /// as for a local Ollama).
    pub api_key: Secret,
    /// Name of an environment variable holding the API key (instead of `api_key`). Default: empty.
    pub api_key_env: String,
    /// Whether the provider needs `reasoning_content` echoed back on tool-call turns. Default:
    /// `false`, though DeepSeek's thinking models and Moonshot's Kimi get it without it.
    pub supports_reasoning_content: bool,
    /// Which API the provider's models are asked through: `chat` (Chat Completions,
    /// `{api_base}/chat/completions`, what every OpenAI-compatible server speaks) or
    /// `responses` (OpenAI's Responses API, `{api_base}/responses`, which OpenAI's current
    /// reasoning models need to call tools while they reason) or `anthropic` (Anthropic's
    /// Messages API, `{api_base}/messages` with the key in `x-api-key`, e.g. `api_base:
    /// https://api.anthropic.com/v1`: prompt caching, and Claude's thinking kept across tool
    /// turns). Default: `chat`.
    pub api: ProviderApi,
}

/// `llm.providers.<name>.api`.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ProviderApi {
    /// Chat Completions.
    #[default]
    Chat,
    /// OpenAI's Responses API.
    Responses,
    /// Anthropic's Messages API.
    Anthropic,
}

/// `llm.models.<name>`: a model at a provider.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ModelConfig {
    /// Name of the provider (a key of `llm.providers`). Required.
    pub provider: String,
    /// The model id sent to the API, e.g. `anthropic/claude-opus-4-5`. Required.
    pub model: String,
    /// Maximum tokens of one reply. Default: `8192`.
    pub max_tokens: u32,
    /// The model's context window in tokens; consolidation starts early when a prompt would not
    /// fit. Default: `100000`.
    pub max_context_tokens: u32,
    /// What the model costs, for the usage ledger, `squidbot usage` and `budgets.daily_cost`.
    /// Default: none (its calls cost 0).
    pub price: Option<PriceConfig>,
    /// Which request field carries `max_tokens`: `max_tokens`, `max_completion_tokens` (what
    /// OpenAI's reasoning models o1/o3/o4/gpt-5 require) or `none`. Default: `auto`, which
    /// picks `max_completion_tokens` for those models and `max_tokens` for the rest.
    pub token_limit: TokenLimitSetting,
    /// Whether the model is offered tools; `false` for a model without tool support, which
    /// would refuse the request. Default: `true`.
    pub tools: bool,
    /// How tool-call ids must look: `any`, or `mistral` (9 letters and digits; ids from
    /// another provider are rewritten, consistently, when history goes to this model).
    /// Default: `auto`, which picks `mistral` for Mistral's API and model families.
    pub tool_call_ids: ToolCallIdsSetting,
    /// Whether the model reads images: images people send over Matrix or mail then reach it
    /// as images (else as the path they were saved at). Default: decided from the model id
    /// (gpt-4o, gpt-4.1, gpt-5, o1/o3/o4, Claude, Gemini, LLaVA, Pixtral, `-vl` models, …).
    pub vision: Option<bool>,
    /// The largest image file sent to the model, in bytes; a larger one reaches it as its
    /// path. Default: `5000000`.
    pub max_image_bytes: u64,
}

/// `llm.models.<name>.token_limit`.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum TokenLimitSetting {
    /// Decided from the model id.
    #[default]
    Auto,
    /// `max_tokens`.
    MaxTokens,
    /// `max_completion_tokens`.
    MaxCompletionTokens,
    /// No limit sent.
    None,
}

/// `llm.models.<name>.tool_call_ids`.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ToolCallIdsSetting {
    /// Decided from the API's host and the model id.
    #[default]
    Auto,
    /// Any id.
    Any,
    /// 9 ASCII letters and digits.
    Mistral,
}

/// `llm.models.<name>.price`: prices per million tokens, in one currency of your choice
/// (every cost squidbot shows is in it).
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct PriceConfig {
    /// Per million prompt (input) tokens. Default: `0`.
    pub input: f64,
    /// Per million completion (output) tokens. Default: `0`.
    pub output: f64,
    /// Per million prompt tokens the provider served from its cache. Default: the `input`
    /// price.
    pub cached_input: Option<f64>,
    /// Per million prompt tokens written to the provider's cache (Anthropic charges 1.25
    /// times the input price for its 5-minute cache). Default: the `input` price.
    pub cache_write: Option<f64>,
}

impl Default for ModelConfig {
    fn default() -> Self {
        Self {
            provider: String::new(),
            model: String::new(),
            max_tokens: 8192,
            max_context_tokens: 100_000,
            price: None,
            token_limit: TokenLimitSetting::Auto,
            tools: true,
            tool_call_ids: ToolCallIdsSetting::Auto,
            vision: None,
            max_image_bytes: 5_000_000,
        }
    }
}

/// One entry of a pool: the name of a model (a key of `llm.models`).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(from = "PoolEntryRepr")]
pub struct PoolEntry {
    /// Name of the model (a key of `llm.models`).
    pub model: String,
}

/// The two spellings of a pool entry: `fast` and `{model: fast}`.
#[derive(Deserialize)]
#[serde(untagged, expecting = "a model name, or a mapping {model: NAME}")]
enum PoolEntryRepr {
    Name(String),
    Table(PoolEntryTable),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PoolEntryTable {
    model: String,
}

impl From<PoolEntryRepr> for PoolEntry {
    fn from(repr: PoolEntryRepr) -> Self {
        match repr {
            PoolEntryRepr::Name(model) | PoolEntryRepr::Table(PoolEntryTable { model }) => {
                Self { model }
            }
        }
    }
}

/// `llm.timeouts`: every wait on an LLM has a limit, so a stuck server cannot stall a session.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct LlmTimeouts {
    /// Seconds to establish the connection. Default: `10`.
    pub connect_seconds: u64,
    /// Seconds from sending the request to the first byte of the answer. Default: `60`.
    pub first_byte_seconds: u64,
    /// Longest silence, in seconds, between two chunks of a streamed answer. Default: `60`.
    pub idle_seconds: u64,
    /// Seconds for the whole request, streaming included. Default: `600`.
    pub total_seconds: u64,
}

impl Default for LlmTimeouts {
    fn default() -> Self {
        Self {
            connect_seconds: 10,
            first_byte_seconds: 60,
            idle_seconds: 60,
            total_seconds: 600,
        }
    }
}

/// `llm.retry`: retries with exponential backoff (honouring `Retry-After`) on one model.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct LlmRetry {
    /// Retries after the first attempt; `0` falls back to the next model at once. Default: `2`.
    pub max_retries: u32,
    /// Delay before the first retry, in milliseconds; it doubles each time. Default: `500`.
    pub base_delay_ms: u64,
    /// Upper bound of one delay, in milliseconds. Default: `30000`.
    pub max_delay_ms: u64,
}

impl Default for LlmRetry {
    fn default() -> Self {
        Self {
            max_retries: 2,
            base_delay_ms: 500,
            max_delay_ms: 30_000,
        }
    }
}

/// `transcription`: voice notes (Matrix voice messages and audio, audio attached to mail)
/// turned into text through an OpenAI-compatible `POST {api_base}/audio/transcriptions`
/// (OpenAI, Groq, a local whisper server), so the words reach the model, the history and
/// `search_history`. Off while the section is absent: voice notes are then saved and offered by
/// path only.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TranscriptionConfig {
    /// The provider whose `api_base` and key are used (a key of `llm.providers`). Required.
    pub provider: String,
    /// The model id sent, e.g. `whisper-1` (OpenAI), `whisper-large-v3` (Groq). Required.
    pub model: String,
    /// The largest recording sent (bytes); a larger one is kept and the person told. Default:
    /// `25000000` (OpenAI's and Groq's limit).
    pub max_bytes: u64,
    /// The longest recording sent (seconds), where its length is known before sending (a
    /// Matrix voice message's duration, a WAV or Ogg header). Default: `600`.
    pub max_seconds: u64,
    /// How long one transcription may take, upload included (seconds). Default: `60`.
    pub timeout_seconds: u64,
    /// Cost per minute of audio, in the currency of `llm.models.<name>.price` (OpenAI's
    /// `whisper-1`: 0.006 USD). Default: `0`.
    pub price_per_minute: f64,
}

impl Default for TranscriptionConfig {
    fn default() -> Self {
        Self {
            provider: String::new(),
            model: String::new(),
            max_bytes: 25_000_000,
            max_seconds: 600,
            timeout_seconds: 60,
            price_per_minute: 0.0,
        }
    }
}
