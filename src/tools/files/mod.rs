//! The file tools: `read_file`, `write_file`, `edit_file` and `list_files`.
//!
//! Every path goes through the [`WorkspaceGuard`]'s one file rule ([`WorkspaceGuard::authorize`]:
//! symlinks followed, checked by components, and decided by who asked and who reads), so with
//! `restrict_to_workspace` the model can read the workspace and the skill directories and write
//! only the workspace, and someone other than the owner writes only in their own
//! conversation's directory. Reads are capped ([`READ_CAP`], with a note on how to read on),
//! binary files are refused, and listings are capped ([`LIST_CAP`]). Writes are atomic (temporary
//! file and rename, see `storage::atomic`) and keep an existing file's permissions; writes and
//! edits hold the workspace's lock ([`WorkspaceGuard::lock`], also held by MEMORY.md's writers),
//! so an edit's read and write never interleave with a write by the gateway or another
//! `squidbot agent` on the same workspace. All file I/O runs on the blocking pool; every failure
//! is an error result that says what went wrong.

mod edit;
mod list;
mod read;
#[cfg(test)]
mod tests;
mod write;

use std::sync::Arc;

use crate::core::ports::tool::{Tool, ToolOutput};
use crate::storage::file_lock::FileLock;
use crate::workspace::WorkspaceGuard;

pub use edit::EditFileTool;
pub use list::ListFilesTool;
pub use read::ReadFileTool;
pub use write::WriteFileTool;

/// Most bytes of text one `read_file` call returns.
pub const READ_CAP: usize = 256 * 1024;
/// Largest file `edit_file` will load and rewrite.
pub const EDIT_CAP: u64 = 8 * 1024 * 1024;
/// Most entries one `list_files` call shows.
pub const LIST_CAP: usize = 500;

/// The four file tools over `guard`, in registration order.
pub fn file_tools(guard: Arc<WorkspaceGuard>) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(ReadFileTool::new(guard.clone())),
        Arc::new(WriteFileTool::new(guard.clone())),
        Arc::new(EditFileTool::new(guard.clone())),
        Arc::new(ListFilesTool::new(guard)),
    ]
}

/// Runs blocking file work on the blocking pool; a panic or cancellation becomes an error result.
async fn blocking(
    tool: &'static str,
    work: impl FnOnce() -> ToolOutput + Send + 'static,
) -> ToolOutput {
    match tokio::task::spawn_blocking(work).await {
        Ok(output) => output,
        Err(error) => {
            tracing::error!(tool, error = %error, "File tool task failed.");
            ToolOutput::error(format!("Error: {tool} failed internally: {error}"))
        }
    }
}

/// An I/O error on `shown` (the path as the model gave it) as a clear error result.
fn io_failure(action: &str, shown: &str, error: &std::io::Error) -> ToolOutput {
    use std::io::ErrorKind;
    let reason = match error.kind() {
        ErrorKind::NotFound => "it does not exist".to_owned(),
        ErrorKind::PermissionDenied => "permission denied".to_owned(),
        ErrorKind::IsADirectory => "it is a directory".to_owned(),
        ErrorKind::NotADirectory => "a part of the path is not a directory".to_owned(),
        _ => error.to_string(),
    };
    ToolOutput::error(format!("Error: cannot {action} {shown}: {reason}"))
}

/// Waits for the lock of `guard`'s workspace; held until dropped. Blocking.
fn lock_workspace(guard: &WorkspaceGuard) -> Result<FileLock, ToolOutput> {
    guard
        .lock()
        .acquire()
        .map_err(|error| ToolOutput::error(format!("Error: cannot lock the workspace: {error}")))
}
