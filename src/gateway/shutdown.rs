//! The shutdown signal: SIGTERM or SIGINT cancel one token that every task watches.
//!
//! There is a single shutdown type in the gateway, tokio-util's `CancellationToken`: channels
//! select on it (with `biased;` so shutdown wins), the router stops accepting when it fires,
//! and the gateway then drains in-flight turns within `gateway.shutdown_grace_seconds`.

use tokio_util::sync::CancellationToken;

/// Why the gateway stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// SIGTERM (systemd stop, `kill`).
    Terminate,
    /// SIGINT (Ctrl-C).
    Interrupt,
}

/// Waits for SIGTERM or SIGINT, then cancels `token`. Returns the signal seen.
pub async fn on_signal(token: CancellationToken) -> std::io::Result<StopReason> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let reason = tokio::select! {
        _ = terminate.recv() => StopReason::Terminate,
        _ = interrupt.recv() => StopReason::Interrupt,
        () = token.cancelled() => return Ok(StopReason::Terminate),
    };
    // Cancel before logging: the shutdown must not depend on the log's reader still being there.
    token.cancel();
    tracing::info!(signal = ?reason, "Shutting down.");
    Ok(reason)
}
