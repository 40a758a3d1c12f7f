//! A real `squidbot gateway` process for one test: its own home, port and scripted LLM.
//!
//! [`Gateway::start`] writes a config, starts the binary, and waits for `/readyz`; dropping it
//! kills the process. Requests go through reqwest over loopback.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::process::{Child, Command};

use super::config::TestConfig;
use super::free_port;

pub const TOKEN: &str = "test-token-5f2a";

pub struct Gateway {
    pub child: Child,
    pub base: String,
    pub home: tempfile::TempDir,
    pub http: reqwest::Client,
    /// The environment it was started with, for [`Gateway::restart`].
    env: Vec<(String, String)>,
}

/// POSTs `text` as a message to `url` (a session's `/messages`) with `token`; the status and
/// the JSON body (null when there is none).
pub async fn post_text(http: &reqwest::Client, url: &str, token: &str, text: &str) -> (u16, Value) {
    let response = http
        .post(url)
        .bearer_auth(token)
        .json(&serde_json::json!({ "text": text }))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// POSTs `text` as a message to `url` (a session's `/messages`) with `token`, asking for a
/// stream; fails unless it answers 200; the stream's events ([`sse_events`]).
pub async fn post_streamed(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    text: &str,
) -> Vec<(String, Value)> {
    let response = http
        .post(url)
        .bearer_auth(token)
        .header("accept", "text/event-stream")
        .json(&serde_json::json!({ "text": text }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    sse_events(&response.text().await.unwrap())
}

/// The texts of a stream's `delta` events, in order.
pub fn deltas(events: &[(String, Value)]) -> Vec<&str> {
    events
        .iter()
        .filter(|(name, _)| name == "delta")
        .map(|(_, data)| {
            data["text"]
                .as_str()
                .unwrap_or_else(|| panic!("a delta without text: {data}"))
        })
        .collect()
}

/// GETs `path` of the gateway at `base` with `token`.
pub async fn get(http: &reqwest::Client, base: &str, path: &str, token: &str) -> reqwest::Response {
    http.get(format!("{base}{path}"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
}

/// Starts `squidbot gateway` on `home`; under `strace` writing to `trace` when one is given.
fn spawn_gateway(home: &Path, env: &[(String, String)], log: Stdio, trace: Option<&Path>) -> Child {
    let binary = env!("CARGO_BIN_EXE_squidbot");
    let mut command = match trace {
        None => Command::new(binary),
        Some(trace) => {
            let mut strace = Command::new("strace");
            strace
                .args(["-f", "-y", "-s", "64"])
                .args(["-e", "trace=write,writev,sendto,sendmsg,fdatasync,fsync"])
                .arg("-o")
                .arg(trace)
                .arg(binary);
            strace
        }
    };
    command
        .arg("gateway")
        .env("SQUIDBOT_HOME", home)
        .env("HOME", home)
        .env_remove("SQUIDBOT_CONFIG")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .kill_on_drop(true);
    for (key, value) in env {
        command.env(key, value);
    }
    command.spawn().unwrap()
}

/// The config of a gateway talking to `llm_url` on the port it is given, the message API with
/// `token` (none: no API), no heartbeat, and `extra` YAML appended.
fn config<'a>(
    llm_url: &'a str,
    token: Option<&str>,
    extra: &'a str,
) -> impl FnOnce(u16) -> String + 'a {
    let token = token.map(str::to_owned);
    move |port: u16| {
        TestConfig::new(llm_url)
            .no_heartbeat()
            .gateway_line("shutdown_grace_seconds: 10")
            .http(&format!("127.0.0.1:{port}"), token.as_deref())
            .extra(extra)
            .yaml()
    }
}

impl Gateway {
    /// Starts a gateway talking to `llm_url`, with `extra` YAML appended and `env` set.
    pub async fn start(llm_url: &str, extra: &str, env: &[(&str, &str)]) -> Self {
        Self::start_with_token(llm_url, Some(TOKEN), extra, env).await
    }

    /// Starts a gateway from `yaml`, a whole config but for its `gateway` section, which is
    /// appended (HTTP listen address and token).
    pub async fn start_yaml(yaml: &str) -> Self {
        let home = tempfile::tempdir().unwrap();
        let port = free_port();
        let config = format!(
            "{yaml}gateway:\n  shutdown_grace_seconds: 10\n  http:\n    listen: 127.0.0.1:{port}\n    token: {TOKEN}\n"
        );
        std::fs::write(home.path().join("squidbot.yaml"), config).unwrap();
        let child = spawn_gateway(home.path(), &[], Stdio::piped(), None);
        let gateway = Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
            home,
            http: reqwest::Client::new(),
            env: Vec::new(),
        };
        gateway.wait_ready().await;
        gateway
    }

    /// Like [`Gateway::start`], with the message API's token chosen (`None`: no token).
    pub async fn start_with_token(
        llm_url: &str,
        token: Option<&str>,
        extra: &str,
        env: &[(&str, &str)],
    ) -> Self {
        Self::start_logging_to(llm_url, token, extra, env, Stdio::piped()).await
    }

    /// Like [`Gateway::start_with_token`], with the log (stderr) going to `log`.
    pub async fn start_logging_to(
        llm_url: &str,
        token: Option<&str>,
        extra: &str,
        env: &[(&str, &str)],
        log: Stdio,
    ) -> Self {
        Self::start_with_config(config(llm_url, token, extra), env, log).await
    }

    /// Starts a gateway whose whole config is `config(port)`, with `env` set and the log
    /// (stderr) going to `log`.
    pub async fn start_with_config(
        config: impl FnOnce(u16) -> String,
        env: &[(&str, &str)],
        log: Stdio,
    ) -> Self {
        Self::launch(config, env, log, None).await
    }

    /// Like [`Gateway::start`], under `strace -f -y`, which writes the gateway's writes and
    /// flushes to the disk to `trace` (see `durability.rs`).
    pub async fn start_traced(llm_url: &str, trace: &Path) -> Self {
        let config = config(llm_url, Some(TOKEN), "");
        Self::launch(config, &[], Stdio::piped(), Some(trace)).await
    }

    async fn launch(
        config: impl FnOnce(u16) -> String,
        env: &[(&str, &str)],
        log: Stdio,
        trace: Option<&Path>,
    ) -> Self {
        let home = tempfile::tempdir().unwrap();
        let port = free_port();
        std::fs::write(home.path().join("squidbot.yaml"), config(port)).unwrap();
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let child = spawn_gateway(home.path(), &env, log, trace);
        let gateway = Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
            home,
            http: reqwest::Client::new(),
            env,
        };
        gateway.wait_ready().await;
        gateway
    }

    /// Stops the gateway (SIGTERM) and starts it again on the same home, config and port.
    pub async fn restart(&mut self) {
        self.terminate().await;
        self.respawn().await;
    }

    /// Starts the gateway again on the same home, config and port, once the last process is
    /// gone (a test that killed it); waits for `/readyz`.
    pub async fn respawn(&mut self) {
        self.child = spawn_gateway(self.home.path(), &self.env, Stdio::piped(), None);
        self.wait_ready().await;
    }

    async fn wait_ready(&self) {
        super::bin::wait_ready(&self.http, &self.base, self.home.path()).await;
    }

    pub fn home(&self) -> &Path {
        self.home.path()
    }

    /// The JSONL file of the session `http:<id>`.
    pub fn session_file(&self, id: &str) -> PathBuf {
        self.channel_session_file("http", id)
    }

    /// The JSONL file of the session `<channel>:<id>`.
    pub fn channel_session_file(&self, channel: &str, id: &str) -> PathBuf {
        let session = squidbot::core::session::SessionId::new(channel, id).unwrap();
        self.home().join("sessions").join(format!(
            "{}.jsonl",
            squidbot::storage::safe_id::encode(&session)
        ))
    }

    /// Runs `squidbot cron ARGS` on this gateway's home as another process, as the owner's
    /// CLI does while the gateway runs; fails the test when it fails.
    pub fn cron(&self, args: &[&str]) {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_squidbot"))
            .arg("cron")
            .args(args)
            .env("SQUIDBOT_HOME", self.home())
            .env_remove("SQUIDBOT_CONFIG")
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "squidbot cron {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// Adds a job `name` saying `message` to `target` every second, through `squidbot cron`.
    pub fn cron_every_second(&self, name: &str, message: &str, target: &str) {
        self.cron(&["add", name, message, "every 1", "--target", target]);
    }

    /// POSTs a message with the right token; returns status and JSON body.
    pub async fn say(&self, id: &str, text: &str) -> (u16, Value) {
        let url = format!("{}/v1/sessions/{id}/messages", self.base);
        post_text(&self.http, &url, TOKEN, text).await
    }

    /// The reply to `text` in the session `id` ([`Gateway::say`]); fails unless it answered
    /// 200 with one.
    pub async fn reply(&self, id: &str, text: &str) -> String {
        let (status, body) = self.say(id, text).await;
        assert_eq!(status, 200, "{body}");
        body["reply"]
            .as_str()
            .unwrap_or_else(|| panic!("no reply: {body}"))
            .to_owned()
    }

    /// POSTs a message with the right token, asking for a stream; its events.
    pub async fn say_streamed(&self, id: &str, text: &str) -> Vec<(String, Value)> {
        let url = format!("{}/v1/sessions/{id}/messages", self.base);
        post_streamed(&self.http, &url, TOKEN, text).await
    }

    /// GETs `path` without the token, as anyone who can reach the port would.
    pub async fn get_anonymous(&self, path: &str) -> reqwest::Response {
        self.http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap()
    }

    /// GETs `path` as the owner would (with the token) and parses the JSON.
    pub async fn get_json(&self, path: &str) -> Value {
        get(&self.http, &self.base, path, TOKEN)
            .await
            .json()
            .await
            .unwrap()
    }

    /// GETs `path` as the owner would (with the token) as text.
    pub async fn get_text(&self, path: &str) -> String {
        get(&self.http, &self.base, path, TOKEN)
            .await
            .text()
            .await
            .unwrap()
    }

    /// Sends SIGTERM and waits (at most 15 s) for the process to exit; returns its exit code.
    pub async fn terminate(&mut self) -> Option<i32> {
        crate::support::bin::send_signal(&self.child, "TERM");
        tokio::time::timeout(Duration::from_secs(15), self.child.wait())
            .await
            .expect("the gateway exits within 15 s of SIGTERM")
            .unwrap()
            .code()
    }
}

/// Parses an SSE body into (event, data) pairs.
pub fn sse_events(body: &str) -> Vec<(String, Value)> {
    body.split("\n\n")
        .filter_map(|block| {
            let mut name = None;
            let mut data = None;
            for line in block.lines() {
                if let Some(rest) = line.strip_prefix("event:") {
                    name = Some(rest.trim().to_owned());
                } else if let Some(rest) = line.strip_prefix("data:") {
                    data = serde_json::from_str(rest.trim()).ok();
                }
            }
            Some((name?, data.unwrap_or(Value::Null)))
        })
        .collect()
}
