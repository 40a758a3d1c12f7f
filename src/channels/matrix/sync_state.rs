//! The persisted sync position: the token to resume from and the events already handed over.
//!
//! The SDK stores its own sync token as soon as a response arrives, before anything was done
//! with the events in it; resuming from that token after a crash would lose them. So the
//! channel keeps its own token in `<store>/squidbot-sync.json` and advances it batch by batch:
//! a batch's token is written only when every event it submitted (and every batch before it)
//! was persisted by the router. Events persisted in a later batch are remembered by id, so the
//! batches replayed after a crash answer nothing twice.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::storage::atomic;

/// How many handled event ids are remembered (a few batches' worth is enough: only the
/// batches after the persisted token are ever replayed).
const RECENT: usize = 512;

/// What is on disk.
#[derive(Debug, Default, Clone, Serialize, Deserialize, PartialEq)]
struct Saved {
    /// The token every earlier event is handled for; `None` before the first sync.
    token: Option<String>,
    /// Ids of events persisted, newest last.
    handled: VecDeque<String>,
}

/// One sync batch whose events are not all persisted yet.
#[derive(Debug)]
struct Batch {
    id: u64,
    token: String,
    outstanding: usize,
    closed: bool,
}

/// The sync position and the batches in flight; shared behind a mutex by the sync loop and
/// the tasks waiting for persistence.
#[derive(Debug)]
pub struct SyncState {
    path: PathBuf,
    saved: Saved,
    batches: VecDeque<Batch>,
    next_id: u64,
}

impl SyncState {
    /// Loads the state from `path`; a missing or unreadable file starts fresh (the first sync
    /// then answers nothing, so nothing old is answered).
    pub fn load(path: &Path) -> Self {
        let saved = match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|error| {
                tracing::warn!(path = %path.display(), error = %error, "Unreadable Matrix sync state; starting without a token.");
                Saved::default()
            }),
            Err(_) => Saved::default(),
        };
        Self {
            path: path.to_owned(),
            saved,
            batches: VecDeque::new(),
            next_id: 0,
        }
    }

    /// The token to resume from, if any sync was ever completed.
    pub fn token(&self) -> Option<&str> {
        self.saved.token.as_deref()
    }

    /// Whether the event was already handed over (in a batch now replayed).
    pub fn handled(&self, event_id: &str) -> bool {
        self.saved.handled.iter().any(|id| id == event_id)
    }

    /// Starts a batch that ends at `token`; returns its id.
    pub fn open(&mut self, token: &str) -> u64 {
        self.next_id += 1;
        self.batches.push_back(Batch {
            id: self.next_id,
            token: token.to_owned(),
            outstanding: 0,
            closed: false,
        });
        self.next_id
    }

    /// One more event of `batch` waits for persistence.
    pub fn add(&mut self, batch: u64) {
        if let Some(b) = self.batches.iter_mut().find(|b| b.id == batch) {
            b.outstanding += 1;
        }
    }

    /// No more events will be added to `batch`; saves if that completed a prefix.
    pub fn close(&mut self, batch: u64) {
        if let Some(b) = self.batches.iter_mut().find(|b| b.id == batch) {
            b.closed = true;
        }
        self.commit();
    }

    /// An event of `batch` was persisted; remembers it and saves what became complete.
    pub fn persisted(&mut self, batch: u64, event_id: &str) {
        self.saved.handled.push_back(event_id.to_owned());
        while self.saved.handled.len() > RECENT {
            self.saved.handled.pop_front();
        }
        if let Some(b) = self.batches.iter_mut().find(|b| b.id == batch) {
            b.outstanding = b.outstanding.saturating_sub(1);
        }
        if !self.commit() {
            self.save();
        }
    }

    /// Advances the token past every complete batch at the front; saves and returns `true`
    /// when it moved.
    fn commit(&mut self) -> bool {
        let mut moved = false;
        while let Some(front) = self.batches.front() {
            if !front.closed || front.outstanding > 0 {
                break;
            }
            if let Some(done) = self.batches.pop_front() {
                self.saved.token = Some(done.token);
                moved = true;
            }
        }
        if moved {
            self.save();
        }
        moved
    }

    fn save(&self) {
        let write = serde_json::to_vec(&self.saved)
            .map_err(std::io::Error::other)
            .and_then(|bytes| atomic::write(&self.path, &bytes));
        if let Err(error) = write {
            tracing::warn!(path = %self.path.display(), error = %error, "Could not save the Matrix sync state.");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on_disk(path: &Path) -> Option<String> {
        SyncState::load(path).token().map(str::to_owned)
    }

    #[test]
    fn the_token_advances_only_past_fully_persisted_batches_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sync.json");
        let mut state = SyncState::load(&path);
        assert_eq!(state.token(), None);
        let empty = state.open("t1");
        state.close(empty);
        assert_eq!(on_disk(&path).as_deref(), Some("t1"));

        let first = state.open("t2");
        state.add(first);
        state.add(first);
        state.close(first);
        let second = state.open("t3");
        state.add(second);
        state.close(second);
        state.persisted(second, "$b");
        assert_eq!(on_disk(&path).as_deref(), Some("t1"), "t2 still waits");
        assert!(SyncState::load(&path).handled("$b"), "but $b is remembered");
        state.persisted(first, "$a1");
        assert_eq!(on_disk(&path).as_deref(), Some("t1"));
        state.persisted(first, "$a2");
        assert_eq!(on_disk(&path).as_deref(), Some("t3"), "both complete now");
    }

    #[test]
    fn an_open_batch_holds_the_token_back_and_garbage_starts_fresh() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sync.json");
        let mut state = SyncState::load(&path);
        let batch = state.open("t1");
        state.add(batch);
        state.persisted(batch, "$x");
        assert_eq!(on_disk(&path), None, "not closed yet");
        state.close(batch);
        assert_eq!(on_disk(&path).as_deref(), Some("t1"));
        std::fs::write(&path, "{not json").unwrap();
        assert_eq!(SyncState::load(&path).token(), None);
    }

    #[test]
    fn only_the_most_recent_ids_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = SyncState::load(&dir.path().join("s.json"));
        let batch = state.open("t");
        for n in 0..(RECENT + 10) {
            state.persisted(batch, &format!("${n}"));
        }
        assert!(!state.handled("$0"));
        assert!(state.handled(&format!("${}", RECENT + 9)));
    }
}
