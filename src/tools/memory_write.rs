//! `memory_write`: the agent's only way to change the global memory document (MEMORY.md).
//!
//! It is built for each turn with that turn's session and handed to the agent loop as an extra
//! tool, so the shared registry is never mutated. The content replaces the whole document (the
//! agent merges); an empty write is refused because it would erase everything by accident; an
//! oversized one is accepted with a warning in the result, since refusing would lose the facts.
//! It is owner-only: a turn someone else takes part in is not offered it, and a call made
//! anyway is refused (by the tool set, and here again), so no one else can change what the
//! owner's private sessions are told.

use std::sync::{Arc, LazyLock};

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::core::authority::{Effect, Effects};
use crate::core::ports::store::MemoryStore;
use crate::core::ports::tool::{ToolContext, ToolOutput, TypedSpec, TypedTool};
use crate::core::session::SessionId;

/// Above this many words the result asks the agent to condense.
pub const SOFT_WORD_LIMIT: usize = 600;

/// Replaces MEMORY.md; one instance per turn.
pub struct MemoryWriteTool {
    store: Arc<dyn MemoryStore>,
    session: SessionId,
}

/// The arguments of `memory_write`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Arguments {
    /// The complete new memory document (Markdown).
    content: String,
}

/// Built once: the tool itself is built for every turn.
static SPEC: LazyLock<TypedSpec<Arguments>> = LazyLock::new(|| {
    TypedSpec::new(
        "memory_write",
        "Replace MEMORY.md, your global memory, with the complete new text (merge; ~300 words).",
    )
});

impl MemoryWriteTool {
    /// The tool for one turn of `session`.
    pub fn new(store: Arc<dyn MemoryStore>, session: SessionId) -> Self {
        Self { store, session }
    }
}

#[async_trait]
impl TypedTool for MemoryWriteTool {
    type Arguments = Arguments;

    fn definition(&self) -> &TypedSpec<Arguments> {
        &SPEC
    }

    fn effects(&self) -> Effects {
        Effects::of(&[Effect::PrivateMemory])
    }

    async fn run(&self, arguments: Arguments, context: &ToolContext) -> ToolOutput {
        if !context.audience.is_owner() {
            return ToolOutput::error(
                "Error: memory_write is not available here: other people take part in this conversation.",
            );
        }
        if arguments.content.trim().is_empty() {
            return ToolOutput::error(
                "Error: refused to write empty memory; it would erase everything. Send the full merged document.",
            );
        }
        let previous = match self.store.replace(&arguments.content).await {
            Ok(previous) => previous,
            Err(error) => {
                tracing::error!(session = %self.session, error = %error, "memory_write failed.");
                return ToolOutput::error(format!("Error: could not save memory: {error}"));
            }
        };
        let words = arguments.content.split_whitespace().count();
        tracing::info!(session = %self.session, words, "Global memory updated.");
        // The size of what was replaced lets the agent notice a write that dropped most of it,
        // and says where to find it.
        let kept = previous.map_or_else(String::new, |previous| {
            let words = previous.split_whitespace().count();
            format!(" The previous version ({words} words) is kept in MEMORY.md.prev.")
        });
        if words > SOFT_WORD_LIMIT {
            ToolOutput::ok(format!(
                "Memory updated ({words} words).{kept} Warning: that is long; it is paid for on \
                 every turn. Condense it to ~300 words soon."
            ))
        } else {
            ToolOutput::ok(format!("Memory updated ({words} words).{kept}"))
        }
    }
}
