//! Tools the agent can call, each implementing the core `Tool` port.
//!
//! - [`memory_write`]: replaces the global MEMORY.md; built per turn, never registered.

pub mod memory_write;

pub use memory_write::MemoryWriteTool;
