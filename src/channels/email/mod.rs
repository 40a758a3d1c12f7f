//! The email channel: the owner mails the bot (IMAP) and gets threaded answers (SMTP).
//!
//! The IMAP side waits with IDLE (re-armed well before the 29-minute limit), falls back to
//! polling where the server has no IDLE, reconnects with capped backoff and logs out on
//! shutdown. Each new mail is parsed (plain text preferred, HTML converted to text, attachments
//! saved in the workspace), checked by the loop guard and the sender allowlist, and submitted as
//! a turn of session `email:<sender>`. It is marked `\Seen` only after the turn persisted it,
//! and the progress (UIDVALIDITY, last UID, per-message state, unsent replies) is kept in
//! `$SQUIDBOT_HOME/state/email/<account>.json`, so a restart neither answers a mail twice nor
//! skips one. Replies are multipart/alternative, threaded and marked `Auto-Submitted`; a failed
//! send is retried with backoff, also across restarts.
//!
//! - [`parse`]: MIME to text, attachments and the headers the guard and replies need (pure).
//! - [`guard`]: the loop guard, the allowlist and the per-sender rate limit (pure).
//! - [`progress`]: what was seen, answered and still has to be sent, saved atomically.
//! - [`reply`]: building a reply or proactive mail (subject, threading, plain + HTML).
//! - [`sink`]: the reply sink of a mail and the retry queue of unsent mail.
//! - [`smtp`]: sending over SMTP with lettre, with the configured TLS mode.
//! - [`imap`]: connecting (plain, STARTTLS, TLS), login, search, fetch, IDLE, LOGOUT.
//! - [`tls`]: the rustls client configuration shared by the IMAP side.
//! - `tests`: the MIME parsing unit tests on literal mails.
//! - [`config`]: its settings (`channels.email`) and their checks, in every build.
//! - [`channel`]: [`EmailChannel`], the running task, its reply sinks and its status.
//! - [`plugin`]: [`EmailPlugin`], the channel on the list of plug-ins.
//! - [`doctor`]: `squidbot doctor`'s IMAP and SMTP login checks.
//! - [`routing`]: the routing key of a mail turn's metadata.
//! - `intake`: a mail handed to the router: attachments saved, audio transcribed beside the
//!   text, persistence and answer followed to `\Seen`.

pub mod auth;
pub mod channel;
pub mod config;
pub mod doctor;
pub mod guard;
pub mod imap;
mod intake;
pub mod parse;
pub mod plugin;
pub mod progress;
pub mod quote;
pub mod reply;
pub mod sink;
pub mod smtp;
pub mod tls;
pub mod uuencode;

#[cfg(test)]
mod tests;

use crate::core::error_chain::Chain;

pub use channel::{EmailChannel, EmailStatus};
pub use plugin::EmailPlugin;

/// The routing-metadata key of a mail turn. The channel writes it on every mail, a scheduled
/// job carries it ([`EmailPlugin`]), and a reply reuses it.
pub mod routing {
    /// The subject of a mail, which a reply or a job's mail reuses.
    pub const EMAIL_SUBJECT: &str = "email_subject";
}

/// What can go wrong in the email channel.
#[derive(Debug, thiserror::Error)]
pub enum EmailError {
    /// The TCP connection to a mail server failed.
    #[error("cannot connect to {server}: {error}")]
    Connect {
        /// `host:port`.
        server: String,
        /// The socket error.
        error: std::io::Error,
    },
    /// A TLS handshake or TLS setup failed.
    #[error("TLS with {server} failed: {error}")]
    Tls {
        /// `host:port` (or the host name that was not valid for TLS).
        server: String,
        /// The rustls or socket error.
        error: std::io::Error,
    },
    /// The IMAP server refused the login.
    #[error("IMAP login as {username} refused: {}", Chain(error))]
    Login {
        /// The login name (never the password).
        username: String,
        /// The server's answer.
        error: async_imap::error::Error,
    },
    /// An IMAP command failed.
    #[error("IMAP {command} failed: {}", Chain(error))]
    Imap {
        /// The command (`SELECT INBOX`, `UID FETCH 42`).
        command: String,
        /// The protocol or socket error.
        error: async_imap::error::Error,
    },
    /// An IMAP step did not answer in time.
    #[error("IMAP {command} timed out")]
    Timeout {
        /// The command that hung.
        command: String,
    },
    /// Building a mail failed (a bad address, for example).
    #[error("cannot build mail to {to}: {detail}")]
    Build {
        /// The recipient.
        to: String,
        /// What was wrong.
        detail: String,
    },
    /// The SMTP server could not be reached, secured or logged in to (no mail involved: the
    /// settings or `doctor`'s check).
    #[error("SMTP server {server}: {detail}")]
    SmtpServer {
        /// `smtp_host:smtp_port`.
        server: String,
        /// What failed.
        detail: String,
    },
    /// The SMTP server refused the mail or the connection failed.
    #[error("SMTP send to {to} failed: {}", Chain(error))]
    Smtp {
        /// The recipient.
        to: String,
        /// lettre's error.
        error: lettre::transport::smtp::Error,
    },
    /// Reading or writing the progress file failed.
    #[error("email progress file {path}: {error}")]
    Progress {
        /// The file.
        path: std::path::PathBuf,
        /// The I/O or JSON error.
        error: std::io::Error,
    },
}
