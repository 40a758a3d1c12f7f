//! squidbot: a personal AI assistant daemon whose memory never forgets and never bloats.
//!
//! # Layout
//! - [`core`]: messages, sessions, the agent loop, the memory manager and the ports (traits).
//! - [`config`]: the YAML configuration: schema, loading, validation with file/line/field errors.
//! - [`llm`]: the OpenAI-compatible streaming client and pools with retry and fallback.
//! - [`storage`]: JSONL histories, cursors, summaries, MEMORY.md, atomic writes, bootstrap files.
//! - [`tools`]: tools the agent can call (shell, files, web, history search, cron, memory,
//!   sub-agents, MCP).
//! - [`skills`]: SKILL.md discovery, gating and hot reload, the bundled skills, workspace templates.
//! - [`channels`]: where messages come from and replies go (terminal, HTTP API, Matrix, email,
//!   heartbeat, cron).
//! - [`gateway`]: the daemon: supervisor, router, live state, metrics, shutdown.

pub mod channels;
pub mod config;
pub mod core;
pub mod gateway;
pub mod llm;
pub mod skills;
pub mod storage;
pub mod tools;
