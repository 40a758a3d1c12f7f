//! Sending mail over SMTP with lettre, with the configured TLS mode.
//!
//! One connection per mail, as the original did: replies are rare and a pooled connection
//! would only go stale between them. `tls: false` is plain SMTP (test servers, a local relay);
//! otherwise STARTTLS (`smtp_starttls`, port 587) or implicit TLS (port 465), with certificate
//! and host-name checks turned off when `tls_verify` is false.

use std::time::Duration;

use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};

use super::EmailError;
use super::reply::{self, OutgoingMail};
use crate::config::EmailConfig;

/// How long one SMTP conversation may take.
const SMTP_TIMEOUT: Duration = Duration::from_secs(60);

/// Sends the bot's mail through the configured SMTP server.
#[derive(Clone)]
pub struct SmtpOutbox {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: String,
    /// `smtp_host:smtp_port`, for errors that concern no recipient.
    server: String,
}

impl SmtpOutbox {
    /// The outbox of `config` (password already resolved).
    pub fn new(config: &EmailConfig) -> Result<Self, EmailError> {
        let host = config.smtp_host.as_str();
        let tls = if config.tls {
            let parameters = TlsParameters::builder(host.to_owned())
                .dangerous_accept_invalid_certs(!config.tls_verify)
                .dangerous_accept_invalid_hostnames(!config.tls_verify)
                .build_rustls()
                .map_err(|source| EmailError::SmtpServer {
                    server: format!("{host}:{}", config.smtp_port),
                    detail: format!("TLS settings: {source}"),
                })?;
            if config.smtp_starttls {
                Tls::Required(parameters)
            } else {
                Tls::Wrapper(parameters)
            }
        } else {
            Tls::None
        };
        let credentials =
            Credentials::new(config.username.clone(), config.password.expose().to_owned());
        let transport = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(host)
            .port(config.smtp_port)
            .tls(tls)
            .credentials(credentials)
            .timeout(Some(SMTP_TIMEOUT))
            .build();
        Ok(Self {
            transport,
            from: config.from_address.clone(),
            server: format!("{host}:{}", config.smtp_port),
        })
    }

    /// The bot's address.
    pub fn from_address(&self) -> &str {
        &self.from
    }

    /// Connects, negotiates TLS, logs in and quits without sending anything: what `doctor`
    /// runs to prove the settings work before the first reply needs them.
    pub async fn check_login(&self) -> Result<(), EmailError> {
        let server = |detail: String| EmailError::SmtpServer {
            server: self.server.clone(),
            detail,
        };
        match self.transport.test_connection().await {
            Ok(true) => Ok(()),
            Ok(false) => Err(server("it closed the connection after login".to_owned())),
            Err(source) => Err(server(source.to_string())),
        }
    }

    /// Sends `mail`.
    pub async fn send(&self, mail: &OutgoingMail) -> Result<(), EmailError> {
        let message = reply::build(mail, &self.from)?;
        self.transport
            .send(message)
            .await
            .map(|_| ())
            .map_err(|error| EmailError::Smtp {
                to: mail.to.clone(),
                error,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tls_mode_builds() {
        for (tls, verify, starttls) in [
            (false, true, true),
            (true, true, true),
            (true, true, false),
            (true, false, true),
        ] {
            let config = EmailConfig {
                smtp_host: "mail.example.org".into(),
                from_address: "bot@example.org".into(),
                tls,
                tls_verify: verify,
                smtp_starttls: starttls,
                ..EmailConfig::default()
            };
            assert!(SmtpOutbox::new(&config).is_ok());
        }
    }
}
