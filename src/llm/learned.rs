//! [`Learned`]: what squidbot found out about a server by talking to it, kept in the home so
//! that no later process has to find it out again.
//!
//! Two quirks are learned from a failed first try, each costing one wasted request: a server
//! that refuses `stream_options` (a 4xx naming it: vLLM, older llama.cpp, Mistral's 422) and one
//! that sends an empty stream when tools are offered (llama.cpp without a tool-call parser),
//! which is then asked without streaming. Kept per process only, every `squidbot agent -m`
//! and every gateway restart paid that request again; kept in `llm/quirks.json`, only the first
//! one does. A server upgraded since loses nothing but the live text of tool turns or the
//! reported usage; deleting the file makes squidbot find out again.
//!
//! The file is small and written rarely: read once at start, rewritten whole (atomically,
//! under `llm/quirks.lock`, merged with what another process wrote meanwhile) when something
//! new is learned.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::storage::{FileLock, atomic};

/// What is known about one server (a completions URL and model id).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quirks {
    /// It refuses `stream_options`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub no_stream_options: bool,
    /// It sends an empty stream when tools are offered: ask without streaming then.
    #[serde(default, skip_serializing_if = "is_false")]
    pub no_streamed_tools: bool,
}

fn is_false(value: &bool) -> bool {
    !*value
}

/// The file's content.
#[derive(Debug, Default, Serialize, Deserialize)]
struct QuirksFile {
    #[serde(default)]
    servers: BTreeMap<String, Quirks>,
}

/// The quirks of every server this home talked to; shared by all model clients.
#[derive(Debug, Default)]
pub struct Learned {
    /// `None`: kept in memory only (tests, a client built without a home).
    path: Option<PathBuf>,
    /// A std mutex: held only to read or update the map.
    known: Mutex<BTreeMap<String, Quirks>>,
}

impl Learned {
    /// What the home at `home` learned so far; a missing or unreadable file is nothing learned
    /// (an unreadable one is logged, and replaced when something is learned).
    pub fn load(home: &Path) -> Self {
        let path = home.join("llm").join("quirks.json");
        let known = read(&path).servers;
        Self {
            path: Some(path),
            known: Mutex::new(known),
        }
    }

    /// What is known about `server`.
    pub fn recall(&self, server: &str) -> Quirks {
        self.lock().get(server).copied().unwrap_or_default()
    }

    /// Adds what `learn` sets to what is known about `server`, and keeps it in the home.
    pub fn remember(&self, server: &str, learn: impl FnOnce(&mut Quirks)) {
        let quirks = {
            let mut known = self.lock();
            let quirks = known.entry(server.to_owned()).or_default();
            learn(quirks);
            *quirks
        };
        let Some(path) = self.path.clone() else {
            return;
        };
        // Written at once, on the calling thread: it happens once per server and quirk, and a
        // one-shot `agent -m` may exit right after the call, before a background write ran.
        if let Err(error) = persist(&path, server, quirks) {
            tracing::warn!(path = %path.display(), error = %error, "Could not keep what was learned about an LLM server; it is known to this process only.");
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Quirks>> {
        self.known.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The file at `path`, or nothing learned.
fn read(path: &Path) -> QuirksFile {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|error| {
            tracing::warn!(path = %path.display(), error = %error, "Unreadable LLM quirks file; starting from nothing learned.");
            QuirksFile::default()
        }),
        Err(_) => QuirksFile::default(),
    }
}

/// Merges `quirks` for `server` into the file, under its lock.
fn persist(path: &Path, server: &str, quirks: Quirks) -> std::io::Result<()> {
    let _lock = FileLock::exclusive(&path.with_extension("lock"))?;
    let mut file = read(path);
    let entry = file.servers.entry(server.to_owned()).or_default();
    entry.no_stream_options |= quirks.no_stream_options;
    entry.no_streamed_tools |= quirks.no_streamed_tools;
    let bytes = serde_json::to_vec_pretty(&file).map_err(std::io::Error::other)?;
    atomic::write(path, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_one_process_learned_the_next_one_knows_and_merges() {
        let home = tempfile::tempdir().unwrap();
        let first = Learned::load(home.path());
        assert_eq!(first.recall("a"), Quirks::default());
        first.remember("a", |q| q.no_stream_options = true);
        let second = Learned::load(home.path());
        assert!(second.recall("a").no_stream_options);
        // Learned by another process meanwhile: both are kept.
        first.remember("b", |q| q.no_streamed_tools = true);
        second.remember("a", |q| q.no_streamed_tools = true);
        let third = Learned::load(home.path());
        assert_eq!(
            third.recall("a"),
            Quirks {
                no_stream_options: true,
                no_streamed_tools: true
            }
        );
        assert!(third.recall("b").no_streamed_tools);
        std::fs::write(home.path().join("llm/quirks.json"), "{not json").unwrap();
        assert_eq!(Learned::load(home.path()).recall("a"), Quirks::default());
    }
}
