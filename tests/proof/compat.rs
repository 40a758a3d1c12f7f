//! Compatibility with an OpenAI-compatible server no one here wrote: llama.cpp's server
//! (llama-cpp-python) with SmolLM2-135M, started by `scripts/testenv/llama.sh` and run by
//! `scripts/proof compat`.
//!
//! Everything goes through the real binary: `squidbot agent -m`, and a `squidbot gateway`
//! process driven over its HTTP API (plain JSON and SSE). The model is tiny and its wording is
//! arbitrary, so the tests assert structure only: exit codes, non-empty replies, event order,
//! the records in the session's JSONL file, summary.md and the cursor. Each test panics with
//! instructions when `SQUIDBOT_TEST_LLAMA_URL` is missing, so a forgotten server never passes
//! as a skip.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use squidbot::core::session::SessionId;
use squidbot::storage::safe_id;
use tokio::process::{Child, Command};

use crate::support::bin::{squidbot, stderr, stdout};
use crate::support::daemon::{deltas, post_streamed};

const TOKEN: &str = "compat-token-9c1e";

/// The server's `/v1` base URL and model name from the environment `llama.sh` wrote.
fn llama() -> (String, String) {
    let url = std::env::var("SQUIDBOT_TEST_LLAMA_URL").unwrap_or_else(|_| {
        panic!(
            "SQUIDBOT_TEST_LLAMA_URL is not set: run `scripts/proof compat`, or start a server \
             with `scripts/testenv/llama.sh start DIR PORT` and export the variables in DIR/env"
        )
    });
    let model = std::env::var("SQUIDBOT_TEST_LLAMA_MODEL").unwrap_or_else(|_| "smollm2".into());
    (url, model)
}

/// A config for the llama server: only harmless tools (the file tools in a scratch workspace),
/// short replies, no retries (a 500 must show, not be papered over); `agents` is added to the
/// `agents` section and `extra` appended.
fn config(agents: &str, extra: &str) -> String {
    config_for(&llama().0, agents, extra)
}

/// [`config`] with the provider at `url` (the llama server or a proxy in front of it).
fn config_for(url: &str, agents: &str, extra: &str) -> String {
    let (_, model) = llama();
    format!(
        "llm:\n  providers:\n    llama:\n      api_base: \"{url}\"\n  models:\n    small:\n      \
         provider: llama\n      model: \"{model}\"\n      max_tokens: 200\n      \
         max_context_tokens: 8192\n  pools:\n    default: [small]\n  retry:\n    \
         max_retries: 0\n  timeouts:\n    first_byte_seconds: 120\n    total_seconds: 300\n\
         agents:\n  heartbeat:\n    enabled: false\n{agents}tools:\n  shell:\n    enabled: false\n  \
         fetch_url:\n    enabled: false\n  search_history:\n    enabled: false\n{extra}"
    )
}

/// A `squidbot gateway` with its own home and port, killed on drop.
struct Gateway {
    _child: Child,
    base: String,
    home: tempfile::TempDir,
    http: reqwest::Client,
}

impl Gateway {
    /// Starts a gateway; `agents` goes into the config's `agents` section.
    async fn start(agents: &str) -> Self {
        Self::start_with(&llama().0, agents).await
    }

    /// Starts a gateway whose provider is at `url`.
    async fn start_with(url: &str, agents: &str) -> Self {
        let home = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let config = config_for(
            url,
            agents,
            &format!(
                "gateway:\n  shutdown_grace_seconds: 5\n  http:\n    listen: 127.0.0.1:{port}\n    \
             token: {TOKEN}\n"
            ),
        );
        std::fs::write(home.path().join("squidbot.yaml"), config).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_squidbot"))
            .arg("gateway")
            .env("SQUIDBOT_HOME", home.path())
            .env("HOME", home.path())
            .env_remove("SQUIDBOT_CONFIG")
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let gateway = Self {
            _child: child,
            base: format!("http://127.0.0.1:{port}"),
            home,
            http: reqwest::Client::new(),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ready = gateway
                .http
                .get(format!("{}/healthz", gateway.base))
                .send()
                .await;
            if ready.is_ok_and(|r| r.status().is_success()) {
                return gateway;
            }
            assert!(
                Instant::now() < deadline,
                "the gateway did not become ready"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn url(&self, id: &str) -> String {
        format!("{}/v1/sessions/{id}/messages", self.base)
    }

    /// One non-streamed turn: status and JSON body.
    async fn say(&self, id: &str, text: &str) -> (u16, Value) {
        crate::support::daemon::post_text(&self.http, &self.url(id), TOKEN, text).await
    }

    fn session_stem(id: &str) -> String {
        safe_id::encode(&SessionId::new("http", id).unwrap())
    }

    /// The session's history, one JSON value per line.
    fn history(&self, id: &str) -> Vec<Value> {
        let path = self
            .home
            .path()
            .join("sessions")
            .join(format!("{}.jsonl", Self::session_stem(id)));
        std::fs::read_to_string(&path)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    fn summary_path(&self, id: &str) -> PathBuf {
        let stem = Self::session_stem(id);
        self.home
            .path()
            .join("memory")
            .join(stem)
            .join("summary.md")
    }

    fn cursor(&self, id: &str) -> Value {
        let path = self
            .home
            .path()
            .join("sessions")
            .join(format!("{}.meta.json", Self::session_stem(id)));
        std::fs::read_to_string(path)
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or(Value::Null)
    }
}

fn non_empty_reply(body: &Value) -> &str {
    let reply = body["reply"]
        .as_str()
        .unwrap_or_else(|| panic!("no reply: {body}"));
    assert!(!reply.trim().is_empty(), "empty reply: {body}");
    reply
}

#[tokio::test]
#[ignore = "needs a llama.cpp server; run by scripts/proof compat"]
async fn agent_one_shot_prints_a_reply() {
    let started = Instant::now();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("squidbot.yaml"), config("", "")).unwrap();
    let output = squidbot(home.path())
        .args(["agent", "-m", "Say hello in one short sentence."])
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "exit {:?}: {}",
        output.status,
        stderr(&output)
    );
    assert!(!stdout(&output).trim().is_empty(), "no reply on stdout");
    assert_history_shape(&home.path().join("sessions"));
    println!("compat: agent -m answered in {:.1?}", started.elapsed());
}

/// Every line of every history file is a record with a role and a timestamp.
fn assert_history_shape(dir: &Path) {
    let mut lines = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "jsonl") {
            for line in std::fs::read_to_string(&path).unwrap().lines() {
                let record: Value = serde_json::from_str(line).unwrap();
                assert!(record["role"].is_string() && record["timestamp"].is_string());
                lines += 1;
            }
        }
    }
    assert!(lines >= 2, "the turn was not recorded");
}

#[tokio::test]
#[ignore = "needs a llama.cpp server; run by scripts/proof compat"]
async fn gateway_answers_plain_and_streamed() {
    let gw = Gateway::start("").await;

    let started = Instant::now();
    let (status, body) = gw.say("plain", "What is the capital of France?").await;
    assert_eq!(status, 200, "{body}");
    non_empty_reply(&body);
    println!("compat: plain reply in {:.1?}", started.elapsed());

    let started = Instant::now();
    let events = post_streamed(&gw.http, &gw.url("streamed"), TOKEN, "Name three colours.").await;
    let (last, data) = events.last().expect("no SSE events");
    assert_eq!(last, "done", "the stream did not end with done: {events:?}");
    let reply = non_empty_reply(data);
    assert_eq!(
        deltas(&events).concat(),
        reply,
        "the deltas do not add up to the reply: {events:?}"
    );
    assert!(events.iter().all(|(name, _)| name != "error"), "{events:?}");
    println!(
        "compat: streamed reply in {:.1?} ({} delta events)",
        started.elapsed(),
        deltas(&events).len()
    );
    for id in ["plain", "streamed"] {
        let roles: Vec<_> = gw.history(id).iter().map(|m| m["role"].clone()).collect();
        assert_eq!(roles, ["user", "assistant"], "{id}");
    }
}

/// Whether a history holds a complete tool round trip: an assistant message with tool calls,
/// a tool result answering each call, then a final assistant message without calls.
fn round_trip(history: &[Value]) -> Option<Vec<String>> {
    let start = history.iter().position(|m| m["tool_calls"].is_array())?;
    let calls = history[start]["tool_calls"].as_array()?;
    let ids: Vec<&str> = calls.iter().filter_map(|c| c["id"].as_str()).collect();
    let answered = ids.iter().all(|id| {
        history[start + 1..]
            .iter()
            .any(|m| m["role"] == "tool" && m["tool_call_id"] == *id)
    });
    let last = history.last()?;
    let finished = last["role"] == "assistant" && !last["tool_calls"].is_array();
    (answered && finished && !ids.is_empty()).then(|| {
        calls
            .iter()
            .map(|c| c["name"].as_str().unwrap_or_default().to_owned())
            .collect()
    })
}

/// A loopback proxy in front of the llama server that adds OpenAI's standard `tool_choice`,
/// naming `tool`, to the first chat request that offers tools, and passes everything else
/// (request and streamed response) through untouched. Returns its `/v1` base URL.
///
/// Why: llama-cpp-python decides between answering and calling a tool with a greedy
/// (temperature 0) first step, and SmolLM2-135M answered in all of a dozen phrasings tried
/// (direct orders, the `functions.<name>:` format itself, in-context examples), so asking more
/// often cannot help. squidbot sends no `tool_choice` of its own; the proxy adds only that field.
async fn forcing_proxy(tool: &'static str) -> String {
    let upstream = llama().0;
    let forced = Arc::new(AtomicBool::new(false));
    let client = reqwest::Client::new();
    let handler = move |body: axum::body::Bytes| {
        let (upstream, forced, client) = (upstream.clone(), forced.clone(), client.clone());
        async move {
            let mut request: Value = serde_json::from_slice(&body).unwrap();
            if request["tools"].is_array() && !forced.swap(true, Ordering::SeqCst) {
                request["tool_choice"] =
                    serde_json::json!({"type": "function", "function": {"name": tool}});
            }
            let response = client
                .post(format!("{upstream}/chat/completions"))
                .json(&request)
                .send()
                .await
                .unwrap();
            let content_type = response
                .headers()
                .get("content-type")
                .cloned()
                .unwrap_or(axum::http::HeaderValue::from_static("application/json"));
            axum::response::Response::builder()
                .status(response.status().as_u16())
                .header("content-type", content_type)
                .body(axum::body::Body::from_stream(response.bytes_stream()))
                .unwrap()
        }
    };
    let app = axum::Router::new().route("/v1/chat/completions", axum::routing::post(handler));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}/v1")
}

#[tokio::test]
#[ignore = "needs a llama.cpp server; run by scripts/proof compat"]
async fn a_tool_call_makes_a_round_trip() {
    let gw = Gateway::start_with(&forcing_proxy("list_files").await, "").await;
    std::fs::create_dir_all(gw.home.path().join("workspace")).unwrap();
    std::fs::write(gw.home.path().join("workspace/notes.md"), "tea at four\n").unwrap();
    let started = Instant::now();
    let (status, body) = gw.say("tools", "Which files are in the workspace?").await;
    assert_eq!(status, 200, "{body}");
    non_empty_reply(&body);
    let history = gw.history("tools");
    let names = round_trip(&history).unwrap_or_else(|| panic!("no round trip: {history:#?}"));
    assert_eq!(names, ["list_files"], "{history:#?}");
    // The model picks the arguments (it asked for `example.csv` once), so only check that the
    // real tool ran and its result (listing or error result) was recorded.
    let result = history.iter().find(|m| m["role"] == "tool").unwrap();
    assert!(
        !result["content"].as_str().unwrap_or_default().is_empty(),
        "empty tool result: {result}"
    );
    println!(
        "compat: tool round trip in {:.1?} ({} history records)",
        started.elapsed(),
        history.len()
    );
}

#[tokio::test]
#[ignore = "needs a llama.cpp server; run by scripts/proof compat"]
async fn consolidation_writes_a_real_summary() {
    let gw = Gateway::start("  consolidation_threshold: 4\n  keep_recent: 2\n").await;
    let started = Instant::now();
    let facts = [
        "My name is Ada and I live in Lisbon.",
        "I have a cat called Pixel.",
        "I am learning to play the cello.",
        "My favourite food is grilled sardines.",
    ];
    for fact in facts {
        let (status, body) = gw.say("memory", fact).await;
        assert_eq!(status, 200, "{body}");
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    let summary_path = gw.summary_path("memory");
    loop {
        let summary = std::fs::read_to_string(&summary_path).unwrap_or_default();
        let consolidated = gw.cursor("memory")["last_consolidated"]
            .as_u64()
            .unwrap_or(0);
        if !summary.trim().is_empty() && consolidated > 0 {
            let n_messages = gw.history("memory").len() as u64;
            assert!(
                consolidated <= n_messages,
                "cursor {consolidated} past {n_messages}"
            );
            assert!(
                n_messages - consolidated >= 2,
                "keep_recent messages were not kept: cursor {consolidated} of {n_messages}"
            );
            println!(
                "compat: consolidated {consolidated} of {n_messages} messages into a \
                 {}-word summary in {:.1?}",
                summary.split_whitespace().count(),
                started.elapsed()
            );
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no summary after {:.0?}: summary {summary:?}, cursor {}",
            started.elapsed(),
            gw.cursor("memory")
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
