//! Where replies leave: the reply sink of one mail (or one proactive message) and the retry
//! queue for mail the SMTP server did not take.
//!
//! A reply is never lost: before the first attempt the mail (with its Message-ID fixed) is
//! recorded in the progress file's queue, with the answered mail's state, in one write; it
//! leaves the queue when the server took it. A send that fails, or a crash during it, leaves
//! it there, and the retry loop sends it again with growing pauses (5 s doubling to 10 min),
//! also after a restart. Every generated Message-ID is recorded with it, so the loop guard
//! recognises the bot's own mail if it ever comes back.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::EmailError;
use super::progress::Progress;
use super::reply::{self, OutgoingMail};
use super::smtp::SmtpOutbox;
use crate::core::ports::approvals::ApprovalRequest;
use crate::core::ports::channel::{DeliveryError, ReplySink};
use crate::gateway::backoff::Backoff;

/// Pauses between attempts to send a queued mail: 5 s doubling to 10 min.
const RETRY_BACKOFF: Backoff = Backoff::new(Duration::from_secs(5), Duration::from_secs(600));
/// How long a mail being sent is left to its sender before the retry loop takes it over (a
/// crash): longer than one SMTP attempt.
const IN_FLIGHT: Duration = Duration::from_secs(120);

/// What every sink of the channel shares.
pub struct Mailer {
    /// The SMTP side.
    pub outbox: SmtpOutbox,
    /// The saved progress (answered states, own ids, the retry queue).
    pub progress: Arc<Progress>,
    /// Wakes the retry loop when a mail was queued.
    pub queued: Notify,
}

impl Mailer {
    /// Sends `mail` answering `uid` (if any). It is recorded as answered and queued first,
    /// so a crash before the server took it sends it after the restart; on failure the queue
    /// retries it.
    pub async fn send_or_queue(
        &self,
        mail: OutgoingMail,
        uid: Option<u32>,
    ) -> Result<(), EmailError> {
        // The retry loop leaves it alone while this attempt may still be under way.
        let send_by = now() + IN_FLIGHT.as_secs() as i64;
        self.progress.answering(uid, &mail, send_by)?;
        let result = self.outbox.send(&mail).await;
        let saved = match &result {
            Ok(()) => {
                tracing::debug!(to = %mail.to, message_id = %mail.message_id, "Mail sent.");
                crate::gateway::fault::crash_point("email:sent");
                self.progress.remove_pending(&mail.message_id)
            }
            Err(error) => {
                tracing::warn!(to = %mail.to, error = %error, "Sending mail failed; it will be retried.");
                let next = now() + RETRY_BACKOFF.delay(0).as_secs() as i64;
                let saved = self.progress.add_pending(mail, error.to_string(), next);
                self.queued.notify_one();
                saved
            }
        };
        if let Err(error) = saved {
            // The queue still holds the mail: at worst it is sent once more.
            tracing::warn!(error = %error, "Could not update the mail queue after a send.");
        }
        Ok(())
    }

    /// Sends queued mail when due, until `shutdown`.
    pub async fn retry_loop(&self, shutdown: &CancellationToken) {
        loop {
            let wait = match self.progress.next_due() {
                Some(due) => Duration::from_secs(due.saturating_sub(now()).max(0) as u64),
                None => Duration::from_secs(3600),
            };
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => return,
                _ = self.queued.notified() => continue,
                _ = tokio::time::sleep(wait) => {}
            }
            for pending in self.progress.due(now()) {
                if shutdown.is_cancelled() {
                    return;
                }
                let result = tokio::select! {
                    biased;
                    _ = shutdown.cancelled() => return,
                    result = self.outbox.send(&pending.mail) => result,
                };
                let saved = match result {
                    Ok(()) => {
                        tracing::info!(to = %pending.mail.to, attempts = pending.attempts + 1, "Queued mail sent.");
                        self.progress.remove_pending(&pending.mail.message_id)
                    }
                    Err(error) => {
                        let pause = RETRY_BACKOFF.delay(pending.attempts);
                        tracing::warn!(to = %pending.mail.to, attempts = pending.attempts + 1, error = %error, "Queued mail failed again.");
                        let next = now() + pause.as_secs() as i64;
                        self.progress
                            .add_pending(pending.mail, error.to_string(), next)
                    }
                };
                if let Err(error) = saved {
                    tracing::warn!(error = %error, "Could not update the mail retry queue.");
                }
            }
        }
    }
}

/// Unix seconds now.
fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// The reply sink of one mail, or of a proactive message (`uid: None`) to an email session.
pub struct EmailReply {
    /// The shared sender.
    pub mailer: Arc<Mailer>,
    /// The recipient.
    pub to: String,
    /// The inbound mail's (or the cron job's) metadata: subject and threading ids.
    pub metadata: Map<String, Value>,
    /// The UID answered, if this answers a mail.
    pub uid: Option<u32>,
}

#[async_trait]
impl ReplySink for EmailReply {
    async fn deliver(&self, text: &str) -> Result<(), DeliveryError> {
        let message_id = reply::new_message_id(self.mailer.outbox.from_address());
        let mail = reply::outgoing(&self.to, &self.metadata, text, message_id);
        self.mailer
            .send_or_queue(mail, self.uid)
            .await
            .map_err(|error| DeliveryError::new("email", error))
    }

    /// The question goes out as a mail of its own in the thread (not as the answer to the
    /// inbound mail, which the turn's reply still is); the owner replies with the code.
    async fn ask(&self, request: &ApprovalRequest) -> Result<bool, DeliveryError> {
        let message_id = reply::new_message_id(self.mailer.outbox.from_address());
        let mail = reply::outgoing(&self.to, &self.metadata, &request.question(), message_id);
        self.mailer
            .send_or_queue(mail, None)
            .await
            .map(|()| true)
            .map_err(|error| DeliveryError::new("email", error))
    }
}
