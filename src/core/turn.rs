//! One turn as a value: what a channel asks for ([`TurnRequest`]), what the agent decides about
//! it once before it runs ([`Turn`]: the client, the context budget, the purpose, the
//! authority, the audience, the spend, the session's tail), and how it ends ([`TurnOutcome`],
//! [`TurnError`]).
//!
//! Everything a turn needs is settled in [`Turn`] when it starts, so no later step picks the
//! client again, admits the budget again or reads the history again: the agent loop reads the
//! tail once, appends to it as it writes, and hands the same value to every stage.

use std::sync::Arc;

use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::core::audience::{Audience, Readers};
use crate::core::authority::Authority;
use crate::core::loop_breaker;
use crate::core::memory_manager::Consolidation;
use crate::core::message::{Message, Role, ToolCall};
use crate::core::origin::Origin;
use crate::core::ports::channel::{FailureKind, Inbound, ReplySink};
use crate::core::ports::clock::Clock;
use crate::core::ports::llm::{
    ChatRequest, ChatResponse, ContextBudget, LlmClient, LlmError, StreamEvent,
};
use crate::core::ports::store::{HistoryStore, StoreError, StoredMessage, Tail};
use crate::core::ports::tool::{Tool, ToolSpec};
use crate::core::ports::usage::{CallTag, Purpose, TurnSpend};
use crate::core::redact::{Redactor, StreamRedactor};
use crate::core::session::SessionId;
use crate::core::tool_pipeline::CallResult;

/// The assistant record that stands for the reply of a cancelled turn: the next prompt then
/// shows the model that its last answer was cut off, instead of two user messages in a row.
pub const CANCELLED_NOTE: &str = "[The user cancelled this turn before the reply was complete.]";

/// One inbound message to run as a turn.
pub struct TurnRequest {
    /// The session it belongs to.
    pub session: SessionId,
    /// The message text.
    pub text: String,
    /// Who sent it.
    pub origin: Origin,
    /// Tools for this turn only (e.g. `memory_write` bound to the session).
    pub extra_tools: Vec<Arc<dyn Tool>>,
    /// A client to use instead of the default (e.g. the heartbeat pool).
    pub llm: Option<Arc<dyn LlmClient>>,
    /// Routing data of the channel (room, thread, mail headers), visible to tools.
    pub metadata: Map<String, Value>,
    /// Fired once the message is durably persisted: the channel may acknowledge it then.
    pub persisted: Option<oneshot::Sender<()>>,
    /// Cancelled by the channel to stop the turn while it waits on the LLM or on tools (the
    /// terminal's Ctrl-C); a token nobody cancels by default.
    pub cancel: CancellationToken,
    /// Who reads its replies, as the channel stated them ([`Inbound::readers`]): the turn's
    /// [`Audience`] is decided from them once it starts, the owner's only for
    /// [`Readers::Owner`]. Unknown by default, so a request nobody judged keeps the owner's
    /// private memory out.
    pub readers: Readers,
    /// The channel's id of the message, when it may be handed over again (see
    /// [`crate::core::resume`]).
    pub source_id: Option<String>,
    /// Images received with the message (saved paths).
    pub images: Vec<String>,
}

impl TurnRequest {
    /// A plain request with no extras.
    pub fn new(session: SessionId, text: impl Into<String>, origin: Origin) -> Self {
        Self {
            session,
            text: text.into(),
            origin,
            extra_tools: Vec::new(),
            llm: None,
            metadata: Map::new(),
            persisted: None,
            cancel: CancellationToken::new(),
            readers: Readers::Unknown,
            source_id: None,
            images: Vec::new(),
        }
    }

    /// The turn a channel's message asks for, with the tools its turn gets; the reply sink is
    /// handed back separately because [`crate::core::agent_loop::AgentLoop::run`] takes it
    /// apart from the request.
    pub fn from_inbound(
        inbound: Inbound,
        extra_tools: Vec<Arc<dyn Tool>>,
    ) -> (Self, Arc<dyn ReplySink>) {
        let Inbound {
            session,
            text,
            origin,
            metadata,
            reply,
            readers,
            persisted,
            llm,
            source_id,
            images,
            // Used by the router to put an edit in its message's place; done before a turn.
            message_id: _,
            corrects: _,
        } = inbound;
        let request = Self {
            session,
            text,
            origin,
            extra_tools,
            llm,
            metadata,
            persisted,
            cancel: CancellationToken::new(),
            readers,
            source_id,
            images,
        };
        (request, reply)
    }
}

/// What a successful turn produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnOutcome {
    /// The delivered reply.
    pub reply: String,
    /// How many tool rounds ran.
    pub tool_rounds: usize,
    /// The tools called, in order (for metrics).
    pub tools_called: Vec<String>,
    /// Messages in the session's history after the turn.
    pub history_len: u64,
    /// What consolidation did after the reply.
    pub consolidation: Consolidation,
}

/// Why a turn did not produce a reply. The user has been told (except for `Persist`).
///
/// Each variant prints its cause and does not also return it as a `source`, so a log line
/// that prints the chain does not say it twice.
#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    /// The inbound message could not be persisted; it must not be acknowledged.
    #[error("could not persist the inbound message: {0}")]
    Persist(StoreError),
    /// History could not be read or a later write failed.
    #[error("storage failed during the turn: {0}")]
    Store(StoreError),
    /// Every model failed; the user got a short explanation.
    #[error("the LLM call failed: {0}")]
    Llm(LlmError),
    /// The model kept calling tools past the round limit.
    #[error("stopped after {0} tool rounds without a final answer")]
    TooManyToolRounds(usize),
    /// The channel cancelled the turn; the history ends with
    /// [`CANCELLED_NOTE`].
    #[error("the turn was cancelled")]
    Cancelled,
    /// The model called this tool with the same arguments [`loop_breaker::STOP_AT`] times;
    /// the person was told.
    #[error("ended: {0} was called with the same arguments {stop} times", stop = loop_breaker::STOP_AT)]
    Repeating(String),
}

impl TurnError {
    /// The kind of failure it is, from which front ends and metrics derive their own words.
    pub fn kind(&self) -> FailureKind {
        match self {
            Self::Persist(_) | Self::Store(_) => FailureKind::Storage,
            Self::Llm(LlmError::Budget { .. }) => FailureKind::Budget,
            Self::Llm(LlmError::Timeout { .. }) => FailureKind::Timeout,
            Self::Llm(_) => FailureKind::Llm,
            Self::TooManyToolRounds(_) | Self::Repeating(_) => FailureKind::Runaway,
            Self::Cancelled => FailureKind::Cancelled,
        }
    }
}

/// A turn as the agent runs it: the request and every decision made about it once, when it
/// started, and where it writes (its history, its sink).
pub(crate) struct Turn {
    /// What the channel asked for.
    pub request: TurnRequest,
    /// Where its output goes.
    pub sink: Arc<dyn ReplySink>,
    /// The channel of its session, recorded on every message it writes.
    pub channel: String,
    /// The client every call of the turn uses: the request's, the session's chosen model's,
    /// or the default.
    pub llm: Arc<dyn LlmClient>,
    /// That client's context budget.
    pub budget: Option<ContextBudget>,
    /// Why its calls are made (a person's turn, a heartbeat tick, a cron run).
    pub purpose: Purpose,
    /// Whether the owner asked: what its tools may change.
    pub authority: Authority,
    /// Whether anyone but the owner reads it: whether the owner's private memory is part of it.
    pub audience: Audience,
    /// The session's unconsolidated history, read once when the turn started and kept
    /// current as the turn writes.
    pub tail: Tail,
    /// What its calls spent so far, checked against the turn's budget.
    pub spend: TurnSpend,
    /// Where its messages are appended.
    pub history: Arc<dyn HistoryStore>,
    /// What its records are stamped with.
    pub clock: Arc<dyn Clock>,
    /// Keeps known secrets out of what it delivers.
    pub redactor: Arc<Redactor>,
}

impl Turn {
    /// The session the turn belongs to.
    pub fn session(&self) -> &SessionId {
        &self.request.session
    }

    /// The tag every LLM call of the turn carries.
    pub fn tag(&self) -> CallTag<'_> {
        CallTag {
            purpose: self.purpose,
            session: Some(&self.request.session),
            turn: Some(&self.spend),
        }
    }

    /// One streamed LLM call over `prompt` with `tools` offered, relaying deltas to a
    /// streaming sink with the turn's known secrets held back, even when split across deltas.
    pub async fn call(
        &self,
        prompt: &[Arc<Message>],
        tools: &[&ToolSpec],
    ) -> Result<ChatResponse, LlmError> {
        let request = ChatRequest {
            messages: prompt,
            tools,
            call: self.tag(),
        };
        let (llm, sink) = (self.llm.as_ref(), self.sink.as_ref());
        if !sink.streaming() {
            return llm.chat(request, &|_| {}).await;
        }
        let (events, mut received) = mpsc::unbounded_channel();
        let observer = move |event: StreamEvent| {
            let _ = events.send(event);
        };
        let call = async move {
            let result = llm.chat(request, &observer).await;
            drop(observer);
            result
        };
        let relay = async {
            let mut shown = false;
            let mut redacting = StreamRedactor::new(&self.redactor);
            while let Some(event) = received.recv().await {
                match event {
                    StreamEvent::TextDelta(text) => {
                        let text = redacting.push(&text);
                        if !text.is_empty() {
                            shown = true;
                            sink.delta(&text).await;
                        }
                    }
                    // The accounting layer's business; nothing is shown.
                    StreamEvent::Usage(_) => {}
                    StreamEvent::Restart { .. } => {
                        redacting.reset();
                        if shown {
                            shown = false;
                            sink.reset().await;
                        }
                    }
                }
            }
            let rest = redacting.finish();
            if !rest.is_empty() {
                sink.delta(&rest).await;
            }
        };
        let (result, ()) = tokio::join!(call, relay);
        result
    }
}

impl Turn {
    /// Writes the person's message to the history and the turn's tail.
    pub(crate) async fn record_user(&mut self) -> Result<(), TurnError> {
        let request = &self.request;
        let mut user = Message::new(Role::User, request.text.clone(), self.clock.now());
        user.channel = Some(self.channel.clone());
        user.sender_id = Some(request.origin.sender_id().into_owned());
        user.source_id = request.source_id.clone();
        user.images = request.images.clone();
        // A channel that acknowledges the message before its answer (a sync token, `\Seen`),
        // or shows the answer while it is written (a stream), waits for it to be on disk.
        // Where the whole answer is the acknowledgement (an HTTP reply, scheduled runs), the
        // reply's durable append flushes both lines at once, and an answer without one (an
        // error) syncs first: one flush per turn instead of two.
        let history = &self.history;
        let message = std::slice::from_ref(&user);
        let offsets = if request.persisted.is_some() || self.sink.streaming() {
            history.append(&request.session, message).await
        } else {
            history.append_unsynced(&request.session, message).await
        };
        let offsets = offsets.map_err(TurnError::Persist)?;
        remember(&mut self.tail, vec![user], offsets);
        Ok(())
    }

    /// The final answer of a turn (already redacted): stored and delivered. An answer with no
    /// text (and no tool call) is an unusable one, told as such.
    pub(crate) async fn answer(&mut self, response: ChatResponse) -> Result<String, TurnError> {
        if response.text.trim().is_empty() {
            let error = LlmError::Protocol {
                model: response.model,
                detail: "it had no text and no tool call (if that repeats, the model may not \
                         handle this conversation's length or tools: try /new or another \
                         model with /model)"
                    .into(),
            };
            return Err(self.failed(error).await);
        }
        let mut reply = self.assistant(response.text.clone());
        reply.reasoning_content = response.reasoning_content;
        reply.reasoning_state = response.reasoning_state;
        self.persist(vec![reply]).await?;
        self.send(&response.text).await;
        Ok(response.text)
    }

    /// The records of one round: the assistant's tool-call message, then each call's result.
    pub(crate) fn round_messages(
        &self,
        response: ChatResponse,
        calls: Vec<ToolCall>,
        results: Vec<CallResult>,
    ) -> Vec<Message> {
        let mut assistant = self.assistant(response.text);
        assistant.reasoning_content = response.reasoning_content;
        assistant.reasoning_state = response.reasoning_state;
        let mut batch = Vec::with_capacity(results.len() + 1);
        for (call, output) in calls.iter().zip(results) {
            tracing::debug!(tool = %call.name, output.is_error, "Tool call finished.");
            let mut result = Message::new(Role::Tool, output.content, self.clock.now());
            result.tool_call_id = Some(call.id.clone());
            result.images = output.images;
            result.channel = Some(self.channel.clone());
            batch.push(result);
        }
        assistant.tool_calls = Some(calls);
        batch.insert(0, assistant);
        batch
    }

    /// An assistant record of this turn's channel.
    pub(crate) fn assistant(&self, text: impl Into<String>) -> Message {
        let mut message = Message::new(Role::Assistant, text, self.clock.now());
        message.channel = Some(self.channel.clone());
        message.sender_id = Some("assistant".to_owned());
        message
    }

    /// Tells the person the LLM failed (after the history is on disk); the error the turn
    /// ends with.
    pub(crate) async fn failed(&self, error: LlmError) -> TurnError {
        tracing::warn!(session = %self.session(), error = %error, "LLM call failed; told the user.");
        self.sync_before_answer().await;
        if error.should_tell() {
            self.deliver(&error.user_message()).await;
        }
        TurnError::Llm(error)
    }

    /// Ends a turn the loop breaker stopped: the round's calls did not run, so its tool-call
    /// message is not written; the message to the person is the assistant's answer.
    pub(crate) async fn stopped(&mut self, tool: String) -> TurnError {
        let text = loop_breaker::stop_message(&tool);
        let note = self.assistant(text.clone());
        if let Err(error) = self.persist(vec![note]).await {
            return error;
        }
        self.deliver(&text).await;
        TurnError::Repeating(tool)
    }

    /// Records that the turn was cancelled; the error the turn ends with.
    pub(crate) async fn cancelled(&mut self) -> TurnError {
        tracing::info!(session = %self.session(), "Turn cancelled.");
        let note = self.assistant(CANCELLED_NOTE);
        match self.persist(vec![note]).await {
            Ok(()) => TurnError::Cancelled,
            Err(error) => error,
        }
    }

    /// Appends `messages` to the session's history, durably, and to the turn's tail.
    pub(crate) async fn persist(&mut self, messages: Vec<Message>) -> Result<(), TurnError> {
        let offsets = self
            .history
            .append(&self.request.session, &messages)
            .await
            .map_err(TurnError::Store)?;
        remember(&mut self.tail, messages, offsets);
        Ok(())
    }

    /// Makes the session's history durable before an answer that follows no durable append (an
    /// error told instead of a reply), so the user's message, appended unsynced when the answer
    /// is its acknowledgement, is on disk before that answer goes out (the store flushes
    /// nothing when the message was synced already). A failure is logged and the answer still
    /// goes out: it tells of an error, not of a reply the history holds.
    pub(crate) async fn sync_before_answer(&self) {
        if let Err(error) = self.history.sync(&self.request.session).await {
            tracing::error!(session = %self.request.session, error = %error, "History could not be synced before an error answer.");
        }
    }

    /// Delivers `text` with known secrets redacted (an error text may quote a provider's).
    pub(crate) async fn deliver(&self, text: &str) {
        self.send(&self.redactor.redact(text)).await;
    }

    /// Delivers `text`, already redacted.
    pub(crate) async fn send(&self, text: &str) {
        if let Err(error) = self.sink.deliver(text).await {
            tracing::error!(error = %error, "Reply delivery failed.");
        }
    }
}

/// Adds `messages`, just appended at `offsets`, to `tail`.
fn remember(tail: &mut Tail, messages: Vec<Message>, offsets: Vec<u64>) {
    tail.messages.extend(
        messages
            .into_iter()
            .zip(offsets)
            .map(|(message, end_offset)| StoredMessage {
                message: Arc::new(message),
                end_offset,
            }),
    );
}
