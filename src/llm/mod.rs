//! The LLM adapter: OpenAI-compatible Chat Completions, OpenAI's Responses API and Anthropic's
//! Messages API over SSE, and pools with retry and fallback. All implement the core's
//! [`LlmClient`](crate::core::ports::llm::LlmClient) port, so a pool may mix them.
//!
//! - [`settings`]: the plain structs an adapter is built from ([`Endpoint`], [`Timeouts`],
//!   [`RetryPolicy`]); the config module fills them.
//! - [`images`]: images a person sent, read for models that read them.
//! - [`http`]: [`http_client`], the shared client, and the POST, status and SSE handling every
//!   API shares.
//! - [`openai_compat`]: [`OpenAiCompatLlm`], one model behind Chat Completions.
//! - [`responses`]: [`ResponsesLlm`], one model behind OpenAI's Responses API.
//! - [`anthropic`]: [`AnthropicLlm`], one model behind Anthropic's Messages API, with prompt
//!   caching.
//! - `wire`: request serialization and response shapes.
//! - `stream`: SSE (or plain JSON) into a `ChatResponse`.
//! - `assemble`: tool-call fragments into calls, keyed by id and name as well as index.
//! - `think`: `<think>` reasoning and leaked `<tool_call>` markup taken out of the text.
//! - [`learned`]: [`learned::Learned`], server quirks found out once and kept in the home.
//! - [`pool`]: [`LlmPool`], models tried in order with backoff.
//! - [`profile`]: [`Profile`], what one model's requests must look like for its provider.
//! - [`transcription`]: [`WhisperApiTranscriber`], voice notes through an OpenAI-compatible
//!   `/audio/transcriptions` (the core's transcription port).

pub mod anthropic;
mod assemble;
pub mod http;
pub mod images;
pub mod learned;
pub mod openai_compat;
pub mod pool;
pub mod profile;
pub mod responses;
pub mod settings;
mod stream;
mod think;
pub mod transcription;
mod wire;

pub use anthropic::AnthropicLlm;
pub use assemble::parse_arguments as parse_tool_arguments;
pub use http::http_client;
pub use openai_compat::OpenAiCompatLlm;
pub use pool::LlmPool;
pub use profile::Profile;
pub use responses::ResponsesLlm;
pub use settings::{Endpoint, RetryPolicy, Timeouts};
pub use transcription::{TranscriptionSettings, WhisperApiTranscriber};
pub use wire::arguments_string as tool_arguments_text;
