//! #39: the OpenAI-compatible endpoint driven by independent clients over loopback against the
//! real binary: the official `openai` Python SDK (plain and streamed, several conversations, a
//! restart, a regenerate and an edit, a client that leaves mid-stream, approvals, bad input)
//! and Simon Willison's `llm` CLI. The clients come from PyPI into a cached venv
//! (`scripts/testenv/openai_clients.sh`); the app's side of each conversation is kept here, as
//! an app keeps it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::process::Command;

use crate::harness::default_reply;
use crate::support::daemon::{Gateway, TOKEN};
use crate::support::scripted_llm::{Reply, ScriptedLlm};
use crate::support::testenv;

/// The endpoint switched on.
pub(crate) const ON: &str = "    openai: true\n";

/// The bin directory of the clients' venv, installed once per test run.
pub(crate) fn clients() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        PathBuf::from(
            testenv::run_script("openai_clients.sh", &["install"])
                .trim()
                .to_owned(),
        )
    })
}

/// Runs `openai_app.py` with `args`; its JSON answer.
pub(crate) async fn app(args: &[&str]) -> Value {
    let output = Command::new(clients().join("python"))
        .arg(testenv::scripts_dir().join("openai_app.py"))
        .args(args)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "openai_app.py {args:?}: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// One app conversation: the messages the app shows, resent whole with each new message.
pub(crate) struct Chat {
    pub messages: Vec<Value>,
}

impl Chat {
    pub fn new() -> Self {
        Self {
            messages: Vec::new(),
        }
    }

    /// Sends `text` (`plain` or `stream`) as the app does; keeps and returns the answer.
    pub async fn say(&mut self, gw: &Gateway, mode: &str, text: &str) -> Value {
        self.messages
            .push(json!({ "role": "user", "content": text }));
        self.send(gw, mode).await
    }

    /// Sends the conversation as it stands (its last message the person's).
    pub async fn send(&mut self, gw: &Gateway, mode: &str) -> Value {
        let messages = Value::Array(self.messages.clone()).to_string();
        let answer = app(&[
            "chat", &gw.base, TOKEN, "default", mode, &messages, "--usage",
        ])
        .await;
        if let Some(text) = answer["text"].as_str() {
            self.messages
                .push(json!({ "role": "assistant", "content": text }));
        }
        answer
    }

    /// Drops the last answer, as an app's "regenerate" does.
    pub fn drop_answer(&mut self) {
        let last = self.messages.pop().unwrap();
        assert_eq!(last["role"], "assistant");
    }
}

/// The sessions of app conversations in `gw`'s home, by file name.
pub(crate) fn app_sessions(gw: &Gateway) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(gw.home().join("sessions"))
        .map(|dir| {
            dir.map(|e| e.unwrap().path())
                .filter(|p| {
                    let name = p.file_name().unwrap().to_string_lossy().into_owned();
                    name.starts_with("http") && name.contains("openai") && name.ends_with(".jsonl")
                })
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// The user messages recorded in the session file `path`.
pub(crate) fn user_texts(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The session file whose user messages include `text`.
pub(crate) fn session_with(gw: &Gateway, text: &str) -> PathBuf {
    let sessions = app_sessions(gw);
    sessions
        .iter()
        .find(|path| user_texts(path).iter().any(|t| t.contains(text)))
        .unwrap_or_else(|| panic!("no session records {text:?}: {sessions:?}"))
        .clone()
}

/// Waits up to 15 s for the session file `path` to be `done`; its text then.
pub(crate) async fn wait_for_history(path: &Path, done: impl Fn(&str) -> bool) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let history = std::fs::read_to_string(path).unwrap();
        if done(&history) {
            return history;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not as awaited: {history}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn the_sdk_talks_plain_and_streamed_in_separate_conversations_across_a_restart() {
    let llm = ScriptedLlm::start().await;
    llm.set_handler(default_reply);
    let mut gw = Gateway::start(&llm.url(), ON, &[]).await;

    let models = app(&["models", &gw.base, TOKEN]).await;
    assert_eq!(models["ids"], json!(["default", "small"]), "{models}");

    let mut cats = Chat::new();
    let mut dogs = Chat::new();
    let first = cats.say(&gw, "plain", "my cat is called Tom").await;
    assert_eq!(first["text"], "re: my cat is called Tom", "{first}");
    assert_eq!(first["finish"], "stop");
    assert!(
        first["usage"]["completion_tokens"].as_u64().unwrap() > 0,
        "{first}"
    );
    let streamed = dogs.say(&gw, "stream", "my dog is called Rex").await;
    assert_eq!(streamed["text"], "re: my dog is called Rex", "{streamed}");
    assert!(
        streamed["pieces"].as_u64().unwrap() > 1,
        "in pieces: {streamed}"
    );
    assert!(
        streamed["usage"]["total_tokens"].as_u64().unwrap() > 0,
        "include_usage: {streamed}"
    );
    let second = cats.say(&gw, "stream", "what is my cat called?").await;
    assert_eq!(second["text"], "re: what is my cat called?", "{second}");
    // The model saw the session's own history: the earlier exchange of this conversation only.
    let request = llm.requests().last().unwrap().clone();
    let seen = request["messages"].to_string();
    assert!(seen.contains("my cat is called Tom"), "{seen}");
    assert!(!seen.contains("Rex"), "conversations stay apart: {seen}");

    gw.restart().await;
    let third = cats.say(&gw, "plain", "and after the restart?").await;
    assert_eq!(third["text"], "re: and after the restart?", "{third}");
    let more = dogs.say(&gw, "stream", "still there?").await;
    assert_eq!(more["text"], "re: still there?", "{more}");

    let sessions = app_sessions(&gw);
    assert_eq!(
        sessions.len(),
        2,
        "one session per conversation: {sessions:?}"
    );
    assert_eq!(
        user_texts(&session_with(&gw, "Tom")),
        [
            "my cat is called Tom",
            "what is my cat called?",
            "and after the restart?"
        ]
    );
    assert_eq!(
        user_texts(&session_with(&gw, "Rex")),
        ["my dog is called Rex", "still there?"]
    );

    // A new conversation opening as an older one did is a session of its own.
    let mut again = Chat::new();
    let answer = again.say(&gw, "plain", "my cat is called Tom").await;
    assert_eq!(answer["text"], "re: my cat is called Tom");
    assert_eq!(app_sessions(&gw).len(), 3, "{:?}", app_sessions(&gw));
    let follow = again.say(&gw, "plain", "a second conversation").await;
    assert_eq!(follow["text"], "re: a second conversation");
    let newest = session_with(&gw, "a second conversation");
    assert_eq!(
        user_texts(&newest),
        ["my cat is called Tom", "a second conversation"]
    );
}

#[tokio::test]
async fn a_regenerate_and_an_edit_are_recorded_as_what_they_are_never_as_duplicates() {
    let llm = ScriptedLlm::start().await;
    llm.set_handler(default_reply);
    let gw = Gateway::start(&llm.url(), ON, &[]).await;
    let mut chat = Chat::new();
    chat.say(&gw, "stream", "name a colour").await;
    chat.say(&gw, "stream", "name a fruit").await;
    chat.drop_answer();
    let again = chat.send(&gw, "stream").await;
    let again_text = again["text"].as_str().unwrap();
    assert!(
        again_text.starts_with("re: [The person asked for another answer"),
        "{again}"
    );
    assert!(again_text.ends_with("name a fruit"), "{again}");
    let session = session_with(&gw, "name a colour");
    let users = user_texts(&session);
    assert_eq!(users.len(), 3, "{users:?}");
    assert!(
        users[2].starts_with("[The person asked for another answer")
            && users[2].ends_with("name a fruit"),
        "a regenerate says so: {users:?}"
    );

    // An edit of the second message: the app drops it and its answer and sends another.
    chat.messages.truncate(2);
    let edited = chat.say(&gw, "plain", "name a vegetable").await;
    let edited_text = edited["text"].as_str().unwrap();
    assert!(
        edited_text.starts_with("re: [The person went back"),
        "{edited}"
    );
    assert!(edited_text.ends_with("name a vegetable"), "{edited}");
    let users = user_texts(&session);
    assert_eq!(users.len(), 4, "{users:?}");
    assert!(users[3].starts_with("[The person went back"), "{users:?}");
    assert!(users[3].ends_with("name a vegetable"), "{users:?}");

    // The conversation goes on from the edit as the next message, in the same session.
    let next = chat.say(&gw, "plain", "and a tree").await;
    assert_eq!(next["text"], "re: and a tree");
    assert_eq!(user_texts(&session).last().unwrap(), "and a tree");
    assert_eq!(app_sessions(&gw).len(), 1, "{:?}", app_sessions(&gw));
    // The history the app sent was never recorded as the app wrote it: 5 user messages, each
    // once, however often the app resent them.
    assert_eq!(user_texts(&session).len(), 5);
}

#[tokio::test]
async fn a_client_that_leaves_mid_stream_cancels_its_turn_as_the_terminal_does() {
    let llm = ScriptedLlm::start().await;
    let gate = Arc::new(tokio::sync::Notify::new());
    llm.enqueue(Reply::Hold {
        text: "I am starting to ".into(),
        gate: gate.clone(),
        rest: "answer at length".into(),
    });
    let gw = Gateway::start(&llm.url(), ON, &[]).await;
    let messages = json!([{ "role": "user", "content": "tell me a long story" }]).to_string();
    let left = app(&["leave", &gw.base, TOKEN, "default", &messages, "1"]).await;
    assert!(left["pieces"].as_u64().unwrap() >= 1, "{left}");
    let session = session_with(&gw, "tell me a long story");
    wait_for_history(&session, |history| history.contains("cancelled this turn")).await;
    gate.notify_one();
    // The conversation goes on, the partial answer as the app kept it.
    llm.set_handler(default_reply);
    let mut chat = Chat {
        messages: vec![
            json!({ "role": "user", "content": "tell me a long story" }),
            json!({ "role": "assistant", "content": left["text"] }),
        ],
    };
    let next = chat.say(&gw, "plain", "a short one then").await;
    assert_eq!(next["text"], "re: a short one then", "{next}");
    assert_eq!(app_sessions(&gw).len(), 1, "{:?}", app_sessions(&gw));
    assert_eq!(user_texts(&session).len(), 2);
}

#[tokio::test]
async fn the_stream_carries_the_answer_never_reasoning_or_tool_calls() {
    let llm = ScriptedLlm::start().await;
    llm.enqueue(Reply::TextWithReasoning {
        text: "Let me look.".into(),
        reasoning: "secret deliberation".into(),
    });
    let gw = Gateway::start(&llm.url(), ON, &[]).await;
    let mut chat = Chat::new();
    let answer = chat.say(&gw, "stream", "think first").await;
    assert_eq!(answer["text"], "Let me look.", "{answer}");

    llm.enqueue(Reply::ToolCalls {
        text: "Checking. ".into(),
        calls: vec![(
            "c1".into(),
            "no_such_tool".into(),
            r#"{"path": "x"}"#.into(),
        )],
    });
    llm.enqueue(Reply::Text("Done.".into()));
    let answer = chat.say(&gw, "stream", "use a tool").await;
    let text = answer["text"].as_str().unwrap();
    assert!(
        text.starts_with("Checking.") && text.ends_with("Done."),
        "{answer}"
    );
    for markup in ["no_such_tool", "\"path\"", "secret", "<tool", "{"] {
        assert!(!text.contains(markup), "{markup} shown: {answer}");
    }
}
