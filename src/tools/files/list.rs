//! `list_files`: the entries of a directory, directories first, capped at
//! [`LIST_CAP`](super::LIST_CAP).

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{LIST_CAP, blocking, io_failure};
use crate::core::authority::{Effect, Effects};
use crate::core::ports::tool::{ToolContext, ToolOutput, TypedSpec, TypedTool};
use crate::storage::beneath::EntryKind;
use crate::workspace::{Access, WorkspaceGuard};

/// Lists a directory.
pub struct ListFilesTool {
    guard: Arc<WorkspaceGuard>,
    spec: TypedSpec<Arguments>,
}

/// The arguments of `list_files`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Arguments {
    /// Directory path. Default '.'.
    path: Option<String>,
}

impl ListFilesTool {
    /// The tool over `guard`.
    pub fn new(guard: Arc<WorkspaceGuard>) -> Self {
        let spec = TypedSpec::new(
            "list_files",
            "List a directory (default: the workspace) as 'd name' and 'f name' lines.",
        );
        Self { guard, spec }
    }
}

#[async_trait]
impl TypedTool for ListFilesTool {
    type Arguments = Arguments;

    fn definition(&self) -> &TypedSpec<Arguments> {
        &self.spec
    }

    fn effects(&self) -> Effects {
        Effects::of(&[Effect::ReadsFiles])
    }

    async fn run(&self, arguments: Arguments, context: &ToolContext) -> ToolOutput {
        let shown = arguments
            .path
            .filter(|path| !path.is_empty())
            .unwrap_or_else(|| ".".to_owned());
        // `attachments/` itself names every conversation's directory: listing it is as
        // private as reading them, and the file rule refuses it alike.
        let path = match self.guard.authorize(&shown, Access::Read, context) {
            Ok(path) => path,
            Err(refusal) => return refusal,
        };
        let guard = self.guard.clone();
        blocking("list_files", move || list(&guard, &path, &shown, LIST_CAP)).await
    }
}

/// The listing of `path`, at most `cap` entries, read beneath the workspace: a link that
/// leads out is named as such and never followed.
pub(super) fn list(guard: &WorkspaceGuard, path: &Path, shown: &str, cap: usize) -> ToolOutput {
    if guard.metadata(path).is_ok_and(|meta| !meta.is_dir()) {
        return ToolOutput::error(format!(
            "Error: {shown} is not a directory; use read_file to read it."
        ));
    }
    let entries = match guard.list(path) {
        Ok(entries) => entries,
        Err(error) => return io_failure("list", shown, &error),
    };
    let mut dirs = Vec::new();
    let mut files = Vec::new();
    for (name, kind) in entries {
        match kind {
            EntryKind::Dir => dirs.push(name),
            EntryKind::File => files.push(name),
            EntryKind::Outside => files.push(format!("{name} (a link out of the workspace)")),
        }
    }
    if dirs.is_empty() && files.is_empty() {
        return ToolOutput::ok(format!("({shown} is empty)"));
    }
    dirs.sort();
    files.sort();
    let total = dirs.len() + files.len();
    let lines: Vec<String> = dirs
        .iter()
        .map(|name| format!("d {name}"))
        .chain(files.iter().map(|name| format!("f {name}")))
        .take(cap)
        .collect();
    let mut text = lines.join("\n");
    if total > cap {
        text.push_str(&format!(
            "\n[... {} more entries not shown; list a subdirectory or use the shell tool.]",
            total - cap
        ));
    }
    ToolOutput::ok(text)
}
