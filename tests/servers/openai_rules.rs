//! #39: the OpenAI-compatible endpoint keeps the rules of the other channels: OpenAI-style
//! errors for bad input with nothing persisted, a photo taken while megabytes of text are
//! refused, approvals asked in the answer and answered `yes CODE` in the same conversation,
//! chat commands, the model the app picks, a client that leaves while its message waits behind
//! another of the conversation, and a second independent client, the `llm` CLI.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use crate::harness::default_reply;
use crate::openai::{
    Chat, ON, app, app_sessions, clients, session_with, user_texts, wait_for_history,
};
use crate::support::daemon::{Gateway, TOKEN};
use crate::support::gateway::shell_then_result;
use crate::support::scripted_llm::{Reply, ScriptedLlm};

/// Posts `body` to the endpoint with `token`; the status and JSON answer.
async fn post(gw: &Gateway, token: &str, body: impl Into<reqwest::Body>) -> (u16, Value) {
    let response = gw
        .http
        .post(format!("{}/v1/chat/completions", gw.base))
        .bearer_auth(token)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

fn user(text: &str) -> Value {
    json!({ "model": "default", "messages": [{ "role": "user", "content": text }] })
}

/// A PNG of `size` bytes (a valid signature and header, then filler), as a data URL.
fn photo(size: usize) -> String {
    use base64::Engine;
    let mut bytes = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0".to_vec();
    bytes.resize(size, 7);
    format!(
        "data:image/png;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(bytes)
    )
}

#[tokio::test]
async fn bad_input_gets_openai_style_errors_and_nothing_is_persisted() {
    let llm = ScriptedLlm::start().await;
    llm.set_handler(default_reply);
    let gw = Gateway::start(&llm.url(), ON, &[]).await;
    let messages = json!([{ "role": "user", "content": "let me in" }]).to_string();

    // Through the SDK: the exceptions it raises for OpenAI's own errors.
    let wrong = app(&["chat", &gw.base, "nope", "default", "plain", &messages]).await;
    assert_eq!(wrong["error"]["status"], 401, "{wrong}");
    assert_eq!(wrong["error"]["class"], "AuthenticationError", "{wrong}");
    let models = app(&["models", &gw.base, "nope"]).await;
    assert_eq!(models["error"]["status"], 401, "{models}");
    let unknown = app(&["chat", &gw.base, TOKEN, "gpt-17", "stream", &messages]).await;
    assert_eq!(unknown["error"]["class"], "NotFoundError", "{unknown}");
    assert_eq!(unknown["error"]["code"], "model_not_found", "{unknown}");

    let tools = json!({
        "model": "default",
        "messages": [{ "role": "user", "content": "what's the weather" }],
        "tools": [{ "type": "function", "function": { "name": "weather", "parameters": {} } }],
    });
    let too_much = "x".repeat(3 * 1024 * 1024);
    let image_link = json!({ "model": "default", "messages": [{ "role": "user", "content": [
        { "type": "image_url", "image_url": { "url": "http://127.0.0.1:1/cat.png" } }] }] });
    for (body, status, code) in [
        ("{not json".to_owned(), 400, "invalid_request"),
        ("[1, 2]".to_owned(), 400, "invalid_request"),
        (
            json!({ "messages": [] }).to_string(),
            400,
            "invalid_request",
        ),
        (
            json!({ "model": "default", "messages": [{ "role": "assistant", "content": "hi" }] })
                .to_string(),
            400,
            "invalid_request",
        ),
        (
            json!({ "model": "default", "messages": [{ "role": "user", "content": 5 }] })
                .to_string(),
            400,
            "invalid_request",
        ),
        (tools.to_string(), 400, "unsupported_parameter"),
        (image_link.to_string(), 400, "unsupported_parameter"),
        (user(&too_much).to_string(), 413, "request_too_large"),
    ] {
        let (got, answer) = post(&gw, TOKEN, body.clone()).await;
        let shown = &body[..body.len().min(80)];
        assert_eq!(got, status, "{shown}: {answer}");
        assert_eq!(answer["error"]["code"], code, "{shown}: {answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{answer}"
        );
        assert!(answer["error"]["type"].is_string(), "{answer}");
    }
    // A body over 40 MiB is refused on its declared length, before it is read.
    let mut stream = tokio::net::TcpStream::connect(gw.base.trim_start_matches("http://"))
        .await
        .unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{{\"model\":",
        41 * 1024 * 1024
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut answer = vec![0; 4096];
    let n = tokio::time::timeout(std::time::Duration::from_secs(10), stream.read(&mut answer))
        .await
        .expect("answered before the body came")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer[..n]);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("request_too_large"), "{answer}");

    assert_eq!(llm.request_count(), 0, "nothing reached the model");
    assert!(
        app_sessions(&gw).is_empty(),
        "nothing persisted: {:?}",
        app_sessions(&gw)
    );
    assert!(!gw.home().join("openai").join("threads.jsonl").exists());

    // A phone photo (6 MB, 8 MB as base64) is taken and reaches the turn as an attachment.
    let body = json!({ "model": "default", "stream": false, "messages": [{ "role": "user", "content": [
        { "type": "text", "text": "what is in this photo?" },
        { "type": "image_url", "image_url": { "url": photo(6 * 1024 * 1024), "detail": "high" } }] }] });
    let (got, answer) = post(&gw, TOKEN, body.to_string()).await;
    assert_eq!(got, 200, "{answer}");
    assert_eq!(answer["object"], "chat.completion");
    let recorded = user_texts(&session_with(&gw, "what is in this photo?"));
    assert!(
        recorded[0].contains("[attachment: image-1 (image/png)]"),
        "{recorded:?}"
    );
    let saved = recorded[0].rsplit("→ ").next().unwrap().trim();
    assert_eq!(std::fs::metadata(saved).unwrap().len(), 6 * 1024 * 1024);
}

#[tokio::test]
async fn an_approval_is_asked_in_the_answer_and_answered_in_the_same_conversation() {
    let llm = ScriptedLlm::start().await;
    llm.set_handler(shell_then_result("echo ran >> ran.txt"));
    let gw = Gateway::start(&llm.url(), ON, &[]).await;
    let workspace = gw.home().join("workspace");
    let mut chat = Chat::new();
    let asked = chat.say(&gw, "stream", "write the file").await;
    let question = asked["text"].as_str().unwrap().to_owned();
    assert!(question.contains("echo ran >> ran.txt"), "{asked}");
    let code = question
        .split_whitespace()
        .skip_while(|w| !w.trim_matches('`').eq_ignore_ascii_case("yes"))
        .nth(1)
        .map(|w| {
            w.trim_matches(|c: char| !c.is_ascii_alphanumeric())
                .to_owned()
        })
        .unwrap_or_else(|| panic!("no code in {question}"));
    assert!(!workspace.join("ran.txt").exists(), "ran before approval");

    // Another message while it waits is told how to answer, at once; nothing runs.
    let waiting = chat.say(&gw, "plain", "is it done?").await;
    assert!(
        waiting["text"].as_str().unwrap().contains("yes CODE"),
        "{waiting}"
    );
    assert!(!workspace.join("ran.txt").exists());

    let answered = chat.say(&gw, "stream", &format!("yes {code}")).await;
    let text = answered["text"].as_str().unwrap();
    assert!(text.starts_with("Approved:"), "{answered}");
    assert!(
        text.contains("result:"),
        "the turn's answer follows: {answered}"
    );
    assert_eq!(
        std::fs::read_to_string(workspace.join("ran.txt")).unwrap(),
        "ran\n"
    );
    assert_eq!(app_sessions(&gw).len(), 1, "{:?}", app_sessions(&gw));

    // A chat command in the conversation, and the conversation goes on.
    let status = chat.say(&gw, "plain", "/usage").await;
    assert!(
        status["text"].as_str().is_some_and(|t| !t.is_empty()),
        "{status}"
    );
    llm.set_handler(default_reply);
    let next = chat.say(&gw, "plain", "thanks").await;
    assert_eq!(next["text"], "re: thanks", "{next}");
}

/// A request for `text` in the conversation the app names `conversation`.
fn in_conversation(
    gw: &Gateway,
    conversation: &str,
    text: &str,
    stream: bool,
) -> reqwest::RequestBuilder {
    let mut body = user(text);
    body["stream"] = stream.into();
    gw.http
        .post(format!("{}/v1/chat/completions", gw.base))
        .bearer_auth(TOKEN)
        .header("x-squidbot-conversation", conversation)
        .json(&body)
}

#[tokio::test]
async fn a_client_that_leaves_while_its_message_waits_cancels_that_message_not_the_running_one() {
    let llm = ScriptedLlm::start().await;
    let first_gate = Arc::new(tokio::sync::Notify::new());
    llm.enqueue(Reply::Hold {
        text: "Working ".into(),
        gate: first_gate.clone(),
        rest: "on the first.".into(),
    });
    let second_gate = Arc::new(tokio::sync::Notify::new());
    llm.enqueue(Reply::Hold {
        text: "Starting ".into(),
        gate: second_gate.clone(),
        rest: "the second.".into(),
    });
    let gw = Gateway::start(&llm.url(), ON, &[]).await;
    // The first message's client stays for its answer.
    let first = tokio::spawn(in_conversation(&gw, "chat-q", "first message", false).send());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while llm.request_count() < 1 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the first turn never started"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The second is queued behind it; its client reads the stream's first chunk and leaves.
    let mut second = in_conversation(&gw, "chat-q", "second message", true)
        .send()
        .await
        .unwrap();
    assert_eq!(second.status(), 200);
    assert!(second.chunk().await.unwrap().is_some());
    drop(second);
    // Long enough for the endpoint to notice (its keep-alive comes every 5 s) and act.
    tokio::time::sleep(Duration::from_secs(7)).await;
    first_gate.notify_one();
    let answer: Value = first.await.unwrap().unwrap().json().await.unwrap();
    assert_eq!(
        answer["choices"][0]["message"]["content"], "Working on the first.",
        "the running turn was cancelled in the leaving client's place: {answer}"
    );
    // The second then starts and is cancelled at once, recorded as the terminal records it.
    let session = session_with(&gw, "first message");
    let history = wait_for_history(&session, |history| {
        history
            .split("second message")
            .nth(1)
            .is_some_and(|after| after.contains("cancelled this turn"))
    })
    .await;
    let before = history.split("second message").next().unwrap_or_default();
    assert!(!before.contains("cancelled"), "{history}");
    second_gate.notify_one();
    assert_eq!(user_texts(&session), ["first message", "second message"]);
    assert_eq!(app_sessions(&gw).len(), 1, "{:?}", app_sessions(&gw));
}

#[tokio::test]
async fn the_model_the_app_picks_is_the_conversations_model() {
    let llm = ScriptedLlm::start().await;
    llm.set_handler(default_reply);
    let gw = Gateway::start(&llm.url(), ON, &[]).await;
    let mut chat = Chat::new();
    chat.say(&gw, "plain", "hello").await;
    let messages = {
        chat.messages
            .push(json!({ "role": "user", "content": "/model" }));
        Value::Array(chat.messages.clone()).to_string()
    };
    let listed = app(&["chat", &gw.base, TOKEN, "small", "plain", &messages]).await;
    let text = listed["text"].as_str().unwrap();
    assert!(
        text.contains("* small"),
        "the app's pick is this conversation's: {listed}"
    );
    assert!(text.contains("- default"), "{listed}");
    let session = session_with(&gw, "hello");
    // The next turn goes to the model picked (the scripted server names it in the request).
    let messages = {
        chat.messages
            .push(json!({ "role": "assistant", "content": text }));
        chat.messages
            .push(json!({ "role": "user", "content": "and now?" }));
        Value::Array(chat.messages.clone()).to_string()
    };
    let answer = app(&["chat", &gw.base, TOKEN, "small", "stream", &messages]).await;
    assert_eq!(answer["text"], "re: and now?", "{answer}");
    assert_eq!(app_sessions(&gw).len(), 1, "{:?}", app_sessions(&gw));
    assert_eq!(
        user_texts(&session),
        ["hello", "and now?"],
        "commands are not history"
    );
}

/// Runs `llm` with `args` and its configuration in `dir`; its standard output.
async fn llm_cli(dir: &Path, args: &[&str]) -> String {
    let output = Command::new(clients().join("llm"))
        .args(args)
        .env("LLM_USER_PATH", dir)
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "llm {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

#[tokio::test]
async fn the_llm_cli_is_a_front_end_whose_conversation_is_one_session() {
    let llm = ScriptedLlm::start().await;
    llm.set_handler(default_reply);
    let gw = Gateway::start(&llm.url(), ON, &[]).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("extra-openai-models.yaml"),
        format!(
            "- model_id: squidbot\n  model_name: default\n  api_base: {}/v1\n  api_key_name: squidbot\n",
            gw.base
        ),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("keys.json"),
        json!({ "squidbot": TOKEN }).to_string(),
    )
    .unwrap();
    let first = llm_cli(dir.path(), &["-m", "squidbot", "remember the number 42"]).await;
    assert_eq!(first, "re: remember the number 42");
    let second = llm_cli(dir.path(), &["-c", "--no-stream", "which number?"]).await;
    assert_eq!(second, "re: which number?");
    let other = llm_cli(dir.path(), &["-m", "squidbot", "a new conversation"]).await;
    assert_eq!(other, "re: a new conversation");
    let session = session_with(&gw, "remember the number 42");
    assert_eq!(
        user_texts(&session),
        ["remember the number 42", "which number?"]
    );
    assert_eq!(app_sessions(&gw).len(), 2, "{:?}", app_sessions(&gw));
}

#[tokio::test]
async fn a_budget_used_up_is_a_clear_error_and_usage_is_in_the_ledger_per_conversation() {
    let llm = ScriptedLlm::start().await;
    llm.report_usage();
    llm.set_handler(default_reply);
    let extra = format!("{ON}budgets:\n  daily_tokens: 20\n");
    let gw = Gateway::start(&llm.url(), &extra, &[]).await;
    let mut chat = Chat::new();
    let first = chat.say(&gw, "plain", "hello").await;
    assert_eq!(first["text"], "re: hello", "{first}");
    let calls = llm.request_count();
    for mode in ["plain", "stream"] {
        let mut again = Chat {
            messages: chat.messages.clone(),
        };
        let refused = again.say(&gw, mode, "again").await;
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("Stopped: the daily token budget is used up")
                && message.contains("budgets.daily_tokens"),
            "{mode}: {refused}"
        );
        if mode == "plain" {
            assert_eq!(refused["error"]["status"], 422, "not retried: {refused}");
        }
    }
    assert_eq!(llm.request_count(), calls, "no call after the budget");

    // The ledger has the conversation's call under its session.
    let session = session_with(&gw, "hello");
    let name = session.file_stem().unwrap().to_string_lossy().into_owned();
    let ledger: Vec<Value> = std::fs::read_dir(gw.home().join("usage"))
        .unwrap()
        .flat_map(|f| {
            std::fs::read_to_string(f.unwrap().path())
                .unwrap()
                .lines()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .map(|line| serde_json::from_str(&line).unwrap())
        .collect();
    let ours: Vec<&Value> = ledger
        .iter()
        .filter(|record| {
            record["session"]
                .as_str()
                .is_some_and(|s| s.starts_with("http:openai-"))
        })
        .collect();
    assert_eq!(ours.len(), 1, "{ledger:?} ({name})");
    assert!(ours[0]["prompt_tokens"].as_u64().unwrap() > 0, "{ours:?}");
}
