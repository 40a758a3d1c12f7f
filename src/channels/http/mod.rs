//! The HTTP API: health, readiness, status and metrics for operators, and a message API that
//! is a channel of its own (sessions `http:<id>`).
//!
//! - `config.rs`: its settings (`gateway.http`) and their checks.
//! - `channel.rs`: [`HttpChannel`], the listener task run by the supervisor.
//! - `routes.rs`: the axum router and its handlers; bearer-token check on `/v1`.
//! - `hub.rs`: [`HttpHub`], mailboxes for proactive messages (cron, heartbeat) to HTTP sessions,
//!   read through `GET /v1/sessions/{id}/events`.
//! - `sse.rs`: the streaming reply sink behind `Accept: text/event-stream`.
//! - `plugin.rs`: [`HttpPlugin`], the API on the list of channel plug-ins, and its doctor check.
//! - `openai/`: the OpenAI-compatible endpoint (`/v1/chat/completions`, `/v1/models`), mounted
//!   when `gateway.http.openai` is on.
//!
//! The server binds to loopback by default; without a configured token the `/v1` routes do not
//! exist at all.

mod channel;
pub mod config;
mod hub;
pub mod openai;
mod plugin;
mod routes;
mod sse;

pub use channel::{HttpChannel, HttpSettings};
pub use hub::HttpHub;
pub use plugin::{HttpPlugin, exposure};
