//! [`Authority`]: whether the person who asked for a turn is the owner, and so whether its
//! tools may do what lasts.
//!
//! [`Audience`](crate::core::audience::Audience) answers who *reads* a turn (the owner's
//! private memory stays out of a room others are in); this answers who *asked*. In a shared
//! room the owner and a guest read the same replies, but only the owner's requests may
//! schedule jobs, run sub-agents, call MCP servers or rewrite the instructions every later turn
//! of the owner obeys (AGENTS.md, SOUL.md, HEARTBEAT.md, skills, …): a guest who could would
//! act with the owner's rights long after the conversation.
//!
//! It is decided once per turn from the [`Origin`] the channel stated at its edge: a person is
//! the owner only when the channel vouched for it (the owner's Matrix id; a mail's From only
//! with an authentication pass, see the email channel). The heartbeat, cron jobs and
//! sub-agents act with the owner's authority because only the owner can start them: the
//! configuration is the owner's, and `cron_add` and `spawn` are themselves owner-only.

use crate::core::origin::Origin;

/// Whose authority a turn's tools act with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Authority {
    /// The owner asked (or the owner's own automation runs).
    Owner,
    /// Someone else asked, or it is not known who (the default: fail closed).
    #[default]
    Other,
}

impl Authority {
    /// The authority of a turn of `origin`.
    pub fn of(origin: &Origin) -> Self {
        match origin {
            Origin::Person { owner: true, .. } => Self::Owner,
            Origin::Person { .. } => Self::Other,
            Origin::Heartbeat | Origin::Cron { .. } | Origin::SubAgent { .. } => Self::Owner,
        }
    }

    /// Whether the owner asked.
    pub fn is_owner(self) -> bool {
        self == Self::Owner
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_owner_and_the_owners_automation_have_the_owners_authority() {
        assert_eq!(
            Authority::of(&Origin::owner_as("@alex:example.org")),
            Authority::Owner
        );
        // The id alone proves nothing: only what the channel vouched for counts.
        assert_eq!(
            Authority::of(&Origin::person("@alex:example.org")),
            Authority::Other
        );
        assert_eq!(Authority::of(&Origin::owner()), Authority::Owner);
        assert_eq!(Authority::of(&Origin::Heartbeat), Authority::Owner);
        assert_eq!(Authority::default(), Authority::Other);
    }
}
