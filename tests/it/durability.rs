//! What reaches the disk before an answer leaves, seen from outside: the real gateway runs
//! under `strace -f -y`, and the order of its `fdatasync`s and its socket writes is read from
//! the trace, not from anything squidbot reports about itself.
//!
//! An HTTP message is acknowledged by its answer. So its turn flushes the session's history
//! once, after the reply's line and before the answer's first byte, which covers the user's
//! line written before the LLM call. A turn that fails without a reply (the LLM answers 500)
//! still flushes the user's line before the error answer goes out.

use std::path::Path;
use std::time::Duration;

use crate::harness::default_reply;
use crate::support::daemon::Gateway;
use crate::support::scripted_llm::{Reply, ScriptedLlm};

/// One `strace` line, as far as this test needs it.
#[derive(Debug, PartialEq)]
enum Event {
    /// The user's (`"role":"user"`) or the reply's line written to the session file.
    Line(&'static str),
    /// An `fdatasync` of the session file returned.
    Flushed,
    /// An HTTP answer (`HTTP/1.1 …`) started leaving through a socket.
    Answer,
}

/// The events of `trace` that concern the session file `history`, in the order they happened.
fn events(trace: &str, history: &Path) -> Vec<Event> {
    let file = format!("<{}>", history.display());
    let mut events = Vec::new();
    // With -f, a call interrupted by another thread's shows as `fdatasync(… <unfinished ...>`
    // and later `<... fdatasync resumed>) = 0`: a flush counts where it returned.
    let mut flushing = Vec::new();
    for line in trace.lines() {
        let Some((pid, call)) = line.split_once(' ') else {
            continue;
        };
        let call = call.trim_start();
        if call.starts_with("fdatasync(") && call.contains(&file) {
            if call.ends_with("<unfinished ...>") {
                flushing.push(pid.to_owned());
            } else {
                assert!(call.ends_with("= 0"), "a flush failed: {line}");
                events.push(Event::Flushed);
            }
        } else if call.starts_with("<... fdatasync resumed>") {
            if let Some(at) = flushing.iter().position(|p| p == pid) {
                flushing.remove(at);
                assert!(call.ends_with("= 0"), "a flush failed: {line}");
                events.push(Event::Flushed);
            }
        } else if call.starts_with("write(") && call.contains(&file) {
            events.push(Event::Line(if call.contains(r#"{\"role\":\"user\""#) {
                "user"
            } else {
                "assistant"
            }));
        } else if (call.starts_with("writev(")
            || call.starts_with("write(")
            || call.starts_with("sendto("))
            && call.contains("<socket:")
            && call.contains(r#""HTTP/1.1 "#)
        {
            // The answers before the session's first line are the readiness probes'.
            if !events.is_empty() {
                events.push(Event::Answer);
            }
        }
    }
    events
}

/// A process id killed when dropped.
struct Killed(String);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &self.0])
            .stderr(std::process::Stdio::null())
            .status();
    }
}

/// Runs `turns` under strace and returns the events of the session `alice`.
async fn traced(llm: &ScriptedLlm, turns: impl AsyncFnOnce(&Gateway)) -> Vec<Event> {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("strace.txt");
    let available = std::process::Command::new("strace")
        .args(["-o", "/dev/null", "true"])
        .status();
    assert!(
        available.is_ok_and(|s| s.success()),
        "strace is needed (scripts/test installs it) and must be allowed to trace"
    );
    let mut gw = Gateway::start_traced(&llm.url(), &trace).await;
    // The gateway is strace's child; strace 6.1 has no --kill-on-exit, so a test that fails
    // half way kills it here rather than leave it running.
    let strace = gw.child.id().unwrap();
    let children =
        std::fs::read_to_string(format!("/proc/{strace}/task/{strace}/children")).unwrap();
    let gateway = Killed(children.split_whitespace().next().unwrap().to_owned());
    turns(&gw).await;
    // SIGTERM to the gateway itself: it drains and exits, and strace with it, having written
    // the whole trace.
    let signalled = std::process::Command::new("kill")
        .args(["-TERM", &gateway.0])
        .status()
        .unwrap();
    assert!(signalled.success());
    tokio::time::timeout(Duration::from_secs(15), gw.child.wait())
        .await
        .expect("the gateway exits within 15 s of SIGTERM")
        .unwrap();
    let text = std::fs::read_to_string(&trace).unwrap();
    events(&text, &gw.session_file("alice"))
}

#[tokio::test]
async fn an_answered_turn_flushes_its_history_once_before_the_answer() {
    let llm = ScriptedLlm::start().await;
    llm.set_handler(default_reply);
    let events = traced(&llm, async |gw: &Gateway| {
        for text in ["first", "second", "third"] {
            let (status, body) = gw.say("alice", text).await;
            assert_eq!(status, 200, "{body}");
        }
    })
    .await;
    use Event::*;
    assert_eq!(
        events,
        [
            // The first line creates the file, which is flushed at once with its directory.
            Line("user"),
            Flushed,
            Line("assistant"),
            Flushed,
            Answer,
            // Every later turn: one flush, after the reply's line and before the answer.
            Line("user"),
            Line("assistant"),
            Flushed,
            Answer,
            Line("user"),
            Line("assistant"),
            Flushed,
            Answer,
        ]
    );
}

#[tokio::test]
async fn a_failed_turn_flushes_the_message_before_the_error_answer() {
    let llm = ScriptedLlm::start().await;
    llm.set_handler(default_reply);
    let events = traced(&llm, async |gw: &Gateway| {
        let (status, _) = gw.say("alice", "first").await;
        assert_eq!(status, 200);
        llm.enqueue(Reply::Status {
            status: 500,
            body: "provider down".into(),
            retry_after: None,
        });
        let (status, body) = gw.say("alice", "second").await;
        assert_ne!(status, 200, "{body}");
    })
    .await;
    use Event::*;
    assert_eq!(&events[5..], [Line("user"), Flushed, Answer], "{events:?}");
}
