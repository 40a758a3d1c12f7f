//! The one rule for every file a tool reads, writes or sends: [`WorkspaceGuard::authorize`].
//!
//! A tool that declares a file effect ([`Effect::ReadsFiles`], [`Effect::WritesFiles`],
//! [`Effect::SendsFiles`]) resolves each path it is given here and nowhere else, so what a
//! person may reach through a tool is decided by who asked and who reads, never by which tool
//! they asked:
//!
//! - **Reads and sends**: the owner's private files (MEMORY.md, USER.md), the attachments of
//!   other conversations and dotfiles (`.netrc`, `.env`, `.ssh/`, `.git/`: credentials and
//!   settings) only in a turn no one but the owner takes part in.
//! - **Writes by the owner**: anywhere the guard allows (the workspace).
//! - **Writes by anyone else**: only inside their own conversation's directory
//!   (`attachments/<channel>/<conversation>/`, where the channels save what they sent), by a
//!   path that is there before and after links are followed, and never a dotfile or a dot
//!   directory. Everything the owner's turns, commands and jobs read or run lives elsewhere:
//!   instruction files, skills, the scripts granted in `tools.shell.unattended_writes`, a
//!   `Makefile`, `.curlrc`, `.gitconfig`, `.git/hooks`, `.ssh/config`, `*.pth`, an MCP server's
//!   script, a spawn profile. A list of such names would be complete only for the attacks its
//!   authors knew; the rule names the one place a stranger's writes may go instead.
//!
//! [`Effect::ReadsFiles`]: crate::core::authority::Effect::ReadsFiles
//! [`Effect::WritesFiles`]: crate::core::authority::Effect::WritesFiles
//! [`Effect::SendsFiles`]: crate::core::authority::Effect::SendsFiles

use std::path::{Component, Path, PathBuf};

use super::{WorkspaceGuard, attachments_dir};
use crate::core::ports::tool::{ToolContext, ToolOutput};

/// What a tool does with a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reads it (or lists it, for a directory).
    Read,
    /// Creates, replaces or edits it.
    Write,
    /// Sends its bytes to the conversation's readers.
    Send,
}

impl WorkspaceGuard {
    /// The resolved path of `input` if the turn of `context` may have `access` to it; an error
    /// result the model reads otherwise. Every file effect of every tool is decided here.
    pub fn authorize(
        &self,
        input: &str,
        access: Access,
        context: &ToolContext,
    ) -> Result<PathBuf, ToolOutput> {
        let resolved = match access {
            Access::Read | Access::Send => self.resolve_for_read(input),
            Access::Write => self.resolve_for_write(input),
        };
        let path = resolved.map_err(|error| ToolOutput::error(format!("Error: {error}")))?;
        if !context.audience.is_owner() {
            if self.is_owners_private(&path) {
                return Err(ToolOutput::error(
                    "Error: that file is the owner's private memory; it is not read, sent or \
                     changed in a conversation others take part in.",
                ));
            }
            // Files people sent in other conversations (the owner's DM, someone's mail) are
            // theirs; a conversation others take part in sees only its own.
            if self.is_other_conversations_attachment(&path, &context.session) {
                return Err(ToolOutput::error(
                    "Error: that file was sent in another conversation; in a conversation \
                     others take part in, only its own attachments are read.",
                ));
            }
            // Dotfiles hold the owner's credentials and settings (`.netrc`, `.env`,
            // `.git-credentials`, `.ssh/`): the owner's alone, by the name as given and as
            // resolved.
            if self.dotted(Path::new(input)) || self.dotted(&path) {
                return Err(ToolOutput::error(
                    "Error: files and directories whose names start with a dot are the \
                     owner's; they are not read, sent or changed in a conversation others take \
                     part in.",
                ));
            }
        }
        if access == Access::Write && !context.authority.is_owner() {
            self.stranger_may_write(input, &path, context)?;
        }
        Ok(path)
    }

    /// Whether a component of `path` below the directory it lies in (the workspace or a
    /// skill directory; a relative path as given) starts with a dot. The directories
    /// themselves may be dotted (`~/.squidbot/workspace`).
    fn dotted(&self, path: &Path) -> bool {
        let relative = if path.is_relative() {
            path.to_owned()
        } else {
            match self.confined(path) {
                Some((_, relative)) => relative,
                None => path
                    .strip_prefix(self.root())
                    .map(Path::to_owned)
                    .unwrap_or_default(),
            }
        };
        relative.components().any(|part| match part {
            Component::Normal(name) => name.to_string_lossy().starts_with('.'),
            _ => false,
        })
    }

    /// Someone other than the owner writes only beneath their own conversation's directory,
    /// by the path as given and as resolved, and never a name starting with a dot.
    fn stranger_may_write(
        &self,
        input: &str,
        resolved: &Path,
        context: &ToolContext,
    ) -> Result<(), ToolOutput> {
        let own = attachments_dir(&context.session);
        let refusal = || {
            ToolOutput::error(format!(
                "Error: only the owner can ask to write there. Files of this conversation may \
                 be written under {}/ (no names starting with a dot).",
                own.display()
            ))
        };
        let given = Path::new(input);
        let given = given.strip_prefix(self.root()).unwrap_or(given);
        let lexical_ok = given.is_relative()
            && given.starts_with(&own)
            && given.components().all(|part| match part {
                Component::Normal(name) => !name.to_string_lossy().starts_with('.'),
                _ => false,
            });
        let resolved_ok = resolved
            .strip_prefix(self.root())
            .is_ok_and(|relative| relative.starts_with(&own) && relative != own)
            && !self.is_instruction(resolved);
        if lexical_ok && resolved_ok {
            Ok(())
        } else {
            tracing::warn!(session = %context.session, path = input, "A write asked by someone other than the owner was refused: outside their conversation's directory.");
            Err(refusal())
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;
    use crate::core::audience::Audience;
    use crate::core::authority::Authority;
    use crate::core::session::SessionId;

    fn context(audience: Audience, authority: Authority) -> ToolContext {
        ToolContext::for_test()
            .with_session(SessionId::new("matrix", "!room:example.org").unwrap())
            .with_audience(audience)
            .with_authority(authority)
    }

    #[test]
    fn a_stranger_writes_only_in_their_own_conversations_directory() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let own = root.join("attachments/matrix/!room_example.org");
        std::fs::create_dir_all(&own).unwrap();
        std::fs::create_dir_all(root.join("docs")).unwrap();
        std::fs::create_dir_all(root.join("scripts")).unwrap();
        std::fs::write(root.join("docs/AGENTS.md"), "be kind").unwrap();
        symlink("docs/AGENTS.md", root.join("AGENTS.md")).unwrap();
        symlink("../../../scripts", own.join("out")).unwrap();
        let guard = WorkspaceGuard::new(&root, true, &[]).unwrap();
        let stranger = context(Audience::Shared, Authority::Other);
        let owner = context(Audience::Owner, Authority::Owner);
        let write = |input: &str, context: &ToolContext| {
            guard.authorize(input, Access::Write, context).is_ok()
        };
        assert!(write(
            "attachments/matrix/!room_example.org/notes.txt",
            &stranger
        ));
        for input in [
            "scripts/nightly.sh",
            ".curlrc",
            ".gitconfig",
            ".git/hooks/pre-commit",
            ".ssh/config",
            "Makefile",
            "lib/site.pth",
            "AGENTS.md",
            "docs/AGENTS.md",
            "attachments/matrix/!room_example.org/.bashrc",
            "attachments/matrix/!room_example.org/out/nightly.sh",
            "attachments/matrix/!room_example.org/../other/x",
            "attachments/matrix/other-room/x",
            "attachments/matrix/!room_example.org",
        ] {
            assert!(!write(input, &stranger), "{input}");
            assert!(write(input, &owner) || input.contains(".."), "{input}");
        }
        let absolute = own.join("notes.txt");
        assert!(write(absolute.to_str().unwrap(), &stranger));
    }

    #[test]
    fn private_files_and_others_attachments_are_read_only_by_an_owner_only_audience() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("attachments/matrix/!dm_example.org")).unwrap();
        std::fs::write(root.join("attachments/matrix/!dm_example.org/pin.txt"), "1").unwrap();
        std::fs::write(root.join("MEMORY.md"), "m").unwrap();
        std::fs::write(root.join("USER.md"), "u").unwrap();
        let guard = WorkspaceGuard::new(&root, true, &[]).unwrap();
        let shared = context(Audience::Shared, Authority::Owner);
        let alone = context(Audience::Owner, Authority::Owner);
        std::fs::write(root.join(".netrc"), "machine x password y").unwrap();
        for input in [
            "MEMORY.md",
            "USER.md",
            "attachments/matrix/!dm_example.org/pin.txt",
            ".netrc",
        ] {
            for access in [Access::Read, Access::Send, Access::Write] {
                assert!(guard.authorize(input, access, &shared).is_err(), "{input}");
                assert!(guard.authorize(input, access, &alone).is_ok(), "{input}");
            }
        }
    }
}
