//! The `owner` section: who the owner is on each channel.
//!
//! A leaf of the configuration, like `secret.rs` and `check.rs`: each channel's own settings
//! check the owner's ids listed for it (`owner.matrix`, `owner.email`) without importing the
//! whole configuration, which refers to those settings.

use serde::Deserialize;

/// `owner`: who the owner is on each channel. Only the owner answers approvals, and MEMORY.md
/// and USER.md go only into sessions where no one but the owner takes part.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct OwnerConfig {
    /// The owner's Matrix user ids (`@alex:example.org`). Default: none.
    pub matrix: Vec<String>,
    /// The owner's mail addresses (compared without regard to case). Default: none.
    pub email: Vec<String>,
    /// The original's form, still read: `alex` (any channel) or `{address:
    /// "@alex:matrix.org", channel: matrix}`. Default: none.
    pub aliases: Vec<OwnerAlias>,
}

/// One address of the owner, optionally valid on one channel only.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(from = "OwnerAliasRepr")]
pub struct OwnerAlias {
    /// The sender id or address (matched case-sensitively).
    pub address: String,
    /// The channel it applies to (`matrix`, `email`, ...); `None` means every channel.
    pub channel: Option<String>,
}

#[derive(Deserialize)]
#[serde(
    untagged,
    expecting = "an address, or a mapping {address: ADDRESS, channel: CHANNEL}"
)]
enum OwnerAliasRepr {
    Address(String),
    Scoped(OwnerAliasTable),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OwnerAliasTable {
    address: String,
    #[serde(default)]
    channel: Option<String>,
}

impl From<OwnerAliasRepr> for OwnerAlias {
    fn from(repr: OwnerAliasRepr) -> Self {
        match repr {
            OwnerAliasRepr::Address(address) => Self {
                address,
                channel: None,
            },
            OwnerAliasRepr::Scoped(OwnerAliasTable { address, channel }) => Self {
                address,
                channel: channel.filter(|channel| !channel.is_empty()),
            },
        }
    }
}

impl OwnerConfig {
    /// Whether an alias counts on `channel` (one scoped to it, or one valid everywhere).
    pub fn aliased_on(&self, channel: &str) -> bool {
        self.aliases
            .iter()
            .any(|alias| alias.channel.as_deref().is_none_or(|only| only == channel))
    }
}
