//! [`AnthropicLlm`]: one model behind Anthropic's own Messages API
//! (`POST {api_base}/messages`), with prompt caching.
//!
//! Chat Completions reaches Claude only through relays that drop what Anthropic's API adds:
//! prompt caching (a cached prompt costs a tenth and answers sooner) and the thinking blocks a
//! tool turn must send back signed. This adapter speaks the Messages API directly
//! (`llm.providers.<name>.api: anthropic`). It shares with the other APIs everything that is
//! not the wire format ([`crate::llm::http`]: the pooled client, the timeouts, how a status or
//! a broken connection is classified), so a pool may mix them and falls back across them
//! alike.
//!
//! - `request`: the history as the API wants it, with the caching breakpoints.
//! - `stream`: the streamed events into a `ChatResponse`.
//!
//! The key goes only into the `x-api-key` header, never into a URL, a log or an error.

mod request;
mod stream;

use async_trait::async_trait;
use reqwest::header::HeaderValue;

use crate::core::ports::llm::{ChatRequest, ChatResponse, LlmError, StreamObserver};
use crate::llm::http::{ApiUrl, ModelClient, encode_json, json_post, send};
use crate::llm::images;
use crate::llm::settings::{Endpoint, Timeouts};
use request::MessagesBody;

/// The API version every request names (`anthropic-version`); the event format read here is
/// this version's.
const API_VERSION: &str = "2023-06-01";

/// One model at an endpoint that speaks Anthropic's Messages API.
#[derive(Debug, Clone)]
pub struct AnthropicLlm {
    client: reqwest::Client,
    endpoint: Endpoint,
    timeouts: Timeouts,
    name: String,
    /// `{api_base}/messages`, parsed once.
    url: ApiUrl,
}

impl AnthropicLlm {
    /// A client for `endpoint` using the shared HTTP `client` (see [`crate::llm::http_client`]).
    pub fn new(client: reqwest::Client, endpoint: Endpoint, timeouts: Timeouts) -> Self {
        Self {
            client,
            name: format!("model:{}", endpoint.model_name),
            url: ApiUrl::new(endpoint.messages_url()),
            endpoint,
            timeouts,
        }
    }

    fn model_name(&self) -> &str {
        &self.endpoint.model_name
    }

    async fn ask(
        &self,
        request: ChatRequest<'_>,
        observer: StreamObserver<'_>,
    ) -> Result<ChatResponse, LlmError> {
        let images = images::load_for(&self.endpoint, request.messages).await;
        let tools = self.endpoint.offered(request.tools);
        let body = MessagesBody::new(
            &self.endpoint.model,
            request.messages,
            tools,
            self.endpoint.max_tokens,
            &images,
        );
        let bytes = encode_json(&body, 0)?;
        let mut builder = json_post(&self.client, &self.url, bytes)
            .header("anthropic-version", HeaderValue::from_static(API_VERSION));
        if let Some(key) = &self.endpoint.api_key {
            let mut value = HeaderValue::from_str(key)
                .map_err(|_| LlmError::Config("the API key is not a valid header value".into()))?;
            value.set_sensitive(true);
            builder = builder.header("x-api-key", value);
        }
        let response = send(builder, &self.url, self.model_name(), &self.timeouts).await?;
        let model = self.model_name();
        match stream::read_stream(response, self.timeouts.idle, model, observer).await {
            Ok(response) => Ok(response),
            Err((error, usage)) => {
                if let Some(usage) = usage {
                    // The provider bills it; the ledger does not see it yet (#36 item 4).
                    tracing::info!(
                        model,
                        prompt_tokens = usage.prompt,
                        cached_tokens = usage.cached,
                        cache_written_tokens = usage.cache_written,
                        completion_tokens = usage.completion,
                        "The stream failed after its usage was reported."
                    );
                }
                Err(error)
            }
        }
    }
}

#[async_trait]
impl ModelClient for AnthropicLlm {
    fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    fn timeouts(&self) -> &Timeouts {
        &self.timeouts
    }

    fn label(&self) -> &str {
        &self.name
    }

    async fn call(
        &self,
        request: ChatRequest<'_>,
        observer: StreamObserver<'_>,
    ) -> Result<ChatResponse, LlmError> {
        self.ask(request, observer).await
    }
}
