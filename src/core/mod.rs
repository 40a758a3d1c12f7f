//! The domain: messages, sessions, the agent loop, the memory manager, and the ports.
//!
//! **Architecture Invariant:** nothing here imports an adapter module (`llm`, `storage`,
//! `channels`, `tools`, `skills`), a module beside core (`accounting`, `approval`) or an I/O
//! crate (reqwest, axum, matrix-sdk, async-imap, lettre). The tidy test enforces it.

pub mod agent_loop;
pub mod audience;
pub mod authority;
pub mod consolidation;
pub mod conversation;
pub mod error_chain;
pub mod loop_breaker;
pub mod memory_manager;
pub mod message;
pub mod origin;
pub mod ports;
pub mod redact;
pub mod resume;
pub mod session;
pub mod session_locks;
pub mod tool_pipeline;
pub mod tool_registry;
pub mod turn;
pub mod untrusted;
pub mod window;
