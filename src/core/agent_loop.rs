//! The agent loop: one turn of one session, from the user's message to the delivered reply.
//!
//! A turn holds its session's mutex from start to end, so one session's messages run one at a
//! time and in order while other sessions run in parallel. In order it: persists the user
//! message (durably first when the channel acknowledges it before the answer, then signals
//! that it may; see [`AgentLoop::run`]), builds the prompt, calls the LLM
//! (streamed) and runs tools for up to `max_tool_rounds` rounds, persisting every tool-call
//! message and result, persists the final reply, delivers it, and finally consolidates if due,
//! still under the mutex, so the reply is never delayed by a summary.
//!
//! A channel may cancel a turn (the terminal's Ctrl-C) through [`TurnRequest::cancel`]. Only
//! the waits on the LLM and on tools are cut short, never a write, and the history then gets an
//! assistant note ([`CANCELLED_NOTE`]) after the user's message, so it stays a well-formed
//! conversation for the next prompt.
//!
//! A turn's [`Audience`] ([`TurnRequest::audience`], shared unless set) decides whether the
//! owner's private memory is part of it: the prompt, the tools offered and what they reach.
//! The router sets it from the reply sink's readers ([`AgentLoop::audience`]); the terminal,
//! whose person is the owner by construction, sets it itself.

use std::borrow::Cow;
use std::sync::Arc;

use futures_util::future::join_all;
use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::core::approval::{ApprovalSettings, Approvals, TurnApprovals};
use crate::core::audience::Audience;
use crate::core::authority::Authority;
use crate::core::command;
use crate::core::conversation::Conversations;
use crate::core::loop_breaker::{self, LoopBreaker, Verdict};
use crate::core::memory_manager::{Consolidation, MemoryManager};
use crate::core::message::{Message, Role};
use crate::core::origin::Origin;
use crate::core::ports::channel::{Inbound, ReplySink};
use crate::core::ports::clock::Clock;
use crate::core::ports::llm::{ChatRequest, ChatResponse, LlmClient, LlmError, StreamEvent};
use crate::core::ports::store::{StoreError, StoredMessage, Tail};
use crate::core::ports::tool::{Tool, ToolContext};
use crate::core::ports::usage::{CallTag, Purpose, SpendReport, TurnSpend};
use crate::core::redact::StreamRedactor;
use crate::core::resume::{self, Resume};
use crate::core::session::SessionId;
use crate::core::session_locks::SessionLocks;
use crate::core::tool_pipeline::CallPipeline;
use crate::core::tool_registry::{ToolRegistry, ToolSet};

/// The most tool rounds a turn may take before it is stopped.
pub const DEFAULT_MAX_TOOL_ROUNDS: usize = 20;

/// Tool results longer than this are cut before they are stored and sent.
pub const DEFAULT_TOOL_RESULT_CAP: usize = 16 * 1024;

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
    /// Who takes part: the owner's private memory is part of the turn only with
    /// [`Audience::Owner`]. Shared by default, so a request nobody judged keeps it out.
    pub audience: Audience,
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
            audience: Audience::Shared,
            source_id: None,
            images: Vec::new(),
        }
    }

    /// The turn a channel's message asks for, with the tools its turn gets; the reply sink is
    /// handed back separately because [`AgentLoop::run`] borrows it.
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
            audience: Audience::Shared,
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

/// What the LLM/tool rounds of a turn produced.
struct Conversation {
    reply: String,
    tool_rounds: usize,
    tools_called: Vec<String>,
    tail: Tail,
}

/// Why a turn did not produce a reply. The user has been told (except for `Persist`).
#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    /// The inbound message could not be persisted; it must not be acknowledged.
    #[error("could not persist the inbound message: {0}")]
    Persist(#[source] StoreError),
    /// History could not be read or a later write failed.
    #[error("storage failed during the turn: {0}")]
    Store(#[source] StoreError),
    /// Every model failed; the user got a short explanation.
    #[error("the LLM call failed: {0}")]
    Llm(#[source] LlmError),
    /// The model kept calling tools past the round limit.
    #[error("stopped after {0} tool rounds without a final answer")]
    TooManyToolRounds(usize),
    /// The channel cancelled the turn; the history ends with [`CANCELLED_NOTE`].
    #[error("the turn was cancelled")]
    Cancelled,
    /// The model called this tool with the same arguments [`loop_breaker::STOP_AT`] times;
    /// the person was told.
    #[error("ended: {0} was called with the same arguments {stop} times", stop = loop_breaker::STOP_AT)]
    Repeating(String),
}

/// Runs turns. One instance is shared by every channel.
pub struct AgentLoop {
    llm: Arc<dyn LlmClient>,
    tools: Arc<ToolRegistry>,
    memory: Arc<MemoryManager>,
    locks: Arc<SessionLocks>,
    clock: Arc<dyn Clock>,
    max_tool_rounds: usize,
    tool_result_cap: usize,
    approvals: Option<Arc<Approvals>>,
    approval_settings: ApprovalSettings,
    usage: Option<Arc<dyn SpendReport>>,
    conversations: Option<Arc<Conversations>>,
}

impl AgentLoop {
    /// A loop over the given parts with the default limits.
    pub fn new(
        llm: Arc<dyn LlmClient>,
        tools: Arc<ToolRegistry>,
        memory: Arc<MemoryManager>,
        locks: Arc<SessionLocks>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            llm,
            tools,
            memory,
            locks,
            clock,
            max_tool_rounds: DEFAULT_MAX_TOOL_ROUNDS,
            tool_result_cap: DEFAULT_TOOL_RESULT_CAP,
            approvals: None,
            approval_settings: ApprovalSettings::default(),
            usage: None,
            conversations: None,
        }
    }

    /// Lets tools ask the owner for approval through `approvals`, as `settings` say. Without
    /// it, a command that needs approval is refused (unless `settings` turn approvals off).
    pub fn with_approvals(
        mut self,
        approvals: Option<Arc<Approvals>>,
        settings: ApprovalSettings,
    ) -> Self {
        self.approvals = approvals;
        self.approval_settings = settings;
        self
    }

    /// The registry of open approval requests, where answers are resolved.
    pub fn approvals(&self) -> Option<&Arc<Approvals>> {
        self.approvals.as_ref()
    }

    /// Adds today's usage to the `/status` line.
    pub fn with_usage(mut self, usage: Arc<dyn SpendReport>) -> Self {
        self.usage = Some(usage);
        self
    }

    /// Lets `/new` and `/model` steer conversations: a turn of a session that picked a model
    /// uses that model's client unless its request names one.
    pub fn with_conversations(mut self, conversations: Arc<Conversations>) -> Self {
        self.conversations = Some(conversations);
        self
    }

    /// The conversations' sessions and models, when chat commands may steer them.
    pub fn conversations(&self) -> Option<&Arc<Conversations>> {
        self.conversations.as_ref()
    }

    /// The session conversation `key`'s messages go to now (see [`Conversations::current`]).
    pub fn current_session(&self, key: &SessionId) -> SessionId {
        match &self.conversations {
            Some(conversations) => conversations.current(key),
            None => key.clone(),
        }
    }

    /// The client `session`'s turns use: the model it picked, or the default.
    pub fn llm_of(&self, session: &SessionId) -> Arc<dyn LlmClient> {
        self.conversations
            .as_ref()
            .and_then(|conversations| conversations.client(session))
            .unwrap_or_else(|| self.llm.clone())
    }

    /// The spend report behind `/status` and `/usage`, if usage is metered.
    pub fn usage(&self) -> Option<&Arc<dyn SpendReport>> {
        self.usage.as_ref()
    }

    /// Overrides the tool-round limit (at least 1).
    pub fn with_max_tool_rounds(mut self, rounds: usize) -> Self {
        self.max_tool_rounds = rounds.max(1);
        self
    }

    /// The audience of a turn of `session` replying through `sink`: the owner's when the
    /// sink's channel states that the owner alone reads it (see [`Audience::of`]).
    pub async fn audience(&self, session: &SessionId, sink: &dyn ReplySink) -> Audience {
        let readers = sink.readers().await;
        let audience = Audience::of(readers);
        tracing::debug!(session = %session, audience = ?audience, readers = ?readers, "Turn audience decided.");
        audience
    }

    /// The shared registry (never mutated by turns).
    pub fn tools(&self) -> &Arc<ToolRegistry> {
        &self.tools
    }

    /// The memory manager.
    pub fn memory(&self) -> &Arc<MemoryManager> {
        &self.memory
    }

    /// The per-session locks.
    pub fn locks(&self) -> &Arc<SessionLocks> {
        &self.locks
    }

    /// The default LLM client.
    pub fn llm(&self) -> &Arc<dyn LlmClient> {
        &self.llm
    }

    /// The `/status` line of `session` (see [`command::status_line`]). Reads only, so it
    /// does not wait for the session's running turn.
    pub async fn status_line(&self, session: &SessionId) -> Result<String, StoreError> {
        let tail = self.memory.load_tail(session).await?;
        let llm = self.llm_of(session);
        let mut line = command::status_line(&llm.describe(), &tail, self.clock.now().to_utc());
        if let Some(usage) = &self.usage {
            line.push_str(" · ");
            line.push_str(&usage.status_line().await);
        }
        Ok(line)
    }

    /// Runs one turn and delivers its reply (or a short error) through `sink`.
    pub async fn run(
        &self,
        mut request: TurnRequest,
        reply: Arc<dyn ReplySink>,
    ) -> Result<TurnOutcome, TurnError> {
        let sink = reply.as_ref();
        let session = request.session.clone();
        if request.llm.is_none() {
            request.llm = self
                .conversations
                .as_ref()
                .and_then(|conversations| conversations.client(&session));
        }
        let _guard = self.locks.lock(&session).await;
        let channel = session.channel().to_owned();
        // A heartbeat tick or cron run over budget is skipped before anything is written.
        let purpose = Purpose::of(&request.origin);
        if purpose.is_scheduled() {
            let llm = request.llm.as_deref().unwrap_or(self.llm.as_ref());
            let call = CallTag {
                session: Some(&session),
                ..CallTag::new(purpose)
            };
            if let Err(error) = llm.admit(call).await {
                if error.should_tell() {
                    self.deliver(sink, &error.user_message()).await;
                }
                return Err(TurnError::Llm(error));
            }
        }

        let resumed = match &request.source_id {
            Some(source_id) => {
                let tail = self.memory.load_tail(&session).await;
                resume::resume(&tail.map_err(TurnError::Store)?, source_id)
            }
            None => Resume::Fresh,
        };
        let user = match resumed {
            Resume::Fresh => {
                let mut user = Message::new(Role::User, request.text.clone(), self.clock.now());
                user.channel = Some(channel.clone());
                user.sender_id = Some(request.origin.sender_id().into_owned());
                user.source_id = request.source_id.clone();
                user.images = request.images.clone();
                // A channel that acknowledges the message before its answer (a sync token,
                // `\Seen`), or shows the answer while it is written (a stream), waits for it to
                // be on disk. Where the whole answer is the acknowledgement (an HTTP reply,
                // scheduled runs), the reply's durable append flushes both lines at once, and an
                // answer without one (an error) syncs first: one flush per turn instead of two.
                let history = self.memory.history();
                let message = std::slice::from_ref(&user);
                let offsets = if request.persisted.is_some() || sink.streaming() {
                    history.append(&session, message).await
                } else {
                    history.append_unsynced(&session, message).await
                };
                let offsets = offsets.map_err(TurnError::Persist)?;
                Some((user, offsets))
            }
            Resume::Continue(_) => {
                tracing::info!(session = %session, "A message handed over again was cut short; its turn goes on.");
                None
            }
            Resume::Answered(reply) => {
                tracing::info!(session = %session, "A message handed over again was answered; the answer is sent again.");
                if let Some(persisted) = request.persisted.take() {
                    let _ = persisted.send(());
                }
                self.send(sink, &reply).await;
                let tail = self.memory.load_tail(&session).await;
                return Ok(TurnOutcome {
                    reply,
                    tool_rounds: 0,
                    tools_called: Vec::new(),
                    history_len: tail.map_err(TurnError::Store)?.total(),
                    consolidation: Consolidation::NotDue,
                });
            }
        };
        if let Some(persisted) = request.persisted.take() {
            let _ = persisted.send(());
        }
        sink.typing(true).await;
        let result = self.converse(&request, &channel, user, &reply).await;
        sink.typing(false).await;
        let Conversation {
            reply,
            tool_rounds,
            tools_called,
            mut tail,
        } = result?;

        let llm = request.llm.as_deref().unwrap_or(self.llm.as_ref());
        let budget = llm.context_budget();
        let consolidation = self
            .memory
            .consolidate_if_due(&session, &mut tail, budget)
            .await
            .map_err(TurnError::Store)?;
        Ok(TurnOutcome {
            reply,
            tool_rounds,
            tools_called,
            history_len: tail.total(),
            consolidation,
        })
    }

    /// The LLM/tool rounds of a turn; returns the reply, the rounds and the updated tail.
    async fn converse(
        &self,
        request: &TurnRequest,
        channel: &str,
        user: Option<(Message, Vec<u64>)>,
        reply: &Arc<dyn ReplySink>,
    ) -> Result<Conversation, TurnError> {
        let sink = reply.as_ref();
        let session = &request.session;
        let llm = request.llm.as_deref().unwrap_or(self.llm.as_ref());
        let budget = llm.context_budget();
        let mut tail = self
            .memory
            .load_tail(session)
            .await
            .map_err(TurnError::Store)?;
        // `None`: a resumed turn, whose message (and what followed it) is in the tail.
        if let Some((user, offsets)) = user
            && tail.messages.last().is_none_or(|s| *s.message != user)
        {
            // The tail was read before our append became visible (cannot happen with a
            // read-your-writes store, but stay correct): add it ourselves.
            tail.messages.push(StoredMessage {
                message: Arc::new(user),
                end_offset: offsets[0],
            });
        }
        self.memory
            .consolidate_if_over_budget(session, &mut tail, budget)
            .await
            .map_err(TurnError::Store)?;
        let mut prompt = self
            .memory
            .prompt(session, &tail, budget, self.clock.now(), request.audience)
            .await
            .map_err(TurnError::Store)?;
        // The system prompt is built from files (MEMORY.md, the bootstrap files) anyone with
        // the workspace could have written a secret into; the provider never sees it.
        if let Some(system) = prompt.first_mut()
            && self.tools.redactor().finds(&system.content)
        {
            let mut redacted = (**system).clone();
            redacted.content = self.tools.redactor().redact(&system.content).into_owned();
            *system = Arc::new(redacted);
            tracing::info!(session = %session, "Secret redacted from the system prompt.");
        }
        let gate = TurnApprovals::new(
            self.approvals.clone(),
            self.approval_settings,
            session.clone(),
            request.origin.clone(),
            Arc::clone(reply),
            Arc::clone(self.tools.redactor()),
        );
        let authority = Authority::of(&request.origin);
        let tools = ToolSet::new(
            &self.tools,
            request.extra_tools.clone(),
            request.audience,
            authority,
        );
        let context = ToolContext {
            session: session.clone(),
            metadata: request.metadata.clone(),
            prompt_tail: Some(tail.cursor.offset),
            approvals: Some(Arc::new(gate)),
            audience: request.audience,
            authority,
        };
        let mut tools_called = Vec::new();
        let mut breaker = LoopBreaker::default();
        let spend = TurnSpend::default();
        let tag = CallTag {
            purpose: Purpose::of(&request.origin),
            session: Some(session),
            turn: Some(&spend),
        };

        for round in 0..self.max_tool_rounds {
            let call = tokio::select! {
                biased;
                () = request.cancel.cancelled() => {
                    return Err(self.cancelled(session, channel, &mut tail).await);
                }
                call = self.call_llm(llm, &prompt, &tools, sink, tag) => call,
            };
            let mut response = match call {
                Ok(response) => response,
                Err(error) => {
                    tracing::warn!(session = %session, error = %error, "LLM call failed; told the user.");
                    self.sync_before_answer(session).await;
                    if error.should_tell() {
                        self.deliver(sink, &error.user_message()).await;
                    }
                    return Err(TurnError::Llm(error));
                }
            };
            // A secret the model repeats in its reasoning or in a call's arguments is neither
            // kept in the history nor used: the call runs with `[redacted]`.
            let redactor = self.tools.redactor();
            if let Some(reasoning) = &mut response.reasoning_content
                && let Cow::Owned(redacted) = redactor.redact(reasoning)
            {
                *reasoning = redacted;
            }
            for call in &mut response.tool_calls {
                redactor.redact_json(&mut call.arguments);
            }
            if response.tool_calls.is_empty() {
                if response.text.trim().is_empty() {
                    let error = LlmError::Protocol {
                        model: response.model,
                        detail: "it had no text and no tool call (if that repeats, the model may \
                                 not handle this conversation's length or tools: try /new or \
                                 another model with /model)"
                            .into(),
                    };
                    self.sync_before_answer(session).await;
                    self.deliver(sink, &error.user_message()).await;
                    return Err(TurnError::Llm(error));
                }
                // A secret the model repeats is kept out of the history as out of the reply.
                let text = self.tools.redactor().redact(&response.text).into_owned();
                let mut reply = self.assistant(text.clone(), channel);
                reply.reasoning_content = response.reasoning_content;
                reply.reasoning_state = response.reasoning_state;
                self.persist(session, &mut tail, vec![reply]).await?;
                self.send(sink, &text).await;
                return Ok(Conversation {
                    reply: text,
                    tool_rounds: round,
                    tools_called,
                    tail,
                });
            }
            let verdicts: Vec<Verdict> = response
                .tool_calls
                .iter()
                .map(|call| breaker.check(&call.name, &call.arguments))
                .collect();
            if let Some(call) = response
                .tool_calls
                .iter()
                .zip(&verdicts)
                .find_map(|(call, verdict)| (*verdict == Verdict::Stop).then_some(call))
            {
                // This round's calls are not run, so its tool-call message is not written: the
                // turn ends with the message to the person as the assistant's answer.
                tracing::warn!(session = %session, tool = %call.name, "Identical tool call repeated; turn ended.");
                let text = loop_breaker::stop_message(&call.name);
                self.persist(
                    session,
                    &mut tail,
                    vec![self.assistant(text.clone(), channel)],
                )
                .await?;
                self.deliver(sink, &text).await;
                return Err(TurnError::Repeating(call.name.clone()));
            }
            let text = self.tools.redactor().redact(&response.text).into_owned();
            let mut assistant = self.assistant(text, channel);
            assistant.reasoning_content = response.reasoning_content;
            assistant.reasoning_state = response.reasoning_state;
            let pipeline = CallPipeline::new(&tools, &context, self.tool_result_cap);
            let pipeline = &pipeline;
            let calls = join_all(
                response
                    .tool_calls
                    .iter()
                    .zip(&verdicts)
                    .map(|(call, verdict)| pipeline.run(call, *verdict)),
            );
            // Dropping the calls stops them (the shell tool kills its process group; a request
            // for approval expires); the unanswered tool-call message is then never written.
            let outputs = tokio::select! {
                biased;
                () = request.cancel.cancelled() => {
                    return Err(self.cancelled(session, channel, &mut tail).await);
                }
                outputs = calls => outputs,
            };
            tools_called.extend(response.tool_calls.iter().map(|call| call.name.clone()));
            let mut batch = Vec::with_capacity(outputs.len() + 1);
            for (call, output) in response.tool_calls.iter().zip(outputs) {
                tracing::debug!(tool = %call.name, output.is_error, "Tool call finished.");
                let mut result = Message::new(Role::Tool, output.content, self.clock.now());
                result.tool_call_id = Some(call.id.clone());
                result.images = output.images;
                result.channel = Some(channel.to_owned());
                batch.push(result);
            }
            assistant.tool_calls = Some(response.tool_calls);
            batch.insert(0, assistant);
            let persisted = tail.messages.len();
            self.persist(session, &mut tail, batch).await?;
            prompt.extend(
                tail.messages[persisted..]
                    .iter()
                    .map(|s| Arc::clone(&s.message)),
            );
        }
        let text = format!(
            "Error: stopped after {} tool rounds without a final answer.",
            self.max_tool_rounds
        );
        self.deliver(sink, &text).await;
        Err(TurnError::TooManyToolRounds(self.max_tool_rounds))
    }

    /// An assistant record of this turn's channel.
    fn assistant(&self, text: impl Into<String>, channel: &str) -> Message {
        let mut message = Message::new(Role::Assistant, text, self.clock.now());
        message.channel = Some(channel.to_owned());
        message.sender_id = Some("assistant".to_owned());
        message
    }

    /// Records that the turn was cancelled; the error the turn ends with.
    async fn cancelled(&self, session: &SessionId, channel: &str, tail: &mut Tail) -> TurnError {
        tracing::info!(session = %session, "Turn cancelled.");
        let note = self.assistant(CANCELLED_NOTE, channel);
        match self.persist(session, tail, vec![note]).await {
            Ok(()) => TurnError::Cancelled,
            Err(error) => error,
        }
    }

    /// One streamed LLM call, relaying deltas to a streaming sink.
    async fn call_llm(
        &self,
        llm: &dyn LlmClient,
        prompt: &[Arc<Message>],
        tools: &ToolSet<'_>,
        sink: &dyn ReplySink,
        call: CallTag<'_>,
    ) -> Result<ChatResponse, LlmError> {
        let specs = tools.specs();
        let request = ChatRequest {
            messages: prompt,
            tools: &specs,
            call,
        };
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
            // A secret the model writes never reaches the screen, even split across deltas.
            let mut redacting = StreamRedactor::new(self.tools.redactor());
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

    async fn persist(
        &self,
        session: &SessionId,
        tail: &mut Tail,
        messages: Vec<Message>,
    ) -> Result<(), TurnError> {
        let offsets = self
            .memory
            .history()
            .append(session, &messages)
            .await
            .map_err(TurnError::Store)?;
        tail.messages.extend(
            messages
                .into_iter()
                .zip(offsets)
                .map(|(message, end_offset)| StoredMessage {
                    message: Arc::new(message),
                    end_offset,
                }),
        );
        Ok(())
    }

    /// Makes the session's history durable before an answer that follows no durable append (an
    /// error told instead of a reply), so the user's message, appended unsynced when the answer
    /// is its acknowledgement, is on disk before that answer goes out (the store flushes nothing when
    /// the message was synced already). A failure is logged and the
    /// answer still goes out: it tells of an error, not of a reply the history holds.
    async fn sync_before_answer(&self, session: &SessionId) {
        if let Err(error) = self.memory.history().sync(session).await {
            tracing::error!(session = %session, error = %error, "History could not be synced before an error answer.");
        }
    }

    /// Delivers `text` with known secrets redacted (an error text may quote a provider's).
    async fn deliver(&self, sink: &dyn ReplySink, text: &str) {
        self.send(sink, &self.tools.redactor().redact(text)).await;
    }

    /// Delivers `text`, already redacted.
    async fn send(&self, sink: &dyn ReplySink, text: &str) {
        if let Err(error) = sink.deliver(text).await {
            tracing::error!(error = %error, "Reply delivery failed.");
        }
    }
}
