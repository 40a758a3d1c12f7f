//! [`Owner`]: who the owner is on each channel.
//!
//! Two decisions hang on it: only the owner may approve a risky command, and the owner's private
//! memory (MEMORY.md, USER.md) goes only into sessions no one else takes part in. Both are
//! decided from the sender id a channel verified (Matrix user ids, mail addresses that passed
//! the mail guard), never from what a message says about itself.
//!
//! The terminal and the HTTP API have no sender to check: whoever can use them already holds
//! the owner's shell or API token, so their people count as the owner.

use crate::core::origin::Origin;

/// The channel names whose people are the owner by construction (see the module docs).
const OWNER_ONLY_CHANNELS: [&str; 2] = ["cli", "http"];

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

    /// Whether `sender` on `channel` (a session's channel name: `matrix`, `email`, …) is the
    /// owner. Mail addresses compare without regard to case, as mail servers treat them;
    /// everything else compares exactly (Matrix ids are case-sensitive).
    pub fn is(&self, channel: &str, sender: &str) -> bool {
        if Self::owns_channel(channel) {
            return true;
        }
        self.addresses.iter().any(|(address, only)| {
            only.as_deref().is_none_or(|only| only == channel)
                && if channel == "email" {
                    address.eq_ignore_ascii_case(sender)
                } else {
                    address == sender
                }
        })
    }

    /// Whether every person on `channel` is the owner by construction (the terminal, the API).
    pub fn owns_channel(channel: &str) -> bool {
        OWNER_ONLY_CHANNELS.contains(&channel)
    }

    /// Whether the turn of `origin` on `channel` was started by the owner. The heartbeat, cron
    /// jobs and sub-agents are not a person, so they are not the owner.
    pub fn started(&self, channel: &str, origin: &Origin) -> bool {
        match origin {
            Origin::Person { sender } => self.is(channel, sender),
            Origin::Heartbeat | Origin::Cron { .. } | Origin::SubAgent { .. } => false,
        }
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
        let owner = owner();
        assert!(owner.is("matrix", "@alex:example.org"));
        assert!(!owner.is("matrix", "@Alex:example.org"));
        assert!(!owner.is("matrix", "@eve:example.org"));
        assert!(owner.is("email", "alex@example.org"));
        assert!(!owner.is("email", "eve@example.org"));
        // An address scoped to one channel does not hold on another.
        assert!(!owner.is("email", "@alex:example.org"));
        // An unscoped alias holds everywhere.
        assert!(owner.is("matrix", "alex"));
    }

    #[test]
    fn the_terminal_and_the_api_are_the_owner_and_automation_never_is() {
        let nobody = Owner::nobody();
        assert!(nobody.started("cli", &Origin::owner()));
        assert!(nobody.started("http", &Origin::person("http")));
        assert!(!nobody.started("matrix", &Origin::person("@alex:example.org")));
        assert!(!owner().started("matrix", &Origin::Heartbeat));
        assert!(!owner().started(
            "matrix",
            &Origin::Cron {
                job: "j".to_owned()
            }
        ));
    }
}
