//! [`SkilledPrompt`]: a prompt source that adds the skills catalogue to another source's base.
//!
//! The base (the workspace's bootstrap files) and the skills are cached separately, each by file
//! modification time, so an edit to either applies on the next turn.

use std::sync::Arc;

use async_trait::async_trait;

use crate::core::audience::Audience;
use crate::core::ports::prompt::{PromptSections, PromptSource};
use crate::skills::SkillCatalog;

/// The base prompt of `base`, plus the skills XML and always-skill bodies of `catalog`.
pub struct SkilledPrompt {
    base: Arc<dyn PromptSource>,
    catalog: SkillCatalog,
}

impl SkilledPrompt {
    /// Combines a base prompt source with a skill catalog.
    pub fn new(base: Arc<dyn PromptSource>, catalog: SkillCatalog) -> Self {
        Self { base, catalog }
    }
}

#[async_trait]
impl PromptSource for SkilledPrompt {
    async fn sections(&self, audience: Audience) -> PromptSections {
        let mut sections = self.base.sections(audience).await;
        if let Some((skills, always_skills)) = self.catalog.cached_prompt() {
            sections.skills = skills;
            sections.always_skills = always_skills;
            return sections;
        }
        let catalog = self.catalog.clone();
        match tokio::task::spawn_blocking(move || catalog.prompt()).await {
            Ok((skills, always_skills)) => {
                sections.skills = skills;
                sections.always_skills = always_skills;
            }
            Err(error) => {
                tracing::warn!(error = %error, "Listing the skills failed; this turn has none.");
            }
        }
        sections
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::ports::prompt::FixedPrompt;

    #[tokio::test]
    async fn adds_skills_to_the_base() {
        let dir = tempfile::tempdir().unwrap();
        let skill = dir.path().join("memo");
        std::fs::create_dir_all(&skill).unwrap();
        std::fs::write(
            skill.join("SKILL.md"),
            "---\ndescription: Notes.\nalways: true\n---\nRemember things.\n",
        )
        .unwrap();
        let base = FixedPrompt(PromptSections {
            base: "You are squidbot.".to_owned(),
            ..PromptSections::default()
        });
        let prompt = SkilledPrompt::new(
            Arc::new(base),
            SkillCatalog::new(vec![dir.path().to_owned()]),
        );
        let sections = prompt.sections(Audience::Owner).await;
        assert_eq!(sections.base, "You are squidbot.");
        assert_eq!(sections.skills, "");
        assert_eq!(sections.always_skills, ["Remember things."]);
    }
}
