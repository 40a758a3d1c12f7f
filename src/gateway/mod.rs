//! The gateway daemon's machinery: supervision, routing, live state, metrics, shutdown.
//!
//! - [`supervisor`]: one task per channel, restarted with backoff; the outbox directory.
//! - [`router`]: inbound messages to turns, ordered per session, parallel across sessions.
//! - [`state`]: what `/status` and `/readyz` report.
//! - [`metrics`]: what `/metrics` reports, and the metered LLM decorator.
//! - [`shutdown`]: SIGTERM/SIGINT to one cancellation token.
//! - [`approval_notice`]: telling the owner which approvals a restart cut short.
//! - [`fault`]: a channel that fails on purpose (test support, off unless asked for).
//! - [`command`]: the chat commands (`/stop`, `/status`, `/model`, ...) and the `/status` line.
//! - [`command_answer`]: the text of every chat command, for the router and the terminal.
//! - [`backoff`]: the one exponential backoff behind every retry loop.
//! - [`liveness`]: each channel's pulse (last inbound, last round, stalled), which channels
//!   feed through the core port [`crate::core::ports::channel::Alive`].

pub mod approval_notice;
pub mod backoff;
pub mod command;
pub mod command_answer;
pub mod fault;
pub mod liveness;
pub mod metrics;
pub mod router;
pub mod shutdown;
pub mod state;
pub mod supervisor;

pub use metrics::Metrics;
pub use router::Router;
pub use state::{FnSection, GatewayState, StatusSection, status_fn};
pub use supervisor::{ChannelDirectory, Supervisor};
