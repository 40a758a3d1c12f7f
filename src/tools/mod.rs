//! Tools the agent can call, each implementing the core `Tool` port.
//!
//! - [`fetch_url`]: `fetch_url`, fetching public web pages behind an SSRF guard (registered).
//! - [`files`]: `read_file`, `write_file`, `edit_file`, `list_files` (registered).
//! - [`mcp`]: tools of MCP servers (`tools.mcp_servers`), named `<server>__<tool>`.
//! - [`memory_write`]: replaces the global MEMORY.md; built per turn, never registered.
//! - [`search_history`]: `search_history`, full-text search over all sessions (registered).
//! - [`sandbox`]: the Landlock sandbox, environment and TMPDIR of every `shell` command.
//! - [`shell`]: `shell`, a command in the workspace with a process-group timeout (registered).
//! - [`spawn`]: `spawn` and `spawn_await`, background sub-agents with profiles (registered).
//! - [`web_search`]: `web_search` through SearXNG, Brave or DuckDuckGo (registered).

pub mod fetch_url;
pub mod files;
pub mod mcp;
pub mod memory_write;
pub mod sandbox;
pub mod search_history;
pub mod shell;
pub mod shell_policy;
pub mod spawn;
#[cfg(test)]
mod tests;
pub mod web_search;

pub use fetch_url::FetchUrlTool;
pub use files::{EditFileTool, ListFilesTool, ReadFileTool, WriteFileTool, file_tools};
pub use memory_write::MemoryWriteTool;
pub use search_history::SearchHistoryTool;
pub use shell::ShellTool;
pub use spawn::{SpawnAwaitTool, SpawnHub, SpawnTool, spawn_tools};
pub use web_search::WebSearchTool;
