//! `list_files`: the entries of a directory, directories first, capped at
//! [`LIST_CAP`](super::LIST_CAP).

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{LIST_CAP, blocking, io_failure};
use crate::core::ports::tool::{Tool, ToolContext, ToolOutput, ToolSpec, parse_arguments};
use crate::tools::workspace_path::WorkspaceGuard;

/// Lists a directory.
pub struct ListFilesTool {
    guard: Arc<WorkspaceGuard>,
    spec: ToolSpec,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Arguments {
    path: Option<String>,
}

impl ListFilesTool {
    /// The tool over `guard`.
    pub fn new(guard: Arc<WorkspaceGuard>) -> Self {
        let spec = ToolSpec {
            name: "list_files".to_owned(),
            description: "List a directory (default: the workspace): 'd name' for directories, \
                'f name' for files."
                .to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Directory path. Default '.'."}
                },
                "additionalProperties": false
            }),
        };
        Self { guard, spec }
    }
}

#[async_trait]
impl Tool for ListFilesTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, arguments: Value, _context: &ToolContext) -> ToolOutput {
        let arguments: Arguments = match parse_arguments("list_files", arguments) {
            Ok(arguments) => arguments,
            Err(output) => return output,
        };
        let shown = arguments
            .path
            .filter(|path| !path.is_empty())
            .unwrap_or_else(|| ".".to_owned());
        let path = match self.guard.resolve_for_read(&shown) {
            Ok(path) => path,
            Err(error) => return ToolOutput::error(format!("Error: {error}")),
        };
        blocking("list_files", move || list(&path, &shown, LIST_CAP)).await
    }
}

/// The listing of `path`, at most `cap` entries.
pub(super) fn list(path: &Path, shown: &str, cap: usize) -> ToolOutput {
    if path.exists() && !path.is_dir() {
        return ToolOutput::error(format!(
            "Error: {shown} is not a directory; use read_file to read it."
        ));
    }
    let entries = match std::fs::read_dir(path) {
        Ok(entries) => entries,
        Err(error) => return io_failure("list", shown, &error),
    };
    let mut dirs = Vec::new();
    let mut files = Vec::new();
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(error) => return io_failure("list", shown, &error),
        };
        let name = entry.file_name().to_string_lossy().into_owned();
        // Follow symlinks so a link to a directory is listed as one.
        if std::fs::metadata(entry.path()).is_ok_and(|meta| meta.is_dir()) {
            dirs.push(name);
        } else {
            files.push(name);
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
