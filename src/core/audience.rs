//! [`Audience`]: whether anyone but the owner takes part in a turn, and so whether the owner's
//! private memory may enter it.
//!
//! MEMORY.md and USER.md describe the owner; they belong in a conversation only when no one
//! else reads it. A turn's audience is decided once, before the turn runs, and the rest follows
//! from it: the memory manager leaves both files out of a [`Audience::Shared`] prompt, the tool
//! set neither offers nor runs owner-only tools (`memory_write`), and `search_history` searches
//! only the asking session.
//!
//! The decision is made from [`Readers`]: the people who will read the turn's reply, as told
//! by the channel that delivers it ([`ReplySink::readers`]). Those are the people of the session
//! in every channel: a Matrix room's members, a mail session's one correspondent, the owner at
//! the terminal. A heartbeat or cron turn replies through its target session's outbox, so it
//! gets that session's audience; a sub-agent takes its parent's. Anything not known is shared:
//! the decision fails closed.
//!
//! [`ReplySink::readers`]: crate::core::ports::channel::ReplySink::readers

use crate::core::owner::Owner;

/// Who takes part in a turn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Audience {
    /// No one but the owner: the owner's private memory is part of the turn.
    Owner,
    /// Someone else takes part, or it is not known that no one does (the default).
    #[default]
    Shared,
}

impl Audience {
    /// The audience of a turn of a session on `channel` whose replies reach `readers`.
    ///
    /// The terminal and the HTTP API are the owner's by construction (see [`Owner`]); anywhere
    /// else it is the owner's only if the readers are known, there is at least one (a room
    /// with nobody in it yet is read by whoever joins), and every one of them is the owner.
    pub fn of(owner: &Owner, channel: &str, readers: &Readers) -> Self {
        if Owner::owns_channel(channel) {
            return Self::Owner;
        }
        match readers {
            Readers::People(people)
                if !people.is_empty() && people.iter().all(|person| owner.is(channel, person)) =>
            {
                Self::Owner
            }
            Readers::People(_) | Readers::Unknown => Self::Shared,
        }
    }

    /// Whether the owner's private memory (MEMORY.md, USER.md, `memory_write`, every session's
    /// history) belongs in the turn.
    pub fn is_owner(self) -> bool {
        self == Self::Owner
    }
}

/// Who reads what a channel delivers to one session, besides the bot itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Readers {
    /// The channel does not know (the default for every sink that does not say).
    #[default]
    Unknown,
    /// These sender ids on the channel (Matrix user ids, mail addresses).
    People(Vec<String>),
}

impl Readers {
    /// The given people.
    pub fn people<S: Into<String>>(people: impl IntoIterator<Item = S>) -> Self {
        Self::People(people.into_iter().map(Into::into).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALEX: &str = "@alex:example.org";
    const EVE: &str = "@eve:example.org";

    fn owner() -> Owner {
        Owner::nobody()
            .with(ALEX, Some("matrix"))
            .with("alex@example.org", Some("email"))
    }

    fn check(channel: &str, readers: Readers, expected: Audience) {
        assert_eq!(
            Audience::of(&owner(), channel, &readers),
            expected,
            "{channel} {readers:?}"
        );
    }

    #[test]
    fn a_matrix_room_is_private_only_when_everyone_in_it_is_the_owner() {
        check("matrix", Readers::people([ALEX]), Audience::Owner);
        check("matrix", Readers::people([ALEX, EVE]), Audience::Shared);
        check("matrix", Readers::people([EVE]), Audience::Shared);
        // Matrix ids are case-sensitive: a look-alike is someone else.
        check(
            "matrix",
            Readers::people(["@Alex:example.org"]),
            Audience::Shared,
        );
        // Nobody there yet, or nobody known: whoever joins later would read it.
        check(
            "matrix",
            Readers::people(Vec::<String>::new()),
            Audience::Shared,
        );
        check("matrix", Readers::Unknown, Audience::Shared);
    }

    #[test]
    fn a_mail_session_is_private_only_with_the_owners_address() {
        check(
            "email",
            Readers::people(["Alex@Example.org"]),
            Audience::Owner,
        );
        check(
            "email",
            Readers::people(["bob@example.org"]),
            Audience::Shared,
        );
        // The owner's Matrix id is no mail address.
        check("email", Readers::people([ALEX]), Audience::Shared);
    }

    #[test]
    fn the_terminal_and_the_api_are_private_and_other_channels_fail_closed() {
        check("cli", Readers::Unknown, Audience::Owner);
        check("http", Readers::Unknown, Audience::Owner);
        check("spawn", Readers::Unknown, Audience::Shared);
        check("xmpp", Readers::people([ALEX]), Audience::Shared);
        let nobody = Owner::nobody();
        assert_eq!(
            Audience::of(&nobody, "matrix", &Readers::people([ALEX])),
            Audience::Shared,
            "with no owner configured only the terminal and the API are private"
        );
        assert_eq!(Audience::default(), Audience::Shared);
        assert!(Audience::Owner.is_owner() && !Audience::Shared.is_owner());
    }
}
