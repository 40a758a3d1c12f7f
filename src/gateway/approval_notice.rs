//! Telling the owner about approvals a restart cut short.
//!
//! A request still open when the gateway stopped (or crashed) can never be granted: the turn
//! that waited for it is gone, so its command never runs. At start the gateway reads them back
//! ([`crate::approval::Approvals::recover`]) and sends a note to each one's session once
//! its channel is up, so the owner is not left waiting for something that will not happen.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Map;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::core::ports::approvals::ApprovalRequest;
use crate::core::ports::channel::Outboxes;
use crate::gateway::backoff::Backoff;

/// How many times a note is tried while its channel comes up (about ten minutes in all).
const ATTEMPTS: u32 = 15;

/// The note for a request that died with the previous run.
pub fn note(request: &ApprovalRequest) -> String {
    format!(
        "squidbot restarted while {} waited for your approval (code {}). It was refused and \
         did not run; ask again if you still want it.",
        request.command_inline(),
        request.code
    )
}

/// Sends [`note`] for each of `expired` to its session, retrying while the channel starts.
pub fn tell_owner(
    expired: Vec<ApprovalRequest>,
    outboxes: Arc<dyn Outboxes>,
    tasks: &TaskTracker,
    shutdown: CancellationToken,
) {
    for request in expired {
        let outboxes = outboxes.clone();
        let shutdown = shutdown.clone();
        tasks.spawn(async move {
            let backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
            for attempt in 0..ATTEMPTS {
                let sent = match outboxes.outbox(&request.session, &Map::new()).await {
                    Ok(outbox) => outbox.sink.deliver(&note(&request)).await.map_err(|e| e.to_string()),
                    Err(no_route) => Err(no_route.to_string()),
                };
                match sent {
                    Ok(()) => {
                        tracing::info!(session = %request.session, "Told the owner an approval expired with the restart.");
                        return;
                    }
                    Err(error) if attempt + 1 == ATTEMPTS => {
                        tracing::warn!(session = %request.session, error, "Could not tell the owner an approval expired with the restart.");
                    }
                    Err(_) => {}
                }
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = tokio::time::sleep(backoff.delay(attempt)) => {}
                }
            }
        });
    }
}
