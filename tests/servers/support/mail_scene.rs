//! One email test's cast on the test mail server: the bot's mailbox, the owner's, a scripted
//! model and a home for the gateway. The mail suites began the same seven lines each and then
//! sent and awaited mail the same way; what a test varies (who may write, a trusted owner, a
//! setting) goes through [`MailConfig`].

use std::time::Duration;

use super::mail_client::{
    MailConfig, MailGateway, MailServer, plain_mail, replies, with_dkim_pass,
};
use crate::support::scripted_llm::ScriptedLlm;

/// How long a test waits for mail the gateway sends.
pub const WAIT: Duration = Duration::from_secs(60);

/// The accounts, the model and the home of one mail test.
pub struct MailScene {
    pub server: MailServer,
    /// The bot's address and password.
    pub bot: (String, String),
    /// The owner's (or, where the test says so, any sender's) address and password.
    pub owner: (String, String),
    pub llm: ScriptedLlm,
    pub home: tempfile::TempDir,
}

impl MailScene {
    /// Fresh accounts `bot…` and `owner…` on `server`, a scripted model and an empty home.
    pub async fn new(server: &MailServer) -> Self {
        Self::named(server, "bot", "owner").await
    }

    /// As [`MailScene::new`], with the accounts' name prefixes.
    pub async fn named(server: &MailServer, bot: &str, owner: &str) -> Self {
        Self {
            server: server.clone(),
            bot: server.add_user(bot),
            owner: server.add_user(owner),
            llm: ScriptedLlm::start().await,
            home: tempfile::tempdir().unwrap(),
        }
    }

    /// The bot's configuration answering `allow_from`, to refine and write.
    pub fn config(&self, allow_from: &str) -> MailConfig {
        MailConfig::new(&self.llm.url(), &self.server, &self.bot, allow_from)
    }

    /// Writes `config` and starts the gateway on it.
    pub async fn start(&self, config: MailConfig) -> MailGateway {
        let port = config.write(self.home.path());
        MailGateway::start(self.home.path(), port).await
    }

    /// The bot's address.
    pub fn to(&self) -> &str {
        &self.bot.0
    }

    /// The owner sends the bot a plain mail.
    pub async fn send(&self, subject: &str, id: &str, headers: &str, body: &str) {
        let (owner, to) = (self.owner.0.as_str(), self.to());
        let mail = plain_mail(owner, to, subject, id, headers, body);
        self.server.send_raw(owner, to, &mail).await;
    }

    /// As [`MailScene::send`], with the receiving server's DKIM pass on top, so a gateway
    /// configured with [`MailConfig::trusting`] knows it for the owner's.
    pub async fn send_trusted(&self, subject: &str, id: &str, headers: &str, body: &str) {
        let (owner, to) = (self.owner.0.as_str(), self.to());
        let mail = with_dkim_pass(plain_mail(owner, to, subject, id, headers, body), owner);
        self.server.send_raw(owner, to, &mail).await;
    }

    /// Waits until the owner's mailbox holds at least `count` replies; returns them
    /// (In-Reply-To id, raw mail).
    pub async fn replies(&self, what: &str, count: usize) -> Vec<(String, Vec<u8>)> {
        let (owner, password) = (&self.owner.0, &self.owner.1);
        let mails = self
            .server
            .wait_for(owner, password, what, WAIT, |m| replies(m).len() >= count)
            .await;
        replies(&mails)
    }
}
