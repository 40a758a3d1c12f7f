//! [`FaultChannel`]: a channel that fails on purpose, for proving that the supervisor restarts a
//! crashing channel while the others keep answering.
//!
//! It is added only when the environment variable `SQUIDBOT_FAULT_CHANNEL` is set (to
//! `panic:<ms>` or `error:<ms>`): it becomes ready, waits that long, then panics or fails.
//! Nothing in a normal configuration enables it.

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
