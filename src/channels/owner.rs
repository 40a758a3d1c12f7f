//! [`Owner`]: who the owner is on each channel, as the configuration names them.
//!
//! Two decisions hang on it: only the owner may approve a risky command or use the tools whose
//! effects last, and the owner's private memory (MEMORY.md, USER.md) goes only into sessions
//! no one else takes part in. Each channel decides at its edge, from the sender id it verified
//! (a Matrix user id, a mail address that passed the mail guard and carries an authentication
//! pass), and states the result as a fact core reads ([`Origin::owner_as`], [`Readers`]):
//! core never compares ids or channel names.
//!
//! The terminal and the HTTP API have no sender to check: whoever can use them already holds
//! the owner's shell or API token, so their channels state the owner without asking this.
//!
//! [`Origin::owner_as`]: crate::core::origin::Origin::owner_as
//! [`Readers`]: crate::core::audience::Readers

use crate::core::audience::Readers;
use crate::core::origin::Origin;

/// How a channel's ids compare.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Ids {
    /// Exactly (Matrix user ids are case-sensitive).
    #[default]
    Exact,
    /// Without regard to ASCII case, as mail servers treat addresses.
    AnyCase,
}

/// The owner's addresses, per channel.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Owner {
    /// `(address, channel)`; `None` as the channel means any channel.
    addresses: Vec<(String, Option<String>)>,
}

impl Owner {
    /// An owner known by nothing: only the terminal and the HTTP API count as the owner.
    pub fn nobody() -> Self {
        Self::default()
    }

    /// Adds `address` as the owner's on `channel` (`None`: every channel).
    pub fn with(mut self, address: impl Into<String>, channel: Option<&str>) -> Self {
        self.addresses
            .push((address.into(), channel.map(str::to_owned)));
        self
    }

    /// The owner's ids on `channel` (the name the configuration scopes addresses by), compared
    /// as `ids` says: what that channel's edge checks senders against.
    pub fn on(&self, channel: &str, ids: Ids) -> OwnerIds {
        let addresses = self
            .addresses
            .iter()
            .filter(|(_, only)| only.as_deref().is_none_or(|only| only == channel))
            .map(|(address, _)| address.clone())
            .collect();
        OwnerIds { addresses, ids }
    }
}

/// The owner's ids on one channel: the channel's edge asks it about each sender and reader.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OwnerIds {
    addresses: Vec<String>,
    ids: Ids,
}

impl OwnerIds {
    /// Whether `sender` is one of the owner's ids here.
    pub fn is(&self, sender: &str) -> bool {
        self.addresses.iter().any(|address| match self.ids {
            Ids::AnyCase => address.eq_ignore_ascii_case(sender),
            Ids::Exact => address == sender,
        })
    }

    /// The origin of a message from `sender` that the channel verified came from them.
    pub fn origin(&self, sender: impl Into<String>) -> Origin {
        let sender = sender.into();
        if self.is(&sender) {
            Origin::owner_as(sender)
        } else {
            Origin::person(sender)
        }
    }

    /// The readers of a conversation whose members are `people`.
    pub fn readers<'a>(&self, people: impl IntoIterator<Item = &'a str>) -> Readers {
        Readers::of_people(people.into_iter().map(|person| self.is(person)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner() -> Owner {
        Owner::nobody()
            .with("@alex:example.org", Some("matrix"))
            .with("Alex@Example.org", Some("email"))
            .with("alex", None)
    }

    #[test]
    fn matrix_ids_compare_exactly_and_mail_addresses_without_case() {
        let matrix = owner().on("matrix", Ids::Exact);
        let email = owner().on("email", Ids::AnyCase);
        assert!(matrix.is("@alex:example.org"));
        assert!(!matrix.is("@Alex:example.org"));
        assert!(!matrix.is("@eve:example.org"));
        assert!(email.is("alex@example.org"));
        assert!(!email.is("eve@example.org"));
        // An address scoped to one channel does not hold on another.
        assert!(!email.is("@alex:example.org"));
        // An unscoped alias holds everywhere.
        assert!(matrix.is("alex"));
    }

    #[test]
    fn the_edge_states_origins_and_readers() {
        let matrix = owner().on("matrix", Ids::Exact);
        assert!(matrix.origin("@alex:example.org").is_owner());
        assert!(!matrix.origin("@Alex:example.org").is_owner());
        assert_eq!(matrix.readers(["@alex:example.org"]), Readers::Owner);
        assert_eq!(
            matrix.readers(["@alex:example.org", "@eve:example.org"]),
            Readers::Others { owner: true }
        );
        assert_eq!(
            matrix.readers(["@eve:example.org"]),
            Readers::Others { owner: false }
        );
        assert_eq!(matrix.readers([]), Readers::Unknown);
        let nobody = Owner::nobody().on("matrix", Ids::Exact);
        assert_eq!(
            nobody.readers(["@alex:example.org"]),
            Readers::Others { owner: false },
            "with no owner configured no room is private"
        );
    }
}
