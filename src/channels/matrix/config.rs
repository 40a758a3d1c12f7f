//! `channels.matrix`: the Matrix channel's settings and their checks.
//!
//! The doc comments on the fields are the reference for these settings. Compiled in every
//! build, the `matrix` feature's or not, so a file that configures Matrix reads (and is
//! checked) the same everywhere, and a build without the channel refuses it by name.

use serde::Deserialize;

use crate::config::check::{ChannelSettings, Checker};
use crate::config::owner::OwnerConfig;
use crate::config::secret::{EnvLookup, Secret};

/// Which messages in a Matrix room the bot answers.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum GroupPolicy {
    /// Every message.
    Open,
    /// Only messages that mention the bot.
    #[default]
    Mention,
    /// Only messages from users in `allowlist`.
    Allowlist,
}

/// `channels.matrix`: a Matrix account the bot logs in as.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct MatrixConfig {
    /// Whether the channel runs in the gateway. Default: `false`.
    pub enabled: bool,
    /// Homeserver URL. Default: `https://matrix.org`.
    pub homeserver: String,
    /// The bot's user id, e.g. `@squidbot:example.org`. Required when enabled.
    pub user_id: String,
    /// Access token, or `${VAR}`. One of access token or password is required when enabled.
    /// Default: empty.
    pub access_token: Secret,
    /// Name of an environment variable holding the access token. Default: empty.
    pub access_token_env: String,
    /// Password for password login, or `${VAR}`. Default: empty.
    pub password: Secret,
    /// Name of an environment variable holding the password. Default: empty.
    pub password_env: String,
    /// Device id of the bot's session. Default: empty: one is chosen for this home at the
    /// first login and kept in the Matrix store (`device_id`), so two homes on one account
    /// never share a device; a store made before this keeps the old default, `SQUIDBOT01`.
    pub device_id: String,
    /// Rooms the bot listens in; empty means every joined room. Default: none.
    pub room_ids: Vec<String>,
    /// `open`, `mention` or `allowlist`. Default: `mention`.
    pub group_policy: GroupPolicy,
    /// User ids allowed to talk to the bot (and whose invites are accepted); `"*"` lets every
    /// sender talk (invites still need a listed id). Default: none, so nobody is answered.
    pub allowlist: Vec<String>,
    /// Whether invites from allowed users are joined automatically. Default: `true`.
    /// With an empty allowlist no invite is trusted, so none is joined.
    pub auto_join: bool,
    /// Directory of the persistent store (sync token, room state, encryption keys), relative
    /// to `$SQUIDBOT_HOME` unless absolute. Losing it means a new encryption identity and
    /// re-reading nothing: keep it with the home. Default: `matrix`.
    pub store_dir: String,
    /// Passphrase encrypting the store at rest, or `${VAR}`. Default: empty (not encrypted).
    pub store_passphrase: Secret,
    /// Recovery key (or passphrase) of the account's server-side key backup and secret
    /// storage, or `${VAR}`. When set, the bot restores cross-signing and room keys from it at
    /// login, so it can read history sent to its other devices. Default: empty.
    pub recovery_key: Secret,
    /// Name of an environment variable holding the recovery key. Default: empty.
    pub recovery_key_env: String,
    /// How long the homeserver may hold a sync open when nothing happens (the long-poll
    /// timeout). Four of these without a successful sync mark the channel stalled, and
    /// `/readyz` fails. Default: 30.
    pub sync_timeout_seconds: u64,
}

impl Default for MatrixConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            homeserver: "https://matrix.org".to_owned(),
            user_id: String::new(),
            access_token: Secret::default(),
            access_token_env: String::new(),
            password: Secret::default(),
            password_env: String::new(),
            device_id: String::new(),
            room_ids: Vec::new(),
            group_policy: GroupPolicy::Mention,
            allowlist: Vec::new(),
            auto_join: true,
            store_dir: "matrix".to_owned(),
            store_passphrase: Secret::default(),
            recovery_key: Secret::default(),
            recovery_key_env: String::new(),
            sync_timeout_seconds: 30,
        }
    }
}

impl ChannelSettings for MatrixConfig {
    fn resolve_secrets(&mut self, checker: &mut Checker<'_>, env: EnvLookup<'_>) {
        if !self.enabled {
            return;
        }
        let field = "channels.matrix.access_token";
        checker.gateway_secret(&mut self.access_token, &self.access_token_env, field, env);
        let field = "channels.matrix.password";
        checker.gateway_secret(&mut self.password, &self.password_env, field, env);
        let field = "channels.matrix.recovery_key";
        checker.gateway_secret(&mut self.recovery_key, &self.recovery_key_env, field, env);
        let field = "channels.matrix.store_passphrase";
        checker.gateway_secret(&mut self.store_passphrase, "", field, env);
    }

    fn check(&self, checker: &mut Checker<'_>, owner: &OwnerConfig) {
        for (position, id) in owner.matrix.iter().enumerate() {
            let field = format!("owner.matrix[{position}]");
            let valid = id.starts_with('@') && id.contains(':');
            checker.require(valid, &field, "a Matrix user id looks like @name:server");
        }
        if !self.enabled {
            return;
        }
        checker.http_url(&self.homeserver, "channels.matrix.homeserver");
        let user_ok = self.user_id.starts_with('@') && self.user_id.contains(':');
        let message = "must be a Matrix user id like @squidbot:example.org";
        checker.require(user_ok, "channels.matrix.user_id", message);
        let field = "channels.matrix.sync_timeout_seconds";
        checker.positive(self.sync_timeout_seconds, field);
        let login = !self.access_token.is_empty()
            || !self.password.is_empty()
            || checker.deferred("channels.matrix.access_token")
            || checker.deferred("channels.matrix.password");
        let message = "set access_token or password (or access_token_env / password_env)";
        checker.require(login, "channels.matrix.access_token", message);
        let message = "must not be empty";
        checker.require(
            !self.store_dir.trim().is_empty(),
            "channels.matrix.store_dir",
            message,
        );
        if self.allowlist.is_empty() {
            let message = "empty: nobody is answered; list the user ids that may talk to the \
                           bot (or \"*\" for everyone)";
            checker.warn("channels.matrix.allowlist", message);
        }
        // Without an owner here nobody can approve a command, and the owner's own DM is
        // treated as someone else's: say so before the first question goes unanswered.
        if owner.matrix.is_empty() && !owner.aliased_on("matrix") {
            let message = "empty while channels.matrix is on: nobody in Matrix can approve a \
                           command or gets the private memory, the owner's DM included; set it \
                           to your Matrix id";
            checker.warn("owner.matrix", message);
        }
    }
}
