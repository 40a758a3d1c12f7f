//! One app message as a turn: [`AppSink`] turns the agent's output into [`TurnEvent`]s, and
//! [`drive`] turns those into what the app is sent ([`Out`]), while it keeps the rules every
//! channel keeps:
//!
//! - an approval question ends the answer (the app cannot show a question and wait); the turn
//!   is *parked* with its conversation and the person answers `yes CODE` as their next message,
//!   whose answer then carries the rest of the parked turn (see `api.rs`);
//! - a client that goes away cancels its turn as `/stop` does, which the agent loop records as
//!   it records Ctrl-C at the terminal; a turn still queued behind another of the conversation
//!   (the app sent again before the answer came) is cancelled the moment it starts, and the
//!   turn running then, another request's, is left alone;
//! - only the model's answer text is streamed: the agent's deltas never carry tool calls or
//!   reasoning, and what the app was sent is what the conversations index records.

use std::collections::VecDeque;
use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::mpsc;

use super::Endpoint;
use super::error::{ApiError, ErrorKind};
use super::thread::Found;
use crate::core::audience::Readers;
use crate::core::origin::Origin;
use crate::core::ports::approvals::ApprovalRequest;
use crate::core::ports::channel::{
    CollectingSink, DeliveryError, Dispatch, Inbound, ReplySink, TurnResult,
};
use crate::core::session::SessionId;

/// What the agent did during a turn.
#[derive(Debug)]
pub enum TurnEvent {
    /// The turn started: it left the conversation's queue, its message is recorded.
    Started,
    /// Answer text streamed.
    Delta(String),
    /// A fallback model starts over.
    Reset,
    /// A command waits for the owner's approval.
    Ask(ApprovalRequest),
    /// The turn ended.
    End(TurnResult),
}

/// Forwards a turn's output as [`TurnEvent`]s.
struct AppSink {
    events: mpsc::UnboundedSender<TurnEvent>,
}

#[async_trait]
impl ReplySink for AppSink {
    fn streaming(&self) -> bool {
        true
    }

    async fn delta(&self, text: &str) {
        let _ = self.events.send(TurnEvent::Delta(text.to_owned()));
    }

    async fn reset(&self) {
        let _ = self.events.send(TurnEvent::Reset);
    }

    /// The agent says "typing" as a turn starts: the one sign that this message's turn, not
    /// one queued before it, is the session's running turn, which `/stop` cancels.
    async fn typing(&self, active: bool) {
        if active {
            let _ = self.events.send(TurnEvent::Started);
        }
    }

    async fn deliver(&self, _text: &str) -> Result<(), DeliveryError> {
        // The final text comes with the turn's result, which tells a reply from a failure.
        Ok(())
    }

    async fn ask(&self, request: &ApprovalRequest) -> Result<bool, DeliveryError> {
        Ok(self.events.send(TurnEvent::Ask(request.clone())).is_ok())
    }
}

/// A submitted turn's events.
pub struct Running {
    events: mpsc::UnboundedReceiver<TurnEvent>,
    /// Events read ahead (to see whether a parked turn ended) and not yet handled.
    ahead: VecDeque<TurnEvent>,
    /// Whether [`TurnEvent::Started`] was read: the turn runs (or ran), it is not queued.
    started: bool,
}

impl Running {
    async fn next(&mut self) -> Option<TurnEvent> {
        let event = match self.ahead.pop_front() {
            Some(event) => Some(event),
            None => self.events.recv().await,
        };
        self.started |= matches!(event, Some(TurnEvent::Started));
        event
    }

    /// Waits for the turn's end, passing over what it streams.
    pub async fn result(&mut self) -> TurnResult {
        loop {
            match self.next().await {
                Some(TurnEvent::End(result)) => return result,
                Some(_) => {}
                None => return TurnResult::Dropped,
            }
        }
    }

    /// Whether the turn ended already (events read to find out are kept).
    pub fn ended(&mut self) -> bool {
        while let Ok(event) = self.events.try_recv() {
            self.ahead.push_back(event);
        }
        self.ahead.iter().any(|e| matches!(e, TurnEvent::End(_)))
    }
}

/// Submits `text` (with `images`, saved at those paths) to `session` as the owner's message.
pub fn submit(
    dispatch: &dyn Dispatch,
    tasks: &tokio_util::task::TaskTracker,
    session: SessionId,
    text: String,
    images: Vec<String>,
) -> Result<Running, ApiError> {
    let (sender, events) = mpsc::unbounded_channel();
    let sink = Arc::new(AppSink {
        events: sender.clone(),
    });
    // The API is the owner's: whoever holds its token holds the owner's rights.
    let mut inbound =
        Inbound::new(session, text, Origin::owner_as("http"), sink).read_by(Readers::Owner);
    inbound.images = images;
    let done = dispatch.submit(inbound).map_err(|_| shutting_down())?;
    tasks.spawn(async move {
        let result = done.await.unwrap_or(TurnResult::Dropped);
        let _ = sender.send(TurnEvent::End(result));
    });
    Ok(Running {
        events,
        ahead: VecDeque::new(),
        started: false,
    })
}

/// Cancels `key`'s running turn as the chat command `/stop` does.
pub fn stop(dispatch: &dyn Dispatch, key: &SessionId) {
    let inbound = Inbound::new(
        key.clone(),
        "/stop",
        Origin::owner_as("http"),
        Arc::new(CollectingSink::new()),
    );
    if dispatch.submit(inbound).is_err() {
        tracing::debug!(session = %key, "No /stop for a client that left: the gateway is stopping.");
    }
}

/// The error for a gateway that no longer takes messages.
pub fn shutting_down() -> ApiError {
    ApiError::new(ErrorKind::Unavailable, "squidbot is shutting down")
}

/// What the app is sent.
#[derive(Debug)]
pub enum Out {
    /// Answer text.
    Text(String),
    /// The end: the answer is complete, or it failed with this error.
    End(Result<(), ApiError>),
}

/// Said in the stream when a fallback model starts the answer over (the app cannot take back
/// what it shows).
const RESTART_NOTE: &str = "\n\n(The answer starts over with another model.)\n\n";

/// One app request being answered: its conversation and what it recorded.
pub struct Exchange {
    /// The conversation found for it.
    pub found: Found,
    /// The conversation's key as a session id.
    pub key: SessionId,
    /// The person's text, as the app sent it (for the index).
    pub user: String,
}

/// Feeds `running`'s events to `out` as the app's answer, `prefix` first; parks the turn when
/// it asks for approval, stops it when the client goes away, and records the exchange.
pub async fn drive(
    endpoint: Arc<Endpoint>,
    exchange: Exchange,
    mut running: Running,
    prefix: String,
    out: mpsc::UnboundedSender<Out>,
) {
    let mut sent = String::new();
    let mut streamed = false;
    let mut asked = false;
    let send = |text: String, sent: &mut String| {
        sent.push_str(&text);
        let _ = out.send(Out::Text(text));
    };
    if !prefix.is_empty() {
        send(prefix, &mut sent);
    }
    let end = loop {
        let event = tokio::select! {
            biased;
            () = out.closed() => break None,
            event = running.next() => event,
        };
        match event {
            Some(TurnEvent::Started) => {}
            Some(TurnEvent::Delta(text)) => {
                streamed = true;
                send(text, &mut sent);
            }
            Some(TurnEvent::Reset) => send(RESTART_NOTE.to_owned(), &mut sent),
            Some(TurnEvent::Ask(request)) => {
                let gap = if sent.is_empty() { "" } else { "\n\n" };
                send(format!("{gap}{}", request.question()), &mut sent);
                asked = true;
                break Some(Ok(()));
            }
            Some(TurnEvent::End(TurnResult::Replied(reply))) => {
                if !streamed {
                    send(reply, &mut sent);
                }
                break Some(Ok(()));
            }
            Some(TurnEvent::End(TurnResult::Failed(failure))) => {
                let told = failure.told;
                let told = told.strip_prefix("Error: ").unwrap_or(&told).to_owned();
                if sent.is_empty() {
                    break Some(Err(ApiError::new(ErrorKind::TurnFailed, told)));
                }
                send(format!("\n\n{told}"), &mut sent);
                break Some(Ok(()));
            }
            Some(TurnEvent::End(TurnResult::Dropped | TurnResult::Replaced)) | None => {
                break Some(Err(shutting_down()));
            }
        }
    };
    // The turn is parked before the answer ends, so the app's next message finds it.
    let left = match (&end, asked) {
        (Some(_), true) => {
            endpoint.park(exchange.key.clone(), running);
            None
        }
        (Some(_), false) => None,
        (None, _) => Some(running),
    };
    if !sent.is_empty() {
        endpoint
            .kept
            .threads
            .record(&exchange.found, &exchange.user, &sent)
            .await;
    }
    if let Some(end) = end {
        let _ = out.send(Out::End(end));
    }
    if let Some(running) = left {
        cancel(endpoint.dispatch.as_ref(), &exchange.key, running).await;
    }
}

/// Cancels `running`, whose app went away: now if it runs; when it starts if it is still
/// queued behind another turn of the conversation (which `/stop` now would cancel instead).
async fn cancel(dispatch: &dyn Dispatch, key: &SessionId, mut running: Running) {
    if !running.started {
        tracing::info!(session = %key, "The app went away while its message waited for its turn; the turn is cancelled when it starts.");
        loop {
            match running.next().await {
                Some(TurnEvent::Started) => break,
                Some(TurnEvent::End(_)) | None => return,
                Some(_) => {}
            }
        }
    }
    tracing::info!(session = %key, "The app went away during a turn; it is cancelled.");
    stop(dispatch, key);
}
