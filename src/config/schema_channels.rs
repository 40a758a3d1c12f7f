//! The `channels` section: Matrix and email, the two ways the owner talks to squidbot.
//!
//! The doc comments on the fields are the reference for these settings.

use serde::Deserialize;

use super::Secret;

/// `channels`: where messages come from.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ChannelsConfig {
    /// The Matrix channel.
    pub matrix: MatrixConfig,
    /// The email channel (IMAP in, SMTP out).
    pub email: EmailConfig,
}

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

/// `channels.email`: a mailbox the bot reads (IMAP) and answers from (SMTP).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct EmailConfig {
    /// Whether the channel runs in the gateway. Default: `false`.
    pub enabled: bool,
    /// IMAP server host name. Required when enabled.
    pub imap_host: String,
    /// IMAP port. Default: `993`.
    pub imap_port: u16,
    /// SMTP server host name. Required when enabled.
    pub smtp_host: String,
    /// SMTP port. Default: `587`.
    pub smtp_port: u16,
    /// Login name for IMAP and SMTP. Required when enabled.
    pub username: String,
    /// Password for IMAP and SMTP, or `${VAR}`. Required when enabled (here or in
    /// `password_env`).
    pub password: Secret,
    /// Name of an environment variable holding the password. Default: empty.
    pub password_env: String,
    /// The bot's address (`From:` of replies). Required when enabled.
    pub from_address: String,
    /// Sender addresses (and `@domain` entries) the bot answers; `"*"` answers everyone.
    /// Default: none, so no mail is answered.
    pub allow_from: Vec<String>,
    /// Seconds between mailbox polls when the server has no IMAP IDLE. Default: `60`.
    pub poll_interval_seconds: u64,
    /// Whether connections use TLS at all. Default: `true`.
    pub tls: bool,
    /// Whether server certificates and host names are checked. Default: `true`.
    pub tls_verify: bool,
    /// Whether IMAP uses STARTTLS instead of implicit TLS. Default: `false`.
    pub imap_starttls: bool,
    /// Whether SMTP uses STARTTLS instead of implicit TLS. Default: `true`.
    pub smtp_starttls: bool,
    /// Mail larger than this (bytes, as the server reports it) is not downloaded: the agent
    /// gets its headers and a note instead. Default: `26214400` (25 MiB).
    pub max_message_bytes: u64,
    /// Attachments larger than this (bytes, decoded) are not saved: the agent gets a note
    /// naming them instead. Default: `5242880` (5 MiB).
    pub max_attachment_bytes: u64,
    /// Replies per sender per hour, for everyone but the owner; mail beyond it stays unread
    /// and is answered when the hour has room again (the sender is told once), which stops
    /// any mail loop the other guards miss. Default: `20`.
    pub replies_per_hour: u32,
    /// On the first start against a mailbox (no progress stored) and after the server
    /// renumbered it (a new UIDVALIDITY), the unseen mail of the last this-many days is
    /// answered; older mail, and all mail already read, is history and never answered (the
    /// log says how much was skipped). `0`: only mail arriving from then on. Default: `1`.
    pub backlog_days: u32,
    /// The authserv-id your receiving mail server writes in the `Authentication-Results`
    /// header it adds (`mx.example.org`). Mail from the owner's address counts as the owner's
    /// (approvals, private memory, the owner's tools) only when the topmost such header, from
    /// this server, reports a DKIM pass aligned with the From domain; anyone can write the
    /// owner's address into From. Default: empty, so no mail counts as the owner's.
    pub authserv_id: String,
}

impl Default for EmailConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            imap_host: String::new(),
            imap_port: 993,
            smtp_host: String::new(),
            smtp_port: 587,
            username: String::new(),
            password: Secret::default(),
            password_env: String::new(),
            from_address: String::new(),
            allow_from: Vec::new(),
            poll_interval_seconds: 60,
            tls: true,
            tls_verify: true,
            imap_starttls: false,
            smtp_starttls: true,
            max_message_bytes: 25 * 1024 * 1024,
            max_attachment_bytes: 5 * 1024 * 1024,
            replies_per_hour: 20,
            backlog_days: 1,
            authserv_id: String::new(),
        }
    }
}
