//! The IMAP side: connecting (plain, STARTTLS or implicit TLS), logging in, finding new mail,
//! fetching it within the size limit, marking it `\Seen`, and logging out.
//!
//! Every network step has a time limit, so a server that stops answering is noticed and the
//! channel reconnects instead of hanging. Mail is fetched with `BODY.PEEK[]`, which does not set
//! `\Seen`: the flag is set explicitly, and only after the message was persisted.

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use async_imap::{Client, Session};
use futures_util::TryStreamExt;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::{EmailError, tls};
use crate::config::EmailConfig;

/// How long connecting, the greeting, TLS and login may take together.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one command (search, fetch, store) may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(120);

/// A byte stream IMAP runs over: plain TCP or TLS.
pub trait ImapIo: AsyncRead + AsyncWrite + Unpin + Send + Debug {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + Debug> ImapIo for T {}

/// A logged-in IMAP session over either kind of stream.
pub type ImapSession = Session<Box<dyn ImapIo>>;

/// A mail as fetched.
#[derive(Debug)]
pub enum Fetched {
    /// The whole message.
    Full(Vec<u8>),
    /// Only the header: the message (`size` bytes) is over the limit.
    HeaderOnly {
        /// The header bytes.
        header: Vec<u8>,
        /// The message size the server reported.
        size: u64,
    },
    /// The UID no longer exists (expunged meanwhile).
    Gone,
}

/// Runs `future` with the command time limit.
async fn limited<T>(
    command: &str,
    future: impl Future<Output = Result<T, async_imap::error::Error>>,
) -> Result<T, EmailError> {
    match tokio::time::timeout(COMMAND_TIMEOUT, future).await {
        Ok(result) => result.map_err(|error| EmailError::Imap {
            command: command.to_owned(),
            error,
        }),
        Err(_) => Err(EmailError::Timeout {
            command: command.to_owned(),
        }),
    }
}

/// Connects and logs in as `config.username`, within [`CONNECT_TIMEOUT`].
pub async fn connect(config: &EmailConfig) -> Result<ImapSession, EmailError> {
    match tokio::time::timeout(CONNECT_TIMEOUT, connect_inner(config)).await {
        Ok(result) => result,
        Err(_) => Err(EmailError::Timeout {
            command: "connect and login".to_owned(),
        }),
    }
}

async fn connect_inner(config: &EmailConfig) -> Result<ImapSession, EmailError> {
    let server = format!("{}:{}", config.imap_host, config.imap_port);
    let tcp = TcpStream::connect((config.imap_host.as_str(), config.imap_port))
        .await
        .map_err(|error| EmailError::Connect {
            server: server.clone(),
            error,
        })?;
    let _ = tcp.set_nodelay(true);
    let client = if !config.tls {
        greeted(Client::new(Box::new(tcp) as Box<dyn ImapIo>), &server).await?
    } else if config.imap_starttls {
        let mut plain = greeted(Client::new(tcp), &server).await?;
        plain
            .run_command_and_check_ok("STARTTLS", None)
            .await
            .map_err(|error| EmailError::Imap {
                command: "STARTTLS".to_owned(),
                error,
            })?;
        let tcp = plain.into_inner();
        let stream = wrap_tls(tcp, config, &server).await?;
        // After STARTTLS the server sends no second greeting.
        Client::new(Box::new(stream) as Box<dyn ImapIo>)
    } else {
        let stream = wrap_tls(tcp, config, &server).await?;
        greeted(Client::new(Box::new(stream) as Box<dyn ImapIo>), &server).await?
    };
    client
        .login(&config.username, config.password.expose())
        .await
        .map_err(|(source, _)| EmailError::Login {
            username: config.username.clone(),
            error: source,
        })
}

/// Reads the server greeting, which must come before any command.
async fn greeted<T: ImapIo>(mut client: Client<T>, server: &str) -> Result<Client<T>, EmailError> {
    match client.read_response().await {
        Ok(Some(_)) => Ok(client),
        Ok(None) => Err(EmailError::Connect {
            server: server.to_owned(),
            error: std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "closed before the greeting",
            ),
        }),
        Err(error) => Err(EmailError::Connect {
            server: server.to_owned(),
            error,
        }),
    }
}

/// The TLS handshake over `tcp`.
async fn wrap_tls(
    tcp: TcpStream,
    config: &EmailConfig,
    server: &str,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, EmailError> {
    let tls_error = |error: std::io::Error| EmailError::Tls {
        server: server.to_owned(),
        error,
    };
    let client_config =
        tls::client_config(config.tls_verify).map_err(|e| tls_error(std::io::Error::other(e)))?;
    let name = ServerName::try_from(config.imap_host.clone())
        .map_err(|e| tls_error(std::io::Error::other(e)))?;
    TlsConnector::from(Arc::new(client_config))
        .connect(name, tcp)
        .await
        .map_err(tls_error)
}

/// Selects INBOX; returns its UIDVALIDITY (0 if the server sent none).
pub async fn select_inbox(session: &mut ImapSession) -> Result<u32, EmailError> {
    let mailbox = limited("SELECT INBOX", session.select("INBOX")).await?;
    Ok(mailbox.uid_validity.unwrap_or(0))
}

/// Whether the server offers IDLE.
pub async fn supports_idle(session: &mut ImapSession) -> Result<bool, EmailError> {
    let capabilities = limited("CAPABILITY", session.capabilities()).await?;
    Ok(capabilities.has_str("IDLE"))
}

/// What a mailbox holds when the channel starts on it afresh (see [`super::progress`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Baseline {
    /// The highest UID present (0 when empty).
    pub highest: u32,
    /// The unseen mail received since the backlog's first day, to be answered.
    pub backlog: Vec<u32>,
    /// How many messages are there in all.
    pub total: usize,
}

/// The mailbox's [`Baseline`]: every UID, and the unseen ones received on or after `since`
/// (none when `None`). IMAP's SINCE compares whole days of the internal date.
pub async fn baseline(
    session: &mut ImapSession,
    since: Option<chrono::NaiveDate>,
) -> Result<Baseline, EmailError> {
    let all = limited("UID SEARCH ALL", session.uid_search("ALL")).await?;
    let backlog = match since {
        Some(day) => {
            let query = format!("UNSEEN SINCE {}", day.format("%d-%b-%Y"));
            let found = limited("UID SEARCH UNSEEN SINCE", session.uid_search(&query)).await?;
            let mut found: Vec<u32> = found.into_iter().collect();
            found.sort_unstable();
            found
        }
        None => Vec::new(),
    };
    Ok(Baseline {
        highest: all.iter().copied().max().unwrap_or(0),
        backlog,
        total: all.len(),
    })
}

/// The UIDs to look at: every unseen mail and every mail above `last_uid`, ascending.
pub async fn candidate_uids(
    session: &mut ImapSession,
    last_uid: u32,
) -> Result<Vec<u32>, EmailError> {
    let mut uids: BTreeSet<u32> = limited("UID SEARCH UNSEEN", session.uid_search("UNSEEN"))
        .await?
        .into_iter()
        .collect();
    let range = format!("UID {}:*", last_uid.saturating_add(1));
    let above = limited("UID SEARCH UID", session.uid_search(&range)).await?;
    // `n:*` always matches the highest UID, even below n.
    uids.extend(above.into_iter().filter(|uid| *uid > last_uid));
    Ok(uids.into_iter().collect())
}

/// Fetches `uid`: the whole message when it is at most `max_bytes`, else its header.
pub async fn fetch(
    session: &mut ImapSession,
    uid: u32,
    max_bytes: u64,
) -> Result<Fetched, EmailError> {
    let command = format!("UID FETCH {uid}");
    let set = uid.to_string();
    let sizes = limited(&command, async {
        session
            .uid_fetch(&set, "RFC822.SIZE")
            .await?
            .try_collect::<Vec<_>>()
            .await
    })
    .await?;
    let Some(size) = sizes
        .iter()
        .find(|f| f.uid == Some(uid))
        .and_then(|f| f.size)
    else {
        return Ok(Fetched::Gone);
    };
    let size = u64::from(size);
    let query = if size > max_bytes {
        "BODY.PEEK[HEADER]"
    } else {
        "BODY.PEEK[]"
    };
    let fetches = limited(&command, async {
        session
            .uid_fetch(&set, query)
            .await?
            .try_collect::<Vec<_>>()
            .await
    })
    .await?;
    let Some(fetch) = fetches.iter().find(|f| f.uid == Some(uid)) else {
        return Ok(Fetched::Gone);
    };
    Ok(if size > max_bytes {
        Fetched::HeaderOnly {
            header: fetch.header().unwrap_or_default().to_vec(),
            size,
        }
    } else {
        match fetch.body() {
            Some(body) => Fetched::Full(body.to_vec()),
            None => Fetched::Gone,
        }
    })
}

/// Sets `\Seen` on `uids`.
pub async fn mark_seen(session: &mut ImapSession, uids: &[u32]) -> Result<(), EmailError> {
    if uids.is_empty() {
        return Ok(());
    }
    let set: Vec<String> = uids.iter().map(u32::to_string).collect();
    let set = set.join(",");
    limited("UID STORE +FLAGS (\\Seen)", async {
        session
            .uid_store(&set, "+FLAGS.SILENT (\\Seen)")
            .await?
            .try_collect::<Vec<_>>()
            .await
    })
    .await
    .map(|_| ())
}

/// Logs out politely; errors are only logged (the connection is dropped either way).
pub async fn logout(mut session: ImapSession) {
    match tokio::time::timeout(Duration::from_secs(5), session.logout()).await {
        Ok(Ok(())) => tracing::debug!("IMAP logout done."),
        Ok(Err(error)) => tracing::debug!(error = %error, "IMAP logout failed."),
        Err(_) => tracing::debug!("IMAP logout timed out."),
    }
}
