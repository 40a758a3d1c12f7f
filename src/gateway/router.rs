//! [`Router`]: runs inbound messages as turns, in order within a session and in parallel
//! across sessions, at most `max_parallel` at once.
//!
//! Each session with pending messages has one worker task fed by an unbounded FIFO queue; the
//! worker runs its queue one turn at a time and exits when the queue is empty, so idle sessions
//! cost nothing and the map of queues never outgrows the sessions in flight. A global semaphore
//! bounds how many turns run at once. The queue map's lock is held both for enqueueing and for
//! a worker's decision to exit, so no message can slip into a queue whose worker just left.
//!
//! A person's chat command ([`ChatCommand`]: `/stop`, `/status`, `/model`, `/new`, ...) is
//! answered here, beside the queue rather than in it: `/stop` must reach the turn it cancels
//! while that turn runs, and the others should not wait behind it (`/compact` waits for the
//! session's mutex, as a turn's consolidation does). Commands are not written to the history.
//!
//! Every other message is first moved from its conversation key (the session id its channel
//! named) to the key's current session ([`AgentLoop::current_session`], which `/new` changes);
//! queue, `/stop`, approvals and the turn follow that session, while the activity log and the
//! turn's tools (`cron_add`'s target) keep the key, which is what routes a message back. The
//! owner's answer to an open approval (`yes CODE` / `no CODE`) is taken the same way: the turn
//! waiting for it holds its session's queue.
//!
//! On shutdown the router stops accepting, answers queued-but-unstarted messages with
//! [`TurnResult::Dropped`] (they were not persisted, so their channels do not acknowledge them
//! and will deliver them again), and waits for running turns up to a grace period.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::state::GatewayState;
use crate::approval::{self, Approvals, Decision, ResolveError};
use crate::core::agent_loop::{AgentLoop, TurnError, TurnRequest};
use crate::core::loop_breaker;
use crate::core::memory_manager::Consolidation;
use crate::core::ports::channel::{
    ActivityLog, Dispatch, DispatchClosed, FailureKind, Inbound, ReplySink, TurnFailure,
    TurnResult, TurnTools,
};
use crate::core::session::SessionId;
use crate::gateway::command::ChatCommand;
use crate::gateway::command_answer;

/// One queued message and where to report its end.
struct Job {
    /// The message, its session already the conversation's current one.
    inbound: Inbound,
    /// The session id its channel named: the conversation's key.
    key: SessionId,
    done: oneshot::Sender<TurnResult>,
}

/// The session queues, and the messages in them that a correction may still replace.
#[derive(Default)]
struct Queues {
    senders: HashMap<SessionId, mpsc::UnboundedSender<Job>>,
    /// Queued messages with a [`Inbound::message_id`]: their sender, and whether a
    /// correction replaced them.
    waiting: HashMap<(SessionId, String), (String, bool)>,
}

/// What the person is told when an edit comes after its message was answered (or while it is).
const CORRECTION_NOTE: &str = "[The person edited an earlier message; this is the corrected text.]";

/// How long turns cancelled at the end of the grace period get to end (see
/// [`Router::shutdown`]); a cancelled turn ends at its next await, so this is slack.
const CUT_GRACE: Duration = Duration::from_secs(3);

/// The gateway's dispatcher.
pub struct Router {
    inner: Arc<Inner>,
}

struct Inner {
    agent: Arc<AgentLoop>,
    /// The registry of open approval requests, owned by the gateway: an owner's `yes CODE`
    /// resolves one here.
    approvals: Option<Arc<Approvals>>,
    tools: Arc<dyn TurnTools>,
    activity: Option<Arc<dyn ActivityLog>>,
    state: Arc<GatewayState>,
    /// A std mutex: held only to look up, insert or remove a queue, never across an await.
    queues: Mutex<Queues>,
    permits: Semaphore,
    closed: AtomicBool,
    tracker: TaskTracker,
    /// The cancel token of each session's running turn, for `/stop`. A std mutex: held only
    /// to insert, remove or cancel, never across an await.
    running: Mutex<HashMap<SessionId, CancellationToken>>,
}

impl Router {
    /// A router running at most `max_parallel` turns at once.
    pub fn new(
        agent: Arc<AgentLoop>,
        tools: Arc<dyn TurnTools>,
        activity: Option<Arc<dyn ActivityLog>>,
        state: Arc<GatewayState>,
        max_parallel: usize,
    ) -> Self {
        let inner = Inner {
            agent,
            approvals: None,
            tools,
            activity,
            state,
            queues: Mutex::default(),
            permits: Semaphore::new(max_parallel.max(1)),
            closed: AtomicBool::new(false),
            tracker: TaskTracker::new(),
            running: Mutex::default(),
        };
        Self {
            inner: Arc::new(inner),
        }
    }

    /// Takes the owner's answers to open approval requests (`yes CODE` / `no CODE`) to
    /// `approvals`, the registry the gateway gave the agent; without it they are messages.
    pub fn with_approvals(mut self, approvals: Arc<Approvals>) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.approvals = Some(approvals);
        }
        self
    }

    /// Stops accepting and waits up to `grace` for running turns. Returns whether every turn
    /// finished in time. Turns still running then are cancelled as `/stop` cancels them and
    /// get [`CUT_GRACE`] to end that way: their clients get a last event saying so (instead of
    /// a connection cut without `done` or `error`), and their cut LLM calls are recorded.
    pub async fn shutdown(&self, grace: Duration) -> bool {
        self.inner.closed.store(true, Ordering::SeqCst);
        self.inner.tracker.close();
        let finished = tokio::time::timeout(grace, self.inner.tracker.wait())
            .await
            .is_ok();
        if !finished {
            let cut: Vec<CancellationToken> = self
                .inner
                .running
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .values()
                .cloned()
                .collect();
            tracing::warn!(
                grace_seconds = grace.as_secs(),
                turns = cut.len(),
                "Turns still running after the grace period; cancelling them."
            );
            cut.iter().for_each(CancellationToken::cancel);
            if tokio::time::timeout(CUT_GRACE, self.inner.tracker.wait())
                .await
                .is_err()
            {
                tracing::warn!("Cancelled turns did not end in time; the gateway stops anyway.");
            }
        }
        finished
    }
}

impl Dispatch for Router {
    fn submit(&self, inbound: Inbound) -> Result<oneshot::Receiver<TurnResult>, DispatchClosed> {
        if self.inner.closed.load(Ordering::SeqCst) {
            return Err(DispatchClosed);
        }
        if inbound.origin.is_person()
            && let Some(command) = ChatCommand::parse(&inbound.text)
        {
            return Ok(self.inner.command(command, inbound));
        }
        let mut inbound = inbound;
        let key = inbound.session.clone();
        inbound.session = self.inner.agent.current_session(&key);
        if inbound.origin.is_person()
            && let Some((decision, code)) = approval::parse_answer(&inbound.text)
            && let Some(approvals) = &self.inner.approvals
            && approvals.is_open_code(&inbound.session, &code)
        {
            return Ok(self
                .inner
                .answer(approvals.clone(), decision, code, inbound));
        }
        let (done, receiver) = oneshot::channel();
        let session = inbound.session.clone();
        let mut queues = self.inner.queues.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(target) = inbound.corrects.take() {
            let sender = inbound.origin.sender_id();
            match queues.waiting.get_mut(&(session.clone(), target)) {
                // Not started: the original is dropped when its turn comes; this is the text.
                // Only its sender's own edit counts (as clients show edits).
                Some((original_sender, replaced)) if *original_sender == sender => {
                    // Logged when decided, not when the original's turn comes: a test (and a
                    // reader of the log) learns here that the edit will be answered instead.
                    tracing::debug!(session = %session, "A message was edited before its turn; the edit takes its place.");
                    *replaced = true;
                }
                _ => inbound.text = format!("{CORRECTION_NOTE}\n{}", inbound.text),
            }
        }
        if let Some(id) = &inbound.message_id {
            let sender = inbound.origin.sender_id().into_owned();
            queues
                .waiting
                .insert((session.clone(), id.clone()), (sender, false));
        }
        let mut job = Job { inbound, key, done };
        if let Some(queue) = queues.senders.get(&session) {
            match queue.send(job) {
                Ok(()) => return Ok(receiver),
                Err(mpsc::error::SendError(returned)) => job = returned,
            }
        }
        let (queue, jobs) = mpsc::unbounded_channel();
        let _ = queue.send(job);
        queues.senders.insert(session.clone(), queue);
        drop(queues);
        let inner = self.inner.clone();
        // Boxed: the worker holds a whole turn's state machine, kilobytes that spawning would
        // otherwise copy through each layer (tracker, task cell) on every turn.
        self.inner
            .tracker
            .spawn(Box::pin(async move { inner.work(session, jobs).await }));
        Ok(receiver)
    }
}

/// Ends a message answered beside the queue (a chat command, an approval): handled in full,
/// so the channel may acknowledge it (nothing is left to persist), and `text` is the reply.
async fn handled(
    persisted: Option<oneshot::Sender<()>>,
    reply: &dyn ReplySink,
    text: String,
) -> TurnResult {
    if let Some(persisted) = persisted {
        let _ = persisted.send(());
    }
    match reply.deliver(&text).await {
        Ok(()) => TurnResult::Replied(text),
        Err(error) => {
            TurnResult::Failed(TurnFailure::new(FailureKind::Delivery, error.to_string()))
        }
    }
}

impl Inner {
    /// Answers a chat command on the tracker; the receiver yields the answer as the reply.
    fn command(
        self: &Arc<Self>,
        command: ChatCommand,
        inbound: Inbound,
    ) -> oneshot::Receiver<TurnResult> {
        let (done, receiver) = oneshot::channel();
        let inner = self.clone();
        self.tracker.spawn(async move {
            let Inbound {
                session: key,
                reply,
                persisted,
                ..
            } = inbound;
            let text = match command {
                ChatCommand::Stop if inner.stop(&inner.agent.current_session(&key)) => {
                    tracing::info!(session = %key, "Chat command answered: /stop.");
                    "Stopped: the reply I was working on is cancelled.".to_owned()
                }
                command => command_answer::answer(&inner.agent, &key, &command).await,
            };
            let _ = done.send(handled(persisted, reply.as_ref(), text).await);
        });
        receiver
    }

    /// Resolves an approval with the answer `inbound` carries, beside the queue: the turn
    /// waiting for it holds its session's queue. Only the owner's answer counts.
    fn answer(
        self: &Arc<Self>,
        approvals: Arc<Approvals>,
        decision: Decision,
        code: String,
        inbound: Inbound,
    ) -> oneshot::Receiver<TurnResult> {
        let (done, receiver) = oneshot::channel();
        self.tracker.spawn(async move {
            let Inbound {
                session,
                origin,
                reply,
                persisted,
                ..
            } = inbound;
            let sender = origin.sender_id();
            let resolved = approvals.resolve_code(&session, &origin, &code, decision);
            let text = match (&resolved, decision) {
                (Ok(request), Decision::Approve) => {
                    format!("Approved: {} runs once.", request.command_inline())
                }
                (Ok(request), Decision::Deny) => {
                    format!("Refused: {} will not run.", request.command_inline())
                }
                (Err(ResolveError::NotOwner), _) => {
                    tracing::warn!(session = %session, sender = %sender, "An approval was answered by someone who is not the owner; ignored.");
                    "Only the owner can answer an approval.".to_owned()
                }
                (Err(error), _) => format!("Nothing changed: {error}."),
            };
            tracing::info!(session = %session, ?decision, resolved = resolved.is_ok(), "Approval answered.");
            let _ = done.send(handled(persisted, reply.as_ref(), text).await);
        });
        receiver
    }

    /// Cancels `session`'s running turn; whether there was one.
    fn stop(&self, session: &SessionId) -> bool {
        let running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        match running.get(session) {
            Some(cancel) => {
                cancel.cancel();
                true
            }
            None => false,
        }
    }

    /// Runs one session's queue until it is empty.
    async fn work(self: Arc<Self>, session: SessionId, mut jobs: mpsc::UnboundedReceiver<Job>) {
        loop {
            let job = {
                let mut queues = self.queues.lock().unwrap_or_else(|p| p.into_inner());
                match jobs.try_recv() {
                    Ok(job) => {
                        let replaced =
                            job.inbound.message_id.as_ref().and_then(|id| {
                                queues.waiting.remove(&(session.clone(), id.clone()))
                            });
                        (job, replaced.is_some_and(|(_, replaced)| replaced))
                    }
                    Err(_) => {
                        queues.senders.remove(&session);
                        return;
                    }
                }
            };
            let (mut job, replaced) = job;
            if replaced {
                // Its correction is queued behind it and carries the whole corrected text;
                // the channel may consider this one handled (logged when the edit came).
                if let Some(persisted) = job.inbound.persisted.take() {
                    let _ = persisted.send(());
                }
                let _ = job.done.send(TurnResult::Replaced);
                continue;
            }
            if self.closed.load(Ordering::SeqCst) {
                let _ = job.done.send(TurnResult::Dropped);
                continue;
            }
            let result = self.run(job.inbound, &job.key).await;
            let _ = job.done.send(result);
        }
    }

    /// Runs `inbound` as a turn of its (current) session; `key` is its conversation's key.
    async fn run(&self, inbound: Inbound, key: &SessionId) -> TurnResult {
        let Ok(_permit) = self.permits.acquire().await else {
            return TurnResult::Dropped;
        };
        let started = Instant::now();
        let session = inbound.session.clone();
        if inbound.origin.is_person()
            && let Some(activity) = &self.activity
        {
            activity.record(key, &inbound.metadata);
        }
        let tools = self.tools.for_turn(key, &inbound.metadata, &inbound.origin);
        let (request, reply) = TurnRequest::from_inbound(inbound, tools);
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(session.clone(), request.cancel.clone());
        let metrics = self.state.metrics();
        let result = self.agent.run(request, Arc::clone(&reply)).await;
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&session);
        match result {
            Ok(outcome) => {
                for tool in &outcome.tools_called {
                    metrics.tool_call(tool);
                }
                match outcome.consolidation {
                    Consolidation::Done { .. } => metrics.consolidation("done"),
                    Consolidation::Failed => metrics.consolidation("failed"),
                    Consolidation::NotDue | Consolidation::NoLlm => {}
                }
                self.state.turn_finished(&session, outcome.history_len);
                metrics.turn("replied", started.elapsed());
                TurnResult::Replied(outcome.reply)
            }
            Err(error) => {
                let failure = self.failure(&session, error);
                metrics.turn(failure.kind.label(), started.elapsed());
                TurnResult::Failed(failure)
            }
        }
    }

    /// What a failed turn of `session` comes to: its kind, and what the person was told.
    fn failure(&self, session: &SessionId, error: TurnError) -> TurnFailure {
        let kind = match error.kind() {
            FailureKind::Cancelled if self.closed.load(Ordering::SeqCst) => FailureKind::Stopping,
            kind => kind,
        };
        let told = match &error {
            TurnError::Cancelled if kind == FailureKind::Stopping => {
                "The gateway stopped before this turn finished (its grace period ran out); ask \
                 again when it is back."
                    .to_owned()
            }
            TurnError::Cancelled => "The turn was cancelled with /stop.".to_owned(),
            TurnError::Persist(store) => {
                tracing::error!(session = %session, error = %store, "Inbound message could not be persisted; not acknowledged.");
                store.to_string()
            }
            TurnError::Llm(llm) => llm.user_message(),
            TurnError::Repeating(tool) => loop_breaker::stop_message(tool),
            other => format!("Error: {other}"),
        };
        if !matches!(error, TurnError::Cancelled | TurnError::Persist(_)) {
            tracing::warn!(session = %session, error = %error, "Turn failed.");
        }
        TurnFailure::new(kind, told)
    }
}
