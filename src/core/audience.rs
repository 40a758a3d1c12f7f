//! [`Audience`]: whether anyone but the owner takes part in a turn, and so whether the owner's
//! private memory may enter it.
//!
//! MEMORY.md and USER.md describe the owner; they belong in a conversation only when no one
//! else reads it. A turn's audience is decided once, before the turn runs, and the rest follows
//! from it: the memory manager leaves both files out of a [`Audience::Shared`] prompt, the tool
//! set neither offers nor runs owner-only tools (`memory_write`), and `search_history` searches
//! only the asking session.
//!
//! The decision is made from [`Readers`]: what the channel that received the message states,
//! at its edge, about who reads the reply, carried on the message as its origin is
//! ([`Inbound::readers`]): a Matrix room's members compared with the owner's id, a mail
//! session's one correspondent, the owner at the terminal or the API. Core never compares ids
//! or channel names itself. A heartbeat or cron turn replies through its target session's
//! outbox, whose channel states that session's readers ([`Outbox::readers`]); a sub-agent
//! takes its parent's audience. Anything not known is shared: the decision fails closed.
//!
//! [`Inbound::readers`]: crate::core::ports::channel::Inbound::readers
//! [`Outbox::readers`]: crate::core::ports::channel::Outbox::readers

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
    /// The audience of a turn whose replies reach `readers`: the owner's only when the channel
    /// stated that the owner alone reads them.
    pub fn of(readers: Readers) -> Self {
        match readers {
            Readers::Owner => Self::Owner,
            Readers::Others { .. } | Readers::Unknown => Self::Shared,
        }
    }

    /// Whether the owner's private memory (MEMORY.md, USER.md, `memory_write`, every session's
    /// history) belongs in the turn.
    pub fn is_owner(self) -> bool {
        self == Self::Owner
    }

    /// The readers a turn of this audience stands for where only the audience is known (a
    /// sub-agent's, whose replies reach its parent's turn): the owner alone, or not known to
    /// be; [`Audience::of`] gives back the same audience.
    pub fn readers(self) -> Readers {
        match self {
            Self::Owner => Readers::Owner,
            Self::Shared => Readers::Unknown,
        }
    }
}

/// Who reads what a channel delivers to one session, besides the bot, as the channel states
/// it: it alone knows its people and which of them is the owner.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Readers {
    /// The channel does not know (the default for every sink that does not say; also a room
    /// with nobody in it yet, read by whoever joins).
    #[default]
    Unknown,
    /// The owner, and no one else.
    Owner,
    /// Someone other than the owner; `owner` says whether the owner reads too (and so could
    /// answer a question asked there).
    Others {
        /// Whether the owner is among the readers.
        owner: bool,
    },
}

impl Readers {
    /// The readers when each of `people` is, or is not, the owner: the owner's alone when
    /// there is at least one and all are; unknown when there is none.
    pub fn of_people(people: impl IntoIterator<Item = bool>) -> Self {
        let (mut owners, mut others) = (0usize, 0usize);
        for is_owner in people {
            if is_owner {
                owners += 1;
            } else {
                others += 1;
            }
        }
        match (owners, others) {
            (0, 0) => Self::Unknown,
            (_, 0) => Self::Owner,
            (owners, _) => Self::Others { owner: owners > 0 },
        }
    }

    /// Whether the owner is known to read what is delivered (and so can answer a question).
    pub fn include_owner(self) -> bool {
        matches!(self, Self::Owner | Self::Others { owner: true })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_owner_alone_is_a_private_audience() {
        assert_eq!(Audience::of(Readers::Owner), Audience::Owner);
        assert_eq!(
            Audience::of(Readers::Others { owner: true }),
            Audience::Shared
        );
        assert_eq!(
            Audience::of(Readers::Others { owner: false }),
            Audience::Shared
        );
        assert_eq!(Audience::of(Readers::Unknown), Audience::Shared);
        assert_eq!(Audience::default(), Audience::Shared);
        assert!(Audience::Owner.is_owner() && !Audience::Shared.is_owner());
        for audience in [Audience::Owner, Audience::Shared] {
            assert_eq!(Audience::of(audience.readers()), audience);
        }
    }

    #[test]
    fn readers_of_people_fail_closed() {
        assert_eq!(Readers::of_people([true]), Readers::Owner);
        assert_eq!(Readers::of_people([true, true]), Readers::Owner);
        assert_eq!(
            Readers::of_people([true, false]),
            Readers::Others { owner: true }
        );
        assert_eq!(
            Readers::of_people([false]),
            Readers::Others { owner: false }
        );
        // Nobody there yet: whoever joins later would read it.
        assert_eq!(Readers::of_people([]), Readers::Unknown);
        assert!(Readers::Owner.include_owner());
        assert!(Readers::Others { owner: true }.include_owner());
        assert!(!Readers::Others { owner: false }.include_owner());
        assert!(!Readers::Unknown.include_owner());
    }
}
