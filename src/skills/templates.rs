//! The workspace templates: the bootstrap files `squidbot onboard` writes into a new workspace.
//!
//! SOUL, IDENTITY, USER, AGENTS, ENVIRONMENT and BOOTSTRAP go into every prompt of the main agent
//! (BOOTSTRAP.md only until the first-run interview deletes it), so they are short. HEARTBEAT.md
//! starts as an empty checklist, so the heartbeat skips until the owner adds an item.

use std::path::{Path, PathBuf};

use crate::skills::SkillsError;
use crate::storage::atomic;

/// The templates: file name and text.
pub const TEMPLATES: [(&str, &str); 7] = [
    ("SOUL.md", include_str!("templates/SOUL.md")),
    ("IDENTITY.md", include_str!("templates/IDENTITY.md")),
    ("USER.md", include_str!("templates/USER.md")),
    ("AGENTS.md", include_str!("templates/AGENTS.md")),
    ("ENVIRONMENT.md", include_str!("templates/ENVIRONMENT.md")),
    ("HEARTBEAT.md", include_str!("templates/HEARTBEAT.md")),
    ("BOOTSTRAP.md", include_str!("templates/BOOTSTRAP.md")),
];

/// Writes the templates missing from `workspace` (creating it), never overwriting a file;
/// returns the files written.
pub fn write_missing(workspace: &Path) -> Result<Vec<PathBuf>, SkillsError> {
    std::fs::create_dir_all(workspace)
        .map_err(|source| SkillsError::io("creating", workspace, source))?;
    let mut written = Vec::new();
    for (name, text) in TEMPLATES {
        let path = workspace.join(name);
        // Created only if absent in one step: a file the owner or a running agent made in the
        // meantime (the first-run interview writes USER.md) is never replaced.
        let created = atomic::write_new(&path, text.as_bytes())
            .map_err(|source| SkillsError::io("writing", &path, source))?;
        if created {
            written.push(path);
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_missing_templates_without_overwriting() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("workspace");
        std::fs::create_dir_all(&workspace).unwrap();
        std::fs::write(workspace.join("USER.md"), "# Mine\n").unwrap();
        let written = write_missing(&workspace).unwrap();
        assert_eq!(written.len(), TEMPLATES.len() - 1);
        assert!(!written.contains(&workspace.join("USER.md")));
        assert_eq!(
            std::fs::read_to_string(workspace.join("USER.md")).unwrap(),
            "# Mine\n"
        );
        assert_eq!(
            std::fs::read_to_string(workspace.join("SOUL.md")).unwrap(),
            TEMPLATES[0].1
        );
        assert!(write_missing(&workspace).unwrap().is_empty());
    }

    #[test]
    fn heartbeat_template_is_effectively_empty() {
        let text = TEMPLATES[5].1;
        assert!(crate::channels::heartbeat::checklist::is_effectively_empty(
            text
        ));
    }

    #[test]
    fn bootstrap_files_stay_short() {
        let total: usize = TEMPLATES
            .iter()
            .filter(|(name, _)| *name != "HEARTBEAT.md")
            .map(|(_, text)| text.len())
            .sum();
        assert!(total <= 4500, "bootstrap templates take {total} chars");
    }
}
