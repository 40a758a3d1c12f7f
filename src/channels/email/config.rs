//! `channels.email`: the email channel's settings and their checks.
//!
//! The doc comments on the fields are the reference for these settings. Compiled in every
//! build, the `email` feature's or not, so a file that configures email reads (and is
//! checked) the same everywhere, and a build without the channel refuses it by name.

use serde::Deserialize;

use crate::config::check::{ChannelSettings, Checker};
use crate::config::owner::OwnerConfig;
use crate::config::secret::{EnvLookup, Secret};

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

impl ChannelSettings for EmailConfig {
    fn resolve_secrets(&mut self, checker: &mut Checker<'_>, env: EnvLookup<'_>) {
        if self.enabled {
            let field = "channels.email.password";
            checker.gateway_secret(&mut self.password, &self.password_env, field, env);
        }
    }

    fn check(&self, checker: &mut Checker<'_>, owner: &OwnerConfig) {
        for (position, address) in owner.email.iter().enumerate() {
            let field = format!("owner.email[{position}]");
            checker.require(address.contains('@'), &field, "a mail address needs an @");
        }
        if !self.enabled {
            return;
        }
        let required = [
            (&self.imap_host, "channels.email.imap_host"),
            (&self.smtp_host, "channels.email.smtp_host"),
            (&self.username, "channels.email.username"),
        ];
        for (value, field) in required {
            checker.require(!value.is_empty(), field, "required when email is enabled");
        }
        let message = "set password or password_env";
        let field = "channels.email.password";
        let password = !self.password.is_empty() || checker.deferred(field);
        checker.require(password, field, message);
        let from_ok = self.from_address.contains('@');
        let message = "must be the bot's email address";
        checker.require(from_ok, "channels.email.from_address", message);
        checker.positive(self.imap_port.into(), "channels.email.imap_port");
        checker.positive(self.smtp_port.into(), "channels.email.smtp_port");
        let field = "channels.email.poll_interval_seconds";
        checker.positive(self.poll_interval_seconds, field);
        checker.positive(self.max_message_bytes, "channels.email.max_message_bytes");
        let field = "channels.email.max_attachment_bytes";
        checker.positive(self.max_attachment_bytes, field);
        let field = "channels.email.replies_per_hour";
        checker.positive(self.replies_per_hour.into(), field);
        self.warnings(checker, owner);
    }
}

impl EmailConfig {
    /// What is odd but allowed in an enabled channel's settings.
    fn warnings(&self, checker: &mut Checker<'_>, owner: &OwnerConfig) {
        // Without an owner here no mail can approve a command: say so before the first
        // question goes unanswered.
        if owner.email.is_empty() && !owner.aliased_on("email") {
            let message = "empty while channels.email is on: no mail can approve a command or \
                           gets the private memory; set it to your mail address";
            checker.warn("owner.email", message);
        }
        if !owner.email.is_empty() && self.authserv_id.trim().is_empty() {
            let message = "empty while owner.email is set: no mail counts as the owner's (a \
                           From header proves nothing); set it to the authserv-id your mail \
                           server writes in Authentication-Results";
            checker.warn("channels.email.authserv_id", message);
        }
        if self.allow_from.is_empty() {
            let message = "empty: no mail is answered; list the addresses or @domains that may \
                           write to the bot (or \"*\" for everyone)";
            checker.warn("channels.email.allow_from", message);
        }
        if !self.tls || !self.tls_verify {
            let field = if self.tls {
                "channels.email.tls_verify"
            } else {
                "channels.email.tls"
            };
            let message = "email credentials and mail are exposed to the network path";
            checker.warn(field, message);
        }
    }
}
