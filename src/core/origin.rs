//! [`Origin`]: who started a turn.
//!
//! What a turn may do and how it is recorded depends on where it came from: only a person's
//! message moves the heartbeat's "last active session" and may schedule jobs (a cron job that
//! schedules cron jobs, or a heartbeat that does, could multiply without anyone asking), and a
//! summary tells the heartbeat's check-ins apart from what the owner said. Deciding that from
//! sender strings let any channel whose sender happened to read `heartbeat` or `cron:…` pass as
//! one; the type makes every source say what it is.
//!
//! History keeps the original squidbot's `sender_id` string ([`Origin::sender_id`]), so files
//! written by either implementation stay readable by both.

use std::borrow::Cow;
use std::fmt;

use crate::core::session::SessionId;

/// The sender id the heartbeat's messages are stored with.
const HEARTBEAT: &str = "heartbeat";

/// The prefix of a cron job's sender id (`cron:<job id>`).
const CRON_PREFIX: &str = "cron:";

/// Who started a turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A person writing on a channel; `sender` is their address there (a Matrix user id, a
    /// mail address, `http` for the API, `owner` in the terminal).
    Person {
        /// The sender's id on the channel.
        sender: String,
        /// Whether the channel vouched, at its edge, that the sender is the owner: the
        /// owner's Matrix id, a mail from the owner's address with an authentication pass, the
        /// terminal and the API (whoever uses them holds the owner's shell or token). Core
        /// decides nothing about owners from ids or channel names; it reads this.
        owner: bool,
    },
    /// The heartbeat's periodic check-in.
    Heartbeat,
    /// A scheduled job firing.
    Cron {
        /// The job's id.
        job: String,
    },
    /// A sub-agent working for a turn of another session.
    SubAgent {
        /// The session whose turn spawned it.
        parent: SessionId,
    },
}

impl Origin {
    /// A person with the given sender id whom the channel did not vouch for as the owner.
    pub fn person(sender: impl Into<String>) -> Self {
        Self::Person {
            sender: sender.into(),
            owner: false,
        }
    }

    /// The owner, as the channel vouched, writing as `sender`.
    pub fn owner_as(sender: impl Into<String>) -> Self {
        Self::Person {
            sender: sender.into(),
            owner: true,
        }
    }

    /// The owner at the terminal (`squidbot agent`), stored as sender `owner`.
    pub fn owner() -> Self {
        Self::owner_as("owner")
    }

    /// Whether a person the channel vouched for as the owner started the turn. The
    /// heartbeat, cron jobs and sub-agents are not a person, so they are not the owner (they
    /// act with the owner's authority, see [`Authority`](crate::core::authority::Authority)).
    pub fn is_owner(&self) -> bool {
        matches!(self, Self::Person { owner: true, .. })
    }

    /// The `sender_id` stored in history: the person's id, `heartbeat`, `cron:<job>`, or the
    /// parent session of a sub-agent (as the original did).
    pub fn sender_id(&self) -> Cow<'_, str> {
        match self {
            Self::Person { sender, .. } => Cow::Borrowed(sender),
            Self::Heartbeat => Cow::Borrowed(HEARTBEAT),
            Self::Cron { job } => Cow::Owned(format!("{CRON_PREFIX}{job}")),
            Self::SubAgent { parent } => Cow::Owned(parent.to_string()),
        }
    }

    /// Whether a person sent it: only then is the session recorded as the last active one.
    pub fn is_person(&self) -> bool {
        matches!(self, Self::Person { .. })
    }

    /// Whether the turn is offered tools that create jobs (`cron_add`). Only a person may
    /// schedule: a job or check-in that schedules more could grow without anyone asking.
    pub fn may_schedule(&self) -> bool {
        self.is_person()
    }

    /// Whether a stored `sender_id` is the heartbeat's: a summary labels those messages apart
    /// from what the owner said. Persons cannot collide with it (their ids carry `@`, or are
    /// `http` and `owner`).
    pub fn is_heartbeat_sender(sender_id: &str) -> bool {
        sender_id == HEARTBEAT
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Person {
                sender,
                owner: true,
            } => write!(f, "owner {sender}"),
            Self::Person { sender, .. } => write!(f, "person {sender}"),
            Self::Heartbeat => f.write_str("heartbeat"),
            Self::Cron { job } => write!(f, "cron job {job}"),
            Self::SubAgent { parent } => write!(f, "sub-agent of {parent}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_sender_ids_match_the_original() {
        assert_eq!(Origin::person("@a:b").sender_id(), "@a:b");
        assert_eq!(Origin::Heartbeat.sender_id(), "heartbeat");
        assert_eq!(Origin::Cron { job: "j1".into() }.sender_id(), "cron:j1");
        let parent = SessionId::new("matrix", "!r:x").unwrap();
        assert_eq!(Origin::SubAgent { parent }.sender_id(), "matrix:!r:x");
        assert!(Origin::is_heartbeat_sender(&Origin::Heartbeat.sender_id()));
        assert!(!Origin::is_heartbeat_sender("@heartbeat:x"));
    }

    #[test]
    fn only_a_person_records_activity_and_schedules() {
        let parent = SessionId::new("cli", "local").unwrap();
        for origin in [
            Origin::Heartbeat,
            Origin::Cron { job: "j".into() },
            Origin::SubAgent { parent },
        ] {
            assert!(!origin.is_person(), "{origin}");
            assert!(!origin.may_schedule(), "{origin}");
        }
        // A person whose address reads like a built-in source is still a person.
        let spoof = Origin::person("cron:x");
        assert!(spoof.is_person() && spoof.may_schedule());
        assert!(!spoof.is_owner() && Origin::owner().is_owner());
        assert!(!Origin::Heartbeat.is_owner());
    }
}
