//! [`OpenAiCompatLlm`]: one model behind an OpenAI-compatible Chat Completions API.
//!
//! It streams with SSE, maps every way a call can fail to an [`LlmError`] the pool can act on
//! (status codes, `Retry-After`, transport errors, four explicit timeouts) and survives the
//! known server quirks: llama.cpp's empty 200 body when tools are streamed is retried once
//! without streaming, a 4xx naming `stream_options` is retried without them (both learned for
//! good, see [`Learned`]), and a server that ignores `stream: true` and answers with plain JSON
//! is read as such. The API key only ever goes into the `Authorization` header.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;

use crate::core::ports::llm::{ChatRequest, ChatResponse, LlmError, StreamObserver};
use crate::llm::http::{ApiUrl, ModelClient, encode_json, is_json, post_json, read_whole};
use crate::llm::images;
use crate::llm::learned::Learned;
use crate::llm::settings::{Endpoint, Timeouts};
use crate::llm::stream::{StreamOutcome, parse_completion, read_sse};
use crate::llm::wire::RequestBody;

/// The most bytes accepted for a non-streamed completion.
const COMPLETION_BODY_BYTES: usize = 32 * 1024 * 1024;

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
    /// The completions URL, parsed once.
    completions: ApiUrl,
    /// The size to reserve for the next request body: the last one's and an eighth. A turn's
    /// body is tens of kilobytes, which, grown by doubling from empty, was copied five times.
    body_hint: Arc<AtomicUsize>,
}

impl OpenAiCompatLlm {
    /// A client for `endpoint` using the shared HTTP `client` (see [`crate::llm::http_client`]).
    pub fn new(client: reqwest::Client, endpoint: Endpoint, timeouts: Timeouts) -> Self {
        let name = format!("model:{}", endpoint.model_name);
        let url = endpoint.completions_url();
        let server = format!("{url} {}", endpoint.model);
        let completions = ApiUrl::new(url);
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

    async fn ask(
        &self,
        request: ChatRequest<'_>,
        observer: StreamObserver<'_>,
    ) -> Result<ChatResponse, LlmError> {
        let images = images::load_for(&self.endpoint, request.messages).await;
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
        if is_json(&response) {
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
        let bytes = encode_json(body, self.body_hint.load(Ordering::Relaxed))?;
        self.body_hint
            .store(bytes.len() + bytes.len() / 8, Ordering::Relaxed);
        post_json(
            &self.client,
            &self.completions,
            &self.endpoint,
            &self.timeouts,
            bytes,
        )
        .await
    }

    async fn read_completion(
        &self,
        response: reqwest::Response,
        observer: StreamObserver<'_>,
    ) -> Result<ChatResponse, LlmError> {
        let bytes = read_whole(
            response,
            self.timeouts.idle,
            COMPLETION_BODY_BYTES,
            self.model_name(),
        )
        .await?;
        parse_completion(&bytes, self.model_name(), observer)
    }
}

#[async_trait]
impl ModelClient for OpenAiCompatLlm {
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
