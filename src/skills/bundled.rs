//! The skills that ship with squidbot, compiled into the binary.
//!
//! [`materialize`] writes them to `$SQUIDBOT_HOME/bundled-skills/<name>/SKILL.md` (only when the
//! content differs, so a normal start writes nothing), so the agent can `read_file` them at the
//! `file` the prompt gives; that directory is readable to the file tools even when they
//! are confined to the workspace. The gateway and `squidbot agent` both do this at start (two
//! versions of the binary may disagree on a skill's text), so it runs under the directory's
//! lock.

use std::path::{Path, PathBuf};

use crate::skills::SkillsError;
use crate::skills::catalog::SKILL_FILE;
use crate::storage::atomic;
use crate::storage::file_lock::FileLock;

/// The bundled skills: directory name and SKILL.md text.
pub const BUNDLED: [(&str, &str); 7] = [
    ("cron", include_str!("bundled/cron/SKILL.md")),
    ("git", include_str!("bundled/git/SKILL.md")),
    ("github", include_str!("bundled/github/SKILL.md")),
    ("memory", include_str!("bundled/memory/SKILL.md")),
    ("research", include_str!("bundled/research/SKILL.md")),
    (
        "skill-creator",
        include_str!("bundled/skill-creator/SKILL.md"),
    ),
    ("summarize", include_str!("bundled/summarize/SKILL.md")),
];

/// Where the bundled skills are materialized under `home`.
pub fn bundled_dir(home: &Path) -> PathBuf {
    home.join("bundled-skills")
}

/// Writes every bundled skill under [`bundled_dir`] whose file is missing or differs; returns
/// the directory.
pub fn materialize(home: &Path) -> Result<PathBuf, SkillsError> {
    let dir = bundled_dir(home);
    // Beside the directory, in the home: every shell command may read (so open, so `flock`)
    // the bundled skills, and a lock there would let one hold up the next start.
    let lock = FileLock::beside(&dir);
    let _lock =
        FileLock::exclusive(&lock).map_err(|source| SkillsError::io("locking", &lock, source))?;
    for (name, text) in BUNDLED {
        let path = dir.join(name).join(SKILL_FILE);
        if std::fs::read(&path).is_ok_and(|current| current == text.as_bytes()) {
            continue;
        }
        atomic::write(&path, text.as_bytes())
            .map_err(|source| SkillsError::io("writing", &path, source))?;
        tracing::debug!(path = %path.display(), "Wrote a bundled skill.");
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skills::SkillCatalog;
    use crate::skills::frontmatter;

    #[test]
    fn every_bundled_skill_parses_and_is_named_after_its_directory() {
        for (name, text) in BUNDLED {
            let (fm, body) = frontmatter::parse(text, Path::new(name)).unwrap();
            assert_eq!(fm.name.as_deref(), Some(name));
            assert!(!fm.description.is_empty(), "{name}");
            assert!(fm.description.len() <= 160, "{name}: description too long");
            assert!(!body.trim().is_empty(), "{name}");
        }
    }

    #[test]
    fn materialized_skills_are_readable_and_rewritten_when_changed() {
        let home = tempfile::tempdir().unwrap();
        let dir = materialize(home.path()).unwrap();
        assert_eq!(dir, bundled_dir(home.path()));
        let memory = dir.join("memory").join(SKILL_FILE);
        assert_eq!(std::fs::read_to_string(&memory).unwrap(), BUNDLED[3].1);
        std::fs::write(&memory, "stale").unwrap();
        materialize(home.path()).unwrap();
        assert_eq!(std::fs::read_to_string(&memory).unwrap(), BUNDLED[3].1);

        let catalog = SkillCatalog::new(vec![dir]);
        let names: Vec<String> = catalog.skills().iter().map(|s| s.name.clone()).collect();
        let expected: Vec<&str> = BUNDLED.iter().map(|(name, _)| *name).collect();
        assert_eq!(names, expected);
        let (xml, always) = catalog.prompt();
        assert_eq!(always.len(), 1);
        assert!(always[0].contains("memory_write"));
        assert!(!xml.contains("<skill name=\"memory\""));
        assert!(xml.contains("<skill name=\"research\""));
    }

    /// The skills and bootstrap templates are paid for on every turn (TARGETS.md: the whole
    /// prompt with all tools stays under 12k characters).
    #[test]
    fn prompt_share_of_skills_and_templates_stays_small() {
        let home = tempfile::tempdir().unwrap();
        let home = home.path().join("home").join("owner").join(".squidbot");
        let (xml, always) = SkillCatalog::new(vec![materialize(&home).unwrap()]).prompt();
        let templates: usize = crate::skills::templates::TEMPLATES
            .iter()
            .filter(|(name, _)| *name != "HEARTBEAT.md")
            .map(|(_, text)| text.len())
            .sum();
        let always: usize = always.iter().map(String::len).sum();
        let total = xml.len() + always + templates;
        assert!(total <= 5500, "skills and templates take {total} chars");
    }
}
