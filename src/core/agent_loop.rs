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
//! A turn's [`Audience`] decides whether the owner's private memory is part of it: the prompt,
//! the tools offered and what they reach. It is decided once, when the turn starts, from the
//! readers its channel stated on the message ([`TurnRequest::readers`], unknown unless said,
//! and so shared).

use std::sync::Arc;

use crate::core::audience::Audience;
use crate::core::authority::Authority;
use crate::core::conversation::Conversations;
use crate::core::memory_manager::{Consolidation, MemoryManager};
use crate::core::message::Message;
use crate::core::ports::channel::ReplySink;
use crate::core::ports::clock::Clock;
use crate::core::ports::gates::ApprovalGates;
use crate::core::ports::llm::LlmClient;
use crate::core::ports::tool::ToolContext;
use crate::core::ports::usage::{CallTag, Purpose, SpendReport, TurnSpend};
use crate::core::resume::{self, Resume};
use crate::core::session::SessionId;
use crate::core::session_locks::SessionLocks;
use crate::core::tool_pipeline::{CallPipeline, Round};
use crate::core::tool_registry::{ToolRegistry, ToolSet};
use crate::core::turn::Turn;
pub use crate::core::turn::{CANCELLED_NOTE, TurnError, TurnOutcome, TurnRequest};

/// The most tool rounds a turn may take before it is stopped.
pub const DEFAULT_MAX_TOOL_ROUNDS: usize = 20;

/// Tool results longer than this are cut before they are stored and sent.
pub const DEFAULT_TOOL_RESULT_CAP: usize = 16 * 1024;

/// Runs turns. One instance is shared by every channel.
pub struct AgentLoop {
    llm: Arc<dyn LlmClient>,
    tools: Arc<ToolRegistry>,
    memory: Arc<MemoryManager>,
    locks: Arc<SessionLocks>,
    clock: Arc<dyn Clock>,
    max_tool_rounds: usize,
    tool_result_cap: usize,
    gates: Option<Arc<dyn ApprovalGates>>,
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
            gates: None,
            usage: None,
            conversations: None,
        }
    }

    /// Lets tools ask the owner for approval through each turn's gate, opened by `gates` (the
    /// gateway's). Without it, a tool gets no gate and a command that needs approval is
    /// refused.
    pub fn with_approvals(mut self, gates: Arc<dyn ApprovalGates>) -> Self {
        self.gates = Some(gates);
        self
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

    /// The clock turns are stamped with.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Runs one turn and delivers its reply (or a short error) through `reply`.
    pub async fn run(
        &self,
        request: TurnRequest,
        reply: Arc<dyn ReplySink>,
    ) -> Result<TurnOutcome, TurnError> {
        let _guard = self.locks.lock(&request.session).await;
        let mut turn = self.begin(request, reply).await?;
        let resumed = match &turn.request.source_id {
            Some(source_id) => resume::resume(&turn.tail, source_id),
            None => Resume::Fresh,
        };
        match resumed {
            Resume::Fresh => turn.record_user().await?,
            Resume::Continue(_) => {
                tracing::info!(session = %turn.session(), "A message handed over again was cut short; its turn goes on.");
            }
            Resume::Answered(reply) => {
                tracing::info!(session = %turn.session(), "A message handed over again was answered; the answer is sent again.");
                if let Some(persisted) = turn.request.persisted.take() {
                    let _ = persisted.send(());
                }
                turn.send(&reply).await;
                return Ok(TurnOutcome {
                    reply,
                    tool_rounds: 0,
                    tools_called: Vec::new(),
                    history_len: turn.tail.total(),
                    consolidation: Consolidation::NotDue,
                });
            }
        }
        if let Some(persisted) = turn.request.persisted.take() {
            let _ = persisted.send(());
        }
        turn.sink.typing(true).await;
        let result = self.converse(&mut turn).await;
        turn.sink.typing(false).await;
        let (reply, tool_rounds, tools_called) = result?;
        let consolidation = self
            .memory
            .consolidate_if_due(&turn.request.session, &mut turn.tail, turn.budget)
            .await
            .map_err(TurnError::Store)?;
        Ok(TurnOutcome {
            reply,
            tool_rounds,
            tools_called,
            history_len: turn.tail.total(),
            consolidation,
        })
    }

    /// Settles everything about a turn once: its client (the request's, the session's chosen
    /// model's, or the default), budget, purpose, authority and audience, and reads its tail. A heartbeat
    /// tick or cron run over budget is refused here, before anything is written; every other
    /// call is admitted by the client itself.
    async fn begin(
        &self,
        request: TurnRequest,
        sink: Arc<dyn ReplySink>,
    ) -> Result<Turn, TurnError> {
        let session = &request.session;
        let llm = match &request.llm {
            Some(llm) => Arc::clone(llm),
            None => self.llm_of(session),
        };
        let purpose = Purpose::of(&request.origin);
        if purpose.is_scheduled() {
            let call = CallTag {
                session: Some(session),
                ..CallTag::new(purpose)
            };
            if let Err(error) = llm.admit(call).await {
                let told = self
                    .tools
                    .redactor()
                    .redact(&error.user_message())
                    .into_owned();
                if error.should_tell()
                    && let Err(failed) = sink.deliver(&told).await
                {
                    tracing::error!(error = %failed, "Reply delivery failed.");
                }
                return Err(TurnError::Llm(error));
            }
        }
        let tail = self
            .memory
            .load_tail(session)
            .await
            .map_err(TurnError::Store)?;
        let audience = Audience::of(request.readers);
        tracing::debug!(session = %session, audience = ?audience, readers = ?request.readers, "Turn audience decided.");
        Ok(Turn {
            channel: session.channel().to_owned(),
            budget: llm.context_budget(),
            authority: Authority::of(&request.origin),
            audience,
            llm,
            purpose,
            tail,
            spend: TurnSpend::default(),
            history: Arc::clone(self.memory.history()),
            clock: Arc::clone(&self.clock),
            redactor: Arc::clone(self.tools.redactor()),
            sink,
            request,
        })
    }

    /// The LLM/tool rounds of a turn; returns the reply, the rounds and the tools called.
    async fn converse(&self, turn: &mut Turn) -> Result<(String, usize, Vec<String>), TurnError> {
        let mut prompt = self.prompt(turn).await?;
        let mut pipeline = self.pipeline(turn);
        let cancel = turn.request.cancel.clone();
        let mut tools_called = Vec::new();
        for round in 0..self.max_tool_rounds {
            let call = {
                let specs = pipeline.specs();
                tokio::select! {
                    biased;
                    () = cancel.cancelled() => return Err(turn.cancelled().await),
                    call = turn.call(&prompt, &specs) => call,
                }
            };
            let mut response = match call {
                Ok(response) => response,
                Err(error) => return Err(turn.failed(error).await),
            };
            pipeline.redact(&mut response);
            if response.tool_calls.is_empty() {
                let reply = turn.answer(response).await?;
                return Ok((reply, round, tools_called));
            }
            let calls = std::mem::take(&mut response.tool_calls);
            // Dropping the calls stops them (the shell tool kills its process group; a request
            // for approval expires); the unanswered tool-call message is then never written.
            let ran = tokio::select! {
                biased;
                () = cancel.cancelled() => return Err(turn.cancelled().await),
                ran = pipeline.round(&calls) => ran,
            };
            let results = match ran {
                Round::Ran(results) => results,
                Round::Stop { tool } => return Err(turn.stopped(tool).await),
            };
            tools_called.extend(calls.iter().map(|call| call.name.clone()));
            let batch = turn.round_messages(response, calls, results);
            let persisted = turn.tail.messages.len();
            turn.persist(batch).await?;
            prompt.extend(
                turn.tail.messages[persisted..]
                    .iter()
                    .map(|s| Arc::clone(&s.message)),
            );
        }
        let text = format!(
            "Error: stopped after {} tool rounds without a final answer.",
            self.max_tool_rounds
        );
        turn.deliver(&text).await;
        Err(TurnError::TooManyToolRounds(self.max_tool_rounds))
    }

    /// The turn's prompt: the tail consolidated first if it outgrew the budget, secrets kept
    /// out of the system prompt (built from files anyone with the workspace could have written
    /// a secret into; the provider never sees it).
    async fn prompt(&self, turn: &mut Turn) -> Result<Vec<Arc<Message>>, TurnError> {
        let session = &turn.request.session;
        self.memory
            .consolidate_if_over_budget(session, &mut turn.tail, turn.budget)
            .await
            .map_err(TurnError::Store)?;
        let mut prompt = self
            .memory
            .prompt(
                session,
                &turn.tail,
                turn.budget,
                self.clock.now(),
                turn.audience,
            )
            .await
            .map_err(TurnError::Store)?;
        let redactor = &turn.redactor;
        if let Some(system) = prompt.first_mut()
            && redactor.finds(&system.content)
        {
            let mut redacted = (**system).clone();
            redacted.content = redactor.redact(&system.content).into_owned();
            *system = Arc::new(redacted);
            tracing::info!(session = %session, "Secret redacted from the system prompt.");
        }
        Ok(prompt)
    }

    /// The turn's tool-call pipeline: its tools, their context and its approval gate.
    fn pipeline(&self, turn: &Turn) -> CallPipeline<'_> {
        let request = &turn.request;
        let gate = self.gates.as_ref().map(|gates| {
            gates.open(
                request.session.clone(),
                request.origin.clone(),
                request.readers,
                Arc::clone(&turn.sink),
            )
        });
        let tools = ToolSet::new(
            &self.tools,
            request.extra_tools.clone(),
            turn.audience,
            turn.authority,
        );
        let context = ToolContext {
            session: request.session.clone(),
            metadata: request.metadata.clone(),
            prompt_tail: Some(turn.tail.cursor.offset),
            approvals: gate,
            audience: turn.audience,
            authority: turn.authority,
        };
        CallPipeline::new(tools, context, self.tool_result_cap, self.tools.redactor())
    }
}
