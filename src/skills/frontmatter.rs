//! The frontmatter of a SKILL.md: the YAML between a leading `---` line and the next one.
//!
//! Fields: `name` (default: the directory name), `description`, `always`, `requires.bins`,
//! `requires.env` and `metadata.squidbot.emoji`; anything else is ignored, so skills written for
//! other agents still load.

use std::path::Path;

use serde::Deserialize;

use crate::skills::SkillsError;

/// The parsed frontmatter of one skill.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Frontmatter {
    /// The skill's name, when given.
    pub name: Option<String>,
    /// What the skill does and when to use it.
    pub description: String,
    /// Whether the body is inlined into every prompt (when available).
    pub always: bool,
    /// What must be present for the skill to be usable.
    pub requires: Requires,
    /// Extra data; only `squidbot.emoji` is read.
    pub metadata: Metadata,
}

/// `requires`: binaries on `PATH` and non-empty environment variables.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Requires {
    /// Executables that must be found on `PATH`.
    pub bins: Vec<String>,
    /// Environment variables that must be set and non-empty.
    pub env: Vec<String>,
}

/// `metadata`: only the `squidbot` key is read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Metadata {
    /// squidbot's own metadata.
    pub squidbot: SquidbotMetadata,
}

/// `metadata.squidbot`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct SquidbotMetadata {
    /// An emoji shown next to the skill's name.
    pub emoji: Option<String>,
}

/// Splits `text` into its frontmatter and the body after it; `path` names the file in errors.
pub fn parse<'a>(text: &'a str, path: &Path) -> Result<(Frontmatter, &'a str), SkillsError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = strip_fence(text) else {
        return Err(SkillsError::NoFrontmatter {
            path: path.to_owned(),
        });
    };
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            let yaml = &rest[..offset];
            let body = &rest[offset + line.len()..];
            let frontmatter = if yaml.trim().is_empty() {
                Frontmatter::default()
            } else {
                serde_saphyr::from_str(yaml).map_err(|source| SkillsError::Yaml {
                    path: path.to_owned(),
                    error: Box::new(source),
                })?
            };
            return Ok((frontmatter, body));
        }
        offset += line.len();
    }
    Err(SkillsError::Unclosed {
        path: path.to_owned(),
    })
}

/// The text after a first line that is exactly `---`.
fn strip_fence(text: &str) -> Option<&str> {
    let (first, rest) = text.split_once('\n')?;
    (first.trim_end() == "---").then_some(rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str) -> Result<(Frontmatter, &str), SkillsError> {
        parse(text, Path::new("SKILL.md"))
    }

    #[test]
    fn valid_frontmatter_with_every_field() {
        let text = "---\nname: git\ndescription: \"Use git: commit, diff.\"\nalways: true\nrequires:\n  bins: [git]\n  env: [GIT_TOKEN]\nmetadata:\n  squidbot:\n    emoji: \"🐙\"\n  other: 1\nlicense: MIT\n---\n# Git\nBody.\n";
        let (fm, body) = check(text).unwrap();
        assert_eq!(fm.name.as_deref(), Some("git"));
        assert_eq!(fm.description, "Use git: commit, diff.");
        assert!(fm.always);
        assert_eq!(fm.requires.bins, ["git"]);
        assert_eq!(fm.requires.env, ["GIT_TOKEN"]);
        assert_eq!(fm.metadata.squidbot.emoji.as_deref(), Some("🐙"));
        assert_eq!(body, "# Git\nBody.\n");
    }

    #[test]
    fn defaults_when_fields_are_absent() {
        let (fm, body) = check("---\r\ndescription: x\r\n---\r\nbody").unwrap();
        assert_eq!(fm.name, None);
        assert!(!fm.always);
        assert!(fm.requires.bins.is_empty());
        assert_eq!(body, "body");
        let (fm, _) = check("---\n---\n").unwrap();
        assert_eq!(fm, Frontmatter::default());
    }

    #[test]
    fn missing_frontmatter_is_an_error() {
        assert!(matches!(
            check("# Just markdown\n"),
            Err(SkillsError::NoFrontmatter { .. })
        ));
        assert!(matches!(check(""), Err(SkillsError::NoFrontmatter { .. })));
    }

    #[test]
    fn broken_frontmatter_is_an_error() {
        assert!(matches!(
            check("---\ndescription: x\n"),
            Err(SkillsError::Unclosed { .. })
        ));
        assert!(matches!(
            check("---\ndescription: [unclosed\n---\nbody"),
            Err(SkillsError::Yaml { .. })
        ));
        assert!(matches!(
            check("---\nalways: sometimes\n---\n"),
            Err(SkillsError::Yaml { .. })
        ));
    }
}
