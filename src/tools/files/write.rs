//! `write_file`: creates or replaces a file in the workspace with the given text.
//!
//! Parent directories are created; the write is atomic (temporary file, fsync, rename), which
//! also means a symlink at the final component is replaced, never followed.

use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{blocking, io_failure, lock_workspace};
use crate::core::authority::{Effect, Effects};
use crate::core::ports::tool::{ToolContext, ToolOutput, TypedSpec, TypedTool};
use crate::workspace::{Access, WorkspaceGuard};

/// Creates or overwrites a file.
pub struct WriteFileTool {
    guard: Arc<WorkspaceGuard>,
    spec: TypedSpec<Arguments>,
}

/// The arguments of `write_file`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Arguments {
    // No description for the model: the name says it, and every turn carries the schema.
    path: String,
    /// The complete new content.
    content: String,
}

impl WriteFileTool {
    /// The tool over `guard`.
    pub fn new(guard: Arc<WorkspaceGuard>) -> Self {
        let spec = TypedSpec::new(
            "write_file",
            "Create or overwrite a file (and its directories); to change part of one, use \
             edit_file.",
        );
        Self { guard, spec }
    }
}

#[async_trait]
impl TypedTool for WriteFileTool {
    type Arguments = Arguments;

    fn definition(&self) -> &TypedSpec<Arguments> {
        &self.spec
    }

    fn effects(&self) -> Effects {
        Effects::of(&[Effect::WritesFiles])
    }

    async fn run(&self, arguments: Arguments, context: &ToolContext) -> ToolOutput {
        let path = match self
            .guard
            .authorize(&arguments.path, Access::Write, context)
        {
            Ok(path) => path,
            Err(refusal) => return refusal,
        };
        let guard = self.guard.clone();
        blocking("write_file", move || {
            let shown = &arguments.path;
            let _lock = match lock_workspace(&guard) {
                Ok(lock) => lock,
                Err(output) => return output,
            };
            if path.is_dir() {
                return ToolOutput::error(format!("Error: {shown} is a directory."));
            }
            let existed = path.exists();
            let bytes = arguments.content.as_bytes();
            // Beneath the workspace: a directory swapped for a link since the path was
            // checked cannot redirect the write.
            if let Err(error) = guard.replace(&path, bytes) {
                return io_failure("write", shown, &error);
            }
            tracing::info!(path = %path.display(), bytes = bytes.len(), "Agent wrote a file.");
            let verb = if existed { "Overwrote" } else { "Created" };
            ToolOutput::ok(format!("{verb} {shown} ({} bytes).", bytes.len()))
        })
        .await
    }
}
