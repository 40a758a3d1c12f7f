//! What the channel has done with its mailbox, saved so a restart neither answers a mail twice
//! nor skips one, and no reply is lost.
//!
//! The file (`$SQUIDBOT_HOME/state/email/<account>.json`) holds the mailbox's UIDVALIDITY, the
//! highest UID handled, the state of each recent UID (persisted, answered, ignored), the
//! Message-IDs the bot generated (the loop guard refuses mail carrying them) and the replies
//! that still have to be sent. It is rewritten atomically after every change, under a std
//! mutex: the writes are small and quick, and holding the lock across the write keeps the file
//! in the order of the changes.
//!
//! A mailbox seen for the first time (no progress stored, or a lost state directory) and one
//! the server renumbered (a new UIDVALIDITY) start from a *floor*: the highest UID there at
//! that moment. Mail at or below it is history, never answered, except the *backlog*: the
//! unseen mail of the last `backlog_days`, chosen once at that start.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use super::EmailError;
use super::reply::OutgoingMail;
use crate::storage::atomic;

/// How many per-UID states are kept; older UIDs are `\Seen` on the server by then.
const KEEP_MESSAGES: usize = 2000;
/// How many generated Message-IDs are remembered for the loop guard.
const KEEP_SENT_IDS: usize = 1000;

/// What happened to one mail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageState {
    /// Submitted and persisted in its session; the reply may still be under way.
    Persisted,
    /// Answered (or the answer is queued for retry in `pending`).
    Answered,
    /// Not answered, on purpose (the guard's reason).
    Ignored(String),
}

/// A reply that could not be sent yet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingReply {
    /// The mail, with its Message-ID fixed so a retry is the same mail.
    pub mail: OutgoingMail,
    /// Failed attempts so far.
    pub attempts: u32,
    /// When to try next (Unix seconds).
    pub next_attempt: i64,
    /// The last error, for `/status`.
    pub last_error: String,
}

/// The saved state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
struct ProgressData {
    uid_validity: Option<u32>,
    last_uid: u32,
    /// Mail at or below this UID predates the start: not answered unless in `backlog`. A
    /// file from before floors were kept has none (0): all of its mail counted.
    floor: u32,
    /// The older unseen mail chosen at the start to be answered; a UID leaves once handled.
    backlog: BTreeSet<u32>,
    messages: BTreeMap<u32, MessageState>,
    sent_ids: VecDeque<String>,
    /// Message-IDs of mail handed to the agent: the same mail delivered again (to a second
    /// address of the bot, through a list, by a server replaying its queue) is not answered
    /// twice.
    taken_ids: VecDeque<(String, u32)>,
    pending: Vec<PendingReply>,
}

impl ProgressData {
    /// `uid`'s state is `state`: it leaves the backlog, and the oldest states beyond
    /// [`KEEP_MESSAGES`] are forgotten.
    fn set_state(&mut self, uid: u32, state: MessageState) {
        self.messages.insert(uid, state);
        self.backlog.remove(&uid);
        self.last_uid = self.last_uid.max(uid);
        while self.messages.len() > KEEP_MESSAGES {
            self.messages.pop_first();
        }
    }

    /// Remembers a Message-ID the bot generated, the oldest beyond [`KEEP_SENT_IDS`] forgotten.
    fn note_sent_id(&mut self, id: &str) {
        self.sent_ids.push_back(id.to_owned());
        while self.sent_ids.len() > KEEP_SENT_IDS {
            self.sent_ids.pop_front();
        }
    }
}

/// A summary for `/status`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ProgressSummary {
    /// The mailbox's UIDVALIDITY, once known.
    pub uid_validity: Option<u32>,
    /// The highest UID handled.
    pub last_uid: u32,
    /// Replies waiting for a retry.
    pub pending_replies: usize,
}

/// The progress of one account, backed by its file.
#[derive(Debug)]
pub struct Progress {
    path: PathBuf,
    // A std mutex: held only for in-memory updates and one small atomic file write, never
    // across an await.
    data: Mutex<ProgressData>,
}

impl Progress {
    /// The progress file of `account` under `home`.
    pub fn path_for(home: &Path, account: &str) -> PathBuf {
        let name = crate::workspace::safe_name(&account.to_ascii_lowercase(), "account");
        home.join("state")
            .join("email")
            .join(format!("{name}.json"))
    }

    /// Loads `path`; a missing file is a fresh start. A corrupt file is moved aside (so nothing
    /// is lost for inspection) and the channel starts fresh from the server's `\Seen` flags.
    pub fn load(path: PathBuf) -> Result<Self, EmailError> {
        let data = match std::fs::read(&path) {
            Ok(bytes) => match serde_json::from_slice(&bytes) {
                Ok(data) => data,
                Err(error) => {
                    let aside = path.with_extension("json.corrupt");
                    tracing::warn!(path = %path.display(), error = %error, "Email progress file is corrupt; moved aside, starting from the server's flags.");
                    let _ = std::fs::rename(&path, aside);
                    ProgressData::default()
                }
            },
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => ProgressData::default(),
            Err(error) => {
                return Err(EmailError::Progress {
                    path,
                    error,
                });
            }
        };
        let mut data: ProgressData = data;
        // A reply whose first attempt was under way when the last process ended may or may
        // not have reached the server: it is due now (at worst the same mail twice, with the
        // same Message-ID), not after the in-flight lease.
        for pending in data.pending.iter_mut().filter(|p| p.attempts == 0) {
            pending.next_attempt = 0;
        }
        Ok(Self {
            path,
            data: Mutex::new(data),
        })
    }

    fn lock(&self) -> MutexGuard<'_, ProgressData> {
        self.data
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    fn save(&self, data: &ProgressData) -> Result<(), EmailError> {
        let bytes = serde_json::to_vec_pretty(data).map_err(|e| EmailError::Progress {
            path: self.path.clone(),
            error: e.into(),
        })?;
        atomic::write(&self.path, &bytes).map_err(|error| EmailError::Progress {
            path: self.path.clone(),
            error,
        })
    }

    /// Whether the mailbox with `uid_validity` needs a start: it was never seen, or the
    /// server renumbered it (the stored UIDVALIDITY differs).
    pub fn needs_start(&self, uid_validity: u32) -> bool {
        self.lock().uid_validity != Some(uid_validity)
    }

    /// Whether a UIDVALIDITY was stored before (a start is then a renumbering, not a first).
    pub fn knew_mailbox(&self) -> bool {
        self.lock().uid_validity.is_some()
    }

    /// Starts the mailbox `uid_validity` afresh: every UID up to `highest` is history except
    /// `backlog`; the per-UID states of a renumbered mailbox are void.
    pub fn start(
        &self,
        uid_validity: u32,
        highest: u32,
        backlog: impl IntoIterator<Item = u32>,
    ) -> Result<(), EmailError> {
        let mut data = self.lock();
        data.uid_validity = Some(uid_validity);
        data.last_uid = highest;
        data.floor = highest;
        data.backlog = backlog.into_iter().filter(|uid| *uid <= highest).collect();
        data.messages.clear();
        self.save(&data)
    }

    /// Whether `uid` is mail to handle: above the floor, or in the backlog.
    pub fn wanted(&self, uid: u32) -> bool {
        let data = self.lock();
        uid > data.floor || data.backlog.contains(&uid)
    }

    /// The highest UID handled.
    pub fn last_uid(&self) -> u32 {
        self.lock().last_uid
    }

    /// What happened to `uid`, if anything.
    pub fn state(&self, uid: u32) -> Option<MessageState> {
        self.lock().messages.get(&uid).cloned()
    }

    /// Records `state` for `uid`; an answered mail never goes back to persisted.
    pub fn record(&self, uid: u32, state: MessageState) -> Result<(), EmailError> {
        let mut data = self.lock();
        if state == MessageState::Persisted
            && data.messages.get(&uid) == Some(&MessageState::Answered)
        {
            return Ok(());
        }
        data.set_state(uid, state);
        self.save(&data)
    }

    /// Remembers a Message-ID the bot generated (replies do so through [`Progress::answering`]).
    #[cfg(test)]
    pub fn add_sent_id(&self, id: &str) -> Result<(), EmailError> {
        let mut data = self.lock();
        data.note_sent_id(id);
        self.save(&data)
    }

    /// Notes that the mail `uid` with Message-ID `id` is handed to the agent; `false` when
    /// another mail with that id was (a second delivery). The same UID again is its own
    /// first delivery, resumed after a crash.
    pub fn take_id(&self, id: &str, uid: u32) -> Result<bool, EmailError> {
        let mut data = self.lock();
        if let Some((_, taken)) = data.taken_ids.iter().find(|(taken, _)| taken == id) {
            return Ok(*taken == uid);
        }
        data.taken_ids.push_back((id.to_owned(), uid));
        while data.taken_ids.len() > KEEP_MESSAGES {
            data.taken_ids.pop_front();
        }
        self.save(&data)?;
        Ok(true)
    }

    /// Whether `id` is a Message-ID the bot generated.
    pub fn is_own_id(&self, id: &str) -> bool {
        self.lock().sent_ids.iter().any(|sent| sent == id)
    }

    /// Records, in one write, that `mail` answers `uid` (if any) and is on its way: its
    /// Message-ID for the loop guard, `uid` as answered, and `mail` queued to be sent at
    /// `send_by` should the attempt under way not finish (a crash). The sender removes it once
    /// the server took it; so a crash at any step sends it once more at worst, with the same
    /// Message-ID, which mail clients show once.
    pub fn answering(
        &self,
        uid: Option<u32>,
        mail: &OutgoingMail,
        send_by: i64,
    ) -> Result<(), EmailError> {
        let mut data = self.lock();
        data.note_sent_id(&mail.message_id);
        if let Some(uid) = uid {
            data.set_state(uid, MessageState::Answered);
        }
        data.pending.push(PendingReply {
            mail: mail.clone(),
            attempts: 0,
            next_attempt: send_by,
            last_error: String::new(),
        });
        self.save(&data)
    }

    /// Queues `mail` for a retry at `next_attempt` after a failure.
    pub fn add_pending(
        &self,
        mail: OutgoingMail,
        error: String,
        next_attempt: i64,
    ) -> Result<(), EmailError> {
        let mut data = self.lock();
        match data
            .pending
            .iter_mut()
            .find(|p| p.mail.message_id == mail.message_id)
        {
            Some(pending) => {
                pending.attempts += 1;
                pending.next_attempt = next_attempt;
                pending.last_error = error;
            }
            None => data.pending.push(PendingReply {
                mail,
                attempts: 1,
                next_attempt,
                last_error: error,
            }),
        }
        self.save(&data)
    }

    /// The queued replies due at `now` (Unix seconds).
    pub fn due(&self, now: i64) -> Vec<PendingReply> {
        let data = self.lock();
        data.pending
            .iter()
            .filter(|p| p.next_attempt <= now)
            .cloned()
            .collect()
    }

    /// The earliest retry time, if any reply is queued.
    pub fn next_due(&self) -> Option<i64> {
        self.lock().pending.iter().map(|p| p.next_attempt).min()
    }

    /// Removes the queued reply with `message_id` (it was sent).
    pub fn remove_pending(&self, message_id: &str) -> Result<(), EmailError> {
        let mut data = self.lock();
        data.pending.retain(|p| p.mail.message_id != message_id);
        self.save(&data)
    }

    /// The summary for `/status`.
    pub fn summary(&self) -> ProgressSummary {
        let data = self.lock();
        ProgressSummary {
            uid_validity: data.uid_validity,
            last_uid: data.last_uid,
            pending_replies: data.pending.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outgoing(id: &str) -> OutgoingMail {
        OutgoingMail {
            to: "alice@example.org".into(),
            subject: "Re: hi".into(),
            in_reply_to: Some("m1@example.org".into()),
            references: vec!["m1@example.org".into()],
            text: "hello".into(),
            message_id: id.into(),
        }
    }

    #[test]
    fn survives_a_reload_and_resets_on_new_uid_validity() {
        let dir = tempfile::tempdir().unwrap();
        let path = Progress::path_for(dir.path(), "Bot@Example.org");
        assert!(path.ends_with("state/email/bot@example.org.json"));
        let progress = Progress::load(path.clone()).unwrap();
        assert!(progress.needs_start(7));
        assert!(!progress.knew_mailbox());
        progress.start(7, 0, []).unwrap();
        assert!(!progress.needs_start(7));
        progress.record(3, MessageState::Persisted).unwrap();
        progress.record(3, MessageState::Answered).unwrap();
        progress.record(3, MessageState::Persisted).unwrap();
        progress
            .record(5, MessageState::Ignored("own_address".into()))
            .unwrap();
        progress.add_sent_id("squidbot.1@example.org").unwrap();
        assert!(progress.take_id("m1@example.org", 3).unwrap());
        assert!(progress.take_id("m1@example.org", 3).unwrap());
        assert!(!progress.take_id("m1@example.org", 4).unwrap());
        progress
            .add_pending(outgoing("squidbot.2@x"), "refused".into(), 100)
            .unwrap();
        progress
            .add_pending(outgoing("squidbot.2@x"), "refused again".into(), 200)
            .unwrap();

        let reloaded = Progress::load(path).unwrap();
        assert_eq!(reloaded.state(3), Some(MessageState::Answered));
        assert_eq!(reloaded.last_uid(), 5);
        assert!(reloaded.is_own_id("squidbot.1@example.org"));
        assert!(reloaded.due(150).is_empty());
        let due = reloaded.due(200);
        assert_eq!(due.len(), 1);
        assert_eq!(due[0].attempts, 2);
        assert_eq!(reloaded.next_due(), Some(200));
        reloaded.remove_pending("squidbot.2@x").unwrap();
        assert_eq!(reloaded.summary().pending_replies, 0);

        assert!(!reloaded.needs_start(7));
        assert!(reloaded.needs_start(8));
        assert!(reloaded.knew_mailbox());
        // Renumbered with 60 old messages, 58 and 59 unseen and recent: only those two and
        // what comes after count.
        reloaded.start(8, 60, [58, 59, 99]).unwrap();
        assert_eq!(reloaded.state(3), None);
        assert_eq!(reloaded.last_uid(), 60);
        assert!(reloaded.is_own_id("squidbot.1@example.org"));
        let wanted: Vec<u32> = (1..=62).filter(|uid| reloaded.wanted(*uid)).collect();
        assert_eq!(wanted, [58, 59, 61, 62]);
        reloaded.record(58, MessageState::Answered).unwrap();
        let reloaded = Progress::load(reloaded.path.clone()).unwrap();
        assert!(!reloaded.wanted(58) && reloaded.wanted(59));
    }

    #[test]
    fn a_corrupt_file_is_moved_aside() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.json");
        std::fs::write(&path, b"{not json").unwrap();
        let progress = Progress::load(path.clone()).unwrap();
        assert_eq!(progress.last_uid(), 0);
        assert!(dir.path().join("p.json.corrupt").exists());
    }
}
