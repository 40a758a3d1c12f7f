//! The `channels` section: one field per channel, each of a type its own folder defines
//! (`src/channels/<name>/config.rs`, with its checks).
//!
//! One field per channel rather than a map filled from the list of plug-ins: serde's derive
//! then keeps what the configuration promises (an unknown channel or field is an error naming
//! the line and the fields there are, every section is typed, `Config` stays `Clone`,
//! `PartialEq` and `Debug`), and loading a file does not depend on the plug-ins, which are
//! built from the gateway's machinery. [`channels!`] writes the struct and the list validation
//! walks from one line per channel, so a new channel adds that line here and nothing else in
//! `src/config`.

use serde::Deserialize;

use super::check::ChannelSettings;
use crate::channels::email::config::EmailConfig;
use crate::channels::matrix::config::MatrixConfig;

/// `ChannelsConfig` with a field per channel (`name: Type`, its doc comment the reference's
/// line), and [`ChannelsConfig::sections`] listing them all for validation.
macro_rules! channels {
    ($($(#[$doc:meta])* $name:ident: $section:ty,)+) => {
        /// `channels`: where messages come from.
        #[derive(Clone, Debug, Default, Deserialize, PartialEq)]
        #[serde(deny_unknown_fields, default)]
        pub struct ChannelsConfig {
            $($(#[$doc])* pub $name: $section,)+
        }

        impl ChannelsConfig {
            /// Every channel's settings, in the order of the fields.
            pub(crate) fn sections(&self) -> Vec<&dyn ChannelSettings> {
                vec![$(&self.$name,)+]
            }

            /// [`Self::sections`], to resolve their secrets.
            pub(crate) fn sections_mut(&mut self) -> Vec<&mut dyn ChannelSettings> {
                vec![$(&mut self.$name,)+]
            }
        }
    };
}

channels! {
    /// The Matrix channel.
    matrix: MatrixConfig,
    /// The email channel (IMAP in, SMTP out).
    email: EmailConfig,
}
