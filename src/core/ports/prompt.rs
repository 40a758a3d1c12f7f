//! **API Boundary.** The prompt-source port: the parts of the system prompt that live outside
//! the memory system (bootstrap files, skills).
//!
//! The memory manager owns the layout; this port only supplies text. Implementations cache by
//! file modification time so edits apply on the next turn without a restart. The text depends
//! on the turn's [`Audience`]: what describes the owner (USER.md) is left out of a shared one.

use std::sync::Arc;

use async_trait::async_trait;

use crate::core::audience::Audience;

/// The base prompt used when the workspace has no bootstrap files.
pub const FALLBACK_BASE_PROMPT: &str = "You are a helpful personal AI assistant.";

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
    /// The sections for the next turn, whose audience is `audience`.
    async fn sections(&self, audience: Audience) -> PromptSections;
}

/// A prompt source with fixed text (for sub-agents and tests).
#[derive(Debug, Clone, Default)]
pub struct FixedPrompt(pub PromptSections);

#[async_trait]
impl PromptSource for FixedPrompt {
    async fn sections(&self, _audience: Audience) -> PromptSections {
        self.0.clone()
    }
}

/// Another source's sections with fixed text appended to the base (the spawn profiles block):
/// text known at startup that belongs with the operating rules, not with memory or skills.
pub struct AppendedPrompt {
    inner: Arc<dyn PromptSource>,
    appendix: String,
}

impl AppendedPrompt {
    /// `inner`'s sections, with `appendix` after the base (nothing when it is blank).
    pub fn new(inner: Arc<dyn PromptSource>, appendix: impl Into<String>) -> Self {
        Self {
            inner,
            appendix: appendix.into(),
        }
    }
}

#[async_trait]
impl PromptSource for AppendedPrompt {
    async fn sections(&self, audience: Audience) -> PromptSections {
        let mut sections = self.inner.sections(audience).await;
        if self.appendix.trim().is_empty() {
            return sections;
        }
        // The fallback persona must not be lost because the base is no longer empty.
        if sections.base.trim().is_empty() {
            sections.base = FALLBACK_BASE_PROMPT.to_owned();
        }
        sections.base.push_str("\n\n");
        sections.base.push_str(self.appendix.trim());
        sections
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixed(base: &str) -> Arc<dyn PromptSource> {
        Arc::new(FixedPrompt(PromptSections {
            base: base.to_owned(),
            skills: "<skills/>".to_owned(),
            always_skills: vec!["always".to_owned()],
        }))
    }

    #[tokio::test]
    async fn the_appendix_follows_the_base_and_keeps_the_other_sections() {
        let sections = AppendedPrompt::new(fixed("Rules."), "<extra/>\n")
            .sections(Audience::Owner)
            .await;
        assert_eq!(sections.base, "Rules.\n\n<extra/>");
        assert_eq!(sections.skills, "<skills/>");
        assert_eq!(sections.always_skills, ["always"]);
    }

    #[tokio::test]
    async fn an_empty_base_keeps_the_fallback_persona_and_a_blank_appendix_changes_nothing() {
        let sections = AppendedPrompt::new(fixed(" "), "<extra/>")
            .sections(Audience::Owner)
            .await;
        assert_eq!(sections.base, format!("{FALLBACK_BASE_PROMPT}\n\n<extra/>"));
        let sections = AppendedPrompt::new(fixed("Rules."), "  ")
            .sections(Audience::Owner)
            .await;
        assert_eq!(sections.base, "Rules.");
    }
}
