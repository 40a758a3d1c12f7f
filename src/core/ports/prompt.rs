//! **API Boundary.** The prompt-source port: the parts of the system prompt that live outside
//! the memory system (bootstrap files, skills).
//!
//! The memory manager owns the layout; this port only supplies text. Implementations cache by
//! file modification time so edits apply on the next turn without a restart.

use async_trait::async_trait;

/// The static sections of a system prompt.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PromptSections {
    /// The base prompt (persona and operating rules).
    pub base: String,
    /// The skills catalogue (XML), empty when there are no skills.
    pub skills: String,
    /// Bodies of always-on skills, inlined.
    pub always_skills: Vec<String>,
}

/// Supplies the static prompt sections.
#[async_trait]
pub trait PromptSource: Send + Sync {
    /// The sections for the next turn.
    async fn sections(&self) -> PromptSections;
}

/// A prompt source with fixed text (for sub-agents and tests).
#[derive(Debug, Clone, Default)]
pub struct FixedPrompt(pub PromptSections);

#[async_trait]
impl PromptSource for FixedPrompt {
    async fn sections(&self) -> PromptSections {
        self.0.clone()
    }
}
