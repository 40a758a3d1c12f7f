//! **API Boundary.** The reply port: where a turn's output goes.
//!
//! A channel hands the agent loop a [`ReplySink`] for each turn. Streaming sinks get text as it
//! arrives and must honour [`ReplySink::reset`]; others only get the final reply.

use async_trait::async_trait;

/// Delivery failed; the turn is still persisted, the failure is logged and reported.
#[derive(Debug, thiserror::Error)]
#[error("delivery through {channel} failed: {detail}")]
pub struct DeliveryError {
    /// The channel name.
    pub channel: String,
    /// What went wrong.
    pub detail: String,
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
}
