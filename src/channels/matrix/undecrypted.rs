//! Messages that could not be decrypted yet, kept and tried again as keys arrive.
//!
//! A room key travels separately from the messages it opens (to-device, over Olm), and often
//! arrives a moment after the first of them: the sender's client was slow to share it, or it
//! waited for the bot's device to be known. Such a message is kept here, tried again after
//! every sync (a sync returns as soon as a to-device key arrives), and handed on like a live
//! message once it decrypts. Only one still unreadable after [`NOTICE_AFTER`] gets the notice
//! that says so; after [`GIVE_UP_AFTER`] it is dropped. The list is bounded ([`MAX_PENDING`]).
//!
//! The list is saved (`<store>/squidbot-undecrypted.json`, atomically) whenever it changes:
//! the sync token moves past a batch once its readable messages are handled, so a message
//! still waiting for its key at a restart would otherwise never be seen again.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use matrix_sdk::deserialized_responses::{TimelineEvent, TimelineEventKind};
use matrix_sdk::ruma::OwnedRoomId;
use matrix_sdk::ruma::events::AnySyncTimelineEvent;
use matrix_sdk::ruma::events::room::encrypted::OriginalSyncRoomEncryptedEvent;
use matrix_sdk::ruma::serde::Raw;
use matrix_sdk::{Client, Room};

/// How long a message may stay unreadable before its sender is told.
pub const NOTICE_AFTER: Duration = Duration::from_secs(10);
/// How long a message is tried again at all.
pub const GIVE_UP_AFTER: Duration = Duration::from_secs(3600);
/// The most messages kept (the oldest go first).
pub const MAX_PENDING: usize = 200;

/// One message waiting for its key.
#[derive(Debug)]
struct Pending {
    room_id: OwnedRoomId,
    raw: Raw<AnySyncTimelineEvent>,
    sender: String,
    session: String,
    since: Instant,
    told: bool,
}

/// What one round of retries found.
#[derive(Debug, Default)]
pub struct Retried {
    /// Messages that decrypt now, in the order they arrived.
    pub decrypted: Vec<(Room, TimelineEvent)>,
    /// Messages unreadable for [`NOTICE_AFTER`]: `(room, sender, megolm session)`.
    pub due_notice: Vec<(Room, String, String)>,
}

/// One kept message as saved.
#[derive(Debug, Serialize, Deserialize)]
struct Saved {
    room_id: OwnedRoomId,
    event: Raw<AnySyncTimelineEvent>,
    sender: String,
    session: String,
    /// When it arrived (Unix seconds).
    since: u64,
    told: bool,
}

/// The messages waiting for their keys.
#[derive(Debug, Default)]
pub struct Undecrypted {
    pending: VecDeque<Pending>,
    /// Where the list is saved; `None`: kept in memory only.
    path: Option<PathBuf>,
}

fn unix(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl Undecrypted {
    /// The list saved at `path` (empty when there is none or it is unreadable), saved there
    /// from now on.
    pub fn load(path: &Path) -> Self {
        let saved: Vec<Saved> = std::fs::read(path)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default();
        let now = SystemTime::now();
        let pending = saved
            .into_iter()
            .map(|saved| {
                let age = Duration::from_secs(unix(now).saturating_sub(saved.since));
                Pending {
                    room_id: saved.room_id,
                    raw: saved.event,
                    sender: saved.sender,
                    session: saved.session,
                    since: Instant::now().checked_sub(age).unwrap_or_else(Instant::now),
                    told: saved.told,
                }
            })
            .collect();
        Self {
            pending,
            path: Some(path.to_owned()),
        }
    }

    /// Writes the list to its file (a failure is logged: the messages are still kept here).
    fn save(&self) {
        let Some(path) = &self.path else {
            return;
        };
        let now = SystemTime::now();
        let saved: Vec<Saved> = self
            .pending
            .iter()
            .map(|p| Saved {
                room_id: p.room_id.clone(),
                event: p.raw.clone(),
                sender: p.sender.clone(),
                session: p.session.clone(),
                since: unix(now).saturating_sub(p.since.elapsed().as_secs()),
                told: p.told,
            })
            .collect();
        let written = serde_json::to_vec(&saved)
            .map_err(std::io::Error::other)
            .and_then(|bytes| crate::storage::atomic::write(path, &bytes));
        if let Err(error) = written {
            tracing::warn!(path = %path.display(), error = %error, "Could not save the Matrix messages waiting for their keys.");
        }
    }

    /// Keeps a message of `room_id` from `sender` that megolm `session` could not open.
    pub fn add(
        &mut self,
        room_id: OwnedRoomId,
        raw: Raw<AnySyncTimelineEvent>,
        sender: String,
        session: String,
    ) {
        // A batch synced again (after a restart) brings the same message once more.
        let id =
            |raw: &Raw<AnySyncTimelineEvent>| raw.get_field::<String>("event_id").ok().flatten();
        let event_id = id(&raw);
        if event_id.is_some() && self.pending.iter().any(|p| id(&p.raw) == event_id) {
            return;
        }
        if self.pending.len() >= MAX_PENDING {
            self.pending.pop_front();
        }
        self.pending.push_back(Pending {
            room_id,
            raw,
            sender,
            session,
            since: Instant::now(),
            told: false,
        });
        self.save();
    }

    /// How long until the next notice is due, if any message waits for one: the sync's
    /// long poll is cut to it, so the notice is not late by a whole poll.
    pub fn next_due(&self) -> Option<Duration> {
        self.pending
            .iter()
            .filter(|p| !p.told)
            .map(|p| NOTICE_AFTER.saturating_sub(p.since.elapsed()))
            .min()
    }

    /// Tries every kept message again with the keys the store has now.
    pub async fn retry(&mut self, client: &Client) -> Retried {
        let mut retried = Retried::default();
        if self.pending.is_empty() {
            return retried;
        }
        let before = self.pending.len();
        let mut kept = VecDeque::with_capacity(self.pending.len());
        while let Some(mut pending) = self.pending.pop_front() {
            let Some(room) = client.get_room(&pending.room_id) else {
                continue;
            };
            let raw = pending
                .raw
                .clone()
                .cast_unchecked::<OriginalSyncRoomEncryptedEvent>();
            match room.decrypt_event(&raw, None).await {
                Ok(event) if !matches!(event.kind, TimelineEventKind::UnableToDecrypt { .. }) => {
                    tracing::info!(room = %pending.room_id, waited_ms = pending.since.elapsed().as_millis() as u64, "A Matrix message decrypted once its key arrived.");
                    retried.decrypted.push((room, event));
                    continue;
                }
                _ => {}
            }
            let age = pending.since.elapsed();
            if age >= GIVE_UP_AFTER {
                tracing::warn!(room = %pending.room_id, session = %pending.session, "A Matrix message stayed undecryptable for an hour; no longer tried.");
                continue;
            }
            if age >= NOTICE_AFTER && !pending.told {
                pending.told = true;
                retried
                    .due_notice
                    .push((room, pending.sender.clone(), pending.session.clone()));
            }
            kept.push_back(pending);
        }
        self.pending = kept;
        if self.pending.len() != before || !retried.due_notice.is_empty() {
            self.save();
        }
        retried
    }
}
