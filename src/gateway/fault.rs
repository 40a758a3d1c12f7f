//! [`FaultChannel`]: a channel that fails on purpose, for proving that the supervisor restarts a
//! crashing channel while the others keep answering.
//!
//! It is added only when the environment variable `SQUIDBOT_FAULT_CHANNEL` is set (to
//! `panic:<ms>` or `error:<ms>`): it becomes ready, waits that long, then panics or fails.
//! [`crash_point`] aborts the process at a named step when `SQUIDBOT_CRASH_AT` names it.
//! Nothing in a normal configuration enables either.

use std::time::Duration;

use async_trait::async_trait;

use crate::core::ports::channel::{Channel, ChannelContext, ChannelError};

/// How the fault channel fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultMode {
    /// It panics.
    Panic,
    /// It returns an error.
    Error,
}

/// A channel named `fault` that fails after a delay, every time it runs.
#[derive(Debug, Clone, Copy)]
pub struct FaultChannel {
    mode: FaultMode,
    after: Duration,
}

impl FaultChannel {
    /// Parses `panic:<ms>` or `error:<ms>`.
    pub fn parse(spec: &str) -> Option<Self> {
        let (mode, ms) = spec.split_once(':')?;
        let mode = match mode {
            "panic" => FaultMode::Panic,
            "error" => FaultMode::Error,
            _ => return None,
        };
        Some(Self {
            mode,
            after: Duration::from_millis(ms.parse().ok()?),
        })
    }
}

#[async_trait]
impl Channel for FaultChannel {
    fn name(&self) -> &str {
        "fault"
    }

    async fn run(&self, context: ChannelContext) -> Result<(), ChannelError> {
        context.ready.cancel();
        tokio::select! {
            biased;
            () = context.shutdown.cancelled() => return Ok(()),
            () = tokio::time::sleep(self.after) => {}
        }
        match self.mode {
            FaultMode::Panic => panic!("fault channel: injected panic"),
            FaultMode::Error => Err(ChannelError::new("fault", "injected failure")),
        }
    }
}

/// The test hook behind `SQUIDBOT_CRASH_AT`: aborts the process (as a power cut or `kill -9`
/// would end it) when the variable names `step`, so the crash tests can stop the gateway at an
/// exact step of handling a message and prove what a restart does. Unset, it costs one read
/// of a cached value.
pub fn crash_point(step: &str) {
    static AT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let at = AT.get_or_init(|| std::env::var("SQUIDBOT_CRASH_AT").ok());
    if at.as_deref() == Some(step) {
        tracing::error!(
            step,
            "SQUIDBOT_CRASH_AT names this step: aborting, as asked."
        );
        std::process::abort();
    }
}
