//! [`LlmPool`]: an ordered list of models tried in turn, with retries and backoff.
//!
//! Each model is retried on errors that may pass (rate limits, 5xx, timeouts, broken streams)
//! with exponential backoff and jitter that honours `Retry-After` up to a cap; an error that
//! cannot pass (a bad key, another 4xx) moves on to the next model at once. Before every attempt
//! after the first the pool emits [`StreamEvent::Restart`], and only the successful attempt's
//! text ends up in the [`ChatResponse`], so a fallback after text was shown never duplicates it.

use std::sync::Arc;

use async_trait::async_trait;

use crate::core::ports::llm::{
    ChatRequest, ChatResponse, ContextBudget, LlmClient, LlmError, StreamEvent, StreamObserver,
};
use crate::llm::settings::RetryPolicy;

/// Models tried in order, each with retries; itself an [`LlmClient`].
pub struct LlmPool {
    /// `pool:{pool}`, for logs.
    name: String,
    /// The configured name.
    pool: String,
    members: Vec<Arc<dyn LlmClient>>,
    retry: RetryPolicy,
}

impl LlmPool {
    /// A pool named `pool:{name}` over `members`, tried in order.
    pub fn new(name: &str, members: Vec<Arc<dyn LlmClient>>, retry: RetryPolicy) -> Self {
        Self {
            name: format!("pool:{name}"),
            pool: name.to_owned(),
            members,
            retry,
        }
    }

    /// The models, in the order they are tried.
    pub fn members(&self) -> &[Arc<dyn LlmClient>] {
        &self.members
    }

    /// The retry policy applied to each model.
    pub fn retry_policy(&self) -> &RetryPolicy {
        &self.retry
    }
}

impl std::fmt::Debug for LlmPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmPool")
            .field("name", &self.name)
            .field(
                "members",
                &self.members.iter().map(|m| m.name()).collect::<Vec<_>>(),
            )
            .field("retry", &self.retry)
            .finish()
    }
}

/// The model a member starts with (its configured name), as [`StreamEvent::Restart`] and the
/// accounting layer name it.
fn display_name(member: &dyn LlmClient) -> String {
    member.first_model().unwrap_or_default().to_owned()
}

#[async_trait]
impl LlmClient for LlmPool {
    async fn chat(
        &self,
        request: ChatRequest<'_>,
        observer: StreamObserver<'_>,
    ) -> Result<ChatResponse, LlmError> {
        let mut last_error = LlmError::Config(format!("{} has no models", self.name));
        let mut first_attempt = true;
        for member in &self.members {
            let mut retry = 0u32;
            loop {
                if !first_attempt {
                    observer(StreamEvent::Restart {
                        model: display_name(member.as_ref()),
                    });
                }
                first_attempt = false;
                let error = match member.chat(request, observer).await {
                    Ok(response) => return Ok(response),
                    Err(error) => error,
                };
                let retryable = error.is_retryable() && retry < self.retry.max_retries;
                if matches!(error, LlmError::Auth { .. }) {
                    tracing::warn!(pool = %self.name, model = member.name(), error = %error, "LLM rejected the credentials; trying the next model.");
                } else {
                    tracing::info!(pool = %self.name, model = member.name(), attempt = retry + 1, will_retry = retryable, error = %error, "LLM call failed.");
                }
                if !retryable {
                    last_error = error;
                    break;
                }
                let retry_after = match &error {
                    LlmError::RateLimited { retry_after, .. } => *retry_after,
                    _ => None,
                };
                tokio::time::sleep(self.retry.delay(retry, retry_after)).await;
                retry += 1;
            }
        }
        Err(last_error)
    }

    fn context_budget(&self) -> Option<ContextBudget> {
        self.members
            .iter()
            .filter_map(|member| member.context_budget())
            .min_by_key(ContextBudget::prompt_tokens)
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn first_model(&self) -> Option<&str> {
        self.members.first().and_then(|member| member.first_model())
    }

    fn describe(&self) -> String {
        let members: Vec<String> = self.members.iter().map(|m| m.describe()).collect();
        format!("{}: {}", self.pool, members.join(" → "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::ports::usage::{CallTag, Purpose};
    use std::sync::Mutex;
    use std::time::Duration;

    /// A member that answers from a script of results.
    struct Fake {
        name: String,
        model: String,
        script: Mutex<Vec<Result<&'static str, LlmError>>>,
        budget: Option<ContextBudget>,
    }

    impl Fake {
        fn new(name: &str, script: Vec<Result<&'static str, LlmError>>) -> Arc<Self> {
            Arc::new(Self {
                name: format!("model:{name}"),
                model: name.to_owned(),
                script: Mutex::new(script.into_iter().rev().collect()),
                budget: None,
            })
        }
    }

    #[async_trait]
    impl LlmClient for Fake {
        async fn chat(
            &self,
            _request: ChatRequest<'_>,
            observer: StreamObserver<'_>,
        ) -> Result<ChatResponse, LlmError> {
            let next = self.script.lock().unwrap().pop().unwrap_or(Ok("default"));
            let text = next?;
            observer(StreamEvent::TextDelta(text.to_owned()));
            Ok(ChatResponse {
                text: text.to_owned(),
                model: self.name.clone(),
                ..ChatResponse::default()
            })
        }

        fn context_budget(&self) -> Option<ContextBudget> {
            self.budget
        }

        fn name(&self) -> &str {
            &self.name
        }

        fn first_model(&self) -> Option<&str> {
            Some(&self.model)
        }
    }

    fn fast() -> RetryPolicy {
        RetryPolicy {
            max_retries: 1,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(5),
        }
    }

    fn server(status: u16) -> LlmError {
        LlmError::Server {
            model: "x".into(),
            status,
            detail: String::new(),
        }
    }

    #[tokio::test]
    async fn retries_then_falls_back_with_restarts() {
        let a = Fake::new("a", vec![Err(server(500)), Err(server(502))]);
        let b = Fake::new("b", vec![Err(server(400)), Ok("hi")]);
        let pool = LlmPool::new("p", vec![a, b.clone(), b], fast());
        let events = Mutex::new(Vec::new());
        let request = ChatRequest {
            messages: &[],
            tools: &[],
            call: CallTag::new(Purpose::Turn),
        };
        let response = pool
            .chat(request, &|event| events.lock().unwrap().push(event))
            .await
            .unwrap();
        assert_eq!(response.text, "hi");
        let restart = |m: &str| StreamEvent::Restart { model: m.into() };
        assert_eq!(
            *events.lock().unwrap(),
            vec![
                restart("a"),
                restart("b"),
                restart("b"),
                StreamEvent::TextDelta("hi".into())
            ]
        );
    }

    #[tokio::test]
    async fn empty_pool_is_a_config_error() {
        let pool = LlmPool::new("none", Vec::new(), fast());
        let request = ChatRequest {
            messages: &[],
            tools: &[],
            call: CallTag::new(Purpose::Turn),
        };
        let error = pool.chat(request, &|_| {}).await.unwrap_err();
        assert!(matches!(error, LlmError::Config(_)));
        assert_eq!(pool.name(), "pool:none");
    }
}
