//! [`channels!`], which turns the one list of channels in `src/channels/mod.rs` into all that
//! is asked of a channel's name elsewhere: its module, its plug-in on the list the gateway
//! builds from, and its section of the configuration.
//!
//! One entry per channel, so adding a channel is its folder plus that entry: the module
//! declaration, the plug-in and the `channels.<name>` field cannot drift apart, and a channel
//! behind a cargo feature gets its stand-in ([`Unbuilt`]) and its settings-only module in a
//! build without it from the same line.
//!
//! The configuration's section stays a struct with one typed field per channel (not a map
//! filled from the plug-ins): serde's derive then keeps what the configuration promises (an
//! unknown channel or field is an error naming the line and the fields there are, `Config`
//! stays `Clone`, `PartialEq` and `Debug`), and loading a file builds no plug-in.
//!
//! [`Unbuilt`]: super::plugin::Unbuilt

/// Writes, from one entry per channel:
/// - `pub mod <name>;` (behind `cfg(feature = "…")` when the entry names a feature, with a
///   module holding only `<name>/config.rs` in a build without it, so the same file is read
///   and checked alike);
/// - `listed()`, the plug-ins in list order (an [`Unbuilt`] for a feature the build left out,
///   enabled by `channels.<name>.enabled`);
/// - [`ChannelsConfig`](crate::config::ChannelsConfig), a field `<name>` of the entry's
///   settings type for every entry that names one, and its `sections()` for validation.
///
/// An entry: `doc comments` `name` [`if "feature"`] `=> PluginPath` [`, settings Type`] `;`.
/// A channel behind a feature must name its settings (what enables it).
///
/// [`Unbuilt`]: super::plugin::Unbuilt
macro_rules! channels {
    ($(
        $(#[$doc:meta])*
        $name:ident $(if $feature:literal)? => $plugin:path $(, settings $settings:ty)?;
    )+) => {
        $(
            $(#[$doc])*
            $(#[cfg(feature = $feature)])?
            pub mod $name;
            $(
                #[cfg(not(feature = $feature))]
                #[doc = concat!("Left out of this build (feature `", $feature, "`): only its settings, still read and checked.")]
                pub mod $name {
                    pub mod config;
                }
            )?
        )+

        /// The plug-ins of the channels on the list, in its order.
        fn listed() -> Vec<Box<dyn plugin::ChannelPlugin>> {
            vec![$(channels!(@plug $name [$($feature)?] $plugin),)+]
        }

        /// `channels`: where messages come from; a field per channel that has settings.
        #[derive(Clone, Debug, Default, serde::Deserialize, PartialEq)]
        #[serde(deny_unknown_fields, default)]
        pub struct ChannelsConfig {
            $($(
                #[doc = concat!("`channels.", stringify!($name), "`: see [`", stringify!($settings), "`].")]
                pub $name: $settings,
            )?)+
        }

        impl ChannelsConfig {
            /// Every channel's settings, in list order.
            pub(crate) fn sections(&self) -> Vec<&dyn crate::config::check::ChannelSettings> {
                vec![$($(channels!(@field &self.$name, $settings),)?)+]
            }

            /// [`Self::sections`], to resolve their secrets.
            pub(crate) fn sections_mut(
                &mut self,
            ) -> Vec<&mut dyn crate::config::check::ChannelSettings> {
                vec![$($(channels!(@field &mut self.$name, $settings),)?)+]
            }
        }
    };

    // A field of `ChannelsConfig` (the type only drives the repetition).
    (@field $field:expr, $settings:ty) => {
        $field
    };
    (@plug $name:ident [] $plugin:path) => {
        Box::new($plugin) as Box<dyn plugin::ChannelPlugin>
    };
    (@plug $name:ident [$feature:literal] $plugin:path) => {{
        #[cfg(feature = $feature)]
        let plugin: Box<dyn plugin::ChannelPlugin> = Box::new($plugin);
        #[cfg(not(feature = $feature))]
        let plugin: Box<dyn plugin::ChannelPlugin> = Box::new(plugin::Unbuilt {
            name: stringify!($name),
            enabled: |config| config.channels.$name.enabled,
        });
        plugin
    }};
}
