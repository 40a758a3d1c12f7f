//! [`AccountedLlm`]: the outermost layer of every pool's client, where each call is
//! accounted for in one place: admitted by the budgets first, recorded in the ledger after
//! (a call cut short included), and shown to the [`CallObserver`] (the gateway's metrics):
//! every attempt of every model, every failed one, and every record.
//!
//! The layers below it are the pool (retry and fallback, [`crate::llm::pool`]) and each
//! model's client (its provider's quirks, [`crate::llm::openai_compat`]). The attempts are read
//! off the stream the pool emits: it announces each attempt after the first with
//! [`StreamEvent::Restart`], so this layer counts them without wrapping each model.
//!
//! A call cut short (Ctrl-C, `/stop`, shutdown: its future dropped) is billed by the provider
//! for what it streamed until then; without recording it the ledger and the budgets undercount
//! what the provider bills. [`CutShort`] records it when dropped still armed, estimated from
//! the prompt and the text streamed so far, charged to the pool's first model (or the one a
//! fallback restarted with).
//!
//! An attempt that failed after its provider reported usage ([`StreamEvent::Usage`]) was
//! billed too: its tokens are recorded under the model that failed, whether the pool then
//! retried, fell back or gave up.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use crate::accounting::ledger::UsageRecord;
use crate::accounting::meter::{UsageMeter, estimate};
use crate::core::ports::llm::{
    ChatRequest, ChatResponse, ContextBudget, LlmClient, LlmError, StreamEvent, StreamObserver,
};
use crate::core::ports::usage::{CallTag, TokenUsage};

/// What wants to see the calls as they happen (the gateway's metrics).
pub trait CallObserver: Send + Sync {
    /// `model` (a configured model name) is being asked.
    fn attempt(&self, model: &str);
    /// The attempt of `model` failed (the pool may go on with a retry or the next model).
    fn failed(&self, model: &str);
    /// A call was recorded in the ledger.
    fn recorded(&self, record: &UsageRecord);
}

/// Records a call that was cut short (its future dropped: Ctrl-C, `/stop`, shutdown) when it
/// is dropped still armed: the provider bills what it streamed until then, so the ledger and
/// the budgets count it, estimated from the prompt and the text streamed so far.
struct CutShort<'a> {
    layer: &'a AccountedLlm,
    request: ChatRequest<'a>,
    streamed: &'a AtomicUsize,
    /// The model being asked (std mutex: set by the stream observer on a restart).
    current: &'a Mutex<String>,
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
        let model = self
            .current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let layer = self.layer;
        let record = layer
            .meter
            .usage_record(&layer.pool, self.request.call, &model, usage, true);
        tracing::info!(
            pool = %layer.pool,
            prompt = usage.prompt,
            completion = usage.completion,
            "LLM call cut short; its estimated usage is recorded."
        );
        let observer = layer.observer.clone();
        layer.meter.append_later(&runtime, record, move |record| {
            if let Some(observer) = observer {
                observer.recorded(record);
            }
        });
    }
}

/// An [`LlmClient`] (a pool, or one model for `doctor`) whose every call is admitted by the
/// meter first and recorded after, a call cut short included; built once per pool, so the
/// record names the pool.
pub struct AccountedLlm {
    inner: Arc<dyn LlmClient>,
    meter: Arc<UsageMeter>,
    /// The configured name the ledger records the calls under.
    pool: String,
    observer: Option<Arc<dyn CallObserver>>,
}

impl AccountedLlm {
    /// `inner` metered by `meter`, its calls recorded under `pool` (a configured name).
    pub fn new(inner: Arc<dyn LlmClient>, meter: Arc<UsageMeter>, pool: &str) -> Self {
        Self {
            inner,
            meter,
            pool: pool.to_owned(),
            observer: None,
        }
    }

    /// Shows every attempt, failure and record to `observer` as well.
    pub fn with_observer(mut self, observer: Arc<dyn CallObserver>) -> Self {
        self.observer = Some(observer);
        self
    }
}

#[async_trait]
impl LlmClient for AccountedLlm {
    async fn chat(
        &self,
        request: ChatRequest<'_>,
        observer: StreamObserver<'_>,
    ) -> Result<ChatResponse, LlmError> {
        self.meter.admit(request.call).await?;
        let first = self.inner.first_model().unwrap_or_default().to_owned();
        if let Some(calls) = &self.observer {
            calls.attempt(&first);
        }
        let streamed = AtomicUsize::new(0);
        let current = Mutex::new(first);
        // Failed attempts the provider reported tokens for, by model (std mutex: pushed by the
        // stream observer, drained after the call).
        let billed: Mutex<Vec<(String, TokenUsage)>> = Mutex::default();
        let counting = |event: StreamEvent| {
            match &event {
                StreamEvent::TextDelta(text) => {
                    streamed.fetch_add(text.len(), Ordering::Relaxed);
                }
                StreamEvent::Restart { model } => {
                    let mut current = current.lock().unwrap_or_else(|p| p.into_inner());
                    if let Some(calls) = &self.observer {
                        calls.failed(&current);
                        calls.attempt(model);
                    }
                    *current = model.clone();
                }
                StreamEvent::Usage(usage) => {
                    let model = current.lock().unwrap_or_else(|p| p.into_inner()).clone();
                    billed
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push((model, *usage));
                    // Only this layer needs it.
                    return;
                }
            }
            observer(event);
        };
        let mut cut = CutShort {
            layer: self,
            request,
            streamed: &streamed,
            current: &current,
            armed: true,
        };
        let result = self.inner.chat(request, &counting).await;
        cut.armed = false;
        let billed = std::mem::take(&mut *billed.lock().unwrap_or_else(|p| p.into_inner()));
        for (model, usage) in billed {
            let record = self
                .meter
                .usage_record(&self.pool, request.call, &model, usage, false);
            self.meter.append(&record).await;
            if let Some(calls) = &self.observer {
                calls.recorded(&record);
            }
        }
        let response = match result {
            Ok(response) => response,
            Err(error) => {
                if let Some(calls) = &self.observer {
                    calls.failed(&current.lock().unwrap_or_else(|p| p.into_inner()));
                }
                return Err(error);
            }
        };
        let record = self.meter.record(&self.pool, &request, &response).await;
        if let Some(calls) = &self.observer {
            calls.recorded(&record);
        }
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

    fn first_model(&self) -> Option<&str> {
        self.inner.first_model()
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::accounting::budget::Budgets;
    use crate::accounting::ledger::{LedgerError, UsageLedger, UsageRecord};
    use crate::accounting::meter::MeterSettings;
    use crate::accounting::price::Price;
    use crate::core::message::{Message, Role};
    use crate::core::ports::clock::SystemClock;
    use crate::core::ports::usage::{Purpose, TurnSpend};
    use crate::zone::Zone;

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
                    cache_write: 1.25,
                },
            )]),
            zone: Zone::parse("Europe/Berlin").unwrap(),
        };
        let meter = Arc::new(UsageMeter::new(
            ledger.clone(),
            settings,
            Arc::new(SystemClock),
        ));
        let llm = AccountedLlm::new(Arc::new(Stalling), meter.clone(), "default");
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

    /// A pool whose first model fails after reporting its usage and whose second answers.
    struct FallsBack;

    #[async_trait]
    impl LlmClient for FallsBack {
        async fn chat(
            &self,
            _request: ChatRequest<'_>,
            observer: StreamObserver<'_>,
        ) -> Result<ChatResponse, LlmError> {
            observer(StreamEvent::Usage(TokenUsage {
                prompt: 43,
                completion: 10,
                cached: 0,
                cache_written: 0,
            }));
            observer(StreamEvent::Restart { model: "b".into() });
            observer(StreamEvent::TextDelta("hi".into()));
            Ok(ChatResponse {
                text: "hi".into(),
                model: "b".into(),
                ..ChatResponse::default()
            })
        }

        fn context_budget(&self) -> Option<ContextBudget> {
            None
        }

        fn name(&self) -> &str {
            "pool:default"
        }

        fn first_model(&self) -> Option<&str> {
            Some("a")
        }
    }

    /// Every observed event, as text.
    #[derive(Default)]
    struct Seen(std::sync::Mutex<Vec<String>>);

    impl CallObserver for Seen {
        fn attempt(&self, model: &str) {
            self.0.lock().unwrap().push(format!("attempt {model}"));
        }
        fn failed(&self, model: &str) {
            self.0.lock().unwrap().push(format!("failed {model}"));
        }
        fn recorded(&self, record: &UsageRecord) {
            let line = format!("recorded {} {}", record.pool, record.model);
            self.0.lock().unwrap().push(line);
        }
    }

    #[tokio::test]
    async fn each_attempt_failure_and_record_is_observed_once() {
        let ledger = Arc::new(Records::default());
        let settings = MeterSettings {
            budgets: Budgets::default(),
            prices: HashMap::new(),
            zone: Zone::Utc,
        };
        let meter = Arc::new(UsageMeter::new(
            ledger.clone(),
            settings,
            Arc::new(SystemClock),
        ));
        let seen = Arc::new(Seen::default());
        let llm =
            AccountedLlm::new(Arc::new(FallsBack), meter, "default").with_observer(seen.clone());
        let now = chrono::Utc::now().fixed_offset();
        let messages = [Arc::new(Message::new(Role::User, "hello", now))];
        let request = ChatRequest {
            messages: &messages,
            tools: &[],
            call: CallTag::new(Purpose::Turn),
        };
        let passed = Mutex::new(Vec::new());
        llm.chat(request, &|event| passed.lock().unwrap().push(event))
            .await
            .unwrap();
        assert_eq!(
            *seen.0.lock().unwrap(),
            [
                "attempt a",
                "failed a",
                "attempt b",
                "recorded default a",
                "recorded default b"
            ]
        );
        // The usage event is the accounting layer's own; the caller sees the rest.
        assert_eq!(passed.lock().unwrap().len(), 2);
        let records = ledger.0.lock().unwrap().clone();
        assert_eq!(records.len(), 2);
        // The failed attempt was billed: its reported tokens are recorded, not estimated.
        let failed = &records[0];
        assert_eq!(
            (
                failed.model.as_str(),
                failed.prompt_tokens,
                failed.completion_tokens
            ),
            ("a", 43, 10)
        );
        assert!(!failed.estimated);
        assert_eq!(
            (records[1].pool.as_str(), records[1].model.as_str()),
            ("default", "b")
        );
    }
}
