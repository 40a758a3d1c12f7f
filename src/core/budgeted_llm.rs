//! [`BudgetedLlm`]: the LLM client through which every call is admitted by the usage meter
//! first and recorded after, a call cut short included.
//!
//! A call cut short (Ctrl-C, `/stop`, shutdown: its future dropped) is billed by the provider
//! for what it streamed until then; without recording it the ledger and the budgets undercount
//! what the provider bills. [`CutShort`] records it when dropped still armed, estimated from
//! the prompt and the text streamed so far, charged to the pool's first model (or the one a
//! fallback restarted with).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use crate::core::ports::llm::{
    ChatRequest, ChatResponse, ContextBudget, LlmClient, LlmError, StreamEvent, StreamObserver,
};
use crate::core::ports::usage::CallTag;
use crate::core::usage::{UsageMeter, estimate};

/// Records a call that was cut short (its future dropped: Ctrl-C, `/stop`, shutdown) when it
/// is dropped still armed: the provider bills what it streamed until then, so the ledger and
/// the budgets count it, estimated from the prompt and the text streamed so far.
struct CutShort<'a> {
    meter: &'a Arc<UsageMeter>,
    pool: &'a str,
    model: &'a str,
    request: ChatRequest<'a>,
    streamed: &'a AtomicUsize,
    /// The model a fallback restarted with, if one did (std mutex: set by the observer).
    restarted: &'a Mutex<Option<String>>,
    armed: bool,
}

impl Drop for CutShort<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut usage = estimate(&self.request, &ChatResponse::default());
        usage.completion = self.streamed.load(Ordering::Relaxed).div_ceil(4) as u64;
        let restarted = self
            .restarted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let model = restarted.as_deref().unwrap_or(self.model);
        let record = self
            .meter
            .usage_record(self.pool, self.request.call, model, usage, true);
        tracing::info!(
            pool = self.pool,
            prompt = usage.prompt,
            completion = usage.completion,
            "LLM call cut short; its estimated usage is recorded."
        );
        let meter = Arc::clone(self.meter);
        runtime.spawn(async move { meter.append(record).await });
    }
}

/// An [`LlmClient`] (a pool) whose every call is admitted by the meter first and recorded
/// after, a call cut short included; built once per pool, so the record names the pool.
pub struct BudgetedLlm {
    inner: Arc<dyn LlmClient>,
    meter: Arc<UsageMeter>,
}

impl BudgetedLlm {
    /// `inner` metered by `meter`.
    pub fn new(inner: Arc<dyn LlmClient>, meter: Arc<UsageMeter>) -> Self {
        Self { inner, meter }
    }
}

#[async_trait]
impl LlmClient for BudgetedLlm {
    async fn chat(
        &self,
        request: ChatRequest<'_>,
        observer: StreamObserver<'_>,
    ) -> Result<ChatResponse, LlmError> {
        self.meter.admit(request.call).await?;
        let streamed = AtomicUsize::new(0);
        let restarted = Mutex::new(None);
        let counting = |event: StreamEvent| {
            match &event {
                StreamEvent::TextDelta(text) => {
                    streamed.fetch_add(text.len(), Ordering::Relaxed);
                }
                StreamEvent::Restart { model } => {
                    *restarted.lock().unwrap_or_else(|p| p.into_inner()) = Some(model.clone());
                }
            }
            observer(event);
        };
        let mut cut = CutShort {
            meter: &self.meter,
            pool: self.inner.name(),
            model: self.inner.first_model().unwrap_or_default(),
            request,
            streamed: &streamed,
            restarted: &restarted,
            armed: true,
        };
        let result = self.inner.chat(request, &counting).await;
        cut.armed = false;
        let response = result?;
        self.meter
            .record(self.inner.name(), &request, &response)
            .await;
        Ok(response)
    }

    async fn admit(&self, call: CallTag<'_>) -> Result<(), LlmError> {
        self.meter.admit(call).await
    }

    fn context_budget(&self) -> Option<ContextBudget> {
        self.inner.context_budget()
    }

    fn name(&self) -> &str {
        self.inner.name()
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::core::budget::Budgets;
    use crate::core::message::{Message, Role};
    use crate::core::ports::clock::SystemClock;
    use crate::core::ports::usage::{LedgerError, Purpose, TurnSpend, UsageLedger, UsageRecord};
    use crate::core::usage::{MeterSettings, Price};
    use crate::core::zone::Zone;

    /// A ledger in memory.
    #[derive(Default)]
    struct Records(std::sync::Mutex<Vec<UsageRecord>>);

    #[async_trait]
    impl UsageLedger for Records {
        async fn append(&self, record: &UsageRecord) -> Result<(), LedgerError> {
            self.0.lock().unwrap().push(record.clone());
            Ok(())
        }

        async fn first_notice(
            &self,
            _budget: &str,
            _day: chrono::NaiveDate,
        ) -> Result<bool, LedgerError> {
            Ok(true)
        }

        async fn poll(&self) -> Result<Vec<UsageRecord>, LedgerError> {
            Ok(Vec::new())
        }
    }

    /// A model that streams 400 bytes of text and then never finishes.
    struct Stalling;

    #[async_trait]
    impl LlmClient for Stalling {
        async fn chat(
            &self,
            _request: ChatRequest<'_>,
            observer: StreamObserver<'_>,
        ) -> Result<ChatResponse, LlmError> {
            observer(StreamEvent::TextDelta("x".repeat(400)));
            std::future::pending().await
        }

        fn context_budget(&self) -> Option<ContextBudget> {
            None
        }

        fn name(&self) -> &str {
            "pool:default"
        }

        fn first_model(&self) -> Option<&str> {
            Some("m")
        }
    }

    #[tokio::test]
    async fn a_call_cut_short_is_recorded_with_what_it_streamed() {
        let ledger = Arc::new(Records::default());
        let settings = MeterSettings {
            budgets: Budgets::default(),
            prices: HashMap::from([(
                "m".to_owned(),
                Price {
                    input: 1.0,
                    output: 2.0,
                    cached_input: 0.5,
                },
            )]),
            zone: Zone::parse("Europe/Berlin").unwrap(),
        };
        let meter = Arc::new(UsageMeter::new(
            ledger.clone(),
            settings,
            Arc::new(SystemClock),
            Vec::new(),
        ));
        let llm = BudgetedLlm::new(Arc::new(Stalling), meter.clone());
        let now = chrono::Utc::now().fixed_offset();
        let messages = [Arc::new(Message::new(Role::User, "y".repeat(4000), now))];
        let spend = TurnSpend::default();
        let request = ChatRequest {
            messages: &messages,
            tools: &[],
            call: CallTag {
                turn: Some(&spend),
                ..CallTag::new(Purpose::Turn)
            },
        };
        // The turn is cancelled while the model is still answering: the call is dropped.
        let cut = tokio::time::timeout(
            std::time::Duration::from_millis(50),
            llm.chat(request, &|_| {}),
        )
        .await;
        assert!(cut.is_err());
        for _ in 0..100 {
            if !ledger.0.lock().unwrap().is_empty() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        let records = ledger.0.lock().unwrap().clone();
        assert_eq!(records.len(), 1, "{records:?}");
        let record = &records[0];
        assert!(record.estimated && record.model == "m" && record.pool == "default");
        assert!(record.prompt_tokens >= 1000, "{record:?}");
        assert_eq!(record.completion_tokens, 100);
        assert!(record.cost > 0.0, "priced as the pool's first model");
        assert_eq!(spend.tokens(), record.prompt_tokens + 100);
    }
}
