//! [`MemoryFile`]: the global MEMORY.md, curated by the agent through `memory_write`.
//!
//! Writes are atomic; before each replace the current document is saved as `MEMORY.md.prev`,
//! so one bad write can always be undone by hand. Copy and replace are one step under an
//! exclusive [`WorkspaceLock`] (the gateway and `squidbot agent` may write
//! at the same moment; without it both copy the same old document to `.prev` and the version
//! one of them replaced is lost). The file tools and the import take the same lock. It is taken
//! inside an async mutex so that the turns of one process queue there instead of each holding a
//! blocking thread while it waits for the lock.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use tokio::sync::Mutex;

use super::file_lock::{FileLock, WorkspaceLock};
use super::workspace_files::WorkspaceFiles;
use super::{atomic, beneath, blocking, io_error};
use crate::core::ports::store::{MemoryStore, StoreError};

/// MEMORY.md in the workspace.
#[derive(Debug)]
pub struct MemoryFile {
    path: PathBuf,
    /// A tokio mutex: it is held across the blocking write, which is awaited.
    writing: Mutex<()>,
    /// The workspace.
    workspace: PathBuf,
    /// The lock every writer of the workspace's files holds.
    lock: WorkspaceLock,
    /// MEMORY.md read for prompts, re-read only when it changed.
    reads: std::sync::Arc<WorkspaceFiles>,
}

impl MemoryFile {
    /// The memory document of `workspace`.
    pub fn new(workspace: &Path) -> Self {
        Self {
            path: workspace.join("MEMORY.md"),
            writing: Mutex::new(()),
            workspace: workspace.to_owned(),
            lock: WorkspaceLock::beside(workspace),
            reads: std::sync::Arc::new(WorkspaceFiles::new(workspace)),
        }
    }

    /// The document with its writes under `lock` (the daemon passes its home's
    /// [`WorkspaceLock::new`]; the default, [`WorkspaceLock::beside`], is for tests).
    pub fn with_lock(mut self, lock: WorkspaceLock) -> Self {
        self.lock = lock;
        self
    }

    /// Where the document lives.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where the previous version is kept.
    pub fn previous_path(&self) -> PathBuf {
        self.path.with_file_name("MEMORY.md.prev")
    }

    /// Waits for the lock every writer of MEMORY.md holds (the import takes it too). Blocking.
    pub fn lock_blocking(&self) -> Result<FileLock, StoreError> {
        lock(&self.lock)
    }
}

#[async_trait]
impl MemoryStore for MemoryFile {
    async fn load(&self) -> Result<String, StoreError> {
        if let Some(mut cached) = self.reads.read_cached(&[Path::new("MEMORY.md")]) {
            let text = cached.pop().flatten();
            return Ok(text.map(|text| text.to_string()).unwrap_or_default());
        }
        let reads = self.reads.clone();
        blocking("read", &self.path, move || {
            // Beneath the workspace: a MEMORY.md linked out of it is refused, never read into
            // a prompt. Cached: a turn looks at the disk only for a change.
            let text = reads.read(&[Path::new("MEMORY.md")]).pop().flatten();
            Ok(text.map(|text| text.to_string()).unwrap_or_default())
        })
        .await
    }

    async fn replace(&self, content: &str) -> Result<Option<String>, StoreError> {
        let _writing = self.writing.lock().await;
        let path = self.path.clone();
        let previous = self.previous_path();
        let workspace = self.workspace.clone();
        let workspace_lock = self.lock.clone();
        let content = content.to_owned();
        blocking("write", &self.path, move || {
            let _lock = lock(&workspace_lock)?;
            // Beneath the workspace: a MEMORY.md linked out of it is neither copied into
            // MEMORY.md.prev nor followed; the write below replaces the link itself.
            let old = match beneath::read_to_string(&workspace, Path::new("MEMORY.md")) {
                Ok(old) => {
                    atomic::write(&previous, old.as_bytes())
                        .map_err(|e| io_error("write", &previous, e))?;
                    Some(old)
                }
                Err(error) if error.kind() == ErrorKind::NotFound => None,
                Err(error) if beneath::refused(&path, &error) => None,
                Err(error) => return Err(io_error("read", &path, error)),
            };
            atomic::write(&path, content.as_bytes()).map_err(|e| io_error("write", &path, e))?;
            Ok(old)
        })
        .await
    }
}

fn lock(lock: &WorkspaceLock) -> Result<FileLock, StoreError> {
    lock.acquire().map_err(|e| io_error("lock", lock.path(), e))
}
