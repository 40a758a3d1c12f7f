//! The ports: traits through which the core reaches the outside world.
//!
//! Each file holds one port. Adapters (`llm`, `storage`, `channels`, `tools`, `skills`)
//! implement them; the core only ever sees these traits.

pub mod approvals;
pub mod channel;
pub mod clock;
pub mod conversation;
pub mod gates;
pub mod llm;
pub mod models;
pub mod prompt;
pub mod store;
pub mod tool;
pub mod usage;
