//! [`TurnApprovals`]: one turn's approval gate, the [`ApprovalGate`] tools wait on.
//!
//! It holds the turn's reply sink and asks it directly: the question is shown where the turn's
//! replies go, redacted of known secrets, and only where someone who may answer it reads (the
//! owner asked, or the channel states the owner reads there). The answer comes back through
//! the daemon's [`Approvals`] registry.
//!
//! [`TurnGates`] opens one per turn for the agent, through core's [`ApprovalGates`] port: the
//! composition root builds it over the gateway's registry.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;

use super::{ApprovalMode, ApprovalSettings, Approvals, Decision};
use crate::core::audience::Readers;
use crate::core::origin::Origin;
use crate::core::ports::approvals::{
    ApprovalGate, ApprovalRequest, MAX_QUESTION_BYTES, Refusal, Requester,
};
use crate::core::ports::channel::ReplySink;
use crate::core::ports::gates::ApprovalGates;
use crate::core::redact::Redactor;
use crate::core::session::SessionId;

/// The approval side of one turn: who started it, where its questions go, whether it was
/// already refused.
pub struct TurnApprovals {
    approvals: Option<Arc<Approvals>>,
    mode: ApprovalMode,
    timeout: Duration,
    session: SessionId,
    origin: Origin,
    /// Who reads the turn's replies, as its channel stated: whether the owner can see a
    /// question asked there.
    readers: Readers,
    /// The turn's reply sink: the question is shown where the turn's replies go, so the code
    /// it carries is answerable only there.
    sink: Arc<dyn ReplySink>,
    /// Known secrets come out of the command and the reason before they are shown.
    redactor: Arc<Redactor>,
    refused: AtomicBool,
}

impl std::fmt::Debug for TurnApprovals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnApprovals")
            .field("mode", &self.mode)
            .field("session", &self.session)
            .field("origin", &self.origin)
            .field("refused", &self.refused)
            .finish_non_exhaustive()
    }
}

impl TurnApprovals {
    /// The gate of a turn of `session` started by `origin` and read by `readers`; questions
    /// are shown through `sink` (the turn's), redacted by `redactor`.
    pub fn new(
        approvals: Option<Arc<Approvals>>,
        settings: ApprovalSettings,
        session: SessionId,
        origin: Origin,
        readers: Readers,
        sink: Arc<dyn ReplySink>,
        redactor: Arc<Redactor>,
    ) -> Self {
        Self {
            approvals,
            mode: settings.mode,
            timeout: settings.timeout,
            session,
            origin,
            readers,
            sink,
            redactor,
            refused: AtomicBool::new(false),
        }
    }

    async fn ask(&self, tool: &str, command: &str, reason: &str) -> Result<(), Refusal> {
        let who = match &self.origin {
            Origin::Person { .. } => None,
            Origin::Heartbeat => Some("heartbeat turns never ask"),
            Origin::Cron { .. } => Some("scheduled jobs never ask"),
            Origin::SubAgent { .. } => Some("sub-agents never ask"),
        };
        if let Some(who) = who {
            return Err(Refusal::Unattended(who.to_owned()));
        }
        // The question goes where the turn's replies go: only if the owner asked, or reads
        // there (a shared room they are in), can anyone who may answer it see it. A mail from
        // someone else, or a room without the owner, is refused without asking.
        if !self.origin.is_owner() && !self.readers.include_owner() {
            return Err(Refusal::Unattended(
                "the request is not from the owner, who alone can approve, and the owner does not \
                 read this conversation"
                    .to_owned(),
            ));
        }
        let Some(approvals) = &self.approvals else {
            return Err(Refusal::Unattended(
                "this channel cannot ask the owner".to_owned(),
            ));
        };
        if approvals.is_stopping() {
            return Err(Refusal::Stopping);
        }
        let requester = match &self.origin {
            Origin::Person { sender, owner } => Some(Requester {
                id: sender.clone(),
                owner: *owner,
            }),
            _ => None,
        };
        let question = ApprovalRequest::sketch(tool, command, reason, requester.clone());
        let bytes = self.redactor.redact(&question.question()).len();
        if bytes > MAX_QUESTION_BYTES {
            tracing::info!(session = %self.session, bytes, "Approval not asked: the question would not fit one message.");
            return Err(Refusal::TooLong { bytes });
        }
        let (request, decision) = approvals.request(
            &self.session,
            tool,
            command,
            reason,
            self.timeout,
            requester,
        );
        // Expires the request on every way out, a cancelled turn included, so no request is
        // left open that nobody waits for.
        let _open = ExpireOnDrop(approvals, &request.id);
        let mut shown = request.clone();
        shown.command = self.redactor.redact(&shown.command).into_owned();
        shown.reason = self.redactor.redact(&shown.reason).into_owned();
        let was_shown = match self.sink.ask(&shown).await {
            Ok(was_shown) => was_shown,
            Err(error) => {
                tracing::warn!(session = %self.session, error = %error, "Could not ask the owner for approval.");
                false
            }
        };
        if !was_shown {
            return Err(Refusal::Unattended(
                "the owner could not be asked on this channel".to_owned(),
            ));
        }
        match tokio::time::timeout(self.timeout, decision).await {
            Ok(Ok(Decision::Approve)) => Ok(()),
            Ok(Ok(Decision::Deny)) => Err(Refusal::Denied),
            Ok(Err(_)) if approvals.is_stopping() => Err(Refusal::Stopping),
            Ok(Err(_)) | Err(_) => Err(Refusal::Expired),
        }
    }
}

#[async_trait]
impl ApprovalGate for TurnApprovals {
    /// Whether no one can be asked in this turn: the heartbeat, a cron job, a sub-agent. Only
    /// what the owner granted ahead of time in the configuration runs with more than the
    /// read-only jail there.
    fn is_unattended(&self) -> bool {
        !matches!(self.origin, Origin::Person { .. })
    }

    /// Waits for permission to run `command` with `tool`; `reason` says why it needs it.
    async fn permit(&self, tool: &str, command: &str, reason: &str) -> Result<(), Refusal> {
        if self.mode == ApprovalMode::Off {
            return Ok(());
        }
        if self.refused.load(Ordering::SeqCst) {
            return Err(Refusal::EarlierRefusal);
        }
        let result = self.ask(tool, command, reason).await;
        if result.is_err() {
            self.refused.store(true, Ordering::SeqCst);
        }
        tracing::info!(session = %self.session, tool, approved = result.is_ok(), "Approval decided.");
        result
    }
}

/// Expires a request when dropped (answered requests are already gone: nothing happens).
struct ExpireOnDrop<'a>(&'a Approvals, &'a str);

impl Drop for ExpireOnDrop<'_> {
    fn drop(&mut self) {
        self.0.expire(self.1);
    }
}

/// The gateway's [`ApprovalGates`]: each turn's [`TurnApprovals`] over the daemon's registry,
/// as the settings say, redacting with the gateway's redactor. Without a registry (a
/// sub-agent's loop) a person's turn is refused unasked; the others never ask anyway.
pub struct TurnGates {
    approvals: Option<Arc<Approvals>>,
    settings: ApprovalSettings,
    redactor: Arc<Redactor>,
}

impl TurnGates {
    /// Gates over `approvals` as `settings` say; questions are redacted by `redactor`.
    pub fn new(
        approvals: Option<Arc<Approvals>>,
        settings: ApprovalSettings,
        redactor: Arc<Redactor>,
    ) -> Self {
        Self {
            approvals,
            settings,
            redactor,
        }
    }
}

impl ApprovalGates for TurnGates {
    fn open(
        &self,
        session: SessionId,
        origin: Origin,
        readers: Readers,
        sink: Arc<dyn ReplySink>,
    ) -> Arc<dyn ApprovalGate> {
        Arc::new(TurnApprovals::new(
            self.approvals.clone(),
            self.settings,
            session,
            origin,
            readers,
            sink,
            Arc::clone(&self.redactor),
        ))
    }
}
