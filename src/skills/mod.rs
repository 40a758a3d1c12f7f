//! Skills: `<dir>/<name>/SKILL.md` files that teach the agent a task, and the workspace templates.
//!
//! - `frontmatter`: the YAML header of a SKILL.md (name, description, always, requires).
//! - `catalog`: [`SkillCatalog`], discovery in search order, gating by binaries and environment,
//!   an mtime cache with a short TTL (hot reload), and the prompt's skills XML.
//! - `prompt`: [`SkilledPrompt`], a prompt source that adds the catalogue to the bootstrap files.
//! - `bundled`: the skills compiled into the binary, materialized under `$SQUIDBOT_HOME`.
//! - `templates`: the workspace's bootstrap files (SOUL.md, AGENTS.md, ...) for `onboard`.

pub mod bundled;
pub mod catalog;
pub mod frontmatter;
pub mod prompt;
pub mod templates;
#[cfg(test)]
mod tests;

use std::path::PathBuf;

pub use catalog::{EnvLookup, Skill, SkillCatalog};
pub use prompt::SkilledPrompt;

/// What can go wrong reading or writing skill and template files.
#[derive(Debug, thiserror::Error)]
pub enum SkillsError {
    /// A SKILL.md does not start with a `---` frontmatter block.
    #[error("{path}: no frontmatter (the file must start with a `---` line)")]
    NoFrontmatter {
        /// The SKILL.md.
        path: PathBuf,
    },
    /// The frontmatter is not closed by a second `---` line.
    #[error("{path}: the frontmatter is not closed by a `---` line")]
    Unclosed {
        /// The SKILL.md.
        path: PathBuf,
    },
    /// The frontmatter is not valid YAML of the expected shape.
    #[error("{path}: invalid frontmatter: {error}")]
    Yaml {
        /// The SKILL.md.
        path: PathBuf,
        /// The parser's error.
        error: Box<serde_saphyr::Error>,
    },
    /// A file could not be read or written.
    #[error("{op} {path}: {error}")]
    Io {
        /// What was being done ("reading", "writing").
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        error: std::io::Error,
    },
}

impl SkillsError {
    fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            op,
            path: path.into(),
            error: source,
        }
    }
}
