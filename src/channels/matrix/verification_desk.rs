//! Where the gateway and `squidbot matrix verify` meet: the owner compares the emoji on the
//! server's terminal, not in a chat the verification is meant to secure.
//!
//! The bot must not confirm an emoji verification on its own: confirming says "the emoji
//! match", and only a person who sees both screens can say that. A homeserver in the middle
//! would otherwise get its own device trusted by the bot while the owner is still comparing.
//! So the gateway publishes the emoji of a verification in progress to
//! `<store>/verification/pending.json`, and `squidbot matrix verify` shows them and writes the
//! owner's answer to `answer.json`; the gateway confirms or cancels accordingly and records the
//! outcome in `pending.json`. Both files are written atomically; only the home's owner can
//! write them (the home is private).
//!
//! One verification at a time: a newer one replaces the older in `pending.json`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::storage::atomic;

/// Where a verification stands, as the command shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// The emoji are shown; the bot waits for the owner's answer.
    Compare,
    /// Both sides confirmed: the owner's client shows the bot verified.
    Done,
    /// Cancelled by either side (or it timed out); `reason` says why.
    Cancelled,
}

/// A verification in progress (or just ended), as the gateway publishes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pending {
    /// The verification's id (its transaction or request event id).
    pub flow: String,
    /// Who asked (always the owner: nobody else's requests are answered).
    pub sender: String,
    /// The seven emoji, as "symbol description".
    pub emoji: Vec<String>,
    /// The three numbers, for clients that show numbers instead.
    pub decimals: String,
    /// When it was published (RFC 3339): a stale file from an old run is ignored.
    pub published: String,
    /// Where it stands.
    pub stage: Stage,
    /// Why it was cancelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The owner's answer to one verification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    /// The verification answered.
    pub flow: String,
    /// Whether the emoji on the owner's client are the ones shown.
    pub matches: bool,
}

/// The directory both sides use.
#[derive(Debug, Clone)]
pub struct Desk {
    dir: PathBuf,
}

impl Desk {
    /// The desk of the Matrix store at `store_dir`.
    pub fn new(store_dir: &Path) -> Self {
        Self {
            dir: store_dir.join("verification"),
        }
    }

    fn pending_path(&self) -> PathBuf {
        self.dir.join("pending.json")
    }

    fn answer_path(&self) -> PathBuf {
        self.dir.join("answer.json")
    }

    /// Forgets what an earlier run left (its verifications died with it).
    pub fn clear(&self) {
        let _ = std::fs::remove_file(self.pending_path());
        let _ = std::fs::remove_file(self.answer_path());
    }

    /// Publishes `pending` (replacing any older one).
    pub fn publish(&self, pending: &Pending) -> std::io::Result<()> {
        let bytes = serde_json::to_vec_pretty(pending).map_err(std::io::Error::other)?;
        atomic::write(&self.pending_path(), &bytes)
    }

    /// The verification published last, if any (and readable).
    pub fn pending(&self) -> Option<Pending> {
        let bytes = std::fs::read(self.pending_path()).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Records the owner's answer to `flow`.
    pub fn answer(&self, flow: &str, matches: bool) -> std::io::Result<()> {
        let answer = Answer {
            flow: flow.to_owned(),
            matches,
        };
        let bytes = serde_json::to_vec(&answer).map_err(std::io::Error::other)?;
        atomic::write(&self.answer_path(), &bytes)
    }

    /// The owner's answer to `flow`, taken (so it is acted on once), if given yet.
    pub fn take_answer(&self, flow: &str) -> Option<bool> {
        let bytes = std::fs::read(self.answer_path()).ok()?;
        let answer: Answer = serde_json::from_slice(&bytes).ok()?;
        if answer.flow != flow {
            return None;
        }
        let _ = std::fs::remove_file(self.answer_path());
        Some(answer.matches)
    }

    /// Marks `flow` ended, if it is still the one published.
    pub fn finish(&self, flow: &str, stage: Stage, reason: Option<String>) {
        let Some(mut pending) = self.pending().filter(|p| p.flow == flow) else {
            return;
        };
        pending.stage = stage;
        pending.reason = reason;
        if let Err(error) = self.publish(&pending) {
            tracing::warn!(error = %error, "Could not record how a Matrix verification ended.");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(flow: &str) -> Pending {
        Pending {
            flow: flow.into(),
            sender: "@owner:x".into(),
            emoji: vec!["🐶 Dog".into()],
            decimals: "1 2 3".into(),
            published: "2026-11-26T00:00:00Z".into(),
            stage: Stage::Compare,
            reason: None,
        }
    }

    #[test]
    fn an_answer_is_taken_once_and_only_for_its_flow() {
        let dir = tempfile::tempdir().unwrap();
        let desk = Desk::new(dir.path());
        desk.publish(&pending("f1")).unwrap();
        assert_eq!(desk.pending(), Some(pending("f1")));
        assert_eq!(desk.take_answer("f1"), None);
        desk.answer("f0", true).unwrap();
        assert_eq!(desk.take_answer("f1"), None, "an answer to another flow");
        desk.answer("f1", false).unwrap();
        assert_eq!(desk.take_answer("f1"), Some(false));
        assert_eq!(desk.take_answer("f1"), None, "taken already");
        desk.finish("f1", Stage::Cancelled, Some("mismatch".into()));
        assert_eq!(desk.pending().unwrap().stage, Stage::Cancelled);
        desk.finish("f0", Stage::Done, None);
        assert_eq!(desk.pending().unwrap().stage, Stage::Cancelled, "not f0's");
        desk.clear();
        assert_eq!(desk.pending(), None);
    }
}
