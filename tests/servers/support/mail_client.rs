//! A real mail client for the email tests: users created on the test dovecot, mail sent with
//! lettre over SMTP, mailboxes read with async-imap, and a `squidbot gateway` whose home
//! survives restarts.

use std::path::Path;
use std::time::{Duration, Instant};

use async_imap::Session;
use futures_util::TryStreamExt;
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor, address::Envelope};
use tokio::net::TcpStream;
use tokio::process::Child;

use super::testenv;
use crate::support::config::TestConfig;

/// The mail gateway's HTTP token (`/status` shows details only with it).
pub const GATEWAY_TOKEN: &str = "test-token-mail-7c1e";

/// Where a mail server listens.
#[derive(Clone, Debug)]
pub struct MailServer {
    pub host: String,
    pub imap_port: u16,
    pub smtp_port: u16,
    pub dir: String,
}

impl MailServer {
    /// The shared test server from `scripts/testenv/up`.
    pub fn shared() -> Self {
        Self {
            host: testenv::var("SQUIDBOT_TEST_MAIL_HOST"),
            imap_port: testenv::var("SQUIDBOT_TEST_IMAP_PORT").parse().unwrap(),
            smtp_port: testenv::var("SQUIDBOT_TEST_SMTP_PORT").parse().unwrap(),
            dir: testenv::var("SQUIDBOT_TEST_MAIL_DIR"),
        }
    }

    /// Creates a fresh random user; returns its address (`name@localhost`) and password.
    pub fn add_user(&self, prefix: &str) -> (String, String) {
        // `mail.sh adduser` rewrites the users file through one temporary name: serialize it.
        static ADDUSER: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _guard = ADDUSER.lock().unwrap_or_else(|p| p.into_inner());
        let name = format!("{prefix}{:08x}", fastrand::u32(..));
        let password = format!("pw{:08x}", fastrand::u32(..));
        testenv::run_script("mail.sh", &["adduser", &self.dir, &name, &password]);
        // Dovecot rereads the users file when its mtime (in whole seconds) changes: the next
        // change must fall in a later second, or a read in between hides it.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        std::thread::sleep(
            Duration::from_nanos(1_000_000_000 - u64::from(now.subsec_nanos()))
                + Duration::from_millis(10),
        );
        (format!("{name}@localhost"), password)
    }

    /// Sends raw RFC 5322 `bytes` from `from` to `to` over SMTP.
    pub async fn send_raw(&self, from: &str, to: &str, bytes: &[u8]) {
        let transport = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&self.host)
            .port(self.smtp_port)
            .timeout(Some(Duration::from_secs(60)))
            .build();
        let envelope =
            Envelope::new(Some(from.parse().unwrap()), vec![to.parse().unwrap()]).unwrap();
        transport.send_raw(&envelope, bytes).await.unwrap();
    }

    /// Logs in as `user`, INBOX selected.
    pub async fn imap(&self, user: &str, password: &str) -> Session<TcpStream> {
        let tcp = TcpStream::connect((self.host.as_str(), self.imap_port))
            .await
            .unwrap();
        let mut client = async_imap::Client::new(tcp);
        client.read_response().await.unwrap();
        let mut session = client.login(user, password).await.map_err(|e| e.0).unwrap();
        session.select("INBOX").await.unwrap();
        session
    }

    /// Every mail in `user`'s INBOX, raw, with whether it is `\Seen`.
    pub async fn mailbox(&self, user: &str, password: &str) -> Vec<(Vec<u8>, bool)> {
        let mut session = self.imap(user, password).await;
        let mailbox = session.select("INBOX").await.unwrap();
        let mut mails = Vec::new();
        if mailbox.exists > 0 {
            let fetches: Vec<_> = session
                .fetch("1:*", "(FLAGS BODY.PEEK[])")
                .await
                .unwrap()
                .try_collect()
                .await
                .unwrap();
            for fetch in fetches {
                let seen = fetch
                    .flags()
                    .any(|f| matches!(f, async_imap::types::Flag::Seen));
                mails.push((fetch.body().unwrap_or_default().to_vec(), seen));
            }
        }
        let _ = session.logout().await;
        mails
    }

    /// Waits until `check` holds for `user`'s mailbox, or panics with `what` after `limit`.
    pub async fn wait_for(
        &self,
        user: &str,
        password: &str,
        what: &str,
        limit: Duration,
        check: impl Fn(&[(Vec<u8>, bool)]) -> bool,
    ) -> Vec<(Vec<u8>, bool)> {
        let deadline = Instant::now() + limit;
        loop {
            let mails = self.mailbox(user, password).await;
            if check(&mails) {
                return mails;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// A plain mail with `extra` headers (each ending in CRLF).
pub fn plain_mail(
    from: &str,
    to: &str,
    subject: &str,
    id: &str,
    extra: &str,
    body: &str,
) -> Vec<u8> {
    format!(
        "From: {from}\r\nTo: {to}\r\nSubject: {subject}\r\nMessage-ID: <{id}>\r\n\
         Date: Sun, 22 Nov 2026 08:00:00 +0000\r\nMIME-Version: 1.0\r\n{extra}\
         Content-Type: text/plain; charset=utf-8\r\n\r\n{body}\r\n"
    )
    .into_bytes()
}

/// The authserv-id the tests' "receiving server" writes (`channels.email.authserv_id`).
pub const AUTHSERV_ID: &str = "mx.squidbot.test";

/// `mail` as the receiving server would hand it on after verifying a DKIM signature of
/// `from`'s domain: an `Authentication-Results` header on top. (The test SMTP front end does
/// not verify DKIM; this stands for the server that would.)
pub fn with_dkim_pass(mail: Vec<u8>, from: &str) -> Vec<u8> {
    let domain = from.rsplit_once('@').map_or("", |(_, domain)| domain);
    let mut out = format!(
        "Authentication-Results: {AUTHSERV_ID}; dkim=pass header.d={domain} header.s=test; \
         spf=pass smtp.mailfrom={from}\r\n"
    )
    .into_bytes();
    out.extend(mail);
    out
}

/// A fresh Message-ID.
pub fn new_id(tag: &str) -> String {
    format!("{tag}.{:016x}@test.example", fastrand::u64(..))
}

/// A running `squidbot gateway` with a home that outlives it (for restarts).
pub struct MailGateway {
    pub child: Child,
    pub base: String,
}

impl MailGateway {
    /// Starts the gateway in `home` (config already written) and waits until `/readyz` is 200,
    /// which needs the email channel logged in.
    pub async fn start(home: &Path, port: u16) -> Self {
        let child = crate::support::bin::gateway_logging_to_home(
            home,
            "warn,squidbot::channels::email=debug",
        )
        .spawn()
        .unwrap();
        let gateway = Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
        };
        crate::support::bin::wait_ready(&reqwest::Client::new(), &gateway.base, home).await;
        gateway
    }

    /// `/status` as JSON.
    pub async fn status(&self) -> serde_json::Value {
        let http = reqwest::Client::new();
        crate::support::daemon::get(&http, &self.base, "/status", GATEWAY_TOKEN)
            .await
            .json()
            .await
            .unwrap()
    }

    /// SIGTERM, then waits for the exit (panics after 15 s).
    pub async fn stop(mut self) {
        crate::support::bin::send_signal(&self.child, "TERM");
        let status = tokio::time::timeout(Duration::from_secs(15), self.child.wait())
            .await
            .expect("gateway did not stop within 15 s")
            .unwrap();
        assert!(status.success(), "gateway exit: {status}");
    }
}

/// Writes a gateway config for the bot account into `home`; returns the HTTP port.
pub fn write_config(
    home: &Path,
    llm_url: &str,
    server: &MailServer,
    bot: &(String, String),
    allow_from: &str,
) -> u16 {
    MailConfig::new(llm_url, server, bot, allow_from).write(home)
}

/// A mail gateway's configuration as the tests vary it: who may write, an owner whose mail
/// counts with the receiving server's verdict, more email settings, and whatever else the
/// shared [`TestConfig`] takes. Four suites used to read the written file back and patch it
/// with `replace`, which broke silently when the email section's first lines changed.
pub struct MailConfig {
    config: TestConfig,
    email: Vec<String>,
    owner: Option<String>,
    port: u16,
}

impl MailConfig {
    /// The bot's mailbox on `server`, answering `allow_from` (YAML: `["*"]`, `["@LOCALHOST"]`),
    /// its HTTP API on a free port with [`GATEWAY_TOKEN`].
    pub fn new(
        llm_url: &str,
        server: &MailServer,
        bot: &(String, String),
        allow_from: &str,
    ) -> Self {
        let port = crate::support::free_port();
        let (address, password) = bot;
        let email = vec![
            "enabled: true".to_owned(),
            format!("imap_host: {}", server.host),
            format!("imap_port: {}", server.imap_port),
            format!("smtp_host: {}", server.host),
            format!("smtp_port: {}", server.smtp_port),
            format!("username: {address}"),
            format!("password: {password}"),
            format!("from_address: {address}"),
            format!("allow_from: {allow_from}"),
            "poll_interval_seconds: 1".to_owned(),
            "tls: false".to_owned(),
        ];
        let config = TestConfig::new(llm_url)
            .no_heartbeat()
            .gateway_line("shutdown_grace_seconds: 5")
            .http(&format!("127.0.0.1:{port}"), Some(GATEWAY_TOKEN));
        Self {
            config,
            email,
            owner: None,
            port,
        }
    }

    /// `address` is the owner's (`owner.email`), and mail counts as theirs only with a pass
    /// from [`AUTHSERV_ID`] (`channels.email.authserv_id`), as [`with_dkim_pass`] writes it.
    pub fn trusting(mut self, address: &str) -> Self {
        self.owner = Some(address.to_owned());
        self.email_line(&format!("authserv_id: {AUTHSERV_ID}"))
    }

    /// One more `key: value` line of `channels.email`.
    pub fn email_line(mut self, line: &str) -> Self {
        self.email.push(line.to_owned());
        self
    }

    /// The rest of the file, on the shared builder (`model`, `more_provider`, `extra`).
    pub fn with(mut self, change: impl FnOnce(TestConfig) -> TestConfig) -> Self {
        self.config = change(self.config);
        self
    }

    /// Writes `home/squidbot.yaml`; returns the HTTP port.
    pub fn write(self, home: &Path) -> u16 {
        let mut yaml = String::from("channels:\n  email:\n");
        for line in &self.email {
            yaml.push_str(&format!("    {line}\n"));
        }
        if let Some(owner) = &self.owner {
            yaml.push_str(&format!("owner:\n  email: [\"{owner}\"]\n"));
        }
        self.config.extra(&yaml).write(home);
        self.port
    }
}

/// The replies in a mailbox: (In-Reply-To id, raw mail).
pub fn replies(mails: &[(Vec<u8>, bool)]) -> Vec<(String, Vec<u8>)> {
    mails
        .iter()
        .filter_map(|(raw, _)| {
            let message = mail_parser::MessageParser::default().parse(raw)?;
            let id = message.in_reply_to().as_text()?.to_owned();
            Some((id, raw.clone()))
        })
        .collect()
}
