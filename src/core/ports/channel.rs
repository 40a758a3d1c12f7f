//! **API Boundary.** The channel ports: how messages enter the agent and replies leave it.
//!
//! - [`ReplySink`]: where one turn's output goes (streamed text, typing, the final reply).
//! - [`Inbound`]: one received message, with its origin and its readers (the facts its channel
//!   states at its edge), its reply sink and its acknowledgement hook.
//! - [`Dispatch`]: the router's entry point; channels submit inbound messages through it.
//! - [`Channel`]: a long-running source of messages (each channel of
//!   `crate::channels::plugins`, and cron), run and restarted by the gateway's supervisor,
//!   which can also ask it for an [`Outbox`] to send proactive messages (cron, heartbeat) to
//!   one of its sessions, with who reads them there.
//!
//! The acknowledgement rule: a channel acknowledges a message (read marker, `\Seen`, HTTP
//! answer) only after [`Inbound::persisted`] fired, so a crash never loses a message the user
//! sent.

use std::error::Error as StdError;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::core::audience::Readers;
use crate::core::error_chain::Chain;
use crate::core::origin::Origin;
use crate::core::ports::approvals::ApprovalRequest;
use crate::core::ports::llm::LlmClient;
use crate::core::ports::tool::Tool;
use crate::core::session::SessionId;

/// The cause of a channel or delivery failure, kept whole and printed with its sources
/// ([`Chain`]), so a log line shows its full chain even when the cause is a foreign error whose
/// useful words sit in its own sources.
pub type Cause = Box<dyn StdError + Send + Sync>;

/// Delivery failed; the turn is still persisted, the failure is logged and reported.
#[derive(Debug, thiserror::Error)]
#[error("delivery through {channel} failed: {}", Chain(error.as_ref()))]
pub struct DeliveryError {
    /// The channel name.
    pub channel: String,
    /// What went wrong.
    pub error: Cause,
}

impl DeliveryError {
    /// A failed delivery through `channel`; `source` is an error or a message.
    pub fn new(channel: &str, source: impl Into<Cause>) -> Self {
        Self {
            channel: channel.to_owned(),
            error: source.into(),
        }
    }
}

/// Receives one turn's output.
#[async_trait]
pub trait ReplySink: Send + Sync {
    /// Whether this sink wants text deltas while the model streams.
    fn streaming(&self) -> bool {
        false
    }

    /// A piece of streamed text (only called when [`ReplySink::streaming`] is true).
    async fn delta(&self, _text: &str) {}

    /// The text streamed so far is void (a fallback model starts over).
    async fn reset(&self) {}

    /// The turn started (`true`) or ended (`false`): channels show a typing notice.
    async fn typing(&self, _active: bool) {}

    /// Delivers the final reply (or a user-facing error text).
    async fn deliver(&self, text: &str) -> Result<(), DeliveryError>;

    /// Shows the owner a request for approval, where they will see it: a message in the room
    /// or thread, a mail, an HTTP `approval` event, a terminal prompt. Returns whether it was
    /// shown; the answer comes back through the gateway's approvals registry. A sink that
    /// cannot ask (the default) returns `false`, and the command is refused.
    async fn ask(&self, _request: &ApprovalRequest) -> Result<bool, DeliveryError> {
        Ok(false)
    }
}

/// A sink that keeps what was delivered, for callers that want a turn's reply as a value (the
/// one-shot terminal mode, sub-agents, tests).
#[derive(Debug, Default)]
pub struct CollectingSink {
    /// A std mutex: held only to push or read, never across an await.
    delivered: Mutex<Vec<String>>,
}

impl CollectingSink {
    /// An empty sink.
    pub fn new() -> Self {
        Self::default()
    }

    /// Everything delivered, in order.
    pub fn delivered(&self) -> Vec<String> {
        self.delivered
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

#[async_trait]
impl ReplySink for CollectingSink {
    async fn deliver(&self, text: &str) -> Result<(), DeliveryError> {
        self.delivered
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(text.to_owned());
        Ok(())
    }
}

/// How a dispatched turn ended, for submitters that wait for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnResult {
    /// The reply that was delivered.
    Replied(String),
    /// The turn failed: why, and what the user was told.
    Failed(TurnFailure),
    /// The gateway shut down before the turn ran; the message was not persisted.
    Dropped,
    /// A correction of the message (an edit) arrived before its turn started and took its
    /// place: this message was not persisted, its correction is (see [`Inbound::corrects`]).
    Replaced,
}

/// A failed turn: its kind, from which a front end's status and the turn metric's label are
/// derived (each in one place), and the text the person was told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnFailure {
    /// What went wrong.
    pub kind: FailureKind,
    /// What the person was told (or, where nobody was, the error).
    pub told: String,
}

impl TurnFailure {
    /// A failure of `kind`, told as `told`.
    pub fn new(kind: FailureKind, told: impl Into<String>) -> Self {
        Self {
            kind,
            told: told.into(),
        }
    }
}

/// Why a turn failed, as a closed set: a front end maps each to its own status (the HTTP API
/// in one function), and [`FailureKind::label`] names it in metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// The person stopped it (`/stop`, Ctrl-C).
    Cancelled,
    /// The gateway stopped before it finished (its grace period ran out).
    Stopping,
    /// A budget (`budgets.*`) is used up.
    Budget,
    /// The model did not answer in time.
    Timeout,
    /// The model failed or answered with nothing usable.
    Llm,
    /// The model went round in circles: the same call again and again, or round after round
    /// of tools without an answer.
    Runaway,
    /// The history could not be read or written.
    Storage,
    /// The answer could not be delivered.
    Delivery,
}

impl FailureKind {
    /// The `outcome` label of the turn metric: `cancelled` for a turn someone stopped,
    /// `failed` for every other.
    pub fn label(self) -> &'static str {
        match self {
            Self::Cancelled | Self::Stopping => "cancelled",
            Self::Budget
            | Self::Timeout
            | Self::Llm
            | Self::Runaway
            | Self::Storage
            | Self::Delivery => "failed",
        }
    }
}

/// One message received by a channel.
pub struct Inbound {
    /// The session it belongs to.
    pub session: SessionId,
    /// The text (attachments are referenced by path in it).
    pub text: String,
    /// Who sent it: decides what the turn may do and how it is recorded.
    pub origin: Origin,
    /// Routing data (room, thread, mail headers) kept for replies and visible to tools.
    pub metadata: Map<String, Value>,
    /// Where the reply goes.
    pub reply: Arc<dyn ReplySink>,
    /// Who reads the reply besides the bot, as the channel states it at its edge (a room's
    /// members, a mail's one correspondent, the owner at the terminal or the API, a job's
    /// target): decides the turn's [`Audience`], so the owner's private memory enters only
    /// turns no one else reads. [`Readers::Unknown`] unless stated, which keeps it out.
    ///
    /// [`Audience`]: crate::core::audience::Audience
    pub readers: Readers,
    /// Fired once the message is durably persisted.
    pub persisted: Option<oneshot::Sender<()>>,
    /// A client to use instead of the default pool (the heartbeat's pool).
    pub llm: Option<Arc<dyn LlmClient>>,
    /// The channel's id of what was received, for a channel that may hand the same message
    /// over again after a crash (see [`crate::core::message::Message::source_id`]).
    pub source_id: Option<String>,
    /// Images received with it, saved at these paths (see
    /// [`crate::core::message::Message::images`]).
    pub images: Vec<String>,
    /// The channel's id of this message, where a later message may correct it (a Matrix
    /// event id).
    pub message_id: Option<String>,
    /// The [`Self::message_id`] of an earlier message this one corrects (an edit). If that one
    /// is still waiting for its turn, it is dropped and this one takes its place, as if the
    /// person had written it so; if it was answered (or is being answered), this one is a new
    /// turn that says it is a correction.
    pub corrects: Option<String>,
}

impl Inbound {
    /// A message with no metadata and no client override, whose readers are unknown until
    /// [`Self::read_by`] states them.
    pub fn new(
        session: SessionId,
        text: impl Into<String>,
        origin: Origin,
        reply: Arc<dyn ReplySink>,
    ) -> Self {
        Self {
            session,
            text: text.into(),
            origin,
            metadata: Map::new(),
            reply,
            readers: Readers::Unknown,
            persisted: None,
            llm: None,
            source_id: None,
            images: Vec::new(),
            message_id: None,
            corrects: None,
        }
    }

    /// The same message, read by `readers` (see [`Self::readers`]).
    pub fn read_by(mut self, readers: Readers) -> Self {
        self.readers = readers;
        self
    }
}

/// The router refused a message because the gateway is shutting down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the gateway is shutting down; message not accepted")]
pub struct DispatchClosed;

/// Accepts inbound messages and runs them as turns: in order within a session, in parallel
/// across sessions.
pub trait Dispatch: Send + Sync {
    /// Queues `inbound`; the receiver yields how the turn ended.
    fn submit(&self, inbound: Inbound) -> Result<oneshot::Receiver<TurnResult>, DispatchClosed>;
}

/// Extra tools a turn of a session gets (built per turn, never registered).
pub trait TurnTools: Send + Sync {
    /// The tools for one turn of `session` with the channel's routing `metadata`, started by
    /// `origin` (which decides, for one, whether tools that schedule jobs are offered).
    fn for_turn(
        &self,
        session: &SessionId,
        metadata: &Map<String, Value>,
        origin: &Origin,
    ) -> Vec<Arc<dyn Tool>>;
}

/// Why a channel task stopped with an error; the supervisor logs it and restarts the task.
#[derive(Debug, thiserror::Error)]
#[error("channel {channel}: {}", Chain(error.as_ref()))]
pub struct ChannelError {
    /// The channel name.
    pub channel: String,
    /// What went wrong.
    pub error: Cause,
    /// Whether retrying cannot help (a refused login, a wrong token): the supervisor then
    /// stops the channel and reports it broken instead of restarting it in a loop.
    pub permanent: bool,
}

impl ChannelError {
    /// An error of `channel`; `source` is an error or a message.
    pub fn new(channel: &str, source: impl Into<Cause>) -> Self {
        Self {
            channel: channel.to_owned(),
            error: source.into(),
            permanent: false,
        }
    }

    /// An error only a change of configuration (or on the server) can fix.
    pub fn permanent(channel: &str, source: impl Into<Cause>) -> Self {
        Self {
            permanent: true,
            ..Self::new(channel, source)
        }
    }
}

/// Where a running channel says it is alive, so `/status`, `/metrics` and `/readyz` can tell a
/// quiet channel from a stuck one; the gateway keeps the times.
pub trait Alive: Send + Sync {
    /// Declares that a healthy round of this channel ends within `limit` (a sync's long-poll
    /// timeout plus slack, an IDLE's re-arm period plus slack).
    fn expect_rounds(&self, limit: Duration);
    /// Records that a message arrived.
    fn inbound(&self);
    /// Records that a round succeeded.
    fn round(&self);
}

/// What a running channel gets from the supervisor.
#[derive(Clone)]
pub struct ChannelContext {
    /// Where to submit inbound messages.
    pub dispatch: Arc<dyn Dispatch>,
    /// Cancelled when the gateway shuts down: stop accepting, return promptly.
    pub shutdown: CancellationToken,
    /// Cancelled by the channel once it is up (connected, listening); feeds `/readyz`.
    pub ready: CancellationToken,
    /// Where a channel spawns the work it leaves running for a message (waiting for the turn's
    /// outcome, acknowledging it once persisted): the gateway waits for every task here before
    /// it exits, so an acknowledgement or a job's recorded outcome is never cut off.
    pub tasks: TaskTracker,
    /// Where the channel reports inbound events and successful rounds (syncs, IDLE or poll
    /// rounds), so `/status`, `/metrics` and `/readyz` can tell a quiet channel from a stuck one.
    pub liveness: Arc<dyn Alive>,
}

/// A long-running message source, run by the supervisor.
#[async_trait]
pub trait Channel: Send + Sync {
    /// The channel's name; also the session prefix it serves. Routing keys, owner ids and
    /// names are the channel's own: core never spells one.
    fn name(&self) -> &str;

    /// Runs until `context.shutdown` is cancelled (then returns `Ok`) or it fails (then the
    /// supervisor restarts it with backoff).
    async fn run(&self, context: ChannelContext) -> Result<(), ChannelError>;

    /// Where a proactive message (cron, heartbeat) to `session` goes and who reads it there,
    /// if this channel serves that session and can reach it now.
    async fn outbox(&self, _session: &SessionId, _metadata: &Map<String, Value>) -> Option<Outbox> {
        None
    }
}

/// Where a message the bot starts (a cron job's, a check-in) goes, and who reads it there, as
/// the channel serving the session states it: the job's turn is private exactly when its
/// target is.
pub struct Outbox {
    /// Where the turn's reply goes.
    pub sink: Arc<dyn ReplySink>,
    /// Who reads it (see [`Inbound::readers`]).
    pub readers: Readers,
}

/// No running channel can deliver to a session.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no running channel can deliver to {session}: {reason}")]
pub struct NoRoute {
    /// The target session.
    pub session: String,
    /// Why (`channel matrix is not running`, `channel xmpp does not exist`).
    pub reason: String,
}

/// Finds the outbox of a session among the running channels (implemented by the supervisor).
#[async_trait]
pub trait Outboxes: Send + Sync {
    /// Where a proactive message to `session` goes and who reads it, or why there is none.
    async fn outbox(
        &self,
        session: &SessionId,
        metadata: &Map<String, Value>,
    ) -> Result<Outbox, NoRoute>;
}

/// The last session a person ([`Origin::Person`]) talked in, with its routing metadata;
/// the heartbeat's default target. Implementations persist it across restarts.
pub trait ActivityLog: Send + Sync {
    /// Records that a person sent a message in `session`.
    fn record(&self, session: &SessionId, metadata: &Map<String, Value>);
    /// The most recent such session, if any.
    fn last(&self) -> Option<(SessionId, Map<String, Value>)>;
}

#[cfg(test)]
mod tests {
    use std::fmt;

    use super::*;

    /// A foreign error that keeps what a person can act on in its source, as reqwest's does.
    #[derive(Debug)]
    struct Sending(std::io::Error);

    impl fmt::Display for Sending {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("error sending request")
        }
    }

    impl StdError for Sending {
        fn source(&self) -> Option<&(dyn StdError + 'static)> {
            Some(&self.0)
        }
    }

    fn refused() -> Sending {
        Sending(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "Connection refused",
        ))
    }

    #[test]
    fn channel_and_delivery_errors_print_their_causes_whole_chain() {
        assert_eq!(
            ChannelError::new("api", refused()).to_string(),
            "channel api: error sending request: Connection refused"
        );
        assert_eq!(
            DeliveryError::new("api", refused()).to_string(),
            "delivery through api failed: error sending request: Connection refused"
        );
        assert_eq!(
            DeliveryError::new("api", "no such room").to_string(),
            "delivery through api failed: no such room"
        );
    }
}
