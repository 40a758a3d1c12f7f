//! `squidbot doctor`'s checks of the email channel: the IMAP and the SMTP server each logged
//! in to with the configured TLS mode, then logged out of.

use super::{EmailError, imap, smtp::SmtpOutbox};
use crate::channels::plugin::{PROBE_TIMEOUT, Probe};
use crate::config::EmailConfig;

/// Both logins.
pub async fn checks(email: &EmailConfig) -> Vec<Probe> {
    vec![imap_login(email).await, smtp_login(email).await]
}

/// Connects to the IMAP server with the configured TLS mode, logs in and logs out.
async fn imap_login(email: &EmailConfig) -> Probe {
    let what = format!(
        "email imap login {}@{}:{}",
        email.username, email.imap_host, email.imap_port
    );
    match imap::connect(email).await {
        Ok(session) => {
            imap::logout(session).await;
            Probe::ok(what)
        }
        Err(error) => Probe::fail(
            what,
            format!(
                "{error} (check channels.email.imap_host/imap_port, tls/imap_starttls, \
                 username and password)"
            ),
        ),
    }
}

/// Connects to the SMTP server with the configured TLS mode, logs in and quits.
async fn smtp_login(email: &EmailConfig) -> Probe {
    let what = format!(
        "email smtp login {}@{}:{}",
        email.username, email.smtp_host, email.smtp_port
    );
    let checked = match SmtpOutbox::new(email) {
        Ok(outbox) => tokio::time::timeout(PROBE_TIMEOUT * 2, outbox.check_login())
            .await
            .unwrap_or_else(|_| {
                Err(EmailError::Timeout {
                    command: "SMTP connect and login".to_owned(),
                })
            }),
        Err(error) => Err(error),
    };
    match checked {
        Ok(()) => Probe::ok(what),
        Err(error) => Probe::fail(
            what,
            format!(
                "{error} (check channels.email.smtp_host/smtp_port, tls/smtp_starttls, \
                 username and password)"
            ),
        ),
    }
}
