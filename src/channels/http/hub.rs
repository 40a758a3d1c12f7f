//! [`HttpHub`]: where proactive messages (cron results, heartbeat alerts) and approval requests
//! for `http:` sessions wait for their reader.
//!
//! Each session has a mailbox: a live broadcast for connected `events` streams and a bounded
//! backlog for when nobody is listening, replayed to the next reader. The reply itself is
//! already persisted in the session's JSONL by the agent loop; the mailbox is only delivery.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::core::ports::approvals::ApprovalRequest;
use crate::core::ports::channel::{DeliveryError, ReplySink};
use crate::core::session::SessionId;

/// Messages kept per session while nobody listens.
const BACKLOG: usize = 100;
/// Mailboxes kept before idle ones are pruned.
const MAX_MAILBOXES: usize = 1_000;

/// One event of a session's `events` stream: `message` (`{"text"}`) or `approval`
/// (`{"id", "session", "tool", "command", "expires_at"}`).
#[derive(Debug, Clone, PartialEq)]
pub struct HubEvent {
    /// The SSE event name.
    pub name: &'static str,
    /// Its JSON payload.
    pub data: Value,
}

impl HubEvent {
    /// A message to the session.
    pub fn message(text: &str) -> Self {
        Self {
            name: "message",
            data: json!({ "text": text }),
        }
    }

    /// A request for the owner's approval, answered with `POST …/approvals/{id}` under
    /// `session`, the API's session id the client used (the request's own session is another
    /// after `/new`).
    pub fn approval(session: &SessionId, request: &ApprovalRequest) -> Self {
        Self {
            name: "approval",
            data: approval_json(session, request),
        }
    }

    /// The turn's result after an approval answered a plain `POST` at once: `reply` or
    /// `error`, on the session's events.
    pub fn outcome(name: &'static str, data: Value) -> Self {
        Self { name, data }
    }
}

/// An approval request as the API shows it, in the events and in a plain POST's answer: the
/// session named as `/status` names it, and how to answer (a client that never read the
/// documentation can still do it). `session` is the API session the client used, which after
/// `/new` is not the request's own (the route resolves it back).
pub fn approval_json(session: &SessionId, request: &ApprovalRequest) -> Value {
    let path = format!("/v1/sessions/{}/approvals/{}", session.key(), request.id);
    json!({
        "id": request.id,
        "session": session.to_string(),
        "tool": request.tool,
        "command": request.command,
        "reason": request.reason,
        "expires_at": request.expires_at.to_rfc3339(),
        "answer": {
            "method": "POST",
            "path": path,
            "approve": {"decision": "approve"},
            "deny": {"decision": "deny"},
        },
    })
}

#[derive(Debug)]
struct Mailbox {
    backlog: VecDeque<HubEvent>,
    live: broadcast::Sender<HubEvent>,
}

impl Default for Mailbox {
    fn default() -> Self {
        Self {
            backlog: VecDeque::new(),
            live: broadcast::channel(64).0,
        }
    }
}

/// Mailboxes of the HTTP sessions.
#[derive(Debug, Default)]
pub struct HttpHub {
    /// A std mutex: held for map operations only, never across an await.
    boxes: Mutex<HashMap<SessionId, Mailbox>>,
}

impl HttpHub {
    /// An empty hub.
    pub fn new() -> Self {
        Self::default()
    }

    /// Hands `text` to the session's live readers, or keeps it for the next one.
    pub fn post(&self, session: &SessionId, text: &str) {
        self.post_event(session, HubEvent::message(text));
    }

    /// Hands `event` to the session's live readers, or keeps it for the next one.
    pub fn post_event(&self, session: &SessionId, event: HubEvent) {
        let mut boxes = self.boxes.lock().unwrap_or_else(|p| p.into_inner());
        prune(&mut boxes);
        let mailbox = boxes.entry(session.clone()).or_default();
        if mailbox.live.receiver_count() > 0 && mailbox.live.send(event.clone()).is_ok() {
            return;
        }
        if mailbox.backlog.len() == BACKLOG {
            mailbox.backlog.pop_front();
            tracing::warn!(session = %session, "HTTP mailbox full; dropped its oldest message (still in history).");
        }
        mailbox.backlog.push_back(event);
    }

    /// The backlog (taken) and a live subscription, for one `events` stream.
    pub fn subscribe(&self, session: &SessionId) -> (Vec<HubEvent>, broadcast::Receiver<HubEvent>) {
        let mut boxes = self.boxes.lock().unwrap_or_else(|p| p.into_inner());
        prune(&mut boxes);
        let mailbox = boxes.entry(session.clone()).or_default();
        (
            mailbox.backlog.drain(..).collect(),
            mailbox.live.subscribe(),
        )
    }

    /// A sink that posts to `session`'s mailbox.
    pub fn outbox(self: &Arc<Self>, session: &SessionId) -> Arc<dyn ReplySink> {
        Arc::new(MailboxSink {
            hub: self.clone(),
            session: session.clone(),
        })
    }
}

fn prune(boxes: &mut HashMap<SessionId, Mailbox>) {
    if boxes.len() >= MAX_MAILBOXES {
        boxes.retain(|_, m| !m.backlog.is_empty() || m.live.receiver_count() > 0);
    }
}

struct MailboxSink {
    hub: Arc<HttpHub>,
    session: SessionId,
}

#[async_trait]
impl ReplySink for MailboxSink {
    async fn deliver(&self, text: &str) -> Result<(), DeliveryError> {
        self.hub.post(&self.session, text);
        Ok(())
    }

    async fn ask(&self, request: &ApprovalRequest) -> Result<bool, DeliveryError> {
        self.hub
            .post_event(&self.session, HubEvent::approval(&self.session, request));
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn backlog_is_replayed_then_live_messages_flow() {
        let hub = HttpHub::new();
        let session = SessionId::new("http", "a").unwrap();
        hub.post(&session, "one");
        hub.post(&session, "two");
        let (backlog, mut live) = hub.subscribe(&session);
        assert_eq!(
            backlog,
            [HubEvent::message("one"), HubEvent::message("two")]
        );
        hub.post(&session, "three");
        assert_eq!(live.recv().await.unwrap(), HubEvent::message("three"));
        let (again, _) = hub.subscribe(&session);
        assert!(again.is_empty(), "a delivered message is not replayed");
    }
}
