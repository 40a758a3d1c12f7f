//! Tools the agent can call, each implementing the core `Tool` port.
//!
//! - [`cron`]: `cron_list`, `cron_remove`, `cron_set_enabled` (registered) and `cron_add`
//!   (built per turn with the turn's session and routing metadata).
//! - [`fetch_url`]: `fetch_url`, fetching public web pages behind an SSRF guard (registered).
//! - [`memory_write`]: replaces the global MEMORY.md; built per turn, never registered.

pub mod cron;
pub mod fetch_url;
pub mod memory_write;

pub use cron::{CronAddTool, CronListTool, CronRemoveTool, CronSetEnabledTool};
pub use fetch_url::FetchUrlTool;
pub use memory_write::MemoryWriteTool;
