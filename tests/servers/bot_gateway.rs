//! [`BotGateway`]: a real `squidbot gateway` with the Matrix channel, logged in to the test
//! Synapse, on a home the test owns (so it can be restarted).

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use tokio::process::Child;

use crate::support::bin::gateway_logging_to_home;
use crate::support::config::TestConfig;
use crate::support::daemon::{TOKEN, get};
use crate::support::matrix_client::{Account, Homeserver, Human};
use crate::support::scripted_llm::{Reply, ScriptedLlm};

/// A gateway with the Matrix channel, on a home the test owns (so it can be restarted).
pub(crate) struct BotGateway {
    child: Child,
    pub(crate) base: String,
    pub(crate) http: reqwest::Client,
}

/// The model id asked for unless a test names one (a plain model: no images, no quirks).
/// Every bot also has a second model, `big` (`big-model`), which only `/model big` picks.
const DEFAULT_MODEL: &str = "scripted-model";

impl BotGateway {
    /// Starts `squidbot gateway` in `home`, logged in as `bot` as device `SQUIDBOTTEST` (unless
    /// `matrix_extra` sets `device_id`), with `matrix_extra` (YAML at the indentation of
    /// `channels.matrix` fields) added; waits for `/readyz`.
    pub(crate) async fn start(
        home: &Path,
        llm: &str,
        hs: &Homeserver,
        bot: &Account,
        matrix_extra: &str,
    ) -> Self {
        Self::start_with_model(home, llm, DEFAULT_MODEL, hs, bot, matrix_extra).await
    }

    /// [`Self::start`] with `model` as the id the scripted LLM is asked for (which decides
    /// the model's profile, e.g. whether it reads images).
    pub(crate) async fn start_with_model(
        home: &Path,
        llm: &str,
        model: &str,
        hs: &Homeserver,
        bot: &Account,
        matrix_extra: &str,
    ) -> Self {
        Self::spawn_model(home, llm, model, hs, bot, matrix_extra, None)
            .ready(home)
            .await
    }

    /// Waits for `/readyz` of this gateway on `home`.
    async fn ready(self, home: &Path) -> Self {
        crate::support::bin::wait_ready(&self.http, &self.base, home).await;
        self
    }

    /// [`Self::start`] with voice messages transcribed at `whisper` (an OpenAI-compatible
    /// `api_base`) by the model `whisper-base`, with `settings` (YAML at the indentation of
    /// `transcription` fields) added.
    pub(crate) async fn start_with_voice(
        home: &Path,
        llm: &str,
        hs: &Homeserver,
        bot: &Account,
        matrix_extra: &str,
        whisper: &str,
        settings: &str,
    ) -> Self {
        let voice = Some((whisper, settings));
        Self::spawn_model(home, llm, DEFAULT_MODEL, hs, bot, matrix_extra, voice)
            .ready(home)
            .await
    }

    fn spawn_model(
        home: &Path,
        llm: &str,
        model: &str,
        hs: &Homeserver,
        bot: &Account,
        matrix_extra: &str,
        voice: Option<(&str, &str)>,
    ) -> Self {
        let port = crate::support::free_port();
        // `voice`: the transcription provider's api_base and the section's further settings.
        let (voice, whisper) = match voice {
            Some((url, settings)) => (
                format!("transcription:\n  provider: whisper\n  model: whisper-base\n{settings}\n"),
                Some(url),
            ),
            None => (String::new(), None),
        };
        // A test may set its own `device_id` (`""`: one chosen per home, as by default).
        let device = if matrix_extra.contains("device_id:") {
            ""
        } else {
            "    device_id: SQUIDBOTTEST\n"
        };
        let mut config = TestConfig::new(llm)
            .model(model)
            .more_model("big", "big-model")
            .gateway_on(port)
            .gateway_line("shutdown_grace_seconds: 5")
            .extra(&format!(
                "channels:\n  matrix:\n    enabled: true\n    homeserver: \"{}\"\n    user_id: \"{}\"\n    password: \"{}\"\n{device}{matrix_extra}\n{voice}",
                hs.url, bot.user_id, bot.password,
            ));
        if let Some(url) = whisper {
            config = config.more_provider("whisper", url);
        }
        config.write(home);
        let child = gateway_logging_to_home(home, "warn,squidbot=debug")
            .spawn()
            .unwrap();
        Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::new(),
        }
    }

    pub(crate) async fn status(&self) -> Value {
        get(&self.http, &self.base, "/status", TOKEN)
            .await
            .json()
            .await
            .unwrap()
    }

    /// GETs `path`; returns status and body.
    pub(crate) async fn get(&self, path: &str) -> (u16, String) {
        let response = get(&self.http, &self.base, path, TOKEN).await;
        (response.status().as_u16(), response.text().await.unwrap())
    }

    /// SIGTERM, then waits for a clean exit.
    pub(crate) async fn stop(mut self) {
        crate::support::bin::send_signal(&self.child, "TERM");
        let status = tokio::time::timeout(Duration::from_secs(15), self.child.wait())
            .await
            .expect("gateway exits within 15 s")
            .unwrap();
        assert!(status.success(), "{status:?}");
    }
}

/// Starts `squidbot matrix verify` in `home`, answering `answer` (`"y\n"`, `"n\n"`) when it
/// asks; the task ends with its output.
pub(crate) fn verify(
    home: &Path,
    answer: &'static str,
) -> tokio::task::JoinHandle<std::process::Output> {
    let mut child = crate::support::bin::spawn_piped(
        crate::support::bin::squidbot(home).args(["matrix", "verify", "--wait", "60"]),
    );
    let mut stdin = child.stdin.take().unwrap();
    tokio::spawn(async move {
        use tokio::io::AsyncWriteExt as _;
        // The pipe holds the answer until the command reads it, after showing the emoji.
        stdin.write_all(answer.as_bytes()).await.unwrap();
        drop(stdin);
        child.wait_with_output().await.unwrap()
    })
}

/// One Matrix test's cast: the shared homeserver, the bot's account and Alice's, a scripted
/// model and the home the gateway keeps across restarts. Twelve tests began with the same
/// six lines; what they vary is the model's handler and the channel's extra settings.
pub(crate) struct MatrixScene {
    pub(crate) hs: Homeserver,
    pub(crate) bot: Account,
    pub(crate) alice: Account,
    pub(crate) llm: ScriptedLlm,
    pub(crate) home: tempfile::TempDir,
}

impl MatrixScene {
    /// Fresh accounts `bot…` and `alice…` on the shared Synapse; the model answers with
    /// `handler`.
    pub(crate) async fn new(handler: impl Fn(&Value) -> Reply + Send + Sync + 'static) -> Self {
        let scene = Self::answering_ok().await;
        scene.llm.set_handler(handler);
        scene
    }

    /// [`Self::new`] with the scripted model's default answer, a streamed "ok": for the
    /// tests of the bot's own state (its store, keys, login), where what it says is no matter.
    pub(crate) async fn answering_ok() -> Self {
        let hs = Homeserver::shared();
        let (bot, alice) = (hs.register("bot"), hs.register("alice"));
        Self {
            hs,
            bot,
            alice,
            llm: ScriptedLlm::start().await,
            home: tempfile::tempdir().unwrap(),
        }
    }

    /// `channels.matrix.allowlist` naming Alice (at the indentation of the channel's fields).
    pub(crate) fn allow_alice(&self) -> String {
        format!("    allowlist: [\"{}\"]", self.alice.user_id)
    }

    /// Alice, logged in.
    pub(crate) async fn login_alice(&self) -> Human {
        Human::login(&self.hs, &self.alice).await
    }

    /// [`BotGateway::start`] on this scene's home, model and bot.
    pub(crate) async fn start(&self, matrix_extra: &str) -> BotGateway {
        BotGateway::start(
            self.home.path(),
            &self.llm.url(),
            &self.hs,
            &self.bot,
            matrix_extra,
        )
        .await
    }

    /// [`BotGateway::start`] on this scene's home, model and bot without waiting for it to be
    /// ready.
    pub(crate) fn spawn(&self, matrix_extra: &str) -> BotGateway {
        let (home, llm) = (self.home.path(), self.llm.url());
        BotGateway::spawn_model(
            home,
            &llm,
            DEFAULT_MODEL,
            &self.hs,
            &self.bot,
            matrix_extra,
            None,
        )
    }

    /// Starts the gateway and stops it again: afterwards the bot's device and store exist, and
    /// the bot is down.
    pub(crate) async fn run_once(&self, matrix_extra: &str) {
        self.start(matrix_extra).await.stop().await;
    }
}
