//! The interactive `squidbot agent` through pipes, as a user or a script drives it: the reply
//! streams while the model is still writing it, Ctrl-C (SIGINT) during a turn cancels the turn
//! and the REPL goes on with a well-formed history, and Ctrl-D or Ctrl-C at the prompt leave
//! with exit 0. The REPL writes its prompt to stderr when stdin is not a terminal, which tells
//! the test when it is waiting for input.

use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use squidbot::core::agent_loop::CANCELLED_NOTE;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin};
use tokio::sync::{Notify, watch};

use crate::harness::default_reply;
use crate::support::bin::{send_signal, spawn_piped, squidbot};
use crate::support::home::Home;
use crate::support::scripted_llm::{Reply, ScriptedLlm};

/// How long any one expected output may take; a bound, never what a test measures.
const PATIENCE: Duration = Duration::from_secs(30);

/// A running `squidbot agent` with its stdout and stderr collected as they arrive.
struct Repl {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: watch::Receiver<String>,
    stderr: watch::Receiver<String>,
}

impl Repl {
    fn start(home: &Home) -> Self {
        let mut child = spawn_piped(squidbot(home.path()).arg("agent"));
        let stdin = child.stdin.take();
        let stdout = collect(child.stdout.take().unwrap());
        let stderr = collect(child.stderr.take().unwrap());
        Self {
            child,
            stdin,
            stdout,
            stderr,
        }
    }

    async fn type_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        stdin.flush().await.unwrap();
    }

    /// Waits until stdout contains `needle`; fails with what was seen when it does not.
    async fn stdout_shows(&mut self, needle: &str) {
        let seen = wait_for(&mut self.stdout, |text| text.contains(needle)).await;
        assert!(
            seen,
            "stdout never showed {needle:?}:\n{}\nstderr:\n{}",
            *self.stdout.borrow(),
            *self.stderr.borrow()
        );
    }

    /// Waits until the REPL has shown its prompt `n` times in all.
    async fn prompted(&mut self, n: usize) {
        let seen = wait_for(&mut self.stderr, |text| text.matches("You: ").count() >= n).await;
        assert!(
            seen,
            "no prompt #{n}; stdout:\n{}\nstderr:\n{}",
            *self.stdout.borrow(),
            *self.stderr.borrow()
        );
    }

    /// Sends SIGINT, as Ctrl-C in a terminal does.
    fn interrupt(&self) {
        send_signal(&self.child, "INT");
    }

    async fn exit_status(&mut self) -> ExitStatus {
        tokio::time::timeout(PATIENCE, self.child.wait())
            .await
            .expect("the REPL exits")
            .unwrap()
    }
}

/// A REPL on a fresh home talking to `llm`, asked `question` at its first prompt.
async fn asked(llm: &ScriptedLlm, question: &str) -> (Home, Repl) {
    let home = Home::new();
    home.write_config(&llm.url(), "");
    let mut repl = Repl::start(&home);
    repl.prompted(1).await;
    repl.type_line(question).await;
    (home, repl)
}

/// Collects a pipe's text into a watch channel, which closes when the pipe does.
fn collect(mut pipe: impl AsyncRead + Unpin + Send + 'static) -> watch::Receiver<String> {
    let (text, receiver) = watch::channel(String::new());
    tokio::spawn(async move {
        let mut buffer = [0u8; 4096];
        while let Ok(n @ 1..) = pipe.read(&mut buffer).await {
            text.send_modify(|text| text.push_str(&String::from_utf8_lossy(&buffer[..n])));
        }
    });
    receiver
}

/// Whether `text` came to satisfy `done` before the pipe closed and within [`PATIENCE`].
async fn wait_for(text: &mut watch::Receiver<String>, done: impl FnMut(&String) -> bool) -> bool {
    matches!(
        tokio::time::timeout(PATIENCE, text.wait_for(done)).await,
        Ok(Ok(_))
    )
}

/// The session's history as (role, content) pairs.
fn history(home: &Home) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(home.path().join("sessions/cli_3Alocal.jsonl")).unwrap();
    text.lines()
        .map(|line| role_and_content(&serde_json::from_str(line).unwrap()))
        .collect()
}

/// A history record's or a request message's role and text.
fn role_and_content(message: &Value) -> (String, String) {
    let field = |name: &str| message[name].as_str().unwrap_or_default().to_owned();
    (field("role"), field("content"))
}

fn pair(role: &str, content: &str) -> (String, String) {
    (role.to_owned(), content.to_owned())
}

// See: #15
#[tokio::test]
async fn issue_15_the_reply_streams_before_the_model_finished_it_and_ctrl_d_leaves() {
    let llm = ScriptedLlm::start().await;
    let gate = Arc::new(Notify::new());
    llm.enqueue(Reply::Hold {
        text: "Hello, ".into(),
        gate: gate.clone(),
        rest: "world.".into(),
    });
    let (home, mut repl) = asked(&llm, "hello").await;

    // The model's stream stays open until the test saw its first part on stdout.
    repl.stdout_shows("Hello, ").await;
    assert!(!repl.stdout.borrow().contains("world"));
    gate.notify_one();
    repl.stdout_shows("Hello, world.\n").await;
    repl.prompted(2).await;

    // Ctrl-D: end of input.
    drop(repl.stdin.take());
    let status = repl.exit_status().await;
    assert_eq!(status.code(), Some(0), "{:?}", *repl.stderr.borrow());
    assert_eq!(
        history(&home),
        [pair("user", "hello"), pair("assistant", "Hello, world.")]
    );
}

// See: #15
#[tokio::test]
async fn issue_15_ctrl_c_cancels_the_turn_the_repl_goes_on_and_ctrl_c_at_the_prompt_leaves() {
    let llm = ScriptedLlm::start().await;
    // A model that starts answering and then never finishes.
    llm.enqueue(Reply::Hold {
        text: "Let me think".into(),
        gate: Arc::new(Notify::new()),
        rest: String::new(),
    });
    llm.enqueue(Reply::Text("Second answer.".into()));
    let (home, mut repl) = asked(&llm, "first question").await;
    repl.stdout_shows("Let me think").await;

    repl.interrupt();
    repl.stdout_shows("[cancelled]").await;
    repl.prompted(2).await;
    assert_eq!(
        history(&home),
        [
            pair("user", "first question"),
            pair("assistant", CANCELLED_NOTE)
        ],
        "the cancellation is recorded as the turn's answer"
    );

    repl.type_line("second question").await;
    repl.stdout_shows("Second answer.\n").await;
    repl.prompted(3).await;
    // The next prompt alternates user and assistant: the cancelled question is answered by
    // the note.
    let requests = llm.requests();
    let messages = requests[1]["messages"].as_array().unwrap();
    let tail: Vec<(String, String)> = messages[messages.len() - 3..]
        .iter()
        .map(role_and_content)
        .collect();
    assert_eq!(
        tail,
        [
            pair("user", "first question"),
            pair("assistant", CANCELLED_NOTE),
            pair("user", "second question")
        ]
    );

    // Ctrl-C at the prompt leaves, with success.
    repl.interrupt();
    let status = repl.exit_status().await;
    assert_eq!(status.code(), Some(0), "{:?}", *repl.stderr.borrow());
    assert_eq!(history(&home).len(), 4);
}

// See: #15 (item 10: chat commands on every channel)
#[tokio::test]
async fn chat_commands_are_answered_at_the_terminal_without_the_llm() {
    let llm = ScriptedLlm::start().await;
    llm.set_handler(default_reply);
    let (home, mut repl) = asked(&llm, "/help").await;
    repl.stdout_shows("/status (model").await;
    repl.prompted(2).await;
    repl.type_line("/status").await;
    repl.stdout_shows("model: default: small (scripted-model) · conversation: 0 messages")
        .await;
    repl.prompted(3).await;
    repl.type_line("/stop").await;
    repl.stdout_shows("Nothing to stop").await;
    repl.prompted(4).await;
    drop(repl.stdin.take());
    assert_eq!(repl.exit_status().await.code(), Some(0));
    assert_eq!(llm.request_count(), 0, "commands never reach the LLM");
    assert!(!home.path().join("sessions/cli_3Alocal.jsonl").exists());
}

#[tokio::test]
async fn model_and_new_steer_the_terminal_conversation_and_last_past_the_repl() {
    let llm = ScriptedLlm::start().await;
    llm.set_handler(default_reply);
    let home = Home::new();
    home.write_config(&llm.url(), "");
    // A second model, written where the first is.
    let config = std::fs::read_to_string(home.config()).unwrap().replace(
        "  pools:\n",
        "    big:\n      provider: local\n      model: big-model\n  pools:\n",
    );
    std::fs::write(home.config(), config).unwrap();
    let mut repl = Repl::start(&home);
    repl.prompted(1).await;
    repl.type_line("/model big").await;
    repl.stdout_shows("This conversation now uses big (model: big-model).")
        .await;
    repl.prompted(2).await;
    repl.type_line("my fruit is the kumquat").await;
    repl.stdout_shows("re: my fruit is the kumquat").await;
    assert_eq!(llm.requests()[0]["model"], "big-model");
    repl.prompted(3).await;
    repl.type_line("/new").await;
    repl.stdout_shows("stays in the history as cli:local").await;
    repl.prompted(4).await;
    repl.type_line("what is my fruit?").await;
    repl.stdout_shows("re: what is my fruit?").await;
    repl.prompted(5).await;
    drop(repl.stdin.take());
    assert_eq!(repl.exit_status().await.code(), Some(0));

    let request = &llm.requests()[1];
    assert!(
        !request["messages"].to_string().contains("kumquat"),
        "{request}"
    );
    assert_eq!(request["model"], "big-model", "/new keeps the model");
    assert_eq!(history(&home).len(), 2, "the old session is untouched");
    let fresh = home.path().join("sessions/cli_3Alocal_232.jsonl");
    assert_eq!(std::fs::read_to_string(&fresh).unwrap().lines().count(), 2);

    // A later `agent -m` goes on in the new session, with the model picked.
    let output = home.run(&["agent", "-m", "one more"]).await;
    assert!(output.status.success());
    assert_eq!(std::fs::read_to_string(&fresh).unwrap().lines().count(), 4);
    assert_eq!(llm.requests()[2]["model"], "big-model");
    let output = home.run(&["agent", "-m", "/model default"]).await;
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "This conversation is back on the default, default.\n"
    );
    assert_eq!(llm.request_count(), 3, "commands never reach the LLM");

    // `/usage` counts this conversation's two calls; `/compact` has too little to summarize.
    let output = home.run(&["agent", "-m", "/usage"]).await;
    let usage = String::from_utf8_lossy(&output.stdout);
    assert!(
        usage.starts_with("this conversation (this month and the last): 2 calls,")
            && usage.contains("today, all conversations: 3 calls,"),
        "{usage}"
    );
    let output = home.run(&["agent", "-m", "/compact"]).await;
    let compact = String::from_utf8_lossy(&output.stdout);
    assert!(
        compact.starts_with("Nothing to summarize: 4 messages"),
        "{compact}"
    );
    assert_eq!(llm.request_count(), 3, "commands never reach the LLM");
}

/// One shell call as the model's whole round.
fn shell_call(command: &str) -> Reply {
    Reply::ToolCalls {
        text: String::new(),
        calls: vec![(
            "c0".into(),
            "shell".into(),
            serde_json::json!({ "command": command }).to_string(),
        )],
    }
}

// See: #16 (item 2: the terminal asks y/N)
#[tokio::test]
async fn the_terminal_asks_before_a_risky_command_and_only_y_runs_it() {
    let llm = ScriptedLlm::start().await;
    llm.enqueue(shell_call("touch yes.txt"));
    llm.enqueue(Reply::Text("Made it.".into()));
    llm.enqueue(shell_call("touch no.txt"));
    llm.enqueue(Reply::Text("Did not.".into()));
    let (home, mut repl) = asked(&llm, "make yes.txt").await;
    let workspace = home.path().join("workspace");

    let seen = wait_for(&mut repl.stderr, |text| {
        text.contains("Run it once? [y/N] ")
    })
    .await;
    assert!(seen, "no y/N prompt:\n{}", *repl.stdout.borrow());
    repl.stdout_shows("touch yes.txt").await;
    assert!(!workspace.join("yes.txt").exists(), "ran before the answer");
    repl.type_line("y").await;
    repl.stdout_shows("Made it.").await;
    assert!(workspace.join("yes.txt").exists());
    repl.prompted(2).await;

    repl.type_line("make no.txt").await;
    let seen = wait_for(&mut repl.stderr, |text| {
        text.matches("Run it once? [y/N] ").count() == 2
    })
    .await;
    assert!(seen, "no second y/N prompt");
    repl.type_line("").await;
    repl.stdout_shows("Did not.").await;
    assert!(!workspace.join("no.txt").exists());
    let refused = role_and_content(
        llm.requests()[3]["messages"]
            .as_array()
            .unwrap()
            .last()
            .unwrap(),
    );
    assert!(refused.1.contains("the owner refused"), "{refused:?}");
    repl.prompted(3).await;
    drop(repl.stdin.take());
    assert_eq!(repl.exit_status().await.code(), Some(0));
}

/// #23 item 5: at the terminal a carriage return, an escape sequence or a bidi override in
/// the command would let its visible end hide its start (`touch evil.txt\rls -la` shows as
/// `ls -la`); the question shows them as escapes, so the owner reads what would run.
#[tokio::test]
async fn the_terminal_question_shows_control_characters_as_escapes() {
    let llm = ScriptedLlm::start().await;
    llm.enqueue(shell_call("touch evil.txt\rls -la \u{1b}[2K\u{202e}txt"));
    llm.enqueue(Reply::Text("Refused.".into()));
    let (home, mut repl) = asked(&llm, "look around").await;
    let seen = wait_for(&mut repl.stderr, |text| {
        text.contains("Run it once? [y/N] ")
    })
    .await;
    assert!(seen, "no y/N prompt:\n{}", *repl.stdout.borrow());
    repl.stdout_shows("touch evil.txt\\rls -la \\x1b[2K\\u{202e}txt")
        .await;
    let shown = repl.stdout.borrow().clone();
    for raw in ['\r', '\u{1b}', '\u{202e}'] {
        assert!(
            !shown.contains(raw),
            "{raw:?} reached the terminal raw:\n{shown:?}"
        );
    }
    repl.type_line("n").await;
    repl.stdout_shows("Refused.").await;
    assert!(!home.path().join("workspace/evil.txt").exists());
    drop(repl.stdin.take());
    assert_eq!(repl.exit_status().await.code(), Some(0));
}
