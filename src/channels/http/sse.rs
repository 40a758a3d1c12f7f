//! The streaming reply sink behind `Accept: text/event-stream`.
//!
//! Events, in order: `delta` (`{"text"}`) as the model streams, `reset` when a fallback model
//! starts over (the client discards the text shown so far), then exactly one of `done`
//! (`{"reply"}`) or `error` (`{"error"}`). An `approval` event (as on the `events` stream)
//! comes whenever a command waits for the owner.

use async_trait::async_trait;
use axum::response::sse::Event;
use serde_json::json;
use tokio::sync::mpsc;

use std::sync::Arc;

use super::hub::{HttpHub, HubEvent};
use crate::core::ports::approvals::ApprovalRequest;
use crate::core::ports::channel::{DeliveryError, ReplySink};
use crate::core::session::SessionId;

/// Forwards a turn's stream into an SSE response.
pub struct SseSink {
    events: mpsc::UnboundedSender<Event>,
    hub: Arc<HttpHub>,
    session: SessionId,
}

impl SseSink {
    /// A sink feeding `events`; approval requests also go to `session`'s `events` stream on
    /// `hub`, where a client that is not reading this response sees them.
    pub fn new(
        events: mpsc::UnboundedSender<Event>,
        hub: Arc<HttpHub>,
        session: SessionId,
    ) -> Self {
        Self {
            events,
            hub,
            session,
        }
    }
}

/// An SSE event with a JSON payload.
pub fn event(name: &str, data: serde_json::Value) -> Event {
    Event::default().event(name).data(data.to_string())
}

#[async_trait]
impl ReplySink for SseSink {
    fn streaming(&self) -> bool {
        true
    }

    async fn delta(&self, text: &str) {
        let _ = self.events.send(event("delta", json!({ "text": text })));
    }

    async fn reset(&self) {
        let _ = self.events.send(event("reset", json!({})));
    }

    async fn deliver(&self, _text: &str) -> Result<(), DeliveryError> {
        // The final event is sent from the turn's result, which tells a reply from an error.
        Ok(())
    }

    async fn ask(&self, request: &ApprovalRequest) -> Result<bool, DeliveryError> {
        let approval = HubEvent::approval(&self.session, request);
        let _ = self
            .events
            .send(event(approval.name, approval.data.clone()));
        self.hub.post_event(&self.session, approval);
        Ok(true)
    }
}
