//! [`MemoryFile`]: the global MEMORY.md, curated by the agent through `memory_write`.
//!
//! Writes are serialized by an async mutex (two sessions may call `memory_write` at once) and
//! are atomic; before each replace the current document is saved as `MEMORY.md.prev`, so one
//! bad write can always be undone by hand.

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use tokio::sync::Mutex;

use super::{atomic, blocking, io_error};
use crate::core::ports::store::{MemoryStore, StoreError};

/// MEMORY.md in the workspace.
#[derive(Debug)]
pub struct MemoryFile {
    path: PathBuf,
    /// A tokio mutex: it is held across the blocking write, which is awaited.
    writing: Mutex<()>,
}

impl MemoryFile {
    /// The memory document of `workspace`.
    pub fn new(workspace: &Path) -> Self {
        Self {
            path: workspace.join("MEMORY.md"),
            writing: Mutex::new(()),
        }
    }

    /// Where the document lives.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where the previous version is kept.
    pub fn previous_path(&self) -> PathBuf {
        self.path.with_file_name("MEMORY.md.prev")
    }
}

#[async_trait]
impl MemoryStore for MemoryFile {
    async fn load(&self) -> Result<String, StoreError> {
        let path = self.path.clone();
        blocking("read", &self.path, move || {
            match fs::read_to_string(&path) {
                Ok(text) => Ok(text),
                Err(error) if error.kind() == ErrorKind::NotFound => Ok(String::new()),
                Err(error) => Err(io_error("read", &path, error)),
            }
        })
        .await
    }

    async fn replace(&self, content: &str) -> Result<(), StoreError> {
        let _writing = self.writing.lock().await;
        let path = self.path.clone();
        let previous = self.previous_path();
        let content = content.to_owned();
        blocking("write", &self.path, move || {
            match fs::read(&path) {
                Ok(old) => {
                    atomic::write(&previous, &old).map_err(|e| io_error("write", &previous, e))?
                }
                Err(error) if error.kind() == ErrorKind::NotFound => {}
                Err(error) => return Err(io_error("read", &path, error)),
            }
            atomic::write(&path, content.as_bytes()).map_err(|e| io_error("write", &path, e))
        })
        .await
    }
}
