//! [`WorkspacePrompt`]: the workspace's bootstrap files as the base of every system prompt.
//!
//! The files (SOUL, IDENTITY, USER, AGENTS, ENVIRONMENT, BOOTSTRAP) are re-checked on every turn
//! and re-read only when they changed ([`WorkspaceFiles`]: one `statx` of the workspace when
//! none exists), so an owner's edit (or the agent deleting BOOTSTRAP.md after onboarding)
//! applies on the next message without a restart.
//! USER.md describes the owner, so it is part only of turns no one else takes part in
//! ([`OWNER_FILES`], [`Audience`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;

use crate::core::audience::Audience;
use crate::core::ports::prompt::{PromptSections, PromptSource};
use crate::storage::workspace_files::WorkspaceFiles;

/// The bootstrap files of the main agent, in prompt order.
pub const MAIN_AGENT_FILES: [&str; 6] = [
    "SOUL.md",
    "IDENTITY.md",
    "USER.md",
    "AGENTS.md",
    "ENVIRONMENT.md",
    "BOOTSTRAP.md",
];

/// The bootstrap files about the owner, left out of a shared turn's prompt (whichever list of
/// files names them: a spawn profile may too).
pub const OWNER_FILES: [&str; 1] = ["USER.md"];

/// Separator between bootstrap files in the prompt.
const SEPARATOR: &str = "\n\n---\n\n";

/// Reads bootstrap files from a workspace, cached (see [`WorkspaceFiles`]).
#[derive(Debug)]
pub struct WorkspacePrompt {
    files: Vec<PathBuf>,
    cache: Arc<WorkspaceFiles>,
}

impl WorkspacePrompt {
    /// The main agent's files in `workspace`.
    pub fn main_agent(workspace: &Path) -> Self {
        Self::with_files(workspace, MAIN_AGENT_FILES.iter().copied())
    }

    /// A custom list of files (spawn profiles choose theirs).
    pub fn with_files<'a>(workspace: &Path, names: impl IntoIterator<Item = &'a str>) -> Self {
        let files = names.into_iter().map(PathBuf::from).collect();
        Self {
            files,
            cache: Arc::new(WorkspaceFiles::new(workspace)),
        }
    }
}

#[async_trait]
impl PromptSource for WorkspacePrompt {
    async fn sections(&self, audience: Audience) -> PromptSections {
        let mut files = self.files.clone();
        if !audience.is_owner() {
            files.retain(|path| !is_owner_file(path));
        }
        let names: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
        let base = match self.cache.read_cached(&names) {
            Some(texts) => join(texts),
            None => {
                let cache = self.cache.clone();
                tokio::task::spawn_blocking(move || read_all(&files, &cache))
                    .await
                    .unwrap_or_default()
            }
        };
        PromptSections {
            base,
            ..PromptSections::default()
        }
    }
}

/// Whether `path` is one of the [`OWNER_FILES`].
fn is_owner_file(path: &Path) -> bool {
    path.file_name()
        .and_then(|name| name.to_str())
        .is_some_and(|name| OWNER_FILES.contains(&name))
}

/// Reads `files` (names in `workspace`) beneath the workspace: a file linked out of it (a
/// command may plant `SOUL.md -> ../squidbot.yaml`) is refused and left out, never read.
fn read_all(files: &[PathBuf], cache: &WorkspaceFiles) -> String {
    let names: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    join(cache.read(&names))
}

/// The texts there are, trimmed, between separators.
fn join(texts: Vec<Option<Arc<str>>>) -> String {
    let parts: Vec<Arc<str>> = texts
        .into_iter()
        .flatten()
        .filter(|text| !text.trim().is_empty())
        .collect();
    parts
        .iter()
        .map(|t| t.trim())
        .collect::<Vec<_>>()
        .join(SEPARATOR)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn user_md_is_part_only_of_the_owners_turns() {
        let workspace = tempfile::tempdir().unwrap();
        std::fs::write(workspace.path().join("SOUL.md"), "Be kind.\n").unwrap();
        std::fs::write(workspace.path().join("USER.md"), "Alex likes tea.\n").unwrap();
        std::fs::write(workspace.path().join("AGENTS.md"), "Use tools.\n").unwrap();
        let prompt = WorkspacePrompt::main_agent(workspace.path());
        assert_eq!(
            prompt.sections(Audience::Owner).await.base,
            "Be kind.\n\n---\n\nAlex likes tea.\n\n---\n\nUse tools."
        );
        assert_eq!(
            prompt.sections(Audience::Shared).await.base,
            "Be kind.\n\n---\n\nUse tools."
        );
        // A profile that names USER.md gets it only in the owner's turns too.
        let profile = WorkspacePrompt::with_files(workspace.path(), ["USER.md"]);
        assert_eq!(profile.sections(Audience::Shared).await.base, "");
        assert_eq!(
            profile.sections(Audience::Owner).await.base,
            "Alex likes tea."
        );
    }
}
