//! `edit_file`: replaces one exact occurrence of a text in a file, leaving every other byte as
//! it was.
//!
//! The match is exact (whitespace and line breaks count). A missing match, or one that occurs
//! more than once (the count is given), is an error that tells the model how to fix its call,
//! so an edit never lands in the wrong place.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{EDIT_CAP, blocking, io_failure, lock_workspace};
use crate::core::authority::{Effect, Effects};
use crate::core::ports::tool::{ToolContext, ToolOutput, TypedSpec, TypedTool};
use crate::workspace::{Access, WorkspaceGuard};

/// Replaces one exact occurrence of a text in a file.
pub struct EditFileTool {
    guard: Arc<WorkspaceGuard>,
    spec: TypedSpec<Arguments>,
}

/// The arguments of `edit_file`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Arguments {
    // No description for the model: the name says it, and every turn carries the schema.
    path: String,
    // Described by the tool.
    old_text: String,
    // Described by the tool (may be empty).
    new_text: String,
}

impl EditFileTool {
    /// The tool over `guard`.
    pub fn new(guard: Arc<WorkspaceGuard>) -> Self {
        let spec = TypedSpec::new(
            "edit_file",
            "Replace old_text, which must occur exactly once (include surrounding lines), with \
             new_text in a file.",
        );
        Self { guard, spec }
    }
}

#[async_trait]
impl TypedTool for EditFileTool {
    type Arguments = Arguments;

    fn definition(&self) -> &TypedSpec<Arguments> {
        &self.spec
    }

    fn effects(&self) -> Effects {
        Effects::of(&[Effect::ReadsFiles, Effect::WritesFiles])
    }

    async fn run(&self, arguments: Arguments, context: &ToolContext) -> ToolOutput {
        if arguments.old_text.is_empty() {
            return ToolOutput::error(
                "Error: old_text is empty; give the exact text to replace (use write_file to create a file).",
            );
        }
        let path = match self
            .guard
            .authorize(&arguments.path, Access::Write, context)
        {
            Ok(path) => path,
            Err(refusal) => return refusal,
        };
        let guard = self.guard.clone();
        blocking("edit_file", move || {
            let _lock = match lock_workspace(&guard) {
                Ok(lock) => lock,
                Err(output) => return output,
            };
            edit(
                &guard,
                &path,
                &arguments.path,
                &arguments.old_text,
                &arguments.new_text,
            )
        })
        .await
    }
}

/// Replaces the single occurrence of `old_text` in `path` with `new_text`.
/// Opened, read and written beneath the workspace (see [`WorkspaceGuard::confined`]).
pub(super) fn edit(
    guard: &WorkspaceGuard,
    path: &Path,
    shown: &str,
    old_text: &str,
    new_text: &str,
) -> ToolOutput {
    match guard.metadata(path) {
        Ok(meta) if meta.is_dir() => {
            return ToolOutput::error(format!("Error: {shown} is a directory."));
        }
        Ok(meta) if !meta.is_file() => {
            return ToolOutput::error(format!("Error: {shown} is not a regular file."));
        }
        Ok(meta) if meta.len() > EDIT_CAP => {
            return ToolOutput::error(format!(
                "Error: {shown} is {} bytes; edit_file handles files up to {} MiB. Use the shell tool.",
                meta.len(),
                EDIT_CAP / (1024 * 1024)
            ));
        }
        Ok(_) => {}
        Err(error) => return io_failure("edit", shown, &error),
    }
    let mut bytes = Vec::new();
    if let Err(error) = guard
        .open_read(path)
        .and_then(|mut file| std::io::Read::read_to_end(&mut file, &mut bytes))
    {
        return io_failure("read", shown, &error);
    }
    let Ok(text) = String::from_utf8(bytes) else {
        return ToolOutput::error(format!(
            "Error: {shown} is not UTF-8 text; edit_file only edits text files."
        ));
    };
    let count = text.matches(old_text).count();
    match count {
        0 => {
            return ToolOutput::error(format!(
                "Error: old_text was not found in {shown}. It must match exactly, including \
                 whitespace, indentation and line breaks; read the file and copy the text."
            ));
        }
        1 => {}
        n => {
            return ToolOutput::error(format!(
                "Error: old_text occurs {n} times in {shown}; it must occur exactly once. \
                 Include more surrounding text to pick one occurrence."
            ));
        }
    }
    let edited = text.replacen(old_text, new_text, 1);
    if let Err(error) = guard.replace(path, edited.as_bytes()) {
        return io_failure("write", shown, &error);
    }
    tracing::info!(path = %path.display(), before = text.len(), after = edited.len(), "Agent edited a file.");
    ToolOutput::ok(format!(
        "Edited {shown}: replaced 1 occurrence ({} bytes -> {} bytes).",
        text.len(),
        edited.len()
    ))
}
