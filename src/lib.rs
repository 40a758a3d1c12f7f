//! squidbot: a personal AI assistant daemon whose memory never forgets and never bloats.
//!
//! # Layout
//! - [`core`]: messages, sessions, the agent loop, the memory manager and the ports (traits).
//! - [`config`]: the YAML configuration: schema, loading, validation with file/line/field errors.
//! - [`llm`]: the OpenAI-compatible streaming client and pools with retry and fallback.
//! - [`accounting`]: usage, prices and budgets, and the client layer that admits and records
//!   every LLM call.
//! - [`approval`]: the owner's approvals: the daemon's registry of open requests and each
//!   turn's gate, which the agent opens through the `ApprovalGates` port.
//! - [`storage`]: JSONL histories, cursors, summaries, MEMORY.md, atomic writes, bootstrap files.
//! - [`tools`]: tools the agent can call (shell, files, web, history search, memory,
//!   sub-agents, MCP).
//! - [`cron`]: scheduled jobs, whole: their store, schedules, the channel that fires them, and
//!   the agent's cron tools.
//! - [`skills`]: SKILL.md discovery, gating and hot reload, the bundled skills, workspace templates.
//! - [`channels`]: where messages come from and replies go (terminal, HTTP API, Matrix, email,
//!   heartbeat).
//! - [`gateway`]: the daemon: supervisor, router, live state, metrics, shutdown.
//! - [`workspace`]: the guard that keeps the agent's file access inside the workspace.
//! - [`zone`]: time zones (`UTC`, `local`, offsets, IANA names from a bundled database), one
//!   type for cron schedules, the heartbeat's active hours and the budgets' day.
//! - [`console`]: printing and logging that never panic on a closed pipe; colour only on a
//!   terminal.

pub mod accounting;
pub mod approval;
pub mod channels;
pub mod config;
pub mod console;
pub mod core;
pub mod cron;
pub mod gateway;
pub mod llm;
pub mod skills;
pub mod storage;
pub mod tools;
pub mod transcription;
pub mod workspace;
pub mod zone;
