//! `search_history`: ranked search over every session's history and summary.
//!
//! Backed by the [`HistoryIndex`] cache, which is brought up to date from the JSONL files
//! before each query (two `stat`s per session when nothing changed), so a message persisted a
//! moment ago is already findable and no timer is needed. A plain question works as a query:
//! the index drops its function words, matches the rest by stem and ranks by relevance (see
//! `storage::history_index::rank`). What is already in the asking turn's prompt (its own
//! session's unconsolidated tail, which ends with the question itself, and its summary) is
//! never a hit. The output is built by [`format`] so that no message text can pass for an entry.
//! In a turn someone besides the owner takes part in, only the asking session is searched:
//! the others are the owner's and other people's conversations, not this audience's.

pub mod format;

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::core::authority::{Effect, Effects};
use crate::core::ports::clock::Clock;
use crate::core::ports::tool::{ToolContext, ToolOutput, TypedSpec, TypedTool};
use crate::core::session::SessionId;
use crate::storage::history_index::{HistoryIndex, MAX_RESULTS, SearchRequest, analyze};

pub use format::format_hits;

/// Hits returned when `max_results` is omitted.
pub const DEFAULT_RESULTS: usize = 10;

/// Searches the conversation history of all sessions.
pub struct SearchHistoryTool {
    index: Arc<HistoryIndex>,
    clock: Arc<dyn Clock>,
    spec: TypedSpec<Arguments>,
}

/// The arguments of `search_history`. `days` (only the last N days) is the original's and still
/// accepted, but no longer offered in the schema: `after` says the same and more, in fewer words
/// of prompt.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Arguments {
    /// "Quote" a phrase that must appear.
    query: String,
    #[schemars(range(min = 1, max = MAX_RESULTS))]
    max_results: Option<i64>,
    #[schemars(skip)]
    days: Option<u32>,
    /// YYYY-MM-DD, inclusive.
    after: Option<String>,
    /// YYYY-MM-DD, exclusive.
    before: Option<String>,
    /// Only this session id.
    session: Option<String>,
}

impl SearchHistoryTool {
    /// The tool over `index`; "now" for the day window comes from `clock`.
    pub fn new(index: Arc<HistoryIndex>, clock: Arc<dyn Clock>) -> Self {
        let spec = TypedSpec::new(
            "search_history",
            "Search all past conversations and summaries, best first, with the messages around \
             each (times UTC). Ask a plain question naming people, places, things.",
        );
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

    /// The search the arguments describe, or the error result to return.
    fn request(
        &self,
        arguments: Arguments,
        context: &ToolContext,
    ) -> Result<SearchRequest, ToolOutput> {
        let query = arguments.query.trim().to_owned();
        if analyze::terms(&query).is_empty() {
            return Err(ToolOutput::error(
                "Error: query has no words to search for.",
            ));
        }
        let max = arguments
            .max_results
            .unwrap_or(DEFAULT_RESULTS as i64)
            .clamp(1, MAX_RESULTS as i64) as usize;
        let mut since = day("after", arguments.after.as_deref())?;
        let until = day("before", arguments.before.as_deref())?;
        if let Some(days) = arguments.days.filter(|days| *days > 0) {
            let window = self.clock.now().to_utc() - chrono::Duration::days(i64::from(days));
            since = Some(since.map_or(window, |since| since.max(window)));
        }
        if let (Some(since), Some(until)) = (since, until)
            && since >= until
        {
            return Err(ToolOutput::error(
                "Error: 'after' must be a day before 'before'.",
            ));
        }
        let mut session = match arguments.session.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(id) => Some(SessionId::parse(id).map_err(|error| {
                ToolOutput::error(format!(
                    "Error: session '{id}' is not a session id: {error}"
                ))
            })?),
        };
        if !context.audience.is_owner() {
            if session
                .as_ref()
                .is_some_and(|asked| *asked != context.session)
            {
                return Err(ToolOutput::error(
                    "Error: only this conversation can be searched here: other people take part in it.",
                ));
            }
            session = Some(context.session.clone());
        }
        Ok(SearchRequest {
            query,
            max,
            since,
            until,
            session,
            asking: context
                .prompt_tail
                .map(|offset| (context.session.clone(), offset)),
        })
    }
}

/// Midnight UTC of a `YYYY-MM-DD` argument (an RFC 3339 time is taken as it is).
fn day(name: &str, value: Option<&str>) -> Result<Option<DateTime<Utc>>, ToolOutput> {
    let Some(value) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    if let Ok(date) = NaiveDate::parse_from_str(value, "%Y-%m-%d") {
        return Ok(date.and_hms_opt(0, 0, 0).map(|t| t.and_utc()));
    }
    DateTime::parse_from_rfc3339(value)
        .map(|t| Some(t.to_utc()))
        .map_err(|_| {
            ToolOutput::error(format!(
                "Error: {name} must be a day as YYYY-MM-DD, not '{value}'."
            ))
        })
}

#[async_trait]
impl TypedTool for SearchHistoryTool {
    type Arguments = Arguments;

    fn definition(&self) -> &TypedSpec<Arguments> {
        &self.spec
    }

    fn effects(&self) -> Effects {
        Effects::of(&[Effect::ReadsHistory])
    }

    async fn run(&self, arguments: Arguments, context: &ToolContext) -> ToolOutput {
        let request = match self.request(arguments, context) {
            Ok(request) => request,
            Err(output) => return output,
        };
        let query = request.query.clone();
        match self.index.update_and_search(request).await {
            Ok(hits) => ToolOutput::ok(format_hits(&query, &hits)),
            Err(error) => {
                tracing::error!(error = %error, "search_history failed.");
                ToolOutput::error(format!("Error: history search failed: {error}"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::audience::Audience;
    use crate::core::ports::clock::SystemClock;
    use crate::core::ports::tool::Tool;
    use serde_json::{Value, json};

    fn tool(home: &std::path::Path) -> SearchHistoryTool {
        let index = Arc::new(HistoryIndex::open(home).unwrap());
        SearchHistoryTool::new(index, Arc::new(SystemClock))
    }

    fn context(prompt_tail: Option<u64>) -> ToolContext {
        ToolContext::for_test()
            .with_session(SessionId::cli_local())
            .with_audience(Audience::Owner)
            .with_prompt_tail(prompt_tail)
    }

    async fn call(tool: &SearchHistoryTool, arguments: Value) -> ToolOutput {
        tool.call(arguments, &context(Some(0))).await
    }

    #[tokio::test]
    async fn bad_arguments_are_error_results_that_say_what_is_wrong() {
        let home = tempfile::tempdir().unwrap();
        let tool = tool(home.path());
        for (arguments, says) in [
            (json!({"query": "  ?! "}), "no words"),
            (
                json!({"query": "x", "after": "last week"}),
                "after must be a day",
            ),
            (
                json!({"query": "x", "before": "2026-02-30"}),
                "before must be a day",
            ),
            (
                json!({"query": "x", "after": "2026-03-02", "before": "2026-03-01"}),
                "'after' must be",
            ),
            (
                json!({"query": "x", "session": "no colon"}),
                "not a session id",
            ),
            (json!({"query": "x", "when": "today"}), "when"),
        ] {
            let output = call(&tool, arguments.clone()).await;
            assert!(output.is_error, "{arguments}");
            assert!(
                output.content.contains(says),
                "{arguments}: {}",
                output.content
            );
        }
        let output = call(&tool, json!({"query": "anything", "max_results": 500})).await;
        assert!(!output.is_error, "{}", output.content);
    }

    #[tokio::test]
    async fn the_arguments_become_the_search() {
        let home = tempfile::tempdir().unwrap();
        let tool = tool(home.path());
        let arguments = |value: Value| serde_json::from_value::<Arguments>(value).unwrap();
        let request = tool
            .request(
                arguments(json!({"query": " violin ", "after": "2026-03-01", "before": "2026-03-05T12:00:00Z", "session": "matrix:!r:x"})),
                &context(Some(42)),
            )
            .ok()
            .unwrap();
        assert_eq!(request.query, "violin");
        assert_eq!(request.max, DEFAULT_RESULTS);
        assert_eq!(
            request.since.unwrap().to_rfc3339(),
            "2026-03-01T00:00:00+00:00"
        );
        assert_eq!(
            request.until.unwrap().to_rfc3339(),
            "2026-03-05T12:00:00+00:00"
        );
        assert_eq!(request.session.unwrap().as_str(), "matrix:!r:x");
        assert_eq!(request.asking, Some((SessionId::cli_local(), 42)));
        // A day window narrows an earlier "after"; outside a turn nothing is left out.
        let request = tool
            .request(
                arguments(json!({"query": "x", "after": "2000-01-01", "days": 2})),
                &context(None),
            )
            .ok()
            .unwrap();
        let window = chrono::Utc::now() - chrono::Duration::days(2);
        assert!((request.since.unwrap() - window).num_seconds().abs() < 60);
        assert_eq!(request.asking, None);
    }

    #[tokio::test]
    async fn a_shared_turn_searches_only_its_own_session() {
        let home = tempfile::tempdir().unwrap();
        let tool = tool(home.path());
        let arguments = |value: Value| serde_json::from_value::<Arguments>(value).unwrap();
        let room = SessionId::new("matrix", "!group:x").unwrap();
        let shared = context(Some(7))
            .with_session(room.clone())
            .with_audience(Audience::Shared);
        for asked in [
            json!({"query": "tea"}),
            json!({"query": "tea", "session": "matrix:!group:x"}),
        ] {
            let request = tool.request(arguments(asked), &shared).ok().unwrap();
            assert_eq!(request.session, Some(room.clone()));
            assert_eq!(request.asking, Some((room.clone(), 7)));
        }
        let output = tool
            .request(
                arguments(json!({"query": "tea", "session": "cli:local"})),
                &shared,
            )
            .err()
            .unwrap();
        assert!(output.is_error);
        assert!(
            output.content.contains("only this conversation"),
            "{}",
            output.content
        );
        // The owner's turns search everything.
        let request = tool
            .request(arguments(json!({"query": "tea"})), &context(Some(7)))
            .ok()
            .unwrap();
        assert_eq!(request.session, None);
    }
}
