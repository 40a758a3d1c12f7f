//! [`ResponsesLlm`]: one model behind OpenAI's Responses API (`POST {api_base}/responses`).
//!
//! OpenAI's reasoning models (GPT-5.4 on) refuse tools on Chat Completions while they reason
//! and point to this API. Its reasoning comes back as items that must travel with the history
//! between tool rounds; squidbot stores nothing at OpenAI (`store: false`), so it asks for them
//! encrypted and sends them back verbatim (see [`request`]). The HTTP exchange, the timeouts
//! and the classification of failures are the ones Chat Completions uses
//! ([`crate::llm::http`]), so a pool may mix the two APIs and treat their failures alike.
//!
//! - `request`: the request body, history as input items.
//! - `stream`: the SSE events (or a plain response object) into a `ChatResponse`.

mod request;
mod stream;

use async_trait::async_trait;

use crate::core::ports::llm::{ChatRequest, ChatResponse, LlmError, StreamObserver};
use crate::llm::http::{ApiUrl, ModelClient, encode_json, is_json, post_json, read_whole};
use crate::llm::images;
use crate::llm::settings::{Endpoint, Timeouts};
use request::RequestBody;

/// The most bytes accepted for a response sent without streaming.
const RESPONSE_BODY_BYTES: usize = 32 * 1024 * 1024;

/// One model at an endpoint that speaks the Responses API.
#[derive(Debug, Clone)]
pub struct ResponsesLlm {
    client: reqwest::Client,
    endpoint: Endpoint,
    timeouts: Timeouts,
    name: String,
    /// `{api_base}/responses`, parsed once.
    url: ApiUrl,
}

impl ResponsesLlm {
    /// A client for `endpoint` using the shared HTTP `client` (see [`crate::llm::http_client`]).
    pub fn new(client: reqwest::Client, endpoint: Endpoint, timeouts: Timeouts) -> Self {
        Self {
            client,
            name: format!("model:{}", endpoint.model_name),
            url: ApiUrl::new(endpoint.responses_url()),
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
        let body = RequestBody::new(
            &self.endpoint.model,
            request.messages,
            tools,
            self.endpoint.max_tokens,
            &images,
        );
        let bytes = encode_json(&body, 0)?;
        let response = post_json(
            &self.client,
            &self.url,
            &self.endpoint,
            &self.timeouts,
            bytes,
        )
        .await?;
        if is_json(&response) {
            let body = read_whole(
                response,
                self.timeouts.idle,
                RESPONSE_BODY_BYTES,
                self.model_name(),
            )
            .await?;
            return stream::parse_response(&body, self.model_name(), observer);
        }
        stream::read_sse(response, self.timeouts.idle, self.model_name(), observer).await
    }
}

#[async_trait]
impl ModelClient for ResponsesLlm {
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
