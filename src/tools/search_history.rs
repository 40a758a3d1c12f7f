//! `search_history`: full-text search over every session's history, newest first.
//!
//! Backed by the [`HistoryIndex`] cache, which is brought up to date from the JSONL files
//! before each query (one `stat` per session file when nothing changed), so a message persisted
//! a moment ago is already findable and no timer is needed. Each hit shows the previous and next
//! message of its session; every message is cut to 300 characters.

use std::fmt::Write as _;
use std::sync::Arc;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::core::message::Role;
use crate::core::ports::clock::Clock;
use crate::core::ports::tool::{Tool, ToolContext, ToolOutput, ToolSpec, parse_arguments};
use crate::storage::history_index::{HistoryIndex, Hit, IndexedMessage, MAX_RESULTS};

/// Each message in a result is cut to this many characters.
pub const MAX_MESSAGE_CHARS: usize = 300;

/// Hits returned when `max_results` is omitted.
pub const DEFAULT_RESULTS: usize = 10;

/// Searches the conversation history of all sessions.
pub struct SearchHistoryTool {
    index: Arc<HistoryIndex>,
    clock: Arc<dyn Clock>,
    spec: ToolSpec,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Arguments {
    query: String,
    #[serde(default)]
    days: Option<u32>,
    #[serde(default)]
    max_results: Option<i64>,
}

impl SearchHistoryTool {
    /// The tool over `index`; "now" for the day window comes from `clock`.
    pub fn new(index: Arc<HistoryIndex>, clock: Arc<dyn Clock>) -> Self {
        let spec = ToolSpec {
            name: "search_history".to_owned(),
            description: "Search past conversations of all sessions (newest first, with the \
                messages around each hit; times UTC). Words match case-insensitively as \
                prefixes, all must match; \"quote\" a phrase."
                .to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "Words or \"a phrase\" to find."},
                    "days": {"type": "integer", "minimum": 0, "description": "Only the last N days (0 = all)."},
                    "max_results": {"type": "integer", "minimum": 1, "maximum": 50, "description": "Default 10."}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        };
        Self { index, clock, spec }
    }

    /// Starts indexing in the background (if a Tokio runtime is running), so the first search
    /// after a rebuild or an upgrade does not wait for the whole history to be read.
    pub fn warm_up(&self) {
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let index = self.index.clone();
            runtime.spawn_blocking(move || {
                if let Err(error) = index.update() {
                    tracing::warn!(error = %error, "History index warm-up failed.");
                }
            });
        }
    }
}

#[async_trait]
impl Tool for SearchHistoryTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, arguments: Value, _context: &ToolContext) -> ToolOutput {
        let arguments: Arguments = match parse_arguments("search_history", arguments) {
            Ok(arguments) => arguments,
            Err(output) => return output,
        };
        let query = arguments.query.trim().to_owned();
        if query.is_empty() {
            return ToolOutput::error("Error: query is empty.");
        }
        let max = arguments
            .max_results
            .unwrap_or(DEFAULT_RESULTS as i64)
            .clamp(1, MAX_RESULTS as i64) as usize;
        let now = self.clock.now().to_utc();
        let days = arguments.days.unwrap_or(0);
        match self
            .index
            .update_and_search(query.clone(), days, max, now)
            .await
        {
            Ok(hits) => ToolOutput::ok(format_hits(&query, &hits)),
            Err(error) => {
                tracing::error!(error = %error, "search_history failed.");
                ToolOutput::error(format!("Error: history search failed: {error}"))
            }
        }
    }
}

/// The tool's text for `hits`.
pub fn format_hits(query: &str, hits: &[Hit]) -> String {
    if hits.is_empty() {
        return format!("No matches found for '{query}'.");
    }
    let mut out = String::new();
    for (i, hit) in hits.iter().enumerate() {
        let when = hit.message.timestamp.format("%Y-%m-%d %H:%M");
        let _ = writeln!(out, "## Match {} — [{}] | {when}", i + 1, hit.session);
        if let Some(before) = &hit.before {
            let _ = writeln!(out, "{}", line(before));
        }
        let _ = writeln!(out, "**{}**", line(&hit.message));
        if let Some(after) = &hit.after {
            let _ = writeln!(out, "{}", line(after));
        }
        out.push_str("---\n");
    }
    out
}

/// `ROLE: text`, cut to [`MAX_MESSAGE_CHARS`] characters plus `...`.
fn line(message: &IndexedMessage) -> String {
    let role = match message.role {
        Role::User => "USER",
        _ => "ASSISTANT",
    };
    let text = message.content.trim();
    match text.char_indices().nth(MAX_MESSAGE_CHARS) {
        Some((cut, _)) => format!("{role}: {}...", &text[..cut]),
        None => format!("{role}: {text}"),
    }
}
